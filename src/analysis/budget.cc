#include "analysis/budget.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "analysis/explain.h"
#include "analysis/gpu.h"
#include "analysis/thresholds.h"

namespace gw {

namespace {

namespace th = thresholds;

// Causes during which the GPU can only be working for the job when the host's earlier launches
// still fill its queue: the host is computing, not waiting.
bool IsCompute(BudgetCause c) {
  return c == BudgetCause::kHostCompute || c == BudgetCause::kHelperCompute ||
         c == BudgetCause::kAllocator;
}

// Stretches in which the GPU provably had the job's work (sorted, disjoint): from the moment the
// job's process last gave the GPU work to the entry of one of its syncs that then waited
// (kWorkedSyncNs). That sync found work queued no later than that moment still running, and a
// GPU runs a queue in order, so it never ran dry in between: whatever held the critical path
// there — a sleep, a wait, the host computing — cost no GPU time. A throttle's time.sleep()
// after the step is queued is such a stretch; a wait for a batch before the step is launched is
// not (the launches come after it). Needs since_work_ns (schema 13): older recordings have none.
// since_work_ns counts from the last work gpuwhy saw, and launches made while the duty-cycled
// launch probes were detached left no trace: the sync may have waited for such a launch, made
// after the GPU had run dry. So the stretch starts no earlier than the end of the last unprobed
// stretch before the sync (launch_estimates.unprobed): from there on every launch was seen, and
// the last work was no later. A sync entered while the probes were detached proves nothing.
using Spans = TimeSpans;
Spans WorkedSpans(const Facts& f) {
  const Spans& blind = f.w->launch_estimates.unprobed;
  Spans spans;
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid || !IsSync(e.op) || e.since_work_ns == kNull || e.since_work_ns <= 0 ||
        e.duration_ns < th::kWorkedSyncNs) {
      continue;
    }
    int64_t a = e.ts_ns - e.since_work_ns;
    // The last unprobed stretch that starts before the sync's entry.
    auto it = std::upper_bound(blind.begin(), blind.end(), e.ts_ns,
                               [](int64_t x, const auto& s) { return x <= s.first; });
    if (it != blind.begin()) {
      --it;
      if (it->second >= e.ts_ns) continue;
      a = std::max(a, it->second);
    }
    spans.push_back({a, e.ts_ns});
  }
  return MergeSpans(std::move(spans));
}

// Calls that give the GPU no work: syncs and synchronous allocations.
bool GivesNoWork(const Event& e) {
  return IsSync(e.op) || ((IsAlloc(e.op) || IsFree(e.op)) && e.op != Op::kCudaMallocAsync &&
                          e.op != Op::kCudaFreeAsync);
}

// Stretches in which the GPU provably had none of the job's work (sorted, disjoint): from the
// return of a call that drains the device (DrainsDevice: a device sync, a cudaFree) through the
// main thread's calls that give the GPU no work (syncs, synchronous allocations) that follow it,
// each either back to back, within kDrainGapNs of the previous one (too little time to launch a
// kernel between them), or, where the launch probes watched the time since the previous one, with
// a since_work_ns that shows no work given since the drain began (every launch of the process
// updates it then). Launch probes are attached one second in every --launch-duty (10 by
// default), so elsewhere most launches have no row and leave no trace in since_work_ns: there a
// thread of the process seen launching kernels that runs on a CPU inside the stretch voids it
// (it may have launched). Where a row's since_work_ns shows work given since the drain began,
// or a drain that waited (work was queued), the stretch ends at that row. The drain finished all
// earlier work, so the GPU idled for the job there, whatever NVML's utilization says (it counts
// the driver's own memory work after a cudaFree as busy): a loop that empties the allocator's
// cache every step idles the GPU through the burst of frees after the step, and in watched time
// through the next step's allocations up to its first launch. Recordings whose allocator rows
// carry no since_work_ns (before 2026-12-07) are judged by the gaps alone.
Spans DrainedSpans(const Facts& f, const Spans& unprobed, int64_t watched_from) {
  std::set<int32_t> launchers;  // other threads of the main process seen launching
  for (const Event& e : f.events) {
    if (e.pid == f.main_pid && e.tid != f.main_tid &&
        (IsLaunch(e.op) || e.op == Op::kCudaGraphLaunch)) {
      launchers.insert(e.tid);
    }
  }
  auto launcher_ran = [&](int64_t a, int64_t b) {
    for (const ThreadTimeline& tl : f.train_tls) {
      if (launchers.count(tl.tid()) && At(tl.Overlap(a, b), FeedCause::kRunning) > 0) return true;
    }
    return false;
  };
  // Whether every launch of the process in [a, b] updated since_work_ns: the probes were
  // attached throughout (recordings without coverage rows only where launches were all counted).
  const bool coverage = f.w->launch_estimates.coverage_known || f.w->launch_duty <= 1;
  auto watched = [&](int64_t a, int64_t b) {
    if (!coverage || watched_from < 0 || a < watched_from) return false;
    auto it = std::upper_bound(unprobed.begin(), unprobed.end(), a,
                               [](int64_t x, const auto& s) { return x < s.second; });
    return it == unprobed.end() || it->first > b;
  };
  Spans spans;
  int64_t drain_start = -1;  // entry of the drain the open stretch rests on
  int64_t start = -1, last = -1;
  auto close = [&] {
    if (start >= 0 && last > start && (watched(start, last) || !launcher_ran(start, last))) {
      spans.push_back({start, last});
    }
    start = last = drain_start = -1;
  };
  for (const Event& e : f.events) {
    if (e.tid != f.main_tid || e.duration_ns < 0) continue;
    bool shown = e.since_work_ns != kNull && e.since_work_ns > 0 && drain_start >= 0;
    bool seen_work = shown && e.ts_ns - e.since_work_ns > drain_start;
    bool waited = DrainedDevice(e) && e.duration_ns >= th::kWorkedSyncNs;
    if (start >= 0 && e.ts_ns >= last && GivesNoWork(e) && !seen_work && !waited &&
        (e.ts_ns - last <= th::kDrainGapNs || (shown && watched(last, e.ts_ns)))) {
      last = std::max(last, e.End());
      if (DrainedDevice(e)) drain_start = e.ts_ns;  // the proof now rests on this drain too
      continue;
    }
    if (OpLayer(e.op) != Layer::kHost) close();  // a gap, or a call that may give work
    if (DrainedDevice(e)) {
      drain_start = e.ts_ns;
      start = last = e.End();
    }
  }
  close();
  return MergeSpans(std::move(spans));
}

// The budget detail of [a, b) that falls in `spans`.
BudgetTimes SpanDetail(const Facts& f, const Spans& spans, int64_t a, int64_t b) {
  BudgetTimes out{};
  auto it = std::upper_bound(spans.begin(), spans.end(), a,
                             [](int64_t x, const auto& s) { return x < s.second; });
  for (; it != spans.end() && it->first < b; ++it) {
    BudgetTimes part = PathDetailOverlap(f, std::max(a, it->first), std::min(b, it->second));
    for (size_t i = 0; i < kBudgetCauseCount; ++i) out[i] += part[i];
  }
  return out;
}

// Accumulates the budget in ns.
struct Tally {
  int64_t busy_job = 0;
  int64_t busy_other = 0;
  int64_t idle = 0;
  int64_t unattributed = 0;
  std::array<double, kBudgetCauseCount> lost{};  // ns, fractional
  int64_t covered = 0;                           // ns of the window the evidence covered
};

// What the job's own CUDA calls prove about the GPU: stretches it had the job's work all through
// (WorkedSpans) and stretches it had none of it (DrainedSpans). Where the launch probes were
// detached (`unprobed`) no sync proves it worked, and only back-to-back calls prove it drained,
// so there the shares of each cause's path time the proofs covered in the watched time
// (`worked_share`, `dry_share`) stand in: estimates, as the launch counts of those stretches are,
// which a steady loop makes exact (its steps look alike whether the probes watched or not).
struct Proofs {
  Spans worked;
  Spans drained;
  Spans unprobed;
  Spans drained_unprobed;  // drained ∩ unprobed
  std::array<double, kBudgetCauseCount> worked_share{};
  std::array<double, kBudgetCauseCount> dry_share{};
};

// The intersection of two sorted, disjoint span lists.
Spans Intersect(const Spans& x, const Spans& y) {
  Spans out;
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    int64_t a = std::max(x[i].first, y[j].first), b = std::min(x[i].second, y[j].second);
    if (a < b) out.push_back({a, b});
    (x[i].second < y[j].second ? i : j)++;
  }
  return out;
}

Proofs MakeProofs(const Facts& f, int64_t begin, int64_t end) {
  // Watched time starts at the process's first CUDA call seen: before its library's probes were
  // attached no call could prove anything, whatever the launch coverage says.
  auto first = std::find_if(f.events.begin(), f.events.end(), [&](const Event& e) {
    return e.pid == f.main_pid && OpLayer(e.op) != Layer::kHost;
  });
  int64_t watched_from = first == f.events.end() ? -1 : first->ts_ns;
  const Spans& unprobed = f.w->launch_estimates.unprobed;
  Proofs p{WorkedSpans(f), DrainedSpans(f, unprobed, watched_from), unprobed, {}, {}, {}};
  if (p.unprobed.empty() || watched_from < 0) return p;
  p.drained_unprobed = Intersect(p.drained, p.unprobed);
  begin = std::max(begin, watched_from);
  BudgetTimes all = PathDetailOverlap(f, begin, end);
  BudgetTimes blind = SpanDetail(f, p.unprobed, begin, end);
  BudgetTimes worked = SpanDetail(f, p.worked, begin, end);
  BudgetTimes dry = SpanDetail(f, p.drained, begin, end);
  BudgetTimes dry_blind = SpanDetail(f, p.drained_unprobed, begin, end);
  for (size_t i = 0; i < kBudgetCauseCount; ++i) {
    int64_t probed = all[i] - std::min(blind[i], all[i]);
    if (probed <= 0) continue;
    auto share = [&](int64_t ns) {
      return std::clamp(static_cast<double>(ns) / static_cast<double>(probed), 0.0, 1.0);
    };
    p.worked_share[i] = share(worked[i]);
    p.dry_share[i] = share(dry[i] - std::min(dry_blind[i], dry[i]));
  }
  return p;
}

// The path detail of [a, b) split by the proofs: `dry` is the time in drained stretches (in
// unprobed time at least the watched share of it); `rest` the time in neither (worked time,
// proven or in unprobed time the watched share of it, takes no idle time, so it is left out of
// both). sync_wait is left whole in `rest`: the job waiting on the GPU is never the GPU's idle
// time.
struct StretchDetail {
  BudgetTimes rest{};
  BudgetTimes dry{};
};
StretchDetail SplitDetail(const Facts& f, const Proofs& p, int64_t a, int64_t b) {
  StretchDetail out;
  out.rest = PathDetailOverlap(f, a, b);
  BudgetTimes w = SpanDetail(f, p.worked, a, b);
  BudgetTimes blind = p.unprobed.empty() ? BudgetTimes{} : SpanDetail(f, p.unprobed, a, b);
  BudgetTimes dr = SpanDetail(f, p.drained, a, b);
  BudgetTimes dr_blind =
      p.drained_unprobed.empty() ? BudgetTimes{} : SpanDetail(f, p.drained_unprobed, a, b);
  for (size_t i = 0; i < kBudgetCauseCount; ++i) {
    if (static_cast<BudgetCause>(i) == BudgetCause::kSyncWait) continue;
    // In unprobed time the watched share, where it says more than the back-to-back calls prove.
    auto estimate = static_cast<int64_t>(p.dry_share[i] * static_cast<double>(blind[i]));
    out.dry[i] = std::min(dr[i] + std::max<int64_t>(0, estimate - dr_blind[i]), out.rest[i]);
    out.rest[i] -= out.dry[i];
    auto worked = w[i] + static_cast<int64_t>(p.worked_share[i] * static_cast<double>(blind[i]));
    out.rest[i] -= std::min(worked, out.rest[i]);
  }
  return out;
}

// One stretch [a, b) with a known GPU state: `busy` (0–1) of it the GPU worked, `other` (0–busy)
// of it for other processes. The GPU idled for the job at least through the path's drained
// time (less what others ran there), which takes the idle time first, in full: nothing of the
// job's was queued. The rest goes to the waits on the critical path (while the host waits it
// launches nothing, so the GPU drains), in proportion to their time and at most that time; what
// is left goes to the host's computing (the GPU overlaps most of it: only the idle time the waits
// do not explain is the computing's); idle beyond both (the path was in syncs) stays
// unattributed. Path time in `worked` (the GPU had work all through it) takes none of it. Sync
// time while the GPU served others is the neighbour's.
void AddStretch(const Facts& f, const Proofs& p, int64_t a, int64_t b, double busy, double other,
                Tally* t) {
  if (b <= a) return;
  StretchDetail sd = SplitDetail(f, p, a, b);
  const BudgetTimes& d = sd.rest;
  double len = static_cast<double>(b - a);
  busy = std::clamp(busy, 0.0, 1.0);
  other = std::clamp(other, 0.0, busy);
  double dry = 0, waits = 0, compute = 0;
  for (size_t i = 0; i < kBudgetCauseCount; ++i) {
    auto c = static_cast<BudgetCause>(i);
    if (c == BudgetCause::kSyncWait) continue;
    dry += static_cast<double>(sd.dry[i]);
    (IsCompute(c) ? compute : waits) += static_cast<double>(d[i]);
  }
  double idle = std::max((1.0 - busy) * len, std::min(dry, (1.0 - other) * len));
  double dry_share = dry > 0 ? std::min(1.0, idle / dry) : 0.0;
  double rest = idle - dry * dry_share;
  double wait_share = waits > 0 ? std::min(1.0, rest / waits) : 0.0;
  rest -= waits * wait_share;
  double compute_share = compute > 0 ? std::min(1.0, rest / compute) : 0.0;
  rest -= compute * compute_share;
  for (size_t i = 0; i < kBudgetCauseCount; ++i) {
    auto c = static_cast<BudgetCause>(i);
    if (c == BudgetCause::kSyncWait) continue;
    t->lost[i] += static_cast<double>(sd.dry[i]) * dry_share +
                  static_cast<double>(d[i]) * (IsCompute(c) ? compute_share : wait_share);
  }
  // The job waited on the GPU while it ran other processes' work: that work's time, at most the
  // job's own waiting.
  t->lost[static_cast<size_t>(BudgetCause::kSyncWait)] +=
      std::min(other * len, static_cast<double>(At(d, BudgetCause::kSyncWait)));
  t->unattributed += static_cast<int64_t>(std::max(0.0, rest));
  t->idle += static_cast<int64_t>(idle);
  t->busy_other += static_cast<int64_t>(other * len);
  t->busy_job += static_cast<int64_t>(std::max(0.0, len - idle - other * len));
  t->covered += b - a;
}

// NVML: the job's GPU's samples as stretches (each covers the time since the previous one), its
// utilization as the busy share (what nvidia-smi shows: a kernel running), split between the job
// and others by the per-process samples read at the same time. Returns false without samples.
bool FromNvml(const Facts& f, const Proofs& proofs, int64_t begin, int64_t end, GpuBudget* out,
              Tally* t) {
  const WindowData& w = *f.w;
  std::vector<GpuSummary> gpus = SummarizeGpus(w);
  const GpuSummary* job = JobGpuOf(gpus, w, f.main_pid);
  if (job == nullptr) return false;
  // Per-process samples of that GPU by read time: the job's processes vs everyone else's.
  std::map<int64_t, std::pair<double, double>> split;  // ts → (job %, others %)
  for (const GpuProcessSample& p : w.gpu_process_samples) {
    if (p.gpu != job->gpu || p.sm_util_pct == kNull || p.sm_util_pct <= 0) continue;
    auto& [mine, theirs] = split[p.ts_ns];
    (IsOwnPid(f, p.pid) ? mine : theirs) += static_cast<double>(p.sm_util_pct);
  }
  // Samples are pooled into stretches of at least kBudgetPoolNs: NVML's utilization covers its
  // own period (1/6 s on recent drivers), not exactly the interval since the previous read, so
  // per-sample pairing would hand a wait's idle time to the computing next to it.
  int64_t prev = -1;
  bool any = false;
  int64_t pool_start = -1, pool_end = -1;
  double pool_busy = 0, pool_other = 0;  // ns-weighted
  auto flush = [&] {
    int64_t len = pool_end - pool_start;
    if (pool_start >= 0 && len > 0) {
      AddStretch(f, proofs, pool_start, pool_end, pool_busy / static_cast<double>(len),
                 pool_other / static_cast<double>(len), t);
    }
    pool_start = pool_end = -1;
    pool_busy = pool_other = 0;
  };
  for (const GpuSample& s : w.gpu_samples) {
    if (s.gpu != job->gpu) continue;
    int64_t a = prev;
    prev = s.ts_ns;
    double util = s.util_pct != kNull    ? static_cast<double>(s.util_pct)
                  : s.sm_active_pct >= 0 ? s.sm_active_pct
                                         : -1;
    if (a < 0 || util < 0) continue;
    double busy = std::clamp(util / 100.0, 0.0, 1.0);
    double other = 0;
    // The per-process reads of this interval (the sampler reads them with the device sample).
    for (auto it = split.upper_bound(a); it != split.end() && it->first <= s.ts_ns; ++it) {
      double sum = it->second.first + it->second.second;
      if (sum > 0) other = busy * it->second.second / sum;
    }
    int64_t x = std::max(a, begin), y = std::min(s.ts_ns, end);
    if (y <= x) continue;
    if (pool_start >= 0 && x != pool_end) flush();  // a gap: pools never span one
    if (pool_start < 0) pool_start = x;
    pool_end = y;
    pool_busy += busy * static_cast<double>(y - x);
    pool_other += other * static_cast<double>(y - x);
    any = true;
    if (pool_end - pool_start >= th::kBudgetPoolNs) flush();
  }
  flush();
  if (!any) return false;
  out->gpu = job->gpu;
  out->source = split.empty() ? "nvml" : "nvml-process";
  return true;
}

// No GPU samples: stream evidence from the main thread's syncs. A sync that returned at once
// (within kStreamSyncIdleNs: the call's own cost) proves the GPU had run dry before the host got
// there: the host's computing in that step was idle GPU time. Any longer sync may have found it
// working, so the computing counts as overlapped. Waits (for batches, I/O, locks, a CPU) leave
// nothing queued behind a sync per step, so they count as idle either way, but for path time in
// `worked` (the GPU had work all through it). Path time in drained stretches is idle whatever held
// it (nothing of the job's was queued).
void FromStream(const Facts& f, const Proofs& proofs, int64_t begin, int64_t end, Tally* t) {
  std::vector<const Event*> syncs;
  for (const Event& e : f.events) {
    // A cudaFree waits for the device like a sync.
    if (e.tid == f.main_tid && (IsSync(e.op) || DrainedDevice(e)) && e.ts_ns >= begin &&
        e.ts_ns < end) {
      syncs.push_back(&e);
    }
  }
  int64_t step_start = begin;
  auto step = [&](int64_t a, int64_t b, bool gpu_working) {
    StretchDetail sd = SplitDetail(f, proofs, a, b);
    int64_t idle = 0;
    for (size_t i = 0; i < kBudgetCauseCount; ++i) {
      auto c = static_cast<BudgetCause>(i);
      if (c == BudgetCause::kSyncWait) continue;
      int64_t lost = sd.dry[i] + (IsCompute(c) && gpu_working ? 0 : sd.rest[i]);
      t->lost[i] += static_cast<double>(lost);
      idle += lost;
    }
    t->idle += idle;
    t->busy_job += (b - a) - idle;
    t->covered += b - a;
  };
  for (const Event* e : syncs) {
    int64_t stop = std::min(end, e->End());
    if (stop <= step_start) continue;
    step(step_start, stop, e->duration_ns > th::kStreamSyncIdleNs);
    step_start = stop;
  }
  // After the last sync (or without any): no proof either way; the host's computing is not
  // counted as idle.
  if (step_start < end) step(step_start, end, true);
}

}  // namespace

void ComputeBudget(Facts* f) {
  if (!f->main_tl) return;
  GpuBudget& b = f->budget;
  const int64_t begin = f->loop_begin;
  const int64_t end = f->loop_end;
  b.startup_s = static_cast<double>(begin - f->main_tl->begin()) / 1e9;
  b.exit_s = static_cast<double>(f->main_tl->end() - end) / 1e9;
  if (end <= begin) return;
  Tally t;
  const Proofs proofs = MakeProofs(*f, begin, end);
  if (!FromNvml(*f, proofs, begin, end, &b, &t)) {
    b.source = "stream";
    FromStream(*f, proofs, begin, end, &t);
  }
  const double window = static_cast<double>(end - begin);
  // Stretches no sample covered (before the first one) count like the covered ones.
  double scale = t.covered > 0 ? window / static_cast<double>(t.covered) : 0.0;
  b.present = true;
  b.window_s = window / 1e9;
  b.gpu_busy_job_s = static_cast<double>(t.busy_job) * scale / 1e9;
  b.gpu_busy_other_s = static_cast<double>(t.busy_other) * scale / 1e9;
  b.gpu_idle_s = static_cast<double>(t.idle) * scale / 1e9;
  b.idle_unattributed_s = static_cast<double>(t.unattributed) * scale / 1e9;
  for (size_t i = 0; i < kBudgetCauseCount; ++i) {
    BudgetLine line;
    line.cause = static_cast<BudgetCause>(i);
    line.path_s = static_cast<double>(f->path_detail[i]) / 1e9;
    // Never more than the cause held the path (the extrapolation to uncovered stretches).
    line.lost_s = std::min(t.lost[i] * scale / 1e9, line.path_s);
    if (line.cause != BudgetCause::kSyncWait) {
      b.idle_attributed_s += line.lost_s;
    }
    b.lines.push_back(line);
  }
  for (const auto& [tid, ns] : f->holders.thread) {
    if (static_cast<double>(ns) / 1e9 > b.hold_s) {
      b.hold_s = static_cast<double>(ns) / 1e9;
      b.hold_tid = tid;
    }
  }
  b.gpu_bound = b.window_s > 0 && b.gpu_busy_job_s >= th::kGpuBoundBusyShare * b.window_s;
}

double BudgetPathS(const Facts& f, BudgetCause c) {
  size_t i = static_cast<size_t>(c);
  return i < f.budget.lines.size() ? f.budget.lines[i].path_s : 0.0;
}

double BudgetLostS(const Facts& f, BudgetCause c) {
  size_t i = static_cast<size_t>(c);
  return i < f.budget.lines.size() ? f.budget.lines[i].lost_s : 0.0;
}

}  // namespace gw
