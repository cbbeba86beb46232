#include "store/session_admin.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "store/event_rows_table.h"
#include "store/writer.h"

namespace gw {

namespace {

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

std::string LocalHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

}  // namespace

int64_t DatabaseUsage::EstimatedSessionBytes(int64_t session) const {
  auto it = rows_by_session.find(session);
  if (it == rows_by_session.end() || event_rows == 0) return 0;
  int64_t used = (pages - free_pages) * page_bytes;
  return static_cast<int64_t>(static_cast<double>(used) * static_cast<double>(it->second) /
                              static_cast<double>(event_rows));
}

StatusOr<DatabaseUsage> ReadDatabaseUsage(StoreReader& reader) {
  DatabaseUsage usage;
  usage.file_bytes = FileBytes(reader.path());
  usage.wal_bytes = FileBytes(reader.path() + "-wal");
  auto one = [&](const char* sql, int64_t* out) {
    return reader.ForEach(sql, {}, [&](sqlite3_stmt* st) { *out = sqlite3_column_int64(st, 0); });
  };
  RETURN_IF_ERROR(one("PRAGMA page_size", &usage.page_bytes));
  RETURN_IF_ERROR(one("PRAGMA page_count", &usage.pages));
  RETURN_IF_ERROR(one("PRAGMA freelist_count", &usage.free_pages));
  // One pass over the clustered key (session leads it): no row is read twice.
  ASSIGN_OR_RETURN(int64_t version, reader.SchemaVersion());
  RETURN_IF_ERROR(reader.ForEach(RawCountBySessionSql(version), {},
                                 [&](sqlite3_stmt* st) {
                                   int64_t rows = sqlite3_column_int64(st, 1);
                                   usage.rows_by_session[sqlite3_column_int64(st, 0)] = rows;
                                   usage.event_rows += rows;
                                 }));
  return usage;
}

SessionState StateOf(const SessionSummary& session) {
  if (session.ended) return SessionState::kEnded;
  if (session.tracer_pid <= 0) return SessionState::kInterrupted;
  // A recording copied from another machine has no tracer here.
  if (!session.host.empty() && session.host != LocalHostName()) return SessionState::kInterrupted;
  if (kill(session.tracer_pid, 0) == 0 || errno == EPERM) return SessionState::kRecording;
  return SessionState::kInterrupted;
}

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kEnded:
      return "ended";
    case SessionState::kRecording:
      return "recording";
    case SessionState::kInterrupted:
      return "interrupted";
  }
  return "?";
}

StatusOr<PruneResult> DeleteSessions(const std::string& path, const std::vector<int64_t>& ids) {
  PruneResult result;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return NotFound("database " + path + " does not exist");
  result.bytes_before = FileBytes(path) + FileBytes(path + "-wal");
  ASSIGN_OR_RETURN(std::unique_ptr<StoreWriter> writer, StoreWriter::Create(path, {}));
  ASSIGN_OR_RETURN(StoreWriter::RemovedSessions removed, writer->RemoveSessions(ids));
  RETURN_IF_ERROR(writer->Close());
  writer.reset();
  result.sessions_removed = removed.sessions;
  result.rows_removed = removed.event_rows;
  result.space_returned = removed.space_returned;
  result.bytes_after = FileBytes(path) + FileBytes(path + "-wal");
  return result;
}

}  // namespace gw
