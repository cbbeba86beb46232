// `gpuwhy trace --prometheus ADDR:PORT`: the trace command's glue to src/prometheus, kept out
// of cmd_trace.cc. Order: FromFlags before the tracer starts (a bad value or a port in use
// fails before anything is loaded), observer() into TracerOptions, Started() after
// Tracer::Start (note for the user), Finished() after Tracer::Stop (final values, the optional
// linger for a last scrape).
#pragma once

#include <memory>
#include <string>

#include "base/flags.h"
#include "base/status.h"
#include "capture/event_observer.h"
#include "metrics/trace_metrics.h"
#include "prometheus/exporter.h"

namespace gw {

void AddPrometheusFlags(FlagSet& flags);

class TracePrometheus {
 public:
  // nullptr when --prometheus is not given. `db_path` "" when not recording.
  static StatusOr<std::unique_ptr<TracePrometheus>> FromFlags(const FlagSet& flags,
                                                              const std::string& db_path,
                                                              const std::string& version);
  EventObserver* observer() { return &metrics_; }
  // Starts serving (and analysing `db`, the recording the tracer writes; none when not
  // recording); returns the note that says where.
  std::string Started(int64_t session, std::optional<DatabaseFile> db);
  // The trace stopped and its database is closed: final analysis, then serve until a scrape
  // read the final values or --prometheus-linger passed, then stop serving.
  void Finished();

 private:
  TracePrometheus() = default;
  TraceMetrics metrics_;
  std::unique_ptr<PrometheusExporter> exporter_;
  int64_t linger_ns_ = 0;
  int64_t analysis_ns_ = 0;  // 0: no analysis (not recording, or --prometheus-analysis 0)
};

}  // namespace gw
