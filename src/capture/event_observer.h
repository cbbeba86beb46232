// EventObserver: a read-only tap on what the capture loop decodes, for consumers other than the
// store and the live view (the Prometheus metrics, src/metrics). Header only: an observer does
// not link the capture loop (or libbpf).
//
// Threads: OnEvents, OnProcess, OnOpCounts and OnDrops are called from the drain thread,
// OnGpuSamples from the NVML sampler's thread, OnProcessCgroups from the 1 Hz sampler's. Calls are
// on the hot path: an observer does a few increments per event, allocates nothing per event and
// never blocks for long.
#pragma once

#include <cstddef>
#include <vector>

#include "sources/source.h"
#include "store/event.h"

namespace gw {

class EventObserver {
 public:
  virtual ~EventObserver() = default;
  // Decoded events, in the batches the sources hand to the store.
  virtual void OnEvents(const Event* events, size_t count) = 0;
  // A process seen, renamed or exited (the same records the store upserts).
  virtual void OnProcess(const ProcessInfo& process) = 0;
  // Calls counted without a row (launches counted in BPF, page faults).
  virtual void OnOpCounts(const std::vector<OpCount>& counts) = 0;
  // Every NVML round (trace --gpu-interval).
  virtual void OnGpuSamples(const std::vector<GpuSample>& samples) = 0;
  // Drops so far by where they happened (cumulative; the summary's counters), about once a
  // second and once more after the final drain.
  virtual void OnDrops(const DropCounts& drops) = 0;
  // Once, before any event: launches are counted one second in `n` (trace --launch-duty), so a
  // launch seen (a sampled row or a count) stands for `n` launches.
  virtual void OnLaunchDuty(uint32_t n) { (void)n; }
  // Processes seen in a cgroup for the first time (or moved), with their container, pod and
  // namespace pid, about once a second from the 1 Hz sampler's thread (schema 12's
  // process_cgroups rows).
  virtual void OnProcessCgroups(const std::vector<ProcessCgroup>& processes) { (void)processes; }
};

}  // namespace gw
