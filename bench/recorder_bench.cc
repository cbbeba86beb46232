// A synthetic always-on recorder (issue 19): a training job written through the real
// StoreWriter for hours of session time, as fast as the writer takes it (time is compressed:
// the rows of an hour arrive in seconds), optionally under --max-db. The job: a main thread
// (pid 3821) that copies a batch, syncs on the GPU and sleeps in the sync each step; four
// DataLoader workers; from `incident_at` for 20 min a CPU hog (pid 4410, untracked) preempts
// all of them. Prints what the tiers hold afterwards; bench/long_window.py times `explain` on it.
//
// Usage: gw_recorder_bench --db FILE [--hours 24] [--steps-per-s 20] [--max-db BYTES]
//                          [--incident-at-h H (default hours - 2)]
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "store/writer.h"

namespace gw {
namespace {

constexpr int64_t kS = 1'000'000'000;
constexpr int32_t kMain = 3821;
constexpr int32_t kHog = 4410;
constexpr int kWorkers = 4;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Event Switch(int64_t ts, int32_t pid, int64_t asleep, int64_t runq, SwitchKind kind,
             int64_t waker, int64_t other) {
  Event e;
  e.ts_ns = ts;
  e.pid = pid;
  e.tid = pid;
  e.op = Op::kSchedSwitch;
  e.duration_ns = asleep + runq;
  e.runq_ns = runq;
  e.kind = static_cast<int64_t>(kind);
  e.cpu = pid % 8;
  e.other_pid = other;
  if (kind != SwitchKind::kPreempted) {
    e.waker_pid = waker;
    e.waker_tid = waker;
  }
  return e;
}

int64_t Query(sqlite3* db, const char* sql) {
  sqlite3_stmt* s = nullptr;
  int64_t v = -1;
  if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW) {
    v = sqlite3_column_int64(s, 0);
  }
  sqlite3_finalize(s);
  return v;
}

int Main(int argc, char** argv) {
  std::string path;
  double hours = 24;
  int64_t steps_per_s = 20;
  int64_t max_db = 0;
  double incident_at_h = -1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--db") path = argv[i + 1];
    else if (a == "--hours") hours = std::atof(argv[i + 1]);
    else if (a == "--steps-per-s") steps_per_s = std::atoll(argv[i + 1]);
    else if (a == "--max-db") max_db = std::atoll(argv[i + 1]);
    else if (a == "--incident-at-h") incident_at_h = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  if (path.empty() || hours <= 0 || steps_per_s <= 0) {
    std::fprintf(stderr,
                 "usage: gw_recorder_bench --db FILE [--hours 24] [--steps-per-s 20] "
                 "[--max-db BYTES] [--incident-at-h H]\n");
    return 2;
  }
  if (incident_at_h < 0) incident_at_h = std::max(0.0, hours - 2);
  unlink(path.c_str());
  WriterOptions options;
  options.max_db_bytes = max_db;
  auto writer = StoreWriter::Create(path, options);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().message().c_str());
    return 1;
  }
  SessionInfo info;
  info.kind = "trace";
  info.wall_start_ns = static_cast<int64_t>(time(nullptr)) * kS;
  info.cores = 8;
  info.command_line = "gw_recorder_bench";
  if (!(*writer)->BeginSession(info).ok()) return 1;
  ProcessInfo p;
  p.pid = kMain;
  p.ppid = 1;
  p.name = "python3 (train.py)";
  p.comm = "python3";
  p.tracked = true;
  p.first_ts_ns = 0;
  (*writer)->UpsertProcess(p);
  for (int w = 0; w < kWorkers; ++w) {
    p.pid = kMain + 1 + w;
    p.ppid = kMain;
    p.name = "pt_data_worker:" + std::to_string(w);
    (*writer)->UpsertProcess(p);
  }
  p.pid = kHog;
  p.ppid = 1;
  p.name = "ffmpeg";
  p.comm = "ffmpeg";
  p.tracked = false;
  (*writer)->UpsertProcess(p);

  const int64_t end = static_cast<int64_t>(hours * 3600 * kS);
  const int64_t hog_from = static_cast<int64_t>(incident_at_h * 3600 * kS);
  const int64_t hog_to = hog_from + 20 * 60 * kS;
  const int64_t step = kS / steps_per_s;
  std::mt19937_64 rng(7);
  std::vector<Event> second;
  int64_t rows = 0;
  double t0 = Now();
  for (int64_t sec = 0; sec * kS < end; ++sec) {
    second.clear();
    for (int64_t t = sec * kS; t < (sec + 1) * kS && t < end; t += step) {
      bool hog = t >= hog_from && t < hog_to;
      int64_t jitter = static_cast<int64_t>(rng() % (step / 20 + 1));
      // Main thread: copy the batch, sync (asleep in it most of the step), and under the hog
      // wait for a CPU before it can run again.
      Event copy;
      copy.ts_ns = t;
      copy.pid = kMain;
      copy.tid = kMain;
      copy.op = Op::kCudaMemcpyAsync;
      copy.duration_ns = step / 50;
      copy.ret = 0;
      copy.bytes = 1 << 20;
      copy.kind = static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost;
      copy.addr = 0;
      second.push_back(copy);
      int64_t runq = hog ? step * 6 / 10 : step / 100;
      int64_t sync_at = t + step / 20;
      int64_t sync_len = step * 3 / 10 + jitter;
      Event sync;
      sync.ts_ns = sync_at;
      sync.pid = kMain;
      sync.tid = kMain;
      sync.op = Op::kCudaStreamSync;
      sync.duration_ns = sync_len + runq;
      sync.ret = 0;
      sync.addr = 0;
      second.push_back(sync);
      second.push_back(
          Switch(sync_at + 1000, kMain, sync_len, runq, SwitchKind::kBlocked, 0,
                 hog ? kHog : kMain + 1));
      // Workers: each sleeps until the main thread asks for the next batch.
      for (int w = 0; w < kWorkers; ++w) {
        int32_t pid = kMain + 1 + w;
        int64_t wq = hog ? step * 8 / 10 : step / 200;
        second.push_back(Switch(t + 2000 * (w + 1), pid, step / 4, wq, SwitchKind::kBlocked,
                                kMain, hog ? kHog : kMain));
      }
    }
    (*writer)->AppendEvents(second.data(), second.size());
    rows += static_cast<int64_t>(second.size());
    SystemSnapshot snap;
    snap.ts_ns = sec * kS;
    bool hog = sec * kS >= hog_from && sec * kS < hog_to;
    snap.cpu_pct = hog ? 99 : 40;
    snap.mem_pct = 50;
    snap.load1 = hog ? 14 : 4;
    snap.cores = 8;
    (*writer)->AppendSnapshot(snap);
    if (sec % 600 == 599) {
      if (!(*writer)->Flush().ok()) return 1;
      std::fprintf(stderr, "\r%.1f h of %.1f written", static_cast<double>(sec + 1) / 3600,
                   hours);
    }
  }
  SessionTotals totals;
  totals.events = rows;
  totals.wall_stop_ns = info.wall_start_ns + end;
  totals.drops_detail = "{}";
  if (!(*writer)->EndSession(totals).ok() || !(*writer)->Close().ok()) return 1;
  double secs = Now() - t0;
  std::fprintf(stderr, "\n");
  struct stat st;
  int64_t bytes = stat(path.c_str(), &st) == 0 ? st.st_size : -1;
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  std::printf("session: %.1f h of session time, %lld rows in %.1f s (%.0f rows/s), incident at "
              "%.2f h for 20 min, %lld rows pruned\n",
              hours, static_cast<long long>(rows), secs, static_cast<double>(rows) / secs,
              incident_at_h, static_cast<long long>((*writer)->stats().rows_pruned));
  std::printf("file: %.1f MiB (cap %s)\n", static_cast<double>(bytes) / (1 << 20),
              max_db > 0 ? (std::to_string(max_db >> 20) + " MiB").c_str() : "none");
  // From the chunk index (schema 9): no chunk is decoded.
  std::printf("raw tier: rows from %.2f h to %.2f h, %lld rows\n",
              static_cast<double>(Query(db, "SELECT MIN(ts) FROM event_chunks")) / 3600 / kS,
              static_cast<double>(Query(db, "SELECT MAX(last_ts) FROM event_chunks")) / 3600 / kS,
              static_cast<long long>(Query(db, "SELECT SUM(n) FROM event_chunks")));
  std::printf("rollup tier: thread_rollups from %.2f h, %lld rows; op_seconds from %.2f h; "
              "%.2f MiB in all\n",
              static_cast<double>(Query(db, "SELECT MIN(sec) FROM thread_rollups")) / 3600,
              static_cast<long long>(Query(db, "SELECT COUNT(*) FROM thread_rollups")),
              static_cast<double>(Query(db, "SELECT MIN(sec) FROM op_seconds")) / 3600,
              static_cast<double>(Query(db,
                                        "SELECT SUM(pgsize) FROM dbstat WHERE name IN "
                                        "('op_seconds', 'thread_rollups', 'system_snapshots')")) /
                  (1 << 20));
  sqlite3_close(db);
  return 0;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::Main(argc, argv); }
