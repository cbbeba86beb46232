// The /metrics page: a MetricsSnapshot (live counters), the newest periodic analysis (findings,
// feed time) and the trace's own state, written in the exposition format. Every metric, its
// labels and meaning: docs/prometheus.md (keep the two in step).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/report.h"
#include "metrics/trace_metrics.h"

namespace gw {

struct FindingGauge {
  std::string rule;   // Finding::rule
  int severity = 0;   // 0 = not reported now, 1 LOW, 2 MEDIUM, 3 HIGH
  double lost_s = 0;  // GPU-feed seconds the finding explains in the window
};

struct FeedTimeGauge {
  std::string group;  // "critical_path", "training", "workers"
  std::string cause;  // FeedCauseName: "running", "runq_wait", …
  double seconds = 0;
  double ratio = 0;  // of the group's thread-seconds
};

// The newest run of the analysis over the recent window of the live database.
struct AnalysisState {
  bool enabled = false;  // false without a database (trace --record=false)
  int64_t runs = 0;      // runs that produced a report
  int64_t errors = 0;    // runs that failed (e.g. no events yet)
  int64_t skipped = 0;   // rounds skipped: the event rate allowed no useful window
  bool have_report = false;
  double window_from_s = 0;  // the newest report's window, session seconds
  double window_to_s = 0;
  double duration_s = 0;               // how long the newest run took
  std::vector<FindingGauge> findings;  // every rule reported during the trace, 0 when not now
  std::vector<FeedTimeGauge> feed_time;
  GpuBudget budget;  // the newest report's GPU-time budget (present = false: none yet)
};

struct TraceState {
  std::string version;
  int64_t session = 0;
  bool running = true;      // false once the trace stopped (final values)
  double start_time_s = 0;  // Unix time the session started
};

std::string RenderMetricsPage(const MetricsSnapshot& metrics, const AnalysisState& analysis,
                              const TraceState& trace);

}  // namespace gw
