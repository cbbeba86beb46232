// --pid for the exporters: a process and every process whose parent chain reaches it.
#pragma once

#include <cstdint>
#include <map>
#include <set>

#include "store/window_rows.h"

namespace gw {

inline std::set<int32_t> ProcessAndDescendants(const std::map<int32_t, ProcessRecord>& processes,
                                               int32_t pid) {
  std::set<int32_t> out = {pid};
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [p, rec] : processes) {
      if (out.count(rec.ppid) && out.insert(p).second) grew = true;
    }
  }
  return out;
}

}  // namespace gw
