// The brief's Step 3 over fixed buckets of a window, for charts (gpuwhy report): context
// switches, runtime sync latency, CUDA calls and, where NVML was sampled, GPU activity.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "store/reader.h"
#include "store/window.h"

namespace gw {

struct ActivityBucket {
  int64_t begin_ns = 0;  // session ns; the bucket is [begin_ns, begin_ns + bucket_ns)
  int64_t switches = 0;  // sched_switch rows (every recorded process)
  int64_t syncs = 0;     // runtime syncs (cudaStreamSync, cudaDeviceSync, cudaEventSync)
  double sync_avg_ns = 0;
  int64_t sync_max_ns = 0;
  // every CUDA call (op_seconds), launches included unless they were counted one second in N
  // (sessions.launch_duty > 1)
  int64_t cuda_calls = 0;
  double gpu_active_pct = -1;  // mean SM active (GPM), else NVML utilization; -1 = no samples
};

// Every bucket of the window, empty ones included, oldest first. `pid` > 0 narrows the CUDA
// rows to that process (switches stay machine-wide, as in the brief); `gpu` ≥ 0 is the GPU
// whose NVML samples fill gpu_active_pct (< 0: none).
StatusOr<std::vector<ActivityBucket>> ReadActivityTimeline(StoreReader& reader,
                                                           const SessionWindow& window,
                                                           int64_t bucket_ns, int32_t pid,
                                                           int32_t gpu);

}  // namespace gw
