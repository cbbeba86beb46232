#include "store/schema.h"

#include <string>

#include "store/event_chunk.h"
#include "store/event_rows_table.h"
#include "store/ops.h"
#include "store/row_columns.h"
#include "store/sqlite_util.h"

namespace gw {

namespace {

// Version 1. Raw tables are append-only and clustered by insertion (time) order.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
CREATE TABLE sessions(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  wall_start_ns INTEGER NOT NULL,
  wall_stop_ns INTEGER,
  mono_start_ns INTEGER NOT NULL,
  host TEXT, kernel TEXT, cpu_model TEXT, cores INTEGER, mem_bytes INTEGER,
  gpu_model TEXT, gpu_driver TEXT, gpuwhy_version TEXT, command_line TEXT,
  events INTEGER NOT NULL DEFAULT 0,
  drops INTEGER NOT NULL DEFAULT 0,
  drops_detail TEXT
);
CREATE TABLE op_names(
  id INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE,
  layer TEXT NOT NULL
);
CREATE TABLE strings(
  id INTEGER PRIMARY KEY,
  text TEXT NOT NULL UNIQUE
);
CREATE TABLE event_rows(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  seq INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  op INTEGER NOT NULL,
  duration_ns INTEGER NOT NULL,
  ret INTEGER, bytes INTEGER, kind INTEGER, cpu INTEGER, other_pid INTEGER,
  runq_ns INTEGER, addr INTEGER, name_id INTEGER, stack_id INTEGER,
  PRIMARY KEY(session, ts, seq)
) WITHOUT ROWID;
CREATE TABLE op_seconds(
  session INTEGER NOT NULL,
  sec INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  op INTEGER NOT NULL,
  name_id INTEGER NOT NULL,
  count INTEGER NOT NULL,
  total_ns INTEGER NOT NULL,
  max_ns INTEGER NOT NULL,
  PRIMARY KEY(session, sec, pid, op, name_id)
) WITHOUT ROWID;
CREATE TABLE processes(
  session INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  ppid INTEGER,
  name TEXT NOT NULL,
  comm TEXT,
  cmdline TEXT,
  first_ts INTEGER,
  exit_ts INTEGER,
  exit_code INTEGER,
  tracked INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(session, pid)
) WITHOUT ROWID;
CREATE TABLE system_snapshots(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  wall_ns INTEGER,
  cpu_pct REAL, mem_pct REAL, load1 REAL, cores INTEGER,
  swap_used_bytes INTEGER, mem_available_bytes INTEGER,
  major_faults_per_s INTEGER, ctx_switches_per_s INTEGER,
  procs_running INTEGER, procs_blocked INTEGER, iowait_pct REAL,
  PRIMARY KEY(session, ts)
) WITHOUT ROWID;
CREATE VIEW current_session AS SELECT MAX(id) AS id FROM sessions;
CREATE VIEW events_all AS
  SELECT r.session AS session, r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id;
CREATE VIEW events AS
  SELECT r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id, r.session AS session
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id
  WHERE r.session = (SELECT MAX(id) FROM sessions);
CREATE VIEW process_names AS
  SELECT pid, name FROM processes WHERE session = (SELECT MAX(id) FROM sessions);
CREATE VIEW op_stats_seconds AS
  SELECT q.session AS session, q.sec AS sec, q.pid AS pid, o.name AS op, s.text AS name,
         q.count AS count, q.total_ns AS total_ns, q.max_ns AS max_ns
  FROM op_seconds q JOIN op_names o ON o.id = q.op LEFT JOIN strings s ON s.id = q.name_id;
)sql";

// Version 2 (additive): symbolized call stacks for `trace --stack`. `stacks.id` is the 64-bit
// key the BPF capture returned (event_rows.stack_id); `frames` is a JSON array, innermost frame
// first; `stack_frames` unnests it for SQL.
constexpr const char* kMigrationV2 = R"sql(
CREATE TABLE stacks(
  session INTEGER NOT NULL,
  id INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  location TEXT,
  frames TEXT NOT NULL,
  PRIMARY KEY(session, id)
) WITHOUT ROWID;
CREATE VIEW stack_frames AS
  SELECT s.session AS session, s.id AS stack_id, s.pid AS pid, CAST(j.key AS INTEGER) AS depth,
         json_extract(j.value, '$.kind') AS kind,
         json_extract(j.value, '$.function') AS function,
         json_extract(j.value, '$.file') AS file,
         json_extract(j.value, '$.line') AS line,
         json_extract(j.value, '$.module') AS module,
         json_extract(j.value, '$.offset') AS offset
  FROM stacks s, json_each(s.frames) j;
)sql";

// Version 3 (additive): who woke a blocked task, on its sched_switch row (sched_waking runs in
// the waker's context). NULL = no wake-up seen (preempted, or an older recording); 0 = woken
// from interrupt/softirq context. The views gain the two columns at the end. Sessions record
// the tracer's own pid, so analysis never names gpuwhy as a competitor.
constexpr const char* kMigrationV3 = R"sql(
ALTER TABLE event_rows ADD COLUMN waker_pid INTEGER;
ALTER TABLE event_rows ADD COLUMN waker_tid INTEGER;
ALTER TABLE sessions ADD COLUMN tracer_pid INTEGER;
DROP VIEW events_all;
DROP VIEW events;
CREATE VIEW events_all AS
  SELECT r.session AS session, r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id, r.waker_pid AS waker_pid,
         r.waker_tid AS waker_tid
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id;
CREATE VIEW events AS
  SELECT r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id, r.session AS session,
         r.waker_pid AS waker_pid, r.waker_tid AS waker_tid
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id
  WHERE r.session = (SELECT MAX(id) FROM sessions);
)sql";

// Version 4 (additive): GPU truth from NVML, sampled by `trace` (`--gpu-interval`). One row per
// GPU per sample; GPM columns (Hopper and newer) are NULL where the device has no GPM. Process
// rows come from nvmlDeviceGetProcessUtilization. Clustered by time like the other raw tables.
constexpr const char* kMigrationV4 = R"sql(
CREATE TABLE gpu_devices(
  session INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  name TEXT,
  gpm_supported INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY(session, gpu)
) WITHOUT ROWID;
CREATE TABLE gpu_samples(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  util_pct INTEGER, mem_util_pct INTEGER,
  sm_active_pct REAL, sm_occupancy_pct REAL, tensor_active_pct REAL, dram_bw_pct REAL,
  sm_clock_mhz INTEGER, power_mw INTEGER, throttle_reasons INTEGER, mem_used_bytes INTEGER,
  PRIMARY KEY(session, ts, gpu)
) WITHOUT ROWID;
CREATE TABLE gpu_process_samples(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  gpu INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  sm_util_pct INTEGER, mem_util_pct INTEGER,
  PRIMARY KEY(session, ts, gpu, pid)
) WITHOUT ROWID;
)sql";

// Version 5 (additive): how launches are counted. 1 = each launch once: a driver launch
// nested in a runtime launch only pairs the two (names) and is not counted again. NULL (older
// recordings) = both layers counted, so analysis counts runtime-layer launches only.
constexpr const char* kMigrationV5 = R"sql(
ALTER TABLE sessions ADD COLUMN launches_once INTEGER;
)sql";

// Version 6 (additive): the launch duty cycle. N = launches were counted (op_seconds) in one
// second of every N (from the first second with launches), so a window's launches are
// estimated as N × those counted; NULL or 1 = counted every second.
constexpr const char* kMigrationV6 = R"sql(
ALTER TABLE sessions ADD COLUMN launch_duty INTEGER;
)sql";

// Version 7 (additive): per-thread rollups kept at ingest, for explaining long windows
// without reading their raw rows (src/analysis/long_window.cc) and kept longer than raw rows
// under --max-db. One row per (10 s bucket, thread) with rows in it; every interval and call is
// counted in the bucket it starts in. Docs: docs/schema.md.
constexpr const char* kMigrationV7 = R"sql(
CREATE TABLE thread_rollups(
  session INTEGER NOT NULL,
  sec INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  tid INTEGER NOT NULL,
  switches INTEGER NOT NULL,
  preempted INTEGER NOT NULL,
  runq_ns INTEGER NOT NULL,
  blocked_ns INTEGER NOT NULL,
  io_ns INTEGER NOT NULL,
  fault_ns INTEGER NOT NULL,
  woken_irq INTEGER NOT NULL,
  woken_same INTEGER NOT NULL,
  woken_other INTEGER NOT NULL,
  cuda_calls INTEGER NOT NULL,
  syncs INTEGER NOT NULL,
  sync_ns INTEGER NOT NULL,
  PRIMARY KEY(session, sec, pid, tid)
) WITHOUT ROWID;
)sql";

// Version 8 (additive): the CUDA row budget. Short calls that are not rows are aggregated in
// the kernel: op_seconds gains the bytes they moved, and op_latency holds log2 histograms of
// every CUDA call's duration (rows and aggregated calls alike) per (second, pid, op).
constexpr const char* kMigrationV8 = R"sql(
ALTER TABLE op_seconds ADD COLUMN bytes INTEGER;
CREATE TABLE op_latency(
  session INTEGER NOT NULL,
  sec INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  op INTEGER NOT NULL,
  log2_ns INTEGER NOT NULL,
  count INTEGER NOT NULL,
  PRIMARY KEY(session, sec, pid, op, log2_ns)
) WITHOUT ROWID;
DROP VIEW op_stats_seconds;
CREATE VIEW op_stats_seconds AS
  SELECT q.session AS session, q.sec AS sec, q.pid AS pid, o.name AS op, s.text AS name,
         q.count AS count, q.total_ns AS total_ns, q.max_ns AS max_ns, q.bytes AS bytes
  FROM op_seconds q JOIN op_names o ON o.id = q.op LEFT JOIN strings s ON s.id = q.name_id;
CREATE VIEW op_latency_hist AS
  SELECT h.session AS session, h.sec AS sec, h.pid AS pid, o.name AS op,
         CASE WHEN h.log2_ns = 0 THEN 0 ELSE 1 << h.log2_ns END AS from_ns,
         1 << (h.log2_ns + 1) AS to_ns, h.count AS count
  FROM op_latency h JOIN op_names o ON o.id = h.op;
)sql";

// Version 9: events are stored in chunks (event_chunk.h): `event_chunks` holds up to 128 events
// of one session per row, and `event_rows` becomes a virtual table (module gw_events,
// event_rows_table.h) over it with the same columns, so the views and every query of
// event_rows stay as they were. A chunk's number is its rowid; seq = chunk * 128 + index.
// The index on (session, ts) finds a time range (no chunk spans more than 100 ms) and covers
// last_ts and n, so counts, spans and pruning never read the chunks themselves.
constexpr const char* kMigrationV9 = R"sql(
CREATE TABLE event_chunks(
  chunk INTEGER PRIMARY KEY,
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  last_ts INTEGER NOT NULL,
  n INTEGER NOT NULL,
  data BLOB NOT NULL
);
CREATE INDEX event_chunks_by_time ON event_chunks(session, ts, last_ts, n);
)sql";

// Version 10 (additive): the CPU quota and throttling of the tracked processes' cgroups, read
// once a second, and the cgroup each process was seen in.
constexpr const char* kMigrationV10 = R"sql(
CREATE TABLE cgroup_cpu_samples(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  cgroup TEXT NOT NULL,
  version INTEGER NOT NULL,
  quota_us INTEGER, period_us INTEGER,
  nr_periods INTEGER, nr_throttled INTEGER, throttled_ns INTEGER, usage_ns INTEGER,
  PRIMARY KEY(session, ts, cgroup)
) WITHOUT ROWID;
CREATE TABLE process_cgroups(
  session INTEGER NOT NULL,
  pid INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  cgroup TEXT NOT NULL,
  PRIMARY KEY(session, pid, ts)
) WITHOUT ROWID;
)sql";

// Version 11 (additive): the on-CPU profile's rate. cpu_sample rows were taken this many times a
// second of each CPU that ran a tracked thread, so each stands for 1/profile_hz s of CPU time;
// NULL or 0 = no profile.
constexpr const char* kMigrationV11 = R"sql(
ALTER TABLE sessions ADD COLUMN profile_hz INTEGER;
)sql";

// Version 12 (additive): who a tracked process is inside its container (its container and pod,
// from its cgroup path, and its pid in its own PID namespace), and the memory limit and events
// of the tracked processes' memory cgroups, read once a second.
constexpr const char* kMigrationV12 = R"sql(
ALTER TABLE process_cgroups ADD COLUMN container_id TEXT;
ALTER TABLE process_cgroups ADD COLUMN pod_uid TEXT;
ALTER TABLE process_cgroups ADD COLUMN runtime TEXT;
ALTER TABLE process_cgroups ADD COLUMN ns_pid INTEGER;
ALTER TABLE process_cgroups ADD COLUMN pod_name TEXT;
ALTER TABLE process_cgroups ADD COLUMN pod_namespace TEXT;
CREATE TABLE cgroup_memory_samples(
  session INTEGER NOT NULL,
  ts INTEGER NOT NULL,
  cgroup TEXT NOT NULL,
  version INTEGER NOT NULL,
  max_bytes INTEGER, high_bytes INTEGER, usage_bytes INTEGER,
  events_high INTEGER, events_max INTEGER, events_oom INTEGER, events_oom_kill INTEGER,
  major_faults INTEGER,
  PRIMARY KEY(session, ts, cgroup)
) WITHOUT ROWID;
)sql";

// Version 13 (additive): a CUDA sync's time since its thread last gave the GPU work
// (since_work_ns), which proves the GPU busy from that work to the sync when the sync waited. The
// column is the chunk codec's (format 2); the views gain it at the end.
constexpr const char* kMigrationV13 = R"sql(
DROP VIEW events_all;
DROP VIEW events;
CREATE VIEW events_all AS
  SELECT r.session AS session, r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id, r.waker_pid AS waker_pid,
         r.waker_tid AS waker_tid, r.since_work_ns AS since_work_ns
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id;
CREATE VIEW events AS
  SELECT r.ts AS timestamp, r.pid AS pid, r.tid AS tid, o.name AS op,
         r.duration_ns AS duration_ns, r.ret AS ret, r.bytes AS bytes, r.kind AS kind,
         r.cpu AS cpu, r.other_pid AS other_pid, r.runq_ns AS runq_ns, r.addr AS addr,
         s.text AS name, r.stack_id AS stack_id, r.op AS op_id, r.session AS session,
         r.waker_pid AS waker_pid, r.waker_tid AS waker_tid, r.since_work_ns AS since_work_ns
  FROM event_rows r JOIN op_names o ON o.id = r.op LEFT JOIN strings s ON s.id = r.name_id
  WHERE r.session = (SELECT MAX(id) FROM sessions);
)sql";

// Moves the rows of a plain event_rows table (schema < 9) into chunks, session by session in
// key order, and puts the virtual table in its place.
Status MigrateToChunks(sqlite3* db, const MigrationProgress& progress) {
  int64_t total = 0;
  if (progress) {
    ASSIGN_OR_RETURN(total, QueryInt(db, "SELECT COUNT(*) FROM event_rows", 0));
    progress(0, total);
  }
  RETURN_IF_ERROR(Exec(db, kMigrationV9));
  // The plain table has the columns of schema 8 (later ones read as NULL).
  ASSIGN_OR_RETURN(ScopedStmt read,
                   Prepare(db, "SELECT session, ts, " + EventColumnsSql(8, "") +
                                   " FROM event_rows ORDER BY session, ts, seq"));
  ASSIGN_OR_RETURN(ScopedStmt insert, Prepare(db, kInsertChunkSql));
  std::vector<Event> events;
  std::vector<uint32_t> order;
  std::string scratch;
  int64_t session = 0;
  auto flush = [&]() -> Status {
    order.resize(events.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<uint32_t>(i);
    Status st = InsertChunks(db, insert.get(), session, events.data(), order.data(),
                             events.size(), &scratch);
    events.clear();
    return st;
  };
  int rc;
  int64_t done = 0;
  while ((rc = sqlite3_step(read.get())) == SQLITE_ROW) {
    if (progress && done > 0 && done % kMigrationProgressRows == 0) progress(done, total);
    ++done;
    int64_t row_session = sqlite3_column_int64(read.get(), 0);
    if ((row_session != session && !events.empty()) || events.size() >= 65536) {
      RETURN_IF_ERROR(flush());
    }
    session = row_session;
    Event e;
    e.ts_ns = sqlite3_column_int64(read.get(), 1);
    ReadEventColumns(read.get(), 2, &e);
    events.push_back(e);
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "read event_rows");
  if (!events.empty()) RETURN_IF_ERROR(flush());
  if (progress) progress(done, total);
  read.Reset();
  // The views that name event_rows resolve to the virtual table from now on.
  return Exec(db, "DROP TABLE event_rows; CREATE VIRTUAL TABLE event_rows USING gw_events;");
}

Status WriteOpNames(sqlite3* db) {
  size_t n = 0;
  const OpInfo* ops = AllOps(&n);
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db, "INSERT OR REPLACE INTO op_names(id, name, layer) VALUES (?,?,?)"));
  for (size_t i = 0; i < n; ++i) {
    sqlite3_bind_int64(stmt.get(), 1, static_cast<int64_t>(ops[i].op));
    sqlite3_bind_text(stmt.get(), 2, ops[i].name.data(), static_cast<int>(ops[i].name.size()),
                      SQLITE_TRANSIENT);
    std::string_view layer = LayerName(ops[i].layer);
    sqlite3_bind_text(stmt.get(), 3, layer.data(), static_cast<int>(layer.size()),
                      SQLITE_TRANSIENT);
    int rc = sqlite3_step(stmt.get());
    if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "write op names");
    sqlite3_reset(stmt.get());
  }
  return Status::Ok();
}

StatusOr<int> ReadVersion(sqlite3* db) {
  ASSIGN_OR_RETURN(int64_t tables,
                   QueryInt(db, "SELECT COUNT(*) FROM sqlite_master", 0));
  if (tables == 0) return 0;  // empty file: create
  ASSIGN_OR_RETURN(int64_t has_meta,
                   QueryInt(db,
                            "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND "
                            "name='meta'",
                            0));
  if (has_meta == 0) {
    return FailedPrecondition(
        "this SQLite file is not a gpuwhy database (no meta table) — hint: point --db at a "
        "file written by gpuwhy trace or gpuwhy demo --keep");
  }
  ASSIGN_OR_RETURN(std::string v,
                   QueryText(db, "SELECT value FROM meta WHERE key='schema_version'", ""));
  if (v.empty()) return FailedPrecondition("gpuwhy database has no schema_version");
  return std::atoi(v.c_str());
}

}  // namespace

Status CreateOrMigrateSchema(sqlite3* db, const MigrationProgress& progress) {
  RETURN_IF_ERROR(RegisterEventRowsModule(db));
  ASSIGN_OR_RETURN(int version, ReadVersion(db));
  if (version > kSchemaVersion) {
    return FailedPrecondition("database schema version " + std::to_string(version) +
                              " is newer than this gpuwhy understands (" +
                              std::to_string(kSchemaVersion) +
                              ") — hint: upgrade gpuwhy, or record into a new file with --db");
  }
  if (version == kSchemaVersion) return WriteOpNames(db);  // new ops appended since
  RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE"));
  Status st = [&]() -> Status {
    if (version == 0) {
      RETURN_IF_ERROR(Exec(db, kSchemaV1));
      RETURN_IF_ERROR(Exec(db, "INSERT INTO meta VALUES ('schema_version', '1'), "
                               "('created_by', 'gpuwhy')"));
    }
    // Migrations, oldest first; each is additive so older readers' queries keep working.
    if (version < 2) RETURN_IF_ERROR(Exec(db, kMigrationV2));
    if (version < 3) RETURN_IF_ERROR(Exec(db, kMigrationV3));
    if (version < 4) RETURN_IF_ERROR(Exec(db, kMigrationV4));
    if (version < 5) RETURN_IF_ERROR(Exec(db, kMigrationV5));
    if (version < 6) RETURN_IF_ERROR(Exec(db, kMigrationV6));
    if (version < 7) RETURN_IF_ERROR(Exec(db, kMigrationV7));
    if (version < 8) RETURN_IF_ERROR(Exec(db, kMigrationV8));
    if (version < 9) RETURN_IF_ERROR(MigrateToChunks(db, progress));
    if (version < 10) RETURN_IF_ERROR(Exec(db, kMigrationV10));
    if (version < 11) RETURN_IF_ERROR(Exec(db, kMigrationV11));
    if (version < 12) RETURN_IF_ERROR(Exec(db, kMigrationV12));
    if (version < 13) RETURN_IF_ERROR(Exec(db, kMigrationV13));
    RETURN_IF_ERROR(Exec(db, "UPDATE meta SET value='" + std::to_string(kSchemaVersion) +
                                 "' WHERE key='schema_version'"));
    return WriteOpNames(db);
  }();
  if (!st.ok()) {
    (void)Exec(db, "ROLLBACK");
    return st.WithContext("create schema");
  }
  return Exec(db, "COMMIT");
}

Status CheckSchemaReadable(sqlite3* db) {
  RETURN_IF_ERROR(RegisterEventRowsModule(db));
  ASSIGN_OR_RETURN(int version, ReadVersion(db));
  if (version == 0) {
    return FailedPrecondition("the database is empty (no gpuwhy tables) — hint: record with "
                              "`sudo gpuwhy trace` or create a sample with `gpuwhy demo "
                              "cpu-contention --keep FILE`");
  }
  if (version > kSchemaVersion) {
    return FailedPrecondition("database schema version " + std::to_string(version) +
                              " is newer than this gpuwhy understands (" +
                              std::to_string(kSchemaVersion) + ") — hint: upgrade gpuwhy");
  }
  // Older files stay readable as they are (migrations only add tables and columns; readers
  // check for what they need). Only a writing command migrates a file.
  return Status::Ok();
}

}  // namespace gw
