#include "discover/elf_symbols.h"

#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>

#include <algorithm>
#include <cstring>

#include "base/scoped.h"

namespace gw {

namespace {

void EndElf(Elf* elf) { elf_end(elf); }
using ScopedElf = ScopedResource<Elf*, EndElf, nullptr>;

constexpr unsigned char kEndbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};

struct LoadSegment {
  uint64_t vaddr = 0;
  uint64_t filesz = 0;
  uint64_t offset = 0;
};

// Version index → name, from SHT_GNU_verdef.
std::unordered_map<uint16_t, std::string> ReadVersionDefinitions(Elf* elf, Elf_Scn* scn,
                                                                 size_t strtab) {
  std::unordered_map<uint16_t, std::string> names;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr) return names;
  size_t offset = 0;
  // Each verdef is followed (vd_aux bytes later) by its aux entries; the first aux names it.
  for (int guard = 0; guard < 65536 && offset + sizeof(GElf_Verdef) <= data->d_size; ++guard) {
    GElf_Verdef def;
    if (gelf_getverdef(data, static_cast<int>(offset), &def) == nullptr) break;
    GElf_Verdaux aux;
    if (def.vd_cnt > 0 &&
        gelf_getverdaux(data, static_cast<int>(offset + def.vd_aux), &aux) != nullptr) {
      const char* name = elf_strptr(elf, strtab, aux.vda_name);
      if (name != nullptr) names[def.vd_ndx] = name;
    }
    if (def.vd_next == 0) break;
    offset += def.vd_next;
  }
  return names;
}

}  // namespace

StatusOr<ElfSymbolTable> ElfSymbolTable::Load(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Internal("libelf: version mismatch");
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open ELF file " + path, errno);
  ScopedElf elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) {
    return DataLoss("read ELF file " + path + ": not an ELF object (" + elf_errmsg(-1) + ")");
  }
  size_t file_size = 0;
  const char* image = elf_rawfile(elf.get(), &file_size);
  if (image == nullptr) return DataLoss("read ELF file " + path + ": " + elf_errmsg(-1));

  std::vector<LoadSegment> segments;
  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) != 0) {
    return DataLoss("read program headers of " + path + ": " + elf_errmsg(-1));
  }
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type != PT_LOAD || (phdr.p_flags & PF_X) == 0) continue;
    segments.push_back({phdr.p_vaddr, phdr.p_filesz, phdr.p_offset});
  }

  // Find the symbol tables and the version sections that go with .dynsym.
  Elf_Scn* dynsym = nullptr;
  Elf_Scn* symtab = nullptr;
  Elf_Scn* versym = nullptr;
  Elf_Scn* verdef = nullptr;
  size_t verdef_strtab = 0;
  for (Elf_Scn* scn = elf_nextscn(elf.get(), nullptr); scn != nullptr;
       scn = elf_nextscn(elf.get(), scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    switch (shdr.sh_type) {
      case SHT_DYNSYM: dynsym = scn; break;
      case SHT_SYMTAB: symtab = scn; break;
      case SHT_GNU_versym: versym = scn; break;
      case SHT_GNU_verdef:
        verdef = scn;
        verdef_strtab = shdr.sh_link;
        break;
      default: break;
    }
  }
  if (dynsym == nullptr && symtab == nullptr) {
    return NotFound("ELF file " + path + " has no symbol table");
  }
  std::unordered_map<uint16_t, std::string> versions;
  if (verdef != nullptr) versions = ReadVersionDefinitions(elf.get(), verdef, verdef_strtab);
  Elf_Data* versym_data = versym != nullptr ? elf_getdata(versym, nullptr) : nullptr;

  ElfSymbolTable table;
  table.path_ = path;
  auto add_from = [&](Elf_Scn* scn, bool is_dynsym) {
    GElf_Shdr shdr;
    if (scn == nullptr || gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_entsize == 0) return;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr) return;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF ||
          sym.st_value == 0) {
        continue;
      }
      const char* raw_name = elf_strptr(elf.get(), shdr.sh_link, sym.st_name);
      if (raw_name == nullptr || raw_name[0] == '\0') continue;
      ElfSymbol s;
      s.name = raw_name;
      s.address = sym.st_value;
      s.size = sym.st_size;
      s.from_dynsym = is_dynsym;
      // .symtab may spell versions into the name ("f@@V", "f@V").
      if (size_t at = s.name.find('@'); at != std::string::npos) {
        bool dflt = s.name.compare(at, 2, "@@") == 0;
        s.version = s.name.substr(at + (dflt ? 2 : 1));
        s.default_version = dflt;
        s.name.resize(at);
      }
      if (is_dynsym && versym_data != nullptr &&
          (i + 1) * sizeof(GElf_Versym) <= versym_data->d_size) {
        GElf_Versym ver;
        if (gelf_getversym(versym_data, static_cast<int>(i), &ver) != nullptr) {
          uint16_t index = ver & 0x7fff;
          s.default_version = (ver & 0x8000) == 0;
          if (index > 1) {
            auto it = versions.find(index);
            if (it != versions.end()) s.version = it->second;
          }
        }
      }
      bool mapped = false;
      for (const LoadSegment& seg : segments) {
        if (s.address >= seg.vaddr && s.address < seg.vaddr + seg.filesz) {
          s.file_offset = s.address - seg.vaddr + seg.offset;
          mapped = true;
          break;
        }
      }
      if (!mapped) continue;  // not in an executable loaded segment: cannot be probed
      if (s.file_offset + sizeof kEndbr64 <= file_size) {
        s.starts_with_endbr64 =
            std::memcmp(image + s.file_offset, kEndbr64, sizeof kEndbr64) == 0;
      }
      table.symbols_.push_back(std::move(s));
    }
  };
  add_from(dynsym, true);
  add_from(symtab, false);

  for (size_t i = 0; i < table.symbols_.size(); ++i) {
    table.by_name_[table.symbols_[i].name].push_back(i);
  }
  // Best candidate first: exported default version, then exported, then .symtab.
  for (auto& [name, indices] : table.by_name_) {
    std::stable_sort(indices.begin(), indices.end(), [&](size_t a, size_t b) {
      const ElfSymbol& x = table.symbols_[a];
      const ElfSymbol& y = table.symbols_[b];
      int rx = (x.from_dynsym ? 2 : 0) + (x.default_version ? 1 : 0);
      int ry = (y.from_dynsym ? 2 : 0) + (y.default_version ? 1 : 0);
      return rx > ry;
    });
  }
  return table;
}

const ElfSymbol* ElfSymbolTable::Find(std::string_view name) const {
  size_t at = name.find('@');
  std::string base(name.substr(0, at));
  auto it = by_name_.find(base);
  if (it == by_name_.end()) return nullptr;
  if (at == std::string_view::npos) return &symbols_[it->second.front()];
  bool want_default = name.compare(at, 2, "@@") == 0;
  std::string_view version = name.substr(at + (want_default ? 2 : 1));
  for (size_t index : it->second) {
    const ElfSymbol& s = symbols_[index];
    if (s.version == version && (!want_default || s.default_version)) return &s;
  }
  return nullptr;
}

}  // namespace gw
