/* The simulated device's busy time, published for the simulated NVML (sim/nvml).
 *
 * Each process that uses the sim driver maps one small file, <dir>/gwsim-gpu.<pid>
 * (<dir> = $GWSIM_GPU_STATE_DIR, default /dev/shm), mode 0644, and keeps in it, per device, the
 * union of the device-time intervals its kernels occupied (ns, CLOCK_MONOTONIC based) and the
 * bytes of device memory allocated. The sim NVML reads every such file of a live process: it
 * holds nothing but counters, and the reader checks magic, version and size before trusting
 * it. The file is removed at exit by the process that made it. */
#ifndef GWSIM_GPU_STATE_H_
#define GWSIM_GPU_STATE_H_

#include <stdint.h>

#define GWSIM_GPU_STATE_MAGIC 0x5550474d49535747ull /* "GWSIMGPU" */
#define GWSIM_GPU_STATE_VERSION 1u
#define GWSIM_GPU_STATE_MAX_DEVICES 8
#define GWSIM_GPU_STATE_PREFIX "gwsim-gpu."

struct GwsimGpuDeviceState {
  uint64_t busy_ns;          /* kernel time, union over streams (written with atomic stores) */
  uint64_t covered_until_ns; /* end of the newest interval counted (CLOCK_MONOTONIC ns) */
  uint64_t used_bytes;       /* device memory allocated */
  uint64_t kernels;          /* kernels completed */
};

struct GwsimGpuState {
  uint64_t magic;
  uint32_t version;
  uint32_t device_count;
  int32_t pid;
  uint32_t reserved;
  struct GwsimGpuDeviceState dev[GWSIM_GPU_STATE_MAX_DEVICES];
};

#endif /* GWSIM_GPU_STATE_H_ */
