// The CUDA API and the GPU: staged copies, syncs and launches that bound the step, allocator
// spikes and failures, the cold start, and another process sharing the GPU.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "analysis/budget.h"
#include "analysis/format.h"
#include "analysis/rules.h"
#include "analysis/timeline.h"

namespace gw::rules {

namespace {

// Per-second launch and sync counts of the main process (op_seconds).
void LaunchAndSyncRates(const Facts& f, double* launches_per_s, double* syncs_per_s,
                        double* launch_ns_per_s) {
  int64_t launches = 0, syncs = 0;
  double launch_ns = 0;
  int64_t launch_rows_ns = 0, launch_rows = 0;
  for (const Event& e : f.w->launch_samples) {
    if (e.pid != f.main_pid) continue;
    launch_rows_ns += e.duration_ns;
    ++launch_rows;
  }
  double mean = launch_rows > 0 ? static_cast<double>(launch_rows_ns) / launch_rows : 0;
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid) continue;
    if (IsLaunch(r.op)) {
      // Older recordings counted a nested driver launch again: there, runtime launches only.
      if (f.w->launches_once || OpLayer(r.op) == Layer::kCudaRuntime) {
        launches += r.count;
        launch_ns +=
            r.total_ns > 0 ? static_cast<double>(r.total_ns) : mean * static_cast<double>(r.count);
      }
    }
    if (IsSync(r.op)) syncs += r.count;
  }
  // Launches the probes did not see (launch_estimate.h): scale what was counted.
  launches = f.w->launch_estimates.Scaled(f.main_pid, launches);
  launch_ns *= f.w->launch_estimates.Scale(f.main_pid);
  if (launches > 0 && launch_rows > 0) {
    // Counted-only launches carry no time: scale the sampled mean to every call.
    launch_ns = std::max(launch_ns, mean * static_cast<double>(launches));
  }
  double s = std::max(1.0, f.window_s);
  *launches_per_s = static_cast<double>(launches) / s;
  *syncs_per_s = static_cast<double>(syncs) / s;
  *launch_ns_per_s = launch_ns / s;
}

bool IsRuntimeLaunch(Op op) { return IsLaunch(op) && OpLayer(op) == Layer::kCudaRuntime; }

// LaunchAndSyncRates in SQL: the main process's syncs and launches in the window's seconds
// over the seconds it was alive in the window (at least 1).
EvidenceQuery LaunchAndSyncRatesQuery(const Facts& f) {
  std::string syncs = "op IN (" + OpNamesWhere(IsSync) + ")";
  std::string launches =
      "op IN (" + OpNamesWhere(f.w->launches_once ? IsLaunch : IsRuntimeLaunch) + ")";
  std::string seconds = Fmt("%.9f", std::max(1.0, f.window_s));
  // Launches the probes did not see: the estimate scales the count (launch_estimate.h).
  double scale = f.w->launch_estimates.Scale(f.main_pid);
  std::string launch_count = scale > 1.0005 ? Fmt("%.4f * count", scale) : std::string("count");
  std::string what = "syncs and kernel launches of the training process, per second it ran";
  if (!f.w->launches_once) {
    what += " (this recording counted nested driver launches again: runtime launches only)";
  }
  if (scale > 1.0005) {
    what += Fmt(" (launches estimated: %.4f x those counted, for the launching time the probes "
                "did not cover)",
                scale);
  }
  return {what,
          Sql(f, "SELECT SUM(CASE WHEN " + syncs +
                     " THEN count ELSE 0 END) AS syncs, SUM(CASE "
                     "WHEN " +
                     launches + " THEN " + launch_count +
                     " ELSE 0 END) AS launches, ROUND(SUM(CASE WHEN " + syncs +
                     " THEN count ELSE 0 END) / " + seconds +
                     ", 1) AS syncs_per_s, ROUND(SUM(CASE WHEN " + launches + " THEN " +
                     launch_count + " ELSE 0 END) / " + seconds +
                     ", 1) AS launches_per_s FROM op_stats_seconds WHERE session = {S} AND pid "
                     "= {P} AND sec >= {FS} AND sec < {TS}")};
}

}  // namespace

void MemcpyBottleneck(const Facts& f, std::vector<Finding>* out) {
  int64_t n = 0, ns = 0;
  double bytes = 0, pageable_bytes = 0, pageable_ns = 0, pinned_bytes = 0, pinned_ns = 0;
  for (const Event& e : f.events) {
    // The main thread's host↔device copies: what its memcpy time was spent on.
    if (e.tid != f.main_tid || !IsMemcpy(e.op)) continue;
    if (CopyWaitedForStream(e)) continue;  // a readback waiting for the stream: a sync
    bool pinned = e.kind != kNull && (e.kind & kCopyPinnedHost) != 0;
    int64_t dir = e.kind == kNull ? 4 : (e.kind & ~kCopyPinnedHost);
    if (dir == static_cast<int64_t>(CopyKind::kDeviceToDevice)) continue;
    ++n;
    ns += e.duration_ns;
    double b = e.bytes == kNull ? 0 : static_cast<double>(e.bytes);
    bytes += b;
    if (pinned) {
      pinned_bytes += b;
      pinned_ns += static_cast<double>(e.duration_ns);
    } else {
      pageable_bytes += b;
      pageable_ns += static_cast<double>(e.duration_ns);
    }
  }
  // Short copies the row budget counted in the kernel instead of writing rows: they are on no
  // path, so the process's host-device ones are added (per process: their thread is unknown).
  int64_t short_n = 0, short_ns = 0;
  double short_bytes = 0;
  for (const CopyAggregateRow& a : f.w->copy_aggregates) {
    if (a.pid != f.main_pid ||
        a.direction == CopyKindName(static_cast<int64_t>(CopyKind::kDeviceToDevice))) {
      continue;
    }
    short_n += a.count;
    short_ns = SaturatingAdd(short_ns, a.total_ns);
    short_bytes += static_cast<double>(a.bytes);
  }
  // The main thread's own copies, plus copies of the helper threads it waited for.
  int64_t main_memcpy = SaturatingAdd(At(f.path, FeedCause::kMemcpy), short_ns);
  n += short_n;
  bytes += short_bytes;
  double share = Share(static_cast<double>(main_memcpy), static_cast<double>(f.window_ns));
  std::optional<Severity> graded =
      Ladder(share, th::kMemcpyHighShare, th::kMemcpyMediumShare, th::kMemcpyLowShare);
  if (!graded) return;
  Severity sev = *graded;
  double pageable_share = Share(pageable_bytes, pageable_bytes + pinned_bytes);
  Finding x;
  x.rule = "memcpy-bottleneck";
  x.severity = sev;
  x.cause = pageable_share >= th::kPageableBytesShareMin ? "Pageable host-to-device copies"
                                                         : "Host-device copies";
  x.effect = "GPU waiting on data transfer";
  // The copies' share of the GPU idle time (budget.cc); short copies counted in the kernel are
  // on no timeline and count at the same rate as the rows.
  double path_memcpy = BudgetPathS(f, BudgetCause::kMemcpy);
  double idle_rate = path_memcpy > 0 ? BudgetLostS(f, BudgetCause::kMemcpy) / path_memcpy : 1.0;
  x.lost_s = BudgetLostS(f, BudgetCause::kMemcpy) + Sec(short_ns) * idle_rate;
  x.root.push_back(
      Fmt("%s host-device cudaMemcpy* calls took %s s of %s s on the main thread (%s of wall "
          "clock), %s moved",
          FormatCount(n).c_str(), FormatSeconds(Sec(main_memcpy)).c_str(),
          FormatSeconds(f.window_s).c_str(), FormatPct(share).c_str(), FormatBytes(bytes).c_str()));
  if (short_n > 0) {
    x.root.push_back(
        Fmt("%s of them short enough to be counted in the kernel, not written as "
            "rows (%s s, any thread of the process)",
            FormatCount(short_n).c_str(), FormatSeconds(Sec(short_ns)).c_str()));
  }
  if (pageable_bytes > 0) {
    std::string pinned_bw =
        pinned_ns > 0 ? Fmt(" vs pinned %.1f GB/s", pinned_bytes / pinned_ns) : std::string();
    x.root.push_back(Fmt("%s of host bytes copied from pageable memory at %.1f GB/s%s",
                         FormatPct(pageable_share).c_str(),
                         pageable_ns > 0 ? pageable_bytes / pageable_ns : 0.0, pinned_bw.c_str()));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  if (pageable_share >= th::kPageableBytesShareMin) {
    x.fix.push_back(
        "use page-locked buffers: DataLoader(pin_memory=True) and "
        "tensor.to('cuda', non_blocking=True)");
  }
  x.fix.push_back(
      "overlap copies with compute: issue them on a side stream "
      "(torch.cuda.Stream) one batch ahead");
  x.fix.push_back("move less: send uint8/fp16 tensors and convert/normalize on the GPU");
  x.metrics.push_back({"memcpy_s", Sec(main_memcpy), "s"});
  x.metrics.push_back({"memcpy_share", share * 100, "%"});
  x.metrics.push_back({"pageable_bytes_share", pageable_share * 100, "%"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(
      &x,
      {{"the main thread's host-device copies (device-to-device left out) from pageable and "
        "pinned host memory",
        CudaCalls(f) + "SELECT CASE WHEN kind & " + std::to_string(kCopyPinnedHost) +
            " THEN 'pinned' ELSE 'pageable' END AS host_memory, COUNT(*) AS copies, SUM(bytes) "
            "AS bytes, ROUND(100.0 * SUM(bytes) / SUM(SUM(bytes)) OVER (), 1) AS bytes_pct, "
            "ROUND(SUM(bytes) * 1.0 / SUM(duration_ns), 1) AS gb_per_s FROM calls WHERE tid = " +
            std::to_string(f.main_tid) + " AND op IN (" + OpNamesWhere(IsMemcpy) +
            ") AND COALESCE(kind & ~" + std::to_string(kCopyPinnedHost) + ", " +
            std::to_string(static_cast<int64_t>(CopyKind::kDefault)) +
            ") != " + std::to_string(static_cast<int64_t>(CopyKind::kDeviceToDevice)) +
            " GROUP BY host_memory"},
       {"copies by op and kind (kind & 16 = pinned host memory; 1 HtoD, 2 DtoH)",
        Sql(f,
            "SELECT op, kind, COUNT(*) AS copies, SUM(bytes) / 1000000 AS mb, "
            "ROUND(SUM(duration_ns) / 1e9, 2) AS seconds, ROUND(SUM(bytes) * 1.0 / "
            "SUM(duration_ns), 2) AS gb_per_s FROM {EVENTS} WHERE {IN_S}pid = {P} AND op IN (" +
                OpNamesWhere(IsMemcpy) +
                ") AND timestamp >= {F} AND timestamp < {T} GROUP BY op, kind ORDER BY seconds "
                "DESC")}});
  if (short_n > 0) {
    x.evidence.push_back(
        {"short copies counted in the kernel, not rows, by op and direction",
         Sql(f,
             "SELECT op, name AS direction, SUM(count) AS copies, SUM(bytes) AS bytes, "
             "ROUND(SUM(total_ns) / 1e9, 3) AS seconds FROM op_stats_seconds WHERE session = "
             "{S} AND pid = {P} AND sec >= {FS} AND sec < {TS} AND name IS NOT NULL AND op "
             "IN (" +
                 OpNamesWhere(IsMemcpy) + ") GROUP BY op, name ORDER BY seconds DESC")});
  }
  out->push_back(std::move(x));
}

bool SyncDrainsThePipeline(const Facts& f) {
  double lps = 0, sps = 0, lns = 0;
  LaunchAndSyncRates(f, &lps, &sps, &lns);
  if (sps < th::kSyncHeavyPerSec || lps / sps >= th::kSyncHeavyLaunchesPerSync) return false;
  // The host keeps up with the GPU between syncs (its computing on the path is less than the
  // GPU's work for the job): what idles the GPU is the empty queue after each sync.
  double host = MainComputePathS(f) + BudgetPathS(f, BudgetCause::kHelperCompute);
  return f.budget.present && host < f.budget.gpu_busy_job_s;
}

void SyncHeavy(const Facts& f, std::vector<Finding>* out) {
  double lps = 0, sps = 0, lns = 0;
  LaunchAndSyncRates(f, &lps, &sps, &lns);
  if (!SyncDrainsThePipeline(f)) return;
  double per_sync = sps > 0 ? lps / sps : 0;
  // Lost: the GPU idle while the host launched the next kernels into a drained queue (the
  // budget's host and helper computing); without the syncs the host would run ahead.
  double lost = MainComputeLostS(f) + BudgetLostS(f, BudgetCause::kHelperCompute);
  Finding x;
  x.rule = "sync-heavy";
  x.severity = Ladder(Share(lost, f.budget.window_s)).value_or(Severity::kLow);
  if (sps < th::kSyncHeavyMediumPerSec) x.severity = Severity::kLow;
  x.cause = "Sync-heavy training loop";
  x.effect = "GPU pipeline drained at every sync";
  x.lost_s = lost;
  x.root.push_back(
      Fmt("%s synchronizations/s against %s kernel launches/s (%.1f launches per "
          "sync)",
          FormatRate(sps).c_str(), FormatRate(lps).c_str(), per_sync));
  double in_syncs = Sec(At(f.main_totals, FeedCause::kSync));
  x.root.push_back(Fmt("After each sync the queue is empty: the GPU idled %s s while the host "
                       "launched the next kernels (%s s of computing on the critical path, "
                       "less than the GPU's %s s of work for the job)",
                       FormatSeconds(lost).c_str(),
                       FormatSeconds(MainComputePathS(f) +
                                     BudgetPathS(f, BudgetCause::kHelperCompute))
                           .c_str(),
                       FormatSeconds(f.budget.gpu_busy_job_s).c_str()));
  x.effects.push_back(Fmt("Main thread inside syncs %s s (%s of wall clock)",
                          FormatSeconds(in_syncs).c_str(),
                          FormatPct(Share(in_syncs, f.window_s)).c_str()));
  x.metrics.push_back({"lost_s", lost, "s"});
  x.fix.push_back(
      "remove per-step host reads of GPU values (.item(), .cpu(), print(loss)); "
      "accumulate on the GPU and log every N steps");
  x.fix.push_back("call torch.cuda.synchronize() only around timed regions");
  x.metrics.push_back({"syncs_per_s", sps, "ops/s"});
  x.metrics.push_back({"launches_per_sync", per_sync, ""});
  SetEvidence(&x, {LaunchAndSyncRatesQuery(f), Throughput(f)});
  out->push_back(std::move(x));
}

void LaunchBound(const Facts& f, std::vector<Finding>* out) {
  double lps = 0, sps = 0, lns = 0;
  LaunchAndSyncRates(f, &lps, &sps, &lns);
  double share = lns / 1e9;
  double sync_share = Share(Sec(At(f.main_totals, FeedCause::kSync)), f.window_s);
  if (sync_share > th::kLaunchMaxSyncShare) return;
  std::optional<Severity> graded =
      Ladder(share, th::kLaunchHighShare, th::kLaunchMediumShare, th::kLaunchLowShare);
  if (!graded) return;
  Severity sev = *graded;
  Finding x;
  x.rule = "launch-bound";
  x.severity = sev;
  x.cause = "Kernel launch overhead";
  x.effect = "GPU waits for the CPU to launch tiny kernels";
  x.lost_s = share * f.window_s;
  x.root.push_back(
      Fmt("%s kernel launches/s; the main thread spends %s of wall clock inside "
          "launch calls (%.1f µs each)",
          FormatRate(lps).c_str(), FormatPct(share).c_str(), lps > 0 ? lns / lps / 1e3 : 0.0));
  x.effects.push_back(
      Fmt("Only %s of wall clock waiting in syncs: the GPU finishes before the "
          "next kernel arrives",
          FormatPct(sync_share).c_str()));
  x.fix.push_back(
      "capture the step in a CUDA Graph: torch.compile(model, "
      "mode=\"reduce-overhead\") or torch.cuda.graphs");
  x.fix.push_back(
      "fuse small ops (torch.compile, fused optimizers: AdamW(fused=True)) and use "
      "larger batches");
  x.metrics.push_back({"launches_per_s", lps, "ops/s"});
  x.metrics.push_back({"launch_share", share * 100, "%"});
  SetEvidence(&x, {LaunchAndSyncRatesQuery(f), Throughput(f)});
  out->push_back(std::move(x));
}

namespace {

// The main process's device allocator calls in the window: (calls, ns).
std::pair<int64_t, int64_t> AllocatorCalls(const Facts& f) {
  int64_t calls = 0, ns = 0;
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid || !IsDeviceAllocation(r.op)) continue;
    if (r.sec * 1'000'000'000 < f.w->from || r.sec * 1'000'000'000 >= f.w->to) continue;
    calls += r.count;
    ns += r.total_ns;
  }
  return {calls, ns};
}

// Bursts of frees on the main thread, each opened by a free that drained the device (the
// allocator's cache emptied at once), the rest following it back to back with no other CUDA call
// of the thread between them (a loop that allocates, launches and frees one buffer a step has
// frees ~1 ms apart too, with its step between them): how many, their frees, and the time the
// frees waited for the device (FreeWaitedForDevice).
struct FreeBursts {
  int bursts = 0;
  int64_t frees = 0;
  int64_t wait_ns = 0;  // every free of the window that waited for the device
};
FreeBursts FindFreeBursts(const Facts& f) {
  FreeBursts out;
  int run = 0;  // frees in the open burst (0: none open)
  int64_t last_end = 0;
  auto close = [&] {
    if (run >= th::kFreeBurstMinFrees) {
      ++out.bursts;
      out.frees += run;
    }
    run = 0;
  };
  for (const Event& e : f.events) {
    if (e.tid != f.main_tid || OpLayer(e.op) == Layer::kHost || e.duration_ns < 0) continue;
    if (!IsFree(e.op)) {
      close();  // a launch, a copy, an allocation between frees: not one emptying of the cache
      continue;
    }
    bool waited = FreeWaitedForDevice(e);
    if (waited) out.wait_ns += e.duration_ns;
    if (run > 0 && e.ts_ns - last_end <= th::kFreeBurstGapNs) {
      ++run;
    } else {
      close();
      if (DrainedDevice(e)) run = 1;
    }
    last_end = e.End();
  }
  close();
  return out;
}

}  // namespace

double AllocatorSeconds(const Facts& f) { return Sec(AllocatorCalls(f).second); }

double AllocatorLostS(const Facts& f) {
  // The budget's allocator line, where the calls are churn (else it is host-compute's).
  auto calls = AllocatorCalls(f).first;
  if (static_cast<double>(calls) < th::kMallocChurnPerSec * f.window_s) return 0;
  return BudgetLostS(f, BudgetCause::kAllocator);
}

double MainComputeLostS(const Facts& f) {
  return BudgetLostS(f, BudgetCause::kHostCompute) + BudgetLostS(f, BudgetCause::kAllocator) -
         AllocatorLostS(f);
}

double MainComputePathS(const Facts& f) {
  return BudgetPathS(f, BudgetCause::kHostCompute) + BudgetPathS(f, BudgetCause::kAllocator);
}

void AllocatorSpikes(const Facts& f, std::vector<Finding>* out) {
  std::map<int64_t, std::pair<int64_t, int64_t>> per_sec;  // sec -> (calls, ns)
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid || !IsDeviceAllocation(r.op)) continue;
    per_sec[r.sec].first += r.count;
    per_sec[r.sec].second += r.total_ns;
  }
  // Steady state: skip the first tenth of the session (warm-up allocations).
  int64_t warm_end = SaturatingAdd(f.w->session_first_ts,
                                   SaturatingSub(f.w->session_last_ts, f.w->session_first_ts) / 10);
  std::vector<int64_t> ns_by_sec;
  int64_t calls = 0, seconds = 0;
  for (int64_t s = f.w->from / 1'000'000'000; s * 1'000'000'000 < f.w->to; ++s) {
    if (s * 1'000'000'000 < warm_end) continue;
    auto it = per_sec.find(s);
    ns_by_sec.push_back(it == per_sec.end() ? 0 : it->second.second);
    calls += it == per_sec.end() ? 0 : it->second.first;
    ++seconds;
  }
  if (seconds == 0) return;
  int64_t median = Percentile(ns_by_sec, 50);
  std::vector<int64_t> spikes;
  int64_t spike_ns = 0;
  for (const auto& [s, v] : per_sec) {
    if (s * 1'000'000'000 < warm_end) continue;
    if (v.second >= th::kMallocSpikeMinNs &&
        static_cast<double>(v.second) >= th::kMallocSpikeFactor * static_cast<double>(median)) {
      spikes.push_back(s);
      spike_ns += v.second;
    }
  }
  double rate = static_cast<double>(calls) / static_cast<double>(seconds);
  if (static_cast<int>(spikes.size()) >= th::kMallocSpikeMinCount) {
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < spikes.size(); ++i) gaps.push_back(spikes[i] - spikes[i - 1]);
    int64_t period = Percentile(gaps, 50);
    int regular = 0;
    for (int64_t g : gaps) {
      if (std::abs(static_cast<double>(g - period)) <=
          std::max(1.0, th::kPeriodJitterShare * static_cast<double>(period))) {
        ++regular;
      }
    }
    bool periodic = period > 1 && regular * 2 >= static_cast<int>(gaps.size()) + 1;
    // Stall per spike: the drop in CUDA throughput during spike seconds.
    double lost = Sec(spike_ns);
    auto ops = f.cuda_ops_per_sec.find(f.main_pid);
    if (ops != f.cuda_ops_per_sec.end()) {
      std::vector<int64_t> rates;
      for (const auto& [s, n] : ops->second) rates.push_back(n);
      double med = static_cast<double>(Percentile(rates, 50));
      double drop = 0;
      for (int64_t s : spikes) {
        auto it = ops->second.find(s);
        double n = it == ops->second.end() ? 0 : static_cast<double>(it->second);
        if (med > 0) drop += std::max(0.0, 1 - n / med);
      }
      lost = std::max(lost, drop);
    }
    std::optional<Severity> sev = Ladder(Share(lost, f.window_s));
    Severity s = sev.value_or(Severity::kLow);
    if (periodic && Sec(spike_ns) / static_cast<double>(spikes.size()) >= 0.1) {
      s = Max(s, Severity::kMedium);
    }
    Finding x;
    x.rule = "allocator-spikes";
    x.severity = s;
    x.cause = periodic ? "Periodic CUDA allocator spikes" : "CUDA allocator spikes";
    x.effect = "step time spikes";
    x.lost_s = lost;
    x.root.push_back(
        Fmt("%zu seconds with cudaMalloc/cudaFree time ≥ %s (median second: %s)%s", spikes.size(),
            FormatNs(th::kMallocSpikeMinNs).c_str(), FormatNs(median).c_str(),
            periodic ? Fmt(", every %lld s", static_cast<long long>(period)).c_str() : ""));
    x.root.push_back(Fmt("Allocator calls in those seconds took %s s (%s per spike)",
                         FormatSeconds(Sec(spike_ns)).c_str(),
                         FormatNs(spike_ns / static_cast<int64_t>(spikes.size())).c_str()));
    x.effects.push_back(Fmt("CUDA throughput lost ≈ %s s of work in the spike seconds",
                            FormatSeconds(lost).c_str()));
    AddSyncEffect(f, &x);
    x.fix.push_back("remove torch.cuda.empty_cache() (and gc.collect()) from the training loop");
    x.fix.push_back(
        "let the caching allocator grow instead of fragmenting: "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    x.fix.push_back(
        "keep tensor shapes stable between steps (pad variable-length batches to "
        "a few bucket sizes)");
    x.metrics.push_back({"spikes", static_cast<double>(spikes.size()), "count"});
    x.metrics.push_back({"period_s", periodic ? static_cast<double>(period) : 0, "s"});
    x.metrics.push_back({"spike_allocator_s", Sec(spike_ns), "s"});
    x.metrics.push_back({"lost_s", lost, "s"});
    SetEvidence(
        &x,
        {{"allocator calls and time per second (op_stats_seconds)",
          Sql(f,
              "SELECT sec, SUM(count) AS calls, ROUND(SUM(total_ns) / 1e6, 1) AS ms FROM "
              "op_stats_seconds WHERE session = {S} AND pid = {P} AND op IN (" +
                  OpNames({Op::kCudaMalloc, Op::kCudaMallocAsync, Op::kCudaMallocManaged,
                           Op::kCudaFree, Op::kCudaFreeAsync, Op::kCuMemAlloc, Op::kCuMemFree}) +
                  ") AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY ms DESC LIMIT 20")}});
    out->push_back(std::move(x));
  } else if (rate >= th::kMallocChurnPerSec) {
    Finding x;
    x.rule = "malloc-churn";
    x.cause = "cudaMalloc/cudaFree churn";
    x.effect = "implicit synchronizations and CPU time in the allocator";
    double inside = AllocatorSeconds(f);
    x.lost_s = AllocatorLostS(f);
    x.severity = Ladder(Share(x.lost_s, f.budget.window_s)).value_or(Severity::kLow);
    FreeBursts bursts = FindFreeBursts(f);
    x.root.push_back(
        Fmt("%.0f cudaMalloc/cudaFree calls per second in steady state (%s s inside them, %s s "
            "of it frees waiting for the GPU to finish)",
            rate, FormatSeconds(inside).c_str(), FormatSeconds(Sec(bursts.wait_ns)).c_str()));
    x.root.push_back("Main thread in allocator calls: " + IdleLine(f, BudgetCause::kAllocator));
    if (bursts.bursts > 0) {
      x.root.push_back(Fmt(
          "%d bursts of %.0f frees on average, each opened by a free that drained the GPU: the "
          "allocator's cache handed back to the driver at once, then allocated anew",
          bursts.bursts,
          static_cast<double>(bursts.frees) / static_cast<double>(bursts.bursts)));
      x.fix.push_back(
          "remove torch.cuda.empty_cache() (and gc.collect()) from the training loop: the cache "
          "is what keeps allocations off the driver");
    }
    x.metrics.push_back({"lost_s", x.lost_s, "s"});
    x.metrics.push_back({"free_bursts", static_cast<double>(bursts.bursts), "count"});
    x.fix.push_back(
        "reuse buffers across steps (the PyTorch caching allocator does this unless "
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1 is set)");
    x.fix.push_back("allocate once outside the loop, or use cudaMallocAsync with a memory pool");
    x.metrics.push_back({"allocator_calls_per_s", rate, "ops/s"});
    SetEvidence(
        &x,
        {{"allocator calls per second (op_stats_seconds)",
          Sql(f,
              "SELECT sec, SUM(count) AS calls, ROUND(SUM(total_ns) / 1e6, 1) AS ms FROM "
              "op_stats_seconds WHERE session = {S} AND pid = {P} AND op IN (" +
                  OpNames({Op::kCudaMalloc, Op::kCudaMallocAsync, Op::kCudaMallocManaged,
                           Op::kCudaFree, Op::kCudaFreeAsync, Op::kCuMemAlloc, Op::kCuMemFree}) +
                  ") AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY sec")}});
    out->push_back(std::move(x));
  }
}

namespace {

// The main process's captures begun and instantiations made in [from, to).
GraphCaptureTotals GraphCapturesIn(const Facts& f, int64_t from, int64_t to) {
  GraphCaptureTotals t;
  std::map<int32_t, int64_t> open;  // tid -> begin ts
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid) continue;
    if (e.op == Op::kCudaStreamBeginCapture) {
      if (e.ret == 0 || e.ret == kNull) open[e.tid] = e.ts_ns;
    } else if (e.op == Op::kCudaStreamEndCapture) {
      auto it = open.find(e.tid);
      if (it == open.end()) continue;  // begun before the window
      int64_t begin = it->second;
      open.erase(it);
      if (begin < from || begin >= to) continue;
      ++t.captures;
      t.capture_ns += SaturatingSub(SaturatingAdd(e.ts_ns, e.duration_ns), begin);
    } else if (e.op == Op::kCudaGraphInstantiate) {
      if (e.ts_ns < from || e.ts_ns >= to) continue;
      ++t.instantiations;
      t.instantiate_ns += e.duration_ns;
    }
  }
  return t;
}

}  // namespace

GraphCaptureTotals GraphCaptures(const Facts& f) {
  // Steady state only: the graphs a job records while it warms up are its start-up (cold-start).
  int64_t warm_end = SaturatingAdd(f.w->session_first_ts,
                                   SaturatingSub(f.w->session_last_ts, f.w->session_first_ts) / 10);
  return GraphCapturesIn(f, warm_end, std::numeric_limits<int64_t>::max());
}

double GraphCaptureLostS(const Facts& f) {
  // Capturing, the main thread runs the step's Python and queues nothing the GPU runs: its
  // computing then idles the GPU (the budget's host_compute); capture and instantiation's part is
  // their share of the main thread's time on the CPU.
  GraphCaptureTotals t = GraphCaptures(f);
  double running = Sec(At(f.main_totals, FeedCause::kRunning));
  if (running <= 0 || t.captures + t.instantiations < th::kGraphRecaptureMinCount) return 0;
  double host = BudgetLostS(f, BudgetCause::kHostCompute);
  double lost = host * std::min(1.0, Sec(t.capture_ns + t.instantiate_ns) / running);
  return std::min(lost, host);
}

void GraphRecapture(const Facts& f, std::vector<Finding>* out) {
  GraphCaptureTotals t = GraphCaptures(f);
  if (t.captures + t.instantiations < th::kGraphRecaptureMinCount) return;
  double lost = GraphCaptureLostS(f);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev) return;
  double spent = Sec(t.capture_ns + t.instantiate_ns);
  int64_t n = std::max(t.captures, t.instantiations);
  Finding x;
  x.rule = "graph-recapture";
  x.severity = *sev;
  x.cause = "CUDA Graphs recorded again and again";
  x.effect = "GPU idle while the host captures and instantiates graphs instead of replaying them";
  x.lost_s = lost;
  x.root.push_back(Fmt("%lld stream %s and %lld graph %s after warm-up, one every %s s: "
                       "%s s of the main thread (%s s capturing, %s s instantiating)",
                       static_cast<long long>(t.captures),
                       t.captures == 1 ? "capture" : "captures",
                       static_cast<long long>(t.instantiations),
                       t.instantiations == 1 ? "instantiation" : "instantiations",
                       FormatSeconds(f.window_s / static_cast<double>(n)).c_str(),
                       FormatSeconds(spent).c_str(), FormatSeconds(Sec(t.capture_ns)).c_str(),
                       FormatSeconds(Sec(t.instantiate_ns)).c_str()));
  x.root.push_back(Fmt("GPU idle while the main thread captured and instantiated: %s s (their "
                       "share of its computing on the critical path)",
                       FormatSeconds(lost).c_str()));
  x.effects.push_back(
      "A CUDA Graph replays only the shapes it was recorded with: each new input shape records "
      "and instantiates another graph (torch.compile mode=\"reduce-overhead\" also runs the "
      "new shape once without a graph first)");
  x.fix.push_back(
      "give the graphed code static shapes: pad or bucket variable-size inputs (sequence "
      "lengths, the last short batch: DataLoader(drop_last=True)) to a few sizes");
  x.fix.push_back(
      "torch.compile: TORCH_LOGS=recompiles names the inputs whose shapes change; "
      "torch._inductor.config.triton.cudagraph_skip_dynamic_graphs = True runs dynamic-shape "
      "graphs without CUDA Graphs");
  x.metrics.push_back({"captures", static_cast<double>(t.captures), "count"});
  x.metrics.push_back({"instantiations", static_cast<double>(t.instantiations), "count"});
  x.metrics.push_back({"capture_s", Sec(t.capture_ns), "s"});
  x.metrics.push_back({"instantiate_s", Sec(t.instantiate_ns), "s"});
  x.metrics.push_back({"lost_s", lost, "s"});
  SetEvidence(&x, {{"graph captures and instantiations of the main process",
                    Sql(f, "SELECT timestamp, tid, op, ROUND(duration_ns / 1e6, 2) AS ms FROM "
                           "{EVENTS} WHERE {IN_S}pid = {P} AND op IN (" +
                               OpNames({Op::kCudaStreamBeginCapture, Op::kCudaStreamEndCapture,
                                        Op::kCudaGraphInstantiate}) +
                               ") AND timestamp >= {F} AND timestamp < {T} ORDER BY timestamp")},
                   Throughput(f)});
  out->push_back(std::move(x));
}

void ColdStart(const Facts& f, std::vector<Finding>* out) {
  // Only meaningful when the window covers the start of the session.
  if (f.w->from > f.w->session_first_ts + 1'000'000'000) return;
  int64_t first_call = -1;
  std::map<Op, std::pair<int64_t, int64_t>> early;  // op -> (calls, ns) before steady state
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid || OpLayer(e.op) == Layer::kHost) continue;
    if (first_call < 0) first_call = e.ts_ns;
  }
  auto ops = f.cuda_ops_per_sec.find(f.main_pid);
  if (ops == f.cuda_ops_per_sec.end() || ops->second.empty()) return;
  if (first_call < 0) first_call = ops->second.begin()->first * 1'000'000'000;
  // Steady rate: median over the last three quarters of the window's seconds.
  std::vector<int64_t> late;
  int64_t cut = f.w->from + f.window_ns / 4;
  for (const auto& [sec, n] : ops->second) {
    if (sec * 1'000'000'000 >= cut) late.push_back(n);
  }
  double steady = static_cast<double>(Percentile(late, 50));
  if (steady <= 0) return;
  int64_t ready_sec = -1;
  for (const auto& [sec, n] : ops->second) {
    if (static_cast<double>(n) >= th::kColdStartSteadyShare * steady) {
      ready_sec = sec;
      break;
    }
  }
  if (ready_sec < 0) return;
  int64_t ready = ready_sec * 1'000'000'000;
  int64_t cold_ns = ready - first_call;
  if (cold_ns < th::kColdStartMinNs) return;
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid || OpLayer(e.op) == Layer::kHost || e.ts_ns >= ready) continue;
    early[e.op].first += 1;
    early[e.op].second += e.duration_ns;
  }
  double share = Share(Sec(cold_ns), f.window_s);
  Finding x;
  x.rule = "cold-start";
  x.severity = share >= th::kColdStartHighShare     ? Severity::kHigh
               : share >= th::kColdStartMediumShare ? Severity::kMedium
                                                    : Severity::kLow;
  x.cause = "Cold start";
  x.effect = "no useful GPU work at the start of the run";
  x.lost_s = Sec(cold_ns);
  x.root.push_back(Fmt(
      "%s s from the first CUDA call to steady throughput (%s of the window; "
      "steady = %s ops/sec)",
      FormatSeconds(Sec(cold_ns)).c_str(), FormatPct(share).c_str(), FormatRate(steady).c_str()));
  std::vector<std::pair<int64_t, Op>> slow;
  for (const auto& [op, v] : early) slow.push_back({-v.second, op});
  std::sort(slow.begin(), slow.end());
  for (size_t i = 0; i < slow.size() && i < 3; ++i) {
    const auto& v = early[slow[i].second];
    if (v.second < 10'000'000) break;
    x.root.push_back(Fmt("%s: %s calls, %s s during warm-up",
                         std::string(OpName(slow[i].second)).c_str(), FormatCount(v.first).c_str(),
                         FormatSeconds(Sec(v.second)).c_str()));
  }
  GraphCaptureTotals graphs =
      GraphCapturesIn(f, std::numeric_limits<int64_t>::min(), ready);
  if (graphs.captures + graphs.instantiations > 0) {
    x.root.push_back(Fmt("CUDA Graphs: %lld stream captures (%s s) and %lld instantiations (%s s) "
                         "during warm-up",
                         static_cast<long long>(graphs.captures),
                         FormatSeconds(Sec(graphs.capture_ns)).c_str(),
                         static_cast<long long>(graphs.instantiations),
                         FormatSeconds(Sec(graphs.instantiate_ns)).c_str()));
  }
  x.effects.push_back(Fmt("GPU throughput below half of steady state for the first %s s",
                          FormatSeconds(Sec(cold_ns)).c_str()));
  x.fix.push_back(
      "load kernels on first use: CUDA_MODULE_LOADING=LAZY (opt-in since CUDA 11.7, the "
      "default since CUDA 12.2: check the job does not set CUDA_MODULE_LOADING=EAGER)");
  x.fix.push_back(
      "cache compiled kernels between runs: TORCHINDUCTOR_FX_GRAPH_CACHE=1 "
      "TORCHINDUCTOR_CACHE_DIR=/var/cache/inductor");
  x.fix.push_back(
      "keep the process warm: run a warm-up step before timing, or serve from a "
      "long-lived process instead of one process per job");
  x.metrics.push_back({"cold_start_s", Sec(cold_ns), "s"});
  x.metrics.push_back({"steady_ops_per_s", steady, "ops/s"});
  SetEvidence(&x,
              {{"the main process's CUDA calls before steady throughput (launches counted in "
                "op_stats_seconds)",
                CudaCalls(f) +
                    "SELECT op, COUNT(*) AS calls, ROUND(SUM(duration_ns) / 1e9, 3) AS seconds, "
                    "ROUND(MAX(duration_ns) / 1e6, 1) AS worst_ms FROM calls WHERE timestamp < " +
                    std::to_string(ready) + " GROUP BY op ORDER BY seconds DESC"},
               Throughput(f)});
  out->push_back(std::move(x));
}

namespace {

// Another process kept the job's GPU busy while the job waited on it (NVML per-process samples),
// traced or not: the budget's sync_wait lost seconds.
void GpuNeighbour(const Facts& f, std::vector<Finding>* out) {
  double lost = BudgetLostS(f, BudgetCause::kSyncWait);
  double waited = BudgetPathS(f, BudgetCause::kSyncWait);
  if (f.budget.source != "nvml-process" ||
      Share(lost, f.budget.window_s) < th::kNeighbourLowShare) {
    return;
  }
  std::map<int32_t, std::pair<double, int64_t>> others;  // pid → (sum of SM %, samples)
  for (const GpuProcessSample& p : f.w->gpu_process_samples) {
    if (p.gpu != f.budget.gpu || p.sm_util_pct == kNull || IsOwnPid(f, p.pid)) continue;
    others[p.pid].first += static_cast<double>(p.sm_util_pct);
    ++others[p.pid].second;
  }
  Finding x;
  x.rule = "gpu-sharing";
  x.severity = Ladder(Share(lost, f.budget.window_s)).value_or(Severity::kLow);
  x.cause = "GPU shared with other processes";
  x.effect = "training kernels wait behind another job's";
  x.lost_s = lost;
  x.root.push_back(Fmt(
      "GPU %d busy for other processes %s s of %s s, for this job %s s (NVML "
      "per-process utilization)",
      f.budget.gpu, FormatSeconds(f.budget.gpu_busy_other_s).c_str(),
      FormatSeconds(f.budget.window_s).c_str(), FormatSeconds(f.budget.gpu_busy_job_s).c_str()));
  std::string names;
  for (const auto& [pid, v] : others) {
    if (names.size() > 200) break;
    names += (names.empty() ? "" : ", ") + ProcessLabel(*f.w, pid) +
             Fmt(" SM %.0f%%", v.first / static_cast<double>(std::max<int64_t>(1, v.second)));
  }
  if (!names.empty()) x.root.push_back("Other processes on the GPU: " + names);
  x.effects.push_back(Fmt(
      "The job waited in syncs %s s; %s s of it the GPU was running other "
      "processes' work",
      FormatSeconds(waited).c_str(), FormatSeconds(lost).c_str()));
  // Time-slicing also stretches the job's own kernels (context switches), which per-process
  // utilization counts as the job's busy time: the lost seconds are a lower bound, the whole
  // wait the upper one (2026-12-07, H100: 6.8 s lost, 11.0 s waited, 9.0 s measured).
  if (waited > th::kNeighbourWaitBeyondLost * lost) {
    x.effects.push_back(Fmt(
        "Sharing also slows the job's own kernels (time-slicing switches contexts), which no "
        "utilization sample separates: the cost is at least %s s and at most the %s s waited",
        FormatSeconds(lost).c_str(), FormatSeconds(waited).c_str()));
  }
  AddThroughputEffect(f, &x);
  x.fix.push_back("give each job its own GPU: CUDA_VISIBLE_DEVICES=<free gpu> for the other job");
  x.fix.push_back(
      "or share it with guarantees: MPS with CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, or MIG slices");
  x.metrics.push_back({"gpu_busy_other_s", f.budget.gpu_busy_other_s, "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  x.metrics.push_back({"sync_wait_s", waited, "s"});
  SetEvidence(&x, {{"per-process GPU utilization (NVML) over the window",
                    Sql(f,
                        "SELECT s.pid, p.name, COUNT(*) AS samples, ROUND(AVG(s.sm_util_pct), 1) "
                        "AS sm_util_pct FROM gpu_process_samples s LEFT JOIN processes p ON "
                        "p.session = s.session AND p.pid = s.pid WHERE s.session = {S} AND s.ts "
                        ">= {F} AND s.ts < {T} GROUP BY s.pid ORDER BY sm_util_pct DESC")}});
  out->push_back(std::move(x));
}

}  // namespace

void GpuSharing(const Facts& f, std::vector<Finding>* out) {
  if (f.budget.source == "nvml-process") {
    GpuNeighbour(f, out);
    return;
  }
  if (f.cuda_pids.size() < 2) return;
  auto main_ops = f.cuda_ops_per_sec.find(f.main_pid);
  if (main_ops == f.cuda_ops_per_sec.end()) return;
  std::set<int64_t> shared_secs;
  std::vector<int32_t> peers;
  for (size_t i = 1; i < f.cuda_pids.size(); ++i) {
    // Ranks of the job's own NCCL communicators run on GPUs of their own.
    if (NcclPeers(f.nccl, f.main_pid, f.cuda_pids[i])) continue;
    auto it = f.cuda_ops_per_sec.find(f.cuda_pids[i]);
    if (it == f.cuda_ops_per_sec.end()) continue;
    bool any = false;
    for (const auto& [sec, n] : it->second) {
      if (n > 0 && main_ops->second.count(sec)) {
        shared_secs.insert(sec);
        any = true;
      }
    }
    if (any) peers.push_back(f.cuda_pids[i]);
  }
  if (peers.empty()) return;
  double overlap =
      Share(static_cast<double>(shared_secs.size()), static_cast<double>(main_ops->second.size()));
  std::vector<int64_t> alone, shared;
  for (const Event& e : f.events) {
    if (e.pid != f.main_pid || !IsSync(e.op)) continue;
    (shared_secs.count(e.ts_ns / 1'000'000'000) ? shared : alone).push_back(e.duration_ns);
  }
  int64_t p50_alone = Percentile(alone, 50);
  int64_t p50_shared = Percentile(shared, 50);
  double inflation = p50_alone > 0 ? static_cast<double>(p50_shared) / p50_alone : 0;
  double lost = 0;
  for (int64_t d : shared) lost += static_cast<double>(std::max<int64_t>(0, d - p50_alone));
  Severity sev = Ladder(Share(Sec(lost), f.window_s)).value_or(Severity::kLow);
  if (overlap >= th::kGpuShareOverlapMin && inflation >= th::kGpuShareHighInflation) {
    sev = Max(sev, Severity::kMedium);
  } else {
    sev = Severity::kLow;
  }
  Finding x;
  x.rule = "gpu-sharing";
  x.severity = sev;
  x.cause = "GPU shared with other processes";
  x.effect = "training kernels wait behind another job's";
  x.lost_s = Sec(lost);
  std::string names;
  for (int32_t p : peers) names += (names.empty() ? "" : ", ") + ProcessLabel(*f.w, p);
  x.root.push_back(
      Fmt("%s made CUDA calls during %zu of the training process's %zu active seconds (%s): %s",
          Plural(static_cast<int64_t>(peers.size()), "other process", "other processes").c_str(),
          shared_secs.size(), main_ops->second.size(), FormatPct(overlap).c_str(), names.c_str()));
  if (!alone.empty() && !shared.empty()) {
    x.effects.push_back(Fmt("%s p50 %s alone → %s while shared (%s)", f.sync_op.c_str(),
                            FormatNs(p50_alone).c_str(), FormatNs(p50_shared).c_str(),
                            FormatFactor(inflation).c_str()));
  }
  AddThroughputEffect(f, &x);
  x.fix.push_back(Fmt("give each job its own GPU: CUDA_VISIBLE_DEVICES=<free gpu> for %s",
                      ProcessName(*f.w, peers[0]).c_str()));
  x.fix.push_back(
      "or share it fairly: run both under MPS (nvidia-cuda-mps-control -d) or split "
      "the GPU with MIG");
  x.fix.push_back("or schedule the other job between training epochs");
  x.metrics.push_back({"shared_seconds", static_cast<double>(shared_secs.size()), "s"});
  x.metrics.push_back({"sync_p50_inflation", inflation, "x"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(
      &x,
      {{"CUDA calls per second of every process that used the GPU",
        Sql(f,
            "SELECT q.sec, q.pid, p.name, SUM(q.count) AS cuda_ops FROM op_stats_seconds q "
            "LEFT JOIN processes p ON p.session = q.session AND p.pid = q.pid WHERE q.session = "
            "{S} AND " +
                CudaOpCondition("q.op") +
                " AND q.sec >= {FS} AND q.sec < {TS} GROUP BY q.sec, q.pid ORDER BY q.sec, "
                "q.pid")},
       SyncBuckets(f)});
  out->push_back(std::move(x));
}

void AllocFailures(const Facts& f, std::vector<Finding>* out) {
  int64_t failed = 0;
  int64_t largest = 0;
  std::set<int64_t> codes;
  for (const Event& e : f.events) {
    if (!IsAlloc(e.op) || e.ret == kNull || e.ret == 0) continue;
    ++failed;
    codes.insert(e.ret);
    if (e.bytes != kNull) largest = std::max(largest, e.bytes);
  }
  if (failed == 0) return;
  Finding x;
  x.rule = "alloc-failure";
  x.severity = Severity::kHigh;
  x.cause = "GPU memory allocation failures";
  x.effect = "out-of-memory errors and retries";
  std::string code_list;
  for (int64_t c : codes) code_list += (code_list.empty() ? "" : ", ") + std::to_string(c);
  x.root.push_back(
      Fmt("%s allocation calls failed (return codes %s; 2 = "
          "cudaErrorMemoryAllocation), largest failed request %s",
          FormatCount(failed).c_str(), code_list.c_str(),
          FormatBytes(static_cast<double>(largest)).c_str()));
  x.fix.push_back("lower the batch size or use activation checkpointing");
  x.fix.push_back("reduce fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  x.fix.push_back(
      "check for other processes on the GPU: nvidia-smi --query-compute-apps=pid,"
      "used_memory --format=csv");
  x.metrics.push_back({"failed_allocations", static_cast<double>(failed), "count"});
  SetEvidence(&x, {{"failed allocations",
                    Sql(f,
                        "SELECT op, ret, COUNT(*) AS calls, MAX(bytes) AS largest_bytes FROM "
                        "{EVENTS} WHERE {IN_S}op IN (" +
                            OpNamesWhere(IsAlloc) +
                            ") AND ret != 0 AND timestamp >= {F} AND timestamp < {T} GROUP BY op, "
                            "ret")}});
  out->push_back(std::move(x));
}

}  // namespace gw::rules
