#include "store/reader.h"

#include "base/text.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "store/event_rows_table.h"
#include "store/schema.h"

namespace gw {

namespace {

// The calling thread's cancellation flag (QueryCancelScope); null when none.
thread_local const std::atomic<bool>* t_cancel_flag = nullptr;

bool CancelRequested(const std::atomic<bool>* flag) {
  return flag != nullptr && flag->load(std::memory_order_relaxed);
}

// The calling thread's QueryDeadlineScope: monotonic ms (0 = none), its length and its label.
thread_local int64_t t_deadline_ms = 0;
thread_local int64_t t_deadline_timeout_ms = 0;
thread_local std::string t_deadline_what;

constexpr const char* kCancelledMessage = "query cancelled by the client";

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

// SQL functions a query may call: plain value functions, aggregates, windows, dates, math and
// JSON. Everything else Debian's SQLite has is refused, notably fts3_tokenizer (it hands out and
// accepts raw code pointers: an address leak and a control-flow hijack), the other FTS and
// R*Tree internals, load_extension, sqlite_log and the compile-option probes.
bool IsAllowedFunction(const char* name) {
  static const char* const kAllowed[] = {
      "->", "->>", "abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "avg",
      "ceil", "ceiling", "changes", "char", "coalesce", "concat", "concat_ws", "cos", "cosh",
      "count", "cume_dist", "current_date", "current_time", "current_timestamp", "date",
      "datetime", "degrees", "dense_rank", "exp", "first_value", "floor", "format", "glob",
      "group_concat", "hex", "ifnull", "iif", "instr", "json", "json_array",
      "json_array_length", "json_each", "json_extract", "json_group_array", "json_group_object",
      "json_insert", "json_object", "json_patch", "json_quote", "json_remove", "json_replace",
      "json_set", "json_tree", "json_type", "json_valid", "julianday", "lag", "last_insert_rowid",
      "last_value", "lead", "length", "like", "likelihood", "likely", "ln", "log", "log10",
      "log2", "lower", "ltrim", "max", "min", "mod", "nth_value", "ntile", "nullif",
      "octet_length", "percent_rank", "pi", "pow", "power", "printf", "quote", "radians",
      "random", "randomblob", "rank", "replace", "round", "row_number", "rtrim", "sign", "sin",
      "sinh", "sqlite_version", "sqrt", "strftime", "string_agg", "substr", "substring", "sum",
      "tan", "tanh", "time", "timediff", "total", "total_changes", "trim", "trunc", "typeof",
      "unhex", "unicode", "unixepoch", "unlikely", "upper", "zeroblob"};
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

// Read-only hardening shared by every reader connection.
void ConfigureReader(sqlite3* db) {
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, 0, nullptr);
  sqlite3_db_config(db, SQLITE_DBCONFIG_DEFENSIVE, 1, nullptr);
  // A database file may come from anyone: FTS3 takes no tokenizer pointer. (Functions its views
  // call go through the authorizer's allow-list like any other; SQLite 3.40 does not mark
  // json_extract innocuous, so TRUSTED_SCHEMA=0 would refuse gpuwhy's own views.)
  sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_FTS3_TOKENIZER, 0, nullptr);
  // One value (randomblob(1e9), a grown string) at most 64 MiB, one statement at most 1 MiB.
  sqlite3_limit(db, SQLITE_LIMIT_LENGTH, kMaxValueBytes);
  sqlite3_limit(db, SQLITE_LIMIT_SQL_LENGTH, 1 << 20);
  sqlite3_limit(db, SQLITE_LIMIT_ATTACHED, 0);
  sqlite3_busy_timeout(db, 5000);
}

// The file opened with immutable=1 (no locks, no -shm): for files that cannot change.
StatusOr<ScopedDb> OpenImmutable(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      uri += buf;
    } else {
      uri += c;
    }
  }
  uri += "?immutable=1";
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(uri.c_str(), &raw, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "open database " + path + " immutable");
  return db;
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
      if (!IsAllowedFunction(a2)) {
        reader->authorizer_denied_ = true;
        reader->denied_what_ = std::string("the function ") + (a2 ? a2 : "?") +
                               " (not on gpuwhy's list of harmless SQL functions)";
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
      if (DeclaringEventRows()) return SQLITE_OK;
      reader->authorizer_denied_ = true;
      reader->denied_what_ = "a statement that changes the database";
      return SQLITE_DENY;
  }
}

// Interrupts the statement at its deadline, or once `cancel` is set, from a thread of its own:
// the progress handler runs only every 10,000 VM steps, and one step (a 50 MB printf) can take
// long. sqlite3_interrupt is called under mu_, and the destructor takes mu_ before the
// statement's owner goes on, so the connection is open whenever it is interrupted.
class Watchdog {
 public:
  Watchdog(sqlite3* db, int64_t timeout_ms, const std::atomic<bool>* cancel) : db_(db) {
    if (timeout_ms <= 0 && cancel == nullptr) return;
    thread_ = std::thread([this, timeout_ms, cancel] {
      using Clock = std::chrono::steady_clock;
      const Clock::time_point deadline = timeout_ms > 0
                                             ? Clock::now() + std::chrono::milliseconds(timeout_ms)
                                             : Clock::time_point::max();
      std::unique_lock<std::mutex> lock(mu_);
      while (!done_) {
        if (CancelRequested(cancel) || Clock::now() >= deadline) {
          sqlite3_interrupt(db_);
          return;
        }
        // Without a cancellation flag only the deadline can end it: sleep until then.
        Clock::time_point wake =
            cancel != nullptr ? std::min(deadline, Clock::now() + std::chrono::milliseconds(20))
                              : deadline;
        cv_.wait_until(lock, wake, [&] { return done_; });
      }
    });
  }
  ~Watchdog() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  sqlite3* db_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

std::string FormatSecondsText(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms % 1000 == 0 ? "%.0f s" : "%.1f s", static_cast<double>(ms) / 1000);
  return buf;
}

bool ScopeDeadlinePassed() { return t_deadline_ms != 0 && NowMs() > t_deadline_ms; }

Status ScopeDeadlineStatus() {
  return Unavailable(t_deadline_what + " reached its time limit of " +
                     FormatSecondsText(t_deadline_timeout_ms) +
                     " — hint: ask for a shorter window (since_s / from_s, to_s)");
}

int ReaderProgress(void* user) {
  auto* reader = static_cast<StoreReader*>(user);
  if (CancelRequested(t_cancel_flag)) return 1;
  if (ScopeDeadlinePassed()) return 1;
  return (reader->deadline_ms_ != 0 && NowMs() > reader->deadline_ms_) ? 1 : 0;
}

QueryDeadlineScope::QueryDeadlineScope(int64_t timeout_ms, std::string what)
    : previous_deadline_ms_(t_deadline_ms),
      previous_timeout_ms_(t_deadline_timeout_ms),
      previous_what_(std::move(t_deadline_what)) {
  t_deadline_ms = timeout_ms > 0 ? NowMs() + timeout_ms : 0;
  t_deadline_timeout_ms = timeout_ms;
  t_deadline_what = std::move(what);
}

QueryDeadlineScope::~QueryDeadlineScope() {
  t_deadline_ms = previous_deadline_ms_;
  t_deadline_timeout_ms = previous_timeout_ms_;
  t_deadline_what = std::move(previous_what_);
}

QueryCancelScope::QueryCancelScope(const std::atomic<bool>* cancelled)
    : previous_(t_cancel_flag) {
  t_cancel_flag = cancelled;
}

QueryCancelScope::~QueryCancelScope() { t_cancel_flag = previous_; }

StatusOr<std::unique_ptr<StoreReader>> StoreReader::Open(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return NotFound("database " + path +
                    " does not exist — hint: record one with `sudo gpuwhy trace`, or make a "
                    "sample with `gpuwhy demo cpu-contention --keep " + path + "`; --db or GPUWHY_DB choose "
                    "another file");
  }
  if (S_ISDIR(st.st_mode)) return InvalidArgument("database " + path + " is a directory");
  if (st.st_size == 0) {
    return FailedPrecondition("database " + path + " is empty (0 bytes) — hint: it was created "
                              "but nothing was recorded; run `sudo gpuwhy trace --db " + path +
                              "`");
  }
  if (access(path.c_str(), R_OK) != 0 && errno == EACCES) {
    return PermissionDenied("database " + path + " is not readable by this user (recordings "
                            "hold command lines, so gpuwhy creates them 0600) — hint: read it as "
                            "its owner, or have them share it: chmod 0644 " + path);
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "open database " + path + " read-only");
  ConfigureReader(db.get());
  std::unique_ptr<StoreReader> reader(new StoreReader(path, std::move(db)));
  Status schema = CheckSchemaReadable(reader->db_.get());
  if (!schema.ok() && (schema.message().find("readonly") != std::string::npos ||
                       schema.message().find("unable to open") != std::string::npos)) {
    // A WAL database in a directory this user cannot write (root's recording, shared with
    // chmod): SQLite cannot make or open the -shm. With no -wal content outstanding the main
    // file is the whole recording, and it can be read as immutable.
    struct stat wal;
    bool wal_empty = stat((path + "-wal").c_str(), &wal) != 0 || wal.st_size == 0;
    if (wal_empty) {
      StatusOr<ScopedDb> immutable = OpenImmutable(path);
      if (immutable.ok()) {
        reader.reset(new StoreReader(path, std::move(*immutable)));
        ConfigureReader(reader->db_.get());
        schema = CheckSchemaReadable(reader->db_.get());
      }
    } else {
      return FailedPrecondition(
          "database " + path + " has a write-ahead log that this user cannot open (" +
          schema.message() + ") — hint: read it as the user who recorded it, or after that "
          "recording ends");
    }
  }
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

StatusOr<std::unique_ptr<StoreReader>> StoreReader::OpenWritten(const DatabaseFile& file) {
  const DatabaseLocation& at = file.location;
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(at.open_path.c_str(), &raw,
                           SQLITE_OPEN_READONLY | (at.no_links ? SQLITE_OPEN_NOFOLLOW : 0),
                           nullptr);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "open database " + at.path + " read-only");
  struct stat st {};
  if (file.dev == 0 || lstat(at.open_path.c_str(), &st) != 0 || st.st_dev != file.dev ||
      st.st_ino != file.ino) {
    return FailedPrecondition("database " + at.path +
                              " is no longer the file this trace writes (replaced or linked "
                              "since it was opened): not read");
  }
  ConfigureReader(db.get());
  std::unique_ptr<StoreReader> reader(new StoreReader(at.path, std::move(db)));
  RETURN_IF_ERROR(CheckSchemaReadable(reader->db_.get()).WithContext("database " + at.path));
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
    std::string message = sqlite3_errmsg(db_.get());
    if (message.find("may not be modified") != std::string::npos) {
      // A write to event_rows, which is a virtual table without writes: SQLite refuses it
      // before the authorizer sees it.
      return PermissionDenied("refused: " + message + " — gpuwhy opens databases read-only; "
                              "only SELECT (and read-only PRAGMAs) may run");
    }
    return InvalidArgument("SQL error: " + message);
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
  Table table;
  ASSIGN_OR_RETURN(QueryEnd end,
                   QueryStream(
                       sql, params, options,
                       [&](const std::vector<std::string>& columns) { table.columns = columns; },
                       [&](std::vector<Cell>&& row) { table.rows.push_back(std::move(row)); }));
  table.truncated = end.truncated;
  table.limit = end.truncated ? options.max_rows : 0;
  return table;
}

StatusOr<QueryEnd> StoreReader::QueryStream(const std::string& sql,
                                            const std::vector<int64_t>& params,
                                            const QueryOptions& options, const HeaderFn& header,
                                            const CellRowFn& row_fn) {
  if (ScopeDeadlinePassed()) return ScopeDeadlineStatus();
  ASSIGN_OR_RETURN(ScopedStmt stmt, PrepareReadOnly(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_int64(stmt.get(), static_cast<int>(i + 1), params[i]);
  }
  std::vector<std::string> columns;
  int n = sqlite3_column_count(stmt.get());
  for (int i = 0; i < n; ++i) {
    const char* name = sqlite3_column_name(stmt.get(), i);
    columns.emplace_back(name ? name : "");
  }
  header(columns);
  QueryEnd end;
  deadline_ms_ = options.timeout_ms > 0 ? NowMs() + options.timeout_ms : 0;
  int rc;
  {
    int64_t timeout_ms = options.timeout_ms;
    if (t_deadline_ms != 0) {
      int64_t left = std::max<int64_t>(1, t_deadline_ms - NowMs());
      timeout_ms = timeout_ms > 0 ? std::min(timeout_ms, left) : left;
    }
    Watchdog watchdog(db_.get(), timeout_ms, t_cancel_flag);
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
      if (options.max_rows > 0 && end.rows >= options.max_rows) {
        end.truncated = true;
        break;
      }
      std::vector<Cell> row;
      row.reserve(static_cast<size_t>(n));
      for (int i = 0; i < n; ++i) row.push_back(ColumnCell(stmt.get(), i));
      row_fn(std::move(row));
      ++end.rows;
    }
  }
  deadline_ms_ = 0;
  if (rc == SQLITE_INTERRUPT && CancelRequested(t_cancel_flag)) {
    return Unavailable(kCancelledMessage);
  }
  if (rc == SQLITE_INTERRUPT && t_deadline_ms != 0 && NowMs() >= t_deadline_ms) {
    return ScopeDeadlineStatus();
  }
  if (rc == SQLITE_INTERRUPT) {
    return Unavailable("query stopped after " + std::to_string(options.timeout_ms) +
                       " ms (time limit) — hint: narrow it with a timestamp range or LIMIT");
  }
  if (rc == SQLITE_TOOBIG) {
    return InvalidArgument("SQL error: a value is larger than " +
                           std::to_string(kMaxValueBytes >> 20) + " MiB (gpuwhy's limit for one "
                           "value)");
  }
  if (rc == SQLITE_NOMEM) {
    return Unavailable("query stopped: it needs more than " +
                       std::to_string(kQueryHeapLimitBytes >> 20) +
                       " MiB of SQLite memory — hint: narrow it with a timestamp range or LIMIT");
  }
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    if (rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT) {
      return DataLoss("database " + path_ + " is corrupt: " + sqlite3_errmsg(db_.get()));
    }
    return InvalidArgument(std::string("SQL error: ") + sqlite3_errmsg(db_.get()));
  }
  return end;
}

void StoreReader::LimitProcessHeap() { sqlite3_hard_heap_limit64(kQueryHeapLimitBytes); }

Status StoreReader::ForEach(const std::string& sql, const std::vector<int64_t>& params,
                            const RowFn& fn) {
  if (ScopeDeadlinePassed()) return ScopeDeadlineStatus();
  ASSIGN_OR_RETURN(ScopedStmt stmt, PrepareReadOnly(sql));
  for (size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_int64(stmt.get(), static_cast<int>(i + 1), params[i]);
  }
  int rc;
  {
    // Under a deadline scope a single slow step is interrupted too.
    int64_t left = t_deadline_ms != 0 ? std::max<int64_t>(1, t_deadline_ms - NowMs()) : 0;
    Watchdog watchdog(db_.get(), left, left > 0 ? t_cancel_flag : nullptr);
    while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) fn(stmt.get());
  }
  if (rc == SQLITE_INTERRUPT && CancelRequested(t_cancel_flag)) {
    return Unavailable(kCancelledMessage);
  }
  if (rc == SQLITE_INTERRUPT && t_deadline_ms != 0 && NowMs() >= t_deadline_ms) {
    return ScopeDeadlineStatus();
  }
  if (rc != SQLITE_DONE) return SqliteStatus(db_.get(), rc, "read " + path_);
  return Status::Ok();
}

StatusOr<int64_t> StoreReader::SchemaVersion() {
  int64_t version = 0;
  RETURN_IF_ERROR(ForEach("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'schema_version'",
                          {}, [&](sqlite3_stmt* st) { version = sqlite3_column_int64(st, 0); }));
  return version;
}

StatusOr<std::vector<SessionSummary>> StoreReader::Sessions() {
  std::vector<SessionSummary> out;
  // Schema 3 added sessions.tracer_pid.
  ASSIGN_OR_RETURN(int64_t version, SchemaVersion());
  RETURN_IF_ERROR(ForEach(std::string(

      // A session whose tracer died (kill -9, power loss) never got its stop time and totals:
      // they are derived from its rows (stop = its newest row).
      "SELECT s.id, s.kind, s.wall_start_ns, COALESCE(s.wall_stop_ns, s.wall_start_ns + (" +
      RawLastTsSql(version, "s.id") + "), 0), COALESCE(s.host,''), "
      "COALESCE(s.kernel,''), COALESCE(s.cpu_model,''), COALESCE(s.cores,0), "
      "COALESCE(s.mem_bytes,0), COALESCE(s.gpu_model,''), COALESCE(s.gpu_driver,''), "
      "COALESCE(s.command_line,''), CASE WHEN s.wall_stop_ns IS NULL THEN COALESCE((" +
      RawCountSql(version, "s.id") + "), 0) ELSE s.events END, s.drops, "
      "COALESCE(s.drops_detail,''), "
      "COALESCE((" + RawFirstTsSql(version, "s.id") + "), 0), "
      "COALESCE((" + RawLastTsSql(version, "s.id") + "), 0), "
      "s.wall_stop_ns IS NOT NULL, ") +
          (version >= 3 ? "COALESCE(s.tracer_pid, 0)" : "0") + " FROM sessions s ORDER BY s.id",
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
        s.command_line = RedactCredentials(text(11));  // as older gpuwhy stored it
        s.events = sqlite3_column_int64(st, 12);
        s.drops = sqlite3_column_int64(st, 13);
        s.drops_detail = text(14);
        s.first_ts = sqlite3_column_int64(st, 15);
        s.last_ts = sqlite3_column_int64(st, 16);
        s.ended = sqlite3_column_int64(st, 17) != 0;
        s.tracer_pid = static_cast<int32_t>(sqlite3_column_int64(st, 18));
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
