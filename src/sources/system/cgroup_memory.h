// The memory limit of the tracked processes' cgroups and what it did to them: cgroup v2
// memory.max/memory.high/memory.current/memory.events, v1 memory.limit_in_bytes/
// memory.usage_in_bytes/memory.failcnt/memory.oom_control, and both memory.stat's major faults.
// Read by the 1 Hz SystemSampler beside the CPU quota; explain names the limit in
// memory-pressure, memory-limit and oom-kill findings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sources/system/cgroup_cpu.h"
#include "store/event.h"

namespace gw {

// A process's cgroup in the hierarchy that has the memory controller (v1 where mounted, as the
// kernel enforces the v1 limit there), parsed from /proc/PID/cgroup.
std::optional<CpuCgroup> ParseProcMemoryCgroup(const std::string& proc_pid_cgroup,
                                               const CgroupMounts& mounts);

class CgroupMemoryReader {
 public:
  // `proc_root` and `mountinfo` are for tests; by default /proc and /proc/self/mountinfo.
  explicit CgroupMemoryReader(std::string proc_root = "/proc", std::string mountinfo = "");
  bool available() const { return !mounts_.v2_memory.empty() || !mounts_.v1_memory.empty(); }
  // One read for `pids`: each distinct memory cgroup once (the leaf always, then every ancestor
  // that sets a limit), stamped `ts_ns`.
  std::vector<CgroupMemorySample> Read(const std::vector<int32_t>& pids, int64_t ts_ns) const;
  // The counters of one cgroup; nullopt when its files cannot be read.
  std::optional<CgroupMemorySample> ReadOne(const CpuCgroup& cg) const;

 private:
  std::string proc_root_;
  CgroupMounts mounts_;
};

}  // namespace gw
