// `event_rows` since schema 9: a virtual table (module `gw_events`) that shows the chunks of
// `event_chunks` (event_chunk.h) as one row per event, with the columns event_rows had as a
// plain table: session, ts, seq, then GW_EVENT_COLUMNS (event_columns.h). The views (`events`,
// `events_all`), the brief's SQL and every reader query it unchanged.
//
// Constraints on session (=) and ts (=, <, <=, >, >=) become a range of the chunks' key, and
// the rows come out in (session, ts, seq) order (a merge of the chunks that overlap in time),
// so ORDER BY ts costs nothing. Read-only: the writer stores chunks itself. Every connection
// that reads a schema-9 file registers the module first (StoreReader and StoreWriter do).
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>

#include "base/status.h"

namespace gw {

Status RegisterEventRowsModule(sqlite3* db);

// Statements over a session's raw rows that need no decoding, for a file of `schema_version`
// (older files have a plain event_rows table). `session` is an SQL expression (?1, s.id);
// each statement gives one value, NULL when the session has no rows.
// With `lo`/`hi` (SQL expressions), among the rows with timestamps in [lo, hi] only: a
// session's plausible span, so that one edited chunk far outside it does not stretch it.
std::string RawFirstTsSql(int64_t schema_version, const std::string& session,
                          const std::string& lo = "", const std::string& hi = "");
std::string RawLastTsSql(int64_t schema_version, const std::string& session,
                         const std::string& lo = "", const std::string& hi = "");
std::string RawCountSql(int64_t schema_version, const std::string& session);
// (session, rows) for every session with rows.
std::string RawCountBySessionSql(int64_t schema_version);

// True on this thread while the module declares event_rows' columns to SQLite (xConnect),
// which parses a CREATE TABLE. A read-only connection's authorizer lets that parse through.
bool DeclaringEventRows();

}  // namespace gw
