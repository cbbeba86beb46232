#include <cstdio>

#include "analysis/explain.h"
#include "base/table.h"
#include "base/text.h"
#include "cli/commands.h"
#include "store/reader.h"

namespace gw {

void AddExplainWindowFlags(FlagSet& flags, bool output_flags) {
  flags.Add({"since", FlagKind::kDuration, "DUR",
             "window ending at the newest event; without --since, --from or --to: the last "
             "120s of an attached trace, the whole job of a `trace -- CMD` session",
             "120s or the whole job"})
      .Add({"from", FlagKind::kDuration, "DUR",
            "window start, as time since the session started (e.g. 30s)", ""})
      .Add({"to", FlagKind::kDuration, "DUR", "window end, as time since the session started",
            "newest event"})
      .Add({"session", FlagKind::kInt, "ID", "session to explain (0 = newest)", "0"})
      .Add({"pid", FlagKind::kInt, "PID",
            "explain this process and its tracked children (0 = every tracked process)", "0"});
  if (!output_flags) return;
  flags.Add({"evidence", FlagKind::kBool, "",
            "print, for each finding, SQL that checks its numbers with `gpuwhy query`", ""})
      .Add({"json", FlagKind::kBool, "", "print the report as JSON", ""})
      .Add({"raw", FlagKind::kBool, "",
            "read every raw row of the window however long it is (slower, more memory); "
            "without it a window of more than 1,000,000 rows is answered from its per-thread "
            "rollups, with raw rows for its incident only",
            ""});
}

StatusOr<ExplainOptions> ExplainOptionsFromFlags(const FlagSet& flags) {
  ExplainOptions o;
  // The flags map one to one onto the shared window request (store/window.h).
  if (flags.Has("since")) o.window.since_ns = flags.GetDurationNs("since");
  if (flags.Has("from")) o.window.from_ns = flags.GetDurationNs("from");
  if (flags.Has("to")) o.window.to_ns = flags.GetDurationNs("to");
  o.window.session = flags.GetInt("session", 0);
  RETURN_IF_ERROR(ValidateWindowRequest(o.window));
  int64_t pid = flags.GetInt("pid", 0);
  if (pid < 0 || pid > 0x7fffffff) return InvalidArgument("--pid must be a process id");
  o.pid = static_cast<int32_t>(pid);
  o.evidence = flags.GetBool("evidence");
  if (flags.GetBool("raw")) o.max_raw_rows = 0;
  return o;
}

int RunExplain(const Args& args) {
  FlagSet flags("explain", "gpuwhy explain [flags]",
                "Explains why the GPU job in a recording is slow: causal chains (root cause,\n"
                "effect, evidence, fix) and where the GPU-feeding threads' time went. Reads\n"
                "the database read-only; needs no privilege.");
  AddDbFlag(flags);
  AddExplainWindowFlags(flags);
  AddClickHouseFlags(flags, "with --clickhouse: the node to explain (its newest session, or "
                            "--session ID of that node)");
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gpuwhy explain: unexpected argument '%s'\n%s",
                 flags.positionals()[0].c_str(), flags.HelpText().c_str());
    return kExitUsage;
  }
  StatusOr<ExplainOptions> options = ExplainOptionsFromFlags(flags);
  if (!options.ok()) return ReportError(options.status());
  std::string path = DatabasePath(flags);
  std::optional<ImportedNode> imported;
  if (flags.Has("clickhouse") && options->evidence) {
    // Evidence is SQLite SQL for a file the user has; the replayed file is gone after explain.
    return ReportError(InvalidArgument(
        "--evidence prints SQL for a local recording; with --clickhouse, check numbers with "
        "`gpuwhy query --clickhouse URL --node NAME \"SQL\"` (docs/clickhouse.md)"));
  }
  if (flags.Has("clickhouse")) {
    // The node's session is replayed into a scratch file and explained like a local one.
    // Without --since/--from/--to, the whole session is read (a job session's window is all
    // of it); with --since, its last since plus a minute.
    StatusOr<ImportedNode> node = ImportClickHouseNode(flags, options->window.session,
                                                       options->window.since_ns);
    if (!node.ok()) return ReportError(node.status());
    imported.emplace(std::move(*node));
    path = imported->db_path;
    options->window.session = 0;  // the scratch file holds that one session
    std::fprintf(stderr, "gpuwhy explain: node %s, session %lld from %s (%s events read)\n",
                 TerminalSafe(imported->result.session.node).c_str(),
                 static_cast<long long>(imported->result.session.id),
                 imported->source.c_str(),
                 WithThousands(imported->result.events).c_str());
  } else if (flags.Has("node")) {
    return ReportError(InvalidArgument("--node goes with --clickhouse URL"));
  }
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, *options);
  if (!report.ok()) return ReportError(report.status());
  std::string text = flags.GetBool("json") ? ReportToJson(*report) : ReportToText(*report);
  std::fputs(text.c_str(), stdout);
  return kExitOk;
}

}  // namespace gw
