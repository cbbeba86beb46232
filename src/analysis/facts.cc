#include "analysis/facts.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/thresholds.h"

namespace gw {

namespace {

bool IsCudaOp(Op op) { return OpLayer(op) != Layer::kHost; }

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int64_t HostWait(const CauseTimes& t) {
  return At(t, FeedCause::kRunqWait) + At(t, FeedCause::kBlockedIo) + At(t, FeedCause::kPageFault);
}

// Lifetime of a process clipped to the window.
void Lifetime(const WindowData& w, int32_t pid, int64_t* begin, int64_t* end) {
  *begin = w.from;
  *end = w.to;
  auto it = w.processes.find(pid);
  if (it == w.processes.end()) return;
  if (it->second.first_ts != kNull) *begin = std::max(*begin, it->second.first_ts);
  if (it->second.exit_ts != kNull) *end = std::min(*end, it->second.exit_ts);
}

}  // namespace

int64_t Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

std::string ProcessName(const WindowData& w, int32_t pid) {
  auto it = w.processes.find(pid);
  if (it == w.processes.end() || it->second.name.empty()) return "pid " + std::to_string(pid);
  return it->second.name;
}

std::string ProcessLabel(const WindowData& w, int32_t pid) {
  return ProcessName(w, pid) + " (PID " + std::to_string(pid) + ")";
}

Facts ComputeFacts(const WindowData& w, const ExplainOptions& options) {
  Facts f;
  f.w = &w;
  f.window_ns = w.to - w.from;
  f.window_s = static_cast<double>(f.window_ns) / 1e9;
  f.cores = w.cores;
  for (const SystemSnapshot& s : w.snapshots) {
    if (s.cores > 0) f.cores = s.cores;
  }
  for (const SwitchTotals& s : w.switch_totals) f.switches[s.pid] = s;

  // ---- Roles: CUDA processes (by call count), then the main process's worker children.
  std::map<int32_t, int64_t> cuda_calls;
  for (const OpSecondRow& r : w.op_seconds) {
    if (!IsCudaOp(r.op)) continue;
    auto p = w.processes.find(r.pid);
    if (p != w.processes.end() && !p->second.tracked) continue;
    cuda_calls[r.pid] += r.count;
    int64_t sec_start = r.sec * 1'000'000'000;
    if (sec_start >= w.from && sec_start + 1'000'000'000 <= w.to) {
      f.cuda_ops_per_sec[r.pid][r.sec] += r.count;
    }
  }
  for (const RawEvent& e : w.events) {
    if (IsCudaOp(e.op) && cuda_calls.count(e.pid) == 0) cuda_calls[e.pid] = 1;
  }
  std::set<int32_t> scope;
  if (options.pid != 0) {
    scope.insert(options.pid);
    bool grew = true;
    while (grew) {
      grew = false;
      for (const auto& [pid, p] : w.processes) {
        if (p.tracked && scope.count(p.ppid) && !scope.count(pid)) {
          scope.insert(pid);
          grew = true;
        }
      }
    }
  }
  std::vector<std::pair<int64_t, int32_t>> ranked;
  for (const auto& [pid, n] : cuda_calls) ranked.push_back({-n, pid});
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [neg, pid] : ranked) {
    if (options.pid != 0 && !scope.count(pid)) continue;
    f.cuda_pids.push_back(pid);
  }
  if (f.cuda_pids.empty() && options.pid != 0) f.cuda_pids.push_back(options.pid);
  if (f.cuda_pids.empty()) return f;
  f.main_pid = f.cuda_pids[0];
  if (auto it = w.processes.find(f.main_pid); it != w.processes.end()) {
    f.main_name = it->second.name;
    f.main_cmdline = it->second.cmdline;
  }
  if (f.main_name.empty()) f.main_name = "pid " + std::to_string(f.main_pid);
  {
    std::set<int32_t> family = {f.main_pid};
    bool grew = true;
    while (grew) {
      grew = false;
      for (const auto& [pid, p] : w.processes) {
        if (p.tracked && family.count(p.ppid) && !family.count(pid) && !cuda_calls.count(pid)) {
          family.insert(pid);
          f.worker_pids.push_back(pid);
          grew = true;
        }
      }
    }
    std::sort(f.worker_pids.begin(), f.worker_pids.end());
  }

  // ---- Timelines of the main process's CUDA threads and of every worker thread.
  std::map<int32_t, std::vector<const RawEvent*>> rows_by_tid;
  std::map<int32_t, int64_t> cuda_rows_by_tid;
  std::set<int32_t> workers(f.worker_pids.begin(), f.worker_pids.end());
  std::map<int32_t, int32_t> worker_tid_pid;
  for (const RawEvent& e : w.events) {
    if (e.pid == f.main_pid || workers.count(e.pid)) rows_by_tid[e.tid].push_back(&e);
    if (e.pid == f.main_pid && IsCudaOp(e.op)) ++cuda_rows_by_tid[e.tid];
    if (workers.count(e.pid)) worker_tid_pid[e.tid] = e.pid;
  }
  // A worker with no rows at all ran without ever leaving the CPU: its main thread still counts.
  for (int32_t pid : f.worker_pids) {
    bool seen = false;
    for (const auto& [tid, owner] : worker_tid_pid) seen |= owner == pid;
    if (!seen) worker_tid_pid[pid] = pid;
  }
  int64_t best = -1;
  for (const auto& [tid, n] : cuda_rows_by_tid) {
    if (n > best) {
      best = n;
      f.main_tid = tid;
    }
  }
  if (f.main_tid == 0) f.main_tid = f.main_pid;
  int64_t begin = 0, end = 0;
  Lifetime(w, f.main_pid, &begin, &end);
  std::set<int32_t> train_tids;
  for (const auto& [tid, n] : cuda_rows_by_tid) train_tids.insert(tid);
  train_tids.insert(f.main_tid);
  for (int32_t tid : train_tids) {
    ThreadTimeline tl = ThreadTimeline::Build(f.main_pid, tid, begin, end, rows_by_tid[tid]);
    AddTo(f.train_totals, tl.Totals());
    f.train_thread_ns += tl.end() - tl.begin();
    if (tid == f.main_tid) f.main_tl = tl;
    f.train_tls.push_back(std::move(tl));
  }
  f.main_totals = f.main_tl->Totals();
  for (const auto& [tid, pid] : worker_tid_pid) {
    int64_t wb = 0, we = 0;
    Lifetime(w, pid, &wb, &we);
    ThreadTimeline tl = ThreadTimeline::Build(pid, tid, wb, we, rows_by_tid[tid]);
    AddTo(f.worker_totals, tl.Totals());
    f.worker_thread_ns += tl.end() - tl.begin();
    f.worker_tls.push_back(std::move(tl));
  }
  for (const ThreadTimeline& tl : f.train_tls) tl.RunqByHolder(w.from, w.to, &f.runq_holders);
  for (const ThreadTimeline& tl : f.worker_tls) tl.RunqByHolder(w.from, w.to, &f.runq_holders);

  auto workers_during = [&](int64_t a, int64_t b) {
    CauseTimes sum{};
    for (const ThreadTimeline& tl : f.worker_tls) AddTo(sum, tl.Overlap(a, b));
    return sum;
  };

  // ---- Batch waits: the main thread asleep outside CUDA calls (waiting for workers/locks).
  for (const RawEvent* e : rows_by_tid[f.main_tid]) {
    if (e->op != Op::kSchedSwitch || e->kind != static_cast<int64_t>(SwitchKind::kBlocked)) {
      continue;
    }
    int64_t runq = e->runq == kNull ? 0 : std::clamp<int64_t>(e->runq, 0, e->duration);
    int64_t wake = e->End() - runq;
    int64_t waited = At(f.main_tl->Overlap(e->ts, wake), FeedCause::kBlockedOther);
    if (waited < thresholds::kBatchWaitMinNs) continue;
    ++f.waits.count;
    f.waits.total_ns += waited;
    f.waits.durations.push_back(waited);
    AddTo(f.waits.workers, workers_during(e->ts, wake));
  }
  {
    const CauseTimes& m = f.main_totals;
    double wait = static_cast<double>(At(m, FeedCause::kBlockedOther));
    int64_t wt = 0;
    for (int64_t v : f.waits.workers) wt += v;
    f.lost_contention = static_cast<double>(At(m, FeedCause::kRunqWait));
    f.lost_io = static_cast<double>(At(m, FeedCause::kBlockedIo));
    f.lost_memory = static_cast<double>(At(m, FeedCause::kPageFault));
    // Only the batch-wait part of blocked time is split by what the workers were doing; the
    // rest (short sleeps) stays "other".
    double batch = static_cast<double>(f.waits.total_ns);
    if (wt > 0) {
      const CauseTimes& x = f.waits.workers;
      f.lost_contention += batch * Share(At(x, FeedCause::kRunqWait), wt);
      f.lost_io += batch * Share(At(x, FeedCause::kBlockedIo), wt);
      f.lost_memory += batch * Share(At(x, FeedCause::kPageFault), wt);
      f.lost_starvation = batch * Share(At(x, FeedCause::kRunning) + At(x, FeedCause::kMemcpy) +
                                            At(x, FeedCause::kSync),
                                        wt);
      f.lost_wait_other = (wait - batch) + batch * Share(At(x, FeedCause::kBlockedOther), wt);
    } else {
      f.lost_wait_other = wait;
    }
  }

  // ---- Syncs of the main process, buckets, baseline and peak.
  std::map<Op, int64_t> sync_ops;
  std::vector<const RawEvent*> syncs;
  for (const RawEvent& e : w.events) {
    if (e.pid == f.main_pid && IsSync(e.op)) {
      ++sync_ops[e.op];
      syncs.push_back(&e);
    }
  }
  f.sync_count = static_cast<int64_t>(syncs.size());
  int64_t top = 0;
  for (const auto& [op, n] : sync_ops) {
    if (n > top) {
      top = n;
      f.sync_op = std::string(OpName(op));
    }
  }
  for (int64_t b = FloorDiv(w.from, thresholds::kBucketNs); b * thresholds::kBucketNs < w.to; ++b) {
    Bucket bucket;
    bucket.start = std::max(w.from, b * thresholds::kBucketNs);
    bucket.end = std::min(w.to, (b + 1) * thresholds::kBucketNs);
    CauseTimes feed{};
    int64_t thread_ns = 0;
    for (const ThreadTimeline& tl : f.train_tls) {
      AddTo(feed, tl.Overlap(bucket.start, bucket.end));
      thread_ns +=
          std::max<int64_t>(0, std::min(tl.end(), bucket.end) - std::max(tl.begin(), bucket.start));
    }
    for (const ThreadTimeline& tl : f.worker_tls) {
      AddTo(feed, tl.Overlap(bucket.start, bucket.end));
      thread_ns +=
          std::max<int64_t>(0, std::min(tl.end(), bucket.end) - std::max(tl.begin(), bucket.start));
    }
    bucket.host_wait_share = Share(HostWait(feed), thread_ns);
    int64_t ops = 0;
    for (const auto& [sec, n] : f.cuda_ops_per_sec[f.main_pid]) {
      int64_t s = sec * 1'000'000'000;
      if (s >= bucket.start && s + 1'000'000'000 <= bucket.end) {
        ops += n;
      }
    }
    // Seconds with no CUDA row at all still count as full seconds of zero throughput.
    bucket.full_seconds = static_cast<int>(std::max<int64_t>(
        0, FloorDiv(bucket.end, 1'000'000'000) - (bucket.start + 999'999'999) / 1'000'000'000));
    bucket.cuda_ops_per_s =
        bucket.full_seconds > 0 ? static_cast<double>(ops) / bucket.full_seconds : 0;
    f.buckets.push_back(std::move(bucket));
  }
  for (const RawEvent* e : syncs) {
    for (Bucket& b : f.buckets) {
      if (e->ts >= b.start && e->ts < b.end) {
        b.sync_ns.push_back(e->duration);
        break;
      }
    }
  }
  for (size_t i = 0; i < f.buckets.size(); ++i) {
    Bucket& b = f.buckets[i];
    b.sync_p50 = Percentile(b.sync_ns, 50);
    b.sync_p99 = Percentile(b.sync_ns, 99);
    bool enough = static_cast<int64_t>(b.sync_ns.size()) >= thresholds::kMinSyncsPerBucket &&
                  b.end - b.start >= thresholds::kBucketNs / 2;
    if (!enough) continue;
    int idx = static_cast<int>(i);
    if (f.base_bucket < 0 || b.host_wait_share < f.buckets[f.base_bucket].host_wait_share) {
      f.base_bucket = idx;
    }
    if (f.peak_bucket < 0 || b.sync_p99 > f.buckets[f.peak_bucket].sync_p99) f.peak_bucket = idx;
  }
  if (f.base_bucket >= 0) {
    f.base_p50 = f.buckets[f.base_bucket].sync_p50;
    f.base_p99 = f.buckets[f.base_bucket].sync_p99;
    f.peak_p99 = f.buckets[f.peak_bucket].sync_p99;
  } else if (!syncs.empty()) {
    std::vector<int64_t> all;
    for (const RawEvent* e : syncs) all.push_back(e->duration);
    f.base_p50 = Percentile(all, 50);
    f.base_p99 = f.peak_p99 = Percentile(all, 99);
  }
  for (size_t i = 0; i < f.buckets.size(); ++i) {
    const Bucket& b = f.buckets[i];
    if (b.full_seconds * 2 < thresholds::kBucketNs / 1'000'000'000) continue;
    int idx = static_cast<int>(i);
    if (f.tput_peak_bucket < 0 || b.cuda_ops_per_s > f.buckets[f.tput_peak_bucket].cuda_ops_per_s) {
      f.tput_peak_bucket = idx;
    }
    if (f.tput_low_bucket < 0 || b.cuda_ops_per_s < f.buckets[f.tput_low_bucket].cuda_ops_per_s) {
      f.tput_low_bucket = idx;
    }
  }

  // ---- Per-call attribution of slow syncs.
  f.slow.threshold_ns = std::max<int64_t>(
      thresholds::kSlowSyncFloorNs,
      static_cast<int64_t>(thresholds::kSlowSyncFactor * static_cast<double>(f.base_p50)));
  for (const RawEvent* e : syncs) {
    if (e->duration < f.slow.threshold_ns) continue;
    ++f.slow.count;
    f.slow.total_ns += e->duration;
    for (const ThreadTimeline& tl : f.train_tls) {
      if (tl.tid() != e->tid) continue;
      AddTo(f.slow.thread, tl.Overlap(e->ts, e->End()));
      tl.RunqByHolder(e->ts, e->End(), &f.slow.runq_holders);
    }
    AddTo(f.slow.workers, workers_during(e->ts, e->End()));
  }
  return f;
}

}  // namespace gw
