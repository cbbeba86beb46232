// Internal: the measurements every rule reads, computed once per window by ComputeFacts().
// Rules (rules.cc) only read Facts and WindowData; they never query anything.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/nccl.h"
#include "analysis/report.h"
#include "analysis/timeline.h"
#include "analysis/window_data.h"

namespace gw {

// Time spans [start, end), ns.
using TimeSpans = std::vector<std::pair<int64_t, int64_t>>;

// One baseline/peak bucket (thresholds::kBucketNs, aligned to multiples of it).
struct Bucket {
  int64_t start = 0;  // clipped to the window
  int64_t end = 0;
  std::vector<int64_t> sync_ns;  // main process's syncs starting here
  int64_t sync_p50 = 0;
  int64_t sync_p99 = 0;
  double host_wait_share = 0;  // feeders' run-queue + I/O + fault time / their thread time
  double cuda_ops_per_s = 0;   // main process, full seconds only
  int full_seconds = 0;
};

// The main thread's waits for a batch: sleeps ended (directly, or through a relay thread of
// the training process such as the pin-memory thread) by a DataLoader worker.
struct BatchWaits {
  int64_t count = 0;
  int64_t total_ns = 0;
  std::vector<int64_t> durations;
  CauseTimes delivered{};  // the delivering worker's state during the waits (busiest thread)
};

// The main thread's waits for CUDA helper threads of its own process (in PyTorch: backward,
// run by the autograd engine's thread).
struct HelperWaits {
  int64_t count = 0;
  int64_t total_ns = 0;
};

struct SlowSyncs {
  int64_t threshold_ns = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  CauseTimes thread{};                      // the syncing thread's time by cause during them
  CauseTimes workers{};                     // worker thread-ns during them
  std::map<int32_t, int64_t> runq_holders;  // who held the CPU while the syncing thread waited
};

// A process that is not one of the job's feeders and held a CPU while a feeder waited for one.
struct Competitor {
  int32_t pid = 0;
  int64_t ns = 0;      // CPU time taken from feeders
  bool child = false;  // started by the job (exec'd descendant), e.g. subprocess.Popen
};

// A thread's CPU spent writing files, from the on-CPU profile (cpu_profile.h WriterSamples).
struct WriterProfile {
  int64_t working_samples = 0;     // the thread's samples outside CUDA syncs
  int64_t write_samples = 0;       // in the kernel under a write call
  int64_t writer_samples = 0;      // those and the samples under the writing Python functions
  double writer_s = 0;             // writer_samples at the profile's rate
  std::vector<int64_t> writer_ts;  // the writer samples' times, ascending
  std::string function;            // the writing Python function with the most samples ("": none)
  std::string location;            // its file:line
};

// Critical-path time per BudgetCause (report.h), ns.
using BudgetTimes = std::array<int64_t, kBudgetCauseCount>;
inline int64_t& At(BudgetTimes& t, BudgetCause c) { return t[static_cast<size_t>(c)]; }
inline int64_t At(const BudgetTimes& t, BudgetCause c) { return t[static_cast<size_t>(c)]; }

// One "blocked otherwise" stretch of the main thread with what it resolved to through its waker.
struct PathSpan {
  int64_t start = 0;
  int64_t end = 0;
  CauseTimes causes{};
  BudgetTimes detail{};  // the same stretch by budget cause
};

// The CPU bandwidth limit of the job's cgroup (cgroup_cpu_samples): the cgroup, or the ancestor,
// with a quota that throttled the job most over the window.
struct CpuQuota {
  std::string cgroup;
  int32_t version = 2;
  int64_t quota_us = 0;
  int64_t period_us = 0;
  int64_t periods = 0;            // over the window
  int64_t throttled_periods = 0;  // periods that ended throttled
  int64_t throttled_ns = 0;       // the cgroup's run queues throttled, summed over CPUs
  int64_t usage_ns = kNull;       // CPU time the cgroup used
  int64_t span_ns = 0;            // the time its samples cover in the window
  // Per second of the window: the share of the feeders' run-queue time not held by the job that
  // the throttling explains (throttled CPU-ns / (that + CPU-ns other processes used)).
  std::vector<double> share_by_sec;
  // The refill grid: once a period the bandwidth timer refills the quota and every throttled
  // thread of the cgroup runs again, so their run-queue waits end together. The offset of those
  // ends within the period (the timestamp modulo period_us, in ns), or -1 where the job's waits
  // show no such pile-up. With a grid, a thread's wait ending on it was the quota's and the
  // per-second share above is used only for the merged state of workers with no delivering
  // thread known (CreditAnyWorker: no one wait to read an end from).
  int64_t refill_phase_ns = -1;
  double refill_share = 0;  // the share of the job's run-queue time (long waits) ending on it
  // Whether a run-queue wait ending at end_ns ended on the refill grid.
  bool EndsOnRefill(int64_t end_ns) const;
  double cpus() const {
    return period_us > 0 ? static_cast<double>(quota_us) / static_cast<double>(period_us) : 0;
  }
};

// The memory limit of the job's memory cgroup (cgroup_memory_samples): of the cgroups its
// processes' memory was charged to and their ancestors that set a limit, the one whose limit
// acted most over the window (its events), else the tightest.
struct MemoryLimit {
  std::string cgroup;
  int32_t version = 2;
  int64_t max_bytes = kNull;   // memory.max / memory.limit_in_bytes
  int64_t high_bytes = kNull;  // memory.high (v2)
  int64_t usage_peak = kNull;  // the highest usage sampled in the window
  // Over the window (differences of the cumulative counters; 0 where not kept).
  int64_t events_high = 0;  // went over memory.high: throttled and reclaimed
  int64_t events_max = 0;   // hit memory.max (v1: failcnt, charges refused at the limit)
  int64_t events_oom = 0;
  int64_t events_oom_kill = 0;
  int64_t major_faults = kNull;  // the cgroup's major faults (memory.stat)
  int64_t hits() const { return events_high + events_max + events_oom + events_oom_kill; }
  int64_t limit() const { return max_bytes != kNull ? max_bytes : high_bytes; }
};

// Who and what held the main thread's critical path in its waits, ns on the path (the critical
// path's resolution fills them; the budget lines they belong to hold the same time in all).
struct PathHolders {
  // thread_hold: threads of the main process that held the main thread up while running.
  std::map<int32_t, int64_t> thread;
  // gil_hold: the ns seen as GIL hand-offs, by holder: wake-ups the holder made just after
  // releasing CPython's GIL (sched_switch kind 4), and the timed waits of the same wait.
  std::map<int32_t, int64_t> gil;
  // process_io: threads other than the main thread that held it up while blocked on I/O (the
  // main thread waited for them: a lock held across a write, a join).
  std::map<int32_t, int64_t> io;
  // other_program: the program (pid) whose wake-up ended the wait.
  std::map<int32_t, int64_t> program;
  // host_sleep: the stack where the sleeping thread left the CPU (trace --stack; 0: none
  // sampled), and how many sleeps there were.
  std::map<int64_t, int64_t> sleep_stack;
  int64_t sleeps = 0;
};

struct Facts {
  const WindowData* w = nullptr;
  // The job's lifetime inside the window (the main process's, clipped to the window): every
  // "% of wall clock" and rate uses it.
  int64_t job_begin = 0;
  int64_t job_end = 0;
  int64_t window_ns = 0;
  double window_s = 0;
  // The job's loop: its lifetime less its start-up before the main process's first CUDA call
  // (a process started in the window: imports, model and data set-up) and its exit after the
  // last (a process that exited in it). The GPU-time budget covers the loop only: a steps/s
  // slowdown never includes start-up, and the loop's causes are what a fix speeds up.
  int64_t loop_begin = 0;
  int64_t loop_end = 0;
  int64_t cores = 0;
  // Tracked rows of the window with driver calls nested in a runtime call removed (a runtime
  // call and the driver calls it makes count once: calls, bytes and time).
  std::vector<Event> events;

  // Roles (docs/detections.md, "Roles"). The main thread is the process's initial thread
  // (tid == pid, CPython's main thread) when it calls CUDA; helpers are its other CUDA threads.
  int32_t main_pid = 0;
  int32_t main_tid = 0;
  std::vector<int32_t> helper_tids;  // other CUDA-calling threads of the main process
  std::vector<int32_t> cuda_pids;    // tracked processes with CUDA calls (main first)
  std::vector<int32_t> worker_pids;  // DataLoader workers: forked descendants / batch feeders
  std::vector<int32_t> child_pids;   // exec'd descendants that do not feed: other programs
  std::map<int32_t, int32_t> worker_rep_tid;  // worker pid → its busiest thread
  std::string main_name;
  std::string main_cmdline;

  // Timelines.
  std::optional<ThreadTimeline> main_tl;
  std::vector<ThreadTimeline> train_tls;   // CUDA-calling threads of the main process
  std::vector<ThreadTimeline> worker_tls;  // one per worker process: its busiest thread
  CauseTimes main_totals{};                // the main thread's own time
  CauseTimes path{};                       // the main thread's time, waits resolved
  std::vector<PathSpan> path_spans;        // the resolved stretches, by start
  BudgetTimes path_detail{};               // the whole critical path by budget cause
  // The main thread's on-CPU samples spent writing files: its running time in them is
  // host_write, not host_compute (PathDetailOverlap). Empty without a profile.
  WriterProfile main_writer;
  // The main thread's device allocator calls (cudaMalloc, cudaFree, …), merged and by start: its
  // running time in them is the budget's allocator line, not host_compute (PathDetailOverlap).
  TimeSpans main_alloc_spans;
  PathHolders holders;  // who and what held the critical path in its waits
  // The delivering workers' whole batch cycles (each from the worker's previous delivery the
  // path waited for to the next), by kBatchCompute, kBatchIo and kBatchWait: what limits how fast
  // they deliver. The path's waits see only the end of each cycle: a worker that sleeps 30 ms
  // and computes 5 ms a batch is computing for most of a short wait.
  BudgetTimes batch_cycles{};
  // Share of the feeders' run-queue time whose CPU holder was the job's own (IsOwnPid): splits
  // run-queue time of unknown holder.
  double own_runq_share = 0;
  GpuBudget budget;  // budget.cc: the window's GPU time and its idle seconds by cause
  // The training threads' and the workers' own time over the job's loop (FindLoop).
  CauseTimes train_totals{};
  CauseTimes worker_totals{};
  int64_t train_thread_ns = 0;
  int64_t worker_thread_ns = 0;
  // Feeders' run-queue time by CPU holder (kQuotaHolder: while the job's cgroup was throttled).
  std::map<int32_t, int64_t> runq_holders;
  std::optional<CpuQuota> quota;  // the CPU limit of the job's cgroup, when one is set
  std::optional<MemoryLimit> memory_limit;  // the memory limit of the job's cgroup, when one is set
  std::vector<Competitor> competitors;      // biggest first, above the floor
  // Feeders' run-queue time held by gpuwhy's own tracer, when above the competitors' floor: on a
  // small host the tracer itself takes CPU from the job, which a finding must say, not hide.
  int64_t tracer_runq_ns = 0;
  int64_t feeder_cpus = 0;                  // distinct CPUs the feeders' switches were on
  std::vector<int32_t> feeder_cpu_list;     // those CPUs, ascending
  double host_busy = -1;  // mean system CPU busy share (0-1) of the window's snapshots; -1: none

  // Critical path of the main thread (ns).
  BatchWaits waits;
  HelperWaits helper_waits;
  double lost_contention = 0;
  double lost_io = 0;
  double lost_memory = 0;
  double lost_starvation = 0;
  double lost_wait_other = 0;

  // Syncs.
  std::string sync_op;  // the main process's most frequent sync op
  int64_t sync_count = 0;
  std::vector<Bucket> buckets;
  int base_bucket = -1;
  int peak_bucket = -1;  // highest sync p99
  int64_t base_p50 = 0;
  int64_t base_p99 = 0;
  int64_t peak_p99 = 0;
  SlowSyncs slow;
  int tput_peak_bucket = -1;
  int tput_low_bucket = -1;

  // Per-second CUDA ops of each CUDA process (full seconds of the window); without launches when
  // they were counted one second in N (launch_duty > 1).
  std::map<int32_t, std::map<int64_t, int64_t>> cuda_ops_per_sec;
  std::map<int32_t, int64_t> cuda_calls;  // per tracked process, launches estimated (launch_duty)
  std::map<int32_t, SwitchTotals> switches;

  // Multi-rank NCCL jobs (nccl.h): collectives' lateness per rank and the straggler, if any.
  // Filled by Analyze() after ComputeFacts, with each straggler's own cause (the top finding
  // and the critical-path cause of the same analysis run with the straggler as the job).
  NcclJob nccl;
  struct StragglerCause {
    int32_t pid = 0;
    std::string rule;    // its top host-side finding ("dataloader-starvation"), "" = none
    std::string cause;   // that finding's cause
    std::string detail;  // its first root line
    std::string path;    // its main thread's biggest critical-path cause, "…, 62% of the window"
  };
  std::vector<StragglerCause> straggler_causes;
};

Facts ComputeFacts(const WindowData& w, const ExplainOptions& options);
// Rules: each appends zero or more findings.
void RunRules(const Facts& f, std::vector<Finding>* out);

// The DataLoader size every finding recommends (one answer per report, so no two fixes
// contradict); nullopt = leave it as it is.
std::optional<int64_t> RecommendedWorkers(const Facts& f);

// The thread that held the GIL the longest (holders.gil) and its ns; {0, 0} when none.
std::pair<int32_t, int64_t> TopGilHolder(const Facts& f);
// Sorted and merged (overlapping or touching spans become one).
TimeSpans MergeSpans(TimeSpans spans);
// Nanoseconds of [a, b) inside `spans` (sorted, disjoint) that the thread ran on a CPU outside
// any other cause (FeedCause::kRunning): a free that waited for the device is a sync there.
int64_t RunningInSpans(const ThreadTimeline& tl, const TimeSpans& spans, int64_t a, int64_t b);
// The CPUs the job can use: the host's cores, or fewer under its cgroup's CPU quota.
int64_t UsableCpus(const Facts& f);
// The main thread's critical path over [a, b): its own timeline with every resolved "blocked
// otherwise" stretch replaced by what it resolved to (pro rata where [a, b) cuts a stretch).
CauseTimes PathOverlap(const Facts& f, int64_t a, int64_t b);
// The same by budget cause.
BudgetTimes PathDetailOverlap(const Facts& f, int64_t a, int64_t b);
// Whether a process is the job itself: the main process or one of its DataLoader workers (not
// the programs it started).
bool IsOwnPid(const Facts& f, int32_t pid);
// The container, pod and namespace pid of a process (process_cgroups, its latest row); nullptr
// when it was not seen in a container, a pod or a PID namespace of its own.
const ProcessCgroup* ContainerOf(const WindowData& w, int32_t pid);
// "container 3f4a9c1e2b7d" / "pod 1b2c…" / "" for the job's main process: what a finding names.
std::string JobContainerLabel(const Facts& f);
// The pids inside their PID namespace of `pids`, space-separated, when at least one differs from
// the host pid; "" when none does (the host pids are the ones to use).
std::string NamespacePids(const WindowData& w, const std::vector<int32_t>& pids);

int64_t Percentile(std::vector<int64_t> v, double p);        // nearest-rank, 0 for empty
std::string ProcessLabel(const WindowData& w, int32_t pid);  // "name (PID n)"
std::string ProcessName(const WindowData& w, int32_t pid);   // "name" or "pid n"

}  // namespace gw
