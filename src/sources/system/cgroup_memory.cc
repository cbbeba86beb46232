#include "sources/system/cgroup_memory.h"

#include <map>
#include <set>
#include <sstream>

#include "base/text.h"
#include "sources/system/container.h"
#include "sources/system/host_info.h"

namespace gw {

namespace {

// v1 writes "no limit" as the largest page-aligned value (9223372036854771712).
constexpr int64_t kNoLimitAbove = int64_t{1} << 62;

std::optional<int64_t> ToInt(const std::string& s) {
  if (s.empty() || s.size() > 20) return std::nullopt;
  size_t i = s[0] == '-' ? 1 : 0;
  if (i == s.size()) return std::nullopt;
  int64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    if (v > (INT64_MAX - 9) / 10) return std::nullopt;
    v = v * 10 + (s[i] - '0');
  }
  return s[0] == '-' ? -v : v;
}

int64_t Limit(const std::string& text) {
  std::string t = TrimSpace(text);
  if (t.empty() || t == "max") return kNull;
  std::optional<int64_t> v = ToInt(t);
  return v && *v >= 0 && *v < kNoLimitAbove ? *v : kNull;
}

int64_t Value(const std::string& text) { return ToInt(TrimSpace(text)).value_or(kNull); }

std::map<std::string, int64_t> KeyValues(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  std::string key, value;
  while (in >> key >> value) {
    if (auto v = ToInt(value)) out[key] = *v;
  }
  return out;
}

int64_t Get(const std::map<std::string, int64_t>& m, const char* key) {
  auto it = m.find(key);
  return it == m.end() ? kNull : it->second;
}

std::string Parent(const std::string& path) {
  if (path == "/") return "";
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::optional<CpuCgroup> ParseProcMemoryCgroup(const std::string& text,
                                               const CgroupMounts& mounts) {
  return ParseProcCgroupOf(text, "memory", !mounts.v1_memory.empty(), !mounts.v2_memory.empty());
}

CgroupMemoryReader::CgroupMemoryReader(std::string proc_root, std::string mountinfo)
    : proc_root_(std::move(proc_root)) {
  mounts_ =
      ParseCgroupMounts(mountinfo.empty() ? ReadSmallFile("/proc/self/mountinfo") : mountinfo);
}

std::optional<CgroupMemorySample> CgroupMemoryReader::ReadOne(const CpuCgroup& cg) const {
  CgroupMemorySample s;
  s.cgroup = cg.path;
  s.version = cg.version;
  std::string rel = cg.path == "/" ? "" : cg.path;
  if (cg.version == 2) {
    if (mounts_.v2_memory.empty()) return std::nullopt;
    std::string dir = mounts_.v2_memory + rel;
    s.usage_bytes = Value(ReadSmallFile(dir + "/memory.current"));
    std::map<std::string, int64_t> events = KeyValues(ReadSmallFile(dir + "/memory.events"));
    if (s.usage_bytes == kNull && events.empty()) return std::nullopt;  // the root has neither
    s.max_bytes = Limit(ReadSmallFile(dir + "/memory.max"));
    s.high_bytes = Limit(ReadSmallFile(dir + "/memory.high"));
    s.events_high = Get(events, "high");
    s.events_max = Get(events, "max");
    s.events_oom = Get(events, "oom");
    s.events_oom_kill = Get(events, "oom_kill");
    s.major_faults = Get(KeyValues(ReadSmallFile(dir + "/memory.stat")), "pgmajfault");
    return s;
  }
  if (mounts_.v1_memory.empty()) return std::nullopt;
  std::string dir = mounts_.v1_memory + rel;
  s.usage_bytes = Value(ReadSmallFile(dir + "/memory.usage_in_bytes"));
  if (s.usage_bytes == kNull) return std::nullopt;
  s.max_bytes = Limit(ReadSmallFile(dir + "/memory.limit_in_bytes"));
  s.events_max = Value(ReadSmallFile(dir + "/memory.failcnt"));
  // "oom_kill_disable 0\nunder_oom 0\noom_kill 3" (oom_kill since 4.13)
  s.events_oom_kill = Get(KeyValues(ReadSmallFile(dir + "/memory.oom_control")), "oom_kill");
  std::map<std::string, int64_t> stat = KeyValues(ReadSmallFile(dir + "/memory.stat"));
  s.major_faults = Get(stat, "total_pgmajfault");
  if (s.major_faults == kNull) s.major_faults = Get(stat, "pgmajfault");
  return s;
}

std::vector<CgroupMemorySample> CgroupMemoryReader::Read(const std::vector<int32_t>& pids,
                                                         int64_t ts_ns) const {
  std::vector<CgroupMemorySample> out;
  if (!available()) return out;
  std::set<std::string> seen;
  for (int32_t pid : pids) {
    std::optional<CpuCgroup> cg = ParseProcMemoryCgroup(
        ReadSmallFile(proc_root_ + "/" + std::to_string(pid) + "/cgroup"), mounts_);
    if (!cg) continue;
    bool leaf = true;
    for (std::string p = cg->path; !p.empty(); p = Parent(p), leaf = false) {
      if (!seen.insert(std::to_string(cg->version) + p).second) break;
      std::optional<CgroupMemorySample> s = ReadOne({cg->version, p});
      if (!s) continue;
      // A limit is often on the pod or a parent slice, not on the container's own cgroup.
      if (!leaf && s->max_bytes == kNull && s->high_bytes == kNull) continue;
      s->ts_ns = ts_ns;
      out.push_back(std::move(*s));
    }
  }
  return out;
}

}  // namespace gw
