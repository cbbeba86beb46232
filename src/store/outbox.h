// The outbox: a store-and-forward spool inside the database for a remote sink
// (`trace --sink clickhouse://…`, src/clickhouse).
//
// When enabled, the writer adds to every transaction one outbox entry per kind of row it wrote
// (events, processes, snapshots, counted-only launches, stacks, GPU rows, the session row), in
// the same transaction as the rows themselves: an entry exists exactly when its rows do, so a
// crash loses nothing that was committed and forwards nothing that was not. A sink reads the
// oldest entries, sends them and acknowledges them (deleting them); until then they wait here,
// across a remote outage and across tracer restarts on the same file.
//
// An entry's body is tab-separated text, one line per row, in the column order of its target
// table in docs/clickhouse.md (without the node/spool/batch columns the sink puts in front):
// escapes \\ \t \n \r, NULL as \N. Producer inputs are spooled, not the writer's own rollups:
// replaying the entries through a StoreWriter rebuilds the same database (src/clickhouse's
// import relies on it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "store/event.h"
#include "store/sqlite_util.h"

namespace gw {

// Target tables of outbox entries (the remote table is "gw_" + this).
inline constexpr char kOutboxEvents[] = "events";
inline constexpr char kOutboxSessions[] = "sessions";
inline constexpr char kOutboxProcesses[] = "processes";
inline constexpr char kOutboxSnapshots[] = "snapshots";
inline constexpr char kOutboxOpCounts[] = "op_counts";
inline constexpr char kOutboxStacks[] = "stacks";
inline constexpr char kOutboxGpuDevices[] = "gpu_devices";
inline constexpr char kOutboxGpuSamples[] = "gpu_samples";
inline constexpr char kOutboxGpuProcessSamples[] = "gpu_process_samples";
// Schema 12: the cgroup rows of the 1 Hz sampler (docs/containers.md).
inline constexpr char kOutboxProcessCgroups[] = "process_cgroups";
inline constexpr char kOutboxCgroupCpuSamples[] = "cgroup_cpu_samples";
inline constexpr char kOutboxCgroupMemorySamples[] = "cgroup_memory_samples";

struct OutboxEntry {
  int64_t id = 0;  // increasing, never reused in a file (AUTOINCREMENT)
  std::string table;
  int64_t rows = 0;
  std::string body;
};

struct OutboxStatus {
  uint64_t spool_id = 0;     // random, once per file: (node, spool, batch) names an entry anywhere
  int64_t entries = 0;       // waiting now
  int64_t rows = 0;
  int64_t bytes = 0;
  int64_t rows_dropped = 0;  // this writer's lifetime: entries deleted unsent to keep the cap
};

// Appends TSV fields. Pure, for the writer and tests.
void TsvInt(std::string& out, int64_t v);          // kNull → \N
void TsvReal(std::string& out, double v, bool null);
void TsvText(std::string& out, std::string_view s);
inline void TsvNullableText(std::string& out, const std::string& s) {
  if (s.empty()) out += "\\N"; else TsvText(out, s);
}

// Writer-side encoder: turns one transaction's rows into outbox entries. Keeps the id → text
// map of `strings` so event rows carry the kernel or file name itself.
class OutboxEncoder {
 public:
  void SetSession(int64_t session, int64_t wall_start_ns) {
    session_ = session;
    wall_start_ns_ = wall_start_ns;
  }
  void AddString(int64_t id, std::string text) { strings_[id] = std::move(text); }

  std::string Events(const Event* events, size_t count) const;
  std::string Processes(const std::vector<ProcessInfo>& processes) const;
  std::string Snapshots(const std::vector<SystemSnapshot>& snapshots) const;
  std::string OpCounts(const std::vector<OpCount>& counts) const;
  std::string GpuDevices(const std::vector<GpuDevice>& devices) const;
  std::string GpuSamples(const std::vector<GpuSample>& samples) const;
  std::string GpuProcessSamples(const std::vector<GpuProcessSample>& samples) const;
  std::string ProcessCgroups(const std::vector<ProcessCgroup>& rows) const;
  std::string CgroupCpuSamples(const std::vector<CgroupCpuSample>& rows) const;
  std::string CgroupMemorySamples(const std::vector<CgroupMemorySample>& rows) const;
  std::string Stack(int64_t id, int32_t pid, const std::string& location,
                    const std::string& frames_json) const;
  // The session row; totals are NULL until EndSession.
  std::string Session(const SessionInfo& info, const SessionTotals* totals) const;

 private:
  const std::string* Name(int64_t id) const;
  int64_t session_ = 0;
  int64_t wall_start_ns_ = 0;
  std::unordered_map<int64_t, std::string> strings_;
};

// Creates the outbox table and the file's spool id if missing.
Status EnsureOutbox(sqlite3* db);
// The statement InsertOutboxEntry steps (prepared once by the writer).
StatusOr<ScopedStmt> PrepareOutboxInsert(sqlite3* db);
Status InsertOutboxEntry(sqlite3* db, sqlite3_stmt* insert, std::string_view table, int64_t rows,
                         const std::string& body);
// Entries with id > after_id, oldest first, up to about max_bytes (at least one).
StatusOr<std::vector<OutboxEntry>> ReadOutboxEntries(sqlite3* db, int64_t after_id,
                                                     int64_t max_bytes);
Status DeleteOutboxThrough(sqlite3* db, int64_t id);
// Deletes the oldest entries until the outbox holds at most max_bytes.
struct TrimmedOutbox {
  int64_t rows_dropped = 0;
  int64_t bytes_left = 0;
};
StatusOr<TrimmedOutbox> TrimOutbox(sqlite3* db, int64_t max_bytes);
StatusOr<OutboxStatus> ReadOutboxStatus(sqlite3* db);

}  // namespace gw
