#include "discover/elf_symbols.h"

#include <gelf.h>

#include <algorithm>
#include <cstring>

#include "elf/elf_file.h"

namespace gw {

namespace {

constexpr unsigned char kEndbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};

}  // namespace

StatusOr<ElfSymbolTable> ElfSymbolTable::Load(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<ElfFile> file, ElfFile::Open(path));
  if (!file->FileBytes(0, 0)) return DataLoss("read ELF file " + path + ": " + elf_errmsg(-1));

  ElfSymbolTable table;
  table.path_ = path;
  bool has_tables = file->ForEachSymbol([&](const ElfSymbolEntry& sym) {
    if (sym.type != STT_FUNC) return;
    ElfSymbol s;
    s.name = std::string(sym.name);
    s.address = sym.address;
    s.size = sym.size;
    s.from_dynsym = sym.from_dynsym;
    // .symtab may spell versions into the name ("f@@V", "f@V").
    if (size_t at = s.name.find('@'); at != std::string::npos) {
      bool dflt = s.name.compare(at, 2, "@@") == 0;
      s.version = s.name.substr(at + (dflt ? 2 : 1));
      s.default_version = dflt;
      s.name.resize(at);
    }
    if (sym.version_index >= 0) {
      s.default_version = !sym.version_hidden;
      if (!sym.version.empty()) s.version = std::string(sym.version);
    }
    bool mapped = false;
    for (const ElfSegment& seg : file->segments()) {
      if (seg.executable && s.address >= seg.vaddr && s.address < seg.vaddr + seg.filesz) {
        s.file_offset = s.address - seg.vaddr + seg.offset;
        mapped = true;
        break;
      }
    }
    if (!mapped) return;  // not in an executable loaded segment: cannot be probed
    if (std::optional<std::string_view> first = file->FileBytes(s.file_offset, sizeof kEndbr64)) {
      s.starts_with_endbr64 = std::memcmp(first->data(), kEndbr64, sizeof kEndbr64) == 0;
    }
    table.symbols_.push_back(std::move(s));
  });
  if (!has_tables) return NotFound("ELF file " + path + " has no symbol table");

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
