// Store benchmark (issue 7, item 3): rows/s through the real StoreWriter and bytes per event on
// disk for a realistic op mix, against a plain batched SQLite insert of a 7-column integer row
// (with and without a timestamp index) measured in the same run.
//
// Usage: gw_store_bench [--events N] [--rounds R] [--dir DIR] [--prune]
//   --prune: instead, the writer under a 32 MiB cap with secure_delete on vs fast.
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "event_mix.h"
#include "store/writer.h"

namespace gw {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// CPU seconds of a clock: the process (every thread, exited ones included) or the calling
// thread. What storing a row costs is measured in CPU time too, because wall time alone swings
// with the load of a shared machine.
double CpuNow(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  int64_t total = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    if (stat(p.c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

struct Result {
  double rows_per_s;
  double bytes_per_row;
  double cpu_ns_per_row;  // CPU of the thread that runs SQLite: the writer thread, or main
};

Result RunWriter(const std::string& path, const std::vector<Event>& events,
                 WriterOptions options = {}) {
  unlink(path.c_str());
  auto writer = StoreWriter::Create(path, options);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().message().c_str());
    std::exit(1);
  }
  (void)(*writer)->BeginSession({});
  double t0 = Now();
  double process0 = CpuNow(CLOCK_PROCESS_CPUTIME_ID);
  double main0 = CpuNow(CLOCK_THREAD_CPUTIME_ID);
  const size_t kChunk = 4096;  // the drain thread hands over a few thousand events at a time
  for (size_t i = 0; i < events.size(); i += kChunk) {
    (*writer)->AppendEvents(events.data() + i, std::min(kChunk, events.size() - i));
  }
  if (!(*writer)->Close().ok()) std::exit(1);
  double secs = Now() - t0;
  // The writer thread's CPU: the process's minus this (producer) thread's queueing.
  double writer_cpu = (CpuNow(CLOCK_PROCESS_CPUTIME_ID) - process0) -
                      (CpuNow(CLOCK_THREAD_CPUTIME_ID) - main0);
  double n = static_cast<double>(events.size());
  return {n / secs, static_cast<double>(FileBytes(path)) / n, writer_cpu * 1e9 / n};
}

Result RunPlainSqlite(const std::string& path, const std::vector<Event>& events, bool ts_index) {
  unlink(path.c_str());
  sqlite3* db = nullptr;
  sqlite3_open(path.c_str(), &db);
  sqlite3_exec(db,
               "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; CREATE TABLE e(ts INTEGER, "
               "pid INTEGER, tid INTEGER, op INTEGER, dur INTEGER, addr INTEGER, arg INTEGER)",
               nullptr, nullptr, nullptr);
  if (ts_index) sqlite3_exec(db, "CREATE INDEX e_ts ON e(ts)", nullptr, nullptr, nullptr);
  sqlite3_stmt* stmt = nullptr;
  sqlite3_prepare_v2(db, "INSERT INTO e VALUES (?,?,?,?,?,?,?)", -1, &stmt, nullptr);
  double t0 = Now();
  double c0 = CpuNow(CLOCK_THREAD_CPUTIME_ID);
  for (size_t i = 0; i < events.size(); ++i) {
    if (i % 50000 == 0) sqlite3_exec(db, i ? "COMMIT; BEGIN" : "BEGIN", nullptr, nullptr, nullptr);
    const Event& e = events[i];
    sqlite3_bind_int64(stmt, 1, e.ts_ns);
    sqlite3_bind_int64(stmt, 2, e.pid);
    sqlite3_bind_int64(stmt, 3, e.tid);
    sqlite3_bind_int64(stmt, 4, static_cast<int64_t>(e.op));
    sqlite3_bind_int64(stmt, 5, e.duration_ns);
    sqlite3_bind_int64(stmt, 6, e.addr == kNull ? 0 : e.addr);
    sqlite3_bind_int64(stmt, 7, e.bytes == kNull ? 0 : e.bytes);
    sqlite3_step(stmt);
    sqlite3_reset(stmt);
  }
  sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_finalize(stmt);
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  double secs = Now() - t0;
  double n = static_cast<double>(events.size());
  return {n / secs, static_cast<double>(FileBytes(path)) / n,
          (CpuNow(CLOCK_THREAD_CPUTIME_ID) - c0) * 1e9 / n};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Each writer's results over the rounds.
struct Series {
  const char* name;
  std::vector<Result> runs;
};

std::string Range(const std::vector<Result>& runs, double Result::*field) {
  double lo = runs[0].*field, hi = lo;
  for (const Result& r : runs) {
    lo = std::min(lo, r.*field);
    hi = std::max(hi, r.*field);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f-%.0f", lo, hi);
  return buf;
}

double MedianOf(const std::vector<Result>& runs, double Result::*field) {
  std::vector<double> v;
  for (const Result& r : runs) v.push_back(r.*field);
  return Median(v);
}

int Main(int argc, char** argv) {
  int64_t n = 2'000'000;
  int rounds = 3;
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--events") n = std::atoll(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else if (a == "--dir") dir = argv[i + 1];
  }
  bool prune = false;
  for (int i = 1; i < argc; ++i) prune = prune || std::string(argv[i]) == "--prune";
  std::vector<Event> events = MakeMix(n, 1);
  if (prune) {
    // Pruning under a cap, secure_delete as Debian builds SQLite (on) vs gpuwhy's (fast):
    // the writer's CPU per row while it keeps the file under 32 MiB the whole run.
    std::vector<Series> ps = {{"capped 32 MiB, secure_delete=on  ", {}},
                              {"capped 32 MiB, secure_delete=fast", {}}};
    for (int r = 0; r < rounds; ++r) {
      for (int k = 0; k < 2; ++k) {
        WriterOptions o;
        o.max_db_bytes = 32 << 20;
        o.secure_delete = k == 0 ? "on" : "fast";
        ps[k].runs.push_back(RunWriter(dir + "/gw_bench_prune.db", events, o));
      }
    }
    std::printf("events=%lld rounds=%d; medians (range)\n", static_cast<long long>(n), rounds);
    for (const Series& x : ps) {
      std::printf("%s: %9.0f rows/s (%s)  %5.0f CPU ns/row (%s)\n", x.name,
                  MedianOf(x.runs, &Result::rows_per_s), Range(x.runs, &Result::rows_per_s).c_str(),
                  MedianOf(x.runs, &Result::cpu_ns_per_row),
                  Range(x.runs, &Result::cpu_ns_per_row).c_str());
    }
    unlink((dir + "/gw_bench_prune.db").c_str());
    return 0;
  }
  // The order a tracer hands events over: when each one ends (a sync row is emitted when the
  // sync returns), so a batch is not in timestamp order and the writer has to sort it.
  std::vector<Event> by_end = events;
  std::stable_sort(by_end.begin(), by_end.end(), [](const Event& a, const Event& b) {
    return a.ts_ns + a.duration_ns < b.ts_ns + b.duration_ns;
  });
  std::vector<Series> series = {{"gpuwhy StoreWriter, start order", {}},
                                {"gpuwhy StoreWriter, end order  ", {}},
                                {"plain SQLite, no index         ", {}},
                                {"plain SQLite, ts index         ", {}}};
  for (int r = 0; r < rounds; ++r) {  // interleaved so machine noise hits all alike
    series[0].runs.push_back(RunWriter(dir + "/gw_bench_writer.db", events));
    series[1].runs.push_back(RunWriter(dir + "/gw_bench_writer.db", by_end));
    series[2].runs.push_back(RunPlainSqlite(dir + "/gw_bench_plain.db", events, false));
    series[3].runs.push_back(RunPlainSqlite(dir + "/gw_bench_plain_idx.db", events, true));
    std::fprintf(stderr, "round %d:", r + 1);
    for (const Series& x : series) {
      const Result& last = x.runs.back();
      std::fprintf(stderr, " | %.0f rows/s %.0f ns/row %.1f B", last.rows_per_s,
                   last.cpu_ns_per_row, last.bytes_per_row);
    }
    std::fprintf(stderr, "\n");
  }
  std::printf("events=%lld rounds=%d; medians (range)\n", static_cast<long long>(n), rounds);
  for (const Series& x : series) {
    std::printf("%s: %9.0f rows/s (%s)  %5.0f CPU ns/row (%s)  %5.1f B/row\n", x.name,
                MedianOf(x.runs, &Result::rows_per_s), Range(x.runs, &Result::rows_per_s).c_str(),
                MedianOf(x.runs, &Result::cpu_ns_per_row),
                Range(x.runs, &Result::cpu_ns_per_row).c_str(),
                MedianOf(x.runs, &Result::bytes_per_row));
  }
  double plain = MedianOf(series[2].runs, &Result::rows_per_s);
  std::printf("ratio writer/plain (start order): %.2fx rows/s, %.2fx bytes\n",
              MedianOf(series[0].runs, &Result::rows_per_s) / plain,
              MedianOf(series[0].runs, &Result::bytes_per_row) /
                  MedianOf(series[2].runs, &Result::bytes_per_row));
  for (const char* f : {"gw_bench_writer.db", "gw_bench_plain.db", "gw_bench_plain_idx.db"}) {
    unlink((dir + "/" + f).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::Main(argc, argv); }
