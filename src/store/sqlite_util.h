// RAII and Status helpers over the SQLite C API. Only src/store uses SQLite directly.
#pragma once

#include <sqlite3.h>

#include <string>

#include "base/scoped.h"
#include "base/status.h"

namespace gw {

inline void CloseDb(sqlite3* db) { sqlite3_close_v2(db); }
inline void FinalizeStmt(sqlite3_stmt* s) { sqlite3_finalize(s); }
using ScopedDb = ScopedResource<sqlite3*, CloseDb, nullptr>;
using ScopedStmt = ScopedResource<sqlite3_stmt*, FinalizeStmt, nullptr>;

// "what: SQLite's message" as a Status with a code mapped from the result code.
Status SqliteStatus(sqlite3* db, int rc, const std::string& what);
// Runs statements that return no rows.
Status Exec(sqlite3* db, const std::string& sql);
StatusOr<ScopedStmt> Prepare(sqlite3* db, const std::string& sql);
// Runs a single-value query; returns kNull-like default when there is no row.
StatusOr<int64_t> QueryInt(sqlite3* db, const std::string& sql, int64_t if_empty);
StatusOr<std::string> QueryText(sqlite3* db, const std::string& sql, const std::string& if_empty);

}  // namespace gw
