// The columns of an event row, declared once: every place that lists, selects, decodes or
// encodes them (the chunk codec and the `event_rows` virtual table, the readers in
// window_rows.cc and export_rows.cc, schema 9's migration, the ClickHouse sink's rows, the
// `gw_events` table and the replay from it) expands GW_EVENT_COLUMNS instead of spelling them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "store/event.h"

namespace gw {

// Each row's key comes first and differs by store: event_rows (session, ts, seq), gw_events
// (session, ts, wall_ns). The columns after it are these, in this order in both. Append only:
// the order is the on-disk order of event_rows, of a chunk's optional columns and of gw_events.
//
// X(column, since, nullable, clickhouse_column, clickhouse_type)
//   column: event_rows' column and the `Event` member that holds it;
//   since: the schema version that added it (a reader of an older file reads NULL);
//   nullable: Null (kNull = SQL NULL; a chunk stores it behind a presence map) or NotNull;
//   clickhouse_column, clickhouse_type: the gw_events column (Nullable(...) where nullable).
//     op is stored by name there and name_id as the string itself.
#define GW_EVENT_COLUMNS(X)                                 \
  X(pid, 1, NotNull, pid, "Int32")                          \
  X(tid, 1, NotNull, tid, "Int32")                          \
  X(op, 1, NotNull, op, "String")                           \
  X(duration_ns, 1, NotNull, duration_ns, "Int64")          \
  X(ret, 1, Null, ret, "Nullable(Int64)")                   \
  X(bytes, 1, Null, bytes, "Nullable(Int64)")               \
  X(kind, 1, Null, kind, "Nullable(Int64)")                 \
  X(cpu, 1, Null, cpu, "Nullable(Int64)")                   \
  X(other_pid, 1, Null, other_pid, "Nullable(Int64)")       \
  X(runq_ns, 1, Null, runq_ns, "Nullable(Int64)")           \
  X(addr, 1, Null, addr, "Nullable(Int64)")                 \
  X(name_id, 1, Null, name, "Nullable(String)")             \
  X(stack_id, 2, Null, stack_id, "Nullable(Int64)")         \
  X(waker_pid, 3, Null, waker_pid, "Nullable(Int64)")       \
  X(waker_tid, 3, Null, waker_tid, "Nullable(Int64)")

// ", pid, tid, op, …": the columns as an SQL list, each preceded by ", " (after the key).
#define GW_EVENT_COLUMN_NAME_(column, ...) ", " #column
inline constexpr const char kEventColumnList[] = GW_EVENT_COLUMNS(GW_EVENT_COLUMN_NAME_);
#undef GW_EVENT_COLUMN_NAME_

// gw_events' columns after its key (session, ts, wall_ns), for its table and for a SELECT:
// ", pid Int32, tid Int32, …" and ", pid, tid, …".
#define GW_EVENT_CH_DECL_(column, since, nullable, ch_column, ch_type) ", " #ch_column " " ch_type
inline constexpr const char kClickHouseEventColumnDecls[] = GW_EVENT_COLUMNS(GW_EVENT_CH_DECL_);
#undef GW_EVENT_CH_DECL_
#define GW_EVENT_CH_NAME_(column, since, nullable, ch_column, ch_type) ", " #ch_column
inline constexpr const char kClickHouseEventColumnList[] = GW_EVENT_COLUMNS(GW_EVENT_CH_NAME_);
#undef GW_EVENT_CH_NAME_

// The nullable columns as members, in column order: what a chunk stores behind presence maps.
#define GW_EVENT_IF_Null_(x) x,
#define GW_EVENT_IF_NotNull_(x)
#define GW_EVENT_OPTIONAL_(column, since, nullable, ...) GW_EVENT_IF_##nullable##_(&Event::column)
inline constexpr int64_t Event::*kEventOptionalColumns[] = {
    GW_EVENT_COLUMNS(GW_EVENT_OPTIONAL_)};
#undef GW_EVENT_OPTIONAL_
#undef GW_EVENT_IF_NotNull_
#undef GW_EVENT_IF_Null_
inline constexpr int kEventOptionalCount =
    static_cast<int>(sizeof(kEventOptionalColumns) / sizeof(kEventOptionalColumns[0]));

#define GW_EVENT_NAME_(column, ...) #column,
inline constexpr std::string_view kEventColumnNames[] = {GW_EVENT_COLUMNS(GW_EVENT_NAME_)};
#undef GW_EVENT_NAME_
inline constexpr int kEventColumnCount =
    static_cast<int>(sizeof(kEventColumnNames) / sizeof(kEventColumnNames[0]));
constexpr int EventColumnIndex(std::string_view column) {
  for (int i = 0; i < kEventColumnCount; ++i) {
    if (kEventColumnNames[i] == column) return i;
  }
  return -1;
}
// op and name_id: stored by name in ClickHouse.
inline constexpr int kEventOpColumn = EventColumnIndex("op");
inline constexpr int kEventNameColumn = EventColumnIndex("name_id");

#define GW_EVENT_SINCE_(column, since, ...) since,
inline constexpr int64_t kEventColumnSince[] = {GW_EVENT_COLUMNS(GW_EVENT_SINCE_)};
#undef GW_EVENT_SINCE_
#define GW_EVENT_NULLABLE_(column, since, nullable, ...) GW_EVENT_IS_##nullable##_,
#define GW_EVENT_IS_Null_ true
#define GW_EVENT_IS_NotNull_ false
inline constexpr bool kEventColumnNullable[] = {GW_EVENT_COLUMNS(GW_EVENT_NULLABLE_)};
#undef GW_EVENT_IS_NotNull_
#undef GW_EVENT_IS_Null_
#undef GW_EVENT_NULLABLE_

// Calls fn(i, field) for each column of `e` in order: i its index in GW_EVENT_COLUMNS, field
// the member (int32_t&, Op& or int64_t&; const where `e` is).
template <typename E, typename Fn>
void ForEachEventColumn(E& e, Fn&& fn) {
  static_assert(std::is_same_v<std::remove_const_t<E>, Event>);
  int i = 0;
#define GW_EVENT_VISIT_(column, ...) fn(i++, e.column);
  GW_EVENT_COLUMNS(GW_EVENT_VISIT_)
#undef GW_EVENT_VISIT_
}

// Sets a column's member from its stored integer (kNull = NULL; callers check op's id).
inline void SetEventColumn(int64_t& field, int64_t v) { field = v; }
inline void SetEventColumn(int32_t& field, int64_t v) { field = static_cast<int32_t>(v); }
inline void SetEventColumn(Op& field, int64_t v) { field = static_cast<Op>(v); }

// The columns after event_rows' key as a SELECT list for a file of schema `version`: `prefix`
// before each name, NULL for a column that version does not have yet.
inline std::string EventColumnsSql(int64_t version, const std::string& prefix) {
  std::string sql;
  for (int i = 0; i < kEventColumnCount; ++i) {
    sql += (i ? ", " : "") + (version >= kEventColumnSince[i]
                                  ? prefix + std::string(kEventColumnNames[i])
                                  : std::string("NULL"));
  }
  return sql;
}

}  // namespace gw
