// CudaSourceOptions: how the CUDA source probes, declared once with its defaults. `gpuwhy
// trace` fills it through TracerOptions::sources (capture/tracer.h) and the registry hands it
// to CudaSource::Create unchanged; tests and benchmarks fill it directly.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gw {

struct CudaSourceOptions {
  // Scan /proc/*/maps and the standard library directories (Start and Rediscover). Off in
  // tests and benchmarks, which name their libraries in `libraries`.
  bool discover = true;
  // Extra library files or directories to attach to (trace --cuda-lib).
  std::vector<std::string> libraries;
  // Every Nth launch of a thread is also recorded as a full row (ts, tid, stream, kernel
  // name); the others are only counted. 0: count only.
  uint32_t launch_sample_every = 64;
  // Ring buffer size in bytes (power of two, ≥ page size). The consumer maps the ring twice
  // (wrap-around), so the agent's RSS carries twice this: 16 MiB holds 210,000 records, 175 ms
  // at 1.2 M records/s, 35 of the drain thread's 5 ms polls.
  uint32_t ring_bytes = 16u << 20;
  // Attach with multi-uprobe links (one per program and library; kernel ≥ 6.6), falling back
  // to one perf-event uprobe per function when the kernel lacks them. false: always the
  // latter (benchmarks compare the two).
  bool multi_uprobe = true;
  // Once every runtime launch is seen to make a driver launch (kNestingProofLaunches in a row,
  // to 1 in 1,000), detach the runtime launch probes: launches are then counted at the driver
  // alone, one probe hit per launch instead of two. Libraries attached later are checked anew.
  bool detach_nested_runtime_launches = true;
  // Launch duty cycle: the launch probes stay attached until two seconds in a row with launches
  // are counted, then are attached in one session second of every `launch_duty` from the second
  // of them, and launches are counted then only, so a launch-heavy job pays for one probe hit
  // per launch a 1/launch_duty share of the time. The time they were attached is filed as
  // launch_coverage counts, which readers estimate from (store/launch_estimate.h). 1: every
  // second (exact counts).
  uint32_t launch_duty = 1;
  // The row budget (sources/cuda/README.md): a driver call nested in a runtime call is not
  // recorded again; cudaMemsetAsync is counted entry-only; short calls (async copies, stream
  // waits) are full rows only when they take call_row_min_ns or more, fail, are outliers (far
  // slower than their function's recent calls) or are every call_sample_every-th of their
  // thread, outliers and samples within row_tokens_per_s per thread; the other calls are
  // aggregated in the kernel into op_seconds (count, total, max, bytes) and op_latency (log2
  // histogram). false (trace --all-rows): every call is a full row.
  bool row_budget = true;
  uint64_t call_row_min_ns = 20000;
  uint32_t call_sample_every = 64;
  uint32_t row_tokens_per_s = 200;
  // The stack budget (with --stack; sources/stacks/stacks.bpf.h gw_stack_budget_ok): a row's
  // stack is always taken when the call failed or took stack_always_ns or more, otherwise at
  // most SourceContext::stack_rate a second per thread (bursts of a fifth of that); other rows
  // have none.
  uint64_t stack_always_ns = 1'000'000;
};

}  // namespace gw
