// Schema migrations: a file written by an older gpuwhy, opened by the writer, is upgraded in
// place with its data intact.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "store/event_rows_table.h"
#include "store/schema.h"
#include "store/sqlite_util.h"
#include "store/writer.h"

namespace gw {
namespace {

class SchemaMigrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw_migration_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/v1.db";
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }

  ScopedDb OpenRaw() {
    sqlite3* raw = nullptr;
    EXPECT_EQ(sqlite3_open(path_.c_str(), &raw), SQLITE_OK);
    EXPECT_TRUE(RegisterEventRowsModule(raw).ok());
    return ScopedDb(raw);
  }

  std::string dir_;
  std::string path_;
};

// Version 2 only added `stacks` and `stack_frames` to version 1, and version 3 the waker
// columns (with the views that show them) and sessions.tracer_pid, version 4 the NVML tables
// version 5 sessions.launches_once, version 6 sessions.launch_duty, version 7 thread_rollups,
// version 8 op_latency, op_seconds.bytes and their views, and version 9 moved the events into
// chunks, version 10 added the cgroup tables, version 11 sessions.profile_hz, version 12 the
// container columns of process_cgroups and cgroup_memory_samples: a v1 file is the
// current file without them, with a plain event_rows table (seq 0, 1,
// … per timestamp), version 1's views and schema_version 1.
void DowngradeToV1(sqlite3* db) {
  ASSERT_TRUE(Exec(db,
                   "DROP TABLE gpu_devices; DROP TABLE gpu_samples; DROP TABLE gpu_process_samples; "
                   "DROP TABLE thread_rollups; DROP TABLE op_latency; "
                   "DROP TABLE cgroup_cpu_samples; DROP TABLE process_cgroups; "
                   "DROP TABLE cgroup_memory_samples; "
                   "DROP VIEW op_latency_hist; DROP VIEW op_stats_seconds; "
                   "ALTER TABLE op_seconds DROP COLUMN bytes; "
                   "CREATE VIEW op_stats_seconds AS SELECT q.session AS session, q.sec AS sec, "
                   "q.pid AS pid, o.name AS op, s.text AS name, q.count AS count, q.total_ns AS "
                   "total_ns, q.max_ns AS max_ns FROM op_seconds q JOIN op_names o ON o.id = "
                   "q.op LEFT JOIN strings s ON s.id = q.name_id; "
                   "DROP VIEW stack_frames; DROP TABLE stacks; DROP VIEW events; "
                   "DROP VIEW events_all; "
                   "CREATE TABLE plain(session INTEGER NOT NULL, ts INTEGER NOT NULL, "
                   "seq INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL, "
                   "op INTEGER NOT NULL, duration_ns INTEGER NOT NULL, ret INTEGER, "
                   "bytes INTEGER, kind INTEGER, cpu INTEGER, other_pid INTEGER, "
                   "runq_ns INTEGER, addr INTEGER, name_id INTEGER, stack_id INTEGER, "
                   "PRIMARY KEY(session, ts, seq)) WITHOUT ROWID; "
                   "INSERT INTO plain SELECT session, ts, ROW_NUMBER() OVER (PARTITION BY "
                   "session, ts ORDER BY seq) - 1, pid, tid, op, duration_ns, ret, bytes, kind, "
                   "cpu, other_pid, runq_ns, addr, name_id, stack_id FROM event_rows; "
                   "DROP TABLE event_rows; DROP TABLE event_chunks; "
                   "ALTER TABLE plain RENAME TO event_rows; "
                   "ALTER TABLE sessions DROP COLUMN tracer_pid; "
                   "ALTER TABLE sessions DROP COLUMN launches_once; "
                   "ALTER TABLE sessions DROP COLUMN launch_duty; "
                   "ALTER TABLE sessions DROP COLUMN profile_hz; "
                   "CREATE VIEW events_all AS SELECT r.session AS session, r.ts AS timestamp, "
                   "r.pid AS pid, r.tid AS tid, o.name AS op, r.duration_ns AS duration_ns "
                   "FROM event_rows r JOIN op_names o ON o.id = r.op; "
                   "CREATE VIEW events AS SELECT r.ts AS timestamp, r.pid AS pid, r.tid AS tid, "
                   "o.name AS op, r.duration_ns AS duration_ns FROM event_rows r JOIN op_names o "
                   "ON o.id = r.op WHERE r.session = (SELECT MAX(id) FROM sessions); "
                   "UPDATE meta SET value='1' WHERE key='schema_version'")
                  .ok());
}

TEST_F(SchemaMigrationTest, V1FileBecomesCurrentWithDataIntact) {
  {
    auto w = StoreWriter::Create(path_, {});
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE((*w)->BeginSession(SessionInfo{}).ok());
    Event e;
    e.ts_ns = 42;
    e.pid = 7;
    e.tid = 8;
    e.op = Op::kSchedSwitch;
    e.duration_ns = 1000;
    (*w)->AppendEvent(e);
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    ScopedDb db = OpenRaw();
    DowngradeToV1(db.get());
    EXPECT_EQ(*QueryText(db.get(), "SELECT value FROM meta WHERE key='schema_version'", ""), "1");
    EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(*) FROM sqlite_master WHERE name='stacks'", -1), 0);
  }
  {
    auto w = StoreWriter::Create(path_, {});
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE((*w)->BeginSession(SessionInfo{}).ok());
    (*w)->AppendStack(-5, 7, "/x/train.py:12",
                      R"([{"kind":"native","function":"cudaMalloc","file":"","line":0,)"
                      R"("module":"/lib/libcudart.so","offset":4096},)"
                      R"({"kind":"py","function":"step","file":"/x/train.py","line":12}])");
    Event e;
    e.ts_ns = 43;
    e.pid = 7;
    e.tid = 8;
    e.op = Op::kSchedSwitch;
    e.stack_id = -5;
    e.waker_pid = 7;
    e.waker_tid = 9;
    (*w)->AppendEvent(e);
    GpuSample g;
    g.ts_ns = 100'000'000;
    g.util_pct = 83;
    g.sm_active_pct = 71.5;
    g.power_mw = 450000;
    GpuProcessSample p;
    p.ts_ns = g.ts_ns;
    p.pid = 7;
    p.sm_util_pct = 80;
    (*w)->AppendGpuDevices({GpuDevice{0, "NVIDIA H200", true}});
    (*w)->AppendGpuSamples({g}, {p});
    ASSERT_TRUE((*w)->Close().ok());
  }
  ScopedDb db = OpenRaw();
  // Version 4: the NVML tables exist and take samples; absent values are NULL.
  EXPECT_EQ(*QueryText(db.get(), "SELECT name FROM gpu_devices WHERE gpm_supported = 1", ""),
            "NVIDIA H200");
  EXPECT_EQ(*QueryInt(db.get(), "SELECT util_pct FROM gpu_samples WHERE ts = 100000000", -1), 83);
  EXPECT_EQ(*QueryInt(db.get(), "SELECT sm_occupancy_pct IS NULL AND mem_used_bytes IS NULL "
                                "FROM gpu_samples", -1), 1);
  EXPECT_EQ(*QueryInt(db.get(), "SELECT sm_util_pct FROM gpu_process_samples WHERE pid = 7", -1),
            80);
  EXPECT_EQ(*QueryText(db.get(), "SELECT value FROM meta WHERE key='schema_version'", ""),
            std::to_string(kSchemaVersion));
  // Version 8: the latency histograms and the bytes of aggregated calls.
  EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(*) FROM op_latency_hist", -1), 0);
  EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(bytes) FROM op_stats_seconds", -1), 0);
  // Version 9: the old row moved into a chunk of its own, the new one came in another.
  EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(*) FROM event_rows", -1), 2);
  EXPECT_EQ(*QueryText(db.get(), "SELECT GROUP_CONCAT(ts || '-' || last_ts || ':' || n) FROM "
                                 "(SELECT * FROM event_chunks ORDER BY chunk)", ""),
            "42-42:1,43-43:1");
  EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(*) FROM sqlite_master WHERE name = 'event_rows' "
                                "AND sql LIKE 'CREATE VIRTUAL TABLE%'", -1), 1);
  EXPECT_EQ(*QueryInt(db.get(), "SELECT duration_ns FROM event_rows WHERE ts=42", -1), 1000);
  EXPECT_EQ(*QueryText(db.get(), "SELECT location FROM stacks WHERE id=-5", ""), "/x/train.py:12");
  EXPECT_EQ(*QueryText(db.get(),
                       "SELECT f.file || ':' || f.line FROM events_all e JOIN stack_frames f "
                       "ON f.stack_id = e.stack_id AND f.session = e.session "
                       "WHERE f.kind='py' AND f.depth=1",
                       ""),
            "/x/train.py:12");
  EXPECT_EQ(*QueryInt(db.get(), "SELECT offset FROM stack_frames WHERE depth=0", -1), 4096);
  // Version 3: the migrated file stores and shows who woke a sleeper (NULL on older rows).
  EXPECT_EQ(*QueryInt(db.get(), "SELECT waker_tid FROM events WHERE timestamp=43", -1), 9);
  EXPECT_EQ(*QueryInt(db.get(), "SELECT waker_pid IS NULL FROM events_all WHERE timestamp=42", -1),
            1);
  // Version 5: the old session's launches counted both layers (NULL), the new one once.
  EXPECT_EQ(*QueryText(db.get(),
                       "SELECT GROUP_CONCAT(COALESCE(launches_once, 'null')) FROM "
                       "(SELECT launches_once FROM sessions ORDER BY id)",
                       ""),
            "null,1");
  // Version 7: the new session's switch is in its thread's rollup; the old rows get none (a
  // long window of an older session is explained from raw rows).
  EXPECT_EQ(*QueryText(db.get(),
                       "SELECT GROUP_CONCAT(session || ':' || switches || ':' || woken_same) "
                       "FROM thread_rollups WHERE pid = 7 AND tid = 8",
                       ""),
            "2:1:1");
  // Opening again is a no-op (already current).
  auto w = StoreWriter::Create(path_, {});
  ASSERT_TRUE(w.ok()) << w.status().message();
}

// Moving an older file's events into chunks reports how far it got: once before the first row,
// every kMigrationProgressRows rows, once after the last.
TEST_F(SchemaMigrationTest, MovingEventsIntoChunksReportsProgress) {
  const int64_t rows = kMigrationProgressRows + 1000;
  {
    auto w = StoreWriter::Create(path_, {});
    ASSERT_TRUE(w.ok()) << w.status().message();
    ASSERT_TRUE((*w)->BeginSession(SessionInfo{}).ok());
    for (int64_t i = 0; i < rows; ++i) {
      Event e;
      e.ts_ns = i;
      e.pid = 7;
      e.tid = 8;
      e.op = Op::kSchedSwitch;
      e.duration_ns = i % 1000;
      (*w)->AppendEvent(e);
    }
    ASSERT_TRUE((*w)->Close().ok());
  }
  {
    ScopedDb db = OpenRaw();
    DowngradeToV1(db.get());
  }
  std::vector<std::pair<int64_t, int64_t>> calls;
  WriterOptions options;
  options.migration_progress = [&calls](int64_t done, int64_t total) {
    calls.emplace_back(done, total);
  };
  auto w = StoreWriter::Create(path_, options);
  ASSERT_TRUE(w.ok()) << w.status().message();
  ASSERT_TRUE((*w)->Close().ok());
  std::vector<std::pair<int64_t, int64_t>> want = {
      {0, rows}, {kMigrationProgressRows, rows}, {rows, rows}};
  EXPECT_EQ(calls, want);
  ScopedDb db = OpenRaw();
  EXPECT_EQ(*QueryInt(db.get(), "SELECT COUNT(*) FROM event_rows", -1), rows);
  int64_t sum = 0;
  for (int64_t i = 0; i < rows; ++i) sum += i % 1000;
  EXPECT_EQ(*QueryInt(db.get(), "SELECT SUM(duration_ns) FROM event_rows", -1), sum);
  // A current file is not migrated: no progress.
  calls.clear();
  auto again = StoreWriter::Create(path_, options);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(calls.empty());
}

}  // namespace
}  // namespace gw
