#include "symbolize/process_maps.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace gw {

StatusOr<ProcessMaps> ProcessMaps::Read(int32_t pid, const std::string& proc_root) {
  std::string path = proc_root + "/" + std::to_string(pid) + "/maps";
  std::ifstream in(path);
  if (!in) return NotFound("read " + path + ": process gone or not readable");
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str());
}

ProcessMaps ProcessMaps::Parse(const std::string& text) {
  ProcessMaps maps;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    MappedRegion r;
    char perms[8] = {};
    unsigned dev_major = 0, dev_minor = 0;
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n",
                    &r.start, &r.end, perms, &r.file_offset, &dev_major, &dev_minor, &r.inode,
                    &path_at) < 7) {
      continue;
    }
    r.executable = perms[2] == 'x';
    if (path_at > 0 && static_cast<size_t>(path_at) < line.size()) {
      r.path = line.substr(static_cast<size_t>(path_at));
      const std::string deleted = " (deleted)";
      if (r.path.size() > deleted.size() &&
          r.path.compare(r.path.size() - deleted.size(), deleted.size(), deleted) == 0) {
        r.path.resize(r.path.size() - deleted.size());
      }
    }
    maps.regions_.push_back(std::move(r));
  }
  std::sort(maps.regions_.begin(), maps.regions_.end(),
            [](const MappedRegion& a, const MappedRegion& b) { return a.start < b.start; });
  return maps;
}

const MappedRegion* ProcessMaps::Find(uint64_t address) const {
  auto it = std::upper_bound(regions_.begin(), regions_.end(), address,
                             [](uint64_t a, const MappedRegion& r) { return a < r.start; });
  if (it == regions_.begin()) return nullptr;
  --it;
  return address < it->end ? &*it : nullptr;
}

std::optional<uint64_t> ProcessMaps::AddressOfFileOffset(const std::string& path,
                                                         uint64_t file_offset) const {
  for (const MappedRegion& r : regions_) {
    if (r.path != path) continue;
    if (file_offset >= r.file_offset && file_offset < r.file_offset + (r.end - r.start)) {
      return r.start + (file_offset - r.file_offset);
    }
  }
  return std::nullopt;
}

}  // namespace gw
