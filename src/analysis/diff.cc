// diff: the same measurements over two whole sessions, with a verdict per row.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>

#include "analysis/analyze.h"
#include "analysis/explain.h"
#include "analysis/facts.h"
#include "analysis/format.h"
#include "analysis/gpu.h"
#include "analysis/loader.h"
#include "analysis/thresholds.h"
#include "base/table.h"
#include "base/text.h"
#include "store/reader.h"

namespace gw {

namespace {

struct SessionMeasures {
  std::string label;
  double seconds = 0;
  double ctx_switches = 0;
  double preemptions = 0;  // involuntary switches (kind 0) of the training process
  double sync_p50_us = 0;
  double sync_p99_us = 0;
  double cuda_ops_per_s = 0;
  std::vector<double> feed_pct;  // main thread % per FeedCause
  std::vector<std::string> findings;
  std::optional<GpuSummary> gpu;  // the job's GPU (NVML samples), when the session has them
  GpuBudget budget;               // explain's GPU-time budget over the session
};

StatusOr<SessionMeasures> Measure(StoreReader& reader, int64_t session) {
  WindowRequest req;  // no since, no range: the whole session
  req.session = session;
  ASSIGN_OR_RETURN(WindowData w, LoadWindow(reader, req));
  ExplainOptions options;
  Facts f = ComputeFacts(w, options);
  SessionMeasures m;
  std::string file = reader.path();
  if (size_t slash = file.rfind('/'); slash != std::string::npos) file = file.substr(slash + 1);
  m.label = file + " session " + std::to_string(w.session);
  m.seconds = f.window_s;
  if (f.main_pid == 0) {
    return NotFound("no CUDA calls from tracked processes in " + m.label + " — nothing to compare");
  }
  if (auto it = f.switches.find(f.main_pid); it != f.switches.end()) {
    m.ctx_switches = static_cast<double>(it->second.count);
  }
  for (const Event& e : w.events) {
    if (e.pid == f.main_pid && e.op == Op::kSchedSwitch &&
        e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
      m.preemptions += 1;
    }
  }
  // explain's definitions: the main thread's critical path over the job's loop (a `trace --
  // CMD` session's start-up and exit are no cause's, as in explain's table and budget).
  int64_t loop = f.loop_end - f.loop_begin;
  CauseTimes path = PathOverlap(f, f.loop_begin, f.loop_end);
  for (size_t i = 0; i < kFeedCauseCount; ++i) {
    m.feed_pct.push_back(loop > 0 ? 100.0 * static_cast<double>(path[i]) / loop : 0);
  }
  std::vector<int64_t> syncs;
  // explain's syncs: a driver sync nested in a runtime sync is the same sync (f.events).
  for (const Event& e : f.events) {
    if (e.pid == f.main_pid && IsSync(e.op)) syncs.push_back(e.duration_ns);
  }
  m.sync_p50_us = static_cast<double>(Percentile(syncs, 50)) / 1e3;
  m.sync_p99_us = static_cast<double>(Percentile(syncs, 99)) / 1e3;
  int64_t ops = 0, secs = 0;
  for (const auto& [sec, n] : f.cuda_ops_per_sec[f.main_pid]) {
    ops += n;
    ++secs;
  }
  m.cuda_ops_per_s = secs > 0 ? static_cast<double>(ops) / static_cast<double>(secs) : 0;
  Report r = Analyze(w, options);
  if (const GpuSummary* g = JobGpu(r.gpus)) m.gpu = *g;
  m.budget = r.budget;
  for (const Finding& x : r.findings) {
    m.findings.push_back(std::string("[") + SeverityName(x.severity) + "] " + x.cause + " → " +
                         x.effect);
  }
  return m;
}

DiffRow Row(std::string metric, std::string key, std::string unit, double before, double after,
            bool lower_is_better, double abs_floor) {
  DiffRow r;
  r.metric = std::move(metric);
  r.key = std::move(key);
  r.unit = std::move(unit);
  r.before = before;
  r.after = after;
  r.lower_is_better = lower_is_better;
  r.change_pct = before != 0 ? (after - before) / before * 100.0 : 0;
  r.ratio = before != 0 ? after / before : 0;
  double delta = after - before;
  double base = std::max(std::abs(before), std::abs(after));
  bool beyond = std::abs(delta) > thresholds::kDiffNoiseShare * base && std::abs(delta) > abs_floor;
  if (!beyond) {
    r.verdict = Verdict::kSame;
  } else if ((delta < 0) == lower_is_better) {
    r.verdict = Verdict::kBetter;
  } else {
    r.verdict = Verdict::kWorse;
  }
  return r;
}

double R(double v) { return std::round(v * 1000.0) / 1000.0; }

// Whether DiffToText prints `v` of a row in `unit` as zero.
bool PrintsAsZero(const std::string& unit, double v) {
  double unit_of_last_digit = unit == "%" ? 0.1 : unit == "ratio" ? 0.01 : unit == "us" ? 1e-3 : 1;
  return std::abs(v) < unit_of_last_digit / 2;
}

}  // namespace

StatusOr<DiffReport> Diff(StoreReader& a, int64_t session_a, StoreReader& b, int64_t session_b) {
  ASSIGN_OR_RETURN(SessionMeasures x, Measure(a, session_a));
  ASSIGN_OR_RETURN(SessionMeasures y, Measure(b, session_b));
  DiffReport d;
  d.label_a = x.label;
  d.label_b = y.label;
  d.duration_a_s = x.seconds;
  d.duration_b_s = y.seconds;
  d.findings_a = x.findings;
  d.findings_b = y.findings;
  // A faster loop syncs (and so sleeps) more often: judge switches per unit of work.
  auto per_kop = [](const SessionMeasures& m) {
    double ops = m.cuda_ops_per_s * m.seconds;
    return ops > 0 ? m.ctx_switches / ops * 1000.0 : 0.0;
  };
  DiffRow per_work = Row("context switches per 1,000 CUDA calls", "train_ctx_switches_per_kop",
                         "ratio", per_kop(x), per_kop(y), true, 0.1);
  // The total alone is no verdict: the faster loop of a fix switches more.
  DiffRow total = Row("context switches on training process", "train_ctx_switches", "count",
                      x.ctx_switches, y.ctx_switches, true, 10);
  total.verdict = Verdict::kNone;
  d.rows.push_back(total);
  d.rows.push_back(per_work);
  d.rows.push_back(Row("preemptions of training process (involuntary switches)",
                       "train_preemptions", "count", x.preemptions, y.preemptions, true, 10));
  d.rows.push_back(Row("sync p50", "sync_p50_us", "us", x.sync_p50_us, y.sync_p50_us, true, 5));
  d.rows.push_back(Row("sync p99", "sync_p99_us", "us", x.sync_p99_us, y.sync_p99_us, true, 5));
  d.rows.push_back(Row("CUDA op throughput", "cuda_ops_per_s", "ops/s", x.cuda_ops_per_s,
                       y.cuda_ops_per_s, false, 1));
  for (size_t i = 0; i < kFeedCauseCount; ++i) {
    FeedCause c = static_cast<FeedCause>(i);
    // Running, sync and helper time going up is the GPU being fed; every other cause is loss.
    bool lower =
        !(c == FeedCause::kRunning || c == FeedCause::kSync || c == FeedCause::kHelperWork);
    d.rows.push_back(Row(std::string("critical path: ") + FeedCauseLabel(c),
                         std::string("feed_") + FeedCauseName(c) + "_pct", "%", x.feed_pct[i],
                         y.feed_pct[i], lower, 1.0));
  }
  // The GPU-time budget (explain's one definition of lost time), as shares of each session's
  // window so sessions of different lengths compare: busy for the job, then each cause's lost
  // GPU time where either side has some.
  if (x.budget.present && y.budget.present && x.budget.window_s > 0 && y.budget.window_s > 0) {
    auto pct = [](const GpuBudget& b, double s) { return 100.0 * s / b.window_s; };
    d.rows.push_back(Row("GPU busy for the job", "gpu_busy_job_pct", "%",
                         pct(x.budget, x.budget.gpu_busy_job_s),
                         pct(y.budget, y.budget.gpu_busy_job_s), false, 1.0));
    for (size_t i = 0;
         i < kBudgetCauseCount && i < x.budget.lines.size() && i < y.budget.lines.size(); ++i) {
      double before = pct(x.budget, x.budget.lines[i].lost_s);
      double after = pct(y.budget, y.budget.lines[i].lost_s);
      if (before < 0.5 && after < 0.5) continue;
      BudgetCause c = x.budget.lines[i].cause;
      d.rows.push_back(Row(std::string("GPU time lost: ") + BudgetCauseLabel(c),
                           std::string("lost_") + BudgetCauseKey(c) + "_pct", "%", before, after,
                           true, 1.0));
    }
    if (x.budget.source != y.budget.source) {
      d.notes.push_back("the GPU-time budget comes from " + x.budget.source + " before and " +
                        y.budget.source + " after: busy and lost rows are less comparable");
    }
  }
  // GPU truth (NVML): the job's GPU on each side, medians over the session; a better-fed GPU is
  // busier. Rows only where both sides have the figure.
  if (x.gpu && y.gpu) {
    struct GpuRow {
      const char* metric;
      const char* key;
      double GpuSummary::*field;
    };
    constexpr GpuRow kGpuRows[] = {
        {"GPU utilization (nvidia-smi)", "gpu_util_pct", &GpuSummary::util_pct},
        {"GPU SM active", "gpu_sm_active_pct", &GpuSummary::sm_active_pct},
        {"GPU SM occupancy", "gpu_sm_occupancy_pct", &GpuSummary::sm_occupancy_pct},
        {"GPU tensor active", "gpu_tensor_active_pct", &GpuSummary::tensor_active_pct},
    };
    for (const GpuRow& g : kGpuRows) {
      double before = (*x.gpu).*g.field;
      double after = (*y.gpu).*g.field;
      if (before < 0 || after < 0) continue;
      d.rows.push_back(Row(g.metric, g.key, "%", before, after, false, 1.0));
    }
  } else if (x.gpu || y.gpu) {
    d.notes.push_back(std::string("GPU samples (NVML) only in ") +
                      (x.gpu ? "the before" : "the after") + " session: no GPU rows");
  }
  // A row that prints as zero on both sides says nothing (and its change would read "new").
  d.rows.erase(std::remove_if(d.rows.begin(), d.rows.end(),
                              [](const DiffRow& r) {
                                return PrintsAsZero(r.unit, r.before) &&
                                       PrintsAsZero(r.unit, r.after);
                              }),
               d.rows.end());
  return d;
}

std::string DiffToText(const DiffReport& d) {
  std::string out;
  out += Fmt("Before: %s (%.1f s)\nAfter:  %s (%.1f s)\n\n", d.label_a.c_str(), d.duration_a_s,
             d.label_b.c_str(), d.duration_b_s);
  Table t;
  t.columns = {"metric", "before", "after", "change", "verdict"};
  for (const DiffRow& r : d.rows) {
    auto v = [&](double x) {
      if (r.unit == "count") return FormatCount(static_cast<int64_t>(std::llround(x)));
      if (r.unit == "us") return FormatNs(static_cast<int64_t>(std::llround(x * 1e3)));
      if (r.unit == "%") return Fmt("%.1f%%", x);
      if (r.unit == "ratio") return Fmt("%.2f", x);
      return FormatRate(x) + " ops/s";
    };
    std::string change;
    if (r.before == 0 && r.after == 0) {
      change = "—";
    } else if (r.before != 0 && r.ratio > 0 && (r.ratio >= 2 || r.ratio <= 0.5)) {
      change = r.ratio >= 1 ? Fmt("%s", FormatFactor(r.ratio).c_str())
                            : Fmt("1/%s", FormatFactor(1 / r.ratio).c_str());
    } else if (r.before != 0) {
      change = Fmt("%+.0f%%", r.change_pct);
    } else {
      change = "new";
    }
    t.rows.push_back(
        {r.metric, v(r.before), v(r.after), change,
         r.verdict == Verdict::kNone ? std::string() : std::string(VerdictName(r.verdict))});
  }
  out += FormatTable(t, TableFormat::kText);
  out += "\nFindings before:\n";
  if (d.findings_a.empty()) out += "  (none)\n";
  for (const std::string& s : d.findings_a) out += "  " + s + "\n";
  out += "Findings after:\n";
  if (d.findings_b.empty()) out += "  (none)\n";
  for (const std::string& s : d.findings_b) out += "  " + s + "\n";
  for (const std::string& n : d.notes) out += "note: " + n + "\n";
  return TerminalSafe(out, /*keep_line_breaks=*/true);  // names from traced processes
}

nlohmann::ordered_json DiffJson(const DiffReport& d) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["before"] = {{"label", d.label_a}, {"seconds", R(d.duration_a_s)}, {"findings", d.findings_a}};
  j["after"] = {{"label", d.label_b}, {"seconds", R(d.duration_b_s)}, {"findings", d.findings_b}};
  ordered_json rows = ordered_json::array();
  for (const DiffRow& r : d.rows) {
    rows.push_back({{"key", r.key},
                    {"metric", r.metric},
                    {"unit", r.unit},
                    {"before", R(r.before)},
                    {"after", R(r.after)},
                    {"change_pct", R(r.change_pct)},
                    {"ratio", R(r.ratio)},
                    {"lower_is_better", r.lower_is_better},
                    {"verdict", VerdictName(r.verdict)}});
  }
  j["rows"] = rows;
  j["notes"] = d.notes;
  return j;
}

std::string DiffToJson(const DiffReport& d) { return JsonText(DiffJson(d)); }

}  // namespace gw
