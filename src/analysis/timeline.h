// Per-thread timelines: where one thread's time went, interval by interval, with overlaps
// between off-CPU intervals (sched_switch rows) and CUDA calls resolved by a fixed precedence
// (docs/detections.md, "Feed-time attribution"):
//   run-queue wait > page fault > blocked on I/O > memcpy > sync > blocked otherwise > running
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "analysis/report.h"
#include "analysis/window_data.h"

namespace gw {

inline constexpr size_t kFeedCauseCount = 10;
using CauseTimes = std::array<int64_t, kFeedCauseCount>;  // ns per FeedCause, by enum value

// A stretch of a thread's time with one cause. Running time is not stored (it is the rest).
struct TimelineSegment {
  int64_t start = 0;
  int64_t end = 0;
  FeedCause cause = FeedCause::kRunning;
  // Run-queue segments: the process that held the CPU (0 = unknown, kOtherHolder = a process
  // not the job's, unnamed).
  int32_t other_pid = 0;
};

// When each of the job's own threads ran, CPU by CPU, from their switch rows: a thread ran on
// CPU c from the end of one off-CPU row to the start of the next, whose row says it left c.
// It tells who really held a CPU while one of the job's threads waited for it: the off-CPU row
// names only the task that took the CPU when the thread left it, which for a thread that slept
// first is not who held the CPU once it was woken.
class CpuOccupancy {
 public:
  // rows: one thread's rows (any order); only its switch rows are read.
  void AddThread(int32_t pid, int32_t tid, const std::vector<const Event*>& rows);
  void Finish();  // call once every thread is added, before ForEachHeld
  // Calls piece(start, end, pid) for each stretch of [a, b) in which one of the job's threads
  // held `cpu`, in order.
  template <typename F>
  void ForEachHeld(int32_t cpu, int64_t a, int64_t b, F piece) const;

 private:
  struct Run {
    int64_t start;
    int64_t end;
    int32_t pid;
  };
  std::map<int32_t, std::vector<Run>> by_cpu_;  // sorted by start once finished
};

// A run-queue holder that is some other process, not one of the job's, unnamed: the job's
// threads were not on the CPU and the switch row named no one else.
inline constexpr int32_t kOtherHolder = -1;
// Run-queue time credited to the job's cgroup CPU quota (facts.cc: the cgroup was throttled).
inline constexpr int32_t kQuotaHolder = -2;

class ThreadTimeline {
 public:
  // Builds the timeline of one thread over [begin, end) from its rows (any order). Rows of
  // other threads are ignored. With `occupancy` (the job's threads), a run-queue wait is
  // credited, stretch by stretch, to the job's thread that held the CPU the thread got back on,
  // and to other processes in between.
  static ThreadTimeline Build(int32_t pid, int32_t tid, int64_t begin, int64_t end,
                              const std::vector<const Event*>& rows,
                              const CpuOccupancy* occupancy = nullptr);

  int32_t pid() const { return pid_; }
  int32_t tid() const { return tid_; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  const std::vector<TimelineSegment>& segments() const { return segments_; }

  // Time per cause inside [a, b) ∩ [begin, end); running is the remainder.
  CauseTimes Overlap(int64_t a, int64_t b) const;
  CauseTimes Totals() const { return Overlap(begin_, end_); }
  // Run-queue time inside [a, b), by the process that held the CPU.
  void RunqByHolder(int64_t a, int64_t b, std::map<int32_t, int64_t>* out) const;

 private:
  int32_t pid_ = 0;
  int32_t tid_ = 0;
  int64_t begin_ = 0;
  int64_t end_ = 0;
  std::vector<TimelineSegment> segments_;  // sorted, non-overlapping, no running segments
};

// Precedence rank (higher wins) used by Build; exposed for tests and docs.
int CausePrecedence(FeedCause cause);
// A memcpy row that waited for its stream rather than moving data (thresholds.h,
// kCopyWait*): its time is a sync on the critical path, and memcpy-bottleneck leaves it out.
bool CopyWaitedForStream(const Event& e);
// A row of a call that returned only once the device ran out of the process's earlier work
// (ops DrainsDevice: a device sync, or cudaFree/cuMemFree of a real pointer; cudaFree(nullptr)
// only initializes the context), and that succeeded.
bool DrainedDevice(const Event& e);
// A free of device memory that drained the device and lasted at least kFreeWaitMinNs
// (thresholds.h): its time was the wait for the step's kernels (the first free of
// torch.cuda.empty_cache()), a sync on the critical path, not the allocator's CPU time.
bool FreeWaitedForDevice(const Event& e);

template <typename F>
void CpuOccupancy::ForEachHeld(int32_t cpu, int64_t a, int64_t b, F piece) const {
  auto runs = by_cpu_.find(cpu);
  if (runs == by_cpu_.end() || b <= a) return;
  const std::vector<Run>& v = runs->second;
  // Runs on one CPU do not overlap: the first that ends after a is the first to clip.
  auto it = std::lower_bound(v.begin(), v.end(), a, [](const Run& r, int64_t t) { return r.end <= t; });
  for (; it != v.end() && it->start < b; ++it) {
    int64_t s = std::max(a, it->start), e = std::min(b, it->end);
    if (e > s) piece(s, e, it->pid);
  }
}

inline int64_t& At(CauseTimes& t, FeedCause c) { return t[static_cast<size_t>(c)]; }
inline int64_t At(const CauseTimes& t, FeedCause c) { return t[static_cast<size_t>(c)]; }
void AddTo(CauseTimes& sum, const CauseTimes& add);

}  // namespace gw
