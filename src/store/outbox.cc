#include "store/outbox.h"

#include <sys/random.h>

#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "store/event_columns.h"
#include "store/ops.h"

namespace gw {

void TsvInt(std::string& out, int64_t v) {
  if (v == kNull) {
    out += "\\N";
    return;
  }
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 24 bytes hold any int64
  out.append(buf, end);
}

void TsvReal(std::string& out, double v, bool null) {
  if (null || !std::isfinite(v)) {
    out += "\\N";
    return;
  }
  char buf[32];
  int n = std::snprintf(buf, sizeof buf, "%.17g", v);
  out.append(buf, static_cast<size_t>(n));
}

void TsvText(std::string& out, std::string_view s) {
  if (s.find_first_of(std::string_view("\\\t\n\r\0", 5)) == std::string_view::npos) {
    out.append(s);  // the common case: nothing to escape
    return;
  }
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\0': out += "\\0"; break;
      default: out += c;
    }
  }
}

namespace {

void Tab(std::string& out) { out += '\t'; }

}  // namespace

const std::string* OutboxEncoder::Name(int64_t id) const {
  if (id == kNull) return nullptr;
  auto it = strings_.find(id);
  return it == strings_.end() ? nullptr : &it->second;
}

// session, ts, wall_ns, then GW_EVENT_COLUMNS as gw_events has them (op and name as text)
std::string OutboxEncoder::Events(const Event* events, size_t count) const {
  std::string out;
  out.reserve(count * 96);
  for (const Event* e_ptr = events; e_ptr != events + count; ++e_ptr) {
    const Event& e = *e_ptr;
    TsvInt(out, session_); Tab(out);
    TsvInt(out, e.ts_ns); Tab(out);
    TsvInt(out, wall_start_ns_ + e.ts_ns);
    ForEachEventColumn(e, [&](int i, const auto& field) {
      Tab(out);
      if (i == kEventColumn_op) {
        TsvText(out, OpName(e.op));
      } else if (i == kEventColumn_name_id) {
        if (const std::string* name = Name(e.name_id)) TsvText(out, *name); else out += "\\N";
      } else {
        TsvInt(out, static_cast<int64_t>(field));
      }
    });
    out += '\n';
  }
  return out;
}

// session, n (order in the batch: updates of one process apply in order), pid, ppid, name,
// comm, cmdline, first_ts, exit_ts, exit_code, tracked
std::string OutboxEncoder::Processes(const std::vector<ProcessInfo>& processes) const {
  std::string out;
  int64_t n = 0;
  for (const ProcessInfo& p : processes) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, n++); Tab(out);
    TsvInt(out, p.pid); Tab(out);
    TsvInt(out, p.ppid); Tab(out);
    TsvText(out, p.name.empty() ? p.comm : p.name); Tab(out);
    TsvText(out, p.comm); Tab(out);
    TsvText(out, p.cmdline); Tab(out);
    TsvInt(out, p.first_ts_ns); Tab(out);
    TsvInt(out, p.exit_ts_ns); Tab(out);
    TsvInt(out, p.exit_code); Tab(out);
    TsvInt(out, p.tracked ? 1 : 0);
    out += '\n';
  }
  return out;
}

// session, ts, wall_ns, cpu_pct, mem_pct, load1, cores, swap_used_bytes, mem_available_bytes,
// major_faults_per_s, ctx_switches_per_s, procs_running, procs_blocked, iowait_pct
std::string OutboxEncoder::Snapshots(const std::vector<SystemSnapshot>& snapshots) const {
  std::string out;
  for (const SystemSnapshot& x : snapshots) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, x.ts_ns); Tab(out);
    TsvInt(out, x.wall_ns != 0 ? x.wall_ns : wall_start_ns_ + x.ts_ns); Tab(out);
    TsvReal(out, x.cpu_pct, false); Tab(out);
    TsvReal(out, x.mem_pct, false); Tab(out);
    TsvReal(out, x.load1, false); Tab(out);
    TsvInt(out, x.cores); Tab(out);
    TsvInt(out, x.swap_used_bytes); Tab(out);
    TsvInt(out, x.mem_available_bytes); Tab(out);
    TsvInt(out, x.major_faults_per_s); Tab(out);
    TsvInt(out, x.ctx_switches_per_s); Tab(out);
    TsvInt(out, x.procs_running); Tab(out);
    TsvInt(out, x.procs_blocked); Tab(out);
    TsvReal(out, x.iowait_pct, false);
    out += '\n';
  }
  return out;
}

// session, sec, pid, op, name, count, total_ns, max_ns
std::string OutboxEncoder::OpCounts(const std::vector<OpCount>& counts) const {
  std::string out;
  for (const OpCount& c : counts) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, c.sec); Tab(out);
    TsvInt(out, c.pid); Tab(out);
    TsvText(out, OpName(c.op)); Tab(out);
    if (const std::string* name = Name(c.name_id)) TsvText(out, *name); else out += "\\N";
    Tab(out);
    TsvInt(out, c.count); Tab(out);
    TsvInt(out, c.total_ns); Tab(out);
    TsvInt(out, c.max_ns);
    out += '\n';
  }
  return out;
}

// session, gpu, name, gpm_supported
std::string OutboxEncoder::GpuDevices(const std::vector<GpuDevice>& devices) const {
  std::string out;
  for (const GpuDevice& d : devices) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, d.gpu); Tab(out);
    TsvText(out, d.name); Tab(out);
    TsvInt(out, d.gpm_supported ? 1 : 0);
    out += '\n';
  }
  return out;
}

// session, ts, wall_ns, gpu, util_pct, mem_util_pct, sm_active_pct, sm_occupancy_pct,
// tensor_active_pct, dram_bw_pct, sm_clock_mhz, power_mw, throttle_reasons, mem_used_bytes
std::string OutboxEncoder::GpuSamples(const std::vector<GpuSample>& samples) const {
  std::string out;
  for (const GpuSample& x : samples) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, x.ts_ns); Tab(out);
    TsvInt(out, wall_start_ns_ + x.ts_ns); Tab(out);
    TsvInt(out, x.gpu); Tab(out);
    TsvInt(out, x.util_pct); Tab(out);
    TsvInt(out, x.mem_util_pct); Tab(out);
    TsvReal(out, x.sm_active_pct, x.sm_active_pct < 0); Tab(out);
    TsvReal(out, x.sm_occupancy_pct, x.sm_occupancy_pct < 0); Tab(out);
    TsvReal(out, x.tensor_active_pct, x.tensor_active_pct < 0); Tab(out);
    TsvReal(out, x.dram_bw_pct, x.dram_bw_pct < 0); Tab(out);
    TsvInt(out, x.sm_clock_mhz); Tab(out);
    TsvInt(out, x.power_mw); Tab(out);
    TsvInt(out, x.throttle_reasons); Tab(out);
    TsvInt(out, x.mem_used_bytes);
    out += '\n';
  }
  return out;
}

// session, ts, gpu, pid, sm_util_pct, mem_util_pct
std::string OutboxEncoder::GpuProcessSamples(const std::vector<GpuProcessSample>& samples) const {
  std::string out;
  for (const GpuProcessSample& x : samples) {
    TsvInt(out, session_); Tab(out);
    TsvInt(out, x.ts_ns); Tab(out);
    TsvInt(out, x.gpu); Tab(out);
    TsvInt(out, x.pid); Tab(out);
    TsvInt(out, x.sm_util_pct); Tab(out);
    TsvInt(out, x.mem_util_pct);
    out += '\n';
  }
  return out;
}

// session, pid, ts, cgroup, container_id, pod_uid, runtime, ns_pid, pod_name, pod_namespace
std::string OutboxEncoder::ProcessCgroups(const std::vector<ProcessCgroup>& rows) const {
  std::string out;
  for (const ProcessCgroup& x : rows) {
    TsvInt(out, session_);
    Tab(out);
    TsvInt(out, x.pid);
    Tab(out);
    TsvInt(out, x.ts_ns);
    Tab(out);
    TsvText(out, x.cgroup);
    Tab(out);
    TsvNullableText(out, x.container_id);
    Tab(out);
    TsvNullableText(out, x.pod_uid);
    Tab(out);
    TsvNullableText(out, x.runtime);
    Tab(out);
    TsvInt(out, x.ns_pid > 0 ? x.ns_pid : kNull);
    Tab(out);
    TsvNullableText(out, x.pod_name);
    Tab(out);
    TsvNullableText(out, x.pod_namespace);
    out += '\n';
  }
  return out;
}

// session, ts, cgroup, version, quota_us, period_us, nr_periods, nr_throttled, throttled_ns,
// usage_ns
std::string OutboxEncoder::CgroupCpuSamples(const std::vector<CgroupCpuSample>& rows) const {
  std::string out;
  for (const CgroupCpuSample& x : rows) {
    TsvInt(out, session_);
    Tab(out);
    TsvInt(out, x.ts_ns);
    Tab(out);
    TsvText(out, x.cgroup);
    Tab(out);
    TsvInt(out, x.version);
    Tab(out);
    for (int64_t v : {x.quota_us, x.period_us, x.nr_periods, x.nr_throttled, x.throttled_ns}) {
      TsvInt(out, v);
      Tab(out);
    }
    TsvInt(out, x.usage_ns);
    out += '\n';
  }
  return out;
}

// session, ts, cgroup, version, max_bytes, high_bytes, usage_bytes, events_high, events_max,
// events_oom, events_oom_kill, major_faults
std::string OutboxEncoder::CgroupMemorySamples(const std::vector<CgroupMemorySample>& rows) const {
  std::string out;
  for (const CgroupMemorySample& x : rows) {
    TsvInt(out, session_);
    Tab(out);
    TsvInt(out, x.ts_ns);
    Tab(out);
    TsvText(out, x.cgroup);
    Tab(out);
    TsvInt(out, x.version);
    Tab(out);
    for (int64_t v : {x.max_bytes, x.high_bytes, x.usage_bytes, x.events_high, x.events_max,
                      x.events_oom, x.events_oom_kill}) {
      TsvInt(out, v);
      Tab(out);
    }
    TsvInt(out, x.major_faults);
    out += '\n';
  }
  return out;
}

// session, id, pid, location, frames
std::string OutboxEncoder::Stack(int64_t id, int32_t pid, const std::string& location,
                                 const std::string& frames_json) const {
  std::string out;
  TsvInt(out, session_); Tab(out);
  TsvInt(out, id); Tab(out);
  TsvInt(out, pid); Tab(out);
  TsvText(out, location); Tab(out);
  TsvText(out, frames_json);
  out += '\n';
  return out;
}

// id, kind, wall_start_ns, mono_start_ns, host, kernel, cpu_model, cores, mem_bytes, gpu_model,
// gpu_driver, version, command_line, tracer_pid, wall_stop_ns, events, drops, drops_detail,
// launch_duty, profile_hz
std::string OutboxEncoder::Session(const SessionInfo& info, const SessionTotals* totals) const {
  std::string out;
  TsvInt(out, session_); Tab(out);
  TsvText(out, info.kind); Tab(out);
  TsvInt(out, info.wall_start_ns); Tab(out);
  TsvInt(out, info.mono_start_ns); Tab(out);
  TsvText(out, info.host); Tab(out);
  TsvText(out, info.kernel); Tab(out);
  TsvText(out, info.cpu_model); Tab(out);
  TsvInt(out, info.cores); Tab(out);
  TsvInt(out, info.mem_bytes); Tab(out);
  TsvNullableText(out, info.gpu_model); Tab(out);
  TsvNullableText(out, info.gpu_driver); Tab(out);
  TsvText(out, info.version); Tab(out);
  TsvText(out, info.command_line); Tab(out);
  TsvInt(out, info.tracer_pid > 0 ? info.tracer_pid : kNull); Tab(out);
  TsvInt(out, totals ? totals->wall_stop_ns : kNull); Tab(out);
  TsvInt(out, totals ? totals->events : kNull); Tab(out);
  TsvInt(out, totals ? totals->drops : kNull); Tab(out);
  if (totals) TsvText(out, totals->drops_detail.empty() ? "{}" : totals->drops_detail);
  else out += "\\N";
  Tab(out);
  TsvInt(out, std::max<int32_t>(1, info.launch_duty)); Tab(out);
  TsvInt(out, std::max<int32_t>(0, info.profile_hz));
  out += '\n';
  return out;
}

Status EnsureOutbox(sqlite3* db) {
  RETURN_IF_ERROR(Exec(db,
                       "CREATE TABLE IF NOT EXISTS outbox(id INTEGER PRIMARY KEY AUTOINCREMENT, "
                       "tbl TEXT NOT NULL, rows INTEGER NOT NULL, body BLOB NOT NULL)"));
  ASSIGN_OR_RETURN(std::string spool,
                   QueryText(db, "SELECT value FROM meta WHERE key='spool_id'", ""));
  if (!spool.empty()) return Status::Ok();
  uint64_t id = 0;
  while (id == 0) {
    if (getrandom(&id, sizeof id, 0) != sizeof id) return Internal("getrandom failed");
    id >>= 1;  // fits ClickHouse's and SQLite's signed 64-bit integers alike
  }
  return Exec(db, "INSERT INTO meta(key, value) VALUES ('spool_id', '" + std::to_string(id) + "')");
}

StatusOr<ScopedStmt> PrepareOutboxInsert(sqlite3* db) {
  return Prepare(db, "INSERT INTO outbox(tbl, rows, body) VALUES (?,?,?)");
}

Status InsertOutboxEntry(sqlite3* db, sqlite3_stmt* insert, std::string_view table, int64_t rows,
                         const std::string& body) {
  if (rows == 0) return Status::Ok();
  sqlite3_bind_text(insert, 1, table.data(), static_cast<int>(table.size()), SQLITE_STATIC);
  sqlite3_bind_int64(insert, 2, rows);
  sqlite3_bind_blob64(insert, 3, body.data(), body.size(), SQLITE_STATIC);
  int rc = sqlite3_step(insert);
  sqlite3_reset(insert);
  sqlite3_clear_bindings(insert);  // the bound body is the caller's
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, "insert outbox entry");
  return Status::Ok();
}

StatusOr<std::vector<OutboxEntry>> ReadOutboxEntries(sqlite3* db, int64_t after_id,
                                                     int64_t max_bytes) {
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db, "SELECT id, tbl, rows, body FROM outbox WHERE id > ? ORDER BY id"));
  sqlite3_bind_int64(stmt.get(), 1, after_id);
  std::vector<OutboxEntry> out;
  int64_t bytes = 0;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    OutboxEntry e;
    e.id = sqlite3_column_int64(stmt.get(), 0);
    e.table = reinterpret_cast<const char*>(sqlite3_column_text(stmt.get(), 1));
    e.rows = sqlite3_column_int64(stmt.get(), 2);
    const void* blob = sqlite3_column_blob(stmt.get(), 3);
    e.body.assign(static_cast<const char*>(blob),
                  static_cast<size_t>(sqlite3_column_bytes(stmt.get(), 3)));
    bytes += static_cast<int64_t>(e.body.size());
    out.push_back(std::move(e));
    if (bytes >= max_bytes) break;
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) return SqliteStatus(db, rc, "read outbox");
  return out;
}

Status DeleteOutboxThrough(sqlite3* db, int64_t id) {
  return Exec(db, "DELETE FROM outbox WHERE id <= " + std::to_string(id));
}

StatusOr<TrimmedOutbox> TrimOutbox(sqlite3* db, int64_t max_bytes) {
  ASSIGN_OR_RETURN(int64_t bytes, QueryInt(db, "SELECT COALESCE(SUM(length(body)), 0) FROM outbox", 0));
  if (bytes <= max_bytes) return TrimmedOutbox{0, bytes};
  // Oldest first: walk ids until what remains fits.
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db, "SELECT id, rows, length(body) FROM outbox ORDER BY id"));
  int64_t cut = 0;
  int64_t dropped = 0;
  while (bytes > max_bytes && sqlite3_step(stmt.get()) == SQLITE_ROW) {
    cut = sqlite3_column_int64(stmt.get(), 0);
    dropped += sqlite3_column_int64(stmt.get(), 1);
    bytes -= sqlite3_column_int64(stmt.get(), 2);
  }
  stmt.Reset();
  if (cut > 0) RETURN_IF_ERROR(DeleteOutboxThrough(db, cut));
  return TrimmedOutbox{dropped, bytes};
}

StatusOr<OutboxStatus> ReadOutboxStatus(sqlite3* db) {
  OutboxStatus s;
  ASSIGN_OR_RETURN(std::string spool,
                   QueryText(db, "SELECT value FROM meta WHERE key='spool_id'", "0"));
  s.spool_id = std::strtoull(spool.c_str(), nullptr, 10);
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db, "SELECT COUNT(*), COALESCE(SUM(rows), 0), "
                               "COALESCE(SUM(length(body)), 0) FROM outbox"));
  if (sqlite3_step(stmt.get()) == SQLITE_ROW) {
    s.entries = sqlite3_column_int64(stmt.get(), 0);
    s.rows = sqlite3_column_int64(stmt.get(), 1);
    s.bytes = sqlite3_column_int64(stmt.get(), 2);
  }
  return s;
}

}  // namespace gw
