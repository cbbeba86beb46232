// The database schema, declared once. docs/schema.md documents every table and column.
//
// Several sessions share one file: every raw table carries a `session` column
// (sessions.id); timestamps are ns since that session's start. The views `events`,
// `process_names` and `system_context` show the newest session only, so the brief's queries
// run verbatim against "the last recording"; `events_all` and the raw tables hold every session.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>

#include "base/status.h"

namespace gw {

inline constexpr int kSchemaVersion = 13;

// Progress of a migration that rewrites the events (schema 9 moved them into chunks): `done`
// of `total` rows, reported once before the first row, every kMigrationProgressRows rows, and
// once after the last.
using MigrationProgress = std::function<void(int64_t done, int64_t total)>;
inline constexpr int64_t kMigrationProgressRows = 1 << 20;

// Creates the schema in an empty database, or migrates an older one in place (in one
// transaction: an interrupted migration leaves the file as it was). Refuses a file written by
// a newer gpuwhy and a SQLite file that is not a gpuwhy database.
Status CreateOrMigrateSchema(sqlite3* db, const MigrationProgress& progress = nullptr);

// Both register the module behind event_rows (event_rows_table.h) on `db` first: a connection
// that reads or writes a recording goes through one of them.
//
// For read-only handles: checks the file is a gpuwhy database this build understands. Files
// of an older schema version are readable as they are; newer ones are refused.
Status CheckSchemaReadable(sqlite3* db);

}  // namespace gw
