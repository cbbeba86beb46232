// Per-thread timelines: where one thread's time went, interval by interval, with overlaps
// between off-CPU intervals (sched_switch rows) and CUDA calls resolved by a fixed precedence
// (docs/detections.md, "Feed-time attribution"):
//   run-queue wait > page fault > blocked on I/O > memcpy > sync > blocked otherwise > running
#pragma once

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
  int32_t other_pid = 0;  // run-queue segments: the process that held the CPU (0 = unknown)
};

class ThreadTimeline {
 public:
  // Builds the timeline of one thread over [begin, end) from its rows (any order). Rows of
  // other threads are ignored.
  static ThreadTimeline Build(int32_t pid, int32_t tid, int64_t begin, int64_t end,
                              const std::vector<const RawEvent*>& rows);

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
bool CopyWaitedForStream(const RawEvent& e);

inline int64_t& At(CauseTimes& t, FeedCause c) { return t[static_cast<size_t>(c)]; }
inline int64_t At(const CauseTimes& t, FeedCause c) { return t[static_cast<size_t>(c)]; }
void AddTo(CauseTimes& sum, const CauseTimes& add);

}  // namespace gw
