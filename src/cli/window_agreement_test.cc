// `gpuwhy explain`/`diff` and the MCP tools choose the same window for the same request: the
// CLI's flags (ExplainOptionsFromFlags → LoadWindow) and the MCP arguments (the explain tool,
// and the data tools such as op_stats) are resolved on one file and compared with each other
// and with the range the rule in store/window.h gives. A front end that changes its rule (a
// default, the clipping, the rounding of seconds) fails here.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "analysis/explain.h"
#include "analysis/loader.h"
#include "base/flags.h"
#include "cli/commands.h"
#include "mcp/gpuwhy_server.h"
#include "mcp/server.h"
#include "store/reader.h"
#include "store/writer.h"

namespace gw {
namespace {

using mcp::Json;

constexpr int64_t kSec = 1'000'000'000;

// Session 1: events every 100 ms from 0.7 s to 300.6 s (a training process with CUDA calls);
// session 2: 21 s of events (shorter than explain's default window), never ended (killed).
class WindowAgreementTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gw_window_agree_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    db_ = new std::string(*dir_ + "/w.db");
    auto writer = StoreWriter::Create(*db_, {});
    ASSERT_TRUE(writer.ok()) << writer.status().message();
    StoreWriter& w = **writer;
    auto session = [&](int64_t first, int64_t last, bool end) {
      SessionInfo info;
      info.kind = "test";
      info.wall_start_ns = 1;
      info.cores = 8;
      ASSERT_TRUE(w.BeginSession(info).ok());
      ProcessInfo p;
      p.pid = 100;
      p.ppid = 1;
      p.name = "python3 (train.py)";
      p.comm = "python3";
      p.cmdline = "python3 train.py";
      p.first_ts_ns = 0;
      p.tracked = true;
      w.UpsertProcess(p);
      for (int64_t t = first; t <= last; t += kSec / 10) {
        Event e;
        e.ts_ns = t;
        e.pid = e.tid = 100;
        e.op = (t / (kSec / 10)) % 2 ? Op::kCudaStreamSync : Op::kSchedSwitch;
        e.duration_ns = 1'000'000;
        w.AppendEvent(e);
      }
      ASSERT_TRUE(w.Flush().ok());
      if (end) {
        SessionTotals totals;
        totals.wall_stop_ns = 2;
        ASSERT_TRUE(w.EndSession(totals).ok());
      }
    };
    session(7 * kSec / 10, 3006 * kSec / 10, true);
    session(kSec / 10, 211 * kSec / 10, false);
    ASSERT_TRUE(w.Close().ok());
  }
  static void TearDownTestSuite() {
    (void)!std::system(("rm -rf " + *dir_).c_str());
    delete dir_;
    delete db_;
  }

  void SetUp() override {
    auto reader = StoreReader::Open(*db_);
    ASSERT_TRUE(reader.ok()) << reader.status().message();
    reader_ = std::move(*reader);
    mcp::GpuwhyServerOptions options;
    options.db_path = *db_;
    options.version = "test";
    server_ = std::make_unique<mcp::GpuwhyServer>(options);
    Json init = {{"jsonrpc", "2.0"},
                 {"id", 0},
                 {"method", "initialize"},
                 {"params",
                  {{"protocolVersion", "2025-06-18"},
                   {"capabilities", Json::object()},
                   {"clientInfo", {{"name", "t"}, {"version", "1"}}}}}};
    mcp::HandleMessage(server_->server(), init.dump());
    mcp::HandleMessage(server_->server(),
                       R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  }

  struct Range {
    int64_t begin = 0, end = 0;
    std::string error;
  };

  // `gpuwhy explain FLAGS`: the flags as the CLI reads them, loaded as the analysis loads them.
  Range Cli(const std::vector<std::string>& args) {
    FlagSet flags("explain", "", "");
    AddExplainWindowFlags(flags);
    Status parsed = flags.Parse(args);
    if (!parsed.ok()) return {0, 0, parsed.message()};
    StatusOr<ExplainOptions> options = ExplainOptionsFromFlags(flags);
    if (!options.ok()) return {0, 0, options.status().message()};
    StatusOr<WindowData> w = LoadWindow(*reader_, options->window);
    if (!w.ok()) return {0, 0, w.status().message()};
    return {w->from, w->to, ""};
  }

  // `gpuwhy diff`'s side: the whole session, as Diff() loads it.
  Range CliWholeSession(int64_t session) {
    WindowRequest r;
    r.session = session;
    StatusOr<WindowData> w = LoadWindow(*reader_, r);
    if (!w.ok()) return {0, 0, w.status().message()};
    return {w->from, w->to, ""};
  }

  Json CallTool(const std::string& name, const Json& args) {
    Json msg = {{"jsonrpc", "2.0"},
                {"id", ++id_},
                {"method", "tools/call"},
                {"params", {{"name", name}, {"arguments", args}}}};
    Json r = Json::parse(mcp::HandleMessage(server_->server(), msg.dump()));
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r["result"];
  }

  // The MCP explain tool's window (report JSON: from_ns/to_ns).
  Range McpExplain(const Json& args) {
    Json r = CallTool("explain", args);
    if (r.value("isError", false)) return {0, 0, r["content"][0]["text"].get<std::string>()};
    const Json& w = r["structuredContent"]["window"];
    return {w["from_ns"].get<int64_t>(), w["to_ns"].get<int64_t>(), ""};
  }

  // A data tool's window (from_s/to_s in seconds).
  Range McpData(const std::string& tool, Json args) {
    Json r = CallTool(tool, args);
    if (r.value("isError", false)) return {0, 0, r["content"][0]["text"].get<std::string>()};
    const Json& w = r["structuredContent"]["window"];
    return {std::llround(w["from_s"].get<double>() * 1e9),
            std::llround(w["to_s"].get<double>() * 1e9), ""};
  }

  static std::string* dir_;
  static std::string* db_;
  std::unique_ptr<StoreReader> reader_;
  std::unique_ptr<mcp::GpuwhyServer> server_;
  int id_ = 0;
};

std::string* WindowAgreementTest::dir_ = nullptr;
std::string* WindowAgreementTest::db_ = nullptr;

#define EXPECT_RANGE(got, want_begin, want_end)             \
  do {                                                      \
    Range g_ = (got);                                       \
    EXPECT_EQ(g_.error, "");                                \
    EXPECT_EQ(g_.begin, (want_begin)) << "begin";           \
    EXPECT_EQ(g_.end, (want_end)) << "end";                 \
  } while (0)

constexpr int64_t kLast1 = 3006 * kSec / 10;  // session 1's newest event
constexpr int64_t kLast2 = 211 * kSec / 10;   // session 2's

TEST_F(WindowAgreementTest, ExplainDefaultIsTheLastTwoMinutes) {
  EXPECT_RANGE(Cli({"--session", "1"}), kLast1 + 1 - 120 * kSec, kLast1 + 1);
  EXPECT_RANGE(McpExplain({{"session", 1}}), kLast1 + 1 - 120 * kSec, kLast1 + 1);
}

TEST_F(WindowAgreementTest, LastNSeconds) {
  const int64_t begin = kLast1 + 1 - 45 * kSec;
  EXPECT_RANGE(Cli({"--session", "1", "--since", "45s"}), begin, kLast1 + 1);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"since_s", 45}}), begin, kLast1 + 1);
  EXPECT_RANGE(McpData("op_stats", {{"session", 1}, {"since_s", 45}}), begin, kLast1 + 1);
  EXPECT_RANGE(McpData("top_contention", {{"session", 1}, {"since_s", 45}}), begin, kLast1 + 1);
  // Fractions of a second are rounded, not truncated.
  EXPECT_RANGE(Cli({"--session", "1", "--since", "2500ms"}), kLast1 + 1 - 2500'000'000,
               kLast1 + 1);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"since_s", 2.5}}), kLast1 + 1 - 2500'000'000,
               kLast1 + 1);
}

TEST_F(WindowAgreementTest, FromAndTo) {
  EXPECT_RANGE(Cli({"--session", "1", "--from", "30s", "--to", "90s"}), 30 * kSec, 90 * kSec);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"from_s", 30}, {"to_s", 90}}), 30 * kSec, 90 * kSec);
  EXPECT_RANGE(McpData("timeline", {{"session", 1}, {"from_s", 30}, {"to_s", 90}}), 30 * kSec,
               90 * kSec);
  // from alone: to the newest event.
  EXPECT_RANGE(Cli({"--session", "1", "--from", "100s"}), 100 * kSec, kLast1 + 1);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"from_s", 100}}), 100 * kSec, kLast1 + 1);
  EXPECT_RANGE(McpData("op_stats", {{"session", 1}, {"from_s", 100}}), 100 * kSec, kLast1 + 1);
}

TEST_F(WindowAgreementTest, ToAloneIsTheDefaultLengthEndingThere) {
  // explain (both front ends): the last 2 min before --to, clipped at the session's start.
  EXPECT_RANGE(Cli({"--session", "1", "--to", "200s"}), 80 * kSec, 200 * kSec);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"to_s", 200}}), 80 * kSec, 200 * kSec);
  EXPECT_RANGE(Cli({"--session", "1", "--to", "90s"}), 0, 90 * kSec);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"to_s", 90}}), 0, 90 * kSec);
  // With since: since ending at to.
  EXPECT_RANGE(Cli({"--session", "1", "--since", "10s", "--to", "90s"}), 80 * kSec, 90 * kSec);
  EXPECT_RANGE(McpExplain({{"session", 1}, {"since_s", 10}, {"to_s", 90}}), 80 * kSec,
               90 * kSec);
  EXPECT_RANGE(McpData("op_stats", {{"session", 1}, {"since_s", 10}, {"to_s", 90}}), 80 * kSec,
               90 * kSec);
}

TEST_F(WindowAgreementTest, WindowLongerThanTheSession) {
  // Session 2 (killed, 21 s): a 2 min window starts at the session's start.
  EXPECT_RANGE(Cli({"--session", "2"}), 0, kLast2 + 1);
  EXPECT_RANGE(McpExplain({{"session", 2}}), 0, kLast2 + 1);
  EXPECT_RANGE(McpData("op_stats", {{"session", 2}, {"since_s", 120}}), 0, kLast2 + 1);
  EXPECT_RANGE(Cli({"--since", "1h"}), 0, kLast2 + 1);  // session 0 = the newest = 2
  EXPECT_RANGE(McpExplain({{"since_s", 3600}}), 0, kLast2 + 1);
}

TEST_F(WindowAgreementTest, WholeSessionOfDiffAndTheDataTools) {
  EXPECT_RANGE(CliWholeSession(1), 7 * kSec / 10, kLast1 + 1);
  EXPECT_RANGE(McpData("op_stats", {{"session", 1}}), 7 * kSec / 10, kLast1 + 1);
  EXPECT_RANGE(CliWholeSession(0), kSec / 10, kLast2 + 1);
  EXPECT_RANGE(McpData("top_contention", Json::object()), kSec / 10, kLast2 + 1);
}

TEST_F(WindowAgreementTest, BadRequestsFailOnBothSides) {
  auto both_fail = [&](const std::vector<std::string>& flags, const Json& args,
                       const std::string& cli_text, const std::string& mcp_text) {
    Range c = Cli(flags);
    Range m = McpExplain(args);
    EXPECT_NE(c.error.find(cli_text), std::string::npos) << c.error;
    EXPECT_NE(m.error.find(mcp_text), std::string::npos) << m.error;
  };
  both_fail({"--since", "10s", "--from", "5s"}, {{"since_s", 10}, {"from_s", 5}},
            "give either --since or --from, not both", "give either since_s or from_s, not both");
  both_fail({"--from", "50s", "--to", "40s"}, {{"from_s", 50}, {"to_s", 40}},
            "empty window: --from must be before --to", "empty window: from_s must be before to_s");
  both_fail({"--session", "7"}, {{"session", 7}}, "session 7 is not in", "session 7 is not in");
  both_fail({"--session", "1", "--from", "400s"}, {{"session", 1}, {"from_s", 400}},
            "empty window: it would start at 400.0 s", "empty window: it would start at 400.0 s");
  Range m = McpData("op_stats", {{"session", 1}, {"since_s", 10}, {"from_s", 5}});
  EXPECT_NE(m.error.find("give either since_s or from_s, not both"), std::string::npos)
      << m.error;
}

}  // namespace
}  // namespace gw
