// The contract between event sources (src/sources/<family>) and the capture loop. It sits
// below both: the sources implement it, src/capture runs whatever list of Sources it is given
// (registry.h builds the list) without knowing any by name.
//
// A Source owns its BPF skeleton, links and ring buffer; it decodes raw records into typed
// Events and hands them to an EventSink. The capture loop (src/capture/tracer.*) starts every
// source, polls them from one drain thread, rediscovers libraries periodically, and sums drops.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "store/event.h"

namespace gw {

class StackRegistry;  // src/sources/stacks/stack_registry.h

// trace --stack's default budget: stacks a second per thread for CUDA calls shorter than 1 ms
// and for off-CPU switches (a capture costs a few µs, 6-10 on a PyTorch thread; slower or
// failed calls always get theirs). --stack-rate changes it.
inline constexpr uint32_t kDefaultStackRate = 50;
// The on-CPU profile's default rate (trace --profile-hz): samples a second of each CPU running a
// tracked thread. 49, not 50: off the period of timers that run at round rates, so the samples
// do not lock onto them. BENCHMARKS.md ("on-CPU profile") has what it costs.
inline constexpr uint32_t kDefaultProfileHz = 49;

// Where decoded events go (the tracer forwards them to the StoreWriter and the live view).
class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnEvents(const Event* events, size_t count) = 0;
  virtual void OnProcess(const ProcessInfo& process) = 0;
  virtual void OnOpCounts(const std::vector<OpCount>& counts) = 0;
  // Stable id for a string (kernel name, file name) for Event::name_id.
  virtual int64_t InternString(std::string_view text) = 0;
};

// Converts BPF timestamps (bpf_ktime_get_ns, CLOCK_MONOTONIC) to session time.
struct SessionClock {
  int64_t mono_start_ns = 0;  // CLOCK_MONOTONIC at session start
  int64_t wall_start_ns = 0;  // CLOCK_REALTIME at the same instant
  int64_t ToSession(uint64_t mono_ns) const {
    return static_cast<int64_t>(mono_ns) - mono_start_ns;
  }
};

// What every source gets at start.
struct SourceContext {
  SessionClock clock;
  EventSink* sink = nullptr;
  // BPF map fd of the tracked set (tgid → flags), created by the host source and shared with
  // the CUDA source through bpf_map__reuse_fd so both agree on which processes are tracked.
  int tracked_map_fd = -1;
  // Filters from the command line: only these pids / comms (and their descendants) are
  // tracked when non-empty.
  std::vector<int32_t> pids;
  std::vector<std::string> comms;
  // trace --container/--pod: the processes found in the container at start, tracked (with their
  // descendants) if still alive when the sources start; one that exited since is skipped, not
  // an error. A filter like `pids` even when all of them are gone.
  std::vector<int32_t> pids_if_alive;
  // With --stack or the on-CPU profile: owns the shared stack maps. A source whose BPF program
  // includes sources/stacks/stacks.bpf.h calls stack_registry->ShareMaps(skel->obj) between
  // open and load, so every program dedups into one gw_stacks map the tracer drains.
  StackRegistry* stack_registry = nullptr;
  // --stack: CUDA calls and off-CPU switches capture stacks (needs stack_registry).
  bool stacks = false;
  // The on-CPU profile: samples a second of each CPU that runs a tracked thread (trace
  // --profile-hz; 0 = off; needs stack_registry).
  uint32_t profile_hz = 0;
  // With --stack: the per-thread stack budget every source applies (--stack-rate, ≥ 1).
  uint32_t stack_rate = kDefaultStackRate;
  // The budget's mean spacing: one stack per thread per this many ns.
  uint64_t stack_interval_ns() const {
    return 1'000'000'000ull / (stack_rate > 0 ? stack_rate : 1);
  }
};

// Counts of records lost, by where they were lost ("bpf_reserve", …).
using DropCounts = std::map<std::string, int64_t>;

class Source {
 public:
  virtual ~Source() = default;
  virtual std::string name() const = 0;
  // Loads and attaches. A source that cannot start returns an error with a hint; the tracer
  // decides whether that is fatal.
  virtual Status Start(const SourceContext& context) = 0;
  // Drains ready records into the sink without blocking (timeout 0). Returns records drained.
  virtual int64_t Poll() = 0;
  // Called about once a second: attach to libraries/processes that appeared since Start.
  virtual void Rediscover() {}
  // Notes worth telling the user once (skipped symbols, libraries attached).
  virtual std::vector<std::string> TakeNotes() { return {}; }
  virtual DropCounts Drops() const = 0;
  // Detaches; a final Poll() after Stop() must still return what was captured.
  virtual void Stop() = 0;

  // A source that owns the tracked set (the host source) returns its BPF map after Start;
  // the sources started after it get it as SourceContext::tracked_map_fd. -1: owns none.
  virtual int TrackedSetFd() const { return -1; }
  // The processes in that set now (with --stack the tracer watches their maps).
  virtual std::vector<int32_t> TrackedPids() const { return {}; }

  // A source that counts records on both sides of its ring (the host source): submitted by
  // the BPF side and decoded here. After Stop() and a final Poll() they are equal when
  // nothing was lost.
  struct RecordBalance {
    int64_t emitted = 0;
    int64_t consumed = 0;
  };
  virtual std::optional<RecordBalance> Records() const { return std::nullopt; }
};

}  // namespace gw
