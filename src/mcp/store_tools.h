// The gpuwhy tools that read a recording through StoreReader: query_sql, sessions, op_stats,
// top_contention, timeline and stacks. Each is read-only and bounded (row, time and size
// limits); the database is opened lazily so the server can start before anything is recorded.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/table.h"
#include "mcp/server.h"

namespace gw {
class StoreReader;
}

namespace gw::mcp {

// Opens the database on first use and keeps it open; a failed open is retried on the next
// call (the file may not exist yet when the assistant starts the server).
class ReaderSource {
 public:
  explicit ReaderSource(std::string path);
  ~ReaderSource();
  StatusOr<StoreReader*> Get();
  const std::string& path() const { return path_; }
  // Other files a tool (diff) may open: the server's own file, and files under the directory
  // of --db or one given at start (--diff-dir). Anything else is refused with the same message
  // whether it exists or not, so a client cannot probe the file system.
  void AllowDirectory(const std::string& dir);
  Status CheckMayOpen(const std::string& arg, const std::string& path) const;

 private:
  std::string path_;
  std::vector<std::string> allowed_dirs_;  // real paths
  std::unique_ptr<StoreReader> reader_;
};

struct StoreToolLimits {
  int64_t default_rows = 200;
  int64_t max_rows = 5000;
  int64_t default_timeout_ms = 10'000;
  int64_t max_timeout_ms = 60'000;
  size_t max_result_bytes = 512 * 1024;  // serialized rows of one query_sql result
  size_t max_cell_bytes = 8 * 1024;      // one text cell
  int64_t tool_timeout_ms = 30'000;      // each call of the other tools (every statement in it)
};

void AddStoreTools(McpServer& server, ReaderSource& source, const StoreToolLimits& limits);

// A text cell capped for a reply; `cut` is set when it was shortened.
Json CellToJson(const Cell& cell, size_t max_text_bytes, bool* cut);

}  // namespace gw::mcp
