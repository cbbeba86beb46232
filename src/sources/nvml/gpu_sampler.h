// GpuSampler: GPU truth from NVML beside the host evidence. Every GPU NVML reports is sampled
// on one thread of its own at a fixed interval (trace --gpu-interval, 200 ms by default):
// utilization (what nvidia-smi shows), memory utilization, SM clock, power, throttle reasons,
// memory used, per-process utilization, and — where GPM is supported (Hopper and newer) — SM
// activity, SM occupancy, tensor activity and DRAM bandwidth over the interval since the
// previous sample. No BPF: NVML is a library call, loaded with dlopen (nvml_library.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "sources/nvml/nvml_library.h"
#include "store/event.h"

namespace gw {

// 5 Hz. A round costs 2.2-3.1 ms of CPU on an H200 host (the GPM metrics computation alone
// 0.7 ms): at 10 Hz the sampler was about half of the agent's CPU (BENCHMARKS.md item 5).
// NVML's own utilization counter covers 1/6 s to 1 s, so 10 Hz read most values twice.
inline constexpr int64_t kDefaultGpuIntervalNs = 200'000'000;

struct GpuSamplerOptions {
  std::string library;                  // "" = libnvidia-ml.so.1 from the loader's path
  int64_t interval_ns = kDefaultGpuIntervalNs;
};

// What `gpuwhy check` reports, and what a sampler found at start.
struct NvmlProbe {
  bool present = false;       // the library loaded and nvmlInit_v2 succeeded
  std::string library;        // the file loaded
  std::string error;          // why not, when !present
  std::vector<GpuDevice> devices;
  bool gpm_api = false;       // the library exports the GPM entry points
};

class GpuSampler {
 public:
  using Sink = std::function<void(const std::vector<GpuSample>&,
                                  const std::vector<GpuProcessSample>&)>;
  // Loads NVML and enumerates the GPUs; an error when there is no NVML or no GPU.
  // `clock_ns` returns session time; `wall_us` CLOCK_REALTIME µs (process samples' clock).
  static StatusOr<std::unique_ptr<GpuSampler>> Create(const GpuSamplerOptions& options,
                                                      std::function<int64_t()> clock_ns);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  const std::vector<GpuDevice>& devices() const { return devices_; }
  const std::string& library_path() const { return nvml_->path(); }

  // One round over every GPU, stamped `ts_ns`. GPM values need a previous round (the first
  // round has none). Called by the thread; public for tests.
  void SampleOnce(int64_t ts_ns, std::vector<GpuSample>* samples,
                  std::vector<GpuProcessSample>* processes);

  void Start(Sink sink);  // the sampling thread
  void Stop();            // joins it; idempotent
  // After Stop: rounds taken and the sampling thread's CPU time (NVML's calls and the sink),
  // what the sampler cost this process.
  int64_t rounds() const { return rounds_; }
  int64_t thread_cpu_ns() const { return thread_cpu_ns_; }

 private:
  struct Device {
    int32_t index = 0;
    nvmlDevice_t handle = nullptr;
    bool gpm = false;
    nvmlGpmSample_t gpm_prev = nullptr;
    nvmlGpmSample_t gpm_cur = nullptr;
    bool have_prev = false;
    unsigned long long last_seen_us = 0;  // process utilization cursor
    std::vector<nvmlProcessUtilizationSample_t> proc_buf;
  };
  GpuSampler(std::unique_ptr<NvmlLibrary> nvml, GpuSamplerOptions options,
             std::function<int64_t()> clock_ns);
  void Run();
  void SampleDevice(Device& d, int64_t ts_ns, GpuSample* out,
                    std::vector<GpuProcessSample>* processes);

  std::unique_ptr<NvmlLibrary> nvml_;
  GpuSamplerOptions options_;
  std::function<int64_t()> clock_ns_;
  std::vector<Device> dev_;
  std::vector<GpuDevice> devices_;
  Sink sink_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
  std::atomic<int64_t> rounds_{0};
  std::atomic<int64_t> thread_cpu_ns_{0};
};

// Loads NVML and lists its GPUs with GPM support, for `gpuwhy check`.
NvmlProbe ProbeNvml(const std::string& library);

}  // namespace gw
