#include "store/export_rows.h"

#include <algorithm>

#include "store/reader.h"
#include "store/row_columns.h"

namespace gw {

StatusOr<ExportSession> ReadExportSession(StoreReader& reader, const SessionWindow& window) {
  ExportSession x;
  x.session = window.session;
  bool found = false;
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT kind, wall_start_ns, COALESCE(host, ''), drops, COALESCE(drops_detail, ''), "
      "COALESCE(gpuwhy_version, '') FROM sessions WHERE id = ?1",
      {window.session}, [&](sqlite3_stmt* s) {
        found = true;
        x.kind = ColText(s, 0);
        x.wall_start_ns = sqlite3_column_int64(s, 1);
        x.host = ColLine(s, 2);
        x.drops = sqlite3_column_int64(s, 3);
        x.drops_detail = ColText(s, 4);
        x.gpuwhy_version = ColText(s, 5);
      }));
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  if (version >= 4) {
    RETURN_IF_ERROR(ReadGpuSamples(reader, window.session, window.begin_ns, window.end_ns,
                                   &x.gpu_devices, &x.gpu_samples));
  }
  ASSIGN_OR_RETURN(x.launch_duty, ReadLaunchDuty(reader, window.session));
  if (!found) {
    return NotFound("session " + std::to_string(window.session) + " is not in " + reader.path());
  }
  RETURN_IF_ERROR(ReadProcesses(reader, window.session, &x.processes));
  const std::vector<int64_t> range = {window.session, window.begin_ns, window.end_ns};
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT COUNT(*) FROM event_rows WHERE session = ?1 AND ts >= ?2 AND ts < ?3", range,
      [&](sqlite3_stmt* s) { x.rows_in_window = sqlite3_column_int64(s, 0); }));
  const std::vector<int64_t> seconds = {window.session, window.begin_ns / 1'000'000'000,
                                        (window.end_ns - 1) / 1'000'000'000};
  RETURN_IF_ERROR(reader.ForEach(
      std::string("SELECT sec, pid, SUM(count), SUM(total_ns), MAX(max_ns) FROM op_seconds "
                  "WHERE session = ?1 AND sec >= ?2 AND sec <= ?3 AND op IN (") +
          kLaunchOpList + ") GROUP BY sec, pid ORDER BY sec, pid",
      seconds, [&](sqlite3_stmt* s) {
        OpSecondRow r;
        r.sec = sqlite3_column_int64(s, 0);
        r.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        r.op = Op::kCudaLaunchKernel;
        r.count = sqlite3_column_int64(s, 2);
        r.total_ns = sqlite3_column_int64(s, 3);
        r.max_ns = sqlite3_column_int64(s, 4);
        x.launch_seconds.push_back(r);
      }));
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT pid, SUM(count) FROM op_seconds WHERE session = ?1 AND sec >= ?2 AND sec <= ?3 "
      "AND op < 200 GROUP BY pid",
      seconds, [&](sqlite3_stmt* s) {
        x.cuda_calls[static_cast<int32_t>(sqlite3_column_int64(s, 0))] = sqlite3_column_int64(s, 1);
      }));
  return x;
}

Status ForEachWindowEvent(StoreReader& reader, const SessionWindow& window,
                          const ExportEventFn& fn) {
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  // Columns a schema older than the file's lacks (stack_id, the wakers) read as NULL.
  const std::string sql = "SELECT r.ts, " + EventColumnsSql(version, "r.") +
                          ", s.text FROM event_rows r LEFT JOIN strings s ON s.id = r.name_id "
                          "WHERE r.session = ?1 AND r.ts >= ?2 AND r.ts < ?3 ORDER BY r.ts, r.seq";
  bool stopped = false;
  ExportEvent e;
  // ForEach cannot stop early; after `fn` declines, the remaining rows are only stepped over.
  return reader.ForEach(sql, {window.session, window.begin_ns, window.end_ns},
                        [&](sqlite3_stmt* s) {
                          if (stopped) return;
                          ReadEventColumns(s, 1, &e);
                          // An op this gpuwhy does not know (a newer file) is skipped.
                          if (!OpFromId(static_cast<int64_t>(e.op))) return;
                          e.ts_ns = sqlite3_column_int64(s, 0);
                          e.name = ColLine(s, 1 + kEventColumnCount);
                          if (!fn(e)) stopped = true;
                        });
}

StatusOr<std::vector<StackCount>> ReadStackCounts(StoreReader& reader, const SessionWindow& window,
                                                  const std::vector<Op>& ops) {
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  std::vector<StackCount> out;
  if (version < 2) return out;  // no stacks before schema 2
  std::string op_filter;
  if (!ops.empty()) {
    op_filter = " AND op IN (";
    for (size_t i = 0; i < ops.size(); ++i) {
      op_filter += (i ? "," : "") + std::to_string(static_cast<int>(ops[i]));
    }
    op_filter += ")";
  }
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT stack_id, pid, COUNT(*), SUM(duration_ns) FROM event_rows WHERE session = ?1 AND "
      "ts >= ?2 AND ts < ?3 AND stack_id IS NOT NULL" +
          op_filter + " GROUP BY stack_id, pid ORDER BY stack_id, pid",
      {window.session, window.begin_ns, window.end_ns}, [&](sqlite3_stmt* s) {
        StackCount c;
        c.stack_id = sqlite3_column_int64(s, 0);
        c.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        c.count = sqlite3_column_int64(s, 2);
        c.total_ns = sqlite3_column_int64(s, 3);
        out.push_back(c);
      }));
  return out;
}

StatusOr<int64_t> ReadProfileHz(StoreReader& reader, int64_t session) {
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  int64_t hz = 0;
  if (version < 11) return hz;
  RETURN_IF_ERROR(reader.ForEach("SELECT COALESCE(profile_hz, 0) FROM sessions WHERE id = ?1",
                                 {session},
                                 [&](sqlite3_stmt* s) { hz = sqlite3_column_int64(s, 0); }));
  return hz;
}

Status ForEachStackFrames(StoreReader& reader, int64_t session, const std::vector<int64_t>& ids,
                          const StackFramesFn& fn, int64_t* malformed) {
  *malformed = 0;
  std::vector<int64_t> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  // One statement per stack keeps every read a key lookup on stacks' (session, id) and needs no
  // id list in SQL; the number of distinct stacks is small next to the rows.
  std::vector<StackFrameRow> frames;
  for (int64_t id : sorted) {
    bool valid = false;
    bool present = false;
    RETURN_IF_ERROR(
        reader.ForEach("SELECT json_valid(frames) FROM stacks WHERE session = ?1 AND id = ?2",
                       {session, id}, [&](sqlite3_stmt* s) {
                         present = true;
                         valid = sqlite3_column_int64(s, 0) != 0;
                       }));
    if (!present) continue;
    if (!valid) {
      ++*malformed;
      continue;
    }
    frames.clear();
    RETURN_IF_ERROR(reader.ForEach(
        "SELECT kind, COALESCE(function, ''), COALESCE(file, ''), COALESCE(line, 0), "
        "COALESCE(module, '') FROM stack_frames WHERE session = ?1 AND stack_id = ?2 "
        "ORDER BY depth",
        {session, id}, [&](sqlite3_stmt* s) {
          StackFrameRow f;
          f.python = ColText(s, 0) == "py";
          f.function = ColLine(s, 1);
          f.file = ColLine(s, 2);
          f.line = sqlite3_column_int64(s, 3);
          f.module = ColLine(s, 4);
          frames.push_back(std::move(f));
        }));
    fn(id, frames);
  }
  return Status::Ok();
}

}  // namespace gw
