// Store benchmark (issue 7, item 3): rows/s through the real StoreWriter and bytes per event on
// disk for a realistic op mix, against a plain batched SQLite insert of a 7-column integer row
// (with and without a timestamp index) measured in the same run.
//
// Usage: gw_store_bench [--events N] [--rounds R] [--dir DIR]
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "store/writer.h"

namespace gw {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t FileBytes(const std::string& path) {
  struct stat st;
  int64_t total = 0;
  for (const std::string& p : {path, path + "-wal"}) {
    if (stat(p.c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

// A mix shaped like a traced training job: scheduler intervals dominate, then CUDA syncs,
// memcpys and sampled launches, page faults and block I/O.
std::vector<Event> MakeMix(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> out;
  out.reserve(static_cast<size_t>(n));
  int64_t ts = 0;
  for (int64_t i = 0; i < n; ++i) {
    ts += 1000 + static_cast<int64_t>(rng() % 2000);  // ~500k events/s of session time
    Event e;
    e.ts_ns = ts;
    e.pid = 3821 + static_cast<int32_t>(rng() % 6);
    e.tid = e.pid + static_cast<int32_t>(rng() % 4);
    uint64_t r = rng() % 100;
    if (r < 45) {
      e.op = Op::kSchedSwitch;
      e.duration_ns = static_cast<int64_t>(rng() % 2'000'000);
      e.runq_ns = e.duration_ns / 3;
      e.kind = static_cast<int64_t>(rng() % 3);
      e.cpu = static_cast<int64_t>(rng() % 16);
      e.other_pid = 4000 + static_cast<int64_t>(rng() % 50);
    } else if (r < 65) {
      e.op = Op::kCuLaunchKernel;
      e.duration_ns = 3000 + static_cast<int64_t>(rng() % 4000);
      e.ret = 0;
      e.name_id = 1 + static_cast<int64_t>(rng() % 200);
      e.addr = 0x7f0000001000;
    } else if (r < 75) {
      e.op = Op::kCudaStreamSync;
      e.duration_ns = static_cast<int64_t>(rng() % 5'000'000);
      e.ret = 0;
      e.addr = 0;
    } else if (r < 85) {
      e.op = Op::kCudaMemcpyAsync;
      e.duration_ns = 5000 + static_cast<int64_t>(rng() % 50'000);
      e.ret = 0;
      e.bytes = 1 << 20;
      e.kind = 1;
      e.addr = 0;
    } else if (r < 95) {
      e.op = Op::kPageFault;
      e.addr = static_cast<int64_t>(0x7f0000000000ULL + (rng() % (1ULL << 30)));
    } else {
      e.op = Op::kBlockIo;
      e.duration_ns = 100'000 + static_cast<int64_t>(rng() % 5'000'000);
      e.bytes = 131072;
      e.kind = 0;
      e.addr = static_cast<int64_t>(rng() % 100'000'000);
    }
    out.push_back(e);
  }
  return out;
}

struct Result {
  double rows_per_s;
  double bytes_per_row;
};

Result RunWriter(const std::string& path, const std::vector<Event>& events) {
  unlink(path.c_str());
  auto writer = StoreWriter::Create(path, {});
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().message().c_str());
    std::exit(1);
  }
  (void)(*writer)->BeginSession({});
  double t0 = Now();
  const size_t kChunk = 4096;  // the drain thread hands over a few thousand events at a time
  for (size_t i = 0; i < events.size(); i += kChunk) {
    (*writer)->AppendEvents(events.data() + i, std::min(kChunk, events.size() - i));
  }
  if (!(*writer)->Close().ok()) std::exit(1);
  double secs = Now() - t0;
  return {static_cast<double>(events.size()) / secs,
          static_cast<double>(FileBytes(path)) / static_cast<double>(events.size())};
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
  return {static_cast<double>(events.size()) / secs,
          static_cast<double>(FileBytes(path)) / static_cast<double>(events.size())};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
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
  std::vector<Event> events = MakeMix(n, 1);
  std::vector<double> w_rate, w_bytes, p_rate, p_bytes, pi_rate, pi_bytes;
  for (int r = 0; r < rounds; ++r) {  // interleaved so machine noise hits all three alike
    Result w = RunWriter(dir + "/gw_bench_writer.db", events);
    Result p = RunPlainSqlite(dir + "/gw_bench_plain.db", events, false);
    Result pi = RunPlainSqlite(dir + "/gw_bench_plain_idx.db", events, true);
    w_rate.push_back(w.rows_per_s); w_bytes.push_back(w.bytes_per_row);
    p_rate.push_back(p.rows_per_s); p_bytes.push_back(p.bytes_per_row);
    pi_rate.push_back(pi.rows_per_s); pi_bytes.push_back(pi.bytes_per_row);
    std::fprintf(stderr, "round %d: writer %.0f rows/s %.1f B/row | plain %.0f rows/s %.1f B/row | "
                 "plain+ts index %.0f rows/s %.1f B/row\n", r + 1, w.rows_per_s, w.bytes_per_row,
                 p.rows_per_s, p.bytes_per_row, pi.rows_per_s, pi.bytes_per_row);
  }
  auto spread = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return std::to_string(static_cast<int64_t>(v.front())) + "-" + std::to_string(static_cast<int64_t>(v.back()));
  };
  std::printf("events=%lld rounds=%d\n", static_cast<long long>(n), rounds);
  std::printf("gpuwhy StoreWriter      : %9.0f rows/s (range %s)  %5.1f B/event (all indexes)\n",
              Median(w_rate), spread(w_rate).c_str(), Median(w_bytes));
  std::printf("plain SQLite, no index  : %9.0f rows/s (range %s)  %5.1f B/row\n", Median(p_rate),
              spread(p_rate).c_str(), Median(p_bytes));
  std::printf("plain SQLite, ts index  : %9.0f rows/s (range %s)  %5.1f B/row\n", Median(pi_rate),
              spread(pi_rate).c_str(), Median(pi_bytes));
  std::printf("ratio writer/plain      : %.2fx rows/s, %.2fx bytes\n", Median(w_rate) / Median(p_rate),
              Median(w_bytes) / Median(p_bytes));
  for (const char* f : {"gw_bench_writer.db", "gw_bench_plain.db", "gw_bench_plain_idx.db"}) {
    unlink((dir + "/" + f).c_str());
  }
  return 0;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::Main(argc, argv); }
