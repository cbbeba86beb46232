// StoreWriter: the only code that writes a gpuwhy database.
//
// Producers (capture's drain thread, the demo generator, the system sampler) call the
// thread-safe Append*/Upsert* methods; a dedicated writer thread commits everything in batched
// transactions through prepared statements. The queue is bounded: a producer that outruns the
// disk blocks (so loss, if any, happens upstream where it is counted), never silently drops.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "store/db_location.h"
#include "store/event.h"
#include "store/outbox.h"
#include "store/schema.h"
#include "store/sqlite_util.h"
#include "store/thread_rollups.h"

namespace gw {

// Under --max-db the rollup tier (op_seconds, thread_rollups, system_snapshots) may take up to
// 1/kRollupShareDivisor of the cap; raw rows (event_rows, GPU samples) take the rest, so
// rollups outlive the raw rows of the same time by far.
inline constexpr int64_t kRollupShareDivisor = 5;

struct WriterOptions {
  int64_t max_db_bytes = 0;         // 0 = no cap; else prune the oldest rows to stay under it
  size_t max_queued_events = 1 << 20;  // producers block beyond this
  int64_t commit_interval_ms = 200; // commit at least this often while events arrive
  // Spool every committed row in the outbox too (store/outbox.h), for a remote sink; at most
  // this many bytes of it wait (the oldest unsent entries beyond are dropped and counted).
  // SQLite's secure_delete for this connection: "fast" (the default here: deleted content is
  // zeroed only in pages a delete writes anyway) or "on" (Debian's build default: every page a
  // delete frees is overwritten too, which doubles what pruning writes; bench/store_bench.cc
  // --prune measures it).
  std::string secure_delete = "fast";
  // Told how a long migration of an older file is going (schema.h); nullptr: nobody.
  MigrationProgress migration_progress;
  bool outbox = false;
  int64_t outbox_max_bytes = int64_t{512} << 20;
};

struct WriterStats {
  int64_t events_written = 0;
  int64_t transactions = 0;
  int64_t rows_pruned = 0;
  int64_t producer_waits = 0;  // times a producer blocked on a full queue
  // Events that will never be in the file: the batch whose write failed (disk full, I/O error)
  // and every event appended after it. Counted at once, so live views can show them as drops.
  int64_t events_lost = 0;
};

class StoreWriter {
 public:
  static StatusOr<std::unique_ptr<StoreWriter>> Create(const std::string& path,
                                                       WriterOptions options);
  ~StoreWriter();
  StoreWriter(const StoreWriter&) = delete;
  StoreWriter& operator=(const StoreWriter&) = delete;

  // Opens a new session row and makes it the target of every later append. Synchronous.
  StatusOr<int64_t> BeginSession(const SessionInfo& info);
  // Writes stop time and totals for the current session after flushing. Synchronous.
  Status EndSession(const SessionTotals& totals);

  // Thread-safe producers.
  void AppendEvents(const Event* events, size_t count);
  void AppendEvent(const Event& e) { AppendEvents(&e, 1); }
  void UpsertProcess(const ProcessInfo& process);
  void AppendSnapshot(const SystemSnapshot& snapshot);
  void AppendOpCounts(const std::vector<OpCount>& counts);
  // Returns a stable id for a string (kernel name, file name); written with the next batch.
  int64_t InternString(std::string_view text);
  // One symbolized call stack (`stacks` table): `id` is Event::stack_id, `frames_json` the
  // JSON array of frames innermost first, `location` where the stack "is" (innermost Python
  // file:line, else native). Written with the next batch; a repeated id is ignored.
  void AppendStack(int64_t id, int32_t pid, std::string location, std::string frames_json);

  // GPU truth from NVML (schema 4): the GPUs of this session (gpu_devices) and their samples.
  void AppendGpuDevices(const std::vector<GpuDevice>& devices);
  void AppendGpuSamples(const std::vector<GpuSample>& samples,
                        const std::vector<GpuProcessSample>& processes);
  // Schema 10: the tracked processes' cgroup CPU quota and throttling (cgroup_cpu_samples) and
  // the cgroup each was seen in (process_cgroups).
  // Schema 12: process_cgroups also holds the container, pod and namespace pid, and the memory
  // cgroups' limits and events go to cgroup_memory_samples.
  void AppendCgroupSamples(std::vector<CgroupCpuSample> samples,
                           std::vector<ProcessCgroup> processes,
                           std::vector<CgroupMemorySample> memory = {});

  // Blocks until everything appended so far is committed. Returns the first write error.
  Status Flush();
  // The first write error, without waiting (ok while every batch has been written).
  Status error() const;
  // Flushes and stops the writer thread; further appends are ignored.
  Status Close();

  // Deletes every row of these sessions (not the current one) in one transaction, then gives
  // freed pages back (incremental auto-vacuum) and truncates the WAL. session_admin.h's
  // DeleteSessions is the entry point.
  struct RemovedSessions {
    int64_t sessions = 0;
    int64_t event_rows = 0;
    bool space_returned = false;  // false when the file has no incremental auto-vacuum
  };
  StatusOr<RemovedSessions> RemoveSessions(const std::vector<int64_t>& ids);

  // The outbox (WriterOptions::outbox): the sink's side. Thread-safe; each call is one short
  // statement on the writer's connection.
  StatusOr<std::vector<OutboxEntry>> ReadOutbox(int64_t after_id, int64_t max_bytes);
  // Deletes entries through `id` once the sink has delivered them.
  Status AckOutbox(int64_t id, int64_t bytes);
  StatusOr<OutboxStatus> OutboxState();

  WriterStats stats() const;
  int64_t session_id() const { return session_id_; }
  const std::string& path() const { return path_; }
  // The file this writer opened (device 0 when it could not be told); readers of the same
  // recording open it with StoreReader::OpenWritten.
  const DatabaseFile& file() const { return file_; }

 private:
  // One event of the batch being committed: its timestamp and index, sorted by timestamp.
  struct BatchKey {
    int64_t ts;
    uint32_t index;
  };
  StoreWriter(std::string path, WriterOptions options, ScopedDb db);
  Status PrepareStatements();
  void Run();
  Status CommitBatch(std::vector<Event>& events, std::vector<ProcessInfo>& processes,
                     std::vector<SystemSnapshot>& snapshots, std::vector<OpCount>& counts,
                     std::vector<std::pair<int64_t, std::string>>& strings, bool final_flush);
  Status InsertEvents(const std::vector<Event>& events);
  void Aggregate(const Event& e);
  Status WriteRollups(bool all);
  Status PruneIfNeeded();
  // One pruning step of a tier (rows deleted; 0 = nothing left in it).
  StatusOr<int64_t> PruneOldestRaw(sqlite3* db, int64_t oldest_session);
  StatusOr<int64_t> PruneOldestRollups(sqlite3* db);
  // Refuses a batch that would leave the filesystem without the room needed to close the
  // session (and the WAL its final checkpoint needs).
  Status CheckFreeSpace(size_t events);
  // "recording stopped: <what>: <SQLite's message>" with a hint for a full disk.
  static Status WriteFailure(const Status& failed, const std::string& what);

  std::string path_;
  DatabaseLocation location_;  // where and as whom the files are written (db_location.h)
  DatabaseFile file_;
  WriterOptions options_;
  ScopedDb db_;
  ScopedStmt insert_chunk_, upsert_process_, insert_snapshot_, upsert_rollup_, insert_string_;
  ScopedStmt upsert_latency_;  // op_latency
  ScopedStmt upsert_thread_rollup_;
  ScopedStmt insert_stack_;
  ScopedStmt insert_gpu_device_, insert_gpu_sample_, insert_gpu_process_;
  ScopedStmt insert_cgroup_cpu_, insert_process_cgroup_, insert_cgroup_memory_;
  int64_t session_id_ = 0;

  std::mutex db_mu_;  // serializes all SQLite use of db_ (writer thread vs session calls)
  mutable std::mutex mu_;  // guards the pending queues and counters below
  std::condition_variable cv_work_;   // writer waits for work
  std::condition_variable cv_space_;  // producers wait for queue space / flush completion
  std::vector<Event> pending_events_;
  std::vector<ProcessInfo> pending_processes_;
  std::vector<SystemSnapshot> pending_snapshots_;
  std::vector<OpCount> pending_counts_;
  std::vector<std::pair<int64_t, std::string>> pending_strings_;
  struct PendingStack {
    int64_t id;
    int32_t pid;
    std::string location;
    std::string frames_json;
  };
  std::vector<PendingStack> pending_stacks_;  // guarded by mu_
  std::vector<PendingStack> batch_stacks_;    // writer thread: the batch being committed
  // Sampled rows (NVML, cgroups) not yet committed.
  struct PendingSamples {
    std::vector<GpuDevice> devices;
    std::vector<GpuSample> samples;
    std::vector<GpuProcessSample> processes;
    std::vector<CgroupCpuSample> cgroup_cpu;
    std::vector<ProcessCgroup> process_cgroups;
    std::vector<CgroupMemorySample> cgroup_memory;
    bool empty() const {
      return devices.empty() && samples.empty() && processes.empty() && cgroup_cpu.empty() &&
             process_cgroups.empty() && cgroup_memory.empty();
    }
  };
  PendingSamples pending_gpu_;  // guarded by mu_
  PendingSamples batch_gpu_;    // writer thread
  Status InsertSamples(const PendingSamples& gpu);
  std::unordered_map<std::string, int64_t> string_ids_;
  int64_t next_string_id_ = 1;
  uint64_t enqueued_seq_ = 0;   // bumps on every append
  uint64_t committed_seq_ = 0;  // last seq the writer committed
  bool flush_requested_ = false;
  bool stopping_ = false;
  bool closed_ = false;
  Status error_;
  WriterStats stats_;
  std::thread thread_;

  // Writer-thread-only state: per-second rollups not yet written.
  struct RollupKey {
    int64_t sec;
    int32_t pid;
    uint16_t op;
    int64_t name_id;
    bool operator==(const RollupKey& o) const {
      return sec == o.sec && pid == o.pid && op == o.op && name_id == o.name_id;
    }
  };
  struct RollupKeyHash {
    size_t operator()(const RollupKey& k) const {
      uint64_t h = static_cast<uint64_t>(k.sec) * 0x9E3779B97F4A7C15ULL;
      h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.pid)) << 16 | k.op) * 0xC2B2AE3D27D4EB4FULL;
      h ^= static_cast<uint64_t>(k.name_id) * 0x165667B19E3779F9ULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  struct RollupValue {
    int64_t count = 0;
    int64_t total_ns = 0;
    int64_t max_ns = 0;
    int64_t bytes = 0;
    std::array<int64_t, kLatencyBuckets> log2_hist{};  // CUDA calls only (op_latency)
  };
  std::unordered_map<RollupKey, RollupValue, RollupKeyHash> rollups_;
  ThreadRollups thread_rollups_;
  int64_t newest_sec_ = 0;
  // When CommitBatch next writes every rollup, complete or not (writer thread).
  std::chrono::steady_clock::time_point next_full_rollups_{};
  // The batch being committed: (ts, index) keys in timestamp order, the order as indices, and
  // the chunk being encoded.
  std::vector<BatchKey> batch_keys_;
  std::vector<BatchKey> sort_scratch_;
  std::vector<uint32_t> batch_order_;
  std::string chunk_scratch_;
  std::atomic<int64_t> rows_pruned_{0};

  // The outbox (writer thread and session calls, under db_mu_).
  // The session row as it is now (totals null until EndSession), one entry.
  Status SpoolSessionRow(const SessionTotals* totals);
  Status SpoolBatch(const std::vector<Event>& events, const std::vector<ProcessInfo>& processes,
                    const std::vector<SystemSnapshot>& snapshots,
                    const std::vector<OpCount>& counts);
  OutboxEncoder outbox_encoder_;
  ScopedStmt insert_outbox_;
  SessionInfo session_info_;      // the current session, for its outbox row at EndSession
  int64_t outbox_bytes_ = 0;      // waiting in the outbox (estimate between trims)
  int64_t outbox_rows_dropped_ = 0;
};

// The default database: $GPUWHY_DB, else ~/.gpuwhy/gpuwhy.db of the invoking user (under sudo,
// SUDO_USER's home). Create() checks the path and writes as that user where they own it
// (db_location.h).
std::string DefaultDatabasePath();

}  // namespace gw
