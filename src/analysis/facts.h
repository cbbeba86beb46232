// Internal: the measurements every rule reads, computed once per window by ComputeFacts().
// Rules (rules.cc) only read Facts and WindowData; they never query anything.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/explain.h"
#include "analysis/timeline.h"
#include "analysis/window_data.h"

namespace gw {

// One baseline/peak bucket (thresholds::kBucketNs, aligned to multiples of it).
struct Bucket {
  int64_t start = 0;  // clipped to the window
  int64_t end = 0;
  std::vector<int64_t> sync_ns;  // main process's syncs starting here
  int64_t sync_p50 = 0;
  int64_t sync_p99 = 0;
  double host_wait_share = 0;  // feeders' run-queue + I/O + fault time / their thread time
  double cuda_ops_per_s = 0;   // main process, full seconds only
  int full_seconds = 0;
};

struct BatchWaits {
  int64_t count = 0;
  int64_t total_ns = 0;
  std::vector<int64_t> durations;
  CauseTimes workers{};  // worker thread-ns by cause while the main thread waited
};

struct SlowSyncs {
  int64_t threshold_ns = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  CauseTimes thread{};                      // the syncing thread's time by cause during them
  CauseTimes workers{};                     // worker thread-ns during them
  std::map<int32_t, int64_t> runq_holders;  // who held the CPU while the syncing thread waited
};

struct Facts {
  const WindowData* w = nullptr;
  int64_t window_ns = 0;
  double window_s = 0;
  int64_t cores = 0;

  // Roles.
  int32_t main_pid = 0;
  int32_t main_tid = 0;
  std::vector<int32_t> cuda_pids;    // tracked processes with CUDA calls (main first)
  std::vector<int32_t> worker_pids;  // tracked children of the main process without CUDA calls
  std::string main_name;
  std::string main_cmdline;

  // Timelines.
  std::optional<ThreadTimeline> main_tl;
  std::vector<ThreadTimeline> train_tls;   // CUDA-calling threads of the main process
  std::vector<ThreadTimeline> worker_tls;  // every worker thread seen
  CauseTimes main_totals{};
  CauseTimes train_totals{};
  CauseTimes worker_totals{};
  int64_t train_thread_ns = 0;
  int64_t worker_thread_ns = 0;
  std::map<int32_t, int64_t> runq_holders;  // feeders' run-queue time by CPU holder

  // Critical path of the main thread (ns).
  BatchWaits waits;
  double lost_contention = 0;
  double lost_io = 0;
  double lost_memory = 0;
  double lost_starvation = 0;
  double lost_wait_other = 0;

  // Syncs.
  std::string sync_op;  // the main process's most frequent sync op
  int64_t sync_count = 0;
  std::vector<Bucket> buckets;
  int base_bucket = -1;
  int peak_bucket = -1;  // highest sync p99
  int64_t base_p50 = 0;
  int64_t base_p99 = 0;
  int64_t peak_p99 = 0;
  SlowSyncs slow;
  int tput_peak_bucket = -1;
  int tput_low_bucket = -1;

  // Per-second CUDA ops of each CUDA process (full seconds of the window).
  std::map<int32_t, std::map<int64_t, int64_t>> cuda_ops_per_sec;
  std::map<int32_t, SwitchTotals> switches;
};

Facts ComputeFacts(const WindowData& w, const ExplainOptions& options);
// Rules: each appends zero or more findings.
void RunRules(const Facts& f, std::vector<Finding>* out);

int64_t Percentile(std::vector<int64_t> v, double p);        // nearest-rank, 0 for empty
std::string ProcessLabel(const WindowData& w, int32_t pid);  // "name (PID n)"
std::string ProcessName(const WindowData& w, int32_t pid);   // "name" or "pid n"

}  // namespace gw
