// NvmlLibrary: libnvidia-ml.so.1 loaded at run time (dlopen), its entry points resolved once,
// nvmlInit_v2 called. Entry points gpuwhy can do without (GPM, process utilization, power…)
// may be missing: their pointers stay null and the sampler leaves those columns NULL.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "sources/nvml/nvml_api.h"

namespace gw {

// The soname the driver installs; `--nvml-lib PATH` (tests, unusual installs) overrides it.
inline constexpr const char* kNvmlSoname = "libnvidia-ml.so.1";

class NvmlLibrary {
 public:
  // Loads `path` ("" = kNvmlSoname through the dynamic loader's search) and initializes NVML.
  static StatusOr<std::unique_ptr<NvmlLibrary>> Load(const std::string& path);
  ~NvmlLibrary();  // nvmlShutdown (the library stays mapped)
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  // "nvmlDeviceGetName: Not Supported (3)".
  std::string Error(const char* call, nvmlReturn_t rc) const;
  const std::string& path() const { return path_; }  // what was loaded (dlinfo's l_name)

  // Required.
  nvmlDeviceGetCount_v2_fn device_get_count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn device_get_handle_by_index = nullptr;
  // Optional (null when the library does not export them).
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetName_fn device_get_name = nullptr;
  nvmlDeviceGetUtilizationRates_fn device_get_utilization_rates = nullptr;
  nvmlDeviceGetClockInfo_fn device_get_clock_info = nullptr;
  nvmlDeviceGetPowerUsage_fn device_get_power_usage = nullptr;
  // nvmlDeviceGetCurrentClocksEventReasons where exported (R535+), else the older
  // nvmlDeviceGetCurrentClocksThrottleReasons: same signature and bits.
  nvmlDeviceGetCurrentClocksThrottleReasons_fn device_get_throttle_reasons = nullptr;
  nvmlDeviceGetMemoryInfo_fn device_get_memory_info = nullptr;
  nvmlDeviceGetProcessUtilization_fn device_get_process_utilization = nullptr;
  nvmlGpmQueryDeviceSupport_fn gpm_query_device_support = nullptr;
  nvmlGpmSampleAlloc_fn gpm_sample_alloc = nullptr;
  nvmlGpmSampleFree_fn gpm_sample_free = nullptr;
  nvmlGpmSampleGet_fn gpm_sample_get = nullptr;
  nvmlGpmMetricsGet_fn gpm_metrics_get = nullptr;

  bool HasGpm() const {
    return gpm_query_device_support && gpm_sample_alloc && gpm_sample_free && gpm_sample_get &&
           gpm_metrics_get;
  }

 private:
  NvmlLibrary() = default;
  void* handle_ = nullptr;
  nvmlShutdown_fn shutdown_ = nullptr;
  bool initialized_ = false;
  std::string path_;
};

}  // namespace gw
