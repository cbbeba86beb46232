#include "base/proc_status.h"

#include <cstdlib>
#include <fstream>

namespace gw {

int64_t ReadProcStatusKb(const std::string& proc_root, int32_t pid, std::string_view field) {
  std::ifstream status(proc_root + "/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.size() <= field.size() || line.compare(0, field.size(), field) != 0 ||
        line[field.size()] != ':') {
      continue;
    }
    return std::strtoll(line.c_str() + field.size() + 1, nullptr, 10);
  }
  return -1;
}

}  // namespace gw
