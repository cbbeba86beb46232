// gw_nvml_calls: what each NVML call the GPU sampler makes costs, one by one (issue 15).
//
// Loads NVML the way `gpuwhy trace` does (NvmlLibrary: dlopen, nvmlInit), then calls each entry
// point the sampler uses --calls times on GPU 0 and prints, per call, the calling thread's CPU
// time (CLOCK_THREAD_CPUTIME_ID) and the wall time, mean per call. The GPM metrics row is a
// sample get plus the metrics computation, as the sampler makes them each round. Calls are spaced --gap-us
// apart, as a sampler's are. The whole process's CPU (getrusage) is printed too: NVML may do
// work on threads of its own.
//
// Usage: gw_nvml_calls [--lib PATH] [--calls N] [--gap-us US]
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "sources/nvml/nvml_library.h"

namespace {

int64_t Ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

int64_t ProcessCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return (static_cast<int64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000 +
          ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) *
         1000;
}

}  // namespace

int main(int argc, char** argv) {
  std::string lib;
  int calls = 100;
  int gap_us = 1000;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--lib" && i + 1 < argc) {
      lib = argv[++i];
    } else if (a == "--calls" && i + 1 < argc) {
      calls = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--gap-us" && i + 1 < argc) {
      gap_us = std::max(0, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gw_nvml_calls [--lib PATH] [--calls N] [--gap-us US]\n");
      return 2;
    }
  }
  auto loaded = gw::NvmlLibrary::Load(lib);
  if (!loaded.ok()) {
    std::fprintf(stderr, "gw_nvml_calls: %s\n", loaded.status().message().c_str());
    return 1;
  }
  gw::NvmlLibrary& n = **loaded;
  nvmlDevice_t dev = nullptr;
  if (n.device_get_handle_by_index(0, &dev) != NVML_SUCCESS) {
    std::fprintf(stderr, "gw_nvml_calls: no GPU 0\n");
    return 1;
  }
  struct Case {
    const char* name;
    std::function<nvmlReturn_t()> call;
  };
  std::vector<Case> cases;
  if (n.device_get_utilization_rates) {
    cases.push_back({"nvmlDeviceGetUtilizationRates", [&] {
                       nvmlUtilization_t u{};
                       return n.device_get_utilization_rates(dev, &u);
                     }});
  }
  if (n.device_get_clock_info) {
    cases.push_back({"nvmlDeviceGetClockInfo(SM)", [&] {
                       unsigned int mhz = 0;
                       return n.device_get_clock_info(dev, NVML_CLOCK_SM, &mhz);
                     }});
  }
  if (n.device_get_power_usage) {
    cases.push_back({"nvmlDeviceGetPowerUsage", [&] {
                       unsigned int mw = 0;
                       return n.device_get_power_usage(dev, &mw);
                     }});
  }
  if (n.device_get_throttle_reasons) {
    cases.push_back({"nvmlDeviceGetCurrentClocks*Reasons", [&] {
                       unsigned long long r = 0;
                       return n.device_get_throttle_reasons(dev, &r);
                     }});
  }
  if (n.device_get_memory_info) {
    cases.push_back({"nvmlDeviceGetMemoryInfo", [&] {
                       nvmlMemory_t m{};
                       return n.device_get_memory_info(dev, &m);
                     }});
  }
  if (n.device_get_process_utilization) {
    cases.push_back({"nvmlDeviceGetProcessUtilization", [&] {
                       unsigned int count = 0;
                       return n.device_get_process_utilization(dev, nullptr, &count, 0);
                     }});
  }
  nvmlGpmSample_t sample = nullptr, older = nullptr;
  bool gpm = false;
  if (n.HasGpm()) {
    nvmlGpmSupport_t support{};
    support.version = GW_NVML_GPM_SUPPORT_VERSION;
    gpm = n.gpm_query_device_support(dev, &support) == NVML_SUCCESS &&
          support.isSupportedDevice != 0 && n.gpm_sample_alloc(&sample) == NVML_SUCCESS &&
          n.gpm_sample_alloc(&older) == NVML_SUCCESS;
  }
  static nvmlGpmMetricsGet_t get;  // ~13 KiB
  if (gpm) {
    cases.push_back({"nvmlGpmSampleGet", [&] { return n.gpm_sample_get(dev, sample); }});
    // The sampler's metrics call: 4 metrics from the previous and the newest sample.
    cases.push_back({"nvmlGpmMetricsGet (4 metrics)", [&] {
                       std::swap(sample, older);
                       nvmlReturn_t rc = n.gpm_sample_get(dev, sample);
                       if (rc != NVML_SUCCESS) return rc;
                       std::memset(&get, 0, sizeof get);
                       get.version = GW_NVML_GPM_METRICS_GET_VERSION;
                       get.numMetrics = 4;
                       get.sample1 = older;
                       get.sample2 = sample;
                       get.metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
                       get.metrics[1].metricId = NVML_GPM_METRIC_SM_OCCUPANCY;
                       get.metrics[2].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
                       get.metrics[3].metricId = NVML_GPM_METRIC_DRAM_BW_UTIL;
                       return n.gpm_metrics_get(&get);
                     }});
    n.gpm_sample_get(dev, older);
  }
  std::printf("| call | calls | ok | thread CPU µs/call | wall µs/call | process CPU µs/call |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Case& c : cases) {
    int ok = 0;
    int64_t cpu = 0, wall = 0;
    int64_t p0 = ProcessCpuNs();
    for (int i = 0; i < calls; ++i) {
      int64_t c0 = Ns(CLOCK_THREAD_CPUTIME_ID), w0 = Ns(CLOCK_MONOTONIC);
      ok += c.call() == NVML_SUCCESS ? 1 : 0;
      cpu += Ns(CLOCK_THREAD_CPUTIME_ID) - c0;
      wall += Ns(CLOCK_MONOTONIC) - w0;
      if (gap_us > 0) usleep(static_cast<useconds_t>(gap_us));
    }
    int64_t pcpu = ProcessCpuNs() - p0;
    std::printf("| %s | %d | %d | %.1f | %.1f | %.1f |\n", c.name, calls, ok,
                static_cast<double>(cpu) / calls / 1e3, static_cast<double>(wall) / calls / 1e3,
                static_cast<double>(pcpu) / calls / 1e3);
  }
  if (sample) n.gpm_sample_free(sample);
  if (older) n.gpm_sample_free(older);
  return 0;
}
