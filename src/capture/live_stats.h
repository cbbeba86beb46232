// LiveStats: what `gpuwhy trace` shows while it runs — per-op counts and latency percentiles,
// the newest system snapshot, drops, and a one-line correlation (who is making the tracked
// tasks wait). Fed by the tracer's sink from the drain thread; read by the view once a second.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sources/source.h"
#include "store/event.h"

namespace gw {

// A log-linear histogram of nanosecond durations: 8 sub-buckets per power of two (≤ 12.5%
// relative error), constant memory, O(1) insert.
class LatencyHistogram {
 public:
  void Add(int64_t ns);
  int64_t count() const { return count_; }
  // The value at quantile q (0..1), as the upper bound of its bucket; 0 when empty.
  int64_t Quantile(double q) const;

 private:
  static int Bucket(int64_t ns);
  static int64_t BucketUpper(int index);
  std::array<int64_t, 512> buckets_{};
  int64_t count_ = 0;
};

struct OpRow {
  Op op = Op::kSchedSwitch;
  int64_t count = 0;     // rows plus calls only counted (OpCount)
  int64_t timed = 0;     // calls with a duration
  int64_t p50_ns = 0, p95_ns = 0, p99_ns = 0;
  std::string flags;
};

struct LiveSnapshot {
  int64_t elapsed_ns = 0;
  SystemSnapshot system;
  bool have_system = false;
  std::vector<OpRow> runtime, driver, host;
  int64_t events = 0;
  int64_t drops = 0;
  int64_t tracked_processes = 0;       // tracked now (exited ones leave)
  int64_t processes_ever_tracked = 0;  // every process tracked at some point of the trace
  int64_t cuda_processes = 0;          // tracked processes seen making CUDA calls
  std::string correlation;
};

class LiveStats {
 public:
  void AddEvents(const Event* events, size_t count);
  void AddOpCounts(const std::vector<OpCount>& counts);
  void AddProcess(const ProcessInfo& process);
  void SetSystem(const SystemSnapshot& snapshot);
  void SetDrops(int64_t drops);
  LiveSnapshot Snapshot(int64_t elapsed_ns) const;
  // The display name of a pid as last seen ("pid N" when unknown).
  std::string NameOf(int32_t pid) const;

 private:
  std::string Correlation() const;
  std::string NameOfLocked(int32_t pid) const;

  struct OpState {
    int64_t count = 0;
    LatencyHistogram hist;
  };
  // One second of the window the correlation looks at.
  struct Second {
    std::map<std::pair<int32_t, int32_t>, int64_t> runq_by_thread;  // tracked (pid, tid)
    std::map<int32_t, int64_t> preemptions_by;  // other_pid → preemptions of tracked tasks
    std::map<int32_t, int64_t> runq_caused_by;  // other_pid → tracked runq ns while it ran
  };

  mutable std::mutex mu_;
  std::map<uint16_t, OpState> ops_;
  std::unordered_map<int32_t, std::string> names_;
  std::set<int32_t> tracked_;
  std::set<int32_t> ever_tracked_;
  std::set<int32_t> cuda_pids_;
  std::map<int64_t, Second> seconds_;
  int64_t newest_sec_ = 0;
  SystemSnapshot system_;
  bool have_system_ = false;
  int64_t events_ = 0;
  int64_t drops_ = 0;
};

// Renders the live view in the brief's style. `tty`: ANSI cursor-home / clear-to-end so the
// screen is redrawn in place without flicker; otherwise plain text.
// The full-screen view; `width` picks the System line's form, `height` (> 0) caps the op rows
// so the frame fits the terminal (0: every row).
std::string RenderLiveView(const LiveSnapshot& s, int width, int height = 0);
// One plain line for a non-terminal stdout.
std::string RenderStatusLine(const LiveSnapshot& s);

std::string FormatDurationNs(int64_t ns);

}  // namespace gw
