// The host's own time, from the GPU-time budget (budget.cc): the main thread and the CUDA helper
// threads computing while the GPU idles, another thread of the process holding them (the GIL or
// a lock), the job's own threads crowding its CPUs, and the training process's own file I/O.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>

#include "analysis/budget.h"
#include "analysis/cpu_profile.h"
#include "analysis/format.h"
#include "analysis/rules.h"
#include "base/text.h"

namespace gw::rules {

namespace {

bool IsPython(const Facts& f) {
  return f.main_name.rfind("python", 0) == 0 || f.main_name.rfind("pt_", 0) == 0 ||
         f.main_cmdline.find("python") != std::string::npos;
}

// The thread whose I/O the main thread waited for (it woke the main thread when done: a lock held
// across a write, a join, a full queue), when such threads hold at least half of process_io's
// path. Their computing while the main thread waited for them (serializing, copying into the
// page cache: thread_hold) is part of the same wait, so main-thread-io claims its share of
// thread_hold's lost seconds, and lock-contention leaves it.
struct IoHolder {
  bool found = false;
  int32_t tid = 0;         // the one blocked on I/O longest
  double io_s = 0;         // that thread's I/O on the path
  double hold_lost_s = 0;  // thread_hold's lost seconds that are these threads' computing
};
IoHolder IoHolderOf(const Facts& f) {
  IoHolder h;
  int64_t all = 0, top = 0;
  for (const auto& [tid, ns] : f.holders.io) {
    all += ns;
    if (ns > top) top = ns, h.tid = tid;
  }
  const double path_io = BudgetPathS(f, BudgetCause::kProcessIo);
  if (path_io <= 0 || Sec(all) < 0.5 * path_io) return h;
  h.found = true;
  h.io_s = Sec(top);
  int64_t held = 0, held_by_io = 0;
  for (const auto& [tid, ns] : f.holders.thread) {
    held += ns;
    if (f.holders.io.count(tid)) held_by_io += ns;
  }
  if (held > 0) {
    h.hold_lost_s = BudgetLostS(f, BudgetCause::kThreadHold) * static_cast<double>(held_by_io) /
                    static_cast<double>(held);
  }
  return h;
}

// Launches per second of the main process (estimated where they were counted one second in N).
double LaunchesPerSecond(const Facts& f) {
  int64_t n = 0;
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid || !IsLaunch(r.op)) continue;
    if (!f.w->launches_once && OpLayer(r.op) != Layer::kCudaRuntime) continue;
    n += r.count;
  }
  return static_cast<double>(f.w->launch_estimates.Scaled(f.main_pid, n)) /
         std::max(1.0, f.window_s);
}

// "The main thread's hottest line on the CPU: train.py:88 in build_batch (41% of 612 samples)",
// whose: the threads' name in the possessive ("The main thread's", "The helper threads'"),
// from the on-CPU profile; nullopt without one.
std::optional<std::string> HottestLine(const Facts& f, const std::vector<int32_t>& tids,
                                       const char* whose) {
  std::optional<CpuProfileSection> p =
      ProfileThreads(*f.w, tids, f.loop_begin, f.loop_end);
  if (!p) return std::nullopt;
  std::string top = TopSiteLine(*p);
  if (top.empty()) return std::nullopt;
  return std::string(whose) + " hottest line on the CPU: " + top;
}

// The fix line that sends the user to the lines themselves: the report's profile section
// when the recording has one, else how to get it.
std::string ProfileFix(const Facts& f, const char* who) {
  if (f.w->profile_hz > 0) {
    return Fmt("speed up or move the lines %s spends its CPU in: explain lists them under "
               "\"Where the CPU time of %s went\"",
               who, who);
  }
  return Fmt("find the hot lines: record with the on-CPU profile (gpuwhy trace samples it "
             "unless --profile-hz 0), or py-spy top --pid %d",
             f.main_pid);
}

}  // namespace

void HostCompute(const Facts& f, std::vector<Finding>* out) {
  // A sync-heavy loop's computing seconds are sync-heavy's; the allocator's part of the main
  // thread's, malloc-churn's; graph capture's, graph-recapture's (one cause per second; its file
  // writing is the budget's host_write, main-thread-io's).
  if (SyncDrainsThePipeline(f)) return;
  double main_lost = MainComputeLostS(f) - GraphCaptureLostS(f);
  double helper_lost = BudgetLostS(f, BudgetCause::kHelperCompute);
  double lost = main_lost + helper_lost;
  double launches = LaunchesPerSecond(f);
  // Many launches a second with the helper threads busy too: the host dispatches kernels more
  // slowly than the GPU runs them. Otherwise the main thread computes something else (batches
  // built in the main process, Python work between steps).
  bool dispatch = (helper_lost >= th::kHostDispatchHelperShare * main_lost && helper_lost > 0) ||
                  launches >= th::kHostDispatchLaunchesPerSec;
  // With kernels that small the GPU also idles between them while the host waits in a sync:
  // idle time no host cause explains is the same cost (and CUDA Graphs remove both).
  double gaps = dispatch ? f.budget.idle_unattributed_s : 0.0;
  lost += gaps;
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s), th::kHostComputeHighShare,
                                       th::kHostComputeMediumShare, th::kHostComputeLowShare);
  if (!sev) return;
  Finding x;
  x.rule = "host-compute";
  x.severity = *sev;
  x.cause = dispatch ? "Host-bound: the CPU launches kernels slower than the GPU runs them"
                     : "Host-bound: the main thread computes on the CPU while the GPU waits";
  x.effect = "GPU idle between kernels";
  x.lost_s = lost;
  x.root.push_back("Main thread on the CPU outside CUDA waits: " +
                   IdleLine(f, BudgetCause::kHostCompute));
  if (BudgetPathS(f, BudgetCause::kHelperCompute) > 0.05) {
    x.root.push_back("Main thread waiting for CUDA helper threads at work (autograd): " +
                     IdleLine(f, BudgetCause::kHelperCompute));
  }
  if (gaps >= 0.05) {
    x.root.push_back(
        Fmt("GPU idle between the job's kernels while the main thread waited in "
            "syncs: %s s (kernels too small to keep the GPU busy one after another)",
            FormatSeconds(gaps).c_str()));
  }
  if (launches > 0) {
    x.root.push_back(
        Fmt("%s kernel launches a second by the training process", FormatRate(launches).c_str()));
  }
  if (auto line = HottestLine(f, {f.main_tid}, "The main thread's")) x.root.push_back(*line);
  std::vector<std::string> kernel_fix;
  if (auto line = KernelTimeLine(KernelTimeOf(f, {f.main_tid}, {f.main_pid}),
                                 "The main thread's", "the main thread spends its time",
                                 &kernel_fix)) {
    x.root.push_back(*line);
  }
  if (helper_lost >= 0.05) {
    if (auto line = HottestLine(f, f.helper_tids, "The helper threads'")) x.root.push_back(*line);
  }
  x.effects.push_back(GpuBusyLine(
      f, f.budget.source == "stream" ? "from the job's syncs, no GPU samples" : "NVML"));
  AddThroughputEffect(f, &x);
  x.fix = kernel_fix;
  if (dispatch) {
    x.fix.push_back(
        "launch the step as one graph: torch.compile(model, mode=\"reduce-overhead\") or "
        "torch.cuda.graphs (CUDA Graphs replay a step's kernels with one launch)");
    x.fix.push_back("give each kernel more work: a larger batch, fused layers (torch.compile)");
  } else {
    x.fix.push_back(
        "move per-batch CPU work off the main thread: DataLoader(num_workers>0) builds batches "
        "in worker processes while the GPU runs the previous step");
    x.fix.push_back(ProfileFix(f, "the main thread"));
  }
  x.metrics.push_back({"main_compute_lost_s", main_lost, "s"});
  x.metrics.push_back({"helper_compute_lost_s", helper_lost, "s"});
  x.metrics.push_back({"kernel_gap_idle_s", gaps, "s"});
  x.metrics.push_back({"launches_per_s", launches, "ops/s"});
  x.metrics.push_back({"gpu_busy_job_s", f.budget.gpu_busy_job_s, "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {Throughput(f)});
  out->push_back(std::move(x));
}

void LockContention(const Facts& f, std::vector<Finding>* out) {
  // A thread the main thread waited for while it did I/O is main-thread-io's (IoHolderOf).
  const IoHolder io = IoHolderOf(f);
  double lost = BudgetLostS(f, BudgetCause::kThreadHold) - io.hold_lost_s;
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev || Share(lost, f.budget.window_s) < th::kThreadHoldLowShare) return;
  int32_t hold_tid = f.budget.hold_tid;
  if (io.found && f.holders.io.count(hold_tid)) {
    int64_t top = 0;
    for (const auto& [tid, ns] : f.holders.thread) {
      if (!f.holders.io.count(tid) && ns > top) top = ns, hold_tid = tid;
    }
  }
  bool python = IsPython(f);
  Finding x;
  x.rule = "lock-contention";
  x.severity = *sev;
  x.cause = python ? "Another Python thread holds the GIL (or a lock) the main thread needs"
                   : "Another thread of the process holds a lock the main thread needs";
  x.effect = "main thread stalled, GPU idle";
  x.lost_s = lost;
  x.root.push_back(Fmt("Main thread asleep while thread %d of %s ran (it woke the main thread, "
                       "or a timed wait ran out): ",
                       hold_tid, ProcessLabel(*f.w, f.main_pid).c_str()) +
                   IdleLine(f, BudgetCause::kThreadHold));
  if (f.holders.thread.size() > 1) {
    std::string others;
    int n = 0;
    for (const auto& [tid, ns] : f.holders.thread) {
      if (tid == hold_tid || n == 3 || Sec(ns) < 0.05) continue;
      others +=
          (others.empty() ? "" : ", ") + Fmt("%d (%s s)", tid, FormatSeconds(Sec(ns)).c_str());
      ++n;
    }
    if (!others.empty()) x.root.push_back("Other holding threads: " + others);
  }
  if (python) {
    x.root.push_back(
        "In CPython only one thread runs Python at a time: a thread that computes in pure "
        "Python keeps the main thread off the CPU for its switch interval (5 ms) at a time");
  }
  AddThroughputEffect(f, &x);
  if (python) {
    x.fix.push_back(Fmt("find what thread %d runs: py-spy dump --pid %d (its Python stack)",
                        hold_tid, f.main_pid));
    x.fix.push_back(
        "move that work out of the training process (multiprocessing, a separate service) or "
        "into code that releases the GIL (NumPy/torch ops, native extensions)");
  } else {
    x.fix.push_back(Fmt("find the lock thread %d holds (gdb -p %d, or perf lock)",
                        hold_tid, f.main_pid));
  }
  x.metrics.push_back({"holder_tid", static_cast<double>(hold_tid), ""});
  x.metrics.push_back({"holder_s", f.budget.hold_s, "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  out->push_back(std::move(x));
}

void GilContention(const Facts& f, std::vector<Finding>* out) {
  double lost = BudgetLostS(f, BudgetCause::kGilHold);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev || Share(lost, f.budget.window_s) < th::kThreadHoldLowShare) return;
  auto [holder, held] = TopGilHolder(f);
  // The hand-offs themselves: the main thread's sleeps that the holder ended by releasing the
  // GIL (sched_switch kind 4).
  int64_t handoffs = 0, sleeps = 0;
  for (const Event& e : f.w->events) {
    if (e.op != Op::kSchedSwitch || e.tid != f.main_tid ||
        e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
      continue;
    }
    ++sleeps;
    if (e.kind == static_cast<int64_t>(SwitchKind::kBlockedGil) && e.waker_tid == holder) {
      ++handoffs;
    }
  }
  Finding x;
  x.rule = "gil-contention";
  x.severity = *sev;
  x.cause = Fmt("Thread %d holds the Python GIL the main thread needs", holder);
  x.effect = "main thread stalled, GPU idle";
  x.lost_s = lost;
  x.root.push_back(Fmt("GIL held by thread %d of %s while the main thread waited: ", holder,
                       ProcessLabel(*f.w, f.main_pid).c_str()) +
                   IdleLine(f, BudgetCause::kGilHold));
  x.root.push_back(Fmt("%s of the main thread's %s sleeps ended when thread %d released the GIL "
                       "(CPython's own lock state, read at the wake-up)",
                       FormatCount(handoffs).c_str(), FormatCount(sleeps).c_str(), holder));
  std::optional<std::string> hottest = HottestLine(f, {holder}, Fmt("Thread %d's", holder).c_str());
  if (hottest) x.root.push_back(*hottest);
  if (f.holders.gil.size() > 1) {
    std::string others;
    int n = 0;
    for (const auto& [tid, ns] : f.holders.gil) {
      if (tid == holder || n == 3 || Sec(ns) < 0.05) continue;
      others +=
          (others.empty() ? "" : ", ") + Fmt("%d (%s s)", tid, FormatSeconds(Sec(ns)).c_str());
      ++n;
    }
    if (!others.empty()) x.root.push_back("Other threads holding the GIL: " + others);
  }
  x.root.push_back(
      "In CPython one thread runs Python at a time: a thread computing in pure Python keeps the "
      "main thread waiting a switch interval (5 ms) at a time, every time it needs the GIL back");
  AddThroughputEffect(f, &x);
  if (hottest) {
    x.fix.push_back(Fmt("move thread %d's work out of the training process (multiprocessing, a "
                        "separate service): explain lists its lines under \"Where the CPU time "
                        "of %s went\"",
                        holder, GilHolderTitle(holder).c_str()));
  } else {
    x.fix.push_back(Fmt("find what thread %d runs (py-spy dump --pid %d), then move it out of the "
                        "training process (multiprocessing, a separate service)",
                        holder, f.main_pid));
  }
  x.fix.push_back(
      "or make that work release the GIL: NumPy/torch operations on whole arrays, a native "
      "extension, instead of a Python loop");
  x.metrics.push_back({"holder_tid", static_cast<double>(holder), ""});
  x.metrics.push_back({"holder_s", Sec(held), "s"});
  x.metrics.push_back({"gil_handoffs", static_cast<double>(handoffs), ""});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  x.evidence.push_back(
      {"the main thread's sleeps that a GIL hand-off ended (kind 4), by the thread that released "
       "it",
       Sql(f, "SELECT e.waker_tid AS holder_tid, COUNT(*) AS handoffs, ROUND(SUM(e.duration_ns "
              "- COALESCE(e.runq_ns, 0)) / 1e9, 3) AS waited_s FROM {EVENTS} e WHERE "
              "{e.IN_S}e.op = 'sched_switch' AND e.kind = 4 AND e.tid = " +
                  std::to_string(f.main_tid) +
                  " AND e.timestamp >= {F} AND e.timestamp < {T} GROUP BY e.waker_tid ORDER BY "
                  "waited_s DESC")});
  AddBudgetEvidence(f, &x);
  out->push_back(std::move(x));
}

void CpuOversubscription(const Facts& f, std::vector<Finding>* out) {
  // The run-queue story when the job's own threads held the CPUs most (cpu-contention otherwise).
  double lost_own = BudgetLostS(f, BudgetCause::kRunqOwn);
  double lost_other = BudgetLostS(f, BudgetCause::kRunqOther);
  if (OthersCrowdTheJob(f)) return;
  double lost = lost_own + lost_other;
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev) return;
  bool wakeup_latency = WakeupLatencyOnly(f);
  if (wakeup_latency) sev = Severity::kLow;
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  // Who held the CPUs: the job's processes, by CPU time taken from its feeding threads.
  std::vector<std::pair<int64_t, int32_t>> own;
  for (const auto& [pid, ns] : f.runq_holders) {
    if (pid > 0 && IsOwnPid(f, pid)) own.push_back({ns, pid});
  }
  std::sort(own.rbegin(), own.rend());
  Finding x;
  x.rule = "cpu-oversubscription";
  x.severity = *sev;
  x.cause = "The job's own threads outnumber its CPUs";
  x.effect = "feeding threads wait for a CPU";
  x.lost_s = lost;
  x.root.push_back("Waiting for a CPU held by the job's own threads: " +
                   IdleLine(f, BudgetCause::kRunqOwn));
  if (lost_other >= 0.05) {
    x.root.push_back(
        Fmt("and %s s more behind other processes", FormatSeconds(lost_other).c_str()));
  }
  std::string holders;
  for (size_t i = 0; i < own.size() && i < 4; ++i) {
    holders += (holders.empty() ? "" : ", ") + ProcessLabel(*f.w, own[i].second) + " " +
               FormatSeconds(Sec(own[i].first)) + " s";
  }
  if (!holders.empty()) x.root.push_back("CPU held while the feeders waited: " + holders);
  if (wakeup_latency) x.root.push_back(WakeupLatencyLine(f));
  x.root.push_back(Fmt("The feeding threads ran on %s; %s",
                       Plural(f.feeder_cpus, "CPU", "CPUs").c_str(),
                       Plural(workers, "DataLoader worker", "DataLoader workers").c_str()));
  AddThroughputEffect(f, &x);
  x.fix.push_back(
      "one compute thread per worker: torch.set_num_threads(1) in the DataLoader's "
      "worker_init_fn, or OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 in the job's environment");
  if (std::optional<int64_t> n = RecommendedWorkers(f); n && *n < workers) {
    x.fix.push_back(
        Fmt("or fewer workers: DataLoader(num_workers=%lld)", static_cast<long long>(*n)));
  }
  x.metrics.push_back({"runq_own_path_s", BudgetPathS(f, BudgetCause::kRunqOwn), "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {SwitchKinds(f)});
  out->push_back(std::move(x));
}

// The job's cgroup spent its CPU quota: CFS bandwidth control stopped every thread of it for the
// rest of each period, whatever CPUs were free (budget's runq_quota).
bool QuotaThrottles(const Facts& f) {
  if (!f.quota || f.quota->throttled_periods == 0) return false;
  return Ladder(Share(BudgetLostS(f, BudgetCause::kRunqQuota), f.budget.window_s)).has_value();
}

void CpuQuota(const Facts& f, std::vector<Finding>* out) {
  if (!QuotaThrottles(f)) return;
  const gw::CpuQuota& q = *f.quota;
  double lost = BudgetLostS(f, BudgetCause::kRunqQuota);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  double span_s = Sec(q.span_ns);
  double waited_s = 0;  // the feeders' thread-seconds runnable while throttled
  if (auto it = f.runq_holders.find(kQuotaHolder); it != f.runq_holders.end()) {
    waited_s = Sec(it->second);
  }
  Finding x;
  x.rule = "cpu-quota";
  x.severity = *sev;
  x.cause = "The job's cgroup CPU limit (quota) throttles it";
  x.effect = "every thread of the job stopped for the rest of each period, GPU idle";
  x.lost_s = lost;
  std::string setting =
      q.version == 2
          ? Fmt("cpu.max %lld %lld", static_cast<long long>(q.quota_us),
                static_cast<long long>(q.period_us))
          : Fmt("cpu.cfs_quota_us %lld per cpu.cfs_period_us %lld",
                static_cast<long long>(q.quota_us), static_cast<long long>(q.period_us));
  // In a container: which one, as docker ps / crictl ps name it.
  std::string where = JobContainerLabel(f);
  x.root.push_back(Fmt("cgroup %s%s is limited to %.2f CPUs (%s)", q.cgroup.c_str(),
                       where.empty() ? "" : (" (" + where + ")").c_str(), q.cpus(),
                       setting.c_str()));
  x.root.push_back(Fmt("Throttled in %s of %s periods (%s) over %s s; its run queues were "
                       "throttled %s CPU-seconds",
                       FormatCount(q.throttled_periods).c_str(), FormatCount(q.periods).c_str(),
                       FormatPct(Share(static_cast<double>(q.throttled_periods),
                                       static_cast<double>(q.periods)))
                           .c_str(),
                       FormatSeconds(span_s).c_str(), FormatSeconds(Sec(q.throttled_ns)).c_str()));
  // The CPUs the cgroup used: its usage counter, else (v1 with cpuacct mounted apart) its whole
  // quota where it was throttled in most periods.
  bool measured = q.usage_ns != kNull && span_s > 0;
  bool mostly_throttled = Share(static_cast<double>(q.throttled_periods),
                                static_cast<double>(q.periods)) >= 0.5;
  double used = measured ? Sec(q.usage_ns) / span_s : mostly_throttled ? q.cpus() : -1;
  if (used >= 0) {
    x.root.push_back(Fmt("The cgroup used %.2f CPUs on average%s; the job's feeding threads were "
                         "runnable but throttled %s thread-seconds more",
                         used, measured ? "" : " (its quota: no usage counter)",
                         FormatSeconds(waited_s).c_str()));
  }
  if (q.refill_phase_ns >= 0) {
    x.root.push_back(Fmt("%s of the job's waits for a CPU (those of 1 ms or more) ended within "
                         "%.0f ms of %.1f ms into each %.0f ms period: when the period timer "
                         "refilled the quota",
                         FormatPct(q.refill_share).c_str(),
                         static_cast<double>(th::kQuotaRefillSlackNs) / 1e6,
                         static_cast<double>(q.refill_phase_ns) / 1e6,
                         static_cast<double>(q.period_us) / 1e3));
  }
  x.root.push_back("Waiting while throttled: " + IdleLine(f, BudgetCause::kRunqQuota));
  AddSyncEffect(f, &x);
  AddThroughputEffect(f, &x);
  // What the job asked for: the CPUs it used plus the time it sat runnable behind the quota.
  double wanted = used >= 0 && span_s > 0 ? used + waited_s / span_s : -1;
  std::string path = ShellQuote((q.version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu") +
                                (q.cgroup == "/" ? std::string() : q.cgroup));
  if (wanted > 0) {
    x.fix.push_back(Fmt("raise the CPU limit to at least %lld CPUs (the job asked for ~%.1f): "
                        "Kubernetes resources.limits.cpu, or remove the limit (requests alone "
                        "do not throttle)",
                        static_cast<long long>(std::ceil(wanted)), wanted));
  } else {
    x.fix.push_back("raise or remove the CPU limit: Kubernetes resources.limits.cpu (requests "
                    "alone do not throttle)");
  }
  x.fix.push_back(q.version == 2
                      ? Fmt("on the host: echo 'max %lld' > %s/cpu.max",
                            static_cast<long long>(q.period_us), path.c_str())
                      : Fmt("on the host: echo -1 > %s/cpu.cfs_quota_us", path.c_str()));
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  x.fix.push_back(Fmt("or fit the job to %.2f CPUs: one compute thread per process "
                      "(torch.set_num_threads(1) in workers, OMP_NUM_THREADS=1)%s",
                      q.cpus(),
                      workers > 0 && UsableCpus(f) < workers + 1
                          ? Fmt(" and DataLoader(num_workers=%lld)",
                                static_cast<long long>(std::max<int64_t>(0, UsableCpus(f) - 1)))
                                .c_str()
                          : ""));
  x.fix.push_back("pinning (taskset) or renice will not help: the quota caps the CPU time of the "
                  "whole cgroup, on whichever cores it runs");
  x.metrics.push_back({"quota_cpus", q.cpus(), "cpus"});
  x.metrics.push_back({"periods", static_cast<double>(q.periods), "count"});
  x.metrics.push_back({"throttled_periods", static_cast<double>(q.throttled_periods), "count"});
  x.metrics.push_back({"throttled_cpu_s", Sec(q.throttled_ns), "s"});
  x.metrics.push_back({"runq_quota_path_s", BudgetPathS(f, BudgetCause::kRunqQuota), "s"});
  if (q.refill_phase_ns >= 0) x.metrics.push_back({"refill_share", q.refill_share, "ratio"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {{"the job's cgroups' CPU limit and throttling over the window "
                    "(cgroup_cpu_samples; counters are cumulative)",
                    Sql(f, "SELECT cgroup, MAX(quota_us) AS quota_us, MAX(period_us) AS "
                           "period_us, MAX(nr_periods) - MIN(nr_periods) AS periods, "
                           "MAX(nr_throttled) - MIN(nr_throttled) AS throttled_periods, "
                           "ROUND((MAX(throttled_ns) - MIN(throttled_ns)) / 1e9, 3) AS "
                           "throttled_cpu_s, ROUND((MAX(usage_ns) - MIN(usage_ns)) / 1e9, 3) AS "
                           "used_cpu_s FROM cgroup_cpu_samples WHERE session = {S} AND ts >= {F} "
                           "AND ts <= {T} GROUP BY cgroup ORDER BY throttled_cpu_s DESC")},
                   {"when the feeding threads' waits for a CPU of 1 ms or more ended, ms into "
                    "the quota's period (a throttled cgroup's waits pile up where the quota is "
                    "refilled)",
                    Sql(f, Fmt("SELECT (timestamp + duration_ns) %% %lld / 1000000 AS "
                               "ms_into_period, COUNT(*) AS waits, ROUND(SUM(runq_ns) / 1e9, 3) "
                               "AS runq_s FROM {EVENTS} WHERE {IN_S}pid IN ({FEED}) AND op = "
                               "'sched_switch' AND runq_ns >= 1000000 AND timestamp >= {F} AND "
                               "timestamp < {T} GROUP BY ms_into_period ORDER BY runq_s DESC "
                               "LIMIT 5",
                               static_cast<long long>(q.period_us) * 1000))},
                   SwitchKinds(f)});
  out->push_back(std::move(x));
}

void ProcessIo(const Facts& f, std::vector<Finding>* out) {
  // Blocked on its I/O, and on the CPU writing (serializing, copying into the page cache: the
  // profile's writing samples, which launch nothing, so the GPU drains as in a wait).
  // And a thread the main thread waited for while it did I/O, on the CPU in the same waits.
  const IoHolder io = IoHolderOf(f);
  double blocked = BudgetLostS(f, BudgetCause::kProcessIo);
  double writing = BudgetLostS(f, BudgetCause::kHostWrite);
  double lost = blocked + writing + io.hold_lost_s;
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev) return;
  // The training process's slow file syscalls (read/write rows) and the block requests it issued
  // itself (writes mostly leave through the kernel's flusher threads, not the process).
  // The same bytes pass both layers (a slow write call, then the block requests that carry it
  // out), so each direction's volume is the larger of the two, not their sum.
  double read_bytes = 0, write_bytes = 0, read_ns = 0, write_ns = 0;
  double block_read = 0, block_write = 0;
  int64_t reads = 0, writes_n = 0, syncs = 0;
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid) continue;
    double b = e.bytes == kNull ? 0 : static_cast<double>(e.bytes);
    if (e.op == Op::kBlockIo) {
      (e.kind == 1 ? block_write : block_read) += b;
    } else if (e.op == Op::kRead) {
      ++reads;
      read_bytes += b;
      read_ns += static_cast<double>(e.duration_ns);
    } else if (e.op == Op::kWrite) {
      (e.kind == 1 ? syncs : writes_n) += 1;
      write_bytes += b;
      write_ns += static_cast<double>(e.duration_ns);
    }
  }
  read_bytes = std::max(read_bytes, block_read);
  write_bytes = std::max(write_bytes, block_write);
  // Without syscall rows, a process that waits on I/O without reading is writing.
  bool writes = writing > 0 || write_ns > read_ns || write_bytes > read_bytes ||
                (read_bytes == 0 && reads == 0);
  // Another thread's I/O the main thread waited for: the fix is to stop waiting for that
  // thread, not to move the I/O off a main thread that does none.
  const bool via_thread = io.found;
  const int32_t via_tid = io.tid;
  const double path_io = BudgetPathS(f, BudgetCause::kProcessIo);
  Finding x;
  x.rule = "main-thread-io";
  x.severity = *sev;
  if (via_thread) {
    x.cause = writes ? "A thread the training loop waits for writes to storage"
                     : "A thread the training loop waits for reads from storage";
  } else {
    x.cause = writes ? "The training process writes to storage on its critical path"
                     : "The training process reads from storage on its critical path";
  }
  x.effect = "main thread blocked on I/O, GPU idle";
  x.lost_s = lost;
  if (path_io > 0) {
    x.root.push_back("Training process's own threads blocked on I/O: " +
                     IdleLine(f, BudgetCause::kProcessIo));
  }
  if (via_thread) {
    x.root.push_back(Fmt("%s s of it in thread %d of %s while the main thread waited for that "
                         "thread (it woke the main thread when done): a lock held across the "
                         "I/O, a join, a full queue",
                         FormatSeconds(io.io_s).c_str(), via_tid,
                         ProcessLabel(*f.w, f.main_pid).c_str()));
    if (io.hold_lost_s > 0) {
      x.root.push_back(Fmt("The same wait with that thread on the CPU (serializing, copying "
                           "into the page cache): %s s of GPU idle time",
                           FormatSeconds(io.hold_lost_s).c_str()));
    }
    x.metrics.push_back({"io_holder_tid", static_cast<double>(via_tid), ""});
    x.metrics.push_back({"io_holder_s", io.io_s, "s"});
    x.metrics.push_back({"io_holder_cpu_lost_s", io.hold_lost_s, "s"});
  }
  if (writing > 0) {
    const WriterProfile& p = f.main_writer;
    std::string who = p.function.empty() ? std::string("")
                                         : Fmt(" (%s in %s)", p.location.c_str(),
                                               p.function.c_str());
    x.root.push_back(Fmt("Main thread on the CPU writing: %s s in write calls and the code that "
                         "made them%s, %lld of its %lld profile samples; GPU idle meanwhile: %s s",
                         FormatSeconds(p.writer_s).c_str(), who.c_str(),
                         static_cast<long long>(p.writer_samples),
                         static_cast<long long>(p.working_samples),
                         FormatSeconds(writing).c_str()));
    x.metrics.push_back({"writing_cpu_s", p.writer_s, "s"});
  }
  if (writes_n + syncs > 0) {
    x.root.push_back(Fmt("%s slow write calls and %s fsync/fdatasync calls: %s s, %s written",
                         FormatCount(writes_n).c_str(), FormatCount(syncs).c_str(),
                         FormatSeconds(write_ns / 1e9).c_str(), FormatBytes(write_bytes).c_str()));
  }
  if (reads > 0) {
    x.root.push_back(Fmt("%s slow read calls: %s s, %s read", FormatCount(reads).c_str(),
                         FormatSeconds(read_ns / 1e9).c_str(), FormatBytes(read_bytes).c_str()));
  }
  AddThroughputEffect(f, &x);
  if (via_thread) {
    x.fix.push_back(Fmt("stop the training loop waiting for thread %d's I/O: release the lock "
                        "before the write (copy what it protects, then write), or hand the "
                        "data over through a queue the thread drains on its own%s",
                        via_tid,
                        IsPython(f) ? Fmt(" (what it runs: py-spy dump --pid %d)", f.main_pid)
                                          .c_str()
                                    : ""));
    x.fix.push_back(writes ? "write to faster local storage (NVMe, /dev/shm) and copy it off "
                             "later"
                           : "cache the data in RAM (/dev/shm, vmtouch -t) before training");
  } else if (writes) {
    x.fix.push_back(
        "checkpoint asynchronously (torch.distributed.checkpoint.async_save, or a background "
        "thread/process writing a copy of the state dict) or less often");
    x.fix.push_back("write to faster local storage (NVMe, /dev/shm) and copy it off later");
  } else {
    x.fix.push_back(
        "read in DataLoader workers (num_workers>0), not on the main thread, so reads overlap "
        "the GPU's work");
    x.fix.push_back("cache the data in RAM (/dev/shm, vmtouch -t) before training");
  }
  x.evidence.push_back(
      {"the training process's slow file syscalls (write kind 1 = fsync) and block requests",
       Sql(f,
           "SELECT op, kind, COUNT(*) AS calls, ROUND(SUM(duration_ns) / 1e9, 3) AS seconds, "
           "SUM(bytes) AS bytes FROM {EVENTS} WHERE {IN_S}pid = {P} AND op IN ('read', "
           "'write', 'block_io') AND timestamp >= {F} AND timestamp < {T} GROUP BY op, kind")});
  x.metrics.push_back({"read_bytes", read_bytes, "bytes"});
  x.metrics.push_back({"write_bytes", write_bytes, "bytes"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  out->push_back(std::move(x));
}

}  // namespace gw::rules
