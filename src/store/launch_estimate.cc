#include "store/launch_estimate.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "store/ops.h"
#include "store/reader.h"
#include "store/row_columns.h"
#include "store/window_rows.h"

namespace gw {

namespace {

constexpr int64_t kSecNs = 1'000'000'000;
// A second covered at least this share is taken as covered whole: the probes go on and off a
// poll interval (a few ms) after the second starts.
constexpr double kCoveredWhole = 0.9;
// A second covered all but this much is covered whole (when its coverage started or ended in
// it cannot be told apart).
constexpr int64_t kCoveredSlackNs = 1'000'000;
// A second covered at least this much, with no launches of a process counted, shows that the
// process was not launching then.
constexpr double kCoveredQuiet = 0.5;
// The ratio estimate needs this many other calls in the covered seconds.
constexpr double kMinRatioCalls = 20;

int64_t At(const std::map<int64_t, int64_t>& m, int64_t sec) {
  auto it = m.find(sec);
  return it == m.end() ? 0 : it->second;
}

double Covered(const LaunchCountingInput& in, int64_t sec) {
  auto it = in.covered_ns.find(sec);
  if (it == in.covered_ns.end() || it->second <= 0) return 0;
  if (sec == in.attach_sec || sec == in.stop_sec) return 1.0;
  double c = static_cast<double>(it->second) / kSecNs;
  return c >= kCoveredWhole ? 1.0 : std::clamp(c, 0.0, 1.0);
}

// The ratio estimate (see the header); false when the process's other calls are too few.
bool EstimateByRatio(const LaunchCountingInput& in, const LaunchCountingInput::Process& p,
                     LaunchEstimate* e) {
  const int64_t first = in.begin_ns / kSecNs;
  const int64_t last = (in.end_ns - 1) / kSecNs;
  std::vector<std::pair<double, double>> samples;  // (launches, calls) of covered seconds
  double sum_l = 0, sum_x = 0, uncovered_calls = 0, uncovered_s = 0;
  for (int64_t sec = first; sec <= last; ++sec) {
    double l = static_cast<double>(At(p.launches, sec));
    double x = static_cast<double>(At(p.calls, sec));
    double c = Covered(in, sec);
    if (c == 1.0) {
      if (l > 0 || x > 0) {
        samples.push_back({l, x});
        sum_l += l;
        sum_x += x;
      }
    } else if (x > 0) {
      uncovered_calls += x * (1.0 - c);
      uncovered_s += 1.0 - c;
    }
  }
  if (sum_x < kMinRatioCalls || sum_l <= 0) return false;
  double ratio = sum_l / sum_x;
  double rel_se;
  if (samples.size() >= 2) {
    // The ratio estimator's variance from the residuals of the covered seconds.
    double n = static_cast<double>(samples.size());
    double mean_x = sum_x / n, ss = 0;
    for (const auto& [l, x] : samples) ss += (l - ratio * x) * (l - ratio * x);
    double se = std::sqrt(ss / (n - 1) / n) / mean_x;
    rel_se = se / ratio;
  } else {
    rel_se = 0;
  }
  // Counting's own floor: both counts carry sqrt(n) of sampling error.
  rel_se = std::max(rel_se, std::sqrt(1.0 / sum_l + 1.0 / sum_x));
  double extra = ratio * uncovered_calls;
  e->estimated = static_cast<double>(e->counted) + extra;
  e->error = extra * rel_se;
  e->uncovered_s = uncovered_s;
  return true;
}

LaunchEstimate EstimateProcess(const LaunchCountingInput& in,
                               const LaunchCountingInput::Process& p) {
  LaunchEstimate e;
  for (const auto& [sec, n] : p.launches) e.counted += n;
  e.estimated = static_cast<double>(e.counted);
  if (e.counted == 0 || p.launches.empty()) return e;
  if (EstimateByRatio(in, p, &e)) return e;
  const int64_t first_sec = p.launches.begin()->first;
  const int64_t last_sec = p.launches.rbegin()->first;

  // The launching span [a, b). It starts in the first counted second when the second before
  // was covered without a launch; otherwise it reaches back to the first CUDA activity.
  int64_t a = first_sec * kSecNs;
  if (Covered(in, first_sec - 1) < kCoveredQuiet) {
    int64_t evidence = p.first_ns >= 0 ? std::min(p.first_ns, a) : in.begin_ns;
    a = evidence;
  }
  int64_t b = (last_sec + 1) * kSecNs;
  if (Covered(in, last_sec + 1) < kCoveredQuiet) {
    int64_t evidence = p.last_ns >= 0 ? std::max(p.last_ns, b) : in.end_ns;
    b = evidence;
  }
  if (p.exit_ns >= 0) b = std::min(b, std::max(p.exit_ns, (last_sec + 1) * kSecNs));
  a = std::max(a, in.begin_ns);
  b = std::min(b, in.end_ns);
  if (b <= a) return e;

  // Per second of the span: the share the process was launching (alpha) and the share the
  // probes did not cover; steady seconds (whole, covered whole) give the rate.
  double uncovered = 0;
  std::vector<double> steady_rates;
  double steady_n = 0, steady_s = 0;
  double any_n = 0, any_s = 0;
  for (int64_t sec = a / kSecNs; sec * kSecNs < b; ++sec) {
    double lo = static_cast<double>(std::max(a, sec * kSecNs));
    double hi = static_cast<double>(std::min(b, (sec + 1) * kSecNs));
    double alpha = std::max(0.0, hi - lo) / kSecNs;
    double c = Covered(in, sec);
    uncovered += alpha * (1.0 - c);
    auto it = p.launches.find(sec);
    double n = it == p.launches.end() ? 0.0 : static_cast<double>(it->second);
    if (c > 0 && alpha > 0) {
      any_n += n;
      any_s += c * alpha;
    }
    if (c == 1.0 && alpha >= 0.999 && sec > first_sec && sec < last_sec + 1) {
      steady_rates.push_back(n);
      steady_n += n;
      steady_s += 1.0;
    }
  }
  e.uncovered_s = uncovered;
  if (uncovered <= 1e-3) return e;
  double rate = 0, se = 0;
  if (!steady_rates.empty()) {
    rate = steady_n / steady_s;
    if (steady_rates.size() >= 2) {
      double var = 0;
      for (double r : steady_rates) var += (r - rate) * (r - rate);
      var /= static_cast<double>(steady_rates.size() - 1);
      se = std::sqrt(var / static_cast<double>(steady_rates.size()));
    }
    // Poisson's floor: even a perfectly steady count carries sqrt(n) of sampling error.
    se = std::max(se, std::sqrt(std::max(1.0, steady_n)) / steady_s);
  } else if (any_s > 0) {
    rate = any_n / any_s;
    se = std::sqrt(std::max(1.0, any_n)) / any_s;
  } else {
    return e;
  }
  e.estimated = static_cast<double>(e.counted) + rate * uncovered;
  e.error = se * uncovered;
  return e;
}

}  // namespace

double LaunchEstimates::Scale(int32_t pid) const {
  if (!coverage_known) return static_cast<double>(std::max<int64_t>(1, duty));
  auto it = by_pid.find(pid);
  if (it == by_pid.end() || it->second.counted == 0) return 1.0;
  return it->second.estimated / static_cast<double>(it->second.counted);
}

int64_t LaunchEstimates::Scaled(int32_t pid, int64_t counted) const {
  return static_cast<int64_t>(std::llround(static_cast<double>(counted) * Scale(pid)));
}

bool LaunchEstimates::estimated() const {
  if (!coverage_known) return duty > 1;
  return total.estimated > static_cast<double>(total.counted) + 0.5;
}

double LaunchEstimates::RelativeError() const {
  return total.estimated > 0 ? total.error / total.estimated : 0.0;
}

std::vector<std::pair<int64_t, int64_t>> UnprobedSpans(const LaunchCountingInput& in) {
  std::vector<std::pair<int64_t, int64_t>> out;
  if (!in.coverage_known || in.end_ns <= in.begin_ns) return out;
  auto add = [&](int64_t a, int64_t b) {
    a = std::max(a, in.begin_ns);
    b = std::min(b, in.end_ns);
    if (b <= a) return;
    if (!out.empty() && out.back().second >= a) {
      out.back().second = std::max(out.back().second, b);
    } else {
      out.push_back({a, b});
    }
  };
  const int64_t first = in.begin_ns / kSecNs;
  const int64_t last = (in.end_ns - 1) / kSecNs;
  // Whether the second before `first` was covered to its end: only its own row can say.
  int64_t before = std::clamp<int64_t>(At(in.covered_ns, first - 1), 0, kSecNs);
  bool to_end = before >= kSecNs - kCoveredSlackNs;
  for (int64_t sec = first; sec <= last; ++sec) {
    const int64_t s0 = sec * kSecNs, s1 = s0 + kSecNs;
    int64_t c = std::clamp<int64_t>(At(in.covered_ns, sec), 0, kSecNs);
    if (sec < in.attach_sec) {  // before the first attach no call of any kind was seen either
      to_end = false;
    } else if (c >= kSecNs - kCoveredSlackNs) {
      to_end = true;
    } else if (c == 0) {
      add(s0, s1);
      to_end = false;
    } else if (to_end) {
      add(s0 + c, s1);
      to_end = false;
    } else {
      add(s0, s1 - c);
      to_end = true;
    }
  }
  return out;
}

LaunchEstimates EstimateLaunches(const LaunchCountingInput& in) {
  LaunchEstimates out;
  out.coverage_known = in.coverage_known;
  out.unprobed = UnprobedSpans(in);
  out.duty = std::max<int64_t>(1, in.duty);
  double var = 0;
  for (const auto& [pid, p] : in.processes) {
    LaunchEstimate e;
    if (in.coverage_known) {
      e = EstimateProcess(in, p);
    } else {
      for (const auto& [sec, n] : p.launches) e.counted += n;
      e.estimated = static_cast<double>(e.counted * out.duty);
    }
    if (e.counted == 0) continue;
    out.total.counted += e.counted;
    out.total.estimated += e.estimated;
    out.total.uncovered_s += e.uncovered_s;
    var += e.error * e.error;
    out.by_pid[pid] = e;
  }
  out.total.error = std::sqrt(var);
  return out;
}

StatusOr<LaunchEstimates> ReadLaunchEstimates(StoreReader& reader, const SessionWindow& window,
                                              int32_t pid) {
  LaunchCountingInput in;
  in.begin_ns = window.begin_ns;
  in.end_ns = window.end_ns;
  ASSIGN_OR_RETURN(in.duty, ReadLaunchDuty(reader, window.session));
  const int64_t first = window.begin_ns / kSecNs;
  const int64_t last = (window.end_ns - 1) / kSecNs;
  const std::string coverage_op = std::to_string(static_cast<int>(Op::kLaunchCoverage));
  // Coverage one second either side: whether launching began or ended at the window's edge.
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT sec, SUM(total_ns) FROM op_seconds WHERE session = ?1 AND sec >= ?2 AND "
      "sec <= ?3 AND pid = 0 AND op = " + coverage_op + " GROUP BY sec",
      {window.session, first - 1, last + 1}, [&](sqlite3_stmt* s) {
        in.covered_ns[sqlite3_column_int64(s, 0)] = sqlite3_column_int64(s, 1);
      }));
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT MIN(sec), MAX(sec) FROM op_seconds WHERE session = ?1 AND pid = 0 AND op = " +
          coverage_op,
      {window.session}, [&](sqlite3_stmt* s) {
        if (sqlite3_column_type(s, 0) == SQLITE_NULL) return;
        in.coverage_known = true;
        in.attach_sec = sqlite3_column_int64(s, 0);
        int64_t last_covered = sqlite3_column_int64(s, 1);
        if (last_covered >= window.last_ts_ns / kSecNs) in.stop_sec = last_covered;
      }));
  RETURN_IF_ERROR(reader.ForEach(
      std::string("SELECT pid, sec, SUM(count) FROM op_seconds WHERE session = ?1 AND sec >= ?2 "
                  "AND sec <= ?3 AND (?4 = 0 OR pid = ?4) AND op IN (") +
          kLaunchOpList + ") GROUP BY pid, sec",
      {window.session, first, last, pid}, [&](sqlite3_stmt* s) {
        in.processes[static_cast<int32_t>(sqlite3_column_int64(s, 0))]
            .launches[sqlite3_column_int64(s, 1)] = sqlite3_column_int64(s, 2);
      }));
  if (!in.coverage_known) return EstimateLaunches(in);
  RETURN_IF_ERROR(reader.ForEach(
      std::string("SELECT pid, sec, SUM(count) FROM op_seconds WHERE session = ?1 AND sec >= ?2 "
                  "AND sec <= ?3 AND (?4 = 0 OR pid = ?4) AND op < 200 AND op NOT IN (") +
          kKernelRunOpList + ",26) GROUP BY pid, sec",
      {window.session, first, last, pid}, [&](sqlite3_stmt* s) {
        auto it = in.processes.find(static_cast<int32_t>(sqlite3_column_int64(s, 0)));
        if (it != in.processes.end()) it->second.calls[sqlite3_column_int64(s, 1)] =
            sqlite3_column_int64(s, 2);
      }));
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT pid, exit_ts FROM processes WHERE session = ?1 AND exit_ts IS NOT NULL",
      {window.session}, [&](sqlite3_stmt* s) {
        auto it = in.processes.find(static_cast<int32_t>(sqlite3_column_int64(s, 0)));
        if (it != in.processes.end()) it->second.exit_ns = sqlite3_column_int64(s, 1);
      }));
  // Each process's first and last second of CUDA activity (launches or other calls), refined
  // by its rows in them.
  for (auto& [p, proc] : in.processes) {
    int64_t lo = proc.launches.begin()->first, hi = proc.launches.rbegin()->first;
    if (!proc.calls.empty()) {
      lo = std::min(lo, proc.calls.begin()->first);
      hi = std::max(hi, proc.calls.rbegin()->first);
    }
    proc.first_ns = lo * kSecNs;
    proc.last_ns = (hi + 1) * kSecNs;
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT MIN(ts) FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3 AND "
        "pid = ?4 AND op < 200",
        {window.session, std::max(window.begin_ns, lo * kSecNs), (lo + 1) * kSecNs, p},
        [&](sqlite3_stmt* s) {
          if (sqlite3_column_type(s, 0) != SQLITE_NULL) proc.first_ns = sqlite3_column_int64(s, 0);
        }));
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT MAX(ts + MAX(COALESCE(duration_ns, 0), 0)) FROM event_rows WHERE session = ?1 "
        "AND ts >= ?2 AND ts < ?3 AND pid = ?4 AND op < 200",
        {window.session, hi * kSecNs, std::min(window.end_ns, (hi + 1) * kSecNs), p},
        [&](sqlite3_stmt* s) {
          if (sqlite3_column_type(s, 0) != SQLITE_NULL) proc.last_ns = sqlite3_column_int64(s, 0);
        }));
  }
  return EstimateLaunches(in);
}

}  // namespace gw
