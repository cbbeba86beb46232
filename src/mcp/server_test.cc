#include "mcp/server.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <poll.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "mcp/analysis_tools.h"
#include "mcp/gpuwhy_server.h"
#include "store/reader.h"

namespace gw::mcp {
namespace {

// One fixture database for the whole suite, written by gw_make_mcp_fixture.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/gw_mcp_test_XXXXXX";
    dir_ = new std::string(mkdtemp(tmpl));
    db_ = new std::string(*dir_ + "/fixture.db");
    std::string cmd = std::string(GW_MCP_FIXTURE_BIN) + " " + *db_;
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  static void TearDownTestSuite() {
    std::string rm = "rm -rf " + *dir_;
    (void)!std::system(rm.c_str());
    delete dir_;
    delete db_;
  }
  void SetUp() override {
    GpuwhyServerOptions options;
    options.db_path = *db_;
    options.version = "test";
    options.limits.default_timeout_ms = 2000;
    gpuwhy_ = std::make_unique<GpuwhyServer>(options);
  }

  Json Call(const std::string& method, Json params) {
    Json msg = {{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    std::string out = HandleMessage(gpuwhy_->server(), msg.dump());
    EXPECT_FALSE(out.empty());
    return Json::parse(out);
  }
  Json Initialize(const std::string& version) {
    Json r = Call("initialize", {{"protocolVersion", version},
                                 {"capabilities", Json::object()},
                                 {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
    EXPECT_EQ(HandleMessage(gpuwhy_->server(),
                            R"({"jsonrpc":"2.0","method":"notifications/initialized"})"),
              "");
    return r;
  }
  Json Tool(const std::string& name, Json args) {
    Json r = Call("tools/call", {{"name", name}, {"arguments", args}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r["result"];
  }
  Table Sql(const std::string& sql) {
    auto reader = StoreReader::Open(*db_);
    EXPECT_TRUE(reader.ok());
    auto t = (*reader)->Query(sql);
    EXPECT_TRUE(t.ok()) << t.status().message();
    return *t;
  }

  static std::string* dir_;
  static std::string* db_;
  std::unique_ptr<GpuwhyServer> gpuwhy_;
  int id_ = 0;
};

std::string* ServerTest::dir_ = nullptr;
std::string* ServerTest::db_ = nullptr;

// Issue 12: requests before initialize were served.
TEST_F(ServerTest, RefusesRequestsBeforeInitialize) {
  Json r = Call("tools/list", Json::object());
  ASSERT_TRUE(r.contains("error")) << r.dump();
  EXPECT_EQ(r["error"]["code"], -32600);
  EXPECT_NE(r["error"]["message"].get<std::string>().find("before initialize"), std::string::npos);
  EXPECT_TRUE(Call("ping", Json::object()).contains("result"));
  Initialize("2025-06-18");
  EXPECT_TRUE(Call("tools/list", Json::object()).contains("result"));
}

// Issue 12: diff opened any path (db_a=/etc/shadow) and its errors told whether a file existed.
TEST_F(ServerTest, DiffOpensOnlyFilesBesideItsDatabase) {
  Initialize("2025-06-18");
  std::string refusal;
  for (const char* path : {"/etc/shadow", "/etc/passwd", "/nonexistent/x.db", "/tmp/../etc/hosts"}) {
    Json r = Tool("diff", {{"db_a", path}, {"db_b", *db_}});
    ASSERT_TRUE(r["isError"].get<bool>()) << path;
    std::string text = r["content"][0]["text"].get<std::string>();
    EXPECT_NE(text.find("opens only gpuwhy databases in the directory"), std::string::npos) << text;
    if (refusal.empty()) refusal = text;
    EXPECT_EQ(text, refusal) << "the answer must not depend on whether " << path << " exists";
  }
  // A copy beside the server's own file is allowed (not refused for its location).
  std::string copy = *dir_ + "/copy.db";
  ASSERT_EQ(std::system(("cp " + *db_ + " " + copy).c_str()), 0);
  Json ok = Tool("diff", {{"db_a", copy}, {"db_b", *db_}});
  EXPECT_EQ(ok["content"][0]["text"].get<std::string>().find("opens only"), std::string::npos)
      << ok.dump();
}

// Issue 19: explain and diff read with no time limit, so on a big file one call held the
// server past any client's patience. Every tool call now runs under the tool limit.
TEST_F(ServerTest, AnalysisToolsStopAtTheToolTimeLimit) {
  GpuwhyServerOptions options;
  options.db_path = *db_;
  options.version = "test";
  options.limits.tool_timeout_ms = 1;  // smaller than any explain of the fixture takes
  GpuwhyServer limited(options);
  auto call = [&](const std::string& method, Json params) {
    Json msg = {{"jsonrpc", "2.0"}, {"id", ++id_}, {"method", method}, {"params", params}};
    return Json::parse(HandleMessage(limited.server(), msg.dump()));
  };
  call("initialize", {{"protocolVersion", "2025-06-18"},
                      {"capabilities", Json::object()},
                      {"clientInfo", {{"name", "t"}, {"version", "1"}}}});
  (void)HandleMessage(limited.server(), R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  for (const char* tool : {"explain", "diff"}) {
    Json args = std::string(tool) == "diff" ? Json{{"db_a", *db_}, {"db_b", *db_}} : Json::object();
    Json r = call("tools/call", {{"name", tool}, {"arguments", args}});
    ASSERT_TRUE(r.contains("result")) << r.dump();
    ASSERT_TRUE(r["result"]["isError"].get<bool>()) << tool << ": " << r.dump().substr(0, 300);
    std::string text = r["result"]["content"][0]["text"].get<std::string>();
    EXPECT_NE(text.find("the " + std::string(tool) + " tool reached its time limit"),
              std::string::npos)
        << text;
  }
  // The same calls under the default limit succeed.
  Initialize("2025-06-18");
  EXPECT_FALSE(Tool("explain", Json::object())["isError"].get<bool>());
}

TEST_F(ServerTest, NegotiatesProtocolVersions) {
  for (const char* v : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) {
    Json r = Initialize(v);
    EXPECT_EQ(r["result"]["protocolVersion"], v);
    EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
    EXPECT_TRUE(r["result"]["capabilities"].contains("prompts"));
    EXPECT_EQ(r["result"]["serverInfo"]["name"], "gpuwhy");
  }
  EXPECT_EQ(Initialize("1999-01-01")["result"]["protocolVersion"], kLatestProtocolVersion);
  EXPECT_EQ(Call("initialize", Json::object())["error"]["code"], -32602);
  EXPECT_EQ(Call("ping", Json::object())["result"], Json::object());
  EXPECT_EQ(Call("resources/list", Json::object())["error"]["code"], -32601);
}

TEST_F(ServerTest, OlderVersionsGetNoStructuredContent) {
  Initialize("2024-11-05");
  Json r = Tool("sessions", Json::object());
  EXPECT_FALSE(r.contains("structuredContent"));
  EXPECT_EQ(r["content"][0]["type"], "text");
  Json tools = Call("tools/list", Json::object())["result"]["tools"];
  EXPECT_FALSE(tools[0].contains("outputSchema"));
}

TEST_F(ServerTest, ListsEveryTool) {
  Initialize("2025-06-18");
  Json tools = Call("tools/list", Json::object())["result"]["tools"];
  std::set<std::string> names;
  for (const Json& t : tools) {
    names.insert(t["name"].get<std::string>());
    EXPECT_EQ(t["inputSchema"]["type"], "object") << t["name"];
    EXPECT_TRUE(t["annotations"]["readOnlyHint"].get<bool>());
  }
  EXPECT_EQ(names, (std::set<std::string>{"query_sql", "explain", "op_stats", "top_contention",
                                          "timeline", "stacks", "sessions", "check", "diff",
                                          "top_kernels", "gpu_samples", "cpu_profile"}));
}

TEST_F(ServerTest, ToolCallProtocolErrors) {
  Initialize("2025-06-18");
  EXPECT_EQ(Call("tools/call", {{"name", "rm_rf"}})["error"]["code"], -32602);
  EXPECT_EQ(Call("tools/call", Json::object())["error"]["code"], -32602);
  EXPECT_EQ(Call("tools/call", {{"name", "sessions"}, {"arguments", 5}})["error"]["code"], -32602);
  // Bad argument values are tool execution errors the model can correct.
  Json r = Tool("op_stats", {{"since_s", "two minutes"}});
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_TRUE(Tool("op_stats", {{"sinse_s", 120}})["isError"].get<bool>());
  EXPECT_TRUE(Tool("op_stats", {{"ops", {"cudaNope"}}})["isError"].get<bool>());
}

TEST_F(ServerTest, QuerySqlIsReadOnlyAndBounded) {
  Initialize("2025-06-18");
  for (const char* sql :
       {"DELETE FROM event_rows", "DROP TABLE sessions", "ATTACH DATABASE '/tmp/x.db' AS x",
        "PRAGMA writable_schema = 1", "SELECT load_extension('/tmp/evil.so')",
        "INSERT INTO meta VALUES ('a', 'b')", "SELECT 1; DELETE FROM meta", "CREATE TABLE t(x)"}) {
    Json r = Tool("query_sql", {{"sql", sql}});
    EXPECT_TRUE(r["isError"].get<bool>()) << sql;
  }
  Json forever = Tool("query_sql", {{"sql",
                                     "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT "
                                     "x + 1 FROM c) SELECT COUNT(*) FROM c"},
                                    {"timeout_ms", 200}});
  EXPECT_TRUE(forever["isError"].get<bool>());
  EXPECT_NE(forever["content"][0]["text"].get<std::string>().find("time limit"), std::string::npos);
  Json cut = Tool("query_sql", {{"sql", "SELECT * FROM events"}, {"max_rows", 5}});
  EXPECT_FALSE(cut["isError"].get<bool>());
  EXPECT_EQ(cut["structuredContent"]["rows"].size(), 5u);
  EXPECT_TRUE(cut["structuredContent"]["truncated"].get<bool>());
  EXPECT_TRUE(cut["structuredContent"].contains("note"));
  // Still serving, and the data is intact.
  Json count = Tool("query_sql", {{"sql", "SELECT COUNT(*) AS n FROM sessions"}});
  EXPECT_EQ(count["structuredContent"]["rows"][0][0], 2);
}

TEST_F(ServerTest, TopContentionMatchesTheBriefsSql) {
  Initialize("2025-06-18");
  Table want =
      Sql("SELECT pn.name as process, COUNT(*) as context_switches, SUM(duration_ns)/1e9 as "
          "total_off_cpu_sec, MAX(duration_ns)/1e6 as worst_stall_ms FROM events e JOIN "
          "process_names pn ON e.pid = pn.pid WHERE op = 'sched_switch' AND timestamp > (SELECT "
          "MAX(timestamp) - 120000000000 FROM events) GROUP BY pn.name ORDER BY total_off_cpu_sec "
          "DESC LIMIT 10");
  Json got = Tool("top_contention", {{"since_s", 120}})["structuredContent"];
  ASSERT_GE(want.rows.size(), 5u);
  size_t matched = 0;
  for (const auto& row : want.rows) {
    // The reply replaces invalid UTF-8 (the fixture's hostile name has some); compare the rest.
    if (std::get<std::string>(row[0]).find('\xff') != std::string::npos) {
      ++matched;
      continue;
    }
    for (const Json& p : got["processes"]) {
      if (p["process"] != std::get<std::string>(row[0])) continue;
      ++matched;
      EXPECT_EQ(p["context_switches"], std::get<int64_t>(row[1]));
      EXPECT_DOUBLE_EQ(p["off_cpu_s"].get<double>(), std::get<double>(row[2]));
      // The brief's worst_stall_ms is the longest off-CPU interval of all; the tool's leaves
      // out waits for work and the job's start-up (none here: every row is a preemption, and
      // the first sync comes at 0 s).
      EXPECT_DOUBLE_EQ(p["longest_off_cpu_ms"].get<double>(), std::get<double>(row[3]));
      EXPECT_DOUBLE_EQ(p["worst_stall_ms"].get<double>(), std::get<double>(row[3]));
      EXPECT_DOUBLE_EQ(p["idle_s"].get<double>(), 0.0);
    }
  }
  EXPECT_EQ(matched, want.rows.size());
  EXPECT_EQ(got["processes"][0]["process"], "python3 (train.py)");
}

TEST_F(ServerTest, TimelineMatchesTheBriefsSql) {
  Initialize("2025-06-18");
  Table want = Sql(
      "SELECT (timestamp / 10000000000) * 10 as window_sec, COUNT(CASE WHEN op = 'sched_switch' "
      "THEN 1 END) as ctx_switches, COUNT(CASE WHEN op = 'cudaStreamSync' THEN 1 END) as "
      "sync_calls, AVG(CASE WHEN op = 'cudaStreamSync' THEN duration_ns END) / 1000 as "
      "sync_avg_us FROM events WHERE timestamp > (SELECT MAX(timestamp) - 120000000000 FROM "
      "events) GROUP BY window_sec ORDER BY window_sec");
  Json got = Tool("timeline", {{"since_s", 120}, {"window_s", 10}})["structuredContent"];
  ASSERT_EQ(got["windows"].size(), want.rows.size());
  for (size_t i = 0; i < want.rows.size(); ++i) {
    const Json& w = got["windows"][i];
    EXPECT_EQ(static_cast<int64_t>(w["start_s"].get<double>()), std::get<int64_t>(want.rows[i][0]));
    EXPECT_EQ(w["sched_switch"]["count"], std::get<int64_t>(want.rows[i][1]));
    EXPECT_EQ(w["cudaStreamSync"]["count"], std::get<int64_t>(want.rows[i][2]));
    EXPECT_NEAR(w["cudaStreamSync"]["avg_us"].get<double>(), std::get<double>(want.rows[i][3]),
                1e-6);
  }
}

TEST_F(ServerTest, OpStatsPercentiles) {
  Initialize("2025-06-18");
  Json got = Tool("op_stats", {{"ops", {"cudaStreamSync"}}})["structuredContent"];
  ASSERT_EQ(got["ops"].size(), 1u);
  const Json& s = got["ops"][0];
  Table n = Sql("SELECT COUNT(*), MAX(duration_ns) FROM events WHERE op = 'cudaStreamSync'");
  int64_t count = std::get<int64_t>(n.rows[0][0]);
  EXPECT_EQ(s["count"], count);
  EXPECT_DOUBLE_EQ(s["max_us"].get<double>(), std::get<int64_t>(n.rows[0][1]) / 1000.0);
  Table p99 =
      Sql("SELECT duration_ns FROM events WHERE op = 'cudaStreamSync' ORDER BY "
          "duration_ns LIMIT 1 OFFSET " +
          std::to_string((count * 99 + 99) / 100 - 1));
  EXPECT_DOUBLE_EQ(s["p99_us"].get<double>(),
                   std::round(std::get<int64_t>(p99.rows[0][0]) / 1000.0 * 1000) / 1000);
  EXPECT_LE(s["p50_us"].get<double>(), s["p95_us"].get<double>());
  EXPECT_LE(s["p95_us"].get<double>(), s["p99_us"].get<double>());
}

TEST_F(ServerTest, UntrustedNamesStayDataInsideTheFence) {
  Initialize("2025-06-18");
  Json r = Tool("top_contention", {{"since_s", 200}, {"limit", 50}});
  std::string text = r["content"][0]["text"].get<std::string>();
  size_t open = text.find("```json\n");
  ASSERT_NE(open, std::string::npos);
  std::string body = text.substr(open + 8);
  ASSERT_GE(body.size(), 4u);
  EXPECT_EQ(body.substr(body.size() - 4), "\n```");
  body = body.substr(0, body.size() - 4);
  // No recorded string can close the fence or open a tag.
  EXPECT_EQ(body.find('`'), std::string::npos);
  EXPECT_EQ(body.find('<'), std::string::npos);
  EXPECT_NE(text.find("untrusted data"), std::string::npos);
  // The name survives, escaped, in the JSON (invalid UTF-8 replaced).
  Json data = Json::parse(body);
  bool found = false;
  for (const Json& p : data["processes"]) {
    found = found || p["process"].get<std::string>().find("IGNORE PREVIOUS") != std::string::npos;
  }
  EXPECT_TRUE(found);
}

TEST_F(ServerTest, SessionsStacksAndMissingAnalysis) {
  Initialize("2025-06-18");
  Json s = Tool("sessions", Json::object())["structuredContent"];
  ASSERT_EQ(s["sessions"].size(), 2u);
  EXPECT_TRUE(s["sessions"][1]["newest"].get<bool>());
  Json none = Tool("stacks", {{"op", "cudaStreamSync"}, {"session", 1}});
  EXPECT_FALSE(none["isError"].get<bool>());
  EXPECT_FALSE(none["structuredContent"]["stacks_recorded"].get<bool>());
  Json st = Tool("stacks", {{"op", "cudaStreamSync"}})["structuredContent"];
  EXPECT_TRUE(st["stacks_recorded"].get<bool>());
  ASSERT_EQ(st["call_sites"].size(), 2u);
  EXPECT_EQ(st["call_sites"][0]["stack"]["location"], "train.py:142");
  EXPECT_EQ(st["call_sites"][0]["stack"]["frames"][1]["line"], 142);
  Table calls = Sql("SELECT COUNT(*) FROM events WHERE op = 'cudaStreamSync' AND stack_id = 101");
  EXPECT_EQ(st["call_sites"][0]["calls"], std::get<int64_t>(calls.rows[0][0]));
  EXPECT_TRUE(Tool("stacks", Json::object())["isError"].get<bool>());
  Json check = Tool("check", Json::object());  // no runner in unit tests
  EXPECT_TRUE(check["isError"].get<bool>());
  Json ex = Tool("explain", {{"since_s", 120}});
  if (AnalysisAvailable()) {
    EXPECT_FALSE(ex["isError"].get<bool>()) << ex.dump();
    EXPECT_TRUE(ex["structuredContent"].is_object());
  } else {
    EXPECT_TRUE(ex["isError"].get<bool>());
    EXPECT_NE(ex["content"][0]["text"].get<std::string>().find("not available in this build"),
              std::string::npos);
  }
}

TEST_F(ServerTest, InvestigatePrompt) {
  Initialize("2025-06-18");
  Json list = Call("prompts/list", Json::object())["result"]["prompts"];
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["name"], "investigate");
  Json got = Call("prompts/get", {{"name", "investigate"}, {"arguments", {{"since_s", "60"}}}});
  std::string text = got["result"]["messages"][0]["content"]["text"];
  EXPECT_NE(text.find("top_contention"), std::string::npos);
  EXPECT_NE(text.find("since_s: 60"), std::string::npos);
  EXPECT_EQ(Call("prompts/get", {{"name", "nope"}})["error"]["code"], -32602);
  EXPECT_EQ(Call("prompts/get",
                 {{"name", "investigate"}, {"arguments", {{"pid", "x"}}}})["error"]["code"],
            -32602);
}

// `gpuwhy mcp`'s stdio loop on pipes, in a thread: what a client sees.
class StdioSession {
 public:
  explicit StdioSession(McpServer& server) {
    EXPECT_EQ(pipe(in_), 0);
    EXPECT_EQ(pipe(out_), 0);
    thread_ = std::thread([this, &server] {
      status_ = ServeStdio(server, in_[0], out_[1]);
      close(out_[1]);
    });
  }
  ~StdioSession() {
    EndInput();
    thread_.join();
    close(in_[0]);
    close(out_[0]);
  }
  void Send(const std::string& line) {
    std::string data = line + "\n";
    EXPECT_EQ(write(in_[1], data.data(), data.size()), static_cast<ssize_t>(data.size()));
  }
  void EndInput() {
    if (in_[1] >= 0) close(in_[1]);
    in_[1] = -1;
  }
  // The next reply, or nullopt after `timeout_s` or at the end of output.
  std::optional<Json> Read(double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (true) {
      size_t nl = buffer_.find('\n');
      if (nl != std::string::npos) {
        Json j = Json::parse(buffer_.substr(0, nl), nullptr, false);
        buffer_.erase(0, nl + 1);
        return j;
      }
      int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      deadline - std::chrono::steady_clock::now())
                                      .count());
      if (left <= 0) return std::nullopt;
      pollfd p{out_[0], POLLIN, 0};
      if (poll(&p, 1, left) <= 0) continue;
      char chunk[65536];
      ssize_t n = read(out_[0], chunk, sizeof chunk);
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }
  const Status& status() const { return status_; }

 private:
  int in_[2] = {-1, -1};
  int out_[2] = {-1, -1};
  std::thread thread_;
  Status status_;
  std::string buffer_;
};

std::string Request(const Json& id, const std::string& method, const Json& params) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", params}}.dump();
}

std::string Cancellation(const Json& id) {
  return Json{{"jsonrpc", "2.0"},
              {"method", "notifications/cancelled"},
              {"params", {{"requestId", id}, {"reason", "test"}}}}
      .dump();
}

Json EndlessQuery(int64_t timeout_ms) {
  return {{"name", "query_sql"},
          {"arguments",
           {{"sql", "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT "
                    "COUNT(*) FROM c"},
            {"timeout_ms", timeout_ms}}}};
}

// Issue 12: notifications/cancelled was not honoured: a query kept running to its time limit
// (60 s here) and everything behind it waited. Now the cancelled query stops at once, gets no
// reply, and the cancellation touches no other request.
TEST_F(ServerTest, CancellationStopsTheRequestItNamesAndNothingElse) {
  StdioSession io(gpuwhy_->server());
  io.Send(Request(1, "initialize",
                  {{"protocolVersion", "2025-06-18"},
                   {"capabilities", Json::object()},
                   {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
  std::optional<Json> r = io.Read(30);
  ASSERT_TRUE(r && (*r)["id"] == 1);
  io.Send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");

  // 1. A running query: cancelled, stopped, no reply. Unknown ids and malformed cancels first.
  io.Send(Request("slow-1", "tools/call", EndlessQuery(60'000)));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  io.Send(Cancellation(999));
  io.Send(Cancellation("slow-2"));
  io.Send(R"({"jsonrpc":"2.0","method":"notifications/cancelled"})");
  io.Send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}})");
  io.Send(Cancellation("slow-1"));
  auto start = std::chrono::steady_clock::now();
  io.Send(Request(3, "ping", Json::object()));
  r = io.Read(10);
  ASSERT_TRUE(r.has_value()) << "no reply 10 s after the cancellation: the query still runs";
  EXPECT_EQ((*r)["id"], 3) << r->dump();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10);

  // 2. The next request runs normally: the cancellation did not leak into it.
  io.Send(Request(4, "tools/call",
                  {{"name", "query_sql"}, {"arguments", {{"sql", "SELECT 4 AS four"}}}}));
  r = io.Read(30);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["id"], 4);
  EXPECT_FALSE((*r)["result"]["isError"].get<bool>()) << r->dump();

  // 3. A queued request cancelled before it starts is never run or answered; the one running
  //    in front of it is cancelled too.
  io.Send(Request(5, "tools/call", EndlessQuery(60'000)));
  io.Send(Request(6, "tools/call",
                  {{"name", "query_sql"}, {"arguments", {{"sql", "SELECT 6"}}}}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  io.Send(Cancellation(6));
  io.Send(Cancellation(5));
  io.Send(Request(7, "ping", Json::object()));
  r = io.Read(10);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["id"], 7) << r->dump();

  // 4. Cancelling a finished request (7) while another runs leaves the running one alone: it
  //    ends by its own time limit and is answered.
  io.Send(Request(8, "tools/call", EndlessQuery(700)));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  io.Send(Cancellation(7));
  io.Send(Cancellation(1));  // initialize, finished long ago
  r = io.Read(30);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ((*r)["id"], 8);
  EXPECT_TRUE((*r)["result"]["isError"].get<bool>());
  EXPECT_NE(r->dump().find("time limit"), std::string::npos) << r->dump();

  // Nothing else comes: no late replies for the cancelled requests.
  io.EndInput();
  EXPECT_FALSE(io.Read(5).has_value());
}

// The stdio loop still ends cleanly at EOF with requests queued, and answers all of them.
TEST_F(ServerTest, StdioAnswersEverythingReadBeforeEof) {
  StdioSession io(gpuwhy_->server());
  for (int i = 1; i <= 40; ++i) io.Send(Request(i, "ping", Json::object()));
  io.Send(std::string(2 << 20, 'x'));  // oversized: answered with -32600, in order
  io.EndInput();
  for (int i = 1; i <= 40; ++i) {
    std::optional<Json> r = io.Read(30);
    ASSERT_TRUE(r.has_value()) << i;
    EXPECT_EQ((*r)["id"], i);
  }
  std::optional<Json> big = io.Read(30);
  ASSERT_TRUE(big.has_value());
  EXPECT_EQ((*big)["error"]["code"], -32600);
  EXPECT_FALSE(io.Read(5).has_value());
}

TEST_F(ServerTest, MissingDatabaseIsAToolErrorNotACrash) {
  GpuwhyServerOptions options;
  options.db_path = "/nonexistent/gpuwhy.db";
  gpuwhy_ = std::make_unique<GpuwhyServer>(options);
  Initialize("2025-06-18");
  Json r = Tool("sessions", Json::object());
  EXPECT_TRUE(r["isError"].get<bool>());
  EXPECT_NE(r["content"][0]["text"].get<std::string>().find("does not exist"), std::string::npos);
}

}  // namespace
}  // namespace gw::mcp
