// What `trace --stack` pays in user space to turn stacks into frames (issue 14): a Symbolizer
// (the one the stack thread uses) symbolizes --stacks synthetic native stacks of --depth frames
// whose addresses are drawn from a pool of --pool distinct code addresses inside the executable
// file mappings of a live process (--pid; its big libraries, e.g. libtorch, are what costs).
// Stacks share frames the way real ones do: each frame is drawn from the pool, so the pool size
// sets how often an address repeats. Prints the first stack's time (opening and indexing the
// ELF files), the steady per-stack time, how many frames got a function name, and the growth
// of peak RSS (VmHWM) with the resident anonymous and file-backed growth (what the index
// allocates vs the mapped ELF pages it touched) — one JSON line, so two builds can be compared
// side by side in one run.
// Usage: gw_symbolize_bench --pid PID [--stacks N] [--pool N] [--depth N] [--lib SUBSTRING]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "base/proc_status.h"
#include "symbolize/process_maps.h"
#include "symbolize/symbolizer.h"

namespace gw {
namespace {

// One "Field: N kB" number of this process's /proc status.
int64_t SelfStatusKb(std::string_view field) { return ReadProcStatusKb("/proc", getpid(), field); }

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int Usage() {
  std::fprintf(stderr,
               "usage: gw_symbolize_bench --pid PID [--stacks N] [--pool N] [--depth N] "
               "[--lib SUBSTRING]\n");
  return 2;
}

int Main(int argc, char** argv) {
  int32_t pid = 0;
  int64_t stacks = 20000;
  int64_t pool = 4000;
  int64_t depth = 32;
  std::string lib;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) return Usage();
    if (a == "--pid") {
      pid = std::atoi(argv[++i]);
    } else if (a == "--stacks") {
      stacks = std::atoll(argv[++i]);
    } else if (a == "--pool") {
      pool = std::atoll(argv[++i]);
    } else if (a == "--depth") {
      depth = std::atoll(argv[++i]);
    } else if (a == "--lib") {
      lib = argv[++i];
    } else {
      return Usage();
    }
  }
  if (pid <= 0 || stacks <= 0 || pool <= 0 || depth <= 0) return Usage();
  StatusOr<ProcessMaps> maps = ProcessMaps::Read(pid);
  if (!maps.ok()) {
    std::fprintf(stderr, "gw_symbolize_bench: %s\n", maps.status().message().c_str());
    return 1;
  }
  // Code ranges of file-backed executable mappings, weighted by size (big libraries dominate,
  // as they do in real stacks through libtorch).
  std::vector<const MappedRegion*> code;
  uint64_t total = 0;
  for (const MappedRegion& r : maps->regions()) {
    if (!r.executable || r.path.empty() || r.path[0] == '[') continue;
    if (!lib.empty() && r.path.find(lib) == std::string::npos) continue;
    code.push_back(&r);
    total += r.end - r.start;
  }
  if (code.empty()) {
    std::fprintf(stderr, "gw_symbolize_bench: no executable file mappings in pid %d\n", pid);
    return 1;
  }
  std::mt19937_64 rng(1);
  std::vector<uint64_t> addresses;
  for (int64_t i = 0; i < pool; ++i) {
    uint64_t at = rng() % total;
    for (const MappedRegion* r : code) {
      if (at < r->end - r->start) {
        addresses.push_back(r->start + at);
        break;
      }
      at -= r->end - r->start;
    }
  }
  int64_t rss0 = SelfStatusKb("VmHWM");
  int64_t anon0 = SelfStatusKb("RssAnon");
  int64_t file0 = SelfStatusKb("RssFile");
  Symbolizer symbolizer;
  (void)symbolizer.SnapshotProcess(pid);
  int64_t named = 0;
  int64_t frames = 0;
  auto stack_of = [&] {
    RawStack s;
    s.pid = pid;
    for (int64_t d = 0; d < depth; ++d) s.native.push_back(addresses[rng() % addresses.size()]);
    return s;
  };
  auto run = [&](const RawStack& s) {
    for (const Frame& f : symbolizer.Symbolize(s)) {
      ++frames;
      named += f.function.empty() ? 0 : 1;
    }
  };
  auto t0 = std::chrono::steady_clock::now();
  run(stack_of());
  auto t1 = std::chrono::steady_clock::now();
  for (int64_t i = 1; i < stacks; ++i) run(stack_of());
  auto t2 = std::chrono::steady_clock::now();
  double steady_us = stacks > 1 ? 1e6 * Seconds(t2 - t1) / static_cast<double>(stacks - 1) : 0;
  std::printf(
      "{\"files\": %zu, \"code_mb\": %.1f, \"pool\": %lld, \"depth\": %lld, \"stacks\": %lld, "
      "\"first_stack_s\": %.3f, \"steady_us_per_stack\": %.2f, \"named_frames_pct\": %.1f, "
      "\"peak_rss_growth_mb\": %.1f, \"anon_rss_growth_mb\": %.1f, \"file_rss_growth_mb\": %.1f}\n",
      code.size(), static_cast<double>(total) / (1 << 20), static_cast<long long>(pool),
      static_cast<long long>(depth), static_cast<long long>(stacks), Seconds(t1 - t0), steady_us,
      frames ? 100.0 * static_cast<double>(named) / static_cast<double>(frames) : 0.0,
      static_cast<double>(SelfStatusKb("VmHWM") - rss0) / 1024.0,
      static_cast<double>(SelfStatusKb("RssAnon") - anon0) / 1024.0,
      static_cast<double>(SelfStatusKb("RssFile") - file0) / 1024.0);
  return 0;
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) { return gw::Main(argc, argv); }
