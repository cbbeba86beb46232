// ELF symbol resolution for uprobes: parse a shared library once and answer "where in the
// file does function X start, and where should a uprobe on it go".
//
// Uprobes are placed by file offset. A symbol's st_value is a virtual address; the PT_LOAD
// segment that contains it maps it back to the file. Functions built with CET start with
// `endbr64` (f3 0f 1e fa); a probe on that instruction traps and single-steps (~10 µs per call
// on kernel 6.18), one placed just after it (+4) is emulated or optimised like any other, so
// ProbeOffset() skips it. Measured with `bench/uprobe_cost.cc` (BENCHMARKS.md, section 1):
// a probe's cost depends on the probed function's first instruction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"

namespace gw {

struct ElfSymbol {
  std::string name;          // without version: "cudaMemcpy"
  std::string version;       // GNU symbol version ("libcudart.so.13"), "" when unversioned
  bool default_version = true;  // `name@@version` (or unversioned); false for `name@version`
  uint64_t address = 0;      // st_value (virtual address in the library)
  uint64_t size = 0;         // st_size
  uint64_t file_offset = 0;  // offset of the first instruction in the file
  bool starts_with_endbr64 = false;  // first bytes are f3 0f 1e fa
  bool from_dynsym = false;  // exported (.dynsym) rather than only in .symtab
};

class ElfSymbolTable {
 public:
  // Reads .dynsym, .symtab and .gnu.version/.gnu.version_d of `path`. Only defined function
  // symbols (STT_FUNC, STT_GNU_IFUNC excluded: their address is a resolver) are kept.
  static StatusOr<ElfSymbolTable> Load(const std::string& path);

  // Looks up "name" (the default version, else any version, .dynsym preferred) or
  // "name@version" / "name@@version". nullptr when absent.
  const ElfSymbol* Find(std::string_view name) const;

  // Where a uprobe on `symbol` goes: file_offset, +4 past a leading endbr64.
  static uint64_t ProbeOffset(const ElfSymbol& symbol) {
    return symbol.file_offset + (symbol.starts_with_endbr64 ? 4 : 0);
  }

  const std::string& path() const { return path_; }
  size_t size() const { return symbols_.size(); }
  const std::vector<ElfSymbol>& symbols() const { return symbols_; }

 private:
  std::string path_;
  std::vector<ElfSymbol> symbols_;
  // name → indices into symbols_, best candidate first.
  std::unordered_map<std::string, std::vector<size_t>> by_name_;
};

}  // namespace gw
