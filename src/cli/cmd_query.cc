#include <cstdio>

#include "cli/commands.h"
#include "store/reader.h"

namespace gw {

int RunQuery(const Args& args) {
  FlagSet flags("query", "gpuwhy query [flags] \"SQL\"",
                "Runs one read-only SQL statement against a recording and prints the rows.\n"
                "Tables and views: events (newest session), events_all, process_names,\n"
                "processes, sessions, system_snapshots, op_seconds, op_stats_seconds, strings,\n"
                "op_names. docs/schema.md documents every column. Writes, ATTACH, pragma\n"
                "changes and extension loading are refused.");
  AddDbFlag(flags);
  flags.Add({"json", FlagKind::kBool, "", "print rows as a JSON array of objects", ""})
      .Add({"csv", FlagKind::kBool, "", "print rows as CSV", ""})
      .Add({"limit", FlagKind::kInt, "N", "print at most N rows (0 = all)", "1000"})
      .Add({"timeout", FlagKind::kDuration, "DUR", "stop a statement running longer", "60s"});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (flags.positionals().size() != 1) {
    std::fprintf(stderr, "gpuwhy query: expected one SQL statement in quotes\n%s",
                 flags.HelpText().c_str());
    return kExitUsage;
  }
  if (flags.GetBool("json") && flags.GetBool("csv")) {
    std::fprintf(stderr, "gpuwhy query: choose one of --json and --csv\n");
    return kExitUsage;
  }
  auto reader = StoreReader::Open(DatabasePath(flags));
  if (!reader.ok()) return ReportError(reader.status());
  QueryOptions options;
  options.max_rows = flags.GetInt("limit", 1000);
  if (options.max_rows < 0) {
    std::fprintf(stderr, "gpuwhy query: --limit must be 0 or more\n");
    return kExitUsage;
  }
  options.timeout_ms = flags.GetDurationNs("timeout", 60'000'000'000) / 1'000'000;
  auto table = (*reader)->Query(flags.positionals()[0], options);
  if (!table.ok()) return ReportError(table.status());
  TableFormat format = flags.GetBool("json")  ? TableFormat::kJson
                       : flags.GetBool("csv") ? TableFormat::kCsv
                                              : TableFormat::kText;
  std::fputs(FormatTable(*table, format).c_str(), stdout);
  std::fflush(stdout);
  if (table->truncated) {
    std::fprintf(stderr, "gpuwhy query: output cut at %lld rows — use --limit N (0 = all)\n",
                 static_cast<long long>(table->limit));
  } else if (format == TableFormat::kText) {
    std::fprintf(stderr, "(%zu row%s)\n", table->rows.size(), table->rows.size() == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace gw
