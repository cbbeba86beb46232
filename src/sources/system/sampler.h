// SystemSampler: a 1 Hz sampler of /proc (CPU, memory, load, swap, faults, context switches)
// feeding system_snapshots. Used by trace and the live demo; explain reads its rows for the
// "System Context" line. With SampleCgroups, also the tracked processes' cgroup CPU quota and
// throttling (cgroup_cpu.h), container identity (container.h) and memory limit and events
// (cgroup_memory.h) on the same tick.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "store/event.h"

namespace gw {

// Raw cumulative counters from one read of /proc.
struct ProcCounters {
  uint64_t cpu_busy = 0;   // jiffies not idle/iowait
  uint64_t cpu_total = 0;  // all jiffies
  uint64_t cpu_iowait = 0;
  uint64_t ctx_switches = 0;
  uint64_t major_faults = 0;
  int64_t procs_running = 0;
  int64_t procs_blocked = 0;
  int64_t mem_total = 0;   // bytes
  int64_t mem_available = 0;
  int64_t swap_total = 0;
  int64_t swap_free = 0;
  double load1 = 0;
};

ProcCounters ReadProcCounters(const std::string& proc_root = "/proc");
// Turns two successive reads `elapsed_ns` apart into a snapshot (rates per second).
SystemSnapshot SnapshotFromCounters(const ProcCounters& before, const ProcCounters& after,
                                    int64_t elapsed_ns, int64_t cores);

class SystemSampler {
 public:
  using Sink = std::function<void(const SystemSnapshot&)>;
  // `clock_ns` returns the session-relative timestamp to stamp each snapshot with.
  SystemSampler(Sink sink, std::function<int64_t()> clock_ns, int64_t interval_ms = 1000);
  ~SystemSampler();
  // Also read the CPU quota and throttling of the cgroups of `pids()` each tick (before Start).
  // Also their memory limits and events (cgroup_memory.h).
  using CgroupSink = std::function<void(std::vector<CgroupCpuSample>, std::vector<ProcessCgroup>,
                                        std::vector<CgroupMemorySample>)>;
  void SampleCgroups(std::function<std::vector<int32_t>()> pids, CgroupSink sink);
  void Start();
  void Stop();

 private:
  void Run();
  Sink sink_;
  std::function<std::vector<int32_t>()> cgroup_pids_;
  CgroupSink cgroup_sink_;
  std::function<int64_t()> clock_ns_;
  int64_t interval_ms_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace gw
