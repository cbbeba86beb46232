// gw_call_load: fires a probed CUDA call at a controlled rate, the event generator behind the
// capture-capacity and footprint benchmarks (issue 7, items 2 and 5).
//
// dlopens the simulated libcudart (and through it libcuda), then calls
// cudaStreamSynchronize(cudaStreamPerThread) on --threads threads, paced together to --rate
// calls per second (0: as fast as they can) for --seconds. Each call is a full row twice
// under gpuwhy: the runtime call and the cuStreamSynchronize it makes on the same thread. The
// per-thread stream is empty, so a call returns at once and its cost is the call plus whatever
// probes are attached. Pacing: every millisecond each thread makes the calls it is due, then
// sleeps to the next millisecond (a late thread catches up, so the mean rate holds).
//
// Prints one line:
//   gw_call_load: pid=P threads=N target_rate=R seconds=S calls=C warmup_calls=W rate=X
//   cpu_s=U
// `calls` counts the timed phase, `warmup_calls` the one call per thread before it (context
// creation); both are recorded when a tracer is attached. `cpu_s` is the process's user+system
// time over the timed phase, which includes the probes' time (uprobes run in the caller).
//
// Usage: gw_call_load --lib DIR [--rate R] [--seconds S] [--threads N]
#include <dlfcn.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

namespace {

using StreamSyncFn = int (*)(void*);
// cudaStreamPerThread: the calling thread's implicit stream (cuda_runtime_api.h).
void* const kStreamPerThread = reinterpret_cast<void*>(0x2);

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double ProcessCpuSeconds() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

void SleepUntil(int64_t deadline_ns) {
  timespec ts{static_cast<time_t>(deadline_ns / 1000000000),
              static_cast<long>(deadline_ns % 1000000000)};
  clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr);
}

void Usage() {
  std::fprintf(stderr,
               "usage: gw_call_load --lib DIR [--rate CALLS_PER_S] [--seconds S] [--threads N]\n"
               "  DIR holds the simulated libcudart.so.13; --rate 0 (default) calls as fast as "
               "possible\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib_dir;
  double rate = 0;
  double seconds = 5;
  int threads = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--lib") lib_dir = argv[i + 1];
    else if (a == "--rate") rate = std::atof(argv[i + 1]);
    else if (a == "--seconds") seconds = std::atof(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
    else {
      Usage();
      return 2;
    }
  }
  if (lib_dir.empty() || threads < 1 || seconds <= 0 || rate < 0) {
    Usage();
    return 2;
  }
  std::string path = lib_dir + "/libcudart.so.13";
  void* rt = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (rt == nullptr) {
    std::fprintf(stderr, "gw_call_load: dlopen %s: %s\n", path.c_str(), dlerror());
    return 1;
  }
  auto sync = reinterpret_cast<StreamSyncFn>(dlsym(rt, "cudaStreamSynchronize"));
  if (sync == nullptr) {
    std::fprintf(stderr, "gw_call_load: %s has no cudaStreamSynchronize\n", path.c_str());
    return 1;
  }

  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::atomic<int64_t> total_calls{0};
  int64_t start_ns = 0;
  const int64_t duration_ns = static_cast<int64_t>(seconds * 1e9);
  const double per_thread_rate = rate / threads;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      sync(kStreamPerThread);  // warm-up: context and per-thread stream creation
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      int64_t calls = 0;
      const int64_t end_ns = start_ns + duration_ns;
      if (per_thread_rate <= 0) {
        while (true) {
          for (int i = 0; i < 256; ++i) sync(kStreamPerThread);
          calls += 256;
          if (NowNs() >= end_ns) break;
        }
      } else {
        int64_t tick = start_ns;
        while (true) {
          int64_t now = NowNs();
          if (now >= end_ns) break;
          int64_t due = static_cast<int64_t>(per_thread_rate * static_cast<double>(now - start_ns) /
                                             1e9) - calls;
          // A thread that fell behind catches up in bursts, but never past the end.
          for (int64_t i = 0; i < due; ++i) {
            sync(kStreamPerThread);
            ++calls;
            if ((i & 255) == 255 && NowNs() >= end_ns) break;
          }
          tick += 1000000;
          if (tick > NowNs()) SleepUntil(tick);
        }
      }
      total_calls.fetch_add(calls);
    });
  }
  while (ready.load() < threads) std::this_thread::yield();
  double cpu_start = ProcessCpuSeconds();
  start_ns = NowNs();
  go.store(true, std::memory_order_release);
  for (auto& w : workers) w.join();
  double elapsed = static_cast<double>(NowNs() - start_ns) / 1e9;
  double cpu = ProcessCpuSeconds() - cpu_start;
  int64_t calls = total_calls.load();
  std::printf(
      "gw_call_load: pid=%d threads=%d target_rate=%.0f seconds=%.3f calls=%lld "
      "warmup_calls=%d rate=%.0f cpu_s=%.3f\n",
      getpid(), threads, rate, elapsed, static_cast<long long>(calls), threads,
      static_cast<double>(calls) / elapsed, cpu);
  return 0;
}
