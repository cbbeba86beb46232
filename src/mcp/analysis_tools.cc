#include "mcp/analysis_tools.h"

#include "mcp/tool_args.h"
#include "store/reader.h"
#include "store/window_rows.h"

#if GW_HAVE_ANALYSIS
#include "analysis/callers.h"
#include "analysis/cpu_profile.h"
#include "analysis/explain.h"
#include "analysis/loader.h"
#endif

namespace gw::mcp {

namespace {

Json SideSchema(const char* which) {
  Json p = Json::object();
  p[std::string("session_") + which] = Json{
      {"type", "integer"},
      {"minimum", 0},
      {"description",
       std::string("Session of side ") + which +
           "; 0 = the newest in its file. Default: with one file, " +
           (which[0] == 'a' ? "the second-newest session (before)" : "the newest session (after)") +
           "; with two files, the newest of each."}};
  p[std::string("db_") + which] =
      Json{{"type", "string"},
           {"description",
            std::string("Database file of side ") + which + " (default: the server's database)."}};
  return p;
}

#if GW_HAVE_ANALYSIS

StatusOr<ToolOutput> RunExplain(ReaderSource& source, const Json& json_args) {
  std::vector<std::string> known = WindowArgNames();
  known.push_back("pid");
  ASSIGN_OR_RETURN(ToolArgs args, ToolArgs::Create("explain", json_args, known));
  std::optional<int64_t> pid;
  RETURN_IF_ERROR(args.Int("pid", 1, INT32_MAX, &pid));
  ExplainOptions options;
  // The same window as `gpuwhy explain` for the same arguments (store/window.h).
  ASSIGN_OR_RETURN(options.window, WindowRequestFromArgs(args, kDefaultSinceNs));
  ASSIGN_OR_RETURN(StoreReader * reader, source.Get());
  options.pid = pid ? static_cast<int32_t>(*pid) : 0;
  options.evidence = true;
  ASSIGN_OR_RETURN(Report report, Explain(*reader, options));
  ToolOutput out;
  out.structured = Json(ReportJson(report));
  const LongWindowSummary& tier = report.long_window;
  std::string scope = tier.tier == "raw"
                          ? report.window.label
                          : tier.label + ", answered from per-thread rollups" +
                                (tier.has_incident ? " with the causal chains of its " +
                                                         report.window.label
                                                   : " only (no raw rows left)");
  out.summary = std::to_string(report.findings.size()) + " finding" +
                (report.findings.size() == 1 ? "" : "s") + " for " + scope + " of session " +
                std::to_string(report.window.session) +
                (report.findings.empty() ? "." : "; the most severe first.") +
                " Each finding's evidence SQL can be re-run with query_sql.";
  return out;
}

// The on-CPU profile: one thread's sites (tid), or explain's sections (the main thread, the CUDA
// helper threads, the GIL holder, each when it ran a material share of the job's loop).
StatusOr<ToolOutput> RunCpuProfile(ReaderSource& source, const Json& json_args) {
  std::vector<std::string> known = WindowArgNames();
  known.push_back("tid");
  ASSIGN_OR_RETURN(ToolArgs args, ToolArgs::Create("cpu_profile", json_args, known));
  std::optional<int64_t> tid;
  RETURN_IF_ERROR(args.Int("tid", 1, INT32_MAX, &tid));
  ASSIGN_OR_RETURN(WindowRequest window, WindowRequestFromArgs(args, kDefaultSinceNs));
  ASSIGN_OR_RETURN(StoreReader * reader, source.Get());
  Report report;
  if (tid) {
    ASSIGN_OR_RETURN(WindowData w, LoadWindow(*reader, window));
    if (w.profile_hz <= 0) {
      return FailedPrecondition("session " + std::to_string(w.session) +
                                " has no on-CPU profile (recorded with --profile-hz 0)");
    }
    std::optional<CpuProfileSection> p =
        ProfileThreads(w, {static_cast<int32_t>(*tid)}, w.from, w.to);
    if (!p) {
      return NotFound("thread " + std::to_string(*tid) + " has no on-CPU samples in " + w.label +
                      " of session " + std::to_string(w.session));
    }
    p->role = "thread";
    p->title = "thread " + std::to_string(*tid);
    report.window.label = w.label;
    report.cpu_profiles.push_back(std::move(*p));
    FillSourceLines(&report);
  } else {
    ExplainOptions options;
    options.window = window;
    ASSIGN_OR_RETURN(report, Explain(*reader, options));
  }
  ToolOutput out;
  Json sections = Json(ReportJson(report))["cpu_profiles"];
  out.structured = Json{{"window", report.window.label}, {"sections", sections}};
  out.summary = std::to_string(report.cpu_profiles.size()) + " on-CPU profile section" +
                (report.cpu_profiles.size() == 1 ? "" : "s") + " for " + report.window.label +
                (report.cpu_profiles.empty()
                     ? ": no group of the job's threads was on the CPU long enough to profile "
                       "(or the recording has no profile); pass tid for one thread."
                     : "; each lists source lines by share of samples.");
  return out;
}

StatusOr<ToolOutput> RunTopKernels(ReaderSource& source, const Json& json_args) {
  std::vector<std::string> known = WindowArgNames();
  known.push_back("pid");
  known.push_back("limit");
  ASSIGN_OR_RETURN(ToolArgs args, ToolArgs::Create("top_kernels", json_args, known));
  std::optional<int64_t> pid, limit;
  RETURN_IF_ERROR(args.Int("pid", 1, INT32_MAX, &pid));
  RETURN_IF_ERROR(args.Int("limit", 1, 20, &limit));
  ASSIGN_OR_RETURN(StoreReader * reader, source.Get());
  ASSIGN_OR_RETURN(SessionWindow w, ResolveToolWindow(*reader, args));
  ASSIGN_OR_RETURN(KernelLaunches launches,
                   ReadKernelLaunches(*reader, w, 5000, pid ? static_cast<int32_t>(*pid) : 0));
  KernelSummary k = SummarizeKernels(launches.rows, launches.launches_once, launches.estimates,
                                     static_cast<double>(w.end_ns - w.begin_ns) / 1e9);
  if (limit && k.top.size() > static_cast<size_t>(*limit)) k.top.resize(*limit);
  ToolOutput out;
  Json top = Json::array();
  for (const KernelStat& s : k.top) {
    top.push_back(Json{{"name", s.name},
                       {"pid", s.pid},
                       {"launches", s.launches},
                       {"per_s", s.per_s},
                       {"share_pct", s.share_pct}});
  }
  out.structured = Json{{"window", WindowToJson(w)},
                        {"launches", k.launches},
                        {"counted", k.counted},
                        {"estimated", k.estimated},
                        {"error", k.error},
                        {"launch_figure", LaunchFigure(k)},
                        {"kernels", k.kernels},
                        {"unnamed_launches", k.unnamed},
                        {"graph_kernels", k.graph_kernels},
                        {"launch_duty", k.launch_duty},
                        {"top", std::move(top)}};
  out.summary = LaunchFigure(k) + " kernel launches of " +
                std::to_string(k.kernels) + " kernels in " + w.label + " of session " +
                std::to_string(w.session) + (k.unnamed > 0 ? "; " + std::to_string(k.unnamed) +
                                                                 " launches unnamed (fn@0x…)"
                                                           : "") +
                ".";
  return out;
}

StatusOr<ToolOutput> RunDiff(ReaderSource& source, const Json& json_args) {
  ASSIGN_OR_RETURN(ToolArgs args,
                   ToolArgs::Create("diff", json_args, {"session_a", "session_b", "db_a", "db_b"}));
  std::optional<int64_t> session_a, session_b;
  std::optional<std::string> db_a, db_b;
  RETURN_IF_ERROR(args.Int("session_a", 0, INT64_MAX, &session_a));
  RETURN_IF_ERROR(args.Int("session_b", 0, INT64_MAX, &session_b));
  RETURN_IF_ERROR(args.String("db_a", 4096, &db_a));
  RETURN_IF_ERROR(args.String("db_b", 4096, &db_b));
  ASSIGN_OR_RETURN(StoreReader * own, source.Get());
  // Other files are opened read-only through StoreReader like the server's own, which refuses
  // anything that is not a gpuwhy database.
  std::unique_ptr<StoreReader> file_a, file_b;
  StoreReader* a = own;
  StoreReader* b = own;
  if (db_a && *db_a != own->path()) {
    RETURN_IF_ERROR(source.CheckMayOpen("diff: db_a", *db_a));
    ASSIGN_OR_RETURN(file_a, StoreReader::Open(*db_a));
    a = file_a.get();
  }
  if (db_b && *db_b != own->path()) {
    RETURN_IF_ERROR(source.CheckMayOpen("diff: db_b", *db_b));
    ASSIGN_OR_RETURN(file_b, StoreReader::Open(*db_b));
    b = file_b.get();
  }
  if (!session_a && !session_b && a == b) {
    // One file: compare its two newest sessions, before → after.
    ASSIGN_OR_RETURN(Table ids, a->Query("SELECT id FROM sessions ORDER BY id DESC LIMIT 2",
                                         QueryOptions{2, 5000}));
    if (ids.rows.size() < 2) {
      return InvalidArgument("diff: " + a->path() +
                             " holds fewer than two sessions — pass "
                             "db_a/db_b (two files) or session_a/session_b");
    }
    session_b = std::get<int64_t>(ids.rows[0][0]);
    session_a = std::get<int64_t>(ids.rows[1][0]);
  }
  ASSIGN_OR_RETURN(int64_t sa, ResolveSession(*a, session_a.value_or(0)));
  ASSIGN_OR_RETURN(int64_t sb, ResolveSession(*b, session_b.value_or(0)));
  ASSIGN_OR_RETURN(DiffReport diff, Diff(*a, sa, *b, sb));
  ToolOutput out;
  out.structured = Json(DiffJson(diff));
  out.summary = "Before: " + diff.label_a + "; after: " + diff.label_b + "; " +
                std::to_string(diff.rows.size()) + " metrics compared.";
  return out;
}

#endif  // GW_HAVE_ANALYSIS

#if !GW_HAVE_ANALYSIS
StatusOr<ToolOutput> NotAvailable(const char* tool) {
  return FailedPrecondition(std::string(tool) +
                            " is not available in this build (gpuwhy was built without "
                            "src/analysis) — hint: use query_sql, op_stats, top_contention and "
                            "timeline instead");
}
#endif

}  // namespace

bool AnalysisAvailable() {
#if GW_HAVE_ANALYSIS
  return true;
#else
  return false;
#endif
}

void AddAnalysisTools(McpServer& server, ReaderSource& source, const StoreToolLimits&) {
  ReaderSource* src = &source;
  (void)src;

  ToolSpec explain;
  explain.name = "explain";
  explain.title = "Explain why the GPU job is slow";
  explain.description =
      "gpuwhy's causal analysis of a time range: findings ranked by severity, each with its "
      "root cause, effect, contributing factors, concrete fixes, the metrics it rests on and "
      "evidence SQL you can re-run with query_sql; plus where the GPU-feeding threads' time "
      "went (running, run-queue wait, I/O, page faults, memcpy, sync), the system context and "
      "the top processes. Start an investigation here. Default range: the last 120 s; pid "
      "narrows it to one process and its tracked children. A range of more than 1,000,000 raw "
      "rows (an hour or a day) is answered from per-thread rollups, with the causal chains of "
      "its incident (the stretch in which the job's main thread lost the most time): "
      "window_tier says how, so ask again with from_s/to_s to look closer elsewhere.";
  Json props = WindowSchemaProperties();
  props["since_s"]["description"] =
      "Analyse the last N seconds before to_s, or before the newest event (default 120).";
  props["pid"] = Json{{"type", "integer"},
                      {"minimum", 1},
                      {"description", "Only this process and its tracked children."}};
  explain.input_schema =
      Json{{"type", "object"}, {"properties", std::move(props)}, {"additionalProperties", false}};
#if GW_HAVE_ANALYSIS
  explain.run = [src](const Json& a) { return RunExplain(*src, a); };
#else
  explain.run = [](const Json&) { return NotAvailable("explain"); };
#endif
  server.AddTool(std::move(explain));

  ToolSpec kernels;
  kernels.name = "top_kernels";
  kernels.title = "Most launched GPU kernels";
  kernels.description =
      "Kernel launches per kernel over a time range, most launched first: demangled name, "
      "process, launches, launches per second and share of all launches (every launch is "
      "counted in BPF, not sampled). Names come from the job's registrations and lookups, or, "
      "when trace attached to a running job, from the CUDA driver's own function objects; "
      "kernels that could not be named show as fn@0x<handle>. Filter by pid; limit (1-20, "
      "default 20).";
  Json kernel_props = WindowSchemaProperties();
  kernel_props["pid"] = Json{{"type", "integer"}, {"minimum", 1}, {"description", "Only this process."}};
  kernel_props["limit"] = Json{
      {"type", "integer"}, {"minimum", 1}, {"maximum", 20}, {"description", "Kernels to list."}};
  kernels.input_schema = Json{
      {"type", "object"}, {"properties", std::move(kernel_props)}, {"additionalProperties", false}};
#if GW_HAVE_ANALYSIS
  kernels.run = [src](const Json& a) { return RunTopKernels(*src, a); };
#else
  kernels.run = [](const Json&) { return NotAvailable("top_kernels"); };
#endif
  server.AddTool(std::move(kernels));

  ToolSpec profile;
  profile.name = "cpu_profile";
  profile.title = "Where the job's threads spent their CPU";
  profile.description =
      "The on-CPU profile `gpuwhy trace` records (unless --profile-hz 0): the job's threads' "
      "stacks sampled on the CPU, grouped by source line (Python file:line and function, "
      "library code folded under it as `via`, native frames where there is no Python), with "
      "each line's share of samples and CPU seconds. Without tid: the main thread, the CUDA "
      "helper threads and the thread holding the GIL over the job's loop (a launched job's "
      "start-up left out, as in explain), each when it was on the CPU for a material share of "
      "it. With tid: that thread, over the whole range.";
  Json profile_props = WindowSchemaProperties();
  profile_props["since_s"]["description"] =
      "Profile the last N seconds before to_s, or before the newest event (default 120).";
  profile_props["tid"] =
      Json{{"type", "integer"}, {"minimum", 1}, {"description", "Only this thread."}};
  profile.input_schema = Json{
      {"type", "object"}, {"properties", std::move(profile_props)}, {"additionalProperties", false}};
#if GW_HAVE_ANALYSIS
  profile.run = [src](const Json& a) { return RunCpuProfile(*src, a); };
#else
  profile.run = [](const Json&) { return NotAvailable("cpu_profile"); };
#endif
  server.AddTool(std::move(profile));

  ToolSpec diff;
  diff.name = "diff";
  diff.title = "Compare two recordings (before/after)";
  diff.description =
      "Before/after comparison of two whole sessions — two sessions of the server's database, "
      "or sessions of two database files — with per-second rates so runs of different lengths "
      "compare: context switches, off-CPU and run-queue time, sync latency percentiles, "
      "throughput, each with change and a better/worse verdict, plus both sides' findings. "
      "With no arguments it compares the two newest sessions of the server's database.";
  Json diff_props = SideSchema("a");
  Json side_b = SideSchema("b");  // named: items() must not outlive a temporary
  for (auto& [k, v] : side_b.items()) diff_props[k] = v;
  diff.input_schema = Json{
      {"type", "object"}, {"properties", std::move(diff_props)}, {"additionalProperties", false}};
#if GW_HAVE_ANALYSIS
  diff.run = [src](const Json& a) { return RunDiff(*src, a); };
#else
  diff.run = [](const Json&) { return NotAvailable("diff"); };
#endif
  server.AddTool(std::move(diff));
}

}  // namespace gw::mcp
