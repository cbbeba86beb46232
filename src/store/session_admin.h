// Whole sessions as units of storage: how much of a file each one takes (`gpuwhy sessions`),
// whether a tracer is still writing one, and removing old ones (`gpuwhy prune`).
//
// A session is open from BeginSession until EndSession writes its stop time: `wall_stop_ns` is
// NULL while it records, and stays NULL when the tracer died (kill -9, power loss). The row
// carries the tracer's pid (schema 3), so an open session whose tracer still runs on this host
// can be told from one whose tracer is gone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/reader.h"

namespace gw {

// Where the bytes of a file are, read through a read-only StoreReader.
struct DatabaseUsage {
  int64_t file_bytes = 0;  // the main file
  int64_t wal_bytes = 0;   // its -wal (0 when none)
  int64_t page_bytes = 0;  // page size
  int64_t pages = 0;       // pages in the database (main file plus pages still in the WAL)
  int64_t free_pages = 0;  // pages on the freelist (reused before the file grows)
  int64_t event_rows = 0;  // rows in event_rows, all sessions
  std::map<int64_t, int64_t> rows_by_session;  // event_rows per session
  // Bytes a session's rows take, estimated as its share of event_rows times the used pages
  // (raw events are nearly all of a file; rollups and process rows are small).
  int64_t EstimatedSessionBytes(int64_t session) const;
};
StatusOr<DatabaseUsage> ReadDatabaseUsage(StoreReader& reader);

// How a session stands: closed by its tracer, still being written, or left open by a tracer that
// is gone.
enum class SessionState { kEnded, kRecording, kInterrupted };
// kRecording when the stop time is missing and the tracer pid recorded for it is alive on this
// host (a pid that was reused counts as alive: the answer errs towards "still recording").
SessionState StateOf(const SessionSummary& session);
const char* SessionStateName(SessionState state);

// What removing sessions did to the file.
struct PruneResult {
  int64_t sessions_removed = 0;
  int64_t rows_removed = 0;  // event_rows deleted
  int64_t bytes_before = 0;  // main file + WAL
  int64_t bytes_after = 0;
  bool space_returned = false;  // false: the file has no incremental auto-vacuum, so freed
                                // pages are kept for later recordings instead of given back
};

// Deletes every row of the given sessions (events, per-second rollups, processes, system
// snapshots, stacks, the session row) in one transaction, then gives the freed pages back to the
// filesystem where the file allows it (incremental auto-vacuum, which every file gpuwhy creates
// has) and truncates the WAL. The file is opened through StoreWriter::Create, so the same path
// checks and filesystem identity apply as for `trace` (db_location.h); it must already exist.
StatusOr<PruneResult> DeleteSessions(const std::string& path, const std::vector<int64_t>& ids);

}  // namespace gw
