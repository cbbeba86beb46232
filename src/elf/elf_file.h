// The one ELF reader: a file opened once (libelf), its PT_LOAD segments, every defined symbol of
// .dynsym and .symtab with its GNU version, function symbols by address, any symbol by name
// (e.g. _PyRuntime), PT_LOAD mapping between file offsets and virtual addresses, initialized
// data, and DWARF line info (elfutils libdw) when the file carries .debug_line. Symbolization
// (src/symbolize) and uprobe placement (discover/elf_symbols.h) both read ELF files through it.
//
// Not thread-safe: libdw handles are used from one thread (the symbolizer's).
#pragma once

#include <elfutils/libdw.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/scoped.h"
#include "base/status.h"

namespace gw {

// A function symbol, 24 bytes: its name stays in the file's string table (read through
// ElfFile::FunctionName only for the functions a lookup lands on), so indexing a library with a
// million symbols (libtorch) neither copies nor touches a million names.
struct ElfFunction {
  uint64_t address = 0;  // ELF virtual address (st_value)
  uint64_t size = 0;
  uint32_t name = 0;    // st_name: offset into the string table `strtab`
  uint32_t strtab = 0;  // section index of that string table (sh_link of the symbol table)
};

// A defined symbol as its table holds it (st_shndx != SHN_UNDEF, st_value != 0, a name).
struct ElfSymbolEntry {
  std::string_view name;  // as stored: .symtab may spell a version into it ("f@@V", "f@V")
  uint64_t address = 0;   // st_value
  uint64_t size = 0;      // st_size
  int type = 0;           // GELF_ST_TYPE: STT_FUNC, STT_OBJECT, STT_GNU_IFUNC, …
  bool from_dynsym = false;
  // .dynsym with .gnu.version: the version index (hidden bit cleared), -1 without one.
  int version_index = -1;
  bool version_hidden = false;  // `name@version` rather than the default `name@@version`
  std::string_view version;     // the name .gnu.version_d gives index > 1; "" otherwise
};

struct ElfSegment {
  uint64_t vaddr = 0;
  uint64_t memsz = 0;
  uint64_t offset = 0;
  uint64_t filesz = 0;
  bool executable = false;  // PF_X
};

struct SourceLine {
  std::string file;
  int line = 0;
};

class ElfFile {
 public:
  static StatusOr<std::unique_ptr<ElfFile>> Open(const std::string& path);
  ~ElfFile() = default;
  ElfFile(const ElfFile&) = delete;
  ElfFile& operator=(const ElfFile&) = delete;

  // File offset → ELF virtual address through the PT_LOAD segment that contains it.
  std::optional<uint64_t> FileOffsetToAddress(uint64_t file_offset) const;
  // ELF virtual address → file offset (inverse of the above).
  std::optional<uint64_t> AddressToFileOffset(uint64_t address) const;
  // The function symbol covering `address` (or the nearest one below it when sizes are 0).
  const ElfFunction* FindFunction(uint64_t address) const;
  // The name of a function FindFunction returned ("" when the string table is unreadable).
  std::string_view FunctionName(const ElfFunction& function) const;
  // First symbol (any type) named `name`: its ELF virtual address. The by-name index is built
  // on the first call (reading every name), not at Open.
  std::optional<uint64_t> SymbolAddress(std::string_view name) const;
  // The file offset at which a uprobe on function `name` goes.
  std::optional<uint64_t> FunctionFileOffset(std::string_view name) const;
  // Source file and line of `address` from DWARF, when present.
  std::optional<SourceLine> FindLine(uint64_t address);
  // Reads `size` bytes of initialized data at ELF virtual address `address`.
  std::optional<std::string> ReadAddress(uint64_t address, size_t size) const;
  // Visits every defined symbol, .dynsym first, then .symtab, in table order. False when the
  // file has neither table.
  bool ForEachSymbol(const std::function<void(const ElfSymbolEntry&)>& visit) const;
  const std::vector<ElfSegment>& segments() const { return segments_; }
  // `size` raw bytes of the file at `offset`; nullopt when they are not all in the file.
  std::optional<std::string_view> FileBytes(uint64_t offset, size_t size) const;
  bool has_dwarf() const { return static_cast<bool>(dwarf_); }
  // The dynamic section's library search path: DT_RUNPATH, else DT_RPATH, as written ("" when
  // neither; `$ORIGIN` not expanded).
  std::string LibrarySearchPath() const;
  const std::string& path() const { return path_; }

 private:
  static void EndElf(Elf* elf) { elf_end(elf); }
  static void EndDwarf(Dwarf* dwarf) { dwarf_end(dwarf); }
  ElfFile() = default;

  std::string path_;
  // Declaration order is destruction order reversed: DWARF, then ELF, then the fd go away.
  ScopedFd fd_;
  ScopedResource<Elf*, EndElf, nullptr> elf_;
  ScopedResource<Dwarf*, EndDwarf, nullptr> dwarf_;
  std::vector<ElfSegment> segments_;
  std::vector<ElfFunction> functions_;  // sorted by address
  // Every defined symbol, sorted by name (names point into the mapped file); built lazily.
  mutable std::vector<std::pair<std::string_view, uint64_t>> symbols_;
  mutable bool symbols_built_ = false;
};

}  // namespace gw
