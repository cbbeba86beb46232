#include "analysis/long_window.h"

#include <algorithm>
#include <map>
#include <vector>


namespace gw {

namespace {

constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int64_t kBucketNs = kThreadRollupSeconds * kNsPerS;

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

// What the main thread lost in one bucket: every off-CPU nanosecond but the sleeps inside its
// CUDA syncs (waiting for the GPU is the GPU's time, not the host's).
int64_t Lost(const ThreadRollup& r) {
  return r.runq_ns + r.io_ns + r.fault_ns + std::max<int64_t>(0, r.blocked_ns - r.sync_ns);
}

// Without a job to follow (no CUDA calls in the rollups): the latest stretch that still has raw
// rows, as a plain explain reads the latest minutes.
void LatestStretch(const TierSpan& span, const SessionWindow& window, int64_t incident_ns,
                   LongWindowSummary* s) {
  if (!span.has_raw) return;
  int64_t to = std::min(window.end_ns, span.raw_last + 1);
  int64_t from = std::max({window.begin_ns, span.raw_first, to - incident_ns});
  if (to <= from) return;
  s->tier = "rollups+incident";
  s->has_incident = true;
  s->incident_latest = true;
  s->incident_from_ns = from;
  s->incident_to_ns = to;
}

}  // namespace

int64_t IncidentLength(int64_t rows, int64_t window_ns, int64_t max_rows) {
  int64_t len = kDefaultSinceNs;
  if (rows > 0 && window_ns > 0 && max_rows > 0) {
    double per_ns = static_cast<double>(rows) / static_cast<double>(window_ns);
    double fits = static_cast<double>(max_rows) / per_ns;
    if (fits < static_cast<double>(len)) len = static_cast<int64_t>(fits);
  }
  return std::max(kBucketNs, len / kBucketNs * kBucketNs);
}

LongWindowSummary SummarizeRollups(const RollupWindow& rollups, const SessionWindow& window,
                                   int32_t pid, int64_t incident_ns) {
  const int32_t tracer_pid = rollups.tracer_pid;
  LongWindowSummary s;
  s.tier = "rollups";
  s.from_ns = window.begin_ns;
  s.to_ns = window.end_ns;
  s.label = window.label;
  const TierSpan& span = rollups.span;
  s.has_raw = span.has_raw;
  s.raw_first_ts = span.raw_first;
  // The job: the given process, else the tracked process with the most CUDA calls.
  std::map<int32_t, int64_t> calls_by_pid;
  for (const ThreadRollupRow& row : rollups.threads) {
    if (row.key.pid == tracer_pid) continue;
    calls_by_pid[row.key.pid] += row.r.cuda_calls;
  }
  s.main_pid = pid;
  if (s.main_pid == 0) {
    int64_t best = 0;
    for (const auto& [p, n] : calls_by_pid) {
      auto it = rollups.processes.find(p);
      bool tracked = it == rollups.processes.end() || it->second.tracked;
      if (tracked && n > best) {
        best = n;
        s.main_pid = p;
      }
    }
  }
  if (s.main_pid == 0) {
    LatestStretch(rollups.span, window, incident_ns, &s);
    return s;
  }
  auto proc = rollups.processes.find(s.main_pid);
  s.main_label = (proc != rollups.processes.end() && !proc->second.name.empty()
                      ? proc->second.name
                      : "pid " + std::to_string(s.main_pid)) +
                 " (PID " + std::to_string(s.main_pid) + ")";
  // Its main thread: the initial one when it calls CUDA, else its thread with the most calls.
  std::map<int32_t, int64_t> calls_by_tid;
  for (const ThreadRollupRow& row : rollups.threads) {
    if (row.key.pid == s.main_pid) calls_by_tid[row.key.tid] += row.r.cuda_calls;
  }
  s.main_tid = s.main_pid;
  if (calls_by_tid[s.main_pid] == 0) {
    int64_t best = 0;
    for (const auto& [t, n] : calls_by_tid) {
      if (n > best) {
        best = n;
        s.main_tid = t;
      }
    }
  }
  // Per bucket: the main process's calls and its main thread's rollup.
  std::map<int64_t, int64_t> calls;         // bucket sec → calls
  std::map<int64_t, ThreadRollup> main_by;  // bucket sec → main thread
  for (const ThreadRollupRow& row : rollups.threads) {
    if (row.key.pid == s.main_pid) {
      calls[row.key.sec] += row.r.cuda_calls;
      if (row.key.tid == s.main_tid) main_by[row.key.sec] = row.r;
    } else if (row.key.pid != tracer_pid) {
      auto it = rollups.processes.find(row.key.pid);
      if (it != rollups.processes.end() && !it->second.tracked) continue;
      s.others_runq_s += Seconds(row.r.runq_ns);
      s.others_io_s += Seconds(row.r.io_ns);
      s.others_fault_s += Seconds(row.r.fault_ns);
      s.others_switches += row.r.switches;
    }
  }
  // The active span: the buckets from its first to its last CUDA call.
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& [sec, n] : calls) {
    if (n == 0) continue;
    first = std::min(first, sec);
    last = std::max(last, sec);
  }
  if (first > last) {
    LatestStretch(rollups.span, window, incident_ns, &s);
    return s;
  }
  std::vector<int64_t> secs;
  for (int64_t b = first; b <= last; b += kThreadRollupSeconds) secs.push_back(b);
  s.buckets = static_cast<int64_t>(secs.size());
  int64_t span_from = std::max(window.begin_ns, first * kNsPerS);
  int64_t span_to = std::min(window.end_ns, last * kNsPerS + kBucketNs);
  s.active_s = Seconds(span_to - span_from);
  std::vector<double> rates;
  std::vector<int64_t> lost;
  for (int64_t b : secs) {
    int64_t from = std::max(window.begin_ns, b * kNsPerS);
    int64_t to = std::min(window.end_ns, b * kNsPerS + kBucketNs);
    rates.push_back(static_cast<double>(calls[b]) / std::max(1e-9, Seconds(to - from)));
    const ThreadRollup& r = main_by[b];
    s.runq_s += Seconds(r.runq_ns);
    s.blocked_s += Seconds(r.blocked_ns);
    s.io_s += Seconds(r.io_ns);
    s.fault_s += Seconds(r.fault_ns);
    s.sync_s += Seconds(r.sync_ns);
    s.switches += r.switches;
    lost.push_back(Lost(r));
    s.lost_s += Seconds(lost.back());
  }
  std::vector<double> sorted = rates;
  std::sort(sorted.begin(), sorted.end());
  s.calls_per_s_median = sorted[sorted.size() / 2];
  for (double r : rates) s.low_buckets += r < s.calls_per_s_median / 2 ? 1 : 0;
  // The incident: `k` consecutive buckets inside the raw rows with the most lost time (the
  // latest of equals, as a plain explain reads the latest minutes).
  if (!span.has_raw) return s;
  int64_t k = std::max<int64_t>(1, incident_ns / kBucketNs);
  int64_t best_sum = -1;
  size_t best_at = 0, best_len = 0;
  for (size_t i = 0; i < secs.size(); ++i) {
    // Buckets [i, i + k) that hold raw rows.
    if (secs[i] * kNsPerS + kBucketNs <= span.raw_first) continue;
    size_t end = std::min(secs.size(), i + static_cast<size_t>(k));
    int64_t sum = 0;
    for (size_t j = i; j < end; ++j) sum += lost[j];
    if (sum >= best_sum) {
      best_sum = sum;
      best_at = i;
      best_len = end - i;
    }
    if (end == secs.size()) break;  // later starts would only be shorter
  }
  if (best_sum < 0) {  // the job's buckets all lie before the raw rows left
    LatestStretch(span, window, incident_ns, &s);
    return s;
  }
  s.tier = "rollups+incident";
  s.has_incident = true;
  s.incident_from_ns = std::max({window.begin_ns, secs[best_at] * kNsPerS, span.raw_first});
  s.incident_to_ns = std::min({window.end_ns,
                               secs[best_at + best_len - 1] * kNsPerS + kBucketNs,
                               span.raw_last + 1});
  s.incident_lost_s = Seconds(best_sum);
  int64_t incident_calls = 0;
  for (size_t j = best_at; j < best_at + best_len; ++j) incident_calls += calls[secs[j]];
  s.calls_per_s_incident = static_cast<double>(incident_calls) /
                           std::max(1e-9, Seconds(s.incident_to_ns - s.incident_from_ns));
  s.typical_lost_s = s.active_s > 0 ? s.lost_s * Seconds(s.incident_to_ns - s.incident_from_ns) /
                                          s.active_s
                                    : 0;
  return s;
}

}  // namespace gw
