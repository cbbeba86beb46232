#include <gtest/gtest.h>
#include <sqlite3.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "base/text.h"
#include "clickhouse/client.h"
#include "clickhouse/import.h"
#include "clickhouse/schema.h"
#include "store/outbox.h"
#include "store/writer.h"

namespace gw {
namespace {

TEST(ClickHouseUrlTest, ParsesEveryPart) {
  auto u = ParseClickHouseUrl("clickhouse://bob:s3cret@ch.example:9123/fleet_1");
  ASSERT_TRUE(u.ok()) << u.status().message();
  EXPECT_EQ(u->endpoint.host, "ch.example");
  EXPECT_EQ(u->endpoint.port, 9123);
  EXPECT_EQ(u->user, "bob");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->database, "fleet_1");
  EXPECT_EQ(u->Display().find("s3cret"), std::string::npos);
  auto d = ParseClickHouseUrl("clickhouse://127.0.0.1");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->endpoint.port, 8123);
  EXPECT_EQ(d->database, "gpuwhy");
}

TEST(ClickHouseUrlTest, RefusesWhatWouldReachTheSqlOrTheWrongServer) {
  for (const char* bad : {"http://h:8123/db", "clickhouse://", "clickhouse://h:0/db",
                          "clickhouse://h:70000", "clickhouse://h:12x", "clickhouse://h/d;DROP",
                          "clickhouse://h/1db", "clickhouse://h ost/db"}) {
    EXPECT_FALSE(ParseClickHouseUrl(bad).ok()) << bad;
  }
}

// Issue 32 item 2: a password never reaches an error message, and one may come from the
// environment or a file so that none is in argv.
TEST(ClickHouseUrlTest, PasswordsStayOutOfMessagesAndArgv) {
  auto bad = ParseClickHouseUrl("clickhouse://admin:PW-s3cret@127.0.0.1:99999/x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().find("PW-s3cret"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("clickhouse://admin:***@127.0.0.1:99999/x"),
            std::string::npos) << bad.status().message();
  auto slash = ParseClickHouseUrl("clickhouse://admin:p/w@q@h:9000/db");
  ASSERT_TRUE(slash.ok()) << slash.status().message();
  EXPECT_EQ(slash->password, "p/w@q");
  EXPECT_EQ(slash->database, "db");

  setenv("GPUWHY_CLICKHOUSE_PASSWORD", "from-env", 1);
  auto env = ParseClickHouseUrl("clickhouse://admin@h/db");
  unsetenv("GPUWHY_CLICKHOUSE_PASSWORD");
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->password, "from-env");
  char tmpl[] = "/tmp/gw_ch_pw_XXXXXX";
  int fd = mkstemp(tmpl);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "from-file\nsecond line\n", 22), 22);
  close(fd);
  setenv("GPUWHY_CLICKHOUSE_PASSWORD_FILE", tmpl, 1);
  auto file = ParseClickHouseUrl("clickhouse://admin@h/db");
  auto given = ParseClickHouseUrl("clickhouse://admin:in-url@h/db");
  setenv("GPUWHY_CLICKHOUSE_PASSWORD_FILE", "/nonexistent/pw", 1);
  auto missing = ParseClickHouseUrl("clickhouse://admin@h/db");
  unsetenv("GPUWHY_CLICKHOUSE_PASSWORD_FILE");
  unlink(tmpl);
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->password, "from-file");
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->password, "in-url");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("GPUWHY_CLICKHOUSE_PASSWORD_FILE"), std::string::npos);
}

// A server that answers one request with `response` (issue 32 items 6 and 9: what a hostile or
// man-in-the-middle ClickHouse sends over plain HTTP).
class CannedServer {
 public:
  explicit CannedServer(std::string response) : response_(std::move(response)) {
    listen_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(listen_, 4), 0);
    getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      int c = accept(listen_, nullptr, nullptr);
      if (c < 0) return;
      std::string in;
      char buf[4096];
      while (in.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      for (size_t off = 0; off < response_.size();) {
        ssize_t n = send(c, response_.data() + off, response_.size() - off, MSG_NOSIGNAL);
        if (n <= 0) break;
        off += static_cast<size_t>(n);
      }
      close(c);
    });
  }
  ~CannedServer() {
    shutdown(listen_, SHUT_RDWR);
    thread_.join();
    close(listen_);
  }
  ClickHouseClient Client() const {
    auto url = ParseClickHouseUrl("clickhouse://127.0.0.1:" + std::to_string(port_) + "/db");
    EXPECT_TRUE(url.ok());
    return ClickHouseClient(*url);
  }

 private:
  std::string response_;
  int listen_ = -1;
  int port_ = 0;
  std::thread thread_;
};

TEST(ClickHouseClientTest, ChunkSizesThatWrapAreAnErrorNotACrash) {
  for (const char* size : {"ffffffffffffffff", "fffffffffffffffe", "10000000000000000", "zz", ""}) {
    CannedServer server(std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n") +
                        size + "\r\nabc\r\n0\r\n\r\n");
    StatusOr<std::string> got = server.Client().Query("SELECT 1");
    EXPECT_FALSE(got.ok()) << size;
  }
  CannedServer fine("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n");
  StatusOr<std::string> got = fine.Client().Query("SELECT 1");
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ(*got, "abcde");
}

TEST(ClickHouseClientTest, AnswersLongerThanTheCapAreRefused) {
  std::string body(kMaxQueryResponseBytes + (1 << 20), '1');
  CannedServer server("HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                      "\r\n\r\n" + body);
  StatusOr<std::string> got = server.Client().Query("SELECT 1");
  ASSERT_FALSE(got.ok());
  EXPECT_NE(got.status().message().find("larger than 64 MiB"), std::string::npos)
      << got.status().message();
}

TEST(ClickHouseClientTest, EscapesInAnErrorBodyDoNotReachTheTerminal) {
  CannedServer server(
      "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 31\r\n\r\n"
      "Code: 1. \x1b]0;pwned\x07\x1b[2J\xc2\x9b" "31m!!!");
  StatusOr<std::string> got = server.Client().Query("SELECT 1");
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(IsTerminalSafe(got.status().message())) << got.status().message();
  EXPECT_NE(got.status().message().find("Code: 1."), std::string::npos);
}

TEST(ClickHouseSchemaTest, NodeNamesAreCheckedAndViewDatabasesNeverCollide) {
  EXPECT_TRUE(ValidateNodeName("gpu-01.rack3_a").ok());
  EXPECT_FALSE(ValidateNodeName("").ok());
  EXPECT_FALSE(ValidateNodeName("a'b").ok());
  EXPECT_FALSE(ValidateNodeName(std::string(65, 'a')).ok());
  ClickHouseUrl url;
  EXPECT_NE(NodeViewDatabase(url, "gpu-1"), NodeViewDatabase(url, "gpu_1"));
  EXPECT_EQ(NodeViewDatabase(url, "gpu-1").rfind("gpuwhy_node_gpu_1_", 0), 0u);
}

TEST(TsvTest, EscapedTextRoundTrips) {
  std::string line;
  std::string hostile = "a\tb\nc\\d\re'f\x1b";
  TsvText(line, hostile);
  line += '\t';
  TsvInt(line, kNull);
  line += '\t';
  TsvInt(line, -42);
  line += '\n';
  std::vector<TsvRow> rows = ParseTsv(line);
  ASSERT_EQ(rows.size(), 1u);
  ASSERT_EQ(rows[0].fields.size(), 3u);
  EXPECT_EQ(rows[0].fields[0], hostile);
  EXPECT_TRUE(rows[0].null[1]);
  EXPECT_FALSE(rows[0].null[2]);
  EXPECT_EQ(rows[0].fields[2], "-42");
}

TEST(ClickHouseQuoteTest, QuotesAndBackslashesCannotCloseTheLiteral) {
  EXPECT_EQ(ClickHouseQuote("x' OR 1=1 --\\"), "'x\\' OR 1=1 --\\\\'");
}

std::string TempDb(const char* tag) {
  return "/tmp/gw_ch_test_" + std::to_string(getpid()) + "_" + tag + ".db";
}

// The outbox holds every committed row once, in the transaction that wrote it, and survives the
// writer: a second writer on the same file sees what the first left unsent.
TEST(OutboxTest, CommittedRowsWaitUntilAcknowledged) {
  std::string path = TempDb("outbox");
  unlink(path.c_str());
  WriterOptions wo;
  wo.outbox = true;
  {
    auto w = StoreWriter::Create(path, wo);
    ASSERT_TRUE(w.ok()) << w.status().message();
    SessionInfo info;
    info.wall_start_ns = 1'700'000'000'000'000'000;
    ASSERT_TRUE((*w)->BeginSession(info).ok());
    std::vector<Event> events(1000);
    int64_t name = (*w)->InternString("gemm_kernel");
    for (size_t i = 0; i < events.size(); ++i) {
      events[i].ts_ns = static_cast<int64_t>(i) * 1000;
      events[i].pid = 7;
      events[i].tid = 7;
      events[i].op = Op::kCudaLaunchKernel;
      events[i].name_id = name;
    }
    (*w)->AppendEvents(events.data(), events.size());
    ProcessInfo p;
    p.pid = 7;
    p.name = "python3 (train.py)";
    (*w)->UpsertProcess(p);
    ASSERT_TRUE((*w)->Flush().ok());
    auto entries = (*w)->ReadOutbox(0, 1 << 20);
    ASSERT_TRUE(entries.ok());
    int64_t event_rows = 0;
    for (const OutboxEntry& e : *entries) {
      if (e.table == kOutboxEvents) event_rows += e.rows;
    }
    EXPECT_EQ(event_rows, 1000);
    // Each event line carries the name itself and the wall-clock time.
    const OutboxEntry* ev = nullptr;
    for (const OutboxEntry& e : *entries) if (e.table == kOutboxEvents) ev = &e;
    ASSERT_NE(ev, nullptr);
    std::vector<TsvRow> rows = ParseTsv(ev->body);
    ASSERT_EQ(rows.size(), 1000u);
    EXPECT_EQ(rows[1].fields[5], "cudaLaunchKernel");
    EXPECT_EQ(rows[1].fields[14], "gemm_kernel");
    EXPECT_EQ(rows[1].fields[2], std::to_string(info.wall_start_ns + 1000));
    // Acknowledge the first entry only.
    ASSERT_TRUE((*w)->AckOutbox(entries->front().id,
                                static_cast<int64_t>(entries->front().body.size())).ok());
    SessionTotals t;
    t.wall_stop_ns = info.wall_start_ns + 5;
    ASSERT_TRUE((*w)->EndSession(t).ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto again = StoreWriter::Create(path, wo);
  ASSERT_TRUE(again.ok());
  auto left = (*again)->OutboxState();
  ASSERT_TRUE(left.ok());
  EXPECT_GT(left->entries, 0);
  EXPECT_NE(left->spool_id, 0u);
  auto rest = (*again)->ReadOutbox(0, 1 << 20);
  ASSERT_TRUE(rest.ok());
  // The session row was spooled twice (begin, end), the first entry is gone.
  EXPECT_EQ(rest->back().table, kOutboxSessions);
  ASSERT_TRUE((*again)->Close().ok());
  unlink(path.c_str());
}

TEST(OutboxTest, TheCapDropsTheOldestEntriesAndCountsTheirRows) {
  std::string path = TempDb("cap");
  unlink(path.c_str());
  WriterOptions wo;
  wo.outbox = true;
  wo.outbox_max_bytes = 64 << 10;
  auto w = StoreWriter::Create(path, wo);
  ASSERT_TRUE(w.ok());
  ASSERT_TRUE((*w)->BeginSession(SessionInfo{}).ok());
  for (int round = 0; round < 20; ++round) {
    std::vector<Event> events(500);
    for (size_t i = 0; i < events.size(); ++i) {
      events[i].ts_ns = round * 1'000'000 + static_cast<int64_t>(i);
      events[i].pid = 1;
      events[i].tid = 1;
    }
    (*w)->AppendEvents(events.data(), events.size());
    ASSERT_TRUE((*w)->Flush().ok());
  }
  auto st = (*w)->OutboxState();
  ASSERT_TRUE(st.ok());
  EXPECT_LE(st->bytes, 64 << 10);
  EXPECT_GT(st->rows_dropped, 0);
  EXPECT_EQ(st->rows + st->rows_dropped, 20 * 500 + 1);  // + the session row
  ASSERT_TRUE((*w)->Close().ok());
  unlink(path.c_str());
}

}  // namespace
}  // namespace gw
