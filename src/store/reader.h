// StoreReader: read-only access to a gpuwhy database for analysis and front ends.
//
// The file is opened with SQLITE_OPEN_READONLY and an authorizer that allows reading only:
// no writes, no ATTACH, no pragma changes, no extension loading. A progress handler enforces
// a per-statement time limit. Opening never creates or changes the file.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/table.h"
#include "store/db_location.h"
#include "store/sqlite_util.h"

namespace gw {

// What a streamed query ended with.
struct QueryEnd {
  int64_t rows = 0;        // rows handed to the callback
  bool truncated = false;  // more rows than QueryOptions::max_rows
};

// Limits on user SQL: one value (string or blob), and SQLite's heap in a process that runs it
// (LimitProcessHeap).
inline constexpr int kMaxValueBytes = 64 << 20;
inline constexpr int64_t kQueryHeapLimitBytes = int64_t{1} << 30;

// Cancellation from another thread (MCP notifications/cancelled). While a QueryCancelScope lives
// on a thread, every statement a StoreReader steps on that thread stops soon after `*cancelled`
// becomes true: the progress handler checks it every 10,000 VM steps, and QueryStream's watchdog
// every 20 ms (for single slow steps). The statement then fails with kUnavailable "... cancelled
// by the client". Thread safety: the scope keeps the pointer in a thread_local, read only by the
// thread that created it (the one stepping statements); the flag itself is an atomic that any
// thread may set. The flag must outlive the scope.
class QueryCancelScope {
 public:
  explicit QueryCancelScope(const std::atomic<bool>* cancelled);
  ~QueryCancelScope();
  QueryCancelScope(const QueryCancelScope&) = delete;
  QueryCancelScope& operator=(const QueryCancelScope&) = delete;

 private:
  const std::atomic<bool>* previous_;
};

// A time limit for everything the calling thread reads (MCP: each tool call). While a
// QueryDeadlineScope lives on a thread, every statement a StoreReader steps on that thread
// (ForEach and the typed readers included, not only user SQL) is interrupted once the deadline
// passes, and fails with kUnavailable "<what> reached its time limit of N s …". Nested scopes:
// the innermost applies.
class QueryDeadlineScope {
 public:
  QueryDeadlineScope(int64_t timeout_ms, std::string what);
  ~QueryDeadlineScope();
  QueryDeadlineScope(const QueryDeadlineScope&) = delete;
  QueryDeadlineScope& operator=(const QueryDeadlineScope&) = delete;

 private:
  int64_t previous_deadline_ms_;
  int64_t previous_timeout_ms_;
  std::string previous_what_;
};

struct QueryOptions {
  int64_t max_rows = 0;        // 0 = unlimited; else rows beyond are cut and flagged
  int64_t timeout_ms = 0;      // 0 = none; else the statement is interrupted
};

struct SessionSummary {
  int64_t id = 0;
  std::string kind;
  int64_t wall_start_ns = 0;
  int64_t wall_stop_ns = 0;
  std::string host;
  std::string kernel;
  std::string cpu_model;
  int64_t cores = 0;
  int64_t mem_bytes = 0;
  std::string gpu_model;
  std::string gpu_driver;
  std::string command_line;
  int64_t events = 0;
  int64_t drops = 0;
  std::string drops_detail;
  int64_t first_ts = 0;  // first event, ns since session start
  int64_t last_ts = 0;   // last event, ns since session start
  bool ended = false;     // its tracer wrote the stop time and totals (EndSession)
  int32_t tracer_pid = 0; // the recording process (0: synthetic, or a file older than schema 3)
};

class StoreReader {
 public:
  static StatusOr<std::unique_ptr<StoreReader>> Open(const std::string& path);
  // The recording a writer of this process has open (StoreWriter::file()), for a second
  // reader of it: opened at its checked path, without following links, and refused when that
  // path names another file by now (replaced, or a link planted). Call it, and read, with the
  // owner's filesystem identity active (ScopedFsIdentity(file.location)) so that -wal and -shm
  // are opened as the owner.
  static StatusOr<std::unique_ptr<StoreReader>> OpenWritten(const DatabaseFile& file);

  // Runs one read-only statement. Multiple statements, writes, ATTACH and pragma changes are
  // refused with kPermissionDenied; syntax errors carry SQLite's message.
  StatusOr<Table> Query(const std::string& sql, const QueryOptions& options = {});
  // Same, with bound positional parameters (?1, ?2 … as int64).
  StatusOr<Table> QueryWith(const std::string& sql, const std::vector<int64_t>& params,
                            const QueryOptions& options = {});
  // The same, handing the column names and then each row to callbacks as they are read: memory
  // stays flat however many rows there are (query --limit 0). The time limit is enforced by a
  // watchdog thread as well as the progress handler.
  using HeaderFn = std::function<void(const std::vector<std::string>&)>;
  using CellRowFn = std::function<void(std::vector<Cell>&&)>;
  StatusOr<QueryEnd> QueryStream(const std::string& sql, const std::vector<int64_t>& params,
                                 const QueryOptions& options, const HeaderFn& header,
                                 const CellRowFn& row);
  // Caps SQLite's heap in this process (kQueryHeapLimitBytes): for the processes that run user
  // SQL (query, mcp). A statement past it fails with an error instead of exhausting memory.
  static void LimitProcessHeap();
  // Streams rows to a callback without materializing them. For src/store's own typed readers
  // (window.cc, window_rows.cc): other folders get plain structs from those, never a statement.
  using RowFn = std::function<void(sqlite3_stmt*)>;
  Status ForEach(const std::string& sql, const std::vector<int64_t>& params, const RowFn& fn);

  StatusOr<std::vector<SessionSummary>> Sessions();
  // The newest session id, or NotFound when the file has none.
  StatusOr<int64_t> LatestSession();
  // meta.schema_version of the file (older files lack columns newer readers select).
  StatusOr<int64_t> SchemaVersion();

  const std::string& path() const { return path_; }

 private:
  StoreReader(std::string path, ScopedDb db) : path_(std::move(path)), db_(std::move(db)) {}
  StatusOr<ScopedStmt> PrepareReadOnly(const std::string& sql);

  std::string path_;
  ScopedDb db_;
  int64_t deadline_ms_ = 0;  // monotonic ms when the running statement must stop; 0 = none
  bool authorizer_denied_ = false;
  std::string denied_what_;

  friend int ReaderAuthorizer(void*, int, const char*, const char*, const char*, const char*);
  friend int ReaderProgress(void*);
};

}  // namespace gw
