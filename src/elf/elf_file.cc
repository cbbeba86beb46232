#include "elf/elf_file.h"

#include <elfutils/libdw.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <unordered_map>

#include "base/scoped.h"

namespace gw {

namespace {

void EndElfHandle(Elf* elf) { elf_end(elf); }
using ScopedElf = ScopedResource<Elf*, EndElfHandle, nullptr>;

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

// The sections the symbol readers use: the two symbol tables and .dynsym's version sections.
struct SymbolSections {
  Elf_Scn* dynsym = nullptr;
  Elf_Scn* symtab = nullptr;
  Elf_Scn* versym = nullptr;
  Elf_Scn* verdef = nullptr;
  size_t verdef_strtab = 0;
};

SymbolSections FindSymbolSections(Elf* elf) {
  SymbolSections out;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr) continue;
    switch (shdr.sh_type) {
      case SHT_DYNSYM:
        if (out.dynsym == nullptr) out.dynsym = scn;
        break;
      case SHT_SYMTAB:
        if (out.symtab == nullptr) out.symtab = scn;
        break;
      case SHT_GNU_versym:
        out.versym = scn;
        break;
      case SHT_GNU_verdef:
        out.verdef = scn;
        out.verdef_strtab = shdr.sh_link;
        break;
      default:
        break;
    }
  }
  return out;
}

// Calls visit(index, symbol, string table section) for each defined symbol of `scn`
// (st_shndx != SHN_UNDEF, st_value != 0), in table order. Entries past the section's data are
// not read.
template <typename Visit>
void WalkDefinedSymbols(Elf_Scn* scn, Visit&& visit) {
  GElf_Shdr shdr;
  if (scn == nullptr || gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_entsize == 0) return;
  Elf_Data* data = elf_getdata(scn, nullptr);
  if (data == nullptr) return;
  size_t count = std::min<size_t>(shdr.sh_size, data->d_size) / shdr.sh_entsize;
  for (size_t i = 0; i < count; ++i) {
    GElf_Sym sym;
    if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
    if (sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
    visit(i, sym, static_cast<size_t>(shdr.sh_link));
  }
}

}  // namespace

StatusOr<std::unique_ptr<ElfFile>> ElfFile::Open(const std::string& path) {
  if (elf_version(EV_CURRENT) == EV_NONE) return Internal("libelf: version mismatch");
  ScopedFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return ErrnoStatus("open ELF file " + path, errno);
  ScopedElf elf(elf_begin(fd.get(), ELF_C_READ_MMAP, nullptr));
  if (!elf || elf_kind(elf.get()) != ELF_K_ELF) {
    return DataLoss("read ELF file " + path + ": not an ELF object (" + elf_errmsg(-1) + ")");
  }
  std::unique_ptr<ElfFile> file(new ElfFile());
  file->path_ = path;

  size_t phnum = 0;
  if (elf_getphdrnum(elf.get(), &phnum) != 0) {
    return DataLoss("read program headers of " + path + ": " + elf_errmsg(-1));
  }
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf.get(), static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type != PT_LOAD) continue;
    file->segments_.push_back(
        {phdr.p_vaddr, phdr.p_memsz, phdr.p_offset, phdr.p_filesz, (phdr.p_flags & PF_X) != 0});
  }
  file->elf_.Reset(elf.Release());

  // Function symbols of both tables (.dynsym first), by address, without reading their names
  // (see ElfFunction).
  SymbolSections sections = FindSymbolSections(file->elf_.get());
  for (Elf_Scn* table : {sections.dynsym, sections.symtab}) {
    WalkDefinedSymbols(table, [&](size_t, const GElf_Sym& sym, size_t strtab) {
      int type = GELF_ST_TYPE(sym.st_info);
      if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_name == 0) return;
      file->functions_.push_back(
          {sym.st_value, sym.st_size, sym.st_name, static_cast<uint32_t>(strtab)});
    });
  }
  // One function per address: a sized symbol before an unsized one; among equals the first in
  // table order (.dynsym's plain name before .symtab's versioned spelling).
  std::stable_sort(file->functions_.begin(), file->functions_.end(),
                   [](const ElfFunction& a, const ElfFunction& b) {
                     if (a.address != b.address) return a.address < b.address;
                     return (a.size != 0) > (b.size != 0);
                   });
  file->functions_.erase(std::unique(file->functions_.begin(), file->functions_.end(),
                                     [](const ElfFunction& a, const ElfFunction& b) {
                                       return a.address == b.address;
                                     }),
                         file->functions_.end());
  file->functions_.shrink_to_fit();

  Dwarf* dwarf = dwarf_begin_elf(file->elf_.get(), DWARF_C_READ, nullptr);  // nullptr: no DWARF
  file->fd_ = std::move(fd);
  file->dwarf_.Reset(dwarf);
  return file;
}

bool ElfFile::ForEachSymbol(const std::function<void(const ElfSymbolEntry&)>& visit) const {
  Elf* elf = elf_.get();
  SymbolSections sections = FindSymbolSections(elf);
  std::unordered_map<uint16_t, std::string> versions;
  if (sections.verdef != nullptr) {
    versions = ReadVersionDefinitions(elf, sections.verdef, sections.verdef_strtab);
  }
  Elf_Data* versym_data =
      sections.versym != nullptr ? elf_getdata(sections.versym, nullptr) : nullptr;

  auto walk = [&](Elf_Scn* scn, bool is_dynsym) {
    WalkDefinedSymbols(scn, [&](size_t i, const GElf_Sym& sym, size_t strtab) {
      const char* name = elf_strptr(elf, strtab, sym.st_name);
      if (name == nullptr || *name == '\0') return;
      ElfSymbolEntry e;
      e.name = name;
      e.address = sym.st_value;
      e.size = sym.st_size;
      e.type = GELF_ST_TYPE(sym.st_info);
      e.from_dynsym = is_dynsym;
      if (is_dynsym && versym_data != nullptr &&
          (i + 1) * sizeof(GElf_Versym) <= versym_data->d_size) {
        GElf_Versym ver;
        if (gelf_getversym(versym_data, static_cast<int>(i), &ver) != nullptr) {
          e.version_index = ver & 0x7fff;
          e.version_hidden = (ver & 0x8000) != 0;
          if (e.version_index > 1) {
            auto it = versions.find(static_cast<uint16_t>(e.version_index));
            if (it != versions.end()) e.version = it->second;
          }
        }
      }
      visit(e);
    });
  };
  walk(sections.dynsym, true);
  walk(sections.symtab, false);
  return sections.dynsym != nullptr || sections.symtab != nullptr;
}

std::optional<std::string_view> ElfFile::FileBytes(uint64_t offset, size_t size) const {
  size_t file_size = 0;
  const char* image = elf_rawfile(elf_.get(), &file_size);
  if (image == nullptr || offset > file_size || size > file_size - offset) return std::nullopt;
  return std::string_view(image + offset, size);
}

std::optional<uint64_t> ElfFile::FileOffsetToAddress(uint64_t file_offset) const {
  for (const ElfSegment& s : segments_) {
    if (file_offset >= s.offset && file_offset < s.offset + s.filesz) {
      return s.vaddr + (file_offset - s.offset);
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> ElfFile::AddressToFileOffset(uint64_t address) const {
  for (const ElfSegment& s : segments_) {
    if (address >= s.vaddr && address < s.vaddr + s.memsz) return s.offset + (address - s.vaddr);
  }
  return std::nullopt;
}

const ElfFunction* ElfFile::FindFunction(uint64_t address) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), address,
                             [](uint64_t a, const ElfFunction& f) { return a < f.address; });
  if (it == functions_.begin()) return nullptr;
  --it;
  if (it->size != 0 && address >= it->address + it->size) return nullptr;
  return &*it;
}

std::string_view ElfFile::FunctionName(const ElfFunction& function) const {
  const char* name = elf_strptr(elf_.get(), function.strtab, function.name);
  return name == nullptr ? std::string_view() : std::string_view(name);
}

std::optional<uint64_t> ElfFile::SymbolAddress(std::string_view name) const {
  if (!symbols_built_) {
    symbols_built_ = true;
    ForEachSymbol([&](const ElfSymbolEntry& sym) {
      if (sym.type == STT_FUNC || sym.type == STT_OBJECT || sym.type == STT_GNU_IFUNC) {
        symbols_.emplace_back(sym.name, sym.address);
      }
    });
    std::sort(symbols_.begin(), symbols_.end());
  }
  auto it = std::lower_bound(symbols_.begin(), symbols_.end(), name,
                             [](const std::pair<std::string_view, uint64_t>& s,
                                std::string_view n) { return s.first < n; });
  if (it == symbols_.end() || it->first != name) return std::nullopt;
  return it->second;
}

std::optional<uint64_t> ElfFile::FunctionFileOffset(std::string_view name) const {
  std::optional<uint64_t> address = SymbolAddress(name);
  if (!address) return std::nullopt;
  return AddressToFileOffset(*address);
}

std::optional<SourceLine> ElfFile::FindLine(uint64_t address) {
  if (!dwarf_) return std::nullopt;
  Dwarf_Die cu;
  if (dwarf_addrdie(dwarf_.get(), address, &cu) == nullptr) return std::nullopt;
  Dwarf_Line* line = dwarf_getsrc_die(&cu, address);
  if (line == nullptr) return std::nullopt;
  int lineno = 0;
  if (dwarf_lineno(line, &lineno) != 0 || lineno <= 0) return std::nullopt;
  const char* src = dwarf_linesrc(line, nullptr, nullptr);
  if (src == nullptr) return std::nullopt;
  return SourceLine{src, lineno};
}

std::optional<std::string> ElfFile::ReadAddress(uint64_t address, size_t size) const {
  size_t file_size = 0;
  const char* image = elf_rawfile(elf_.get(), &file_size);
  if (image == nullptr) return std::nullopt;
  // The headers are the file's word: every sum is checked before it is used (a segment at
  // offset 2^64 - 8 made `offset + size` wrap and the read land outside the mapping).
  for (const ElfSegment& s : segments_) {
    if (address < s.vaddr || address - s.vaddr >= s.filesz) continue;
    uint64_t in_segment = address - s.vaddr;
    if (size > s.filesz - in_segment) return std::nullopt;  // runs past the initialized data
    if (s.offset > file_size || in_segment > file_size - s.offset) return std::nullopt;
    uint64_t off = s.offset + in_segment;
    if (size > file_size - off) return std::nullopt;
    return std::string(image + off, size);
  }
  return std::nullopt;
}

std::string ElfFile::LibrarySearchPath() const {
  std::string runpath, rpath;
  Elf* elf = elf_.get();
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_DYNAMIC) continue;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || shdr.sh_entsize == 0) continue;
    size_t n = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 0; i < n; ++i) {
      GElf_Dyn dyn;
      if (gelf_getdyn(data, static_cast<int>(i), &dyn) == nullptr) break;
      if (dyn.d_tag != DT_RUNPATH && dyn.d_tag != DT_RPATH) continue;
      const char* text = elf_strptr(elf, shdr.sh_link, dyn.d_un.d_val);
      if (text == nullptr) continue;
      (dyn.d_tag == DT_RUNPATH ? runpath : rpath) = text;
    }
  }
  return runpath.empty() ? rpath : runpath;
}

}  // namespace gw
