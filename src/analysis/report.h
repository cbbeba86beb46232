// The values gpuwhy's causal engine produces: a Report (findings, GPU feed-time attribution,
// top processes, call sites, kernels) and a DiffReport, and the options that choose a window.
// Front ends render them (explain.h); the analysis's internal headers build them and include
// only this file.
//
// Stable API: other components code against this header. Add fields, never repurpose them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "store/window.h"

namespace gw {

struct ExplainOptions {
  // Session and time range, resolved by the rule in store/window.h (shared with the MCP tools);
  // by default the last 2 minutes of the newest session.
  WindowRequest window = WindowRequestWithDefaultSince(kDefaultSinceNs);
  int32_t pid = 0;        // 0 = every tracked process; else that process and its tracked children
  bool evidence = false;  // ReportToText prints each finding's evidence SQL
  // A window holding more raw rows than this is explained from its rollups, with raw rows read
  // for its incident only (LongWindowSummary); 0 = always from raw rows (explain --raw).
  int64_t max_raw_rows = 1'000'000;
};

// How a long window was answered (issue 19): the whole window from the rollup tier
// (thread_rollups), the causal chains from the raw rows of its incident, the stretch in which
// the main thread lost the most time. tier "raw" (the default) = the whole window from raw
// rows, and nothing else here is set.
struct LongWindowSummary {
  std::string tier = "raw";  // "raw" | "rollups+incident" | "rollups" (no raw rows left)
  int64_t from_ns = 0;       // the whole window, session ns
  int64_t to_ns = 0;
  std::string label;           // "last 60 min"
  int64_t estimated_rows = 0;  // raw rows in the window (op_seconds counts)
  bool has_raw = false;        // the session has raw rows left
  int64_t raw_first_ts = 0;    // its oldest (older ones were pruned when after from_ns)
  bool has_incident = false;
  bool incident_latest = false;  // no job to follow: the latest stretch with raw rows
  int64_t incident_from_ns = 0;
  int64_t incident_to_ns = 0;
  double incident_lost_s = 0;  // the main thread's lost time in the incident
  double typical_lost_s = 0;   // the same per incident length, averaged over the active span
  int32_t main_pid = 0;        // the process with the most CUDA calls
  int32_t main_tid = 0;
  std::string main_label;
  double active_s = 0;  // from its first to its last CUDA call in the window
  // The main thread over the active span (s), from its rollups: lost = runq + io + fault +
  // blocked beyond its CUDA syncs.
  double runq_s = 0, blocked_s = 0, io_s = 0, fault_s = 0, sync_s = 0, lost_s = 0;
  int64_t switches = 0;
  double calls_per_s_median = 0;    // the main process's CUDA calls (launches excluded) per s
  double calls_per_s_incident = 0;  // ... in the incident
  int64_t low_buckets = 0;          // 10 s buckets below half the median
  int64_t buckets = 0;
  // Every other tracked process (workers, helpers), all threads (s).
  double others_runq_s = 0, others_io_s = 0, others_fault_s = 0;
  int64_t others_switches = 0;
};

enum class Severity { kLow = 0, kMedium = 1, kHigh = 2 };
const char* SeverityName(Severity s);  // "LOW" | "MEDIUM" | "HIGH"

// One number a finding rests on, e.g. {"runq_wait_s", 41.2, "s"}.
struct Metric {
  std::string name;
  double value = 0;
  std::string unit;  // "s", "ms", "us", "%", "x", "count", "ops/s", "bytes", ""
};

// SQL a user can paste into `gpuwhy query` to check a finding's numbers (read-only, one
// statement, absolute session timestamps already substituted).
struct EvidenceQuery {
  std::string what;  // what the rows show
  std::string sql;
};

// NVML truth during the intervals a host-side finding blames (samples of the job's GPU whose
// interval the main thread spent mostly in the finding's cause) against the quietest samples
// (the quarter with the least host waiting). Present only when the window has GPU samples.
struct GpuEffect {
  bool present = false;
  int32_t gpu = 0;
  std::string metric;     // "SM active" (GPM) or "utilization" (NVML, nvidia-smi's)
  double blamed_pct = 0;  // mean of `metric` over the blamed samples
  double quiet_pct = 0;   // mean over the quietest samples
  int64_t blamed_samples = 0;
  int64_t quiet_samples = 0;
  double blamed_s = 0;  // wall seconds the blamed samples cover
  // GPU-seconds idle the cause explains: blamed_s × (quiet − blamed) / 100, at least 0.
  double gpu_idle_s = 0;
};

struct TimeInterval {
  int64_t begin_ns = 0;  // session ns
  int64_t end_ns = 0;
};

struct Finding {
  std::string rule;  // stable id: "cpu-contention", "dataloader-starvation", ...
  Severity severity = Severity::kLow;
  std::string cause;                      // "CPU scheduling contention"
  std::string effect;                     // "CUDA throughput drop"
  std::vector<std::string> root;          // "Root:" lines
  std::vector<std::string> effects;       // "Effect:" lines
  std::vector<std::string> contributing;  // "Contributing:" lines
  std::vector<std::string> fix;           // "Fix:" lines (concrete commands)
  std::vector<EvidenceQuery> evidence;
  std::vector<Metric> metrics;
  double lost_s = 0;  // GPU-feed seconds this cause explains (ranking key after severity)
  GpuEffect gpu;      // with NVML samples: SM activity while this cause held the job
  // Host-side findings: the stretches (whole seconds, session ns) in which the blamed cause
  // held the main thread; empty for findings about the whole window.
  std::vector<TimeInterval> intervals;
};

// Where the GPU-feeding threads' time went (see docs/detections.md for the precedence).
enum class FeedCause {
  kRunning,       // on CPU, not in a CUDA call
  kRunqWait,      // runnable, waiting for a CPU (contention)
  kBlockedIo,     // sleeping in I/O wait (block I/O, reads)
  kPageFault,     // sleeping after a page fault (major faults, reclaim)
  kBlockedOther,  // sleeping otherwise: waiting for workers, locks, pipes
  kMemcpy,        // inside a cudaMemcpy* call (and on CPU)
  kSync,          // inside a CUDA synchronize call (and on CPU or waiting on the GPU)
  // Critical path only (a waiting thread's time resolved through who woke it):
  kHelperWork,     // waiting for a CUDA helper thread (autograd) while it ran or launched
  kWorkerCompute,  // waiting for a batch while the DataLoader worker that delivered it computed
  kThreadHold,     // waiting for another thread of the process (no CUDA helper) while it ran:
                   // the GIL or a lock it held
};
const char* FeedCauseName(FeedCause c);   // stable key: "running", "runq_wait", ...
const char* FeedCauseLabel(FeedCause c);  // human label

struct FeedTimeRow {
  FeedCause cause = FeedCause::kRunning;
  double seconds = 0;  // summed over threads
  double pct = 0;      // of the group's thread-seconds (threads x window)
};

// Attribution for one group of threads: the training process's CUDA-calling threads, its
// DataLoader workers (one representative thread per worker process: its busiest), or the
// critical path of the main thread (its waits resolved through the threads that woke it).
struct FeedTimeGroup {
  std::string name;               // "training threads (CUDA callers)" / "DataLoader workers"
  int32_t threads = 0;            // threads observed
  double thread_seconds = 0;      // sum of each thread's observed lifetime in the window
  std::vector<FeedTimeRow> rows;  // one per FeedCause, in enum order
};

// ---- The GPU-time budget (docs/detections.md, "The GPU-time budget") ----
//
// The job's window (the main thread's lifetime in it) split into the GPU busy for this job, busy
// for other processes and idle; and the main thread's critical path split into a complete set
// of causes, each with the seconds it held the path and the seconds of GPU idle time it
// explains ("lost"). Every finding's lost_s is its cause's lost seconds here.
//
// X(enumerator, stable key, label)
#define GW_BUDGET_CAUSES(X)                                                                       \
  X(kHostCompute, "host_compute", "main thread on the CPU (Python, dispatch, launches, batches)") \
  X(kAllocator, "allocator", "main thread in CUDA allocator calls (cudaMalloc, cudaFree)")        \
  X(kHelperCompute, "helper_compute", "CUDA helper threads on the CPU (autograd dispatch)")       \
  X(kThreadHold, "thread_hold", "another thread of the process held it (GIL or a lock)")          \
  X(kGilHold, "gil_hold", "another thread of the process held the Python GIL")                    \
  X(kBatchCompute, "batch_compute", "DataLoader workers computing the batch")                     \
  X(kBatchIo, "batch_io", "DataLoader workers on I/O")                                            \
  X(kBatchWait, "batch_wait", "DataLoader workers asleep until the network or a timer woke them") \
  X(kProcessIo, "process_io", "the training process's own I/O (reads, writes, checkpoints)")      \
  X(kHostWrite, "host_write", "main thread on the CPU writing files (serializing, page cache)")    \
  X(kRunqOwn, "runq_own", "waiting for a CPU held by the job's own threads")                      \
  X(kRunqOther, "runq_other", "waiting for a CPU held by other processes")                        \
  X(kRunqQuota, "runq_quota", "runnable while the job's cgroup was throttled (CPU quota spent)") \
  X(kHostSleep, "host_sleep",                                                                     \
    "asleep until a timer or an interrupt woke it (sleep, polling, timeouts, network)")          \
  X(kOtherProgram, "other_program", "waiting for another program (a subprocess, pipes, sockets)") \
  X(kPageFault, "page_fault", "page faults and reclaim")                                          \
  X(kMemcpy, "memcpy", "host-device copies")                                                      \
  X(kSyncWait, "sync_wait", "waiting for the GPU to finish (syncs)")                              \
  X(kNotAttributed, "not_attributed", "not attributed (idle workers, unknown wakers)")

enum class BudgetCause {
#define GW_BUDGET_ENUM(e, key, label) e,
  GW_BUDGET_CAUSES(GW_BUDGET_ENUM)
#undef GW_BUDGET_ENUM
};
inline constexpr size_t kBudgetCauseCount = 0
#define GW_BUDGET_COUNT(e, key, label) +1
    GW_BUDGET_CAUSES(GW_BUDGET_COUNT)
#undef GW_BUDGET_COUNT
    ;
const char* BudgetCauseKey(BudgetCause c);    // "host_compute"
const char* BudgetCauseLabel(BudgetCause c);  // human label

struct BudgetLine {
  BudgetCause cause = BudgetCause::kNotAttributed;
  double path_s = 0;  // seconds this cause held the main thread's critical path
  double lost_s = 0;  // of those, seconds the GPU sat idle for this job (sync_wait: seconds the
                      // GPU was busy with other processes while the job waited for it)
};

struct GpuBudget {
  bool present = false;  // false when the window has no main CUDA thread
  // Where the GPU's busy time comes from: "nvml-process" (NVML utilization split by the
  // per-process samples), "nvml" (device utilization; other processes not told apart), or
  // "stream" (no GPU samples: the GPU counts busy while the host waited in syncs and through
  // the host time of steps whose sync still found it working).
  std::string source;
  int32_t gpu = -1;           // the job's GPU (NVML index), -1 with stream evidence
  double window_s = 0;        // the job's loop (Facts::loop_begin): what every line splits
  // The main thread's lifetime in the window outside the loop: before the job's first CUDA call
  // (its process started in the window) and after its last (it exited in the window).
  double startup_s = 0;
  double exit_s = 0;
  double gpu_busy_job_s = 0;  // the GPU busy with this job's work
  double gpu_busy_other_s = 0;
  double gpu_idle_s = 0;
  double idle_attributed_s = 0;    // sum of the host causes' lost_s
  double idle_unattributed_s = 0;  // idle time with no host cause on the path (lag, sampling)
  std::vector<BudgetLine> lines;   // every BudgetCause, in enum order
  // The thread that held the main thread up most (thread_hold): tid, its seconds.
  int32_t hold_tid = 0;
  double hold_s = 0;
  bool gpu_bound = false;  // the job kept its GPU busy ≥ thresholds::kGpuBoundBusyShare
};

struct ProcessStat {
  int32_t pid = 0;
  std::string name;
  std::string role;  // "training", "worker", "competitor", "other"
  bool tracked = false;
  int64_t context_switches = 0;
  double off_cpu_s = 0;
  double runq_s = 0;
  // The longest off-CPU interval that stalled it: from the job's first CUDA call on, waits for
  // work left out (SwitchTotals::stall_max_ns).
  double worst_stall_ms = 0;
  double idle_s = 0;  // asleep waiting for work: sleeps its parent process ended
  double cpu_taken_from_feeders_s = 0;  // time it ran while a feeding thread waited for a CPU
  int64_t cuda_calls = 0;
  // Schema 12 (process_cgroups): its container (full id) and pod, and its pid inside its own PID
  // namespace (0 = unknown); empty/0 outside containers.
  std::string container_id;
  std::string pod_uid;
  int32_t ns_pid = 0;
};

// A container or pod the job's tracked processes ran in (process_cgroups).
struct ContainerInfo {
  std::string runtime;       // docker, containerd, cri-o, podman, "" = unknown
  std::string container_id;  // full id; "" = a pod's cgroup, not a container's
  std::string pod_uid;
  std::string pod_name;  // from the downward-API environment; "" = not given
  std::string pod_namespace;
  std::vector<std::pair<int32_t, int32_t>> pids;  // (host pid, pid in the container; 0 = unknown)
};

struct SystemContext {
  bool present = false;  // false when the window has no system_snapshots rows
  double cpu_pct = 0;
  double mem_pct = 0;
  double load1 = 0;
  int64_t cores = 0;
  double swap_mb = 0;
  double iowait_pct = 0;
  int64_t major_faults_per_s = 0;
};

// One GPU over the window, from NVML samples (trace --gpu-interval): medians per sample, the
// way dashboards aggregate. GPM values are < 0 when the device has no GPM.
struct GpuSummary {
  int32_t gpu = 0;
  std::string name;  // "NVIDIA H200"
  bool gpm = false;
  int64_t samples = 0;
  double util_pct = -1;  // NVML utilization: what nvidia-smi shows
  double mem_util_pct = -1;
  double sm_active_pct = -1;     // GPM SM_UTIL
  double sm_occupancy_pct = -1;  // GPM SM_OCCUPANCY
  double tensor_active_pct = -1;
  double dram_bw_pct = -1;
  double sm_clock_mhz = -1;
  double power_w = -1;
  double mem_used_gb = -1;
};

struct ReportWindow {
  int64_t session = 0;
  int64_t from_ns = 0;  // session ns
  int64_t to_ns = 0;
  std::string label;  // "last 2 min", "12.0s–40.0s"
};

// trace --stack: one source location and the window's events whose stacks point there.
struct CallSite {
  std::string location;  // "train.py:142": the innermost user frame (Python first), short
  std::string file;      // full path; "" for a native location without line info
  int64_t line = 0;
  std::string function;     // function at that location ("" when unknown)
  std::string via;          // the innermost frame when it is library code, e.g.
                            // "synchronize (torch/cuda/__init__.py:1162)"; "" when none
  std::string source_line;  // the line's text, when the file was readable at explain time
  std::string processes;    // process names, e.g. "pt_data_worker ×4"
  int64_t count = 0;        // events (sched_switch: sampled switches)
  double total_ms = 0;
  double avg_ms = 0;
  double max_ms = 0;
  int64_t preempted = 0;  // sched_switch: preempted while runnable
  int64_t blocked = 0;    // sched_switch: went to sleep
};

struct CallerSection {
  std::string op;               // "cudaStreamSync"; "sched_switch" for the victims section
  int64_t with_stacks = 0;      // rows of `op` in the window that carry a stack
  std::vector<CallSite> sites;  // at most 5: callers by total time; victims by preemptions,
                                // then off-CPU time
};

// Where a group of the job's threads spent its CPU, from the on-CPU profile (trace
// --profile-hz): the threads' samples grouped by site (PickStackSite), most samples first.
// A site's count is its samples, total_ms the CPU time they stand for (count / profile_hz).
struct CpuProfileSection {
  std::string role;             // "main", "helpers", "gil_holder"
  std::string title;            // "the main thread (tid 4242)"
  std::vector<int32_t> tids;    // the threads it covers
  int64_t samples = 0;          // their samples in the window
  int64_t kernel_samples = 0;   // of them, taken while the thread was in the kernel
  // Of them, taken inside a CUDA sync of that thread: the CPU spinning while it waits for the
  // GPU (CUDA's default sync spins). Counted as a sync wait by the budget; not in `sites`.
  int64_t sync_samples = 0;
  int64_t profile_hz = 0;
  double cpu_s = 0;             // samples / profile_hz
  double window_s = 0;          // the window
  std::vector<CallSite> sites;  // at most 5, of the samples outside CUDA syncs
};

// One kernel's launches by one process in the window.
struct KernelStat {
  std::string name;  // demangled; "fn@0x…" when the tracer could not name it
  int32_t pid = 0;
  int64_t launches = 0;
  double per_s = 0;
  double share_pct = 0;  // of every launch in the window
};

struct KernelSummary {
  // Launches were counted one second in launch_duty (trace --launch-duty).
  int64_t launch_duty = 1;
  // The figures below are estimates (launch_estimate.h): `counted` launches were seen, the
  // estimate is `launches` ± `error`, over `uncovered_s` of launching the probes did not see.
  bool estimated = false;
  int64_t counted = 0;
  double error = 0;
  double uncovered_s = 0;
  int64_t launches = 0;         // every launch in the window, all processes
  int64_t kernels = 0;          // distinct (process, kernel) pairs
  int64_t unnamed = 0;          // launches of kernels left as fn@0x…
  int64_t graph_kernels = 0;    // of `launches`: kernels run by CUDA Graph launches (counted)
  std::vector<KernelStat> top;  // most launched first, at most 20
};

struct Report {
  ReportWindow window;
  SystemContext system;
  std::vector<GpuSummary> gpus;  // NVML samples in the window, per GPU (empty without them)
  // Set when the job's GPU was busy and host-side causes explain little of the window:
  // "the GPU is the bottleneck: …". Empty otherwise.
  std::string gpu_verdict;
  std::vector<Finding> findings;  // most severe first, then by lost_s
  GpuBudget budget;               // where the job's GPU time went (rendered first)
  std::vector<FeedTimeGroup> feed_time;
  std::vector<ProcessStat> top_processes;  // by off-CPU time, training and workers first
  std::vector<ContainerInfo> containers;   // the tracked processes' containers and pods
  int64_t events = 0;                      // raw rows in the window (all pids)
  std::vector<std::string> notes;          // data caveats: drops, missing sources, sampled launches
  bool evidence = false;                   // copied from options: ReportToText prints evidence SQL
  std::string db_path;                     // the file explained: evidence commands name it
  // trace --stack (empty otherwise): top callers of the CUDA ops that took the most time, and
  // where the feeding processes were when they left the CPU.
  std::vector<CallerSection> callers;
  CallerSection sched_victims;
  // The on-CPU profile (empty without one): where the main thread's, the CUDA helper threads'
  // and a GIL holder's CPU went, for the groups that were on the CPU for a material share of
  // the window.
  std::vector<CpuProfileSection> cpu_profiles;
  KernelSummary kernels;          // launches per kernel (op_seconds; empty without launches)
  LongWindowSummary long_window;  // tier "raw" unless the window was too long for raw rows
};

// ---- diff: before/after between two sessions (same or different files) ----

// kNone: a figure shown for context that is neither better nor worse alone (a faster loop
// syncs, and so switches, more often).
enum class Verdict { kBetter, kWorse, kSame, kNone };
const char* VerdictName(Verdict v);  // "better" | "worse" | "same" | "none"

struct DiffRow {
  std::string metric;  // "context switches (training process)"
  std::string key;     // stable: "train_ctx_switches"
  std::string unit;
  double before = 0;
  double after = 0;
  double change_pct = 0;  // (after - before) / before * 100; 0 when before == 0
  double ratio = 0;       // after / before (0 when before == 0)
  bool lower_is_better = true;
  Verdict verdict = Verdict::kSame;
};

struct DiffReport {
  std::string label_a;  // "before.db session 1"
  std::string label_b;
  double duration_a_s = 0;
  double duration_b_s = 0;
  std::vector<DiffRow> rows;
  std::vector<std::string> findings_a;  // "[HIGH] cause → effect"
  std::vector<std::string> findings_b;
  std::vector<std::string> notes;  // caveats, e.g. GPU samples on one side only
};

}  // namespace gw
