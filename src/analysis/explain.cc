#include "analysis/explain.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <set>
#include <utility>

#include "analysis/analyze.h"
#include "analysis/blame.h"
#include "analysis/callers.h"
#include "analysis/cpu_profile.h"
#include "analysis/facts.h"
#include "analysis/format.h"
#include "analysis/gpu.h"
#include "analysis/loader.h"
#include "analysis/long_window.h"
#include "analysis/nccl.h"
#include "analysis/rules.h"
#include "analysis/thresholds.h"
#include "store/reader.h"
#include "store/rollup_rows.h"

namespace gw {

const char* SeverityName(Severity s) {
  switch (s) {
    case Severity::kLow:
      return "LOW";
    case Severity::kMedium:
      return "MEDIUM";
    case Severity::kHigh:
      return "HIGH";
  }
  return "LOW";
}

const char* FeedCauseName(FeedCause c) {
  switch (c) {
    case FeedCause::kRunning:
      return "running";
    case FeedCause::kRunqWait:
      return "runq_wait";
    case FeedCause::kBlockedIo:
      return "blocked_io";
    case FeedCause::kPageFault:
      return "page_fault";
    case FeedCause::kBlockedOther:
      return "blocked_other";
    case FeedCause::kMemcpy:
      return "memcpy";
    case FeedCause::kSync:
      return "sync";
    case FeedCause::kHelperWork:
      return "helper_work";
    case FeedCause::kWorkerCompute:
      return "worker_compute";
    case FeedCause::kThreadHold:
      return "thread_hold";
  }
  return "running";
}

const char* FeedCauseLabel(FeedCause c) {
  switch (c) {
    case FeedCause::kRunning:
      return "running on CPU";
    case FeedCause::kRunqWait:
      return "runnable, waiting for a CPU";
    case FeedCause::kBlockedIo:
      return "blocked on I/O";
    case FeedCause::kPageFault:
      return "page faults / reclaim";
    case FeedCause::kBlockedOther:
      return "blocked otherwise (idle, timers, locks)";
    case FeedCause::kMemcpy:
      return "in cudaMemcpy";
    case FeedCause::kSync:
      return "in CUDA sync";
    case FeedCause::kHelperWork:
      return "waiting for CUDA helper threads at work";
    case FeedCause::kWorkerCompute:
      return "waiting for workers computing a batch";
    case FeedCause::kThreadHold:
      return "waiting for a sibling thread at work (GIL, lock)";
  }
  return "running";
}

namespace {
struct BudgetCauseName {
  const char* key;
  const char* label;
};
constexpr BudgetCauseName kBudgetCauseNames[] = {
#define GW_BUDGET_NAME(e, key, label) {key, label},
    GW_BUDGET_CAUSES(GW_BUDGET_NAME)
#undef GW_BUDGET_NAME
};
static_assert(std::size(kBudgetCauseNames) == kBudgetCauseCount);
}  // namespace

const char* BudgetCauseKey(BudgetCause c) { return kBudgetCauseNames[static_cast<size_t>(c)].key; }

const char* BudgetCauseLabel(BudgetCause c) {
  return kBudgetCauseNames[static_cast<size_t>(c)].label;
}

const char* VerdictName(Verdict v) {
  switch (v) {
    case Verdict::kBetter:
      return "better";
    case Verdict::kWorse:
      return "worse";
    case Verdict::kSame:
      return "same";
    case Verdict::kNone:
      return "none";
  }
  return "same";
}

namespace {

constexpr FeedCause kCauses[] = {
    FeedCause::kRunning,      FeedCause::kRunqWait, FeedCause::kBlockedIo, FeedCause::kPageFault,
    FeedCause::kBlockedOther, FeedCause::kMemcpy,   FeedCause::kSync};

constexpr FeedCause kPathCauses[] = {
    FeedCause::kRunning,       FeedCause::kRunqWait,  FeedCause::kBlockedIo, FeedCause::kPageFault,
    FeedCause::kBlockedOther,  FeedCause::kMemcpy,    FeedCause::kSync,      FeedCause::kHelperWork,
    FeedCause::kWorkerCompute, FeedCause::kThreadHold};

FeedTimeGroup MakeGroup(std::string name, int32_t threads, int64_t thread_ns, const CauseTimes& t,
                        bool path = false) {
  FeedTimeGroup g;
  g.name = std::move(name);
  g.threads = threads;
  g.thread_seconds = static_cast<double>(thread_ns) / 1e9;
  std::vector<FeedCause> causes(std::begin(kCauses), std::end(kCauses));
  if (path) causes.assign(std::begin(kPathCauses), std::end(kPathCauses));
  for (FeedCause c : causes) {
    FeedTimeRow row;
    row.cause = c;
    row.seconds = static_cast<double>(At(t, c)) / 1e9;
    row.pct = thread_ns > 0 ? 100.0 * static_cast<double>(At(t, c)) / thread_ns : 0;
    g.rows.push_back(row);
  }
  return g;
}

std::string Role(const Facts& f, int32_t pid) {
  if (pid == f.main_pid) return "training";
  if (std::find(f.worker_pids.begin(), f.worker_pids.end(), pid) != f.worker_pids.end()) {
    return "worker";
  }
  if (std::find(f.cuda_pids.begin(), f.cuda_pids.end(), pid) != f.cuda_pids.end()) {
    return "gpu-peer";
  }
  if (std::find(f.child_pids.begin(), f.child_pids.end(), pid) != f.child_pids.end()) {
    for (const Competitor& c : f.competitors) {
      if (c.pid == pid) return "competitor";
    }
    return "child-program";
  }
  for (const Competitor& c : f.competitors) {
    if (c.pid == pid) return "competitor";
  }
  return "other";
}

// Each straggler rank's own cause: the same analysis with that rank as the job (its main
// thread's critical path, its DataLoader, its CPU), and its top host-side finding.
std::vector<Facts::StragglerCause> StragglerCauses(const WindowData& w,
                                                   const ExplainOptions& options,
                                                   const NcclJob& job) {
  std::vector<Facts::StragglerCause> out;
  for (const NcclCommunicator& comm : job.comms) {
    if (comm.straggler < 0) continue;
    Facts::StragglerCause c;
    c.pid = comm.ranks[static_cast<size_t>(comm.straggler)].pid;
    ExplainOptions inner = options;
    inner.pid = c.pid;
    Facts fs = ComputeFacts(w, inner);
    fs.nccl = job;  // its peers are ranks, not GPU neighbours (gpu-sharing)
    if (fs.main_pid == 0) {
      out.push_back(c);
      continue;
    }
    std::vector<Finding> findings;
    RunRules(fs, &findings);
    std::stable_sort(findings.begin(), findings.end(), [](const Finding& a, const Finding& b) {
      if (a.severity != b.severity)
        return static_cast<int>(a.severity) > static_cast<int>(b.severity);
      return a.lost_s > b.lost_s;
    });
    for (const Finding& x : findings) {
      const RuleSpec* spec = RuleById(x.rule);
      if (spec == nullptr || !spec->blames) continue;
      c.rule = x.rule;
      c.cause = x.cause;
      if (!x.root.empty()) c.detail = x.root.front();
      break;
    }
    if (fs.budget.present && fs.budget.window_s > 0) {
      const BudgetLine* top = nullptr;
      for (const BudgetLine& line : fs.budget.lines) {
        if (line.cause == BudgetCause::kSyncWait || line.cause == BudgetCause::kNotAttributed) {
          continue;
        }
        if (top == nullptr || line.path_s > top->path_s) top = &line;
      }
      if (top != nullptr && top->path_s > 0) {
        c.path = Fmt("%s, %s of the window (%s s)", BudgetCauseLabel(top->cause),
                     FormatPct(top->path_s / fs.budget.window_s).c_str(),
                     FormatSeconds(top->path_s).c_str());
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Report Analyze(const WindowData& w, const ExplainOptions& options) {
  Report r;
  r.evidence = options.evidence;
  r.window = {w.session, w.from, w.to, w.label};
  r.events = w.events_in_window;
  // System context: means over the window's 1 Hz snapshots; swap is the peak.
  if (!w.snapshots.empty()) {
    SystemContext& s = r.system;
    s.present = true;
    double n = static_cast<double>(w.snapshots.size());
    int64_t faults = 0;
    for (const SystemSnapshot& x : w.snapshots) {
      s.cpu_pct += x.cpu_pct / n;
      s.mem_pct += x.mem_pct / n;
      s.load1 += x.load1 / n;
      s.iowait_pct += x.iowait_pct / n;
      s.swap_mb = std::max(s.swap_mb, static_cast<double>(x.swap_used_bytes) / 1048576.0);
      if (x.cores > 0) s.cores = x.cores;
      faults += x.major_faults_per_s;
    }
    s.major_faults_per_s = static_cast<int64_t>(static_cast<double>(faults) / n);
  }
  if (r.system.cores == 0) r.system.cores = w.cores;
  r.gpus = SummarizeGpus(w);

  if (options.pid != 0 && !w.processes.count(options.pid)) {
    r.notes.push_back(
        Fmt("--pid %d is not a process of this recording (session %lld): see "
            "`gpuwhy query \"SELECT pid, name FROM process_names\"`",
            options.pid, static_cast<long long>(w.session)));
  }
  Facts f = ComputeFacts(w, options);
  f.nccl = AnalyzeNccl(w.nccl_calls, w.events);
  f.straggler_causes = StragglerCauses(w, options, f.nccl);
  if (f.main_pid == 0) {
    r.notes.push_back(
        "no CUDA calls from tracked processes in this window — nothing feeds a GPU "
        "here; widen --since or check `gpuwhy query \"SELECT * FROM "
        "process_names\"`");
  } else {
    RunRules(f, &r.findings);
    std::stable_sort(r.findings.begin(), r.findings.end(), [](const Finding& a, const Finding& b) {
      if (a.severity != b.severity)
        return static_cast<int>(a.severity) > static_cast<int>(b.severity);
      return a.lost_s > b.lost_s;
    });
    // Drop LOW host-side findings that a stronger one of the same family explains better: one
    // story per report.
    {
      auto host_family = [](const std::string& rule) {
        const RuleSpec* r = RuleById(rule);
        return r != nullptr && r->host_story;
      };
      double strongest = 0;
      for (const Finding& x : r.findings) {
        if (host_family(x.rule) && x.severity != Severity::kLow) {
          strongest = std::max(strongest, x.lost_s);
        }
      }
      r.findings.erase(std::remove_if(r.findings.begin(), r.findings.end(),
                                      [&](const Finding& x) {
                                        return host_family(x.rule) &&
                                               x.severity == Severity::kLow &&
                                               x.lost_s < thresholds::kFoldLowShare * strongest;
                                      }),
                       r.findings.end());
    }
    r.budget = f.budget;
    AddGpuEffects(f, &r);
    AddFindingIntervals(f, &r);
    // Over the job's loop, as the budget above them (start-up and exit left out).
    r.feed_time.push_back(MakeGroup("main thread's critical path (waits resolved by who woke it)",
                                    1, f.loop_end - f.loop_begin,
                                    PathOverlap(f, f.loop_begin, f.loop_end), true));
    r.feed_time.push_back(MakeGroup("training threads (CUDA callers)",
                                    static_cast<int32_t>(f.train_tls.size()), f.train_thread_ns,
                                    f.train_totals));
    if (!f.worker_tls.empty()) {
      r.feed_time.push_back(MakeGroup("DataLoader workers (busiest thread of each)",
                                      static_cast<int32_t>(f.worker_tls.size()), f.worker_thread_ns,
                                      f.worker_totals));
    }
    // Top processes: the training process and workers first, then by off-CPU time.
    std::vector<ProcessStat> stats;
    std::set<int32_t> seen;
    auto add = [&](int32_t pid) {
      if (!seen.insert(pid).second) return;
      ProcessStat p;
      p.pid = pid;
      p.name = ProcessName(w, pid);
      p.role = Role(f, pid);
      auto it = w.processes.find(pid);
      p.tracked = it != w.processes.end() && it->second.tracked;
      if (auto s = f.switches.find(pid); s != f.switches.end()) {
        p.context_switches = s->second.count;
        p.off_cpu_s = static_cast<double>(s->second.off_ns) / 1e9;
        p.runq_s = static_cast<double>(s->second.runq_ns) / 1e9;
        p.worst_stall_ms = static_cast<double>(s->second.stall_max_ns) / 1e6;
        p.idle_s = static_cast<double>(s->second.idle_ns) / 1e9;
      }
      if (auto h = f.runq_holders.find(pid); h != f.runq_holders.end()) {
        p.cpu_taken_from_feeders_s = static_cast<double>(h->second) / 1e9;
      }
      if (auto c = f.cuda_calls.find(pid); c != f.cuda_calls.end()) p.cuda_calls = c->second;
      if (const ProcessCgroup* pc = ContainerOf(w, pid)) {
        p.container_id = pc->container_id;
        p.pod_uid = pc->pod_uid;
        p.ns_pid = pc->ns_pid;
      }
      stats.push_back(p);
    };
    add(f.main_pid);
    for (int32_t pid : f.worker_pids) add(pid);
    std::vector<std::pair<double, int32_t>> others;
    for (const auto& [pid, s] : f.switches) {
      if (!seen.count(pid) && pid > 0) others.push_back({-static_cast<double>(s.off_ns), pid});
    }
    std::sort(others.begin(), others.end());
    for (const auto& [neg, pid] : others) {
      if (stats.size() >= 12) break;
      add(pid);
      // A process that is not the job's and whose every number prints as 0.0 (a kworker, a
      // shell that ran for an instant) says nothing.
      const ProcessStat& p = stats.back();
      if (p.off_cpu_s < 0.05 && p.runq_s < 0.05 && p.worst_stall_ms < 0.05 && p.idle_s < 0.05 &&
          p.cpu_taken_from_feeders_s < 0.05) {
        stats.pop_back();
      }
    }
    r.top_processes = std::move(stats);
    // The containers and pods of the tracked processes, the job's first.
    std::map<std::pair<std::string, std::string>, size_t> index;
    auto add_container = [&](int32_t pid) {
      const ProcessCgroup* pc = ContainerOf(w, pid);
      if (pc == nullptr || (pc->container_id.empty() && pc->pod_uid.empty())) return;
      auto [it, fresh] = index.insert({{pc->container_id, pc->pod_uid}, r.containers.size()});
      if (fresh) {
        r.containers.push_back(
            {pc->runtime, pc->container_id, pc->pod_uid, pc->pod_name, pc->pod_namespace, {}});
      }
      ContainerInfo& c = r.containers[it->second];
      if (c.pod_name.empty()) c.pod_name = pc->pod_name;
      if (c.pod_namespace.empty()) c.pod_namespace = pc->pod_namespace;
      auto& pids = c.pids;
      if (pids.size() < 64) pids.push_back({pid, pc->ns_pid});
    };
    add_container(f.main_pid);
    for (int32_t pid : f.worker_pids) add_container(pid);
    std::set<int32_t> listed(f.worker_pids.begin(), f.worker_pids.end());
    listed.insert(f.main_pid);
    for (const ProcessCgroup& pc : w.process_cgroups) {
      if (listed.insert(pc.pid).second) add_container(pc.pid);
    }
    std::set<int32_t> feeders(f.cuda_pids.begin(), f.cuda_pids.end());
    feeders.insert(f.worker_pids.begin(), f.worker_pids.end());
    AddCallerSections(w, feeders, &r);
    AddCpuProfiles(f, &r);
    r.kernels = SummarizeKernels(w.kernel_launches, w.launches_once, w.launch_estimates,
                                 static_cast<double>(w.to - w.from) / 1e9);
    int64_t counted = 0;
    for (const OpSecondRow& row : w.op_seconds) {
      if (IsLaunch(row.op)) counted += row.count;
    }
    if (r.kernels.estimated && counted > 0) {
      r.notes.push_back(LaunchEstimateNote(r.kernels));
    } else if (counted > static_cast<int64_t>(w.launch_samples.size()) &&
               !w.launch_samples.empty()) {
      r.notes.push_back(
          Fmt("%s kernel launches in this window, counted in op_seconds; launch "
              "rows are sampled (durations from %s of them)",
              FormatCount(counted).c_str(),
              FormatCount(static_cast<int64_t>(w.launch_samples.size())).c_str()));
    }
  }
  if (w.drops > 0) {
    r.notes.push_back(Fmt("%s events were dropped during capture: counts are lower bounds",
                          FormatCount(w.drops).c_str()));
  }
  if (w.snapshots.empty()) r.notes.push_back("no system snapshots in this window");
  if (w.malformed_stacks > 0) {
    r.notes.push_back(
        Fmt("%s stored stacks could not be read (frames are not valid JSON) and "
            "were skipped",
            FormatCount(w.malformed_stacks).c_str()));
  }
  return r;
}

std::string LaunchFigure(const KernelSummary& k) {
  if (!k.estimated) return FormatCount(k.launches);
  std::string out = "~" + FormatCount(k.launches);
  if (k.launches > 0 && k.error > 0) {
    double pct = 100.0 * k.error / static_cast<double>(k.launches);
    out += pct < 1.0 ? " ± <1%" : Fmt(" ± %.0f%%", pct);
  }
  return out;
}

std::string LaunchEstimateNote(const KernelSummary& k) {
  std::string how = k.launch_duty > 1
                        ? Fmt("counted 1 s in %lld (trace --launch-duty)",
                              static_cast<long long>(k.launch_duty))
                        : std::string("counted while the launch probes were attached");
  return Fmt("kernel launches were %s: %s counted, %s in this window (estimated for %s s of "
             "launching the probes did not see, extrapolated from the seconds they did by the process's "
             "other CUDA calls or its launch rate; ± one standard error)",
             how.c_str(), FormatCount(k.counted).c_str(), LaunchFigure(k).c_str(),
             FormatSeconds(k.uncovered_s).c_str());
}

KernelSummary SummarizeKernels(const std::vector<KernelLaunchRow>& rows, bool launches_once,
                               const LaunchEstimates& estimates, double seconds) {
  KernelSummary k;
  k.launch_duty = estimates.duty;
  k.estimated = estimates.estimated();
  k.error = estimates.total.error;
  k.uncovered_s = estimates.total.uncovered_s;
  std::map<std::pair<int32_t, std::string>, int64_t> by_kernel;
  for (const KernelLaunchRow& row : rows) {
    if (!launches_once && OpLayer(row.op) != Layer::kCudaRuntime) continue;
    k.counted += row.launches;
    // Every graph launch is seen: its kernels are a count, never scaled.
    bool graph = IsGraphKernels(row.op);
    int64_t n = graph ? row.launches : estimates.Scaled(row.pid, row.launches);
    if (graph) k.graph_kernels += n;
    by_kernel[{row.pid, row.name}] += n;
    k.launches += n;
    if (row.name.empty() || row.name.rfind("fn@", 0) == 0) k.unnamed += n;
  }
  k.kernels = static_cast<int64_t>(by_kernel.size());
  std::vector<KernelStat> all;
  seconds = std::max(1e-9, seconds);
  for (const auto& [key, n] : by_kernel) {
    KernelStat s;
    s.pid = key.first;
    s.name = key.second.empty() ? "(no name)" : key.second;
    s.launches = n;
    s.per_s = static_cast<double>(n) / seconds;
    s.share_pct =
        k.launches > 0 ? 100.0 * static_cast<double>(n) / static_cast<double>(k.launches) : 0;
    all.push_back(std::move(s));
  }
  std::sort(all.begin(), all.end(), [](const KernelStat& a, const KernelStat& b) {
    return a.launches != b.launches ? a.launches > b.launches : a.name < b.name;
  });
  if (all.size() > 20) all.resize(20);
  k.top = std::move(all);
  return k;
}

namespace {

// A window too long for its raw rows: the whole window from the rollup tier, the causal chains
// from the raw rows of its incident (long_window.h).
StatusOr<Report> ExplainFromRollups(StoreReader& reader, const ExplainOptions& options,
                                    const SessionWindow& window, const TierSpan& span,
                                    int64_t rows) {
  ASSIGN_OR_RETURN(RollupWindow rollups, ReadRollupWindow(reader, window, span));
  LongWindowSummary summary =
      SummarizeRollups(rollups, window, options.pid,
                       IncidentLength(rows, window.end_ns - window.begin_ns, options.max_raw_rows));
  summary.estimated_rows = rows;
  Report report;
  if (summary.has_incident) {
    ExplainOptions inner = options;
    inner.window = WindowRequest{};
    inner.window.session = window.session;
    inner.window.from_ns = summary.incident_from_ns;
    inner.window.to_ns = summary.incident_to_ns;
    ASSIGN_OR_RETURN(WindowData w, LoadWindow(reader, inner.window));
    w.label = "incident " + w.label;
    report = Analyze(w, inner);
  } else {
    report.window = {window.session, window.begin_ns, window.end_ns, window.label};
    // SummarizeRollups finds an incident wherever raw rows overlap the window.
    report.notes.push_back(
        "no raw rows are left for this window (pruned under --max-db): no causal chains, the "
        "rollups above only");
  }
  report.long_window = std::move(summary);
  return report;
}

// --pid must name a process of the session: anything else would "explain" a thread that
// never ran as one that ran all the time.
Status CheckPidInSession(StoreReader& reader, int64_t session, int32_t pid) {
  std::map<int32_t, ProcessRecord> processes;
  RETURN_IF_ERROR(ReadProcesses(reader, session, &processes));
  if (processes.count(pid) > 0) return Status::Ok();
  std::string tracked;
  int listed = 0;
  for (const auto& [p, rec] : processes) {
    if (!rec.tracked || listed == 8) continue;
    tracked += (tracked.empty() ? "" : ", ") + std::to_string(p) + " " + rec.name;
    ++listed;
  }
  return NotFound("process " + std::to_string(pid) + " is not in session " +
                  std::to_string(session) + " of " + reader.path() +
                  " (traced processes: " + (tracked.empty() ? "none" : tracked) +
                  ") — hint: `gpuwhy query \"SELECT pid, name FROM process_names\"` lists "
                  "every process the recording saw");
}

}  // namespace

bool HasFindingWorthFixing(const std::vector<Finding>& findings) {
  return std::any_of(findings.begin(), findings.end(),
                     [](const Finding& x) { return x.severity != Severity::kLow; });
}

const Finding* TopHostCause(const Report& report) {
  for (const Finding& x : report.findings) {  // most severe first
    const RuleSpec* spec = RuleById(x.rule);
    if (spec != nullptr && spec->blames) return &x;
  }
  return nullptr;
}

StatusOr<NcclNodeRows> LoadNcclNode(StoreReader& reader, const WindowRequest& window,
                                    const std::string& node, int64_t wall_start_ns) {
  ASSIGN_OR_RETURN(WindowData w, LoadWindow(reader, window));
  NcclNodeRows out;
  out.node = node;
  out.wall_start_ns = wall_start_ns;
  out.calls = std::move(w.nccl_calls);
  for (const Event& e : w.events) {
    if (IsSync(e.op)) out.syncs.push_back(e);
  }
  return out;
}

StatusOr<Report> Explain(StoreReader& reader, const ExplainOptions& options) {
  Report report;
  bool done = false;
  if (options.pid != 0 || options.max_raw_rows > 0) {
    ASSIGN_OR_RETURN(SessionWindow window, ResolveWindow(reader, options.window));
    if (options.pid != 0) RETURN_IF_ERROR(CheckPidInSession(reader, window.session, options.pid));
    // A session without rollups (older than schema 7, or recorded before a file was migrated)
    // has only its raw rows, however long the window. A window reaching back before the raw
    // rows that are left (pruned under --max-db) reads the rollups even when short: raw rows
    // alone would count the pruned stretch as time in which nothing happened.
    ASSIGN_OR_RETURN(TierSpan span, ReadTierSpan(reader, window.session));
    if (options.max_raw_rows > 0 && span.has_rollups) {
      bool before_raw = span.raw_pruned() && (!span.has_raw || window.begin_ns < span.raw_first);
      ASSIGN_OR_RETURN(int64_t rows, EstimateWindowRows(reader, window));
      if (rows > options.max_raw_rows || before_raw) {
        ASSIGN_OR_RETURN(report, ExplainFromRollups(reader, options, window, span, rows));
        done = true;
      }
    }
  }
  if (!done) {
    ASSIGN_OR_RETURN(WindowData w, LoadWindow(reader, options.window));
    report = Analyze(w, options);
    // A process without CUDA calls feeds no GPU: explaining it as "training threads" would
    // describe a thread that never launched anything.
    if (options.pid != 0 && report.feed_time.empty()) {
      return InvalidArgument("process " + std::to_string(options.pid) +
                             " (and its tracked "
                             "children) made no CUDA calls in " +
                             report.window.label + " of session " +
                             std::to_string(report.window.session) +
                             " — hint: `gpuwhy sessions` and `gpuwhy query \"SELECT pid, "
                             "COUNT(*) FROM events WHERE op LIKE 'cu%' GROUP BY pid\"` show "
                             "which processes called CUDA");
    }
  }
  report.db_path = reader.path();
  FillSourceLines(&report);
  return report;
}

}  // namespace gw
