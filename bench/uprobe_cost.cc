// gw_uprobe_cost: per-call cost of gpuwhy's CUDA probes (issue 7, item 1), measured side by
// side in one process against the bare mechanism on the same function:
//   none        the call with nothing attached
//   bare entry  a do-nothing uprobe (the floor for entry-only launch probes)
//   bare pair   a do-nothing uprobe + uretprobe (the floor for timed calls)
//   gpuwhy      the CUDA source attached with multi-uprobe links (the default), its drain
//               thread polling every 1 ms into a sink that drops events
//   gpuwhy-perf the same with one perf-event uprobe per function (the fallback)
// Every configuration runs once per round, rounds alternate, and medians are reported with
// the spread (min–max). Needs root.
//
// Usage: gw_uprobe_cost [--runtime LIB] [--driver LIB] [--calls N] [--rounds R]
//   Defaults: the do-nothing target libraries built next to this binary. To measure the
//   simulated runtime: --runtime <build>/sim/lib/libcudart.so.13 --driver <build>/sim/lib/libcuda.so.1
#include <bpf/libbpf.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bare_probes.skel.h"
#include "discover/elf_symbols.h"
#include "sources/cuda/cuda_source.h"
#include "sources/stacks/stack_registry.h"

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

class NullSink : public gw::EventSink {
 public:
  void OnEvents(const gw::Event*, size_t count) override { events += count; }
  void OnProcess(const gw::ProcessInfo&) override {}
  void OnOpCounts(const std::vector<gw::OpCount>& counts) override {
    for (const auto& c : counts) counted += c.count;
  }
  int64_t InternString(std::string_view) override { return 1; }
  std::atomic<int64_t> events{0};
  std::atomic<int64_t> counted{0};
};

struct dim3 {
  unsigned x, y, z;
};

struct Case {
  std::string cls;        // probe class
  std::string library;    // path
  std::string symbol;     // probed function (the first of `symbols`)
  std::vector<std::string> symbols;  // every function the loop calls
  std::function<void()> call;
};

// gpuwhy-stack: as gpuwhy, with trace --stack's StackRegistry (stack keys on every full row
// and sampled launch). gpuwhy-perf: perf-event uprobes instead of multi-uprobe links.
enum Config { kNone, kBareEntry, kBarePair, kGpuwhy, kGpuwhyStack, kGpuwhyPerf, kConfigs };
const char* const kConfigNames[] = {"none",   "bare entry",   "bare pair",
                                    "gpuwhy", "gpuwhy-stack", "gpuwhy-perf"};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double TimeLoop(const Case& c, int calls) {
  int64_t start = NowNs();
  for (int i = 0; i < calls; ++i) c.call();
  return static_cast<double>(NowNs() - start) / calls;
}

}  // namespace

int main(int argc, char** argv) {
  std::string runtime = std::string(GW_PROBE_TARGET_DIR) + "/libcudart.so.13";
  std::string driver = std::string(GW_PROBE_TARGET_DIR) + "/libcuda.so.1";
  int calls = 200000;
  int rounds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--runtime") runtime = argv[i + 1];
    else if (a == "--driver") driver = argv[i + 1];
    else if (a == "--calls") calls = std::atoi(argv[i + 1]);
    else if (a == "--rounds") rounds = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: gw_uprobe_cost [--runtime LIB] [--driver LIB] [--calls N] "
                           "[--rounds R]\n");
      return 2;
    }
  }
  if (geteuid() != 0) {
    std::fprintf(stderr, "gw_uprobe_cost: needs root (BPF)\n");
    return 1;
  }
  libbpf_set_print(nullptr);
  void* drv = dlopen(driver.c_str(), RTLD_NOW | RTLD_GLOBAL);
  void* rt = dlopen(runtime.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (drv == nullptr || rt == nullptr) {
    std::fprintf(stderr, "gw_uprobe_cost: dlopen: %s\n", dlerror());
    return 1;
  }
  using LaunchFn = int (*)(const void*, dim3, dim3, void**, size_t, void*);
  using SyncFn = int (*)(void*);
  using MemcpyFn = int (*)(void*, const void*, size_t, int);
  using MallocFn = int (*)(void**, size_t);
  using FreeFn = int (*)(void*);
  using CuLaunchFn = int (*)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void*, void**, void**);
  using CuHtoDFn = int (*)(uint64_t, const void*, size_t);
  auto launch = reinterpret_cast<LaunchFn>(dlsym(rt, "cudaLaunchKernel"));
  auto sync = reinterpret_cast<SyncFn>(dlsym(rt, "cudaStreamSynchronize"));
  auto copy = reinterpret_cast<MemcpyFn>(dlsym(rt, "cudaMemcpy"));
  auto alloc = reinterpret_cast<MallocFn>(dlsym(rt, "cudaMalloc"));
  auto release = reinterpret_cast<FreeFn>(dlsym(rt, "cudaFree"));
  auto cu_launch = reinterpret_cast<CuLaunchFn>(dlsym(drv, "cuLaunchKernel"));
  auto cu_sync = reinterpret_cast<SyncFn>(dlsym(drv, "cuStreamSynchronize"));
  auto cu_htod = reinterpret_cast<CuHtoDFn>(dlsym(drv, "cuMemcpyHtoD_v2"));
  if (!launch || !sync || !copy || !alloc || !release || !cu_launch || !cu_sync || !cu_htod) {
    std::fprintf(stderr, "gw_uprobe_cost: a benchmarked symbol is missing\n");
    return 1;
  }
  void* device = nullptr;
  alloc(&device, 1 << 20);
  static char host[64];
  static int kernel_token;
  std::vector<Case> cases = {
      {"launch (runtime)", runtime, "cudaLaunchKernel", {"cudaLaunchKernel"},
       [&] { launch(&kernel_token, {1, 1, 1}, {32, 1, 1}, nullptr, 0, nullptr); }},
      {"launch (driver)", driver, "cuLaunchKernel", {"cuLaunchKernel"},
       [&] { cu_launch(&kernel_token, 1, 1, 1, 32, 1, 1, 0, nullptr, nullptr, nullptr); }},
      {"sync (runtime)", runtime, "cudaStreamSynchronize", {"cudaStreamSynchronize"},
       [&] { sync(nullptr); }},
      {"sync (driver)", driver, "cuStreamSynchronize", {"cuStreamSynchronize"},
       [&] { cu_sync(nullptr); }},
      {"memcpy (runtime)", runtime, "cudaMemcpy", {"cudaMemcpy"},
       [&] { copy(device, host, sizeof host, 1); }},
      {"memcpy (driver)", driver, "cuMemcpyHtoD_v2", {"cuMemcpyHtoD_v2"},
       [&] { cu_htod(reinterpret_cast<uint64_t>(device), host, sizeof host); }},
      {"malloc+free (runtime, per pair)", runtime, "cudaMalloc", {"cudaMalloc", "cudaFree"},
       [&] {
         void* p = nullptr;
         alloc(&p, 256);
         release(p);
       }},
  };

  // The caller on CPU 0; gpuwhy's drain thread wherever the scheduler puts it.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(0, &cpus);
  pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);

  bare_probes_bpf* bare = bare_probes_bpf__open_and_load();
  if (bare == nullptr) {
    std::fprintf(stderr, "gw_uprobe_cost: load bare probes failed\n");
    return 1;
  }
  // results[case][config] = ns per call, one per round
  std::vector<std::vector<std::vector<double>>> results(
      cases.size(), std::vector<std::vector<double>>(kConfigs));
  for (const Case& c : cases) TimeLoop(c, calls / 10);  // warm up

  for (int round = 0; round < rounds; ++round) {
    for (int config = 0; config < kConfigs; ++config) {
      if (config == kGpuwhy || config == kGpuwhyStack || config == kGpuwhyPerf) {
        gw::CudaSourceOptions options;
        options.discover = false;
        options.libraries = {runtime, driver};
        options.multi_uprobe = config != kGpuwhyPerf;
        std::unique_ptr<gw::StackRegistry> stacks;
        if (config == kGpuwhyStack) {
          auto created = gw::StackRegistry::Create({});
          if (!created.ok()) {
            std::fprintf(stderr, "gw_uprobe_cost: %s\n", created.status().message().c_str());
            return 1;
          }
          stacks = std::move(created).value();
          if (!stacks->Watch(getpid()).ok()) return 1;
        }
        auto source = gw::CudaSource::Create(options);
        if (!source.ok()) {
          std::fprintf(stderr, "gw_uprobe_cost: %s\n", source.status().message().c_str());
          return 1;
        }
        NullSink sink;
        gw::SourceContext context;
        context.clock.mono_start_ns = NowNs();
        context.sink = &sink;
        context.stack_registry = stacks.get();
        gw::Status started = (*source)->Start(context);
        if (!started.ok()) {
          std::fprintf(stderr, "gw_uprobe_cost: %s\n", started.message().c_str());
          return 1;
        }
        std::atomic<bool> stop{false};
        std::thread drain([&] {
          while (!stop.load()) {
            (*source)->Poll();
            if (stacks) stacks->Drain();
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
          }
        });
        for (size_t i = 0; i < cases.size(); ++i) {
          results[i][config].push_back(TimeLoop(cases[i], calls));
        }
        stop = true;
        drain.join();
        (*source)->Stop();
        (*source)->Poll();
        auto drops = (*source)->Drops();
        if (drops["cuda_bpf_reserve"] != 0) {
          std::fprintf(stderr, "note: %lld reserve drops\n",
                       static_cast<long long>(drops["cuda_bpf_reserve"]));
        }
        continue;
      }
      for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        std::vector<bpf_link*> links;
        if (config != kNone) {
          auto table = gw::ElfSymbolTable::Load(c.library);
          if (!table.ok()) return 1;
          for (const std::string& name : c.symbols) {
            const gw::ElfSymbol* sym = table->Find(name);
            if (sym == nullptr) return 1;
            size_t offset = gw::ElfSymbolTable::ProbeOffset(*sym);
            LIBBPF_OPTS(bpf_uprobe_opts, ret_opts, .retprobe = true);
            if (config == kBarePair) {
              links.push_back(bpf_program__attach_uprobe_opts(bare->progs.gw_bare_return, -1,
                                                              c.library.c_str(), offset,
                                                              &ret_opts));
            }
            LIBBPF_OPTS(bpf_uprobe_opts, opts);
            links.push_back(bpf_program__attach_uprobe_opts(bare->progs.gw_bare_entry, -1,
                                                            c.library.c_str(), offset, &opts));
          }
        }
        results[i][config].push_back(TimeLoop(c, calls));
        for (bpf_link* link : links) bpf_link__destroy(link);
      }
    }
    std::fprintf(stderr, "round %d/%d done\n", round + 1, rounds);
  }

  std::printf("gw_uprobe_cost: %d calls x %d rounds, ns per call, median (min-max)\n", calls,
              rounds);
  std::printf("runtime %s\ndriver  %s\n\n", runtime.c_str(), driver.c_str());
  std::printf("%-32s", "probe class (function)");
  for (int config = 0; config < kConfigs; ++config) std::printf(" %20s", kConfigNames[config]);
  std::printf(" %14s %14s %14s\n", "gpuwhy/pair", "over/pair-over", "stack/pair");
  for (size_t i = 0; i < cases.size(); ++i) {
    std::printf("%-32s", (cases[i].cls + " " + cases[i].symbol).substr(0, 32).c_str());
    double med[kConfigs];
    for (int config = 0; config < kConfigs; ++config) {
      const auto& v = results[i][config];
      med[config] = Median(v);
      char cell[64];
      std::snprintf(cell, sizeof cell, "%.0f (%.0f-%.0f)", med[config],
                    *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
      std::printf(" %20s", cell);
    }
    // Ratios against the bare pair: total call cost, and overhead above the untraced call.
    std::printf(" %14.2f %14.2f %14.2f\n", med[kGpuwhy] / med[kBarePair],
                (med[kGpuwhy] - med[kNone]) / (med[kBarePair] - med[kNone]),
                med[kGpuwhyStack] / med[kBarePair]);
  }
  bare_probes_bpf__destroy(bare);
  return 0;
}
