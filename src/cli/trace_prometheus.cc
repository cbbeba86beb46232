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
  flags.Add({"prometheus-analysis", FlagKind::kString, "DUR",
             "every DUR, run explain over the last DUR of the recording for the findings and "
             "feed-time metrics (10s-10m; 0 or off: none)",
             "30s"});
}

StatusOr<std::unique_ptr<TracePrometheus>> TracePrometheus::FromFlags(const FlagSet& flags,
                                                                      const std::string& db_path,
                                                                      const std::string& version) {
  if (!flags.Has("prometheus")) {
    for (const char* f : {"prometheus-linger", "prometheus-analysis"}) {
      if (flags.Has(f))
        return InvalidArgument("--" + std::string(f) + " needs --prometheus ADDR:PORT");
    }
    return std::unique_ptr<TracePrometheus>();
  }
  ASSIGN_OR_RETURN(ListenAddress address, ParseListenAddress(flags.GetString("prometheus", "")));
  std::unique_ptr<TracePrometheus> p(new TracePrometheus());
  p->linger_ns_ = flags.GetDurationNs("prometheus-linger", 0);
  if (p->linger_ns_ < 0 || p->linger_ns_ > 3'600'000'000'000) {
    return InvalidArgument("--prometheus-linger must be between 0 and 1h");
  }
  p->analysis_ns_ = kAnalysisIntervalNs;
  if (std::string text = flags.GetString("prometheus-analysis", "30s");
      text == "0" || text == "off") {
    p->analysis_ns_ = 0;
  } else {
    StatusOr<int64_t> ns = ParseDurationNs(text);
    if (!ns.ok() || *ns < 10'000'000'000 || *ns > 600'000'000'000) {
      return InvalidArgument("--prometheus-analysis " + text +
                             ": a duration between 10s and 10m, or 0/off");
    }
    p->analysis_ns_ = *ns;
  }
  if (db_path.empty()) p->analysis_ns_ = 0;
  PrometheusOptions options;
  options.address = address;
  options.version = version;
  options.analysis_interval_ns = options.analysis_window_ns = p->analysis_ns_;
  ASSIGN_OR_RETURN(p->exporter_, PrometheusExporter::Create(options, &p->metrics_));
  return p;
}

std::string TracePrometheus::Started(int64_t session, std::optional<DatabaseFile> db) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (!db.has_value()) analysis_ns_ = 0;
  exporter_->Start(session, static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9, std::move(db));
  std::string every = std::to_string(analysis_ns_ / 1'000'000'000) + " s";
  return "serving Prometheus metrics at " + exporter_->url() +
         (analysis_ns_ > 0 ? " (findings every " + every + " over the last " + every + ")"
                           : " (no findings: not recording, or --prometheus-analysis 0)");
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
