#include "store/writer.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "store/db_location.h"
#include "store/event_chunk.h"
#include "store/schema.h"

namespace gw {

namespace {

void BindOptional(sqlite3_stmt* stmt, int index, int64_t value) {
  if (value == kNull) {
    sqlite3_bind_null(stmt, index);
  } else {
    sqlite3_bind_int64(stmt, index, value);
  }
}

void BindText(sqlite3_stmt* stmt, int index, const std::string& text) {
  sqlite3_bind_text(stmt, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
}

// Text that may be absent: "" is stored as NULL.
void BindOptional(sqlite3_stmt* stmt, int index, const std::string& text) {
  if (text.empty()) {
    sqlite3_bind_null(stmt, index);
  } else {
    BindText(stmt, index, text);
  }
}

Status StepDone(sqlite3* db, sqlite3_stmt* stmt, const char* what) {
  int rc = sqlite3_step(stmt);
  sqlite3_reset(stmt);
  if (rc != SQLITE_DONE) return SqliteStatus(db, rc, what);
  return Status::Ok();
}

// Stable LSD radix sort on ts: equal timestamps keep their arrival order. Batches arrive
// nearly sorted but interleaved (rows are emitted when calls end), where comparison sorts
// mispredict most branches; three or four 11-bit passes over 16-byte keys cost ~5 ns a row
// against ~60 for std::sort (bench/store_bench.cc, "end order").
template <typename Key>
void SortByTimestamp(std::vector<Key>& rows, std::vector<Key>& scratch) {
  int64_t lo = rows.front().ts;
  int64_t hi = lo;
  for (const Key& r : rows) {
    lo = std::min(lo, r.ts);
    hi = std::max(hi, r.ts);
  }
  uint64_t range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo);
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  scratch.resize(rows.size());
  for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += kBits) {
    auto digit = [&](const Key& r) {
      return ((static_cast<uint64_t>(r.ts) - static_cast<uint64_t>(lo)) >> shift) & (kBuckets - 1);
    };
    size_t start[kBuckets + 1] = {};
    for (const Key& r : rows) ++start[digit(r) + 1];
    for (size_t b = 0; b < kBuckets; ++b) start[b + 1] += start[b];
    for (const Key& r : rows) scratch[start[digit(r)]++] = r;
    rows.swap(scratch);
  }
}

// An existing file that is not empty is written only when it is a gpuwhy database: any other
// file, another program's SQLite database included, is refused untouched (opening it for
// writing would overwrite it, or switch it to WAL). Runs with the owner's identity.
Status RefuseForeignFile(const DatabaseLocation& location, const std::string& path) {
  int fd = open(location.open_path.c_str(),
                O_RDONLY | O_CLOEXEC | (location.no_links ? O_NOFOLLOW : 0));
  if (fd < 0) return Status::Ok();  // the open for writing says why
  struct stat st {};
  char head[16] = {};
  bool sized = fstat(fd, &st) == 0;
  ssize_t got = sized && st.st_size > 0 ? pread(fd, head, sizeof(head), 0) : 0;
  close(fd);
  if (!sized || st.st_size == 0) return Status::Ok();
  const std::string refuse = "database " + path + " exists and is not a gpuwhy database (";
  const std::string hint = ") — hint: choose another --db path; gpuwhy will not overwrite it";
  if (got != static_cast<ssize_t>(sizeof(head)) ||
      std::memcmp(head, "SQLite format 3", sizeof(head)) != 0) {
    return FailedPrecondition(refuse + std::to_string(st.st_size) + " bytes, not SQLite" + hint);
  }
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(location.open_path.c_str(), &raw,
                           SQLITE_OPEN_READONLY | (location.no_links ? SQLITE_OPEN_NOFOLLOW : 0),
                           nullptr);
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return Status::Ok();  // the open for writing says why
  sqlite3_busy_timeout(db.get(), 5000);
  StatusOr<int64_t> tables = QueryInt(db.get(), "SELECT COUNT(*) FROM sqlite_master", 0);
  StatusOr<int64_t> meta = QueryInt(
      db.get(), "SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name='meta'", 0);
  if (tables.ok() && meta.ok() && *tables > 0 && *meta == 0) {
    return FailedPrecondition(refuse + "another program's SQLite file: no meta table" + hint);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<StoreWriter>> StoreWriter::Create(const std::string& path,
                                                           WriterOptions options) {
  ASSIGN_OR_RETURN(DatabaseLocation location, PrepareDatabaseLocation(path));
  // Every file SQLite makes (the -wal, -shm, a -journal) is made with the owner's identity
  // where the owner controls the directory; the writer thread inherits it (started below).
  ScopedFsIdentity as_owner(location);
  RETURN_IF_ERROR(RefuseForeignFile(location, path));
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(location.open_path.c_str(), &raw,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX |
                               (location.no_links ? SQLITE_OPEN_NOFOLLOW : 0),
                           nullptr);  // db_mu_ serializes use; SQLite's own mutexes cost ~13%
  ScopedDb db(raw);
  if (rc != SQLITE_OK) return SqliteStatus(raw, rc, "open database " + path + " for writing");
  sqlite3_busy_timeout(db.get(), 5000);
  // Page size and auto_vacuum must be chosen before the first table exists (page size first);
  // both are no-ops on existing files. 16 KiB pages: the clustered event table splits a quarter
  // as often as with 4 KiB, ~12% less writer CPU for 0.3 more bytes a row (bench/store_bench.cc).
  RETURN_IF_ERROR(Exec(db.get(), "PRAGMA page_size=16384; PRAGMA auto_vacuum=INCREMENTAL")
                      .WithContext(path));
  Status st = Exec(db.get(), "PRAGMA journal_mode=WAL");
  if (!st.ok()) {
    if (st.code() == StatusCode::kDataLoss || st.message().find("not a database") != std::string::npos) {
      return DataLoss("open database " + path + ": the file is not a SQLite database — hint: " +
                      "choose another --db path; gpuwhy will not overwrite it");
    }
    return st.WithContext("open database " + path);
  }
  // An 8 MiB page cache: appends touch only the right edge of each tree, and pages beyond that
  // are recycled instead of allocated (a larger cache only grew the heap, page fault by page
  // fault, for no hits).
  RETURN_IF_ERROR(Exec(db.get(), "PRAGMA synchronous=NORMAL; PRAGMA journal_size_limit=67108864;"
                                 "PRAGMA cache_size=-8192")
                      .WithContext(path));
  if (options.secure_delete != "fast" && options.secure_delete != "on" &&
      options.secure_delete != "off") {
    return InvalidArgument("secure_delete must be fast, on or off");
  }
  RETURN_IF_ERROR(Exec(db.get(), "PRAGMA secure_delete=" + options.secure_delete).WithContext(path));
  if (options.max_db_bytes > 0) {
    // The WAL counts against --max-db (PruneIfNeeded): checkpoint it at an eighth of the cap
    // (SQLite's default, 1000 pages = 16 MiB here, alone outgrows a small cap) and keep the
    // file no larger than a quarter of it after a checkpoint.
    int64_t pages = std::clamp<int64_t>(options.max_db_bytes / 8 / 16384, 8, 1000);
    RETURN_IF_ERROR(Exec(db.get(), "PRAGMA wal_autocheckpoint=" + std::to_string(pages) +
                                       "; PRAGMA journal_size_limit=" +
                                       std::to_string(options.max_db_bytes / 4))
                        .WithContext(path));
  }
  RETURN_IF_ERROR(
      CreateOrMigrateSchema(db.get(), options.migration_progress).WithContext("database " + path));
  std::unique_ptr<StoreWriter> writer(new StoreWriter(path, options, std::move(db)));
  writer->location_ = location;
  if (struct stat st {}; lstat(location.open_path.c_str(), &st) == 0) {
    writer->file_ = {location, st.st_dev, st.st_ino};
  }
  RETURN_IF_ERROR(writer->PrepareStatements());
  ASSIGN_OR_RETURN(int64_t max_string,
                   QueryInt(writer->db_.get(), "SELECT MAX(id) FROM strings", 0));
  writer->next_string_id_ = max_string + 1;
  {
    ASSIGN_OR_RETURN(ScopedStmt all, Prepare(writer->db_.get(), "SELECT id, text FROM strings"));
    while (sqlite3_step(all.get()) == SQLITE_ROW) {
      writer->string_ids_[reinterpret_cast<const char*>(sqlite3_column_text(all.get(), 1))] =
          sqlite3_column_int64(all.get(), 0);
    }
  }
  if (options.outbox) {
    RETURN_IF_ERROR(EnsureOutbox(writer->db_.get()));
    ASSIGN_OR_RETURN(writer->insert_outbox_, PrepareOutboxInsert(writer->db_.get()));
    ASSIGN_OR_RETURN(OutboxStatus waiting, ReadOutboxStatus(writer->db_.get()));
    writer->outbox_bytes_ = waiting.bytes;
    for (const auto& [text, id] : writer->string_ids_) writer->outbox_encoder_.AddString(id, text);
  }
  writer->thread_ = std::thread([w = writer.get()] { w->Run(); });
  return writer;
}

StoreWriter::StoreWriter(std::string path, WriterOptions options, ScopedDb db)
    : path_(std::move(path)), options_(options), db_(std::move(db)) {}

StoreWriter::~StoreWriter() { (void)Close(); }

Status StoreWriter::PrepareStatements() {
  sqlite3* db = db_.get();
  ASSIGN_OR_RETURN(insert_chunk_, Prepare(db, kInsertChunkSql));
  ASSIGN_OR_RETURN(upsert_process_,
                   Prepare(db,
                           "INSERT INTO processes(session, pid, ppid, name, comm, cmdline, "
                           "first_ts, exit_ts, exit_code, tracked) VALUES (?,?,?,?,?,?,?,?,?,?) "
                           "ON CONFLICT(session, pid) DO UPDATE SET "
                           "ppid=COALESCE(excluded.ppid, ppid), "
                           "name=CASE WHEN excluded.name<>'' THEN excluded.name ELSE name END, "
                           "comm=COALESCE(excluded.comm, comm), "
                           "cmdline=COALESCE(excluded.cmdline, cmdline), "
                           "first_ts=COALESCE(first_ts, excluded.first_ts), "
                           "exit_ts=COALESCE(excluded.exit_ts, exit_ts), "
                           "exit_code=COALESCE(excluded.exit_code, exit_code), "
                           "tracked=MAX(tracked, excluded.tracked)"));
  ASSIGN_OR_RETURN(insert_snapshot_,
                   Prepare(db,
                           "INSERT OR REPLACE INTO system_snapshots(session, ts, cpu_pct, "
                           "mem_pct, load1, cores, swap_used_bytes, mem_available_bytes, "
                           "major_faults_per_s, ctx_switches_per_s, procs_running, "
                           "procs_blocked, iowait_pct, wall_ns) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(upsert_rollup_,
                   Prepare(db,
                           "INSERT INTO op_seconds(session, sec, pid, op, name_id, count, "
                           "total_ns, max_ns, bytes) VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT DO "
                           "UPDATE SET count=count+excluded.count, "
                           "total_ns=total_ns+excluded.total_ns, "
                           "max_ns=MAX(max_ns, excluded.max_ns), "
                           "bytes=COALESCE(bytes, 0)+COALESCE(excluded.bytes, 0)"));
  ASSIGN_OR_RETURN(upsert_latency_,
                   Prepare(db,
                           "INSERT INTO op_latency(session, sec, pid, op, log2_ns, count) "
                           "VALUES (?,?,?,?,?,?) ON CONFLICT DO UPDATE SET "
                           "count=count+excluded.count"));
  ASSIGN_OR_RETURN(upsert_thread_rollup_,
                   Prepare(db,
                           "INSERT INTO thread_rollups(session, sec, pid, tid, switches, "
                           "preempted, runq_ns, blocked_ns, io_ns, fault_ns, woken_irq, "
                           "woken_same, woken_other, cuda_calls, syncs, sync_ns) VALUES "
                           "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT DO UPDATE SET "
                           "switches=switches+excluded.switches, "
                           "preempted=preempted+excluded.preempted, "
                           "runq_ns=runq_ns+excluded.runq_ns, "
                           "blocked_ns=blocked_ns+excluded.blocked_ns, "
                           "io_ns=io_ns+excluded.io_ns, fault_ns=fault_ns+excluded.fault_ns, "
                           "woken_irq=woken_irq+excluded.woken_irq, "
                           "woken_same=woken_same+excluded.woken_same, "
                           "woken_other=woken_other+excluded.woken_other, "
                           "cuda_calls=cuda_calls+excluded.cuda_calls, "
                           "syncs=syncs+excluded.syncs, sync_ns=sync_ns+excluded.sync_ns"));
  ASSIGN_OR_RETURN(insert_string_,
                   Prepare(db, "INSERT OR IGNORE INTO strings(id, text) VALUES (?,?)"));
  ASSIGN_OR_RETURN(insert_stack_,
                   Prepare(db, "INSERT OR IGNORE INTO stacks(session, id, pid, location, frames) "
                               "VALUES (?,?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_gpu_device_,
                   Prepare(db, "INSERT OR REPLACE INTO gpu_devices(session, gpu, name, "
                               "gpm_supported) VALUES (?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_gpu_sample_,
                   Prepare(db, "INSERT OR REPLACE INTO gpu_samples(session, ts, gpu, util_pct, "
                               "mem_util_pct, sm_active_pct, sm_occupancy_pct, tensor_active_pct, "
                               "dram_bw_pct, sm_clock_mhz, power_mw, throttle_reasons, "
                               "mem_used_bytes) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_gpu_process_,
                   Prepare(db, "INSERT OR REPLACE INTO gpu_process_samples(session, ts, gpu, pid, "
                               "sm_util_pct, mem_util_pct) VALUES (?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_cgroup_cpu_,
                   Prepare(db, "INSERT OR REPLACE INTO cgroup_cpu_samples(session, ts, cgroup, "
                               "version, quota_us, period_us, nr_periods, nr_throttled, "
                               "throttled_ns, usage_ns) VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_process_cgroup_,
                   Prepare(db,
                           "INSERT OR REPLACE INTO process_cgroups(session, pid, ts, cgroup, "
                           "container_id, pod_uid, runtime, ns_pid, pod_name, pod_namespace) "
                           "VALUES (?,?,?,?,?,?,?,?,?,?)"));
  ASSIGN_OR_RETURN(insert_cgroup_memory_,
                   Prepare(db,
                           "INSERT OR REPLACE INTO cgroup_memory_samples(session, ts, cgroup, "
                           "version, max_bytes, high_bytes, usage_bytes, events_high, "
                           "events_max, events_oom, events_oom_kill, major_faults) VALUES "
                           "(?,?,?,?,?,?,?,?,?,?,?,?)"));
  return Status::Ok();
}

StatusOr<int64_t> StoreWriter::BeginSession(const SessionInfo& info) {
  RETURN_IF_ERROR(Flush());
  std::lock_guard<std::mutex> db_lock(db_mu_);
  RETURN_IF_ERROR(WriteRollups(true));
  sqlite3* db = db_.get();
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db,
                           "INSERT INTO sessions(kind, wall_start_ns, mono_start_ns, host, "
                           "kernel, cpu_model, cores, mem_bytes, gpu_model, gpu_driver, "
                           "gpuwhy_version, command_line, tracer_pid, launches_once, "
                           "launch_duty, profile_hz) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,1,?,?)"));
  BindText(stmt.get(), 1, info.kind);
  sqlite3_bind_int64(stmt.get(), 2, info.wall_start_ns);
  sqlite3_bind_int64(stmt.get(), 3, info.mono_start_ns);
  BindText(stmt.get(), 4, info.host);
  BindText(stmt.get(), 5, info.kernel);
  BindText(stmt.get(), 6, info.cpu_model);
  sqlite3_bind_int64(stmt.get(), 7, info.cores);
  sqlite3_bind_int64(stmt.get(), 8, info.mem_bytes);
  if (info.gpu_model.empty()) sqlite3_bind_null(stmt.get(), 9); else BindText(stmt.get(), 9, info.gpu_model);
  if (info.gpu_driver.empty()) sqlite3_bind_null(stmt.get(), 10); else BindText(stmt.get(), 10, info.gpu_driver);
  BindText(stmt.get(), 11, info.version);
  BindText(stmt.get(), 12, info.command_line);
  if (info.tracer_pid > 0) {
    sqlite3_bind_int64(stmt.get(), 13, info.tracer_pid);
  } else {
    sqlite3_bind_null(stmt.get(), 13);
  }
  sqlite3_bind_int64(stmt.get(), 14, std::max<int32_t>(1, info.launch_duty));
  sqlite3_bind_int64(stmt.get(), 15, std::max<int32_t>(0, info.profile_hz));
  RETURN_IF_ERROR(StepDone(db, stmt.get(), "insert session"));
  session_id_ = sqlite3_last_insert_rowid(db);
  newest_sec_ = 0;
  session_info_ = info;
  outbox_encoder_.SetSession(session_id_, info.wall_start_ns);
  if (options_.outbox) RETURN_IF_ERROR(SpoolSessionRow(nullptr));
  return session_id_;
}

Status StoreWriter::EndSession(const SessionTotals& totals) {
  // After a failed write (disk full) the session is still closed: its totals (drops included)
  // are what tells a reader the recording is incomplete. CheckFreeSpace kept room for this.
  Status flushed = Flush();
  std::lock_guard<std::mutex> db_lock(db_mu_);
  ScopedFsIdentity as_owner(location_);
  if (flushed.ok()) RETURN_IF_ERROR(WriteRollups(true));
  sqlite3* db = db_.get();
  ASSIGN_OR_RETURN(ScopedStmt stmt,
                   Prepare(db,
                           "UPDATE sessions SET wall_stop_ns=?, events=?, drops=?, "
                           "drops_detail=? WHERE id=?"));
  sqlite3_bind_int64(stmt.get(), 1, totals.wall_stop_ns);
  sqlite3_bind_int64(stmt.get(), 2, totals.events);
  sqlite3_bind_int64(stmt.get(), 3, totals.drops);
  BindText(stmt.get(), 4, totals.drops_detail.empty() ? "{}" : totals.drops_detail);
  sqlite3_bind_int64(stmt.get(), 5, session_id_);
  RETURN_IF_ERROR(StepDone(db, stmt.get(), "update session totals"));
  // A later entry of the same session row: the remote table keeps the newest.
  if (options_.outbox) RETURN_IF_ERROR(SpoolSessionRow(&totals));
  return Status::Ok();
}

void StoreWriter::AppendEvents(const Event* events, size_t count) {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return;
  if (pending_events_.size() >= options_.max_queued_events) {
    ++stats_.producer_waits;
    cv_work_.notify_one();
    cv_space_.wait(lock, [&] {
      return pending_events_.size() < options_.max_queued_events || closed_ || !error_.ok();
    });
  }
  pending_events_.insert(pending_events_.end(), events, events + count);
  ++enqueued_seq_;
  if (pending_events_.size() >= 50000) cv_work_.notify_one();
}

void StoreWriter::UpsertProcess(const ProcessInfo& process) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_processes_.push_back(process);
  ++enqueued_seq_;
}

void StoreWriter::AppendSnapshot(const SystemSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_snapshots_.push_back(snapshot);
  ++enqueued_seq_;
}

void StoreWriter::AppendOpCounts(const std::vector<OpCount>& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_counts_.insert(pending_counts_.end(), counts.begin(), counts.end());
  ++enqueued_seq_;
}

int64_t StoreWriter::InternString(std::string_view text) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string key(text);
  auto it = string_ids_.find(key);
  if (it != string_ids_.end()) return it->second;
  int64_t id = next_string_id_++;
  string_ids_.emplace(key, id);
  pending_strings_.emplace_back(id, std::move(key));
  ++enqueued_seq_;
  return id;
}

void StoreWriter::AppendStack(int64_t id, int32_t pid, std::string location,
                              std::string frames_json) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_stacks_.push_back({id, pid, std::move(location), std::move(frames_json)});
  ++enqueued_seq_;
}

void StoreWriter::AppendGpuDevices(const std::vector<GpuDevice>& devices) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_gpu_.devices.insert(pending_gpu_.devices.end(), devices.begin(), devices.end());
  ++enqueued_seq_;
}

void StoreWriter::AppendCgroupSamples(std::vector<CgroupCpuSample> samples,
                                      std::vector<ProcessCgroup> processes,
                                      std::vector<CgroupMemorySample> memory) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  auto& c = pending_gpu_.cgroup_cpu;
  c.insert(c.end(), std::make_move_iterator(samples.begin()), std::make_move_iterator(samples.end()));
  auto& p = pending_gpu_.process_cgroups;
  p.insert(p.end(), std::make_move_iterator(processes.begin()),
           std::make_move_iterator(processes.end()));
  auto& m = pending_gpu_.cgroup_memory;
  m.insert(m.end(), std::make_move_iterator(memory.begin()), std::make_move_iterator(memory.end()));
  ++enqueued_seq_;
}

void StoreWriter::AppendGpuSamples(const std::vector<GpuSample>& samples,
                                   const std::vector<GpuProcessSample>& processes) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;
  pending_gpu_.samples.insert(pending_gpu_.samples.end(), samples.begin(), samples.end());
  pending_gpu_.processes.insert(pending_gpu_.processes.end(), processes.begin(),
                                processes.end());
  ++enqueued_seq_;
}

namespace {

void BindPct(sqlite3_stmt* stmt, int index, double value) {
  if (value < 0) {
    sqlite3_bind_null(stmt, index);
  } else {
    sqlite3_bind_double(stmt, index, value);
  }
}

}  // namespace

Status StoreWriter::InsertSamples(const PendingSamples& gpu) {
  sqlite3* db = db_.get();
  for (const GpuDevice& d : gpu.devices) {
    sqlite3_stmt* u = insert_gpu_device_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, d.gpu);
    BindText(u, 3, d.name);
    sqlite3_bind_int(u, 4, d.gpm_supported ? 1 : 0);
    RETURN_IF_ERROR(StepDone(db, u, "insert gpu device"));
  }
  for (const GpuSample& x : gpu.samples) {
    sqlite3_stmt* u = insert_gpu_sample_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, x.ts_ns);
    sqlite3_bind_int64(u, 3, x.gpu);
    BindOptional(u, 4, x.util_pct);
    BindOptional(u, 5, x.mem_util_pct);
    BindPct(u, 6, x.sm_active_pct);
    BindPct(u, 7, x.sm_occupancy_pct);
    BindPct(u, 8, x.tensor_active_pct);
    BindPct(u, 9, x.dram_bw_pct);
    BindOptional(u, 10, x.sm_clock_mhz);
    BindOptional(u, 11, x.power_mw);
    BindOptional(u, 12, x.throttle_reasons);
    BindOptional(u, 13, x.mem_used_bytes);
    RETURN_IF_ERROR(StepDone(db, u, "insert gpu sample"));
  }
  for (const GpuProcessSample& x : gpu.processes) {
    sqlite3_stmt* u = insert_gpu_process_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, x.ts_ns);
    sqlite3_bind_int64(u, 3, x.gpu);
    sqlite3_bind_int64(u, 4, x.pid);
    BindOptional(u, 5, x.sm_util_pct);
    BindOptional(u, 6, x.mem_util_pct);
    RETURN_IF_ERROR(StepDone(db, u, "insert gpu process sample"));
  }
  for (const CgroupCpuSample& x : gpu.cgroup_cpu) {
    sqlite3_stmt* u = insert_cgroup_cpu_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, x.ts_ns);
    BindText(u, 3, x.cgroup);
    sqlite3_bind_int(u, 4, x.version);
    BindOptional(u, 5, x.quota_us);
    BindOptional(u, 6, x.period_us);
    BindOptional(u, 7, x.nr_periods);
    BindOptional(u, 8, x.nr_throttled);
    BindOptional(u, 9, x.throttled_ns);
    BindOptional(u, 10, x.usage_ns);
    RETURN_IF_ERROR(StepDone(db, u, "insert cgroup cpu sample"));
  }
  for (const ProcessCgroup& x : gpu.process_cgroups) {
    sqlite3_stmt* u = insert_process_cgroup_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, x.pid);
    sqlite3_bind_int64(u, 3, x.ts_ns);
    BindText(u, 4, x.cgroup);
    BindOptional(u, 5, x.container_id);
    BindOptional(u, 6, x.pod_uid);
    BindOptional(u, 7, x.runtime);
    BindOptional(u, 8, x.ns_pid > 0 ? x.ns_pid : kNull);
    BindOptional(u, 9, x.pod_name);
    BindOptional(u, 10, x.pod_namespace);
    RETURN_IF_ERROR(StepDone(db, u, "insert process cgroup"));
  }
  for (const CgroupMemorySample& x : gpu.cgroup_memory) {
    sqlite3_stmt* u = insert_cgroup_memory_.get();
    sqlite3_bind_int64(u, 1, session_id_);
    sqlite3_bind_int64(u, 2, x.ts_ns);
    BindText(u, 3, x.cgroup);
    sqlite3_bind_int(u, 4, x.version);
    BindOptional(u, 5, x.max_bytes);
    BindOptional(u, 6, x.high_bytes);
    BindOptional(u, 7, x.usage_bytes);
    BindOptional(u, 8, x.events_high);
    BindOptional(u, 9, x.events_max);
    BindOptional(u, 10, x.events_oom);
    BindOptional(u, 11, x.events_oom_kill);
    BindOptional(u, 12, x.major_faults);
    RETURN_IF_ERROR(StepDone(db, u, "insert cgroup memory sample"));
  }
  return Status::Ok();
}

Status StoreWriter::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  if (closed_) return error_;
  uint64_t target = enqueued_seq_;
  flush_requested_ = true;
  cv_work_.notify_one();
  // After a failed write the writer still takes every batch (counting it lost): wait for that
  // too, so events_lost is complete when Flush returns.
  cv_space_.wait(lock, [&] { return committed_seq_ >= target; });
  return error_;
}

Status StoreWriter::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status StoreWriter::Close() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (closed_) return error_;
    stopping_ = true;
    cv_work_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
  std::lock_guard<std::mutex> db_lock(db_mu_);
  std::lock_guard<std::mutex> lock(mu_);
  closed_ = true;
  if (error_.ok()) error_ = WriteRollups(true);
  if (!error_.ok()) rollups_.clear();  // not written: the file has room for nothing more
  insert_chunk_.Reset();
  upsert_process_.Reset();
  insert_snapshot_.Reset();
  upsert_rollup_.Reset();
  upsert_thread_rollup_.Reset();
  insert_string_.Reset();
  insert_stack_.Reset();
  insert_gpu_device_.Reset();
  insert_gpu_sample_.Reset();
  insert_gpu_process_.Reset();
  insert_cgroup_cpu_.Reset();
  insert_process_cgroup_.Reset();
  insert_cgroup_memory_.Reset();
  insert_outbox_.Reset();
  // Folding the WAL back into the main file leaves one self-contained file for readers.
  ScopedFsIdentity as_owner(location_);  // closing removes the -wal: the owner's to remove
  (void)Exec(db_.get(), "PRAGMA wal_checkpoint(TRUNCATE)");
  db_.Reset();
  cv_space_.notify_all();
  return error_;
}

WriterStats StoreWriter::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  WriterStats out = stats_;
  out.rows_pruned = rows_pruned_.load();
  return out;
}

void StoreWriter::Run() {
  std::vector<Event> events;
  std::vector<ProcessInfo> processes;
  std::vector<SystemSnapshot> snapshots;
  std::vector<OpCount> counts;
  std::vector<std::pair<int64_t, std::string>> strings;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_work_.wait_for(lock, std::chrono::milliseconds(options_.commit_interval_ms), [&] {
      return stopping_ || flush_requested_ || pending_events_.size() >= 50000;
    });
    bool stopping = stopping_;
    bool final_flush = flush_requested_ || stopping;
    flush_requested_ = false;
    uint64_t seq = enqueued_seq_;
    events.swap(pending_events_);
    processes.swap(pending_processes_);
    snapshots.swap(pending_snapshots_);
    counts.swap(pending_counts_);
    strings.swap(pending_strings_);
    batch_stacks_.swap(pending_stacks_);
    std::swap(batch_gpu_, pending_gpu_);
    cv_space_.notify_all();  // queue space is free again
    // Rollups still in memory are written once a second even when no new rows come.
    const bool rollups_due = (!rollups_.empty() || !thread_rollups_.empty()) &&
                             std::chrono::steady_clock::now() >= next_full_rollups_;
    if (error_.ok() && (!events.empty() || !processes.empty() || !snapshots.empty() ||
                        !counts.empty() || !strings.empty() || !batch_stacks_.empty() ||
                        !batch_gpu_.empty() || final_flush || rollups_due)) {
      // The batch is ours alone now; SQLite work happens with the lock held only for the
      // state it shares (session id), which BeginSession changes only after Flush.
      lock.unlock();
      std::unique_lock<std::mutex> db_lock(db_mu_);
      Status st = CommitBatch(events, processes, snapshots, counts, strings, final_flush);
      db_lock.unlock();
      lock.lock();
      if (st.ok()) {
        stats_.events_written += static_cast<int64_t>(events.size());
        ++stats_.transactions;
      } else {
        if (error_.ok()) error_ = st;
        stats_.events_lost += static_cast<int64_t>(events.size());  // rolled back
      }
    } else if (!error_.ok()) {
      stats_.events_lost += static_cast<int64_t>(events.size());  // after a failed write
    }
    events.clear();
    processes.clear();
    snapshots.clear();
    counts.clear();
    strings.clear();
    batch_stacks_.clear();
    batch_gpu_ = {};
    committed_seq_ = seq;
    cv_space_.notify_all();
    if (stopping && pending_events_.empty() && pending_processes_.empty() &&
        pending_snapshots_.empty() && pending_counts_.empty() && pending_strings_.empty() &&
        pending_stacks_.empty() && pending_gpu_.empty()) {
      return;
    }
  }
}

void StoreWriter::Aggregate(const Event& e) {
  if (e.op == Op::kProcExec || e.op == Op::kProcFork || e.op == Op::kProcExit) return;
  int64_t sec = e.ts_ns / 1000000000;
  RollupKey key{sec, e.pid, static_cast<uint16_t>(e.op), e.name_id == kNull ? 0 : e.name_id};
  RollupValue& v = rollups_[key];  // unordered: one hash per event
  ++v.count;
  v.total_ns += e.duration_ns;
  v.max_ns = std::max(v.max_ns, e.duration_ns);
  Layer layer = OpLayer(e.op);
  if ((layer == Layer::kCudaRuntime || layer == Layer::kCudaDriver) && !IsLaunch(e.op) &&
      e.op != Op::kGraphNode) {
    if (e.bytes != kNull && e.bytes > 0) v.bytes += e.bytes;
    ++v.log2_hist[LatencyBucket(e.duration_ns)];
  }
  newest_sec_ = std::max(newest_sec_, sec);
  thread_rollups_.Add(e);
}

Status StoreWriter::WriteRollups(bool all) {
  sqlite3* db = db_.get();
  // Seconds older than newest-2 are complete: events arrive at most a little out of order.
  for (auto it = rollups_.begin(); it != rollups_.end();) {
    if (!all && it->first.sec >= newest_sec_ - 2) {
      ++it;
      continue;
    }
    sqlite3_stmt* s = upsert_rollup_.get();
    sqlite3_bind_int64(s, 1, session_id_);
    sqlite3_bind_int64(s, 2, it->first.sec);
    sqlite3_bind_int64(s, 3, it->first.pid);
    sqlite3_bind_int64(s, 4, it->first.op);
    sqlite3_bind_int64(s, 5, it->first.name_id);
    sqlite3_bind_int64(s, 6, it->second.count);
    sqlite3_bind_int64(s, 7, it->second.total_ns);
    sqlite3_bind_int64(s, 8, it->second.max_ns);
    if (it->second.bytes > 0) {
      sqlite3_bind_int64(s, 9, it->second.bytes);
    } else {
      sqlite3_bind_null(s, 9);
    }
    RETURN_IF_ERROR(StepDone(db, s, "write op_seconds"));
    for (size_t b = 0; b < kLatencyBuckets; ++b) {
      if (it->second.log2_hist[b] == 0) continue;
      sqlite3_stmt* h = upsert_latency_.get();
      sqlite3_bind_int64(h, 1, session_id_);
      sqlite3_bind_int64(h, 2, it->first.sec);
      sqlite3_bind_int64(h, 3, it->first.pid);
      sqlite3_bind_int64(h, 4, it->first.op);
      sqlite3_bind_int64(h, 5, static_cast<int64_t>(b));
      sqlite3_bind_int64(h, 6, it->second.log2_hist[b]);
      RETURN_IF_ERROR(StepDone(db, h, "write op_latency"));
    }
    it = rollups_.erase(it);
  }
  return thread_rollups_.Flush(all, [&](const ThreadRollupKey& k, const ThreadRollup& r) {
    sqlite3_stmt* u = upsert_thread_rollup_.get();
    int i = 0;
    for (int64_t v : {session_id_, k.sec, int64_t{k.pid}, int64_t{k.tid}, r.switches, r.preempted,
                      r.runq_ns, r.blocked_ns, r.io_ns, r.fault_ns, r.woken_irq, r.woken_same,
                      r.woken_other, r.cuda_calls, r.syncs, r.sync_ns}) {
      sqlite3_bind_int64(u, ++i, v);
    }
    return StepDone(db, u, "write thread_rollups");
  });
}

// Each batch goes in as chunks of events in timestamp order (event_chunk.h): an event that
// started before an earlier batch's newest one only makes its chunk overlap that batch's in
// time, which the reader's merge sorts out.
Status StoreWriter::InsertEvents(const std::vector<Event>& events) {
  // One pass over the events (large batches do not fit in the CPU caches) keys them for the
  // sort and folds them into the per-second rollups.
  GW_CHECK(events.size() <= UINT32_MAX);  // BatchKey::index
  if (events.empty()) return Status::Ok();
  batch_keys_.resize(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    batch_keys_[i] = {events[i].ts_ns, static_cast<uint32_t>(i)};
    Aggregate(events[i]);
  }
  if (!std::is_sorted(batch_keys_.begin(), batch_keys_.end(),
                      [](const BatchKey& a, const BatchKey& b) { return a.ts < b.ts; })) {
    SortByTimestamp(batch_keys_, sort_scratch_);
  }
  batch_order_.resize(events.size());
  for (size_t i = 0; i < events.size(); ++i) batch_order_[i] = batch_keys_[i].index;
  return InsertChunks(db_.get(), insert_chunk_.get(), session_id_, events.data(),
                      batch_order_.data(), batch_order_.size(), &chunk_scratch_);
}

Status StoreWriter::CommitBatch(std::vector<Event>& events, std::vector<ProcessInfo>& processes,
                                std::vector<SystemSnapshot>& snapshots,
                                std::vector<OpCount>& counts,
                                std::vector<std::pair<int64_t, std::string>>& strings,
                                bool final_flush) {
  sqlite3* db = db_.get();
  if (session_id_ == 0 && (!events.empty() || !processes.empty() || !snapshots.empty() ||
                           !counts.empty() || !batch_stacks_.empty() || !batch_gpu_.empty())) {
    return FailedPrecondition("store writer: data appended before BeginSession");
  }
  RETURN_IF_ERROR(CheckFreeSpace(events.size()));
  RETURN_IF_ERROR(Exec(db, "BEGIN"));
  Status st = [&]() -> Status {
    for (const PendingStack& stack : batch_stacks_) {
      sqlite3_stmt* u = insert_stack_.get();
      sqlite3_bind_int64(u, 1, session_id_);
      sqlite3_bind_int64(u, 2, stack.id);
      sqlite3_bind_int64(u, 3, stack.pid);
      BindText(u, 4, stack.location);
      BindText(u, 5, stack.frames_json);
      RETURN_IF_ERROR(StepDone(db, u, "insert stack"));
    }
    for (const auto& [id, text] : strings) {
      sqlite3_bind_int64(insert_string_.get(), 1, id);
      BindText(insert_string_.get(), 2, text);
      RETURN_IF_ERROR(StepDone(db, insert_string_.get(), "insert string"));
      if (options_.outbox) outbox_encoder_.AddString(id, text);
    }
    RETURN_IF_ERROR(InsertEvents(events));
    RETURN_IF_ERROR(InsertSamples(batch_gpu_));
    for (const OpCount& c : counts) {
      RollupKey key{c.sec, c.pid, static_cast<uint16_t>(c.op), c.name_id == kNull ? 0 : c.name_id};
      RollupValue& v = rollups_[key];
      v.count += c.count;
      v.total_ns += c.total_ns;
      v.max_ns = std::max(v.max_ns, c.max_ns);
      v.bytes += c.bytes;
      for (size_t b = 0; b < kLatencyBuckets; ++b) v.log2_hist[b] += c.log2_hist[b];
      newest_sec_ = std::max(newest_sec_, c.sec);
    }
    for (const ProcessInfo& p : processes) {
      sqlite3_stmt* u = upsert_process_.get();
      sqlite3_bind_int64(u, 1, session_id_);
      sqlite3_bind_int64(u, 2, p.pid);
      if (p.ppid > 0) sqlite3_bind_int64(u, 3, p.ppid); else sqlite3_bind_null(u, 3);
      BindText(u, 4, p.name.empty() ? p.comm : p.name);
      if (p.comm.empty()) sqlite3_bind_null(u, 5); else BindText(u, 5, p.comm);
      if (p.cmdline.empty()) sqlite3_bind_null(u, 6); else BindText(u, 6, p.cmdline);
      BindOptional(u, 7, p.first_ts_ns);
      BindOptional(u, 8, p.exit_ts_ns);
      BindOptional(u, 9, p.exit_code);
      sqlite3_bind_int(u, 10, p.tracked ? 1 : 0);
      RETURN_IF_ERROR(StepDone(db, u, "upsert process"));
    }
    for (const SystemSnapshot& x : snapshots) {
      sqlite3_stmt* u = insert_snapshot_.get();
      sqlite3_bind_int64(u, 1, session_id_);
      sqlite3_bind_int64(u, 2, x.ts_ns);
      sqlite3_bind_double(u, 3, x.cpu_pct);
      sqlite3_bind_double(u, 4, x.mem_pct);
      sqlite3_bind_double(u, 5, x.load1);
      sqlite3_bind_int64(u, 6, x.cores);
      sqlite3_bind_int64(u, 7, x.swap_used_bytes);
      sqlite3_bind_int64(u, 8, x.mem_available_bytes);
      sqlite3_bind_int64(u, 9, x.major_faults_per_s);
      sqlite3_bind_int64(u, 10, x.ctx_switches_per_s);
      sqlite3_bind_int64(u, 11, x.procs_running);
      sqlite3_bind_int64(u, 12, x.procs_blocked);
      sqlite3_bind_double(u, 13, x.iowait_pct);
      if (x.wall_ns != 0) sqlite3_bind_int64(u, 14, x.wall_ns); else sqlite3_bind_null(u, 14);
      RETURN_IF_ERROR(StepDone(db, u, "insert snapshot"));
    }
    if (options_.outbox) RETURN_IF_ERROR(SpoolBatch(events, processes, snapshots, counts));
    // Incomplete seconds and buckets too, once a second: the upserts add up, and a tracer
    // killed with -9 then loses at most a second of them (a short session killed before its
    // first bucket closed kept none, and pruning its raw rows left nothing).
    const auto now = std::chrono::steady_clock::now();
    const bool all = final_flush || now >= next_full_rollups_;
    if (all) next_full_rollups_ = now + std::chrono::seconds(1);
    return WriteRollups(all);
  }();
  if (!st.ok()) {
    (void)Exec(db, "ROLLBACK");
    return WriteFailure(st, "write to " + path_);
  }
  if (Status committed = Exec(db, "COMMIT"); !committed.ok()) {
    (void)Exec(db, "ROLLBACK");
    return WriteFailure(committed, "commit to " + path_);
  }
  if (options_.outbox && outbox_bytes_ > options_.outbox_max_bytes) {
    // The sink is far behind (its server down for long): keep the newest rows.
    ASSIGN_OR_RETURN(TrimmedOutbox trimmed, TrimOutbox(db, options_.outbox_max_bytes));
    outbox_rows_dropped_ += trimmed.rows_dropped;
    outbox_bytes_ = trimmed.bytes_left;
  }
  if (options_.max_db_bytes > 0) RETURN_IF_ERROR(PruneIfNeeded());
  return Status::Ok();
}

Status StoreWriter::SpoolSessionRow(const SessionTotals* totals) {
  std::string row = outbox_encoder_.Session(session_info_, totals);
  outbox_bytes_ += static_cast<int64_t>(row.size());
  return InsertOutboxEntry(db_.get(), insert_outbox_.get(), kOutboxSessions, 1, row);
}

Status StoreWriter::SpoolBatch(const std::vector<Event>& events,
                               const std::vector<ProcessInfo>& processes,
                               const std::vector<SystemSnapshot>& snapshots,
                               const std::vector<OpCount>& counts) {
  sqlite3* db = db_.get();
  auto spool = [&](const char* table, size_t rows, const std::string& body) -> Status {
    if (rows == 0) return Status::Ok();
    outbox_bytes_ += static_cast<int64_t>(body.size());
    return InsertOutboxEntry(db, insert_outbox_.get(), table, static_cast<int64_t>(rows), body);
  };
  // Entries of at most 65,536 rows: a ClickHouse INSERT is atomic below max_insert_block_size
  // (about 1 M rows), which the sink's exactly-once check relies on; a writer that fell behind
  // may commit more than that at once.
  constexpr size_t kMaxEntryRows = 65536;
  for (size_t first = 0; first < events.size(); first += kMaxEntryRows) {
    size_t n = std::min(kMaxEntryRows, events.size() - first);
    RETURN_IF_ERROR(spool(kOutboxEvents, n, outbox_encoder_.Events(events.data() + first, n)));
  }
  RETURN_IF_ERROR(
      spool(kOutboxProcesses, processes.size(), outbox_encoder_.Processes(processes)));
  RETURN_IF_ERROR(
      spool(kOutboxSnapshots, snapshots.size(), outbox_encoder_.Snapshots(snapshots)));
  RETURN_IF_ERROR(spool(kOutboxOpCounts, counts.size(), outbox_encoder_.OpCounts(counts)));
  std::string stacks;
  for (const PendingStack& st : batch_stacks_) {
    stacks += outbox_encoder_.Stack(st.id, st.pid, st.location, st.frames_json);
  }
  RETURN_IF_ERROR(spool(kOutboxStacks, batch_stacks_.size(), stacks));
  RETURN_IF_ERROR(spool(kOutboxGpuDevices, batch_gpu_.devices.size(),
                        outbox_encoder_.GpuDevices(batch_gpu_.devices)));
  RETURN_IF_ERROR(spool(kOutboxGpuSamples, batch_gpu_.samples.size(),
                        outbox_encoder_.GpuSamples(batch_gpu_.samples)));
  RETURN_IF_ERROR(spool(kOutboxGpuProcessSamples, batch_gpu_.processes.size(),
                        outbox_encoder_.GpuProcessSamples(batch_gpu_.processes)));
  RETURN_IF_ERROR(spool(kOutboxProcessCgroups, batch_gpu_.process_cgroups.size(),
                        outbox_encoder_.ProcessCgroups(batch_gpu_.process_cgroups)));
  RETURN_IF_ERROR(spool(kOutboxCgroupCpuSamples, batch_gpu_.cgroup_cpu.size(),
                        outbox_encoder_.CgroupCpuSamples(batch_gpu_.cgroup_cpu)));
  return spool(kOutboxCgroupMemorySamples, batch_gpu_.cgroup_memory.size(),
               outbox_encoder_.CgroupMemorySamples(batch_gpu_.cgroup_memory));
}

StatusOr<std::vector<OutboxEntry>> StoreWriter::ReadOutbox(int64_t after_id, int64_t max_bytes) {
  std::lock_guard<std::mutex> db_lock(db_mu_);
  if (!db_) return FailedPrecondition("store writer is closed");
  return ReadOutboxEntries(db_.get(), after_id, max_bytes);
}

Status StoreWriter::AckOutbox(int64_t id, int64_t bytes) {
  std::lock_guard<std::mutex> db_lock(db_mu_);
  if (!db_) return FailedPrecondition("store writer is closed");
  ScopedFsIdentity as_owner(location_);
  RETURN_IF_ERROR(DeleteOutboxThrough(db_.get(), id));
  outbox_bytes_ = std::max<int64_t>(0, outbox_bytes_ - bytes);
  return Status::Ok();
}

StatusOr<OutboxStatus> StoreWriter::OutboxState() {
  std::lock_guard<std::mutex> db_lock(db_mu_);
  if (!db_) return FailedPrecondition("store writer is closed");
  ASSIGN_OR_RETURN(OutboxStatus s, ReadOutboxStatus(db_.get()));
  s.rows_dropped = outbox_rows_dropped_;
  return s;
}

namespace {

int64_t FileBytes(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

}  // namespace

Status StoreWriter::CheckFreeSpace(size_t events) {
  struct statvfs fs;
  if (statvfs(location_.open_path.c_str(), &fs) != 0) return Status::Ok();  // cannot tell
  int64_t avail = static_cast<int64_t>(fs.f_bavail) * static_cast<int64_t>(fs.f_frsize);
  int64_t size = static_cast<int64_t>(fs.f_blocks) * static_cast<int64_t>(fs.f_frsize);
  // Room to close the session and checkpoint: a sixteenth of the filesystem, 256 KiB to 8 MiB;
  // the batch itself takes at most ~200 bytes a row in the WAL (a row, its index share and
  // whole pages). A cap (--max-db) well under the free space never gets here.
  int64_t reserve = std::clamp<int64_t>(size / 16, 256 << 10, 8 << 20);
  int64_t need = reserve + static_cast<int64_t>(events) * 200;
  if (avail >= need) return Status::Ok();
  return FailedPrecondition("recording stopped: the filesystem of " + path_ + " has " +
                            std::to_string(avail >> 10) + " KiB free, a batch of " +
                            std::to_string(events) + " events needs " +
                            std::to_string(need >> 10) +
                            " KiB with room kept to close the session — hint: free space there, "
                            "cap the file with --max-db, or pass --db on a larger disk");
}

Status StoreWriter::WriteFailure(const Status& failed, const std::string& what) {
  std::string hint;
  if (failed.message().find("full") != std::string::npos) {
    hint = " — hint: free space there, cap the file with --max-db, or pass --db on a larger disk";
  }
  return Status(failed.code(), "recording stopped: " + what + ": " + failed.message() + hint);
}

namespace {

// The rollup tier: what long windows are explained from once their raw rows are gone.
constexpr const char* kRollupTables[] = {"op_seconds", "op_latency", "thread_rollups",
                                         "system_snapshots"};

StatusOr<int64_t> RollupTierBytes(sqlite3* db) {
  // dbstat walks the pages of the rollup tables only (a fifth of the file at most).
  std::string names;
  for (const char* table : kRollupTables) {
    names += std::string(names.empty() ? "'" : ", '") + table + "'";
  }
  return QueryInt(db, "SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (" + names + ")",
                  0);
}

// The cut for a tier whose oldest rows are in `oldest` (session): the whole session when a
// newer one exists, else the oldest tenth of its time span (at least one second, never its
// newest row). `min_ts`/`max_ts`: that session's span in the tier, ns.
int64_t CutOf(int64_t oldest, int64_t current, int64_t min_ts, int64_t max_ts) {
  if (oldest != current) return INT64_MAX;
  int64_t cut = min_ts + std::max<int64_t>((max_ts - min_ts) / 10, 1'000'000'000);
  return std::min(cut, max_ts);
}

}  // namespace

StatusOr<int64_t> StoreWriter::PruneOldestRaw(sqlite3* db, int64_t oldest) {
  std::string sess = std::to_string(oldest);
  ASSIGN_OR_RETURN(int64_t min_ts,
                   QueryInt(db, "SELECT MIN(ts) FROM event_chunks WHERE session = " + sess, 0));
  ASSIGN_OR_RETURN(int64_t max_ts,
                   QueryInt(db, "SELECT MAX(ts) FROM event_chunks WHERE session = " + sess, 0));
  std::string cut = std::to_string(CutOf(oldest, session_id_, min_ts, max_ts));
  // Whole chunks go: those that end before the cut.
  const std::string older = "FROM event_chunks WHERE session = " + sess + " AND ts < " + cut +
                            " AND last_ts < " + cut;
  RETURN_IF_ERROR(Exec(db, "BEGIN"));
  StatusOr<int64_t> events = QueryInt(db, "SELECT COALESCE(SUM(n), 0) " + older, 0);
  Status st = events.ok() ? Exec(db, "DELETE " + older) : events.status();
  int64_t deleted = events.ok() ? *events : 0;
  if (st.ok()) {
    for (const char* table :
         {"gpu_samples", "gpu_process_samples", "cgroup_cpu_samples", "cgroup_memory_samples"}) {
      if (st.ok()) {
        st = Exec(db, std::string("DELETE FROM ") + table + " WHERE session < " + sess +
                          " OR (session = " + sess + " AND ts < " + cut + ")");
      }
    }
  }
  if (!st.ok()) {
    (void)Exec(db, "ROLLBACK");
    return st.WithContext("prune " + path_);
  }
  RETURN_IF_ERROR(Exec(db, "COMMIT"));
  rows_pruned_ += deleted;
  return deleted;
}

StatusOr<int64_t> StoreWriter::PruneOldestRollups(sqlite3* db) {
  ASSIGN_OR_RETURN(int64_t oldest, QueryInt(db, "SELECT MIN(session) FROM op_seconds", 0));
  ASSIGN_OR_RETURN(int64_t oldest_t, QueryInt(db, "SELECT MIN(session) FROM thread_rollups", 0));
  if (oldest == 0 || (oldest_t != 0 && oldest_t < oldest)) oldest = oldest_t;
  if (oldest == 0) return 0;
  std::string sess = std::to_string(oldest);
  ASSIGN_OR_RETURN(int64_t min_sec,
                   QueryInt(db, "SELECT MIN(sec) FROM op_seconds WHERE session = " + sess, 0));
  ASSIGN_OR_RETURN(int64_t max_sec,
                   QueryInt(db, "SELECT MAX(sec) FROM op_seconds WHERE session = " + sess, 0));
  int64_t cut_ns = CutOf(oldest, session_id_, min_sec * 1'000'000'000, max_sec * 1'000'000'000);
  std::string cut_sec = std::to_string(cut_ns == INT64_MAX ? INT64_MAX : cut_ns / 1'000'000'000);
  std::string cut = std::to_string(cut_ns);
  RETURN_IF_ERROR(Exec(db, "BEGIN"));
  int64_t deleted = 0;
  Status st = Status::Ok();
  for (const char* table : kRollupTables) {
    bool by_sec = std::string(table) != "system_snapshots";
    if (st.ok()) {
      st = Exec(db, std::string("DELETE FROM ") + table + " WHERE session < " + sess +
                        " OR (session = " + sess + " AND " + (by_sec ? "sec < " + cut_sec
                                                                     : "ts < " + cut) + ")");
      deleted += sqlite3_changes(db);
    }
  }
  if (!st.ok()) {
    (void)Exec(db, "ROLLBACK");
    return st.WithContext("prune " + path_);
  }
  RETURN_IF_ERROR(Exec(db, "COMMIT"));
  return deleted;
}

Status StoreWriter::PruneIfNeeded() {
  sqlite3* db = db_.get();
  // Cheap test first: page_count covers the main file plus pages still in the WAL; the WAL file
  // itself takes disk space too and counts against the cap.
  const std::string wal = location_.open_path + "-wal";
  ASSIGN_OR_RETURN(int64_t page_count, QueryInt(db, "PRAGMA page_count", 0));
  ASSIGN_OR_RETURN(int64_t page_bytes, QueryInt(db, "PRAGMA page_size", 4096));
  if (page_count * page_bytes + FileBytes(wal) <= options_.max_db_bytes * 9 / 10) {
    return Status::Ok();
  }
  // A checkpoint alone often gives the WAL's share back.
  RETURN_IF_ERROR(Exec(db, "PRAGMA wal_checkpoint(TRUNCATE)"));
  for (int round = 0; round < 20; ++round) {
    ASSIGN_OR_RETURN(int64_t pages, QueryInt(db, "PRAGMA page_count", 0));
    ASSIGN_OR_RETURN(int64_t free_pages, QueryInt(db, "PRAGMA freelist_count", 0));
    ASSIGN_OR_RETURN(int64_t page_size, QueryInt(db, "PRAGMA page_size", 4096));
    int64_t used = (pages - free_pages) * page_size;
    int64_t wal_bytes = FileBytes(wal);
    // Keep 10% headroom so pruning does not run on every commit.
    if (used + wal_bytes <= options_.max_db_bytes * 9 / 10 &&
        pages * page_size + wal_bytes <= options_.max_db_bytes) {
      return Status::Ok();
    }
    // Two tiers (docs/schema.md): rollups may hold up to a fifth of the cap and outlive the
    // raw rows; raw rows take the rest. The tier over its share loses its oldest rows first.
    ASSIGN_OR_RETURN(int64_t rollup_bytes, RollupTierBytes(db));
    ASSIGN_OR_RETURN(int64_t oldest_raw, QueryInt(db, "SELECT MIN(session) FROM event_chunks", 0));
    int64_t deleted = 0;
    if (rollup_bytes > options_.max_db_bytes / kRollupShareDivisor || oldest_raw == 0) {
      ASSIGN_OR_RETURN(deleted, PruneOldestRollups(db));
    }
    // Raw rows too when the rollups had nothing left to give (a single second of them).
    if (deleted == 0 && oldest_raw != 0) {
      ASSIGN_OR_RETURN(deleted, PruneOldestRaw(db, oldest_raw));
    }
    if (deleted == 0) {
      (void)Exec(db, "PRAGMA incremental_vacuum");
      return Status::Ok();  // nothing left to give back
    }
    RETURN_IF_ERROR(Exec(db, "PRAGMA incremental_vacuum; PRAGMA wal_checkpoint(TRUNCATE)"));
  }
  return Status::Ok();
}

StatusOr<StoreWriter::RemovedSessions> StoreWriter::RemoveSessions(
    const std::vector<int64_t>& ids) {
  RETURN_IF_ERROR(Flush());
  std::lock_guard<std::mutex> db_lock(db_mu_);
  sqlite3* db = db_.get();
  RemovedSessions removed;
  if (ids.empty()) return removed;
  std::string list;
  for (int64_t id : ids) {
    if (id == session_id_ && id != 0) {
      return FailedPrecondition("session " + std::to_string(id) + " is being recorded");
    }
    list += (list.empty() ? "" : ",") + std::to_string(id);
  }
  const std::string in = " IN (" + list + ")";
  RETURN_IF_ERROR(Exec(db, "BEGIN IMMEDIATE").WithContext("prune " + path_));
  StatusOr<int64_t> events =
      QueryInt(db, "SELECT COALESCE(SUM(n), 0) FROM event_chunks WHERE session" + in, 0);
  Status st = events.ok() ? Exec(db, "DELETE FROM event_chunks WHERE session" + in)
                          : events.status();
  removed.event_rows = events.ok() ? *events : 0;
  for (const char* table : {"op_seconds", "op_latency", "thread_rollups", "processes",
                            "system_snapshots",
                            "stacks", "gpu_devices", "gpu_samples", "gpu_process_samples",
                            "cgroup_cpu_samples", "process_cgroups", "cgroup_memory_samples"}) {
    if (st.ok()) st = Exec(db, std::string("DELETE FROM ") + table + " WHERE session" + in);
  }
  if (st.ok()) {
    st = Exec(db, "DELETE FROM sessions WHERE id" + in);
    removed.sessions = sqlite3_changes(db);
  }
  if (st.ok()) st = Exec(db, "COMMIT");
  if (!st.ok()) {
    (void)Exec(db, "ROLLBACK");
    return st.WithContext("prune " + path_);
  }
  // auto_vacuum is chosen when a file is created: 2 (incremental) for every file gpuwhy made.
  ASSIGN_OR_RETURN(int64_t auto_vacuum, QueryInt(db, "PRAGMA auto_vacuum", 0));
  if (auto_vacuum == 2) RETURN_IF_ERROR(Exec(db, "PRAGMA incremental_vacuum"));
  removed.space_returned = auto_vacuum != 0;
  RETURN_IF_ERROR(Exec(db, "PRAGMA wal_checkpoint(TRUNCATE)").WithContext("prune " + path_));
  return removed;
}

std::string DefaultDatabasePath() {
  if (const char* env = std::getenv("GPUWHY_DB"); env != nullptr && *env != '\0') return env;
  std::string home;
  DatabaseOwner owner = InvokingDatabaseOwner();
  if (owner.uid != geteuid()) {  // under sudo: the user's home, not root's
    if (struct passwd* pw = getpwuid(owner.uid)) home = pw->pw_dir;
  }
  if (home.empty()) {
    if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') home = h;
  }
  if (home.empty()) {
    if (struct passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
  }
  if (home.empty()) home = ".";
  return home + "/.gpuwhy/gpuwhy.db";
}

}  // namespace gw
