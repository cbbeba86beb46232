#include "export/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "analysis/explain.h"
#include "analysis/format.h"
#include "analysis/timeline.h"
#include "base/saturating.h"
#include "base/text.h"
#include "store/timeline_rows.h"

namespace gw {

namespace {

// Chart geometry (px): a plot area of kPlotW × kPlotH inside margins for the axis labels.
constexpr int kLeft = 64;
constexpr int kPlotW = 860;
constexpr int kPlotH = 120;
constexpr int kTop = 24;
constexpr int kBottom = 26;
constexpr int kWidth = kLeft + kPlotW + 16;
constexpr int kHeight = kTop + kPlotH + kBottom;

// One colour per finding (shading) and per feed cause (bars); fixed so screenshots compare.
constexpr const char* kFindingColors[] = {"#d62728", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2"};
constexpr const char* kCauseColors[kFeedCauseCount] = {
    "#2ca02c",  // running
    "#d62728",  // runnable, waiting for a CPU
    "#8c564b",  // blocked on I/O
    "#e377c2",  // page faults
    "#7f7f7f",  // blocked otherwise
    "#bcbd22",  // memcpy
    "#1f77b4",  // sync
    "#17becf",  // helper work
    "#ff7f0e",  // worker compute
    "#9467bd",  // another thread held it (the GIL, a lock)
};
// Every cause has a colour: a missing one was a null pointer in the feed bars (a report of a
// recording with GIL hand-offs crashed).
static_assert(kCauseColors[kFeedCauseCount - 1] != nullptr, "a FeedCause without a colour");

std::string Num(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// A round axis maximum ≥ v: 1, 2 or 5 × 10^k.
double NiceMax(double v) {
  if (v <= 0) return 1;
  double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v) return m * p;
  }
  return 10 * p;
}

// The bucket length for a window: about 60 buckets, on a round number of seconds.
int64_t BucketSeconds(int64_t window_ns) {
  double want = static_cast<double>(window_ns) / 1e9 / 60;
  for (int64_t s : {1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 1800, 3600}) {
    if (static_cast<double>(s) >= want) return s;
  }
  return 3600;
}

struct Series {
  std::string title;   // "context switches per 10 s"
  std::string color;
  bool bars = false;
  std::vector<double> values;  // one per bucket; < 0 = no value
};

struct Shade {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::string color;
  std::string label;
};

// One chart: the series over the window's buckets, the findings' intervals shaded behind it.
std::string Chart(const Series& s, const std::vector<ActivityBucket>& buckets, int64_t bucket_ns,
                  int64_t from_ns, int64_t to_ns, const std::vector<Shade>& shades,
                  const std::string& id) {
  double top = 0;
  for (double v : s.values) top = std::max(top, v);
  top = NiceMax(top);
  const double span = static_cast<double>(std::max<int64_t>(1, SaturatingSub(to_ns, from_ns)));
  auto x = [&](int64_t ns) {
    double f = static_cast<double>(SaturatingSub(std::clamp(ns, from_ns, to_ns), from_ns)) / span;
    return kLeft + f * kPlotW;
  };
  auto y = [&](double v) { return kTop + kPlotH - v / top * kPlotH; };
  std::string svg = "<svg id=\"" + id + "\" class=\"chart\" width=\"" + std::to_string(kWidth) +
                    "\" height=\"" + std::to_string(kHeight) + "\" viewBox=\"0 0 " +
                    std::to_string(kWidth) + " " + std::to_string(kHeight) +
                    "\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
  svg += "<title>" + HtmlEscape(s.title) + "</title>";
  svg += "<text x=\"" + std::to_string(kLeft) + "\" y=\"16\" class=\"ct\">" +
         HtmlEscape(s.title) + "</text>";
  for (const Shade& sh : shades) {
    double a = x(sh.begin_ns), b = x(sh.end_ns);
    if (b <= a) continue;
    svg += "<rect class=\"shade\" x=\"" + Num(a) + "\" y=\"" + std::to_string(kTop) +
           "\" width=\"" + Num(b - a) + "\" height=\"" + std::to_string(kPlotH) + "\" fill=\"" +
           sh.color + "\" fill-opacity=\"0.15\"><title>" + HtmlEscape(sh.label) +
           "</title></rect>";
  }
  for (int i = 0; i <= 2; ++i) {  // gridlines at 0, half, top
    double v = top * i / 2;
    svg += "<line x1=\"" + std::to_string(kLeft) + "\" x2=\"" + std::to_string(kLeft + kPlotW) +
           "\" y1=\"" + Num(y(v)) + "\" y2=\"" + Num(y(v)) + "\" class=\"grid\"/>";
    svg += "<text x=\"" + std::to_string(kLeft - 6) + "\" y=\"" + Num(y(v) + 4) +
           "\" class=\"yl\">" +
           (v >= 1000 ? FormatCount(std::llround(v)) : Num(v, v == 0 || v >= 10 ? 0 : 1)) +
           "</text>";
  }
  for (int i = 0; i <= 5; ++i) {  // time labels
    int64_t t = from_ns + (to_ns - from_ns) * i / 5;
    svg += "<text x=\"" + Num(x(t)) + "\" y=\"" + std::to_string(kTop + kPlotH + 16) +
           "\" class=\"xl\">" + Num(static_cast<double>(t) / 1e9, 0) + " s</text>";
  }
  if (s.bars) {
    for (size_t i = 0; i < buckets.size(); ++i) {
      if (s.values[i] <= 0) continue;
      double a = x(buckets[i].begin_ns), b = x(SaturatingAdd(buckets[i].begin_ns, bucket_ns));
      double w = std::max(1.0, b - a - 1);
      svg += "<rect class=\"bar\" x=\"" + Num(a) + "\" y=\"" + Num(y(s.values[i])) +
             "\" width=\"" + Num(w) + "\" height=\"" + Num(kTop + kPlotH - y(s.values[i])) +
             "\" fill=\"" + s.color + "\"/>";
    }
  } else {
    std::string points;
    for (size_t i = 0; i < buckets.size(); ++i) {
      if (s.values[i] < 0) {
        if (!points.empty()) {
          svg += "<polyline class=\"line\" fill=\"none\" stroke=\"" + s.color +
                 "\" stroke-width=\"3\" points=\"" + points + "\"/>";
        }
        points.clear();
        continue;
      }
      double mid = x(SaturatingAdd(buckets[i].begin_ns, bucket_ns / 2));
      points += Num(mid) + "," + Num(y(s.values[i])) + " ";
    }
    if (!points.empty()) {
      svg += "<polyline class=\"line\" fill=\"none\" stroke=\"" + s.color +
             "\" stroke-width=\"3\" points=\"" + points + "\"/>";
    }
  }
  svg += "</svg>\n";
  return svg;
}

// One horizontal bar per feed-time group, a segment per cause.
std::string FeedBars(const Report& r) {
  std::string out = "<div id=\"feed-time\">\n";
  for (const FeedTimeGroup& g : r.feed_time) {
    out += "<h3>" + HtmlEscape(g.name) + " <span class=\"dim\">(" + std::to_string(g.threads) +
           (g.threads == 1 ? " thread, " : " threads, ") + Num(g.thread_seconds) +
           " thread-seconds)</span></h3>\n";
    out += "<svg class=\"feedbar\" width=\"" + std::to_string(kPlotW) +
           "\" height=\"28\" viewBox=\"0 0 " + std::to_string(kPlotW) +
           " 28\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\">";
    double at = 0;
    for (const FeedTimeRow& row : g.rows) {
      double w = row.pct / 100.0 * kPlotW;
      if (w <= 0) continue;
      out += "<rect x=\"" + Num(at) + "\" y=\"2\" width=\"" + Num(w) + "\" height=\"24\" fill=\"" +
             kCauseColors[static_cast<size_t>(row.cause)] + "\"><title>" +
             HtmlEscape(std::string(FeedCauseLabel(row.cause))) + ": " + Num(row.pct) +
             "%</title></rect>";
      at += w;
    }
    out += "</svg>\n<ul class=\"legend\">";
    for (const FeedTimeRow& row : g.rows) {
      if (row.pct < 0.05) continue;
      out += "<li><span class=\"sw\" style=\"background:" +
             std::string(kCauseColors[static_cast<size_t>(row.cause)]) + "\"></span>" +
             HtmlEscape(std::string(FeedCauseLabel(row.cause))) + " " + Num(row.pct) + "% (" +
             Num(row.seconds) + " s)</li>";
    }
    out += "</ul>\n";
  }
  return out + "</div>\n";
}

std::string Lines(const char* head, const std::vector<std::string>& lines) {
  if (lines.empty()) return "";
  std::string out = std::string("<dt>") + head + "</dt><dd><ul>";
  for (const std::string& l : lines) out += "<li>" + HtmlEscape(l) + "</li>";
  return out + "</ul></dd>";
}

std::string TableHtml(const std::vector<std::string>& columns,
                      const std::vector<std::vector<std::string>>& rows, const std::string& id) {
  std::string out = "<table id=\"" + id + "\"><thead><tr>";
  for (const std::string& c : columns) out += "<th>" + HtmlEscape(c) + "</th>";
  out += "</tr></thead><tbody>";
  for (const auto& row : rows) {
    out += "<tr>";
    for (const std::string& cell : row) out += "<td>" + HtmlEscape(cell) + "</td>";
    out += "</tr>";
  }
  return out + "</tbody></table>\n";
}

constexpr const char* kStyle = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:24px auto;max-width:960px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:14px 0 4px}.dim{color:#777;font-weight:normal}
.finding{border-left:5px solid #999;padding:4px 12px;margin:10px 0;background:#fafafa}
.sev-HIGH{border-color:#d62728}.sev-MEDIUM{border-color:#ff7f0e}.sev-LOW{border-color:#7f7f7f}
dl{margin:4px 0}dt{font-weight:600;margin-top:4px}dd{margin:0 0 0 12px}dd ul{margin:0;padding-left:18px}
pre{white-space:pre-wrap;background:#f3f3f3;padding:6px;font-size:12px}
table{border-collapse:collapse;font-size:13px;margin:6px 0}th,td{border:1px solid #ddd;padding:2px 8px;text-align:left}
th{background:#f3f3f3}.chart{display:block;margin:6px 0}.ct{font-size:13px;font-weight:600}
.grid{stroke:#e5e5e5}.yl{font-size:11px;text-anchor:end;fill:#555}.xl{font-size:11px;text-anchor:middle;fill:#555}
.legend{list-style:none;padding:0;margin:2px 0 8px;font-size:12px}.legend li{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
)css";

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string valid = ValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  for (char c : valid) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') break;
        out += c;
    }
  }
  return out;
}

StatusOr<HtmlReportSummary> WriteHtmlReport(StoreReader& reader, const HtmlReportOptions& options,
                                            OutputFile* out) {
  ExplainOptions eo = options.explain;
  eo.evidence = true;
  ASSIGN_OR_RETURN(Report r, Explain(reader, eo));
  r.db_path = options.db_path;
  SessionWindow w;
  w.session = r.window.session;
  w.begin_ns = r.window.from_ns;
  w.end_ns = r.window.to_ns;
  w.label = r.window.label;
  const int64_t bucket_s = BucketSeconds(w.end_ns - w.begin_ns);
  const int64_t bucket_ns = bucket_s * 1'000'000'000;
  // The job's GPU as explain chose it (the busiest), so chart and GPU line agree.
  const GpuSummary* job_gpu = JobGpu(r.gpus);
  ASSIGN_OR_RETURN(std::vector<ActivityBucket> buckets,
                   ReadActivityTimeline(reader, w, bucket_ns, eo.pid,
                                        job_gpu != nullptr ? job_gpu->gpu : -1));

  std::vector<Shade> shades;
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    for (const TimeInterval& t : f.intervals) {
      shades.push_back({t.begin_ns, t.end_ns, kFindingColors[i % std::size(kFindingColors)],
                        std::string("[") + SeverityName(f.severity) + "] " + FindingTitle(f)});
    }
  }
  const std::string per = bucket_s == 1 ? "per second" : "per " + std::to_string(bucket_s) + " s";
  // Series colours are used nowhere else on the page (report_e2e counts their pixels).
  Series switches{"context switches " + per, "#3366cc", true, {}};
  Series sync{"sync latency, average (ms)", "#cc3311", false, {}};
  Series calls{r.kernels.launch_duty > 1
                   ? "CUDA calls per second (launches left out: counted 1 s in " +
                         std::to_string(r.kernels.launch_duty) + ")"
                   : std::string("CUDA calls per second"),
               "#118844", false, {}};
  Series gpu{"GPU SM active (%) — NVML", "#7744aa", false, {}};
  bool any_gpu = false;
  for (const ActivityBucket& b : buckets) {
    switches.values.push_back(static_cast<double>(b.switches));
    sync.values.push_back(b.syncs > 0 ? b.sync_avg_ns / 1e6 : -1);
    calls.values.push_back(static_cast<double>(b.cuda_calls) / static_cast<double>(bucket_s));
    gpu.values.push_back(b.gpu_active_pct);
    any_gpu |= b.gpu_active_pct >= 0;
  }

  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  // Nothing may load from anywhere: the file is attached to tickets and opened offline.
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "style-src 'unsafe-inline'\">\n";
  h += "<title>gpuwhy report — " + HtmlEscape(r.window.label) + "</title>\n<style>" +
       std::string(kStyle) + "</style></head><body>\n";
  h += "<h1>gpuwhy report</h1>\n<p class=\"dim\" id=\"window\">" +
       HtmlEscape(options.db_path) + " · session " + std::to_string(r.window.session) + " · " +
       HtmlEscape(r.window.label) + " (" + Num(static_cast<double>(r.window.from_ns) / 1e9) +
       " s – " + Num(static_cast<double>(r.window.to_ns) / 1e9) + " s)</p>\n";
  h += "<h2>System context</h2>\n<ul id=\"system\">";
  if (r.system.present) {
    h += "<li>CPU " + Num(r.system.cpu_pct) + "% · memory " + Num(r.system.mem_pct) +
         "% · load " + Num(r.system.load1) + " (" + std::to_string(r.system.cores) +
         " cores) · swap " + Num(r.system.swap_mb, 0) + " MB</li>";
  } else {
    h += "<li>no system snapshots in this window</li>";
  }
  for (const ContainerInfo& c : r.containers) {
    std::string pids;
    for (size_t i = 0; i < c.pids.size() && i < 8; ++i) {
      pids += (pids.empty() ? "" : ", ") + std::to_string(c.pids[i].first);
      if (c.pids[i].second > 0 && c.pids[i].second != c.pids[i].first) {
        pids += " (" + std::to_string(c.pids[i].second) + " in the container)";
      }
    }
    h += "<li>" +
         HtmlEscape((c.container_id.empty()
                         ? "pod " + c.pod_uid
                         : "container " + (c.runtime.empty() ? "" : c.runtime + " ") +
                               c.container_id + (c.pod_uid.empty() ? "" : " in pod " + c.pod_uid)) +
                    (c.pod_name.empty()
                         ? std::string()
                         : " (" + c.pod_namespace + (c.pod_namespace.empty() ? "" : "/") +
                               c.pod_name + ")") +
                    ": pids " + pids) +
         "</li>";
  }
  for (const GpuSummary& g : r.gpus) h += "<li>" + HtmlEscape(GpuLine(g)) + "</li>";
  if (!r.gpu_verdict.empty()) h += "<li><b>" + HtmlEscape(r.gpu_verdict) + "</b></li>";
  h += "</ul>\n";

  h += "<h2>Causal chains</h2>\n<div id=\"findings\">\n";
  if (r.findings.empty()) {
    h += "<p>No causal chains: nothing in this window stands out from the run's own "
         "baseline.</p>\n";
  }
  for (size_t i = 0; i < r.findings.size(); ++i) {
    const Finding& f = r.findings[i];
    h += std::string("<section class=\"finding sev-") + SeverityName(f.severity) + "\">";
    h += "<h3><span class=\"sw\" style=\"background:" +
         std::string(kFindingColors[i % std::size(kFindingColors)]) + "\"></span>[" +
         SeverityName(f.severity) + "] " + HtmlEscape(FindingTitle(f)) +
         (f.lost_s >= 0.05 ? " (" + Num(f.lost_s) + " s lost)" : "") + "</h3><dl>";
    h += Lines("Root", f.root) + Lines("Effect", f.effects) +
         Lines("Contributing", f.contributing) + Lines("Fix", f.fix);
    h += "</dl>";
    if (!f.evidence.empty()) {
      h += "<details><summary>Evidence (" + std::to_string(f.evidence.size()) +
           " queries)</summary>";
      for (const EvidenceQuery& q : f.evidence) {
        std::string db = options.db_path.empty() ? "" : " --db " + ShellQuote(options.db_path);
        h += "<p>" + HtmlEscape(q.what) + "</p><pre>" +
             HtmlEscape("gpuwhy query" + db + " \"" + q.sql + "\"") + "</pre>";
      }
      h += "</details>";
    }
    h += "</section>\n";
  }
  h += "</div>\n";

  h += "<h2>Timeline</h2>\n<p class=\"dim\">The host's activity " + per +
       "; shaded: the seconds each finding's cause held the main thread.</p>\n<div id=\"timeline\">\n";
  h += Chart(switches, buckets, bucket_ns, w.begin_ns, w.end_ns, shades, "chart-switches");
  h += Chart(sync, buckets, bucket_ns, w.begin_ns, w.end_ns, shades, "chart-sync");
  h += Chart(calls, buckets, bucket_ns, w.begin_ns, w.end_ns, shades, "chart-cuda");
  if (any_gpu) h += Chart(gpu, buckets, bucket_ns, w.begin_ns, w.end_ns, shades, "chart-gpu");
  h += "</div>\n";

  h += "<h2>GPU feed-time attribution</h2>\n" + FeedBars(r);

  for (const CallerSection& c : r.callers) {
    std::vector<std::vector<std::string>> rows;
    for (const CallSite& s : c.sites) {
      rows.push_back({s.location + (s.function.empty() ? "" : " in " + s.function),
                      s.source_line, FormatCount(s.count), Num(s.total_ms), Num(s.max_ms),
                      s.processes});
    }
    h += "<h2>Top " + HtmlEscape(c.op) + " callers</h2>\n" +
         TableHtml({"where", "line", "calls", "total ms", "max ms", "processes"}, rows,
                   "callers-" + HtmlEscape(c.op));
  }
  if (!r.sched_victims.sites.empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const CallSite& s : r.sched_victims.sites) {
      rows.push_back({s.location, FormatCount(s.preempted), FormatCount(s.blocked),
                      Num(s.total_ms), s.processes});
    }
    h += "<h2>Top sched_switch victims</h2>\n" +
         TableHtml({"where", "preempted", "blocked", "off-CPU ms", "processes"}, rows, "victims");
  }
  for (const CpuProfileSection& p : r.cpu_profiles) {
    std::vector<std::vector<std::string>> rows;
    for (const CallSite& s : p.sites) {
      rows.push_back({s.location + (s.function.empty() ? "" : " in " + s.function),
                      s.source_line, s.via,
                      Num(100.0 * static_cast<double>(s.count) /
                          static_cast<double>(std::max<int64_t>(1, p.samples))) + "%",
                      Num(s.total_ms / 1e3)});
    }
    h += "<h2>Where the CPU time of " + HtmlEscape(p.title) + " went</h2>\n<p class=\"dim\">" +
         Num(p.cpu_s) + " s on the CPU, " + FormatCount(p.samples) + " samples at " +
         std::to_string(p.profile_hz) + " Hz (the on-CPU profile)" +
         (p.sync_samples > 0
              ? ", " + Num(100.0 * static_cast<double>(p.sync_samples) /
                           static_cast<double>(std::max<int64_t>(1, p.samples))) +
                    "% spinning inside CUDA syncs while the GPU worked (a wait, not listed)"
              : std::string()) +
         "</p>\n" +
         TableHtml({"where", "line", "via", "samples", "CPU s"}, rows, "profile-" + p.role);
  }
  if (r.kernels.launches > 0) {
    std::vector<std::vector<std::string>> rows;
    for (const KernelStat& k : r.kernels.top) {
      rows.push_back({ShortKernelName(k.name, 100), std::to_string(k.pid),
                      FormatCount(k.launches), FormatRate(k.per_s), Num(k.share_pct) + "%"});
    }
    h += "<h2>Top kernels by launches</h2>\n<p class=\"dim\">" +
         LaunchFigure(r.kernels) + " launches of " + FormatCount(r.kernels.kernels) + " kernels" +
         (r.kernels.estimated ? " (estimated from " + FormatCount(r.kernels.counted) + " counted)"
                              : std::string()) +
         "</p>\n" +
         TableHtml({"kernel", "pid", "launches", "per s", "share"}, rows, "kernels");
  }
  if (!r.top_processes.empty()) {
    std::vector<std::vector<std::string>> rows;
    // In containers: the pid there and the container, as the explain text shows them.
    bool contained = false;
    for (const ProcessStat& p : r.top_processes) {
      contained |=
          !p.container_id.empty() || !p.pod_uid.empty() || (p.ns_pid > 0 && p.ns_pid != p.pid);
    }
    for (const ProcessStat& p : r.top_processes) {
      rows.push_back({p.name, std::to_string(p.pid), p.role, FormatCount(p.context_switches),
                      Num(p.off_cpu_s), Num(p.idle_s), Num(p.runq_s), Num(p.worst_stall_ms),
                      Num(p.cpu_taken_from_feeders_s)});
      if (contained) {
        rows.back().insert(rows.back().begin() + 2, p.ns_pid > 0 ? std::to_string(p.ns_pid) : "-");
        rows.back().insert(rows.back().begin() + 3, !p.container_id.empty()
                                                        ? p.container_id.substr(0, 12)
                                                    : !p.pod_uid.empty() ? "pod " + p.pod_uid
                                                                         : std::string("-"));
      }
    }
    std::vector<std::string> columns = {"process",     "pid",
                                        "role",        "switches",
                                        "off-CPU s",   "idle (waiting for work) s",
                                        "run-queue s", "worst stall ms",
                                        "took CPU s"};
    if (contained) {
      columns.insert(columns.begin() + 2, "pid in container");
      columns.insert(columns.begin() + 3, "container");
    }
    h += "<h2>Processes</h2>\n" + TableHtml(columns, rows, "processes");
  }
  if (!r.notes.empty()) {
    h += "<h2>Notes</h2>\n<ul id=\"notes\">";
    for (const std::string& n : r.notes) h += "<li>" + HtmlEscape(n) + "</li>";
    h += "</ul>\n";
  }
  h += "<p class=\"dim\">Written by gpuwhy " + HtmlEscape(options.version) +
       " from a read-only look at the recording.</p>\n</body></html>\n";
  out->Write(h);

  HtmlReportSummary sum;
  sum.window = r.window;
  sum.findings = static_cast<int64_t>(r.findings.size());
  sum.buckets = static_cast<int64_t>(buckets.size());
  sum.bucket_s = bucket_s;
  return sum;
}

}  // namespace gw
