// The event mix the store benchmarks write: shaped like a traced training job (scheduler
// intervals dominate, then CUDA syncs, memcpys and sampled launches, page faults, block I/O).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "store/event.h"

namespace gw {

inline std::vector<Event> MakeMix(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Event> out;
  out.reserve(static_cast<size_t>(n));
  int64_t ts = 0;
  for (int64_t i = 0; i < n; ++i) {
    ts += 1000 + static_cast<int64_t>(rng() % 2000);  // ~500k events/s of session time
    Event e;
    e.ts_ns = ts;
    e.pid = 3821 + static_cast<int32_t>(rng() % 6);
    e.tid = e.pid + static_cast<int32_t>(rng() % 4);
    uint64_t r = rng() % 100;
    if (r < 45) {
      e.op = Op::kSchedSwitch;
      e.duration_ns = static_cast<int64_t>(rng() % 2'000'000);
      e.runq_ns = e.duration_ns / 3;
      e.kind = static_cast<int64_t>(rng() % 3);
      e.cpu = static_cast<int64_t>(rng() % 16);
      e.other_pid = 4000 + static_cast<int64_t>(rng() % 50);
    } else if (r < 65) {
      e.op = Op::kCuLaunchKernel;
      e.duration_ns = 3000 + static_cast<int64_t>(rng() % 4000);
      e.ret = 0;
      e.name_id = 1 + static_cast<int64_t>(rng() % 200);
      e.addr = 0x7f0000001000;
    } else if (r < 75) {
      e.op = Op::kCudaStreamSync;
      e.duration_ns = static_cast<int64_t>(rng() % 5'000'000);
      e.ret = 0;
      e.addr = 0;
    } else if (r < 85) {
      e.op = Op::kCudaMemcpyAsync;
      e.duration_ns = 5000 + static_cast<int64_t>(rng() % 50'000);
      e.ret = 0;
      e.bytes = 1 << 20;
      e.kind = 1;
      e.addr = 0;
    } else if (r < 95) {
      e.op = Op::kPageFault;
      e.addr = static_cast<int64_t>(0x7f0000000000ULL + (rng() % (1ULL << 30)));
    } else {
      e.op = Op::kBlockIo;
      e.duration_ns = 100'000 + static_cast<int64_t>(rng() % 5'000'000);
      e.bytes = 131072;
      e.kind = 0;
      e.addr = static_cast<int64_t>(rng() % 100'000'000);
    }
    out.push_back(e);
  }
  return out;
}

}  // namespace gw
