#include "store/rollup_rows.h"

#include "store/reader.h"
#include "store/row_columns.h"

namespace gw {

StatusOr<int64_t> EstimateWindowRows(StoreReader& reader, const SessionWindow& window) {
  int64_t rows = 0;
  RETURN_IF_ERROR(reader.ForEach(
      std::string("SELECT COALESCE(SUM(count), 0) FROM op_seconds WHERE session = ?1 AND "
                  "sec >= ?2 AND sec <= ?3 AND op NOT IN (") +
          kLaunchOpList + ")",
      {window.session, window.begin_ns / 1'000'000'000, (window.end_ns - 1) / 1'000'000'000},
      [&](sqlite3_stmt* s) { rows = sqlite3_column_int64(s, 0); }));
  return rows;
}

StatusOr<RollupWindow> ReadRollupWindow(StoreReader& reader, const SessionWindow& window,
                                        const TierSpan& span) {
  RollupWindow out;
  out.span = span;
  RETURN_IF_ERROR(ReadProcesses(reader, window.session, &out.processes));
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT COALESCE(tracer_pid, 0) FROM sessions WHERE id = ?1", {window.session},
      [&](sqlite3_stmt* s) { out.tracer_pid = static_cast<int32_t>(sqlite3_column_int64(s, 0)); }));
  // A bucket overlaps [begin, end) when it starts before end and ends after begin.
  int64_t first_bucket = window.begin_ns / 1'000'000'000 - kThreadRollupSeconds + 1;
  RETURN_IF_ERROR(reader.ForEach(
      "SELECT sec, pid, tid, switches, preempted, runq_ns, blocked_ns, io_ns, fault_ns, "
      "woken_irq, woken_same, woken_other, cuda_calls, syncs, sync_ns FROM thread_rollups "
      "WHERE session = ?1 AND sec >= ?2 AND sec <= ?3",
      {window.session, first_bucket, (window.end_ns - 1) / 1'000'000'000},
      [&](sqlite3_stmt* s) {
        ThreadRollupRow row;
        row.key.sec = sqlite3_column_int64(s, 0);
        row.key.pid = static_cast<int32_t>(sqlite3_column_int64(s, 1));
        row.key.tid = static_cast<int32_t>(sqlite3_column_int64(s, 2));
        int64_t* fields[] = {&row.r.switches,  &row.r.preempted,  &row.r.runq_ns,
                             &row.r.blocked_ns, &row.r.io_ns,     &row.r.fault_ns,
                             &row.r.woken_irq,  &row.r.woken_same, &row.r.woken_other,
                             &row.r.cuda_calls, &row.r.syncs,     &row.r.sync_ns};
        for (int i = 0; i < 12; ++i) *fields[i] = sqlite3_column_int64(s, 3 + i);
        out.threads.push_back(row);
      }));
  return out;
}

}  // namespace gw
