#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <thread>
#include <tuple>

#include "store/event_chunk.h"
#include "store/reader.h"
#include "store/schema.h"
#include "store/session_admin.h"
#include "store/sqlite_util.h"
#include "store/window.h"
#include "store/window_rows.h"
#include "store/writer.h"

namespace gw {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw_store_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/t.db";
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }

  std::unique_ptr<StoreWriter> NewWriter(WriterOptions opts = {}) {
    auto w = StoreWriter::Create(path_, opts);
    EXPECT_TRUE(w.ok()) << w.status().message();
    return std::move(w).value();
  }

  // The rows ReadWindowRows gives for the first 10 s of `session`.
  StatusOr<WindowRows> ReadFirstTenSeconds(int64_t session) {
    ASSIGN_OR_RETURN(std::unique_ptr<StoreReader> reader, StoreReader::Open(path_));
    SessionWindow window;
    window.session = session;
    window.begin_ns = 0;
    window.end_ns = 10'000'000'000;
    return ReadWindowRows(*reader, window, {});
  }

  // Edits the file the way someone with the sqlite3 shell would (no gpuwhy module loaded).
  void EditFile(const std::string& sql) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    ScopedDb db(raw);
    ASSERT_TRUE(Exec(raw, sql).ok()) << sql;
  }

  std::string dir_;
  std::string path_;
};

Event Switch(int64_t ts, int32_t pid, int64_t dur) {
  Event e;
  e.ts_ns = ts;
  e.pid = pid;
  e.tid = pid;
  e.op = Op::kSchedSwitch;
  e.duration_ns = dur;
  e.kind = static_cast<int64_t>(SwitchKind::kPreempted);
  e.runq_ns = dur;
  return e;
}

TEST_F(StoreTest, WritesAndReadsBackThroughViews) {
  auto w = NewWriter();
  SessionInfo info;
  info.wall_start_ns = 1;
  info.host = "h";
  ASSERT_TRUE(w->BeginSession(info).ok());
  w->UpsertProcess({100, 1, "python3 (train.py)", "python3", "python3 train.py", 0, kNull, kNull, true});
  int64_t kname = w->InternString("ampere_sgemm_128x64");
  Event launch;
  launch.ts_ns = 5;
  launch.pid = 100;
  launch.tid = 100;
  launch.op = Op::kCudaLaunchKernel;
  launch.duration_ns = 4000;
  launch.name_id = kname;
  launch.ret = 0;
  w->AppendEvent(launch);
  w->AppendEvent(Switch(10, 100, 2000));
  ASSERT_TRUE(w->EndSession({2, 2, 0, ""}).ok());
  ASSERT_TRUE(w->Close().ok());

  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto t = (*r)->Query("SELECT op, name, duration_ns FROM events ORDER BY timestamp");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(std::get<std::string>(t->rows[0][0]), "cudaLaunchKernel");
  EXPECT_EQ(std::get<std::string>(t->rows[0][1]), "ampere_sgemm_128x64");
  EXPECT_EQ(std::get<std::string>(t->rows[1][0]), "sched_switch");
  auto names = (*r)->Query("SELECT name FROM process_names WHERE pid = 100");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(std::get<std::string>(names->rows.at(0)[0]), "python3 (train.py)");
  auto roll = (*r)->Query("SELECT count FROM op_stats_seconds WHERE op = 'cudaLaunchKernel'");
  ASSERT_TRUE(roll.ok());
  EXPECT_EQ(std::get<int64_t>(roll->rows.at(0)[0]), 1);
}

TEST_F(StoreTest, EventsViewShowsNewestSessionOnly) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  w->AppendEvent(Switch(1, 7, 10));
  ASSERT_TRUE(w->BeginSession({}).ok());
  w->AppendEvent(Switch(1, 8, 10));
  w->AppendEvent(Switch(2, 8, 10));
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query("SELECT COUNT(*), MIN(pid) FROM events");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::get<int64_t>(t->rows[0][0]), 2);
  EXPECT_EQ(std::get<int64_t>(t->rows[0][1]), 8);
  auto all = (*r)->Query("SELECT COUNT(*) FROM events_all");
  EXPECT_EQ(std::get<int64_t>(all->rows[0][0]), 3);
}

TEST_F(StoreTest, ReaderRefusesWritesAttachAndPragmaChanges) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  for (const char* sql :
       {"DELETE FROM event_rows", "INSERT INTO meta VALUES ('a','b')", "DROP TABLE sessions",
        "ATTACH DATABASE '/tmp/x.db' AS x", "PRAGMA journal_mode=DELETE",
        "CREATE TABLE t(x)", "SELECT load_extension('/tmp/x.so')"}) {
    auto t = (*r)->Query(sql);
    EXPECT_FALSE(t.ok()) << sql;
    EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied) << sql << ": " << t.status().message();
  }
  auto bad = (*r)->Query("SELEC 1");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("syntax error"), std::string::npos);
  auto two = (*r)->Query("SELECT 1; DELETE FROM sessions");
  EXPECT_FALSE(two.ok());
  auto ok = (*r)->Query("PRAGMA table_info(events)");
  EXPECT_TRUE(ok.ok()) << ok.status().message();
}

TEST_F(StoreTest, QueryTimeoutInterruptsLongStatements) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  QueryOptions o;
  o.timeout_ms = 200;
  auto t = (*r)->Query(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT MAX(x) FROM c", o);
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable);
}

// Issue 12: fts3_tokenizer leaked a code address and, with a pointer argument, crashed the
// MCP server on the next MATCH; every function off the allow-list is refused.
TEST_F(StoreTest, ReaderRefusesFunctionsOffTheAllowList) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  for (const char* sql : {"SELECT hex(fts3_tokenizer('porter'))",
                          "SELECT fts3_tokenizer('simple', x'4141414141414141')",
                          "SELECT sqlite_compileoption_get(0)", "SELECT sqlite_log(1, 'x')",
                          "SELECT load_extension('/tmp/x.so')", "SELECT fts5_source_id()"}) {
    auto t = (*r)->Query(sql);
    EXPECT_EQ(t.status().code(), StatusCode::kPermissionDenied) << sql;
    EXPECT_NE(t.status().message().find("list of harmless SQL functions"), std::string::npos)
        << t.status().message();
  }
  auto ok = (*r)->Query(
      "SELECT printf('%d', 7), json_extract('{\"a\":2}', '$.a'), '{\"b\":3}' ->> '$.b', "
      "upper('x'), round(2.5), group_concat(id) FROM sessions");
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(CellToText(ok->rows[0][0], false), "7");
  EXPECT_EQ(CellToText(ok->rows[0][2], false), "3");
}

// randomblob(1e9) took 6.35 GB before the value limit.
TEST_F(StoreTest, ReaderCapsTheSizeOfOneValue) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  for (const char* sql : {"SELECT length(randomblob(1e9))", "SELECT length(zeroblob(1e9))",
                          "SELECT length(hex(randomblob(40000000)))"}) {
    auto t = (*r)->Query(sql);
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << sql;
    EXPECT_NE(t.status().message().find("larger than 64 MiB"), std::string::npos)
        << t.status().message();
  }
}

// The progress handler runs every 10,000 VM steps; a statement whose steps each build a 60 MB
// string ran far past its limit. The watchdog interrupts it on time.
TEST_F(StoreTest, QueryTimeLimitHoldsForSlowSteps) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  QueryOptions o;
  o.timeout_ms = 300;
  auto start = std::chrono::steady_clock::now();
  auto t = (*r)->Query(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 2000) "
      "SELECT SUM(length(hex(randomblob(30000000)))) FROM c", o);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(t.status().code(), StatusCode::kUnavailable) << t.status().message();
  EXPECT_LT(s, 2.0) << "a 300 ms limit stopped the statement after " << s << " s";
}

// Issue 12 (MCP notifications/cancelled): a flag set from another thread stops the statements
// of the thread in a QueryCancelScope, those with slow single steps (watchdog) as well as
// endless ones (progress handler) and ForEach, which has no time limit at all.
TEST_F(StoreTest, QueryCancelScopeStopsStatementsFromAnotherThread) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  const char* kSlowSteps =
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 2000) "
      "SELECT SUM(length(hex(randomblob(30000000)))) FROM c";
  const char* kEndless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                         "SELECT COUNT(*) FROM c";
  for (int variant = 0; variant < 3; ++variant) {
    std::atomic<bool> cancel{false};
    QueryCancelScope scope(&cancel);
    std::thread canceller([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      cancel.store(true);
    });
    auto start = std::chrono::steady_clock::now();
    Status st;
    if (variant == 0) {
      st = (*r)->Query(kSlowSteps).status();  // no time limit
    } else if (variant == 1) {
      st = (*r)->Query(kEndless, QueryOptions{0, 60'000}).status();
    } else {
      st = (*r)->ForEach(kEndless, {}, [](sqlite3_stmt*) {});
    }
    canceller.join();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_EQ(st.code(), StatusCode::kUnavailable) << variant << ": " << st.message();
    EXPECT_NE(st.message().find("cancelled"), std::string::npos) << st.message();
    EXPECT_LT(s, 3.0) << "variant " << variant << " stopped " << s << " s after the cancel";
  }
  // A flag that is not set changes nothing, and the connection works after a cancellation.
  std::atomic<bool> idle{false};
  QueryCancelScope scope(&idle);
  auto t = (*r)->Query("SELECT 41 + 1");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(std::get<int64_t>(t->rows[0][0]), 42);
}

// Rows reach the callback as they are read: a statement without end streams until its limit.
TEST_F(StoreTest, QueryStreamDoesNotCollectRows) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  QueryOptions o;
  o.timeout_ms = 500;
  int64_t seen = 0;
  std::vector<std::string> columns;
  auto end = (*r)->QueryStream(
      "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c", {}, o,
      [&](const std::vector<std::string>& c) { columns = c; },
      [&](std::vector<Cell>&& row) {
        EXPECT_EQ(std::get<int64_t>(row[0]), seen + 1);
        ++seen;
      });
  EXPECT_EQ(end.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(columns, std::vector<std::string>{"x"});
  EXPECT_GT(seen, 1000);
}

// Issue 12: after kill -9 the session row has no stop time and events = 0; readers derive both.
TEST_F(StoreTest, SessionsOfAKilledTracerGetTotalsFromTheirRows) {
  auto w = NewWriter();
  SessionInfo info;
  info.wall_start_ns = 1'000'000'000'000;
  ASSERT_TRUE(w->BeginSession(info).ok());
  std::vector<Event> events = {Switch(1000, 1, 1), Switch(5'000'000'000, 1, 1), Switch(7000, 2, 2)};
  w->AppendEvents(events.data(), events.size());
  ASSERT_TRUE(w->Flush().ok());
  ASSERT_TRUE(w->Close().ok());  // no EndSession: what a killed tracer leaves
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto sessions = (*r)->Sessions();
  ASSERT_TRUE(sessions.ok()) << sessions.status().message();
  ASSERT_EQ(sessions->size(), 1u);
  EXPECT_EQ((*sessions)[0].events, 3);
  EXPECT_EQ((*sessions)[0].wall_stop_ns, 1'000'000'000'000 + 5'000'000'000);
}

TEST_F(StoreTest, EventsWithEqualTimestampsAreAllKeptAcrossBatches) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  for (int batch = 0; batch < 3; ++batch) {
    std::vector<Event> same(5, Switch(1000, 1, 1));
    w->AppendEvents(same.data(), same.size());
    ASSERT_TRUE(w->Flush().ok());
  }
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  auto t = (*r)->Query("SELECT COUNT(*) FROM events WHERE timestamp = 1000");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(std::get<int64_t>(t->rows[0][0]), 15);
}

// Batches arrive out of order (rows are emitted when calls end) and overlap earlier batches in
// time: every row is kept, in timestamp order, equal timestamps in arrival order.
TEST_F(StoreTest, OutOfOrderAndLateRowsAreAllKeptInTimestampOrder) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  int64_t arrival = 0;
  for (int batch = 0; batch < 4; ++batch) {
    std::vector<Event> events;
    for (int i = 0; i < 3000; ++i) {
      // Timestamps step back and forth within the batch, repeat, and reach into the time span
      // of the batches committed before.
      int64_t ts = batch * 1000 + (i * 7919) % 2000 - 500;
      events.push_back(Switch(ts, 1, arrival++));  // duration_ns records the arrival order
    }
    w->AppendEvents(events.data(), events.size());
    ASSERT_TRUE(w->Flush().ok());
  }
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query("SELECT timestamp, duration_ns FROM events");  // key order
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->rows.size(), 12000u);
  for (size_t i = 1; i < t->rows.size(); ++i) {
    int64_t ts0 = std::get<int64_t>(t->rows[i - 1][0]), ts1 = std::get<int64_t>(t->rows[i][0]);
    ASSERT_LE(ts0, ts1) << "row " << i;
    // Within one batch equal timestamps keep arrival order (batches are 3000 arrivals apart).
    int64_t a0 = std::get<int64_t>(t->rows[i - 1][1]), a1 = std::get<int64_t>(t->rows[i][1]);
    if (ts0 == ts1 && a0 / 3000 == a1 / 3000) {
      ASSERT_LT(a0, a1) << "row " << i;
    }
  }
}

// Events are stored in chunks (event_chunk.h). Every argument survives the round trip: NULLs
// in any pattern, negative and extreme values, addresses far apart.
TEST(EventChunkTest, EncodesAndDecodesEveryColumn) {
  std::mt19937_64 rng(7);
  std::vector<Event> events(kChunkEvents);
  int64_t ts = -5000;
  auto value = [&]() -> int64_t {
    switch (rng() % 6) {
      case 0: return kNull;
      case 1: return 0;
      case 2: return -static_cast<int64_t>(rng() % 100000);
      case 3: return static_cast<int64_t>(rng());  // any 64-bit value, kNull aside
      case 4: return kNull + 1;
      default: return std::numeric_limits<int64_t>::max();
    }
  };
  for (Event& e : events) {
    ts += static_cast<int64_t>(rng() % 3000);  // repeats included
    e.ts_ns = ts;
    e.pid = static_cast<int32_t>(rng() % 4) * 1000 + 1;
    e.tid = e.pid + static_cast<int32_t>(rng() % 3) - 1;
    e.op = static_cast<Op>(rng() % 300);
    e.duration_ns = static_cast<int64_t>(rng() % 10'000'000);
    for (int64_t Event::*m : kEventOptionalColumns) e.*m = value();
  }
  events[3].ret = kNull;  // a column present in all rows but one, and one in none
  for (Event& e : events) e.waker_tid = kNull;
  for (size_t n : {size_t{1}, size_t{9}, kChunkEvents}) {
    std::vector<uint32_t> order(n);
    for (size_t i = 0; i < n; ++i) order[i] = static_cast<uint32_t>(i);
    std::string blob;
    EncodeChunk(events.data(), order.data(), n, &blob);
    std::vector<ChunkRow> rows;
    ASSERT_TRUE(DecodeChunk(reinterpret_cast<const uint8_t*>(blob.data()), blob.size(), n,
                            events[0].ts_ns, 3, &rows).ok());
    ASSERT_EQ(rows.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const Event& e = events[i];
      const int64_t* c = rows[i].col;
      std::vector<int64_t> want = {e.ts_ns, 3 * kChunkSeqStride + static_cast<int64_t>(i), e.pid,
                                   e.tid, static_cast<int64_t>(e.op), e.duration_ns, e.ret,
                                   e.bytes, e.kind, e.cpu, e.other_pid, e.runq_ns, e.addr,
                                   e.name_id, e.stack_id, e.waker_pid, e.waker_tid,
                                   e.since_work_ns};
      ASSERT_EQ(std::vector<int64_t>(c, c + kChunkColumns), want) << "event " << i << " of " << n;
    }
    // A damaged chunk is an error, never a crash or made-up rows.
    for (size_t cut : {size_t{0}, blob.size() / 2, blob.size() - 1}) {
      EXPECT_FALSE(DecodeChunk(reinterpret_cast<const uint8_t*>(blob.data()), cut, n,
                               events[0].ts_ns, 3, &rows).ok()) << "cut at " << cut;
    }
    std::string longer = blob + '\x01';
    EXPECT_FALSE(DecodeChunk(reinterpret_cast<const uint8_t*>(longer.data()), longer.size(), n,
                             events[0].ts_ns, 3, &rows).ok());
  }
}

// A chunk written before schema 13 (format 1: no since_work_ns) reads with that column NULL and
// every other column as written.
TEST(EventChunkTest, AFormatOneChunkReadsTheNewColumnAsNull) {
  std::vector<Event> events(5);
  for (size_t i = 0; i < events.size(); ++i) {
    events[i].ts_ns = 1000 + static_cast<int64_t>(i);
    events[i].pid = events[i].tid = 7;
    events[i].op = Op::kCudaStreamSync;
    events[i].duration_ns = 50;
    events[i].waker_tid = static_cast<int64_t>(i);
  }
  std::vector<uint32_t> order = {0, 1, 2, 3, 4};
  std::string blob;
  EncodeChunk(events.data(), order.data(), events.size(), &blob);
  // Format 1 is format 2 without the last column's tag (none present here: one 0 byte).
  ASSERT_EQ(blob[0], 2);
  ASSERT_EQ(blob.back(), 0);
  std::string v1 = blob.substr(0, blob.size() - 1);
  v1[0] = 1;
  std::vector<ChunkRow> rows;
  ASSERT_TRUE(DecodeChunk(reinterpret_cast<const uint8_t*>(v1.data()), v1.size(), 5, 1000, 3,
                          &rows).ok());
  ASSERT_EQ(rows.size(), 5u);
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].col[2 + kEventColumn_waker_tid], static_cast<int64_t>(i));
    EXPECT_EQ(rows[i].col[2 + kEventColumn_since_work_ns], kNull);
  }
  // A format 1 chunk with a twelfth column's tag is damaged, not misread.
  std::string odd = blob;
  odd[0] = 1;
  EXPECT_FALSE(DecodeChunk(reinterpret_cast<const uint8_t*>(odd.data()), odd.size(), 5, 1000, 3,
                           &rows).ok());
}

// event_rows over chunks that overlap in time (late events, batches in any order) gives the
// same rows as a plain table would: every constraint on session and ts, in (ts, seq) order
// without an ORDER BY (and reversed with ORDER BY ts DESC), agreeing with a brute-force filter
// of what was written.
TEST_F(StoreTest, EventRowsOverOverlappingChunksAnswersEveryRange) {
  std::mt19937_64 rng(11);
  auto w = NewWriter();
  std::map<int64_t, std::vector<int64_t>> written;  // session -> timestamps
  for (int session = 0; session < 2; ++session) {
    ASSERT_TRUE(w->BeginSession({}).ok());
    int64_t id = w->session_id();
    int64_t now = 0;
    for (int batch = 0; batch < 40; ++batch) {
      std::vector<Event> events;
      for (int i = 0; i < 200; ++i) {
        now += static_cast<int64_t>(rng() % 400'000);
        // One in ten started long before (a call or a sleep that ends now): up to 3 s back.
        int64_t ts = rng() % 10 == 0 ? now - static_cast<int64_t>(rng() % 3'000'000'000) : now;
        events.push_back(Switch(ts, 1 + static_cast<int32_t>(rng() % 3), 1));
        written[id].push_back(ts);
      }
      w->AppendEvents(events.data(), events.size());
      ASSERT_TRUE(w->Flush().ok());
    }
  }
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto chunks = (*r)->Query("SELECT COUNT(*), MAX(n), MAX(last_ts - ts) FROM event_chunks");
  ASSERT_TRUE(chunks.ok());
  EXPECT_GT(std::get<int64_t>(chunks->rows[0][0]), 100);
  EXPECT_LE(std::get<int64_t>(chunks->rows[0][1]), static_cast<int64_t>(kChunkEvents));
  EXPECT_LE(std::get<int64_t>(chunks->rows[0][2]), kChunkSpanNs);
  for (auto& [id, ts] : written) {
    std::sort(ts.begin(), ts.end());
    int64_t last = ts.back();
    std::string sess = "session = " + std::to_string(id);
    auto count = [&](auto pred) {
      return static_cast<int64_t>(std::count_if(ts.begin(), ts.end(), pred));
    };
    for (int q = 0; q < 30; ++q) {
      int64_t a = static_cast<int64_t>(rng() % static_cast<uint64_t>(last + 1));
      int64_t b = a + static_cast<int64_t>(rng() % 2'000'000'000);
      int64_t pick = ts[rng() % ts.size()];
      std::vector<std::pair<std::string, int64_t>> cases = {
          {"ts >= " + std::to_string(a) + " AND ts < " + std::to_string(b),
           count([&](int64_t t) { return t >= a && t < b; })},
          {"ts > " + std::to_string(a) + " AND ts <= " + std::to_string(b),
           count([&](int64_t t) { return t > a && t <= b; })},
          {"ts = " + std::to_string(pick), count([&](int64_t t) { return t == pick; })},
          {"ts < " + std::to_string(a) + ".5", count([&](int64_t t) { return t <= a; })},
          {"ts > " + std::to_string(a) + ".5", count([&](int64_t t) { return t > a; })},
          {"ts >= " + std::to_string(b) + " AND ts < " + std::to_string(a),
           int64_t{0}},
          // As in a plain INTEGER column: numeric text is its number, other text sorts after
          // every integer, NULL matches nothing.
          {"ts < '" + std::to_string(a) + "'", count([&](int64_t t) { return t < a; })},
          {"ts < 'abc'", static_cast<int64_t>(ts.size())},
          {"ts >= 'abc'", int64_t{0}},
          {"ts >= NULL", int64_t{0}},
      };
      for (const auto& [where, want] : cases) {
        auto t = (*r)->Query("SELECT ts, seq FROM event_rows WHERE " + sess + " AND " + where);
        ASSERT_TRUE(t.ok()) << t.status().message();
        ASSERT_EQ(static_cast<int64_t>(t->rows.size()), want) << where;
        for (size_t i = 1; i < t->rows.size(); ++i) {
          auto prev = std::make_pair(std::get<int64_t>(t->rows[i - 1][0]),
                                     std::get<int64_t>(t->rows[i - 1][1]));
          auto cur = std::make_pair(std::get<int64_t>(t->rows[i][0]),
                                    std::get<int64_t>(t->rows[i][1]));
          ASSERT_LT(prev, cur) << where << ", row " << i;
        }
        // Descending (what MAX(ts) asks for): the same rows, reversed.
        auto d = (*r)->Query("SELECT ts, seq FROM event_rows WHERE " + sess + " AND " + where +
                             " ORDER BY ts DESC, seq DESC");
        ASSERT_TRUE(d.ok()) << d.status().message();
        ASSERT_EQ(d->rows.size(), t->rows.size()) << where;
        for (size_t i = 0; i < d->rows.size(); ++i) {
          ASSERT_EQ(d->rows[i], t->rows[t->rows.size() - 1 - i]) << where << ", row " << i;
        }
      }
    }
    auto all = (*r)->Query("SELECT COUNT(*), COUNT(DISTINCT seq), MIN(ts), MAX(ts) FROM "
                           "event_rows WHERE " + sess);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(std::get<int64_t>(all->rows[0][0]), static_cast<int64_t>(ts.size()));
    EXPECT_EQ(std::get<int64_t>(all->rows[0][1]), static_cast<int64_t>(ts.size()));
    EXPECT_EQ(std::get<int64_t>(all->rows[0][2]), ts.front());
    EXPECT_EQ(std::get<int64_t>(all->rows[0][3]), ts.back());
  }
  // Without a session constraint: every session, in (session, ts) order.
  auto t = (*r)->Query("SELECT session, ts FROM event_rows");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rows.size(), written.begin()->second.size() + written.rbegin()->second.size());
  EXPECT_TRUE(std::is_sorted(t->rows.begin(), t->rows.end(), [](const auto& x, const auto& y) {
    return std::make_pair(std::get<int64_t>(x[0]), std::get<int64_t>(x[1])) <
           std::make_pair(std::get<int64_t>(y[0]), std::get<int64_t>(y[1]));
  }));
}

// A damaged chunk makes a read of event_rows fail with a message; it does not crash the reader.
TEST_F(StoreTest, CorruptChunkIsAnErrorNotACrash) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  for (int i = 0; i < 10; ++i) w->AppendEvent(Switch(i * 1000, 1, 1));
  ASSERT_TRUE(w->Close().ok());
  EditFile("UPDATE event_chunks SET data = substr(data, 1, 5)");
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query("SELECT COUNT(*) FROM event_rows");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("corrupt"), std::string::npos) << t.status().message();
  // A count no chunk can hold is refused before anything is sized by it.
  EditFile("UPDATE event_chunks SET n = 1000000000000");
  auto huge = (*r)->Query("SELECT COUNT(*) FROM event_rows");
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("corrupt"), std::string::npos)
      << huge.status().message();
}

// Issue 32 item 5: one edited chunk row (ts near INT64_MAX) stretched the session to 292
// years; explain --from 0, report and export then sized buffers from that span and aborted on
// bad_alloc. Rows outside the session's plausible span are not part of it, a chunk whose
// timestamps cannot be is corrupt, and no window is longer than kMaxWindowNs.
TEST_F(StoreTest, AnEditedChunkDoesNotStretchTheSession) {
  auto w = NewWriter();
  SessionInfo info;
  info.wall_start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count() - 10'000'000'000;
  auto session = w->BeginSession(info);
  ASSERT_TRUE(session.ok());
  for (int i = 0; i < 20; ++i) w->AppendEvent(Switch(i * 300'000'000LL, 1, 1000));  // 20 chunks
  ASSERT_TRUE(w->Close().ok());
  EditFile("UPDATE event_chunks SET ts = 9223372035854775807, "
           "last_ts = 9223372036854775807 WHERE chunk = 2");
  EditFile("UPDATE event_chunks SET ts = -9223372036854775807, "
           "last_ts = -9223372036754775807 WHERE chunk = 3");
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  WindowRequest whole;
  whole.from_ns = 0;
  auto window = ResolveWindow(**r, whole);
  ASSERT_TRUE(window.ok()) << window.status().message();
  EXPECT_EQ(window->first_ts_ns, 0);
  EXPECT_EQ(window->last_ts_ns, 19 * 300'000'000LL);
  auto in_window = (*r)->Query("SELECT COUNT(*) FROM event_rows WHERE session = 1 AND ts >= " +
                               std::to_string(window->begin_ns) + " AND ts < " +
                               std::to_string(window->end_ns));
  ASSERT_TRUE(in_window.ok()) << in_window.status().message();
  EXPECT_EQ(std::get<int64_t>(in_window->rows.at(0)[0]), 18) << "all but the edited chunks' rows";
  // The edited rows still read as what the file says (no wrapped timestamps)...
  auto all = (*r)->Query("SELECT COUNT(*), MAX(ts) FROM event_rows");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(std::get<int64_t>(all->rows.at(0)[0]), 20);
  EXPECT_EQ(std::get<int64_t>(all->rows.at(0)[1]), 9223372035854775807LL);
  // ...but a chunk whose timestamps could not fit in 64 bits is corrupt.
  EditFile("UPDATE event_chunks SET ts = 9223372036854775000 WHERE chunk = 2");
  auto wrapped = (*r)->Query("SELECT COUNT(*) FROM event_rows");
  ASSERT_FALSE(wrapped.ok());
  EXPECT_NE(wrapped.status().message().find("corrupt"), std::string::npos)
      << wrapped.status().message();
  // A window longer than kMaxWindowNs is refused with a hint, whatever the file says.
  auto century = WindowOfSession(whole, 1, 0, int64_t{100} * 365 * kNsPerDay);
  ASSERT_FALSE(century.ok());
  EXPECT_NE(century.status().message().find("at most 31 days"), std::string::npos);
}

TEST_F(StoreTest, RowLimitFlagsTruncation) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  for (int i = 0; i < 10; ++i) w->AppendEvent(Switch(i, 1, 1));
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  QueryOptions o;
  o.max_rows = 3;
  auto t = (*r)->Query("SELECT * FROM events", o);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rows.size(), 3u);
  EXPECT_TRUE(t->truncated);
}

TEST_F(StoreTest, MissingEmptyForeignAndCorruptFilesAreClearErrors) {
  EXPECT_EQ(StoreReader::Open(dir_ + "/nope.db").status().code(), StatusCode::kNotFound);
  { std::ofstream(dir_ + "/empty.db"); }
  EXPECT_EQ(StoreReader::Open(dir_ + "/empty.db").status().code(),
            StatusCode::kFailedPrecondition);
  { std::ofstream(dir_ + "/text.db") << std::string(8192, 'x'); }
  auto text = StoreReader::Open(dir_ + "/text.db");
  EXPECT_EQ(text.status().code(), StatusCode::kDataLoss) << text.status().message();
  // A valid SQLite file that is not ours.
  {
    sqlite3* db = nullptr;
    sqlite3_open((dir_ + "/other.db").c_str(), &db);
    sqlite3_exec(db, "CREATE TABLE x(y)", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  auto other = StoreReader::Open(dir_ + "/other.db");
  EXPECT_EQ(other.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(other.status().message().find("not a gpuwhy database"), std::string::npos);
  // The writer refuses to take over a foreign file too.
  EXPECT_FALSE(StoreWriter::Create(dir_ + "/other.db", {}).ok());
  EXPECT_FALSE(StoreWriter::Create(dir_ + "/text.db", {}).ok());
}

TEST_F(StoreTest, NewerSchemaIsRefused) {
  {
    auto w = NewWriter();
    ASSERT_TRUE(w->Close().ok());
  }
  sqlite3* db = nullptr;
  sqlite3_open(path_.c_str(), &db);
  sqlite3_exec(db, "UPDATE meta SET value='999' WHERE key='schema_version'", nullptr, nullptr,
               nullptr);
  sqlite3_close(db);
  auto r = StoreReader::Open(path_);
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("newer"), std::string::npos);
  auto w = StoreWriter::Create(path_, {});
  EXPECT_FALSE(w.ok());
}

TEST_F(StoreTest, ReaderNeverChangesTheFile) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  w->AppendEvent(Switch(1, 1, 1));
  ASSERT_TRUE(w->Close().ok());
  std::ifstream before_in(path_, std::ios::binary);
  std::string before((std::istreambuf_iterator<char>(before_in)), {});
  {
    auto r = StoreReader::Open(path_);
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE((*r)->Query("SELECT * FROM events").ok());
  }
  std::ifstream after_in(path_, std::ios::binary);
  std::string after((std::istreambuf_iterator<char>(after_in)), {});
  EXPECT_EQ(before, after);
}

// 400 s of one switch per ms from `pids` processes, flushed every 20,000 rows (so a capped
// writer prunes as it goes), then closed.
void WriteSwitchesUnderACap(StoreWriter& w, int pids) {
  ASSERT_TRUE(w.BeginSession({}).ok());
  std::vector<Event> batch;
  for (int i = 0; i < 400000; ++i) {
    Event e = Switch(int64_t{i} * 1000000, 1 + i % pids, 1000 + i);
    e.addr = 0x7f0000000000 + i;
    batch.push_back(e);
    if (batch.size() == 20000) {
      w.AppendEvents(batch.data(), batch.size());
      batch.clear();
      ASSERT_TRUE(w.Flush().ok());
    }
  }
  ASSERT_TRUE(w.Close().ok());
}

TEST_F(StoreTest, MaxDbPrunesOldestRowsToStayUnderTheCap) {
  WriterOptions o;
  o.max_db_bytes = 2 << 20;  // 2 MiB
  auto w = NewWriter(o);
  WriteSwitchesUnderACap(*w, 50);
  EXPECT_GT(w->stats().rows_pruned, 0);
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query("SELECT MIN(timestamp), MAX(timestamp) FROM events");
  ASSERT_TRUE(t.ok());
  EXPECT_GT(std::get<int64_t>(t->rows[0][0]), 0);  // the oldest rows are gone
  EXPECT_EQ(std::get<int64_t>(t->rows[0][1]), int64_t{399999} * 1000000);  // newest kept
  std::ifstream f(path_, std::ios::binary | std::ios::ate);
  EXPECT_LE(static_cast<int64_t>(f.tellg()), o.max_db_bytes);
}

// Copies the row budget aggregated are named by their direction in op_seconds; the analysis
// reads them per process, op and direction (device-to-device too), and rows stay apart.
// Issue 34: the process tables showed a DataLoader worker's wait for its next index (10-15 s
// on a GPU run) and the main thread's wait for its first batch, before its first CUDA call, as
// the job's worst stalls. A sleep the parent ended is idle time; a stall begins once the job
// has started.
TEST_F(StoreTest, SwitchTotalsTellWaitsForWorkAndStartUpFromStalls) {
  auto w = NewWriter();
  auto session = w->BeginSession({});
  ASSERT_TRUE(session.ok());
  for (auto [pid, ppid] : {std::pair{100, 1}, {101, 100}}) {
    ProcessInfo p;
    p.pid = pid;
    p.ppid = ppid;
    p.name = pid == 100 ? "python3" : "pt_data_worker:0";
    p.tracked = true;
    w->UpsertProcess(p);
  }
  auto blocked = [](int64_t ts, int32_t pid, int64_t dur, int64_t waker) {
    Event e = Switch(ts, pid, dur);
    e.kind = static_cast<int64_t>(SwitchKind::kBlocked);
    e.runq_ns = 0;
    e.waker_pid = waker;
    e.waker_tid = waker;
    return e;
  };
  Event cuda;
  cuda.ts_ns = 1'000'000'000;
  cuda.pid = 100;
  cuda.tid = 100;
  cuda.op = Op::kCudaMalloc;
  cuda.duration_ns = 1'000;
  std::vector<Event> rows = {
      blocked(300'000'000, 100, 600'000'000, 101),  // main: the first batch, before CUDA
      cuda,
      blocked(1'100'000'000, 100, 20'000'000, 101),  // main: waits for a batch (a stall)
      blocked(1'200'000'000, 101, 5'000'000'000, 100),  // worker: waits for an index (idle)
      blocked(6'300'000'000, 101, 40'000'000, 0),        // worker: woken by an interrupt
      Switch(7'000'000'000, 101, 3'000'000),             // worker: preempted
  };
  w->AppendEvents(rows.data(), rows.size());
  ASSERT_TRUE(w->Close().ok());
  auto reader = StoreReader::Open(path_);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  StatusOr<int64_t> start = ReadFirstCudaCall(**reader, *session);
  ASSERT_TRUE(start.ok()) << start.status().message();
  EXPECT_EQ(*start, 1'000'000'000);
  StatusOr<WindowRows> got = ReadFirstTenSeconds(*session);
  ASSERT_TRUE(got.ok()) << got.status().message();
  std::map<int32_t, SwitchTotals> by_pid;
  for (const SwitchTotals& t : got->switch_totals) by_pid[t.pid] = t;
  ASSERT_EQ(by_pid.size(), 2u);
  EXPECT_EQ(by_pid[100].count, 2);
  EXPECT_EQ(by_pid[100].max_ns, 600'000'000) << "the brief's worst_stall_ms keeps every row";
  EXPECT_EQ(by_pid[100].stall_max_ns, 20'000'000) << "start-up is not the job's stall";
  EXPECT_EQ(by_pid[100].idle_ns, 0) << "a worker ending the main thread's wait is no idle time";
  EXPECT_EQ(by_pid[101].count, 3);
  EXPECT_EQ(by_pid[101].off_ns, 5'043'000'000);
  EXPECT_EQ(by_pid[101].max_ns, 5'000'000'000);
  EXPECT_EQ(by_pid[101].stall_max_ns, 40'000'000);
  EXPECT_EQ(by_pid[101].idle_ns, 5'000'000'000);
}

TEST_F(StoreTest, AggregatedCopiesAreReadByDirection) {
  auto w = NewWriter();
  auto session = w->BeginSession({});
  ASSERT_TRUE(session.ok());
  Event row;
  row.ts_ns = 2'000'000'000;
  row.pid = 7;
  row.tid = 7;
  row.op = Op::kCudaMemcpyAsync;
  row.duration_ns = 40'000;
  row.bytes = 1000;
  row.kind = 1;
  w->AppendEvents(&row, 1);
  std::vector<OpCount> counts;
  for (auto [sec, dir, n] : {std::tuple{2, "HtoD", 10}, {3, "HtoD", 5}, {3, "DtoD", 7}}) {
    OpCount c;
    c.sec = sec;
    c.pid = 7;
    c.op = Op::kCudaMemcpyAsync;
    c.name_id = w->InternString(dir);
    c.count = n;
    c.total_ns = n * 3'000;
    c.max_ns = 4'000;
    c.bytes = n * 4096;
    counts.push_back(c);
  }
  OpCount launch;
  launch.sec = 2;
  launch.pid = 7;
  launch.op = Op::kCudaLaunchKernel;
  launch.name_id = w->InternString("gemm");
  launch.count = 100;
  counts.push_back(launch);
  w->AppendOpCounts(counts);
  ASSERT_TRUE(w->Close().ok());
  StatusOr<WindowRows> rows = ReadFirstTenSeconds(*session);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  std::map<std::string, std::pair<int64_t, int64_t>> got;  // direction -> (count, bytes)
  for (const CopyAggregateRow& a : rows->copy_aggregates) {
    EXPECT_EQ(a.pid, 7);
    EXPECT_EQ(a.op, Op::kCudaMemcpyAsync);
    got[a.direction] = {a.count, a.bytes};
  }
  EXPECT_EQ(got.size(), 2u) << "the row and the launch are not aggregated copies";
  EXPECT_EQ(got["HtoD"], std::make_pair(int64_t{15}, int64_t{15 * 4096}));
  EXPECT_EQ(got["DtoD"], std::make_pair(int64_t{7}, int64_t{7 * 4096}));
}

// Issue 32 item 10: a traced job chooses its name, command line, script path and function
// names. What the readers hand to the reports is one printable line each: a line break there
// forged report lines in explain's caller sections, an escape would drive the terminal.
TEST_F(StoreTest, NamesAJobChoseAreReadAsOnePrintableLine) {
  auto w = NewWriter();
  auto session = w->BeginSession({});
  ASSERT_TRUE(session.ok());
  const std::string evil = "x\"{}\n  FORGED line\r\x1b]0;t\x07";
  w->UpsertProcess({7, 1, "py" + evil, "python3", "python3 " + evil, 0, kNull, kNull, true});
  const std::string frames =
      R"([{"kind":"py","function":"f\n  FORGED fn","file":"/t/a\n  FORGED.py","line":3},)"
      R"({"kind":"native","function":"g\u001b[2J","file":"b.cc","line":1,"module":"m\nFORGED",)"
      R"("offset":0,"function_offset":0}])";
  w->AppendStack(42, 7, "/t/a.py:3", frames);
  Event row;
  row.ts_ns = 2'000'000'000;
  row.pid = 7;
  row.tid = 7;
  row.op = Op::kCudaStreamSync;
  row.duration_ns = 2'000'000;
  row.stack_id = 42;
  row.name_id = w->InternString("kern" + evil);
  w->AppendEvents(&row, 1);
  ASSERT_TRUE(w->Close().ok());
  StatusOr<WindowRows> rows = ReadFirstTenSeconds(*session);
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  auto one_line = [](const std::string& text) {
    return text.find_first_of("\n\r\x1b\x07") == std::string::npos;
  };
  ASSERT_EQ(rows->processes.count(7), 1u);
  EXPECT_TRUE(one_line(rows->processes.at(7).name)) << rows->processes.at(7).name;
  EXPECT_TRUE(one_line(rows->processes.at(7).cmdline)) << rows->processes.at(7).cmdline;
  EXPECT_NE(rows->processes.at(7).name.find("FORGED line"), std::string::npos) << "kept, made safe";
  ASSERT_EQ(rows->stack_frames.count(42), 1u);
  ASSERT_EQ(rows->stack_frames.at(42).size(), 2u);
  for (const StackFrameRow& f : rows->stack_frames.at(42)) {
    EXPECT_TRUE(one_line(f.function)) << f.function;
    EXPECT_TRUE(one_line(f.file)) << f.file;
    EXPECT_TRUE(one_line(f.module)) << f.module;
  }
}

// Issue 19: thread_rollups, kept at ingest, say what a GROUP BY over the raw rows says, for
// every cause, waker class and CUDA counter — also for sleeps reported long after they began
// (a row arrives when the thread runs again) and for rows that arrive out of order.
// The row budget's aggregates and the rows of the same second meet in one op_seconds row:
// counts, time and bytes add up, and op_latency holds one histogram of both.
TEST_F(StoreTest, AggregatedCallsAndRowsShareOneSecondAndHistogram) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  std::vector<Event> rows;
  for (int i = 0; i < 3; ++i) {
    Event e;
    e.ts_ns = 5'000'000'000 + i * 1000;
    e.pid = 7;
    e.tid = 7;
    e.op = Op::kCudaMemcpyAsync;
    e.duration_ns = 40'000;  // slow: rows (bucket 15: 32,768-65,535 ns)
    e.bytes = 1000;
    rows.push_back(e);
  }
  w->AppendEvents(rows.data(), rows.size());
  OpCount c;
  c.sec = 5;
  c.pid = 7;
  c.op = Op::kCudaMemcpyAsync;
  c.count = 10;
  c.total_ns = 30'000;
  c.max_ns = 4'000;
  c.bytes = 10 * 4096;
  c.log2_hist[11] = 6;  // 2,048-4,095 ns
  c.log2_hist[15] = 4;
  w->AppendOpCounts({c});
  ASSERT_TRUE(w->Close().ok());
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
  ScopedDb db(raw);
  EXPECT_EQ(*QueryText(db.get(),
                       "SELECT count || ' ' || total_ns || ' ' || max_ns || ' ' || bytes FROM "
                       "op_stats_seconds WHERE op = 'cudaMemcpyAsync' AND sec = 5",
                       ""),
            "13 150000 40000 43960");
  EXPECT_EQ(*QueryText(db.get(),
                       "SELECT group_concat(from_ns || ':' || count, ' ') FROM (SELECT * FROM "
                       "op_latency_hist WHERE op = 'cudaMemcpyAsync' ORDER BY from_ns)",
                       ""),
            "2048:6 32768:7");
}

TEST_F(StoreTest, ThreadRollupsAgreeWithTheRawRows) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  std::vector<Event> all;
  uint64_t x = 12345;
  auto rnd = [&](uint64_t n) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return (x >> 33) % n;
  };
  for (int i = 0; i < 60000; ++i) {
    Event e;
    e.ts_ns = int64_t{i} * 1'000'000 + static_cast<int64_t>(rnd(900'000));  // 60 s, jittered
    e.pid = 100 + static_cast<int32_t>(rnd(3));
    e.tid = e.pid + static_cast<int32_t>(rnd(3));
    uint64_t r = rnd(10);
    if (r < 6) {
      e.op = Op::kSchedSwitch;
      e.duration_ns = static_cast<int64_t>(rnd(3'000'000));
      if (rnd(50) == 0) e.duration_ns = 25'000'000'000;  // a long sleep, reported late
      e.kind = static_cast<int64_t>(rnd(4));
      e.runq_ns = e.kind == 0 ? e.duration_ns : static_cast<int64_t>(rnd(100'000));
      e.runq_ns = std::min(e.runq_ns, e.duration_ns);
      if (e.kind != 0 && rnd(4) != 0) {
        uint64_t c = rnd(3);
        e.waker_pid = c == 0 ? 0 : c == 1 ? e.pid : 999;
        e.waker_tid = e.waker_pid;
      }
    } else if (r < 8) {
      e.op = Op::kCudaStreamSync;
      e.duration_ns = static_cast<int64_t>(rnd(5'000'000));
    } else if (r < 9) {
      e.op = Op::kCudaMemcpyAsync;
      e.duration_ns = 20'000;
    } else {
      e.op = Op::kCudaLaunchKernel;  // launches are counted elsewhere, not here
      e.duration_ns = 3'000;
    }
    all.push_back(e);
  }
  // Handed over as a tracer does: by end time, in batches.
  std::stable_sort(all.begin(), all.end(), [](const Event& a, const Event& b) {
    return a.ts_ns + a.duration_ns < b.ts_ns + b.duration_ns;
  });
  for (size_t i = 0; i < all.size(); i += 4096) {
    w->AppendEvents(all.data() + i, std::min<size_t>(4096, all.size() - i));
    ASSERT_TRUE(w->Flush().ok());
  }
  ASSERT_TRUE(w->Close().ok());
  auto reader = StoreReader::Open(path_);
  ASSERT_TRUE(reader.ok());
  const std::string raw = R"sql(
    SELECT (ts / 1000000000) / 10 * 10 AS sec, pid, tid,
      SUM(op = 200), SUM(op = 200 AND kind = 0), SUM(CASE WHEN op = 200 THEN runq_ns ELSE 0 END),
      SUM(CASE WHEN op = 200 AND kind = 1 THEN duration_ns - runq_ns ELSE 0 END),
      SUM(CASE WHEN op = 200 AND kind = 2 THEN duration_ns - runq_ns ELSE 0 END),
      SUM(CASE WHEN op = 200 AND kind = 3 THEN duration_ns - runq_ns ELSE 0 END),
      SUM(op = 200 AND kind > 0 AND waker_pid = 0),
      SUM(op = 200 AND kind > 0 AND waker_pid = pid),
      SUM(op = 200 AND kind > 0 AND waker_pid NOT IN (0, pid)),
      SUM(op IN (18, 11)), SUM(op = 18), SUM(CASE WHEN op = 18 THEN duration_ns ELSE 0 END)
    FROM event_rows WHERE op <> 1 GROUP BY 1, 2, 3 ORDER BY 1, 2, 3)sql";
  const std::string rolled =
      "SELECT sec, pid, tid, switches, preempted, runq_ns, blocked_ns, io_ns, fault_ns, "
      "woken_irq, woken_same, woken_other, cuda_calls, syncs, sync_ns FROM thread_rollups "
      "ORDER BY 1, 2, 3";
  auto a = (*reader)->Query(raw);
  auto b = (*reader)->Query(rolled);
  ASSERT_TRUE(a.ok()) << a.status().message();
  ASSERT_TRUE(b.ok()) << b.status().message();
  ASSERT_GT(a->rows.size(), 50u);
  ASSERT_EQ(a->rows.size(), b->rows.size());
  for (size_t i = 0; i < a->rows.size(); ++i) {
    for (size_t c = 0; c < a->rows[i].size(); ++c) {
      ASSERT_EQ(std::get<int64_t>(a->rows[i][c]), std::get<int64_t>(b->rows[i][c]))
          << "bucket row " << i << " column " << b->columns[c];
    }
  }
}

// Issue 19, tiered retention: under --max-db the raw rows go first and the rollups stay for
// far longer, within their share of the cap.
TEST_F(StoreTest, MaxDbKeepsRollupsLongerThanRawRows) {
  WriterOptions o;
  o.max_db_bytes = 2 << 20;  // 2 MiB
  auto w = NewWriter(o);
  WriteSwitchesUnderACap(*w, 5);
  EXPECT_GT(w->stats().rows_pruned, 0);
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query(
      "SELECT (SELECT MIN(ts) FROM event_rows), (SELECT MIN(sec) FROM thread_rollups), "
      "(SELECT MIN(sec) FROM op_seconds), (SELECT MAX(sec) FROM thread_rollups)");
  ASSERT_TRUE(t.ok()) << t.status().message();
  int64_t raw_from_s = std::get<int64_t>(t->rows[0][0]) / 1'000'000'000;
  EXPECT_GT(raw_from_s, 60);                           // raw rows of the first minute pruned
  EXPECT_EQ(std::get<int64_t>(t->rows[0][1]), 0);      // their rollups kept
  EXPECT_EQ(std::get<int64_t>(t->rows[0][2]), 0);
  EXPECT_EQ(std::get<int64_t>(t->rows[0][3]), 390);    // up to the newest bucket
  std::ifstream f(path_, std::ios::binary | std::ios::ate);
  EXPECT_LE(static_cast<int64_t>(f.tellg()), o.max_db_bytes);
}

// Issue 32 item 13: a 6 s trace killed with -9 (no Close, no final flush), then a trace whose
// --max-db pruning removes the killed session's raw rows. Its rollups were kept in memory until
// their 10 s bucket closed, so it was left with nothing; now they reach the file within a
// second and outlive the raw rows, as a clean session's do.
TEST_F(StoreTest, AKilledShortSessionKeepsItsRollupsWhenPruned) {
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto w = StoreWriter::Create(path_, {});
    if (!w.ok() || !(*w)->BeginSession({}).ok()) _exit(3);
    std::vector<Event> batch;
    for (int i = 0; i < 6000; ++i) batch.push_back(Switch(int64_t{i} * 1'000'000, 7, 500'000));
    (*w)->AppendEvents(batch.data(), batch.size());  // 6 s of switches, committed in the
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // background
    kill(getpid(), SIGKILL);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  {
    auto r = StoreReader::Open(path_);
    ASSERT_TRUE(r.ok()) << r.status().message();
    auto t = (*r)->Query("SELECT COALESCE(SUM(switches), 0) FROM thread_rollups WHERE session = 1");
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_EQ(std::get<int64_t>(t->rows[0][0]), 6000) << "the killed session's rollups";
  }
  WriterOptions o;
  o.max_db_bytes = 2 << 20;
  auto w = NewWriter(o);
  WriteSwitchesUnderACap(*w, 5);  // session 2 fills the cap: session 1's raw rows go first
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto t = (*r)->Query(
      "SELECT (SELECT COUNT(*) FROM event_chunks WHERE session = 1), "
      "(SELECT COALESCE(SUM(switches), 0) FROM thread_rollups WHERE session = 1)");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(std::get<int64_t>(t->rows[0][0]), 0) << "raw rows pruned";
  EXPECT_EQ(std::get<int64_t>(t->rows[0][1]), 6000) << "rollups kept";
  WindowRequest killed;
  killed.session = 1;
  auto window = ResolveWindow(**r, killed);
  ASSERT_TRUE(window.ok()) << window.status().message();
  EXPECT_GE(window->last_ts_ns, 5'000'000'000);
}

// Issue 34: a trace that saw no job leaves an empty newest session; plain explain (session 0)
// reads the newest session that recorded something instead of failing on the empty one.
TEST_F(StoreTest, AnEmptyNewestSessionDoesNotHideTheLastRecording) {
  auto w = NewWriter();
  ASSERT_TRUE(w->BeginSession({}).ok());
  for (int i = 0; i < 10; ++i) w->AppendEvent(Switch(i * 1'000'000, 1, 1000));
  ASSERT_TRUE(w->EndSession({10, 10, 0, ""}).ok());
  ASSERT_TRUE(w->BeginSession({}).ok());  // a trace that found nothing to trace
  ASSERT_TRUE(w->EndSession({0, 0, 0, ""}).ok());
  ASSERT_TRUE(w->Close().ok());
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto newest = ResolveSession(**r, 0);
  ASSERT_TRUE(newest.ok()) << newest.status().message();
  EXPECT_EQ(*newest, 1);
  auto window = ResolveWindow(**r, WindowRequest{});
  ASSERT_TRUE(window.ok()) << window.status().message();
  EXPECT_EQ(window->session, 1);
  WindowRequest empty;
  empty.session = 2;  // asked for by number, the empty one still says it is empty
  auto refused = ResolveWindow(**r, empty);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("has no events"), std::string::npos);
}

// Three sessions, the middle one removed: every row of it goes, the others stay whole, freed
// pages go back to the filesystem (gpuwhy files have incremental auto-vacuum).
TEST_F(StoreTest, DeleteSessionsRemovesEveryRowOfThoseSessionsOnly) {
  {
    auto w = NewWriter();
    for (int s = 0; s < 3; ++s) {
      SessionInfo info;
      info.wall_start_ns = (s + 1) * 1'000'000'000'000;
      info.tracer_pid = 12345;
      ASSERT_TRUE(w->BeginSession(info).ok());
      w->UpsertProcess({100 + s, 1, "p", "p", "p", 0, kNull, kNull, true});
      std::vector<Event> events;
      for (int i = 0; i < (s == 1 ? 200000 : 1000); ++i) {
        events.push_back(Switch(i * 1000, 100 + s, 1));
      }
      w->AppendEvents(events.data(), events.size());
      SystemSnapshot snap;
      snap.ts_ns = 1;
      w->AppendSnapshot(snap);
      SessionTotals totals;
      totals.wall_stop_ns = info.wall_start_ns + 1'000'000'000;
      totals.events = static_cast<int64_t>(events.size());
      ASSERT_TRUE(w->EndSession(totals).ok());
    }
    ASSERT_TRUE(w->Close().ok());
  }
  {
    auto r = StoreReader::Open(path_);
    ASSERT_TRUE(r.ok());
    auto usage = ReadDatabaseUsage(**r);
    ASSERT_TRUE(usage.ok()) << usage.status().message();
    EXPECT_EQ(usage->event_rows, 202000);
    EXPECT_EQ(usage->rows_by_session.at(2), 200000);
    EXPECT_GT(usage->EstimatedSessionBytes(2), usage->EstimatedSessionBytes(1) * 50);
    auto sessions = (*r)->Sessions();
    ASSERT_TRUE(sessions.ok());
    for (const SessionSummary& s : *sessions) {
      EXPECT_TRUE(s.ended);
      EXPECT_EQ(s.tracer_pid, 12345);
      EXPECT_EQ(StateOf(s), SessionState::kEnded);
    }
  }
  auto result = DeleteSessions(path_, {2});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->sessions_removed, 1);
  EXPECT_EQ(result->rows_removed, 200000);
  EXPECT_TRUE(result->space_returned);
  EXPECT_LT(result->bytes_after, result->bytes_before / 2);
  auto r = StoreReader::Open(path_);
  ASSERT_TRUE(r.ok());
  auto rows = (*r)->Query(
      "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM event_rows), "
      "(SELECT COUNT(*) FROM processes), (SELECT COUNT(*) FROM system_snapshots), "
      "(SELECT COUNT(*) FROM op_seconds WHERE session = 2), "
      "(SELECT COUNT(*) FROM event_rows WHERE session = 2), "
      "(SELECT COUNT(*) FROM thread_rollups WHERE session = 2), "
      "(SELECT COUNT(*) FROM thread_rollups)");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][0]), 2);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][1]), 2000);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][2]), 2);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][3]), 2);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][4]), 0);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][5]), 0);
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][6]), 0);  // its thread rollups went with it
  EXPECT_EQ(std::get<int64_t>(rows->rows[0][7]), 2);  // the other two sessions' stay
}

// An open session whose tracer pid is alive on this host is "recording"; one whose tracer is
// gone, or that was recorded elsewhere, is "interrupted".
TEST_F(StoreTest, OpenSessionStateFollowsItsTracer) {
  SessionSummary s;
  s.ended = false;
  s.tracer_pid = static_cast<int32_t>(getpid());
  EXPECT_EQ(StateOf(s), SessionState::kRecording);
  s.host = "some-other-host.invalid";
  EXPECT_EQ(StateOf(s), SessionState::kInterrupted);
  s.host.clear();
  s.tracer_pid = 0;
  EXPECT_EQ(StateOf(s), SessionState::kInterrupted);
  s.ended = true;
  EXPECT_EQ(StateOf(s), SessionState::kEnded);
}

}  // namespace
}  // namespace gw
