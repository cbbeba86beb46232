#include "prometheus/exporter.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <map>

#include "analysis/explain.h"
#include "prometheus/exposition.h"
#include "store/reader.h"

namespace gw {

namespace {

// Stable label values for the feed-time groups explain names in prose.
std::string FeedGroupKey(const std::string& name) {
  if (name.rfind("main thread's critical path", 0) == 0) return "critical_path";
  if (name.rfind("training threads", 0) == 0) return "training";
  if (name.rfind("DataLoader workers", 0) == 0) return "workers";
  return SafeProcessName(name);
}

int SeverityValue(Severity s) {
  switch (s) {
    case Severity::kLow:
      return 1;
    case Severity::kMedium:
      return 2;
    case Severity::kHigh:
      return 3;
  }
  return 0;
}

}  // namespace

int64_t AnalysisWindowNs(int64_t window_ns, double events_per_s) {
  if (events_per_s * static_cast<double>(window_ns) / 1e9 >
      static_cast<double>(kAnalysisRowBudget)) {
    window_ns = static_cast<int64_t>(static_cast<double>(kAnalysisRowBudget) / events_per_s * 1e9);
  }
  return window_ns >= kMinAnalysisWindowNs ? window_ns : 0;
}

PrometheusExporter::PrometheusExporter(PrometheusOptions options, const TraceMetrics* metrics,
                                       std::unique_ptr<HttpServer> server)
    : options_(std::move(options)), metrics_(metrics), server_(std::move(server)) {
  analysis_.enabled = options_.analysis_interval_ns > 0;
  trace_.version = options_.version;
}

PrometheusExporter::~PrometheusExporter() { Stop(); }

StatusOr<std::unique_ptr<PrometheusExporter>> PrometheusExporter::Create(
    PrometheusOptions options, const TraceMetrics* metrics) {
  ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
                   HttpServer::Create(options.address, HttpServerOptions{}));
  return std::unique_ptr<PrometheusExporter>(
      new PrometheusExporter(std::move(options), metrics, std::move(server)));
}

std::string PrometheusExporter::url() const {
  ListenAddress a = options_.address;
  a.port = server_->port();
  return "http://" + a.ToString() + "/metrics";
}

void PrometheusExporter::Start(int64_t session, double start_time_s,
                               std::optional<DatabaseFile> db) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    trace_.session = session;
    trace_.start_time_s = start_time_s;
    db_ = std::move(db);
    analysis_.enabled = analysis_.enabled && session > 0 && db_.has_value();
  }
  server_->Start([this](const HttpRequest& r) { return Handle(r); });
  last_round_ = std::chrono::steady_clock::now();
  last_events_ = metrics_->events();
  if (analysis_.enabled) analysis_thread_ = std::thread([this] { AnalysisLoop(); });
}

HttpResponse PrometheusExporter::Handle(const HttpRequest& request) {
  if (request.path != "/metrics") {
    return {404, "text/plain; charset=utf-8", "not found: gpuwhy serves /metrics only\n"};
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return {405, "text/plain; charset=utf-8", "GET or HEAD only\n"};
  }
  bool final_page = false;
  std::string page;
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_page = !trace_.running;
  }
  page = Render();
  if (final_page) final_pages_++;
  return {200, kExpositionContentType, std::move(page)};
}

std::string PrometheusExporter::Render() const {
  MetricsSnapshot snapshot = metrics_->Snapshot();  // its own short lock
  AnalysisState analysis;
  TraceState trace;
  {
    std::lock_guard<std::mutex> lock(mu_);
    analysis = analysis_;
    trace = trace_;
  }
  return RenderMetricsPage(snapshot, analysis, trace);
}

void PrometheusExporter::AnalysisLoop() {
  // The analysis is the heaviest thing here (it loads the window's rows): below the drain
  // thread and the job in the CPU's queue.
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  pthread_setname_np(pthread_self(), "gw-prom-explain");
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_analysis_) {
    cv_.wait_for(lock, std::chrono::nanoseconds(options_.analysis_interval_ns),
                 [this] { return stop_analysis_; });
    if (stop_analysis_) break;
    lock.unlock();
    int64_t window = NextWindowNs();
    if (window > 0) {
      Analyze(window);
    } else {
      std::lock_guard<std::mutex> g(mu_);
      ++analysis_.skipped;
    }
    lock.lock();
  }
}

int64_t PrometheusExporter::NextWindowNs() {
  auto now = std::chrono::steady_clock::now();
  int64_t events = metrics_->events();
  double seconds = std::chrono::duration<double>(now - last_round_).count();
  double rate = seconds > 0 ? static_cast<double>(events - last_events_) / seconds : 0;
  last_round_ = now;
  last_events_ = events;
  return AnalysisWindowNs(options_.analysis_window_ns, rate);
}

void PrometheusExporter::Analyze(int64_t window_ns) {
  int64_t session;
  {
    std::lock_guard<std::mutex> lock(mu_);
    session = trace_.session;
  }
  auto start = std::chrono::steady_clock::now();
  ExplainOptions o;
  o.window = WindowRequest{};
  o.window.session = session;
  o.window.since_ns = window_ns;
  StatusOr<Report> report = [&]() -> StatusOr<Report> {
    // The file the tracer writes, opened and read as its owner (-wal and -shm included):
    // a link or another file put at its path since is refused, not followed as root.
    ScopedFsIdentity as_owner(db_->location);
    ASSIGN_OR_RETURN(std::unique_ptr<StoreReader> reader, StoreReader::OpenWritten(*db_));
    return Explain(*reader, o);
  }();
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard<std::mutex> lock(mu_);
  if (!report.ok()) {
    ++analysis_.errors;
    return;
  }
  ++analysis_.runs;
  analysis_.have_report = true;
  analysis_.duration_s = took;
  analysis_.window_from_s = static_cast<double>(report->window.from_ns) / 1e9;
  analysis_.window_to_s = static_cast<double>(report->window.to_ns) / 1e9;
  // Every rule reported during the trace stays, at 0 when not reported now: alerts resolve.
  std::map<std::string, FindingGauge> by_rule;
  for (FindingGauge& f : analysis_.findings) {
    f.severity = 0;
    f.lost_s = 0;
    by_rule[f.rule] = f;
  }
  for (const Finding& f : report->findings) {
    FindingGauge& g = by_rule[f.rule];
    g.rule = f.rule;
    g.severity = std::max(g.severity, SeverityValue(f.severity));
    g.lost_s += f.lost_s;
  }
  analysis_.findings.clear();
  for (auto& [rule, g] : by_rule) analysis_.findings.push_back(g);
  analysis_.budget = report->budget;
  analysis_.feed_time.clear();
  for (const FeedTimeGroup& g : report->feed_time) {
    for (const FeedTimeRow& row : g.rows) {
      analysis_.feed_time.push_back(
          {FeedGroupKey(g.name), FeedCauseName(row.cause), row.seconds, row.pct / 100});
    }
  }
}

void PrometheusExporter::Finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_analysis_ = true;
  }
  cv_.notify_all();
  if (analysis_thread_.joinable()) analysis_thread_.join();
  bool analyze;
  {
    std::lock_guard<std::mutex> lock(mu_);
    analyze = analysis_.enabled;
  }
  // The final window: the interval, bounded by the rate since the last round, as every round.
  int64_t window = analyze ? NextWindowNs() : 0;
  if (window > 0) Analyze(window);
  std::lock_guard<std::mutex> lock(mu_);
  if (analyze && window == 0) ++analysis_.skipped;
  trace_.running = false;
}

bool PrometheusExporter::WaitForFinalScrape(int64_t timeout_ns) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout_ns);
  while (std::chrono::steady_clock::now() < deadline) {
    if (final_pages_.load() > 0 && server_->open_connections() == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

void PrometheusExporter::Stop() {
  if (stopped_) return;
  stopped_ = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_analysis_ = true;
  }
  cv_.notify_all();
  if (analysis_thread_.joinable()) analysis_thread_.join();
  server_->Stop();
}

}  // namespace gw
