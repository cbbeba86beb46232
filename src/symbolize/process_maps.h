// A snapshot of /proc/<pid>/maps: which file backs which address range. The symbolizer keeps
// snapshots after the process exits or unloads a library, so late symbolization still works.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gw {

struct MappedRegion {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t file_offset = 0;
  uint64_t inode = 0;
  bool executable = false;
  std::string path;  // "" for anonymous memory; "[vdso]", "[stack]" kept as they are
};

class ProcessMaps {
 public:
  static StatusOr<ProcessMaps> Read(int32_t pid, const std::string& proc_root = "/proc");
  // Parses the text of a maps file (exposed for tests).
  static ProcessMaps Parse(const std::string& text);

  const MappedRegion* Find(uint64_t address) const;
  // The address where file offset `file_offset` of `path` is mapped, if it is.
  std::optional<uint64_t> AddressOfFileOffset(const std::string& path, uint64_t file_offset) const;
  const std::vector<MappedRegion>& regions() const { return regions_; }

 private:
  std::vector<MappedRegion> regions_;  // sorted by start
};

}  // namespace gw
