// TraceMetrics: cumulative counters of a live trace, fed from the capture path (an
// EventObserver) and snapshotted by whoever serves them (src/prometheus). Per traced process:
// context switches, off-CPU and run-queue time, CUDA calls per op, launches, and fixed-bucket
// latency histograms of syncs and memcpys; per GPU the newest NVML sample; the drops.
//
// Cost: one short mutex hold per batch of events (the drain thread hands batches of hundreds),
// one hash lookup per run of events of the same pid, a few increments per event, no allocation
// except when a new pid is first seen. The reader copies the state under the same mutex.
//
// Bounded: at most `max_processes` per-process series; further traced processes are folded
// into one `other` series, and non-traced processes whose events gpuwhy records (competitors'
// preempted intervals, direct reclaim) into one `competitors` series. The series of an exited
// process is kept for kExitedRetentionNs of trace time (so its final values get scraped), then
// its slot may be reused for a new process.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "capture/event_observer.h"
#include "store/event.h"
#include "store/ops.h"

namespace gw {

inline constexpr int kDefaultMaxProcessSeries = 64;
inline constexpr size_t kMaxProcessNameBytes = 64;
inline constexpr int64_t kExitedRetentionNs = 120'000'000'000;

// Latency histogram bucket upper bounds (inclusive, as Prometheus' `le`), in ns; one more
// bucket (+Inf) follows.
inline constexpr std::array<int64_t, 10> kLatencyBucketsNs = {
    10'000,    50'000,     100'000,    500'000,     1'000'000,
    5'000'000, 10'000'000, 50'000'000, 100'000'000, 1'000'000'000};

struct LatencyBuckets {
  std::array<int64_t, kLatencyBucketsNs.size() + 1> counts{};  // per bucket, not cumulative
  int64_t count = 0;
  int64_t sum_ns = 0;
  void Add(int64_t ns);
};

// Dense indexes over the closed op list: every CUDA op (runtime and driver), and the sync and
// memcpy ops that get latency histograms.
size_t CudaOpSlots();
size_t LatencyOpSlots();
int CudaOpSlot(Op op);     // -1 for host ops
int LatencyOpSlot(Op op);  // -1 unless IsSync or IsMemcpy
Op CudaOpAt(size_t slot);
Op LatencyOpAt(size_t slot);

// A process name made safe for a label: printable ASCII kept, every other byte '?', at most
// kMaxProcessNameBytes bytes ("…" is not added: the cut is plain ASCII too).
std::string SafeProcessName(std::string_view name);

enum class SeriesKind { kProcess, kOther, kCompetitors };

struct ProcessMetrics {
  SeriesKind kind = SeriesKind::kProcess;
  int32_t pid = 0;
  std::string name;  // SafeProcessName; "" when not named yet
  int64_t context_switches = 0;
  int64_t off_cpu_ns = 0;
  int64_t runq_ns = 0;
  std::vector<int64_t> calls;           // by CudaOpSlot: rows plus counted calls (launches
                                        // scaled by the duty cycle: the live estimate)
  int64_t launches_counted = 0;         // launches the probes saw (not scaled)
  std::vector<LatencyBuckets> latency;  // by LatencyOpSlot: rows with a duration
  int64_t exit_ts_ns = kNull;           // session ns when it exited
  // Its container (short id, 12 hex digits) and Kubernetes pod UID, from the 1 Hz cgroup read
  // (OnProcessCgroups); "" outside containers and until the first read.
  std::string container;
  std::string pod_uid;
  std::string pod;  // pod name and namespace from the downward-API environment; "" = not given
  std::string namespace_name;
  // NCCL (issue 35): the rank of its largest communicator (-1: no ncclCommInitRank seen), its
  // collectives and their bytes, and, over the collectives every rank of their communicator was
  // seen to enqueue, how long after the earliest rank this one enqueued (summed) and how many.
  int64_t nccl_rank = -1;
  int64_t nccl_nranks = 0;
  int64_t nccl_collectives = 0;
  int64_t nccl_bytes = 0;
  int64_t nccl_lateness_ns = 0;
  int64_t nccl_lined_up = 0;
  bool Empty() const;
};

struct MetricsSnapshot {
  std::vector<ProcessMetrics> processes;  // per-process series (slot order), then other,
                                          // then competitors
  std::vector<GpuSample> gpus;            // the newest sample of each GPU, by index
  DropCounts drops;
  int64_t events = 0;            // events decoded (every pid)
  int64_t folded_processes = 0;  // traced processes counted in `other` (cap reached)
  int max_processes = 0;
};

class TraceMetrics : public EventObserver {
 public:
  explicit TraceMetrics(int max_processes = kDefaultMaxProcessSeries);

  void OnEvents(const Event* events, size_t count) override;
  void OnProcess(const ProcessInfo& process) override;
  void OnOpCounts(const std::vector<OpCount>& counts) override;
  void OnGpuSamples(const std::vector<GpuSample>& samples) override;
  void OnDrops(const DropCounts& drops) override;
  void OnLaunchDuty(uint32_t n) override;
  void OnProcessCgroups(const std::vector<ProcessCgroup>& processes) override;

  MetricsSnapshot Snapshot() const;
  int64_t events() const;  // events decoded so far (cheap: no copy)

 private:
  // Slot codes in pid_slot_ besides slot indexes.
  static constexpr int32_t kOtherSlot = -1;
  static constexpr int32_t kCompetitorSlot = -2;
  // Entries of pid_slot_ (pids seen); beyond this new pids are not remembered (bounded memory).
  static constexpr size_t kMaxPidEntries = 65536;

  ProcessMetrics* SeriesFor(int32_t pid);  // a traced process (or not known yet)
  int32_t AssignSlot(int32_t pid);         // a slot index, or kOtherSlot
  ProcessMetrics* Series(int32_t code);
  void Count(ProcessMetrics* m, const Event& e);

  const int max_processes_;
  mutable std::mutex mu_;
  std::vector<ProcessMetrics> slots_;  // reserved up front, never reallocated
  ProcessMetrics other_;
  ProcessMetrics competitors_;
  std::unordered_map<int32_t, int32_t> pid_slot_;  // pid → slot index or a code above
  std::map<int32_t, GpuSample> gpus_;
  DropCounts drops_;
  int64_t events_ = 0;
  int64_t folded_ = 0;
  int64_t newest_ts_ns_ = 0;
  int64_t launch_duty_ = 1;  // a launch seen stands for this many (OnLaunchDuty)
  // NCCL collectives waiting for every rank's call: (communicator, sequence number) → (pid,
  // enqueue ts) per rank seen so far; the ranks of each communicator from its init rows. At most
  // kMaxPendingCollectives entries (the oldest sequence numbers go first).
  static constexpr size_t kMaxPendingCollectives = 4096;
  void LineUp(const Event& e);
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int32_t, int64_t>>> pending_;
  std::unordered_map<int64_t, int64_t> comm_ranks_;  // communicator name id → nranks
};

}  // namespace gw
