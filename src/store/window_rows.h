// Typed rows of one window of one session, read for the analysis (src/analysis/loader.cc) so
// that it never sees SQL or SQLite. Every query is bounded by the window: a range of
// event_rows' clustered (session, ts, seq) key, or of op_seconds' (session, sec, ...) key.
// Nothing scans a session.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/event.h"
#include "store/launch_estimate.h"
#include "store/ops.h"
#include "store/window.h"

namespace gw {

class StoreReader;

struct ProcessRecord {
  int32_t pid = 0;
  int32_t ppid = 0;
  std::string name;
  std::string cmdline;
  bool tracked = false;
  int64_t first_ts = kNull;
  int64_t exit_ts = kNull;
  int64_t exit_code = kNull;
  // Schema 12 (process_cgroups, the last row of the pid): its container and pod, and its pid in
  // its own PID namespace; ""/0 when unknown or not in one.
  std::string container_id{};
  std::string pod_uid{};
  int32_t ns_pid = 0;
};

// One row of op_seconds summed over name_id.
struct OpSecondRow {
  int64_t sec = 0;
  int32_t pid = 0;
  Op op = Op::kCudaLaunchKernel;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
};

// Copies the CUDA row budget aggregated in the kernel instead of writing rows (op_seconds rows
// whose name is the copy's direction), per process, op and direction, over the window's seconds.
struct CopyAggregateRow {
  int32_t pid = 0;
  Op op = Op::kCudaMemcpyAsync;
  std::string direction;  // CopyKindName: HtoD, DtoH, DtoD, HtoH, default
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t bytes = 0;
};

// Launches of one kernel by one process over the window (op_seconds: every launch, counted in
// BPF or sampled as a row), per launch op.
struct KernelLaunchRow {
  int32_t pid = 0;
  Op op = Op::kCudaLaunchKernel;
  std::string name;  // "fn@0x…" when the tracer could not name it; "" without a name id
  int64_t launches = 0;
};

// sched_switch totals of one process over the window (all processes, from SQL aggregates).
struct SwitchTotals {
  int32_t pid = 0;
  int64_t count = 0;
  int64_t off_ns = 0;
  int64_t runq_ns = 0;
  int64_t max_ns = 0;  // the longest off-CPU interval (the brief's worst_stall_ms)
  // The longest that was a stall of the job (ReadSwitchTotals): it began once the job had
  // started (its first CUDA call) and was not a wait for work.
  int64_t stall_max_ns = 0;
  // Sleeps its parent process ended: waiting for work by design (a DataLoader worker waiting
  // for the next index request, which the training process sends).
  int64_t idle_ns = 0;
};

// trace --stack: the rows of one (op, process, stack) in the window, aggregated in SQL.
struct StackUse {
  Op op = Op::kSchedSwitch;
  int32_t pid = 0;
  int64_t stack_id = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  int64_t preempted = 0;  // sched_switch rows with kind = preempted
};

// One on-CPU profile sample (a cpu_sample row): a tracked thread was running when its CPU's
// sampling clock fired.
struct CpuSampleRow {
  int64_t ts_ns = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  int64_t stack_id = 0;  // 0 = no stack (capture failed or skipped)
  bool in_kernel = false;
};

// One frame of a stored stack (stack_frames), innermost first.
struct StackFrameRow {
  bool python = false;
  std::string function;  // "" when unresolved
  std::string file;      // "" when unknown
  int64_t line = 0;
  std::string module;    // native: the mapped file
};

// One NCCL call row (ops ncclAllReduce … ncclCommDestroy; docs/schema.md says which column
// holds what).
struct NcclCallRow {
  int64_t ts = 0;  // session ns: when the call was entered (a collective's enqueue time)
  int64_t duration = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  Op op = Op::kNcclAllReduce;
  int64_t ret = kNull;
  int64_t bytes = kNull;  // count × datatype size; communicator init: nranks
  int64_t kind = kNull;   // ncclDataType_t; communicator init: the rank
  int64_t seq = kNull;    // collectives: sequence number in the communicator; send/recv: peer
  int64_t stream = kNull;
  std::string comm;  // "nccl <id hash>" (shared by the ranks) or "nccl handle 0x…"
};

struct WindowRowsOptions {
  // How far before the window an interval that ends inside it may have begun (a thread asleep
  // since before the window): rows from this far back are read into `carry_in`.
  int64_t carry_in_ns = 0;
  int64_t max_launch_samples = 20000;
  int64_t max_kernel_rows = 500;  // kernel_launches: the most launched (pid, op, kernel) rows
};

struct WindowRows {
  int64_t cores = 0;  // sessions.cores
  int64_t drops = 0;
  int32_t tracer_pid = 0;                      // sessions.tracer_pid, 0 = unknown (schema < 3)
  // sessions.launches_once (schema 5): each launch counted once. false: nested driver launches
  // were counted too, so only runtime-layer launch counts are launches.
  bool launches_once = false;
  // sessions.launch_duty (schema 6): launches were counted in one second of every N; 1 = all.
  int64_t launch_duty = 1;
  // What the counted launches stand for, per process (launch_estimate.h).
  LaunchEstimates launch_estimates;
  std::map<int32_t, ProcessRecord> processes;  // every process of the session
  // Tracked processes' rows in the window except launches, plus OOM kills of any process, by ts.
  std::vector<Event> events;
  // Tracked processes' interval rows (off-CPU, syncs, copies) that began up to carry_in_ns
  // before the window and end inside it, by ts.
  std::vector<Event> carry_in;
  std::vector<Event> launch_samples;        // at most max_launch_samples launch rows
  std::vector<OpSecondRow> op_seconds;      // the window's seconds, every pid, by sec
  std::vector<CopyAggregateRow> copy_aggregates;  // every pid
  std::vector<KernelLaunchRow> kernel_launches;   // by launches, most first
  std::vector<SwitchTotals> switch_totals;  // every pid with sched_switch rows in the window
  std::vector<SystemSnapshot> snapshots;    // by ts
  int64_t events_in_window = 0;             // every row of the window
  std::vector<StackUse> stack_uses;         // every pid, window rows with a stack
  // The on-CPU profile (schema 11): its rate (0 = none) and the window's samples, by ts. Not
  // in `events`.
  int64_t profile_hz = 0;
  std::vector<CpuSampleRow> cpu_samples;
  // NCCL rows of the window, every pid, by ts; plus communicator inits from before the window
  // (which ranks a communicator has).
  std::vector<NcclCallRow> nccl_calls;
  // The frames of those stacks (the stack_frames view), innermost first; stacks whose frames
  // are not valid JSON are left out and counted in malformed_stacks.
  std::map<int64_t, std::vector<StackFrameRow>> stack_frames;
  int64_t malformed_stacks = 0;
  // Schema 4: NVML samples of the window (by ts, then gpu) and the session's GPUs; empty for
  // older files and recordings made without NVML.
  std::vector<GpuDevice> gpu_devices;
  std::vector<GpuSample> gpu_samples;
  // nvmlDeviceGetProcessUtilization per process (gpu_process_samples), by ts then gpu, pid;
  // empty where the driver does not report it.
  std::vector<GpuProcessSample> gpu_process_samples;
  // Schema 10: cgroup CPU quota samples from the last one before the window to the window's
  // end (by cgroup, then ts), and the cgroups the session's processes were seen in (by pid, ts).
  std::vector<CgroupCpuSample> cgroup_cpu;
  std::vector<ProcessCgroup> process_cgroups;
  // Schema 12: memory cgroup samples, the same way (by cgroup, then ts).
  std::vector<CgroupMemorySample> cgroup_memory;
};

// The session's first CUDA call (session ns): where the job starts. kNull when it made none.
StatusOr<int64_t> ReadFirstCudaCall(StoreReader& reader, int64_t session);

// SQL for the sched_switch totals of each process with rows in a window of a session, one row
// per pid, columns named pid, switches, off_ns, runq_ns, max_ns, stall_max_ns, idle_ns,
// preempted (the SwitchTotals fields, then the rows with kind = preempted). Parameters:
// ?1 session, ?2 begin ns, ?3 end ns, ?4 the job's start (ReadFirstCudaCall; INT64_MIN when
// unknown). `wakers`: the file has the waker columns (schema 3); without them nothing is idle.
std::string SwitchTotalsSql(bool wakers);

StatusOr<WindowRows> ReadWindowRows(StoreReader& reader, const SessionWindow& window,
                                    const WindowRowsOptions& options);

// sessions.launch_duty (schema 6): launches were counted one second in N; 1 for older files and
// sessions that counted every launch.
StatusOr<int64_t> ReadLaunchDuty(StoreReader& reader, int64_t session);

// The session's GPUs and their NVML samples in [begin_ns, end_ns), by ts then gpu (schema 4).
Status ReadGpuSamples(StoreReader& reader, int64_t session, int64_t begin_ns, int64_t end_ns,
                      std::vector<GpuDevice>* devices, std::vector<GpuSample>* samples);

// Launches per (pid, op, kernel) over the window, most launched first, at most max_rows, of one
// process (pid > 0) or all (0); and
// whether the session counted each launch once (sessions.launches_once).
struct KernelLaunches {
  std::vector<KernelLaunchRow> rows;
  bool launches_once = false;
  int64_t launch_duty = 1;  // sessions.launch_duty: counted one second in N
  LaunchEstimates estimates;  // what `rows` stand for: row.launches x estimates.Scale(pid)
};
StatusOr<KernelLaunches> ReadKernelLaunches(StoreReader& reader, const SessionWindow& window,
                                            int64_t max_rows, int32_t pid);

// Every process of a session (processes table), by pid.
Status ReadProcesses(StoreReader& reader, int64_t session,
                     std::map<int32_t, ProcessRecord>* out);

}  // namespace gw
