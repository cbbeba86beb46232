// Per-thread rollups kept at ingest (`thread_rollups`, schema 7): what explaining a long
// window needs of each thread without its raw rows — off-CPU time by cause, switch counts,
// waker classes, CUDA calls and sync time — per 10 s bucket. Writer-thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>

#include "base/status.h"
#include "store/event.h"

namespace gw {

// Bucket length of thread_rollups.sec (a multiple of it: the bucket's first second).
inline constexpr int64_t kThreadRollupSeconds = 10;

struct ThreadRollupKey {
  int64_t sec = 0;  // bucket start, whole seconds since session start
  int32_t pid = 0;
  int32_t tid = 0;
  bool operator==(const ThreadRollupKey& o) const {
    return sec == o.sec && pid == o.pid && tid == o.tid;
  }
};

// One bucket of one thread. Intervals and calls count in the bucket they start in.
struct ThreadRollup {
  int64_t switches = 0;    // sched_switch rows (off-CPU intervals)
  int64_t preempted = 0;   // of them, left the CPU runnable (SwitchKind::kPreempted)
  int64_t runq_ns = 0;     // runnable, waiting for a CPU
  int64_t blocked_ns = 0;  // asleep (kBlocked), run-queue part excluded
  int64_t io_ns = 0;       // asleep in I/O wait (kBlockedIo)
  int64_t fault_ns = 0;    // asleep after a page fault (kBlockedFault)
  int64_t woken_irq = 0;   // sleeps ended from interrupt context (waker_pid 0)
  int64_t woken_same = 0;  // ... by a thread of the same process
  int64_t woken_other = 0; // ... by another process
  int64_t cuda_calls = 0;  // CUDA rows (launch rows excluded: launches are counted elsewhere)
  int64_t syncs = 0;       // CUDA sync rows
  int64_t sync_ns = 0;
};

class ThreadRollups {
 public:
  void Add(const Event& e);
  // Hands every bucket that is complete (it ends at least 2 s before the newest event seen;
  // all = every bucket) to `write` and forgets it. Stops at the first error and keeps the
  // bucket that failed.
  using WriteFn = std::function<Status(const ThreadRollupKey&, const ThreadRollup&)>;
  Status Flush(bool all, const WriteFn& write);
  bool empty() const { return buckets_.empty(); }

 private:
  struct KeyHash {
    size_t operator()(const ThreadRollupKey& k) const {
      uint64_t h = static_cast<uint64_t>(k.sec) * 0x9E3779B97F4A7C15ULL;
      h ^= (static_cast<uint64_t>(static_cast<uint32_t>(k.pid)) << 32 |
            static_cast<uint32_t>(k.tid)) * 0xC2B2AE3D27D4EB4FULL;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  std::unordered_map<ThreadRollupKey, ThreadRollup, KeyHash> buckets_;
  int64_t newest_sec_ = 0;
};

}  // namespace gw
