#include "sources/system/cgroup_cpu.h"

#include <set>
#include <sstream>

#include "base/text.h"
#include "sources/system/container.h"
#include "sources/system/host_info.h"

namespace gw {

namespace {

bool HasOption(const std::string& list, const std::string& want) {
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == want) return true;
  }
  return false;
}

std::optional<int64_t> ToInt(const std::string& s) {
  if (s.empty()) return std::nullopt;
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used);
    if (used != s.size()) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (...) {
    return std::nullopt;
  }
}

// "key value" lines (cpu.stat) into a map.
std::map<std::string, int64_t> KeyValues(const std::string& text) {
  std::map<std::string, int64_t> out;
  std::istringstream in(text);
  std::string key, value;
  while (in >> key >> value) {
    if (auto v = ToInt(value)) out[key] = *v;
  }
  return out;
}

int64_t Get(const std::map<std::string, int64_t>& m, const char* key, int64_t scale = 1) {
  auto it = m.find(key);
  return it == m.end() ? kNull : it->second * scale;
}

std::string Parent(const std::string& path) {
  if (path == "/") return "";
  size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

CgroupMounts ParseCgroupMounts(const std::string& mountinfo) {
  CgroupMounts m;
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    size_t dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream pre(line.substr(0, dash));
    std::string id, parent, dev, root, point;
    pre >> id >> parent >> dev >> root >> point;
    std::istringstream post(line.substr(dash + 3));
    std::string fstype, source, super;
    post >> fstype >> source >> super;
    if (root != "/") continue;  // a bind of a subtree: paths in /proc/PID/cgroup don't map onto it
    if (fstype == "cgroup2" && m.v2.empty()) {
      std::string controllers = ReadSmallFile(point + "/cgroup.controllers");
      std::istringstream c(controllers);
      std::string name;
      while (c >> name) {
        if (name == "cpu") m.v2 = point;
        if (name == "memory") m.v2_memory = point;
      }
    } else if (fstype == "cgroup") {
      if (HasOption(super, "cpu") && m.v1_cpu.empty()) m.v1_cpu = point;
      if (HasOption(super, "cpuacct") && m.v1_cpuacct.empty()) m.v1_cpuacct = point;
      if (HasOption(super, "memory") && m.v1_memory.empty()) m.v1_memory = point;
    }
  }
  return m;
}

std::optional<CpuCgroup> ParseProcCgroupOf(const std::string& text, const std::string& controller,
                                           bool v1_mounted, bool v2_mounted) {
  std::istringstream in(text);
  std::string line;
  std::optional<CpuCgroup> v2;
  while (std::getline(in, line)) {
    size_t a = line.find(':');
    size_t b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    std::string path = line.substr(b + 1);
    if (!IsPlainCgroupPath(path)) continue;
    if (controllers.empty() && line.compare(0, a, "0") == 0) {
      v2 = CpuCgroup{2, path};
    } else if (v1_mounted && HasOption(controllers, controller)) {
      return CpuCgroup{1, path};
    }
  }
  if (v2 && v2_mounted) return v2;
  return std::nullopt;
}

std::optional<CpuCgroup> ParseProcCgroup(const std::string& text, const CgroupMounts& mounts) {
  return ParseProcCgroupOf(text, "cpu", !mounts.v1_cpu.empty(), !mounts.v2.empty());
}

CgroupCpuReader::CgroupCpuReader(std::string proc_root, std::string mountinfo)
    : proc_root_(std::move(proc_root)) {
  mounts_ = ParseCgroupMounts(mountinfo.empty() ? ReadSmallFile("/proc/self/mountinfo")
                                                : mountinfo);
}

std::optional<CgroupCpuSample> CgroupCpuReader::ReadOne(const CpuCgroup& cg) const {
  CgroupCpuSample s;
  s.cgroup = cg.path;
  s.version = cg.version;
  std::string rel = cg.path == "/" ? "" : cg.path;
  if (cg.version == 2) {
    if (mounts_.v2.empty()) return std::nullopt;
    std::string dir = mounts_.v2 + rel;
    std::map<std::string, int64_t> stat = KeyValues(ReadSmallFile(dir + "/cpu.stat"));
    if (stat.empty()) return std::nullopt;
    s.usage_ns = Get(stat, "usage_usec", 1000);
    s.nr_periods = Get(stat, "nr_periods");
    s.nr_throttled = Get(stat, "nr_throttled");
    s.throttled_ns = Get(stat, "throttled_usec", 1000);
    std::istringstream max(ReadSmallFile(dir + "/cpu.max"));  // "max 100000" / "50000 100000"
    std::string quota, period;
    if (max >> quota >> period) {
      s.quota_us = quota == "max" ? kNull : ToInt(quota).value_or(kNull);
      s.period_us = ToInt(period).value_or(kNull);
    }
    return s;
  }
  if (mounts_.v1_cpu.empty()) return std::nullopt;
  std::string dir = mounts_.v1_cpu + rel;
  std::map<std::string, int64_t> stat = KeyValues(ReadSmallFile(dir + "/cpu.stat"));
  if (stat.empty()) return std::nullopt;
  s.nr_periods = Get(stat, "nr_periods");
  s.nr_throttled = Get(stat, "nr_throttled");
  s.throttled_ns = Get(stat, "throttled_time");
  std::optional<int64_t> quota = ToInt(TrimSpace(ReadSmallFile(dir + "/cpu.cfs_quota_us")));
  s.quota_us = quota && *quota > 0 ? *quota : kNull;
  s.period_us = ToInt(TrimSpace(ReadSmallFile(dir + "/cpu.cfs_period_us"))).value_or(kNull);
  if (!mounts_.v1_cpuacct.empty()) {
    s.usage_ns = ToInt(TrimSpace(ReadSmallFile(mounts_.v1_cpuacct + rel + "/cpuacct.usage")))
                     .value_or(kNull);
  }
  return s;
}

std::vector<CgroupCpuSample> CgroupCpuReader::Read(const std::vector<int32_t>& pids,
                                                   int64_t ts_ns,
                                                   std::vector<ProcessCgroup>* moved) {
  std::vector<CgroupCpuSample> out;
  if (!available()) return out;
  std::set<std::string> seen;  // "<version><path>" already sampled this round
  std::map<int32_t, std::string> now;
  for (int32_t pid : pids) {
    std::string dir = proc_root_ + "/" + std::to_string(pid);
    std::string text = ReadSmallFile(dir + "/cgroup");
    std::optional<CpuCgroup> cg = ParseProcCgroup(text, mounts_);
    if (!cg) continue;
    now[pid] = cg->path;
    auto last = last_.find(pid);
    if (moved && (last == last_.end() || last->second != cg->path)) {
      // Who the process is to the user: its container and pod, and its pid in there.
      ContainerIdentity id = ParseContainerProcCgroup(text);
      ProcessCgroup pc;
      pc.pid = pid;
      pc.cgroup = cg->path;
      pc.ts_ns = ts_ns;
      pc.container_id = id.container_id;
      pc.pod_uid = id.pod_uid;
      pc.runtime = id.runtime;
      pc.ns_pid = ParseNsPid(ReadSmallFile(dir + "/status"));
      if (!pc.pod_uid.empty()) {
        // The pod's name and namespace where its spec passes them (downward API). environ may
        // hold secrets: only POD_NAME/POD_NAMESPACE are looked at, the image is dropped here.
        PodMetadata meta = ParseDownwardApiEnv(ReadSmallFile(dir + "/environ"));
        pc.pod_name = std::move(meta.name);
        pc.pod_namespace = std::move(meta.namespace_name);
      }
      moved->push_back(std::move(pc));
    }
    // The process's own cgroup always (its usage is the job's), then each ancestor that sets a
    // quota: a limit is often on the pod or a parent slice, not on the leaf.
    bool leaf = true;
    for (std::string p = cg->path; !p.empty(); p = Parent(p), leaf = false) {
      if (!seen.insert(std::to_string(cg->version) + p).second) break;
      std::optional<CgroupCpuSample> s = ReadOne({cg->version, p});
      if (!s) continue;
      if (!leaf && s->quota_us == kNull) continue;
      s->ts_ns = ts_ns;
      out.push_back(std::move(*s));
    }
  }
  last_ = std::move(now);
  return out;
}

}  // namespace gw
