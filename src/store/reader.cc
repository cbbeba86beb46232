#include "store/reader.h"

#include <sys/stat.h>

#include <chrono>
#include <cstring>

#include "store/schema.h"

namespace gw {

namespace {

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Pragmas whose argument names an object to describe (never a new setting).
bool IsDescribePragma(const char* name) {
  static const char* const kAllowed[] = {"table_info", "table_xinfo", "table_list", "index_list",
                                         "index_info", "index_xinfo", "foreign_key_list"};
  for (const char* a : kAllowed) {
    if (name != nullptr && strcasecmp(name, a) == 0) return true;
  }
  return false;
}

// Pragmas that only read state when given no value; `PRAGMA x = y` is refused.
bool IsReadOnlyPragma(const char* name) {
  if (IsDescribePragma(name)) return true;
  static const char* const kAllowed[] = {"database_list", "collation_list", "function_list", "pragma_list",
      "compile_options", "page_count", "page_size", "freelist_count", "schema_version",
      "user_version", "data_version", "encoding", "journal_mode"};
  for (const char* a : kAllowed) {
    if (name != nullptr && strcasecmp(name, a) == 0) return true;
  }
  return false;
}

Cell ColumnCell(sqlite3_stmt* stmt, int i) {
  switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_INTEGER:
      return static_cast<int64_t>(sqlite3_column_int64(stmt, i));
    case SQLITE_FLOAT:
      return sqlite3_column_double(stmt, i);
    case SQLITE_NULL:
      return std::monostate{};
    default: {
      const unsigned char* t = sqlite3_column_text(stmt, i);
      int n = sqlite3_column_bytes(stmt, i);
      return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(n));
    }
  }
}

}  // namespace

int ReaderAuthorizer(void* user, int action, const char* a1, const char* a2, const char*,
                     const char*) {
  auto* reader = static_cast<StoreReader*>(user);
  switch (action) {
    case SQLITE_SELECT:
    case SQLITE_READ:
    case SQLITE_RECURSIVE:
      return SQLITE_OK;
    case SQLITE_FUNCTION:
      if (a2 != nullptr && (strcasecmp(a2, "load_extension") == 0 ||
                            strcasecmp(a2, "readfile") == 0 || strcasecmp(a2, "writefile") == 0)) {
        reader->authorizer_denied_ = true;
        reader->denied_what_ = std::string("the function ") + a2;
        return SQLITE_DENY;
      }
      return SQLITE_OK;
    case SQLITE_PRAGMA:
      if ((a2 == nullptr && IsReadOnlyPragma(a1)) || IsDescribePragma(a1)) return SQLITE_OK;
      reader->authorizer_denied_ = true;
      reader->denied_what_ = std::string("PRAGMA ") + (a1 ? a1 : "") + (a2 ? " = value" : "");
      return SQLITE_DENY;
    case SQLITE_ATTACH:
    case SQLITE_DETACH:
      reader->authorizer_denied_ = true;
      reader->denied_what_ = "ATTACH/DETACH";
      return SQLITE_DENY;
    default:
      reader->authorizer_denied_ = true;
      reader->denied_what_ = "a statement that changes the database";
      return SQLITE_DENY;
  }
}

int ReaderProgress(void* user) {
  auto* reader = static_cast<StoreReader*>(user);
  return (reader->deadline_ms_ != 0 && NowMs() > reader->deadline_ms_) ? 1 : 0;
}

StatusOr<std::unique_ptr<StoreReader>> StoreReader::Open(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return NotFound("database " + path +
                    " does not exist — hint: record one with `sudo gpuwhy trace`, or make a "
                    "sample with `gpuwhy demo --keep " + path + "`; --db or GPUWHY_DB choose "
                    "another file");
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgument("database " + path + " is a directory");
  if (st.st_size == 0) {
    return FailedPrecondition("database " + path + " is empty (0 bytes) — hint: it was created "
                              "but nothing was recorded; run `sudo gpuwhy trace --db " + path +
                              "`");
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "open database " + path + " read-only");
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  sqlite3_busy_timeout(db.get(), 5000);
  std::unique_ptr<StoreReader> reader(new StoreReader(path, std::move(db)));
  Status schema = CheckSchemaReadable(reader->db_.get());
  if (!schema.ok()) {
    if (schema.message().find("not a database") != std::string::npos ||
        schema.code() == StatusCode::kDataLoss) {
      return DataLoss("database " + path +
                      " is not a SQLite database or is corrupt — hint: check the path; gpuwhy "
                      "databases are written by `gpuwhy trace` and `gpuwhy demo --keep`");
    }
    return schema.WithContext("database " + path);
  }
  sqlite3_set_authorizer(reader->db_.get(), ReaderAuthorizer, reader.get());
  sqlite3_progress_handler(reader->db_.get(), 10000, ReaderProgress, reader.get());
  return reader;
}

StatusOr<ScopedStmt> StoreReader::PrepareReadOnly(const std::string& sql) {
  authorizer_denied_ = false;
  sqlite3_stmt* stmt = nullptr;
  const char* tail = nullptr;
  int rc = sqlite3_prepare_v2(db_.get(), sql.c_str(), static_cast<int>(sql.size()), &stmt, &tail);
  ScopedStmt owned(stmt);
  if (rc != SQLITE_OK) {
    if (authorizer_denied_) {
      return PermissionDenied("refused: " + denied_what_ +
                              " — gpuwhy opens databases read-only; only SELECT (and read-only "
                              "PRAGMAs) may run");
    }
    return InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db_.get()));
  }
  if (stmt == nullptr) return InvalidArgument("SQL error: empty statement");
  if (tail != nullptr) {
    while (*tail == ' ' || *tail == '\n' || *tail == '\t' || *tail == '\r' || *tail == ';') ++tail;
    if (*tail != '\0') {
      return InvalidArgument("SQL error: only one statement may run at a time (found more "
                             "after the first ';')");
    }
  }
  if (!sqlite3_stmt_readonly(stmt)) {
    return PermissionDenied("refused: the statement would change the database — gpuwhy opens "
                            "databases read-only");
  }
  return owned;
}

StatusOr<Table> StoreReader::Query(const std::string& sql, const QueryOptions& options) {
  return QueryWith(sql, {}, options);
}

StatusOr<Table> StoreReader::QueryWith(const std::string& sql, const std::vector<int64_t>& params,
                                       const QueryOptions& options) {
  ASSIGN_OR_RETURN(ScopedStmt stmt, PrepareReadOnly(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_int64(stmt.get(), static_cast<int>(i + 1), params[i]);
  }
  Table table;
  int n = sqlite3_column_count(stmt.get());
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt.get(), i);
    table.columns.emplace_back(name ? name : "");
  }
  deadline_ms_ = options.timeout_ms > 0 ? NowMs() + options.timeout_ms : 0;
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    if (options.max_rows > 0 && static_cast<int64_t>(table.rows.size()) >= options.max_rows) {
      table.truncated = true;
      table.limit = options.max_rows;
      break;
    }
    std::vector<Cell> row;
    row.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) row.push_back(ColumnCell(stmt.get(), i));
    table.rows.push_back(std::move(row));
  }
  deadline_ms_ = 0;
  if (rc == SQLITE_INTERRUPT) {
    return Unavailable("query stopped after " + std::to_string(options.timeout_ms) +
                       " ms (time limit) — hint: narrow it with a timestamp range or LIMIT");
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
      return DataLoss("database " + path_ + " is corrupt: " + sqlite3_errmsg(db_.get()));
    }
    return InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db_.get()));
  }
  return table;
}

Status StoreReader::ForEach(const std::string& sql, const std::vector<int64_t>& params,
                            const RowFn& fn) {
  ASSIGN_OR_RETURN(ScopedStmt stmt, PrepareReadOnly(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_int64(stmt.get(), static_cast<int>(i + 1), params[i]);
  }
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) fn(stmt.get());
  if (rc != SQLITE_DONE) return SqliteStatus(db_.get(), rc, "read " + path_);
  return Status::Ok();
}

StatusOr<std::vector<SessionSummary>> StoreReader::Sessions() {
  std::vector<SessionSummary> out;
  RETURN_IF_ERROR(ForEach(
      "SELECT s.id, s.kind, s.wall_start_ns, COALESCE(s.wall_stop_ns, 0), COALESCE(s.host,''), "
      "COALESCE(s.kernel,''), COALESCE(s.cpu_model,''), COALESCE(s.cores,0), "
      "COALESCE(s.mem_bytes,0), COALESCE(s.gpu_model,''), COALESCE(s.gpu_driver,''), "
      "COALESCE(s.command_line,''), s.events, s.drops, COALESCE(s.drops_detail,''), "
      "COALESCE((SELECT MIN(ts) FROM event_rows WHERE session = s.id), 0), "
      "COALESCE((SELECT MAX(ts) FROM event_rows WHERE session = s.id), 0) "
      "FROM sessions s ORDER BY s.id",
      {}, [&](sqlite3_stmt* st) {
        auto text = [&](int i) {
          const unsigned char* t = sqlite3_column_text(st, i);
          return t ? std::string(reinterpret_cast<const char*>(t)) : std::string();
        };
        SessionSummary s;
        s.id = sqlite3_column_int64(st, 0);
        s.kind = text(1);
        s.wall_start_ns = sqlite3_column_int64(st, 2);
        s.wall_stop_ns = sqlite3_column_int64(st, 3);
        s.host = text(4);
        s.kernel = text(5);
        s.cpu_model = text(6);
        s.cores = sqlite3_column_int64(st, 7);
        s.mem_bytes = sqlite3_column_int64(st, 8);
        s.gpu_model = text(9);
        s.gpu_driver = text(10);
        s.command_line = text(11);
        s.events = sqlite3_column_int64(st, 12);
        s.drops = sqlite3_column_int64(st, 13);
        s.drops_detail = text(14);
        s.first_ts = sqlite3_column_int64(st, 15);
        s.last_ts = sqlite3_column_int64(st, 16);
        out.push_back(std::move(s));
      }));
  return out;
}

StatusOr<int64_t> StoreReader::LatestSession() {
  int64_t id = 0;
  RETURN_IF_ERROR(ForEach("SELECT MAX(id) FROM sessions", {}, [&](sqlite3_stmt* st) {
    if (sqlite3_column_type(st, 0) != SQLITE_NULL) id = sqlite3_column_int64(st, 0);
  }));
  if (id == 0) return NotFound("database " + path_ + " holds no recording session yet");
  return id;
}

}  // namespace gw
