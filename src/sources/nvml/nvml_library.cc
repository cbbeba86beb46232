#include "sources/nvml/nvml_library.h"

#include <dlfcn.h>
#include <link.h>

namespace gw {

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
}

}  // namespace

StatusOr<std::unique_ptr<NvmlLibrary>> NvmlLibrary::Load(const std::string& path) {
  const std::string name = path.empty() ? std::string(kNvmlSoname) : path;
  std::unique_ptr<NvmlLibrary> lib(new NvmlLibrary());
  dlerror();
  lib->handle_ = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* why = dlerror();
    return NotFound("load NVML " + name + ": " + (why ? why : "not found") +
                    (path.empty() ? " — hint: no NVIDIA driver here, or its library is outside "
                                    "the loader's path; pass --nvml-lib PATH"
                                  : ""));
  }
  lib->path_ = name;
  if (link_map* map = nullptr; dlinfo(lib->handle_, RTLD_DI_LINKMAP, &map) == 0 && map &&
                               map->l_name && *map->l_name) {
    lib->path_ = map->l_name;
  }
  nvmlInit_v2_fn init = nullptr;
  void* h = lib->handle_;
  Resolve(h, "nvmlInit_v2", &init);
  Resolve(h, "nvmlShutdown", &lib->shutdown_);
  Resolve(h, "nvmlErrorString", &lib->error_string);
  Resolve(h, "nvmlDeviceGetCount_v2", &lib->device_get_count);
  Resolve(h, "nvmlDeviceGetHandleByIndex_v2", &lib->device_get_handle_by_index);
  Resolve(h, "nvmlDeviceGetName", &lib->device_get_name);
  Resolve(h, "nvmlDeviceGetUtilizationRates", &lib->device_get_utilization_rates);
  Resolve(h, "nvmlDeviceGetClockInfo", &lib->device_get_clock_info);
  Resolve(h, "nvmlDeviceGetPowerUsage", &lib->device_get_power_usage);
  Resolve(h, "nvmlDeviceGetCurrentClocksEventReasons", &lib->device_get_throttle_reasons);
  if (lib->device_get_throttle_reasons == nullptr) {
    Resolve(h, "nvmlDeviceGetCurrentClocksThrottleReasons", &lib->device_get_throttle_reasons);
  }
  Resolve(h, "nvmlDeviceGetMemoryInfo", &lib->device_get_memory_info);
  Resolve(h, "nvmlDeviceGetProcessUtilization", &lib->device_get_process_utilization);
  Resolve(h, "nvmlGpmQueryDeviceSupport", &lib->gpm_query_device_support);
  Resolve(h, "nvmlGpmSampleAlloc", &lib->gpm_sample_alloc);
  Resolve(h, "nvmlGpmSampleFree", &lib->gpm_sample_free);
  Resolve(h, "nvmlGpmSampleGet", &lib->gpm_sample_get);
  Resolve(h, "nvmlGpmMetricsGet", &lib->gpm_metrics_get);
  if (init == nullptr || lib->shutdown_ == nullptr || lib->device_get_count == nullptr ||
      lib->device_get_handle_by_index == nullptr) {
    return FailedPrecondition("load NVML " + lib->path_ +
                              ": nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2 or "
                              "nvmlDeviceGetHandleByIndex_v2 missing (not an NVML library?)");
  }
  if (nvmlReturn_t rc = init(); rc != NVML_SUCCESS) {
    return FailedPrecondition("NVML in " + lib->path_ + ": " + lib->Error("nvmlInit_v2", rc) +
                              (rc == NVML_ERROR_DRIVER_NOT_LOADED
                                   ? " — hint: the NVIDIA kernel driver is not loaded"
                                   : ""));
  }
  lib->initialized_ = true;
  return lib;
}

// nvmlShutdown, but no dlclose: NVML keeps state (threads, caches) that is not built to be
// unmapped, and unmapping it would leave that state dangling (LeakSanitizer reports it).
// dlopen of the same file again reuses the resident copy.
NvmlLibrary::~NvmlLibrary() {
  if (initialized_ && shutdown_ != nullptr) (void)shutdown_();
}

std::string NvmlLibrary::Error(const char* call, nvmlReturn_t rc) const {
  const char* text = error_string ? error_string(rc) : nullptr;
  return std::string(call) + ": " + (text ? text : "error") + " (" + std::to_string(rc) + ")";
}

}  // namespace gw
