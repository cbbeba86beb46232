// Sink benchmark (issue 18): what `trace --sink` costs the writer and how fast it forwards.
// Side by side in one run, on the same event mix as gw_store_bench:
//   1. the StoreWriter without an outbox (rows/s, writer-thread CPU per row);
//   2. the StoreWriter with the outbox (the same, plus spool bytes per row);
//   3. the sink draining that outbox into ClickHouse (rows/s, gzip'd TSV bytes per row sent).
// Phase 3 runs after phase 2 with the whole backlog waiting: it measures the backfill rate a
// node reaches after an outage, the ceiling of what one node can stream.
//
// Usage: gw_sink_bench --url clickhouse://127.0.0.1:8123/bench [--events N] [--dir DIR]
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>

#include "clickhouse/client.h"
#include "clickhouse/sink.h"
#include "event_mix.h"
#include "store/writer.h"

namespace gw {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double ProcessCpu() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct WriteResult {
  double rows_per_s = 0;
  double cpu_ns_per_row = 0;
};

WriteResult Write(StoreWriter* w, const std::vector<Event>& events) {
  double t0 = Now();
  double c0 = ProcessCpu();
  constexpr size_t kChunk = 4096;
  for (size_t i = 0; i < events.size(); i += kChunk) {
    w->AppendEvents(events.data() + i, std::min(kChunk, events.size() - i));
  }
  (void)w->Flush();
  double dt = Now() - t0;
  double dc = ProcessCpu() - c0;
  return {static_cast<double>(events.size()) / dt, dc * 1e9 / static_cast<double>(events.size())};
}

int Main(int argc, char** argv) {
  std::string url_text;
  int64_t n = 1'000'000;
  std::string dir = "/var/tmp";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--url")) url_text = argv[i + 1];
    else if (!std::strcmp(argv[i], "--events")) n = std::atoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir")) dir = argv[i + 1];
  }
  StatusOr<ClickHouseUrl> url = ParseClickHouseUrl(url_text);
  if (!url.ok()) {
    std::fprintf(stderr, "gw_sink_bench: %s\n", url.status().message().c_str());
    return 2;
  }
  std::vector<Event> events = MakeMix(n, 7);
  std::printf("gw_sink_bench: %lld events\n", static_cast<long long>(n));

  std::string plain = dir + "/gw_sink_bench_plain.db";
  std::string spooled = dir + "/gw_sink_bench_outbox.db";
  for (const std::string& p : {plain, spooled}) {
    unlink(p.c_str());
    unlink((p + "-wal").c_str());
  }
  WriteResult without, with;
  {
    auto w = StoreWriter::Create(plain, {});
    if (!w.ok()) return 1;
    (void)(*w)->BeginSession(SessionInfo{});
    without = Write(w->get(), events);
    (void)(*w)->Close();
  }
  WriterOptions wo;
  wo.outbox = true;
  wo.outbox_max_bytes = int64_t{8} << 30;
  auto w = StoreWriter::Create(spooled, wo);
  if (!w.ok()) return 1;
  SessionInfo info;
  info.wall_start_ns = static_cast<int64_t>(time(nullptr)) * 1'000'000'000;
  (void)(*w)->BeginSession(info);
  with = Write(w->get(), events);
  StatusOr<OutboxStatus> spool = (*w)->OutboxState();
  std::printf("  writer, no outbox : %8.0f rows/s, %6.0f ns CPU/row\n", without.rows_per_s,
              without.cpu_ns_per_row);
  std::printf("  writer + outbox   : %8.0f rows/s, %6.0f ns CPU/row, spool %.1f B/row\n",
              with.rows_per_s, with.cpu_ns_per_row,
              spool.ok() ? static_cast<double>(spool->bytes) / static_cast<double>(n) : 0.0);

  ClickHouseClient client(*url);
  (void)client.Execute("DROP TABLE IF EXISTS " + url->database + ".gw_events");
  SinkOptions so;
  so.url = *url;
  so.node = "bench";
  double t0 = Now();
  double c0 = ProcessCpu();
  auto sink = ClickHouseSink::Start(w->get(), so);
  if (!sink.ok()) return 1;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    SinkStats st = (*sink)->stats();
    if (st.rows_sent >= n) break;
    if (Now() - t0 > 600) {
      std::printf("  sink: gave up after 600 s (%lld rows sent, last error: %s)\n",
                  static_cast<long long>(st.rows_sent), st.last_error.c_str());
      return 1;
    }
  }
  double dt = Now() - t0;
  double dc = ProcessCpu() - c0;
  SinkStats st = (*sink)->stats();
  (*sink)->Finish(1000);
  StatusOr<std::string> count = client.Query("SELECT count() FROM " + url->database +
                                             ".gw_events WHERE node = 'bench'");
  std::printf("  sink → ClickHouse : %8.0f rows/s, %6.0f ns CPU/row (sender), %.1f B/row TSV "
              "before gzip; ClickHouse holds %s",
              static_cast<double>(st.rows_sent) / dt, dc * 1e9 / static_cast<double>(st.rows_sent),
              static_cast<double>(st.bytes_sent) / static_cast<double>(st.rows_sent),
              count.ok() ? count->c_str() : "?\n");
  (void)(*w)->Close();
  for (const std::string& p : {plain, spooled}) unlink(p.c_str());
  return 0;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::Main(argc, argv); }
