// What analysis reads from a recording: one window of one session, already decoded into the
// store's typed rows (store/window_rows.h). The loader (loader.cc) fills it from a database;
// unit tests build it by hand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/saturating.h"
#include "store/event.h"
#include "store/ops.h"
#include "store/window_rows.h"

namespace gw {

struct WindowData {
  int64_t session = 0;
  // The session is the file's newest: evidence SQL reads the `events` view (the newest
  // session's rows, as the brief writes it) instead of `events_all WHERE session = N`.
  bool newest_session = true;
  int64_t from = 0;              // session ns, inclusive
  int64_t to = 0;                // session ns, exclusive
  int64_t session_first_ts = 0;  // first event of the whole session
  int64_t session_last_ts = 0;
  int64_t cores = 0;  // sessions.cores (snapshots override when present)
  int64_t drops = 0;
  std::string label;                           // "last 2 min"
  std::map<int32_t, ProcessRecord> processes;  // every process of the session
  std::vector<Event> events;  // tracked processes' non-launch rows in the window, by ts
  // Rows of tracked processes that began before the window but end inside it (off-CPU
  // intervals, syncs, copies): for timelines only, never counted.
  std::vector<Event> carry_in;
  int32_t tracer_pid = 0;  // the recording gpuwhy (sessions.tracer_pid), 0 = unknown
  // Each launch counted once (sessions.launches_once); false: a driver launch nested in a
  // runtime launch was counted on both layers (recordings before schema 5).
  bool launches_once = true;
  // Launches were counted in one second of every launch_duty (sessions.launch_duty):
  // op_seconds' launch counts are that sample; estimates scale them by launch_duty.
  int64_t launch_duty = 1;
  LaunchEstimates launch_estimates;  // what counted launches stand for, per process
  std::vector<Event> launch_samples;     // a bounded sample of launch rows (durations)
  std::vector<OpSecondRow> op_seconds;   // window seconds, every pid
  // Short copies aggregated in the kernel (no rows), per pid, op and direction.
  std::vector<CopyAggregateRow> copy_aggregates;
  std::vector<KernelLaunchRow> kernel_launches;  // per (pid, op, kernel), most launched first
  std::vector<SwitchTotals> switch_totals;  // every pid with sched_switch rows in the window
  std::vector<SystemSnapshot> snapshots;    // window
  int64_t events_in_window = 0;
  std::vector<StackUse> stack_uses;                             // every pid, window rows
  std::map<int64_t, std::vector<StackFrameRow>> stack_frames;  // stacks those rows use
  int64_t malformed_stacks = 0;  // stacks of those rows whose frames could not be read
  // The on-CPU profile (trace --profile-hz): samples a second per CPU (0 = none), and the
  // window's samples of tracked threads, by ts.
  int64_t profile_hz = 0;
  std::vector<CpuSampleRow> cpu_samples;
  // NCCL rows (window_rows.h), every pid, by ts: collectives of the window and communicator
  // inits of the session up to its end.
  std::vector<NcclCallRow> nccl_calls;
  std::vector<GpuDevice> gpu_devices;  // NVML (schema 4): the session's GPUs
  std::vector<GpuSample> gpu_samples;  // the window's samples, by ts then gpu
  std::vector<GpuProcessSample> gpu_process_samples;  // per process, by ts then gpu, pid
  // cgroup CPU quota samples (by cgroup, then ts; the last one before the window first) and the
  // cgroups the session's processes were seen in (by pid, then ts).
  std::vector<CgroupCpuSample> cgroup_cpu;
  std::vector<ProcessCgroup> process_cgroups;
  // memory cgroup samples (schema 12), ordered like cgroup_cpu.
  std::vector<CgroupMemorySample> cgroup_memory;
};

}  // namespace gw
