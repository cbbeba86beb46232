// The typed records that flow from capture (or the demo generator) into the store.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include "base/saturating.h"
#include "store/ops.h"

namespace gw {

// Marks an optional argument as absent; stored as SQL NULL.
inline constexpr int64_t kNull = std::numeric_limits<int64_t>::min();
// Log2 latency buckets of op_seconds' histograms (op_latency): [2^i, 2^(i+1)) ns.
inline constexpr size_t kLatencyBuckets = 32;
inline size_t LatencyBucket(int64_t ns) {
  if (ns <= 1) return 0;
  size_t b = static_cast<size_t>(63 - __builtin_clzll(static_cast<uint64_t>(ns)));
  return b < kLatencyBuckets ? b : kLatencyBuckets - 1;
}

// One row of `events`. Which optional arguments an op fills is documented in docs/schema.md.
struct Event {
  int64_t ts_ns = 0;        // start of the operation, ns since the session started
  int32_t pid = 0;          // process (tgid)
  int32_t tid = 0;          // thread
  Op op = Op::kSchedSwitch;
  int64_t duration_ns = 0;  // 0 for instantaneous events
  int64_t ret = kNull;      // CUDA return code (0 = success)
  int64_t bytes = kNull;    // bytes copied/allocated/freed/read
  int64_t kind = kNull;     // memcpy direction (CopyKind), switch reason (SwitchKind), fault flags
  int64_t cpu = kNull;      // CPU the event happened on
  int64_t other_pid = kNull;  // sched_switch: the task that took the CPU; wakeup: the waker
  int64_t runq_ns = kNull;  // sched_switch: part of duration spent runnable, waiting for a CPU
  int64_t addr = kNull;     // device pointer, stream handle, faulting address, sector
  int64_t name_id = kNull;  // strings.id: kernel name, file name
  int64_t stack_id = kNull; // stacks.id (trace --stack)
  int64_t waker_pid = kNull;  // sched_switch of a blocked task: who woke it (0 = interrupt)
  int64_t waker_tid = kNull;  // that task's thread (0 = interrupt)
  int64_t since_work_ns = kNull;  // CUDA sync or allocation: since its process last gave work
  int64_t End() const { return SaturatingAdd(ts_ns, duration_ns); }
};

// A process seen during a session. `name` is the display name used by process_names
// (comm, plus the script for interpreters: "python3 (train.py)").
struct ProcessInfo {
  int32_t pid = 0;
  int32_t ppid = 0;
  std::string name;
  std::string comm;
  std::string cmdline;
  int64_t first_ts_ns = kNull;
  int64_t exit_ts_ns = kNull;
  int64_t exit_code = kNull;
  bool tracked = false;  // in gpuwhy's tracked set (CUDA process or descendant)
};

// One 1 Hz sample of /proc. Rates are per second over the previous sample.
struct SystemSnapshot {
  int64_t ts_ns = 0;         // ns since session start (CLOCK_MONOTONIC based)
  int64_t wall_ns = 0;       // CLOCK_REALTIME at the same instant: anchors absolute time
  double cpu_pct = 0;        // all CPUs busy share, 0-100
  double mem_pct = 0;        // (MemTotal - MemAvailable) / MemTotal, 0-100
  double load1 = 0;
  int64_t cores = 0;
  int64_t swap_used_bytes = 0;
  int64_t mem_available_bytes = 0;
  int64_t major_faults_per_s = 0;
  int64_t ctx_switches_per_s = 0;
  int64_t procs_running = 0;
  int64_t procs_blocked = 0;
  double iowait_pct = 0;
};

// One sample of one GPU from NVML (`gpu_samples`, schema 4). kNull (ints) / NaN (reals) where
// the device or driver did not give the value (GPM metrics need Hopper or newer).
struct GpuSample {
  int64_t ts_ns = 0;            // ns since session start, when the sample was read
  int32_t gpu = 0;              // NVML device index
  int64_t util_pct = kNull;     // nvmlDeviceGetUtilizationRates .gpu (what nvidia-smi shows)
  int64_t mem_util_pct = kNull; // .memory: share of time device memory was read or written
  double sm_active_pct = -1;    // GPM SM_UTIL over the interval since the previous sample; <0 = none
  double sm_occupancy_pct = -1; // GPM SM_OCCUPANCY
  double tensor_active_pct = -1;// GPM ANY_TENSOR_UTIL
  double dram_bw_pct = -1;      // GPM DRAM_BW_UTIL
  int64_t sm_clock_mhz = kNull;
  int64_t power_mw = kNull;
  int64_t throttle_reasons = kNull;  // nvmlClocksEventReasons bit mask
  int64_t mem_used_bytes = kNull;
};

// Per-process GPU utilization from nvmlDeviceGetProcessUtilization (`gpu_process_samples`).
struct GpuProcessSample {
  int64_t ts_ns = 0;  // session ns of the read that returned it
  int32_t gpu = 0;
  int32_t pid = 0;    // as NVML reports it (the host's pid namespace)
  int64_t sm_util_pct = kNull;
  int64_t mem_util_pct = kNull;
};

// The CPU bandwidth limit and throttling of one cgroup of a tracked process, read once a second
// (`cgroup_cpu_samples`): the process's own cgroup and each ancestor that sets a quota. Counters
// are cumulative as the kernel keeps them (cgroup v2 cpu.stat, v1 cpu.stat and cpuacct.usage).
struct CgroupCpuSample {
  int64_t ts_ns = 0;         // session ns of the read
  std::string cgroup;        // path below the cgroup mount ("/" = root), e.g. /kubepods.slice/...
  int32_t version = 2;       // 1 or 2
  int64_t quota_us = kNull;  // CPU time allowed per period; kNull = no limit ("max", -1)
  int64_t period_us = kNull;
  int64_t nr_periods = kNull;    // periods in which the cgroup had runnable tasks
  int64_t nr_throttled = kNull;  // periods that ended with the cgroup throttled
  int64_t throttled_ns = kNull;  // time its run queues spent throttled, summed over CPUs
  int64_t usage_ns = kNull;      // CPU time its tasks used
};

// The cgroup (cpu controller's hierarchy) a tracked process was seen in (`process_cgroups`),
// and (schema 12) the container and pod its cgroup names and its pid in its own PID namespace.
struct ProcessCgroup {
  int32_t pid = 0;
  std::string cgroup;
  int64_t ts_ns = 0;  // session ns when it was first seen there
  std::string container_id{};  // full hex id; "" = not in a container gpuwhy recognizes
  std::string pod_uid{};       // Kubernetes pod UID; "" = not in a pod
  std::string runtime{};       // docker, containerd, cri-o, podman; "" = unknown or none
  int32_t ns_pid = 0;          // innermost NSpid of /proc/PID/status; 0 = unknown
  // The pod's name and namespace from the process's downward-API environment (POD_NAME,
  // POD_NAMESPACE; container.h), for a process in a pod; "" = not given.
  std::string pod_name{};
  std::string pod_namespace{};
};

// The memory limit and its events of one cgroup of a tracked process, read once a second
// (`cgroup_memory_samples`, schema 12): the process's own memory cgroup and each ancestor that
// sets a limit. Counters are cumulative as the kernel keeps them.
struct CgroupMemorySample {
  int64_t ts_ns = 0;
  std::string cgroup;  // path below the memory hierarchy's mount
  int32_t version = 2;
  int64_t max_bytes = kNull;        // v2 memory.max, v1 memory.limit_in_bytes; kNull = no limit
  int64_t high_bytes = kNull;       // v2 memory.high (throttling above it); kNull = none or v1
  int64_t usage_bytes = kNull;      // v2 memory.current, v1 memory.usage_in_bytes
  int64_t events_high = kNull;      // v2 memory.events high: times usage went over memory.high
  int64_t events_max = kNull;       // v2 memory.events max; v1 memory.failcnt (charges refused)
  int64_t events_oom = kNull;       // v2 memory.events oom: allocations that failed at the limit
  int64_t events_oom_kill = kNull;  // processes the OOM killer ended in it (v1 memory.oom_control)
  int64_t major_faults = kNull;     // memory.stat pgmajfault (v1 total_pgmajfault)
};

// A GPU NVML reported at the start of a session (`gpu_devices`).
struct GpuDevice {
  int32_t gpu = 0;
  std::string name;        // "NVIDIA H200"
  bool gpm_supported = false;
};

// Counts of calls that were not recorded as rows (e.g. launches counted in BPF), one row per
// (second, pid, op, name). Written into `op_seconds` alongside what the writer counts itself.
struct OpCount {
  int64_t sec = 0;     // whole seconds since session start
  int32_t pid = 0;
  Op op = Op::kCudaLaunchKernel;
  int64_t name_id = kNull;
  int64_t count = 0;
  int64_t total_ns = 0;  // sum of durations where known (0 when only counted)
  int64_t max_ns = 0;
  int64_t bytes = 0;     // copy and memset sizes summed (0: none or not known)
  // Durations in log2 buckets: [2^i, 2^(i+1)) ns, bucket 0 also 0 (all 0 when only counted).
  std::array<int64_t, kLatencyBuckets> log2_hist{};
};

// What a session records about the machine and the run (the `sessions` table).
struct SessionInfo {
  int64_t wall_start_ns = 0;  // CLOCK_REALTIME at session start
  int64_t mono_start_ns = 0;  // CLOCK_MONOTONIC at session start (BPF timestamps' clock)
  std::string kind = "trace"; // trace | demo | live-demo
  std::string host;
  std::string kernel;
  std::string cpu_model;
  int64_t cores = 0;
  int64_t mem_bytes = 0;
  std::string gpu_model;
  std::string gpu_driver;
  std::string version;
  std::string command_line;
  int32_t tracer_pid = 0;     // the recording gpuwhy process (0 = none: synthetic)
  // Launches counted in one session second of every launch_duty; 1: every second
  // (sessions.launch_duty).
  int32_t launch_duty = 1;
  // The on-CPU profile's rate (trace --profile-hz), samples a second per CPU; 0 = off.
  int32_t profile_hz = 0;
};

struct SessionTotals {
  int64_t wall_stop_ns = 0;
  int64_t events = 0;
  int64_t drops = 0;
  std::string drops_detail;  // JSON object: {"cuda": n, "sched": n, "queue": n}
};

}  // namespace gw
