// StoreReader: read-only access to a gpuwhy database for analysis and front ends.
//
// The file is opened with SQLITE_OPEN_READONLY and an authorizer that allows reading only:
// no writes, no ATTACH, no pragma changes, no extension loading. A progress handler enforces
// a per-statement time limit. Opening never creates or changes the file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/table.h"
#include "store/sqlite_util.h"

namespace gw {

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
};

class StoreReader {
 public:
  static StatusOr<std::unique_ptr<StoreReader>> Open(const std::string& path);

  // Runs one read-only statement. Multiple statements, writes, ATTACH and pragma changes are
  // refused with kPermissionDenied; syntax errors carry SQLite's message.
  StatusOr<Table> Query(const std::string& sql, const QueryOptions& options = {});
  // Same, with bound positional parameters (?1, ?2 … as int64).
  StatusOr<Table> QueryWith(const std::string& sql, const std::vector<int64_t>& params,
                            const QueryOptions& options = {});
  // Streams rows to a callback without materializing them (analysis over many rows).
  using RowFn = std::function<void(sqlite3_stmt*)>;
  Status ForEach(const std::string& sql, const std::vector<int64_t>& params, const RowFn& fn);

  StatusOr<std::vector<SessionSummary>> Sessions();
  // The newest session id, or NotFound when the file has none.
  StatusOr<int64_t> LatestSession();

  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_.get(); }

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
