// The fleet commands over ClickHouse (`trace --sink` fills it): `gpuwhy fleet`, and the
// --clickhouse forms of `query` and `explain`.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/explain.h"
#include "analysis/format.h"
#include "base/table.h"
#include "base/text.h"
#include "cli/commands.h"
#include "clickhouse/client.h"
#include "clickhouse/import.h"
#include "clickhouse/schema.h"
#include "store/reader.h"
#include "store/window.h"

namespace gw {

void AddClickHouseFlags(FlagSet& flags, const char* node_help) {
  flags.Add({"clickhouse", FlagKind::kString, "URL",
             "read from ClickHouse (clickhouse://[USER[:PASS]@]HOST[:PORT][/DB]) instead of a "
             "local file: what `trace --sink` sent",
             ""});
  flags.Add({"node", FlagKind::kString, "NAME", node_help, ""});
}

StatusOr<ImportedNode> ImportClickHouseNode(const FlagSet& flags, int64_t session,
                                            std::optional<int64_t> since_ns) {
  ASSIGN_OR_RETURN(ClickHouseUrl url, ParseClickHouseUrl(flags.GetString("clickhouse", "")));
  std::string node = flags.GetString("node", "");
  if (node.empty()) {
    return InvalidArgument("--clickhouse needs --node NAME (the node to read; `gpuwhy fleet "
                           "--clickhouse URL` lists them)");
  }
  RETURN_IF_ERROR(ValidateNodeName(node));
  ClickHouseClient client(url);
  ASSIGN_OR_RETURN(ScratchDir dir, ScratchDir::Create());
  ImportedNode out{std::move(dir), "", {}, url.Display()};
  out.db_path = out.dir.path() + "/" + node + ".db";
  ImportRequest request;
  request.node = node;
  request.session = session;
  request.since_ns = since_ns;
  ASSIGN_OR_RETURN(out.result, ImportRemoteSession(client, request, out.db_path));
  return out;
}

namespace {

// ClickHouse's type names → how a cell is kept (numbers stay numbers for --json and text).
Cell TypedCell(const std::string& type, const std::string& value, bool null) {
  if (null) return std::monostate{};
  std::string t = type;
  if (t.rfind("Nullable(", 0) == 0) t = t.substr(9, t.size() - 10);
  if (t.rfind("Int", 0) == 0 || t.rfind("UInt", 0) == 0) {
    return static_cast<int64_t>(std::strtoll(value.c_str(), nullptr, 10));
  }
  if (t.rfind("Float", 0) == 0) return std::strtod(value.c_str(), nullptr);
  return value;
}

}  // namespace

int RunClickHouseQuery(const FlagSet& flags, const std::string& sql_in, TableFormat format,
                       int64_t limit, int64_t timeout_ms) {
  StatusOr<ClickHouseUrl> url = ParseClickHouseUrl(flags.GetString("clickhouse", ""));
  if (!url.ok()) return ReportError(url.status().WithContext("--clickhouse"));
  std::string database = url->database;
  if (std::string node = flags.GetString("node", ""); !node.empty()) {
    if (Status st = ValidateNodeName(node); !st.ok()) return ReportError(st);
    database = NodeViewDatabase(*url, node);  // its events / process_names / events_all views
  }
  std::string sql = sql_in;
  while (!sql.empty() && (std::isspace(static_cast<unsigned char>(sql.back())) || sql.back() == ';')) {
    sql.pop_back();
  }
  std::string settings = "readonly=1";
  if (limit > 0) {
    settings += "&max_result_rows=" + std::to_string(limit) + "&result_overflow_mode=break";
  }
  ClickHouseClient client(*url);
  StatusOr<std::string> body =
      client.Query(sql + " FORMAT TabSeparatedWithNamesAndTypes", database, timeout_ms,
                   kMaxQueryResponseBytes, settings);
  if (!body.ok()) return ReportError(body.status());
  std::vector<TsvRow> rows = ParseTsv(*body);
  Table table;
  if (rows.size() >= 2) {
    table.columns = rows[0].fields;
    const std::vector<std::string>& types = rows[1].fields;
    for (size_t r = 2; r < rows.size(); ++r) {
      std::vector<Cell> cells;
      for (size_t c = 0; c < rows[r].fields.size(); ++c) {
        cells.push_back(TypedCell(c < types.size() ? types[c] : "", rows[r].fields[c],
                                  rows[r].null[c]));
      }
      table.rows.push_back(std::move(cells));
    }
  }
  std::string text = FormatTable(table, format);
  if (!text.empty() && text.back() != '\n') text += '\n';
  std::fputs(text.c_str(), stdout);
  if (format == TableFormat::kText) {
    std::fprintf(stderr, "(%zu row%s, ClickHouse %s)\n", table.rows.size(),
                 table.rows.size() == 1 ? "" : "s", database.c_str());
  }
  return kExitOk;
}

int RunFleet(const Args& args) {
  FlagSet flags("fleet", "gpuwhy fleet --clickhouse URL [flags]",
                "Ranks the nodes that sent recordings to ClickHouse (trace --sink) by the\n"
                "GPU-feed time their top finding explains, with each node's top finding. Each\n"
                "node's newest session with events in the window is explained as `explain`\n"
                "would explain it locally (over its last --since).");
  AddClickHouseFlags(flags, "only this node");
  flags
      .Add({"since", FlagKind::kDuration, "DUR",
            "nodes with events in the last DUR of wall-clock time; each is explained over its "
            "own last DUR",
            "10m"})
      .Add({"json", FlagKind::kBool, "", "print the ranking as JSON", ""})
      .Add({"nccl", FlagKind::kBool, "",
            "also line up the ranks of every NCCL communicator across the nodes (clocks aligned "
            "on collective completion) and name the straggler rank, its node and its cause "
            "(docs/nccl.md)",
            ""});
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  if (!flags.positionals().empty()) {
    std::fprintf(stderr, "gpuwhy fleet: unexpected argument '%s'\n%s",
                 flags.positionals()[0].c_str(), flags.HelpText().c_str());
    return kExitUsage;
  }
  if (!flags.Has("clickhouse")) {
    return ReportError(InvalidArgument("fleet reads ClickHouse: pass --clickhouse URL"));
  }
  StatusOr<ClickHouseUrl> url = ParseClickHouseUrl(flags.GetString("clickhouse", ""));
  if (!url.ok()) return ReportError(url.status().WithContext("--clickhouse"));
  std::string only = flags.GetString("node", "");
  if (!only.empty()) {
    if (Status st = ValidateNodeName(only); !st.ok()) return ReportError(st);
  }
  int64_t since_ns = flags.GetDurationNs("since", 600'000'000'000);
  if (since_ns <= 0) return ReportError(InvalidArgument("--since must be more than 0"));
  ClickHouseClient client(*url);
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  int64_t now_ns = static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  StatusOr<std::vector<RemoteSession>> sessions =
      ListRemoteSessions(client, only, now_ns - since_ns);
  if (!sessions.ok()) return ReportError(sessions.status());

  struct NodeRow {
    RemoteSession session;
    std::optional<Finding> top;
    size_t findings = 0;
    std::vector<ContainerInfo> containers;  // the job's containers and pods (docs/containers.md)
    std::string error;
    std::string db;  // the imported recording, kept for --nccl
  };
  const bool nccl = flags.GetBool("nccl");
  std::vector<ScratchDir> kept;  // the imported recordings' folders (--nccl)
  std::vector<NodeRow> nodes;
  for (const RemoteSession& s : *sessions) {
    bool seen = false;
    for (const NodeRow& n : nodes) seen = seen || n.session.node == s.node;
    if (seen) continue;  // newest session per node only (the list is newest first)
    NodeRow row;
    row.session = s;
    std::fprintf(stderr, "gpuwhy fleet: explaining %s (session %lld, %s events)…\n",
                 TerminalSafe(s.node).c_str(), static_cast<long long>(s.id),
                 WithThousands(s.events).c_str());
    StatusOr<ScratchDir> dir = ScratchDir::Create();
    if (!dir.ok()) return ReportError(dir.status());
    std::string path = dir->path() + "/node.db";
    StatusOr<ImportResult> imported = ImportRemoteSession(client, s, since_ns, path);
    if (!imported.ok()) {
      row.error = imported.status().message();
      nodes.push_back(std::move(row));
      continue;
    }
    StatusOr<std::unique_ptr<StoreReader>> reader = StoreReader::Open(path);
    if (!reader.ok()) return ReportError(reader.status());
    ExplainOptions options;
    options.window.since_ns = since_ns;
    StatusOr<Report> report = Explain(**reader, options);
    if (nccl) {
      row.db = path;
      kept.push_back(std::move(*dir));
    }
    if (!report.ok()) {
      row.error = report.status().message();
    } else {
      row.findings = report->findings.size();
      row.containers = report->containers;
      // Most severe first; LOW findings are not a node's cause.
      if (!report->findings.empty() && report->findings[0].severity != Severity::kLow) {
        row.top = report->findings[0];
      }
    }
    nodes.push_back(std::move(row));
  }
  std::stable_sort(nodes.begin(), nodes.end(), [](const NodeRow& a, const NodeRow& b) {
    double la = a.top ? a.top->lost_s : -1;
    double lb = b.top ? b.top->lost_s : -1;
    return la > lb;
  });

  nlohmann::json nccl_json = nlohmann::json::array();
  std::string nccl_text;
  if (nccl) {
    std::vector<NcclNodeRows> rows;
    std::vector<const NodeRow*> of;
    for (const NodeRow& n : nodes) {
      if (n.db.empty() || !n.error.empty()) continue;
      StatusOr<std::unique_ptr<StoreReader>> reader = StoreReader::Open(n.db);
      if (!reader.ok()) return ReportError(reader.status());
      WindowRequest window;
      window.since_ns = since_ns;
      StatusOr<NcclNodeRows> r =
          LoadNcclNode(**reader, window, n.session.node, n.session.wall_start_ns);
      if (!r.ok()) return ReportError(r.status());
      if (r->calls.empty()) continue;
      rows.push_back(std::move(*r));
      of.push_back(&n);
    }
    NcclFleet fleet = AnalyzeNcclAcrossNodes(rows);
    for (const NcclCommunicator& c : fleet.job.comms) {
      std::set<int32_t> node_set;
      for (const NcclRankStats& r : c.ranks) node_set.insert(r.node);
      nlohmann::json j = {{"comm", c.comm},
                          {"ranks", c.ranks.size()},
                          {"nodes", node_set.size()},
                          {"collectives", c.collectives},
                          {"op", c.op},
                          {"others_waited_s", c.others_waited_s}};
      auto node_name = [&](int32_t k) {
        return k >= 0 && static_cast<size_t>(k) < rows.size() ? rows[static_cast<size_t>(k)].node
                                                              : std::string("?");
      };
      nccl_text += Fmt("NCCL communicator %s: %zu ranks on %zu nodes, %lld complete collectives\n",
                       c.comm.c_str(), c.ranks.size(), node_set.size(),
                       static_cast<long long>(c.collectives));
      if (c.straggler >= 0) {
        const NcclRankStats& s = c.ranks[static_cast<size_t>(c.straggler)];
        // Its cause: the straggler's node explained with that rank as the job.
        std::string rule, cause;
        const NodeRow* n = of[static_cast<size_t>(s.node)];
        StatusOr<std::unique_ptr<StoreReader>> reader = StoreReader::Open(n->db);
        if (!reader.ok()) return ReportError(reader.status());
        ExplainOptions options;
        options.window.since_ns = since_ns;
        options.pid = s.pid;
        if (StatusOr<Report> report = Explain(**reader, options); report.ok()) {
          if (const Finding* top = TopHostCause(*report)) rule = top->rule, cause = top->cause;
        }
        j["straggler"] = {{"node", node_name(s.node)},
                          {"rank", s.rank},
                          {"pid", s.pid},
                          {"late_mean_ms", static_cast<double>(s.late_mean_ns) / 1e6},
                          {"late_median_ms", static_cast<double>(s.late_median_ns) / 1e6},
                          {"last", s.last},
                          {"rule", rule},
                          {"cause", cause}};
        nccl_text +=
            Fmt("  straggler: node %s rank %lld (pid %d) enqueued %s %.1f ms late on "
                "average (median %.1f ms), last in %lld of %lld: %s\n",
                TerminalSafe(node_name(s.node)).c_str(), static_cast<long long>(s.rank), s.pid,
                c.op.c_str(), static_cast<double>(s.late_mean_ns) / 1e6,
                static_cast<double>(s.late_median_ns) / 1e6, static_cast<long long>(s.last),
                static_cast<long long>(c.collectives),
                rule.empty() ? "no host-side finding on that rank"
                             : TerminalSafe(cause + " (" + rule + ")").c_str());
        std::string waited;
        for (const NcclRankStats& r : c.ranks) {
          if (&r == &s) continue;
          waited += Fmt("%snode %s rank %lld %.1f s", waited.empty() ? "" : ", ",
                        TerminalSafe(node_name(r.node)).c_str(), static_cast<long long>(r.rank),
                        r.waited_s);
        }
        nccl_text += Fmt("  the other ranks waited %.1f s in their syncs for it (%s)\n",
                         c.others_waited_s, waited.c_str());
      } else {
        j["straggler"] = nullptr;
        nccl_text += "  no straggler rank\n";
      }
      nlohmann::json ranks = nlohmann::json::array();
      for (const NcclRankStats& r : c.ranks) {
        ranks.push_back({{"node", node_name(r.node)},
                         {"rank", r.rank},
                         {"pid", r.pid},
                         {"late_median_ms", static_cast<double>(r.late_median_ns) / 1e6},
                         {"waited_s", r.waited_s}});
      }
      j["rank_stats"] = ranks;
      nccl_json.push_back(j);
    }
    nlohmann::json clocks = nlohmann::json::array();
    for (size_t k = 0; k < fleet.clocks.size(); ++k) {
      const NcclNodeClock& c = fleet.clocks[k];
      clocks.push_back({{"node", c.node},
                        {"offset_ms", static_cast<double>(c.offset_ns) / 1e6},
                        {"error_ms", static_cast<double>(c.error_ns) / 1e6},
                        {"collectives", c.collectives}});
      if (k == 0) continue;
      nccl_text +=
          Fmt("  clock of node %s: %+.3f ms against node %s (± %.3f ms, median "
              "absolute deviation over %lld collectives seen complete on both)\n",
              TerminalSafe(c.node).c_str(), static_cast<double>(c.offset_ns) / 1e6,
              TerminalSafe(fleet.clocks[0].node).c_str(), static_cast<double>(c.error_ns) / 1e6,
              static_cast<long long>(c.collectives));
    }
    if (!nccl_json.empty()) nccl_json.back()["clocks"] = clocks;
    if (fleet.job.comms.empty()) {
      nccl_text = "NCCL: no communicator with at least two ranks initialised in the window\n";
    }
  }

  if (flags.GetBool("json")) {
    nlohmann::json out = nlohmann::json::array();
    for (const NodeRow& n : nodes) {
      nlohmann::json j = {{"node", n.session.node},
                          {"session", n.session.id},
                          {"events", n.session.events},
                          {"findings", n.findings}};
      if (n.top) {
        j["top"] = {{"rule", n.top->rule},
                    {"severity", SeverityName(n.top->severity)},
                    {"cause", n.top->cause},
                    {"effect", n.top->effect},
                    {"lost_s", n.top->lost_s}};
      } else {
        j["top"] = nullptr;
      }
      if (!n.error.empty()) j["error"] = n.error;
      if (!n.containers.empty()) {
        nlohmann::json cs = nlohmann::json::array();
        for (const ContainerInfo& c : n.containers) {
          cs.push_back({{"runtime", c.runtime},
                        {"container_id", c.container_id},
                        {"pod_uid", c.pod_uid},
                        {"pod_name", c.pod_name},
                        {"pod_namespace", c.pod_namespace},
                        {"processes", c.pids.size()}});
        }
        j["containers"] = cs;
      }
      out.push_back(j);
    }
    if (nccl) out = {{"nodes", out}, {"nccl", nccl_json}};  // --nccl: an object
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  Table table;
  table.columns = {"rank", "node", "lost s", "top finding", "session", "events"};
  int rank = 0;
  for (const NodeRow& n : nodes) {
    std::string what = !n.error.empty() ? "error: " + n.error
                       : n.top ? "[" + std::string(SeverityName(n.top->severity)) + "] " +
                                     n.top->cause + " → " + n.top->effect
                               : "nothing above LOW";
    // The job's container (or pod), as explain names it: which job on the node this is.
    if (!n.containers.empty()) {
      const ContainerInfo& c = n.containers[0];
      what += !c.container_id.empty() ? " (container " + c.container_id.substr(0, 12) + ")"
                                      : " (pod " + c.pod_uid + ")";
    }
    what = TerminalSafe(what);  // process names in a finding come from the traced hosts
    table.rows.push_back({static_cast<int64_t>(++rank), n.session.node,
                          n.top ? Cell(n.top->lost_s) : Cell(std::monostate{}), what,
                          n.session.id, n.session.events});
  }
  std::string since_text = std::to_string(since_ns / 1'000'000'000) + " s";
  std::printf("Nodes ranked by GPU-feed time lost (last %s, %s):\n%s", since_text.c_str(),
              url->Display().c_str(), FormatTable(table, TableFormat::kText).c_str());
  if (nodes.empty()) std::printf("(no node sent events in the last %s)\n", since_text.c_str());
  if (nccl) std::printf("\n%s", nccl_text.c_str());
  return kExitOk;
}

}  // namespace gw
