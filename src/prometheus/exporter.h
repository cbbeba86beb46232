// PrometheusExporter: `gpuwhy trace --prometheus ADDR:PORT`. Serves /metrics from its own HTTP
// thread (http_server.h) — a snapshot of the live counters (TraceMetrics, fed by the capture
// loop), the newest analysis and the trace's state, rendered per scrape — and runs the analysis
// (explain) every analysis_interval_ns over the last analysis_window_ns of the live database on
// a thread of its own at low priority, through the read-only reader: capture never waits for
// it. Its cost is per row analyzed (it loads the window's rows: ~3.5 µs and ~190 bytes each on
// the dev VM), so the window equals the interval (every row is analyzed once) and is shortened
// to hold at most kAnalysisRowBudget events at the rate of the last interval; a round whose
// window would be shorter than kMinAnalysisWindowNs is skipped (BENCHMARKS.md).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "base/status.h"
#include "metrics/trace_metrics.h"
#include "prometheus/http_server.h"
#include "prometheus/metrics_page.h"
#include "store/db_location.h"

namespace gw {

inline constexpr int64_t kAnalysisIntervalNs = 30'000'000'000;
inline constexpr int64_t kAnalysisRowBudget = 200'000;
inline constexpr int64_t kMinAnalysisWindowNs = 2'000'000'000;

// The analysis window for a round: `window_ns`, shortened to hold kAnalysisRowBudget events at
// `events_per_s`; 0 (skip the round) when that is under kMinAnalysisWindowNs.
int64_t AnalysisWindowNs(int64_t window_ns, double events_per_s);

struct PrometheusOptions {
  ListenAddress address;
  std::string version;
  int64_t analysis_interval_ns = kAnalysisIntervalNs;  // 0 = no analysis
  int64_t analysis_window_ns = kAnalysisIntervalNs;
};

class PrometheusExporter {
 public:
  // Binds the address (nothing is served until Start).
  static StatusOr<std::unique_ptr<PrometheusExporter>> Create(PrometheusOptions options,
                                                              const TraceMetrics* metrics);
  ~PrometheusExporter();
  PrometheusExporter(const PrometheusExporter&) = delete;
  PrometheusExporter& operator=(const PrometheusExporter&) = delete;

  // "http://127.0.0.1:9464/metrics" (the bound port when 0 was asked for).
  std::string url() const;
  // Serves, and starts the periodic analysis of `session` (0 = none) in `db`, the recording
  // the tracer writes (none: no analysis). It is read through StoreReader::OpenWritten with
  // the owner's filesystem identity, never reopened by path.
  void Start(int64_t session, double start_time_s, std::optional<DatabaseFile> db);
  // The trace has stopped and its database is closed: one last analysis over the final
  // window; from now on the page says gpuwhy_trace_running 0 and its values are final.
  void Finish();
  // After Finish: waits until a scrape has read the final page (and its connection closed) or
  // `timeout_ns` passed. True when it was read.
  bool WaitForFinalScrape(int64_t timeout_ns);
  void Stop();  // idempotent

  // The page as a scrape would get it now (tests).
  std::string Render() const;

 private:
  PrometheusExporter(PrometheusOptions options, const TraceMetrics* metrics,
                     std::unique_ptr<HttpServer> server);
  void AnalysisLoop();
  // The window for this round from the event rate since the previous one; 0 = skip the round.
  int64_t NextWindowNs();
  void Analyze(int64_t window_ns);
  HttpResponse Handle(const HttpRequest& request);

  PrometheusOptions options_;
  const TraceMetrics* metrics_;
  std::unique_ptr<HttpServer> server_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  AnalysisState analysis_;          // guarded by mu_
  std::optional<DatabaseFile> db_;  // set by Start, before the analysis thread
  TraceState trace_;                // guarded by mu_
  bool stop_analysis_ = false;
  std::thread analysis_thread_;
  std::atomic<int64_t> final_pages_{0};
  // Rate bookkeeping (the analysis thread, then Finish after joining it).
  int64_t last_events_ = 0;
  std::chrono::steady_clock::time_point last_round_;
  bool stopped_ = false;
};

}  // namespace gw
