#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

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
