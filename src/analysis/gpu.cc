#include "analysis/gpu.h"

#include <algorithm>
#include <map>
#include <set>

#include "analysis/blame.h"
#include "analysis/explain.h"
#include "analysis/format.h"
#include "analysis/thresholds.h"

namespace gw {

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The activity figure a finding quotes: GPM SM activity where the device has it, else NVML
// utilization; < 0 when the sample has neither.
double Activity(const GpuSample& s) {
  if (s.sm_active_pct >= 0) return s.sm_active_pct;
  if (s.util_pct != kNull) return static_cast<double>(s.util_pct);
  return -1;
}

struct SampleInterval {
  int64_t begin = 0;
  int64_t end = 0;
  double activity = 0;
  CauseTimes causes{};
  int64_t observed = 0;  // ns of the interval inside the main thread's timeline
};

}  // namespace

const GpuSummary* JobGpu(const std::vector<GpuSummary>& gpus) {
  // The tracer does not know which GPU a process uses; the one it keeps busy stands out.
  const GpuSummary* best = nullptr;
  auto activity = [](const GpuSummary& g) {
    return g.sm_active_pct >= 0 ? g.sm_active_pct : g.util_pct;
  };
  for (const GpuSummary& g : gpus) {
    if (best == nullptr || activity(g) > activity(*best)) best = &g;
  }
  return best;
}

const GpuSummary* JobGpuOf(const std::vector<GpuSummary>& gpus, const WindowData& w, int32_t pid) {
  std::map<int32_t, int64_t> used;  // gpu → the process's summed SM utilization samples
  for (const GpuProcessSample& p : w.gpu_process_samples) {
    if (p.pid == pid && p.sm_util_pct != kNull && p.sm_util_pct > 0) used[p.gpu] += p.sm_util_pct;
  }
  const GpuSummary* best = nullptr;
  int64_t most = 0;
  for (const GpuSummary& g : gpus) {
    auto it = used.find(g.gpu);
    if (it != used.end() && it->second > most) most = it->second, best = &g;
  }
  return best != nullptr ? best : JobGpu(gpus);
}

std::vector<GpuSummary> SummarizeGpus(const WindowData& w) {
  std::map<int32_t, std::vector<const GpuSample*>> by_gpu;
  for (const GpuSample& s : w.gpu_samples) by_gpu[s.gpu].push_back(&s);
  std::vector<GpuSummary> out;
  for (const auto& [gpu, samples] : by_gpu) {
    GpuSummary g;
    g.gpu = gpu;
    for (const GpuDevice& d : w.gpu_devices) {
      if (d.gpu == gpu) {
        g.name = d.name;
        g.gpm = d.gpm_supported;
      }
    }
    g.samples = static_cast<int64_t>(samples.size());
    std::vector<double> util, mem, sm, occ, tensor, dram, clock, power, used;
    for (const GpuSample* s : samples) {
      if (s->util_pct != kNull) util.push_back(static_cast<double>(s->util_pct));
      if (s->mem_util_pct != kNull) mem.push_back(static_cast<double>(s->mem_util_pct));
      if (s->sm_active_pct >= 0) sm.push_back(s->sm_active_pct);
      if (s->sm_occupancy_pct >= 0) occ.push_back(s->sm_occupancy_pct);
      if (s->tensor_active_pct >= 0) tensor.push_back(s->tensor_active_pct);
      if (s->dram_bw_pct >= 0) dram.push_back(s->dram_bw_pct);
      if (s->sm_clock_mhz != kNull) clock.push_back(static_cast<double>(s->sm_clock_mhz));
      if (s->power_mw != kNull) power.push_back(static_cast<double>(s->power_mw) / 1000.0);
      if (s->mem_used_bytes != kNull) used.push_back(static_cast<double>(s->mem_used_bytes) / 1e9);
    }
    g.util_pct = Median(util);
    g.mem_util_pct = Median(mem);
    g.sm_active_pct = Median(sm);
    g.sm_occupancy_pct = Median(occ);
    g.tensor_active_pct = Median(tensor);
    g.dram_bw_pct = Median(dram);
    g.sm_clock_mhz = Median(clock);
    g.power_w = Median(power);
    g.mem_used_gb = Median(used);
    if (!sm.empty()) g.gpm = true;
    out.push_back(std::move(g));
  }
  return out;
}

void AddGpuEffects(const Facts& f, Report* r) {
  const GpuSummary* job = JobGpuOf(r->gpus, *f.w, f.main_pid);
  if (job == nullptr || !f.main_tl) return;
  const bool gpm = job->sm_active_pct >= 0;

  // The job GPU's samples as intervals (each sample covers the time since the previous one).
  std::vector<SampleInterval> intervals;
  int64_t prev = -1;
  for (const GpuSample& s : f.w->gpu_samples) {
    if (s.gpu != job->gpu) continue;
    int64_t begin = prev;
    prev = s.ts_ns;
    double a = gpm ? s.sm_active_pct : Activity(s);
    if (begin < 0 || a < 0) continue;
    // The job's loop only (Facts::loop_begin), as the budget: start-up and exit are no cause's.
    SampleInterval x;
    x.begin = std::max(begin, f.loop_begin);
    x.end = std::min(s.ts_ns, f.loop_end);
    x.activity = a;
    x.observed = x.end - x.begin;
    if (x.observed <= 0) continue;
    x.causes = PathOverlap(f, x.begin, x.end);
    intervals.push_back(x);
  }
  if (intervals.empty()) return;
  auto share = [](const SampleInterval& x, FeedCause c) {
    return static_cast<double>(At(x.causes, c)) / static_cast<double>(x.observed);
  };
  auto host_wait = [&](const SampleInterval& x) {
    double sum = 0;
    // Each waiting cause once (two rules may blame the same one); the main thread's own
    // computing is no wait: every sample has some.
    std::set<FeedCause> seen;
    for (const RuleSpec* b = RulesBegin(); b != RulesEnd(); ++b) {
      if (b->blames && b->cause != FeedCause::kRunning && seen.insert(b->cause).second) {
        sum += share(x, b->cause);
      }
    }
    return sum;
  };
  // The quietest samples: the quarter with the least host waiting (at least one).
  std::vector<const SampleInterval*> order;
  for (const SampleInterval& x : intervals) order.push_back(&x);
  std::stable_sort(order.begin(), order.end(),
                   [&](const SampleInterval* a, const SampleInterval* b) {
                     return host_wait(*a) < host_wait(*b);
                   });
  size_t quiet_n = std::max<size_t>(1, order.size() / 4);
  double quiet = 0;
  double quiet_wait = 0;
  for (size_t i = 0; i < quiet_n; ++i) {
    quiet += order[i]->activity;
    quiet_wait += host_wait(*order[i]);
  }
  quiet /= static_cast<double>(quiet_n);
  // A job held by its cause for the whole window has no unaffected stretch: its quietest
  // samples are affected too, and comparing with them would understate the idle time.
  bool baseline = quiet_wait / static_cast<double>(quiet_n) < thresholds::kGpuBlameShare;

  const std::string metric = gpm ? "SM active" : "utilization";
  for (Finding& finding : r->findings) {
    const RuleSpec* blamed = BlamedCauseOf(finding.rule);
    // The main thread computes in every sample: no stretch of it to compare with the rest.
    if (blamed == nullptr || blamed->cause == FeedCause::kRunning) continue;
    double sum = 0;
    int64_t n = 0;
    int64_t ns = 0;
    for (const SampleInterval& x : intervals) {
      if (share(x, blamed->cause) < thresholds::kGpuBlameShare) continue;
      sum += x.activity;
      ++n;
      ns += x.end - x.begin;
    }
    if (n < thresholds::kGpuMinBlamedSamples) continue;
    GpuEffect& e = finding.gpu;
    e.present = true;
    e.gpu = job->gpu;
    e.metric = metric;
    e.blamed_pct = sum / static_cast<double>(n);
    e.quiet_pct = quiet;
    e.blamed_samples = n;
    e.quiet_samples = static_cast<int64_t>(quiet_n);
    e.blamed_s = static_cast<double>(ns) / 1e9;
    finding.metrics.push_back({"gpu_blamed_activity_pct", e.blamed_pct, "%"});
    if (!baseline || quiet <= e.blamed_pct) {
      e.quiet_pct = -1;  // no baseline: JSON leaves the comparison out
      e.gpu_idle_s = -1;
      finding.effects.push_back(Fmt("GPU %d %s %.0f%% %s (%lld samples, %.1f s)%s", e.gpu,
                                    metric.c_str(), e.blamed_pct, blamed->phrase,
                                    static_cast<long long>(n), e.blamed_s,
                                    baseline ? "; no less active than the rest of the window"
                                             : "; the cause held the whole window, so there is "
                                               "no unaffected stretch to compare with"));
      continue;
    }
    e.gpu_idle_s = std::max(0.0, e.blamed_s * (e.quiet_pct - e.blamed_pct) / 100.0);
    finding.effects.push_back(
        Fmt("GPU %d %s %.0f%% %s (%lld samples, %.1f s) vs %.0f%% in the "
            "quietest samples: ~%.1f GPU-seconds idle",
            e.gpu, metric.c_str(), e.blamed_pct, blamed->phrase, static_cast<long long>(n),
            e.blamed_s, e.quiet_pct, e.gpu_idle_s));
    finding.metrics.push_back({"gpu_quiet_activity_pct", e.quiet_pct, "%"});
    finding.metrics.push_back({"gpu_idle_s", e.gpu_idle_s, "s"});
  }

  // The verdict: a busy GPU that the findings explain little of (every finding's lost seconds
  // are GPU time its cause cost, host-side or not: sync-heavy, malloc-churn as much as a wait),
  // and no finding of MEDIUM or more, whose fix would then speed the job up.
  double busy = gpm ? job->sm_active_pct : job->util_pct;
  double host_lost = 0;
  for (const Finding& x : r->findings) {
    if (x.severity != Severity::kLow) host_lost += x.lost_s;
  }
  double host_share = f.window_s > 0 ? host_lost / f.window_s : 0;
  double others = f.budget.window_s > 0 ? f.budget.gpu_busy_other_s / f.budget.window_s : 0;
  if (others >= thresholds::kSharedGpuVerdictShare) {
    r->gpu_verdict = Fmt(
        "the GPU is shared: other processes kept GPU %d busy %.0f%% of the "
        "window, this job %.0f%% — see gpu-sharing",
        job->gpu, others * 100, 100 * f.budget.gpu_busy_job_s / std::max(1e-9, f.budget.window_s));
  } else if (busy >= thresholds::kGpuBusyPct && host_share < thresholds::kGpuBoundHostShare &&
             !HasFindingWorthFixing(r->findings)) {
    r->gpu_verdict =
        Fmt("the GPU is the bottleneck: GPU %d %s %.0f%% (median), host-side causes "
            "explain < %.0f%% of the window (%.1f%%) — faster kernels, not a faster "
            "host, would speed this job up",
            job->gpu, metric.c_str(), busy, thresholds::kGpuBoundHostShare * 100, host_share * 100);
  }
}

}  // namespace gw
