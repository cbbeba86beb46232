// Our own declarations of the few NVML entry points and structs gpuwhy uses, written from
// NVIDIA's NVML API Reference (docs.nvidia.com/deploy/nvml-api). No NVIDIA header is included:
// there is no SDK at build time, and libnvidia-ml.so.1 is loaded at run time (nvml_library.h).
//
// Shared by the sampler (src/sources/nvml) and the simulated NVML (sim/nvml), which must agree
// with the real library on every layout here. Layouts are pinned by static_asserts below.
#pragma once

#include <stddef.h>
#include <stdint.h>

extern "C" {

typedef int nvmlReturn_t;  // enum nvmlReturn_enum (C enums are int-sized)
enum : int {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
  NVML_ERROR_NOT_SUPPORTED = 3,
  NVML_ERROR_NO_PERMISSION = 4,
  NVML_ERROR_NOT_FOUND = 6,
  NVML_ERROR_INSUFFICIENT_SIZE = 7,
  NVML_ERROR_DRIVER_NOT_LOADED = 9,
  NVML_ERROR_GPU_IS_LOST = 15,
  NVML_ERROR_UNKNOWN = 999,
};

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

// nvmlDeviceGetUtilizationRates: percent of the last sample period (1/6 s to 1 s by product)
// during which one or more kernels ran (gpu) / device memory was read or written (memory).
typedef struct {
  unsigned int gpu;
  unsigned int memory;
} nvmlUtilization_t;

// nvmlDeviceGetMemoryInfo (v1 struct, unversioned): bytes.
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

// nvmlClockType_t
enum : int { NVML_CLOCK_GRAPHICS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2, NVML_CLOCK_VIDEO = 3 };

// nvmlDeviceGetProcessUtilization: one sample per process; timeStamp is CPU time in µs
// (wall clock), pass the newest seen as lastSeenTimeStamp to get only newer ones.
typedef struct {
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

// GPM (Hopper and newer). nvmlGpmMetricId_t values used here:
enum : unsigned int {
  NVML_GPM_METRIC_SM_UTIL = 2,          // % of SMs busy (time-averaged over SMs)
  NVML_GPM_METRIC_SM_OCCUPANCY = 3,     // % of warps resident vs the theoretical maximum
  NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,  // % of time SMs ran any tensor instruction
  NVML_GPM_METRIC_DRAM_BW_UTIL = 10,    // % of peak DRAM bandwidth
};

typedef struct {
  unsigned int metricId;    // IN
  nvmlReturn_t nvmlReturn;  // OUT: value valid only when NVML_SUCCESS
  double value;             // OUT
  struct {
    char* shortName;
    char* longName;
    char* unit;
  } metricInfo;  // OUT: may be NULL
} nvmlGpmMetric_t;

// NVML_GPM_METRIC_MAX has grown across drivers (98 in R525, 210 later, 333 in R550+). The
// library reads and writes only metrics[0, numMetrics), so any array at least as long as the
// metrics we ask for is correct; we size it at the largest known value anyway.
inline constexpr unsigned int kGwGpmMetricSlots = 333;
#define GW_NVML_GPM_METRICS_GET_VERSION 1
typedef struct {
  unsigned int version;  // IN: GW_NVML_GPM_METRICS_GET_VERSION
  unsigned int numMetrics;
  nvmlGpmSample_t sample1;  // the older sample
  nvmlGpmSample_t sample2;  // the newer sample (≥ 100 ms later for meaningful values)
  nvmlGpmMetric_t metrics[kGwGpmMetricSlots];
} nvmlGpmMetricsGet_t;

#define GW_NVML_GPM_SUPPORT_VERSION 1
typedef struct {
  unsigned int version;            // IN: GW_NVML_GPM_SUPPORT_VERSION
  unsigned int isSupportedDevice;  // OUT
} nvmlGpmSupport_t;

#define GW_NVML_DEVICE_NAME_BUFFER_SIZE 96  // NVML_DEVICE_NAME_V2_BUFFER_SIZE

// Function pointer types of the entry points (names as exported by libnvidia-ml.so.1).
typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int, nvmlDevice_t*);
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t, char*, unsigned int);
typedef nvmlReturn_t (*nvmlDeviceGetUtilizationRates_fn)(nvmlDevice_t, nvmlUtilization_t*);
typedef nvmlReturn_t (*nvmlDeviceGetClockInfo_fn)(nvmlDevice_t, int, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetPowerUsage_fn)(nvmlDevice_t, unsigned int*);
typedef nvmlReturn_t (*nvmlDeviceGetCurrentClocksThrottleReasons_fn)(nvmlDevice_t,
                                                                     unsigned long long*);
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t, nvmlMemory_t*);
typedef nvmlReturn_t (*nvmlDeviceGetProcessUtilization_fn)(nvmlDevice_t,
                                                           nvmlProcessUtilizationSample_t*,
                                                           unsigned int*, unsigned long long);
typedef nvmlReturn_t (*nvmlGpmQueryDeviceSupport_fn)(nvmlDevice_t, nvmlGpmSupport_t*);
typedef nvmlReturn_t (*nvmlGpmSampleAlloc_fn)(nvmlGpmSample_t*);
typedef nvmlReturn_t (*nvmlGpmSampleFree_fn)(nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmSampleGet_fn)(nvmlDevice_t, nvmlGpmSample_t);
typedef nvmlReturn_t (*nvmlGpmMetricsGet_fn)(nvmlGpmMetricsGet_t*);

}  // extern "C"

// The x86-64 layouts the real library uses.
static_assert(sizeof(nvmlUtilization_t) == 8);
static_assert(sizeof(nvmlMemory_t) == 24);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8);
static_assert(offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16);
static_assert(sizeof(nvmlGpmMetric_t) == 40);
static_assert(offsetof(nvmlGpmMetric_t, value) == 8);
static_assert(offsetof(nvmlGpmMetricsGet_t, sample1) == 8);
static_assert(offsetof(nvmlGpmMetricsGet_t, metrics) == 24);
static_assert(sizeof(nvmlGpmSupport_t) == 8);
