#include "cli/trace_prometheus.h"

#include <time.h>

#include <cstdio>

namespace gw {

void AddPrometheusFlags(FlagSet& flags) {
  flags.Add({"prometheus", FlagKind::kString, "ADDR:PORT",
             "serve Prometheus metrics at http://ADDR:PORT/metrics while tracing (numeric "
             "address: 127.0.0.1:9464, [::1]:9464; 0.0.0.0 for every interface; docs/"
             "prometheus.md lists the metrics)",
             ""});
  flags.Add({"prometheus-linger", FlagKind::kDuration, "DUR",
             "after the trace ends, keep serving the final values until one scrape has read "
             "them, for at most DUR (short jobs under trace -- CMD)",
             "0s"});
}

StatusOr<std::unique_ptr<TracePrometheus>> TracePrometheus::FromFlags(const FlagSet& flags,
                                                                      const std::string& db_path,
                                                                      const std::string& version) {
  if (!flags.Has("prometheus")) {
    if (flags.Has("prometheus-linger")) {
      return InvalidArgument("--prometheus-linger needs --prometheus ADDR:PORT");
    }
    return std::unique_ptr<TracePrometheus>();
  }
  ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(flags.GetString("prometheus", "")));
  std::unique_ptr<TracePrometheus> p(new TracePrometheus());
  p->linger_ns_ = flags.GetDurationNs("prometheus-linger", 0);
  if (p->linger_ns_ < 0 || p->linger_ns_ > 3'600'000'000'000) {
    return InvalidArgument("--prometheus-linger must be between 0 and 1h");
  }
  PrometheusOptions options;
  options.address = address;
  options.db_path = db_path;
  options.version = version;
  p->analysis_ = !db_path.empty();
  ASSIGN_OR_RETURN(p->exporter_, PrometheusExporter::Create(options, &p->metrics_));
  return p;
}

std::string TracePrometheus::Started(int64_t session) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  exporter_->Start(session, static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9);
  return "serving Prometheus metrics at " + exporter_->url() +
         (analysis_
              ? " (findings every " + std::to_string(kAnalysisIntervalNs / 1'000'000'000) +
                    " s over the last " + std::to_string(kAnalysisWindowNs / 1'000'000'000) + " s)"
              : " (no findings: not recording)");
}

void TracePrometheus::Finished() {
  exporter_->Finish();
  if (linger_ns_ > 0 && !exporter_->WaitForFinalScrape(linger_ns_)) {
    std::fprintf(stderr,
                 "gpuwhy trace: no scrape read the final metrics within "
                 "--prometheus-linger\n");
  }
  exporter_->Stop();
}

}  // namespace gw
