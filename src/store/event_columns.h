// The columns of an event row, declared once: whatever lists, selects, decodes or encodes them
// (store and src/clickhouse alike) expands GW_EVENT_COLUMNS.
#pragma once

#include <cstdint>
#include <string>

#include "store/event.h"

namespace gw {

// The columns after the row's key, in this order in event_rows (key: session, ts, seq) and in
// gw_events (key: session, ts, wall_ns). Append only: the order is on disk.
// X(column, since, nullable, clickhouse_column, clickhouse_type)
//   column: event_rows' column and the `Event` member; since: the schema version that added it
//   (a reader of an older file reads NULL); Null: may be NULL (kNull; a chunk keeps a presence
//   map), NotNull: always set. gw_events holds op by name and name_id as the text itself.
#define GW_EVENT_COLUMNS(X)                           \
  X(pid, 1, NotNull, pid, "Int32")                    \
  X(tid, 1, NotNull, tid, "Int32")                    \
  X(op, 1, NotNull, op, "String")                     \
  X(duration_ns, 1, NotNull, duration_ns, "Int64")    \
  X(ret, 1, Null, ret, "Nullable(Int64)")             \
  X(bytes, 1, Null, bytes, "Nullable(Int64)")         \
  X(kind, 1, Null, kind, "Nullable(Int64)")           \
  X(cpu, 1, Null, cpu, "Nullable(Int64)")             \
  X(other_pid, 1, Null, other_pid, "Nullable(Int64)") \
  X(runq_ns, 1, Null, runq_ns, "Nullable(Int64)")     \
  X(addr, 1, Null, addr, "Nullable(Int64)")           \
  X(name_id, 1, Null, name, "Nullable(String)")       \
  X(stack_id, 2, Null, stack_id, "Nullable(Int64)")   \
  X(waker_pid, 3, Null, waker_pid, "Nullable(Int64)") \
  X(waker_tid, 3, Null, waker_tid, "Nullable(Int64)") \
  X(since_work_ns, 13, Null, since_work_ns, "Nullable(Int64)")

// String literals, each column preceded by ", ": event_rows' names (", pid, tid, …") and
// gw_events' declarations (", pid Int32, …").
#define GW_EVENT_COLUMN_LIST GW_EVENT_COLUMNS(GW_EVENT_NAME_)
#define GW_CLICKHOUSE_EVENT_COLUMN_DECLS GW_EVENT_COLUMNS(GW_EVENT_CH_DECL_)
#define GW_EVENT_NAME_(column, ...) ", " #column
#define GW_EVENT_CH_DECL_(column, since, nullable, ch_column, ch_type) ", " #ch_column " " ch_type
#define GW_EVENT_INDEX_(column, ...) kEventColumn_##column,
#define GW_EVENT_MEMBER_(column, since, nullable, ...) GW_EVENT_MEMBER_##nullable(column)
#define GW_EVENT_MEMBER_Null(column) &Event::column,
#define GW_EVENT_MEMBER_NotNull(column)

// Each column's index in the list (kEventColumn_pid, …), and their count.
enum EventColumnIndex : int { GW_EVENT_COLUMNS(GW_EVENT_INDEX_) kEventColumnCount };
// The nullable columns' members, in column order (a chunk stores them behind presence maps).
inline constexpr int64_t Event::*kEventOptionalColumns[] = {GW_EVENT_COLUMNS(GW_EVENT_MEMBER_)};
inline constexpr int kEventOptionalCount = sizeof(kEventOptionalColumns) / sizeof(void*);

// Calls fn(i, field) for each column of `e` (an Event, const or not) in order: i its index,
// field its member (int32_t&, Op& or int64_t&).
template <typename E, typename Fn>
void ForEachEventColumn(E& e, Fn&& fn) {
  int i = 0;
#define GW_EVENT_VISIT_(column, ...) fn(i++, e.column);
  GW_EVENT_COLUMNS(GW_EVENT_VISIT_)
#undef GW_EVENT_VISIT_
}

// The columns as a SELECT list for a file of schema `version`: `prefix` before each name, NULL
// for a column that version does not have yet.
inline std::string EventColumnsSql(int64_t version, const std::string& prefix) {
  std::string sql;
#define GW_EVENT_SELECT_(column, since, ...) \
  sql += (sql.empty() ? "" : ", ") + (version >= since ? prefix + #column : "NULL");
  GW_EVENT_COLUMNS(GW_EVENT_SELECT_)
#undef GW_EVENT_SELECT_
  return sql;
}

}  // namespace gw
