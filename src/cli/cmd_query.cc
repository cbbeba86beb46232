#include <cstdio>

#include "cli/commands.h"
#include "store/reader.h"

namespace gw {

int RunQuery(const Args& args) {
  FlagSet flags("query", "gpuwhy query [flags] \"SQL\"",
                "Runs one read-only SQL statement against a recording and prints the rows.\n"
                "Tables and views: events (newest session), events_all, process_names,\n"
                "processes, sessions, system_snapshots, op_seconds, op_stats_seconds,\n"
                "op_latency, thread_rollups, stacks, stack_frames, gpu_devices, gpu_samples,\n"
                "gpu_process_samples, cgroup_cpu_samples, process_cgroups, strings, op_names.\n"
                "docs/schema.md documents every column. Writes, ATTACH, pragma\n"
                "changes, extension loading and SQL functions off gpuwhy's allow-list are\n"
                "refused; one value is at most 64 MiB. Rows are printed as they are read.");
  AddDbFlag(flags);
  AddClickHouseFlags(flags,
                     "with --clickhouse: run the SQL against this node's views (events, "
                     "process_names, events_all: its newest session), so the README's SQL runs "
                     "unchanged; without it, the gw_ tables of every node");
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
  QueryOptions options;
  options.max_rows = flags.GetInt("limit", 1000);
  if (options.max_rows < 0) {
    std::fprintf(stderr, "gpuwhy query: --limit must be 0 or more\n");
    return kExitUsage;
  }
  options.timeout_ms = flags.GetDurationNs("timeout", 60'000'000'000) / 1'000'000;
  TableFormat format = flags.GetBool("json")  ? TableFormat::kJson
                       : flags.GetBool("csv") ? TableFormat::kCsv
                                              : TableFormat::kText;
  if (flags.Has("clickhouse")) {
    return RunClickHouseQuery(flags, flags.positionals()[0], format, options.max_rows,
                              options.timeout_ms);
  }
  if (flags.Has("node")) {
    std::fprintf(stderr, "gpuwhy query: --node goes with --clickhouse URL\n");
    return kExitUsage;
  }
  auto reader = StoreReader::Open(DatabasePath(flags));
  if (!reader.ok()) return ReportError(reader.status());
  // Rows are printed as they are read (CSV and JSON row by row, text in aligned blocks of
  // kTextBlock rows), so memory stays flat with --limit 0.
  constexpr size_t kTextBlock = 10000;
  Table block;
  bool header_done = false;
  int64_t json_rows = 0;
  auto flush_text = [&] {
    std::string text = FormatTable(block, TableFormat::kText);
    if (header_done) {  // later blocks: no header and rule again
      for (int i = 0; i < 2; ++i) text.erase(0, text.find('\n') + 1);
    }
    header_done = true;
    std::fputs(text.c_str(), stdout);
    block.rows.clear();
  };
  StoreReader::LimitProcessHeap();
  auto end = (*reader)->QueryStream(
      flags.positionals()[0], {}, options,
      [&](const std::vector<std::string>& columns) {
        block.columns = columns;
        if (format == TableFormat::kCsv) {
          std::string line;
          for (size_t c = 0; c < columns.size(); ++c) line += (c ? "," : "") + CsvField(columns[c]);
          std::printf("%s\n", line.c_str());
        } else if (format == TableFormat::kJson) {
          std::fputs("[", stdout);
        }
      },
      [&](std::vector<Cell>&& row) {
        if (format == TableFormat::kText) {
          block.rows.push_back(std::move(row));
          if (block.rows.size() >= kTextBlock) flush_text();
          return;
        }
        block.rows.assign(1, std::move(row));
        std::string text = FormatTable(block, format);
        if (format == TableFormat::kCsv) {
          text.erase(0, text.find('\n') + 1);  // the header line
        } else {
          // "[\n {...}\n]\n" → " {...}"
          size_t open = text.find('{');
          size_t close = text.rfind('}');
          text = std::string(json_rows ? ",\n " : "\n ") + text.substr(open, close - open + 1);
          ++json_rows;
        }
        std::fputs(text.c_str(), stdout);
      });
  if (!end.ok()) {
    std::fflush(stdout);
    return ReportError(end.status());
  }
  if (format == TableFormat::kText && (!block.rows.empty() || !header_done)) flush_text();
  if (format == TableFormat::kJson) std::fputs(json_rows ? "\n]\n" : "]\n", stdout);
  std::fflush(stdout);
  if (end->truncated && flags.Has("limit")) {
    // The user asked for at most N rows: say what was shown, not that it was cut.
    std::fprintf(stderr, "(first %lld rows: --limit %lld)\n", static_cast<long long>(end->rows),
                 static_cast<long long>(options.max_rows));
  } else if (end->truncated) {
    std::fprintf(stderr, "gpuwhy query: output cut at %lld rows — use --limit N (0 = all)\n",
                 static_cast<long long>(options.max_rows));
  } else if (format == TableFormat::kText) {
    std::fprintf(stderr, "(%lld row%s)\n", static_cast<long long>(end->rows),
                 end->rows == 1 ? "" : "s");
  }
  return kExitOk;
}

}  // namespace gw
