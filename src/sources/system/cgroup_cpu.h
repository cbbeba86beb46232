// The CPU bandwidth limit (quota) of the tracked processes' cgroups and how often it throttled
// them: cgroup v2 cpu.max/cpu.stat, v1 cpu.cfs_quota_us/cpu.cfs_period_us/cpu.stat/cpuacct.usage.
// Read by the 1 Hz SystemSampler; explain turns the throttling into the cpu-quota cause.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/event.h"

namespace gw {

// Where the cpu and memory controllers' hierarchies are mounted (from mountinfo); empty = not
// mounted.
struct CgroupMounts {
  std::string v2;          // the unified hierarchy, if the cpu controller is enabled in it
  std::string v1_cpu;      // the v1 hierarchy holding the cpu controller
  std::string v1_cpuacct;  // the v1 hierarchy holding cpuacct (often the same)
  std::string v2_memory;   // the unified hierarchy, if the memory controller is enabled in it
  std::string v1_memory;   // the v1 hierarchy holding the memory controller
};
CgroupMounts ParseCgroupMounts(const std::string& mountinfo);

// A process's cgroup in the hierarchy that has the cpu controller (v1 preferred where mounted,
// as the kernel enforces the v1 quota there), parsed from /proc/PID/cgroup.
struct CpuCgroup {
  int32_t version = 2;
  std::string path;  // "/..." below the mount
};
// A process's cgroup for one controller from its /proc/PID/cgroup: the path in the controller's
// v1 hierarchy when that is mounted (`v1_mounted`), else its unified (v2) path when v2 is.
std::optional<CpuCgroup> ParseProcCgroupOf(const std::string& proc_pid_cgroup,
                                           const std::string& controller, bool v1_mounted,
                                           bool v2_mounted);
std::optional<CpuCgroup> ParseProcCgroup(const std::string& proc_pid_cgroup,
                                         const CgroupMounts& mounts);

class CgroupCpuReader {
 public:
  // `proc_root` and `mountinfo` are for tests; by default /proc and /proc/self/mountinfo.
  explicit CgroupCpuReader(std::string proc_root = "/proc", std::string mountinfo = "");
  bool available() const { return !mounts_.v2.empty() || !mounts_.v1_cpu.empty(); }
  // One read for `pids`: each distinct cgroup once (its own counters, plus every ancestor that
  // sets a quota), stamped `ts_ns`. Processes seen in a cgroup for the first time (or moved)
  // are appended to *moved.
  std::vector<CgroupCpuSample> Read(const std::vector<int32_t>& pids, int64_t ts_ns,
                                    std::vector<ProcessCgroup>* moved);
  // The counters of one cgroup; nullopt when its files cannot be read.
  std::optional<CgroupCpuSample> ReadOne(const CpuCgroup& cg) const;

 private:
  std::string proc_root_;
  CgroupMounts mounts_;
  std::map<int32_t, std::string> last_;  // pid -> cgroup it was last seen in
};

}  // namespace gw
