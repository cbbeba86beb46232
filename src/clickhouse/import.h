// Reading recordings back out of ClickHouse: the nodes and sessions there, and one session
// replayed into a local database file through StoreWriter, so `explain`, `fleet` and every other
// reader work on it exactly as on a file the node recorded itself (the outbox spools producer
// inputs, so the replay rebuilds the same rows and rollups).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "clickhouse/client.h"

namespace gw {

struct RemoteSession {
  std::string node;
  uint64_t spool = 0;
  int64_t id = 0;           // the session id in the node's file
  std::string kind;
  int64_t wall_start_ns = 0;
  int64_t wall_stop_ns = 0;  // 0 while it is still recording (or its tracer died)
  int64_t last_wall_ns = 0;  // the newest event's wall-clock time
  int64_t events = 0;        // rows in ClickHouse
};

// Sessions with events at or after `since_wall_ns` (0 = all), newest first; `node` "" = every
// node.
StatusOr<std::vector<RemoteSession>> ListRemoteSessions(const ClickHouseClient& client,
                                                        const std::string& node,
                                                        int64_t since_wall_ns);

struct ImportRequest {
  std::string node;
  int64_t session = 0;  // 0 = the node's newest; else that id (the newest spool holding it)
  // Only events in the last this long of the session (plus a minute of context), when set.
  std::optional<int64_t> since_ns;
};

struct ImportResult {
  RemoteSession session;
  int64_t events = 0;
  int64_t processes = 0;
};

// Writes the session into a new database at `db_path` (which must not exist). `progress` is
// called with the events read so far.
StatusOr<ImportResult> ImportRemoteSession(const ClickHouseClient& client,
                                           const ImportRequest& request,
                                           const std::string& db_path,
                                           const std::function<void(int64_t)>& progress = {});
// The same for a session already found (ListRemoteSessions), without looking it up again.
StatusOr<ImportResult> ImportRemoteSession(const ClickHouseClient& client,
                                           const RemoteSession& session,
                                           std::optional<int64_t> since_ns,
                                           const std::string& db_path,
                                           const std::function<void(int64_t)>& progress = {});

// A private directory for imported files that removes itself (and them) when destroyed.
class ScratchDir {
 public:
  static StatusOr<ScratchDir> Create();
  ScratchDir(ScratchDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  ~ScratchDir();
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

}  // namespace gw
