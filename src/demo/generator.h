// Synthetic recordings for `gpuwhy demo`: a training process (CUDA calls), its DataLoader
// workers and the rest of the machine, simulated step by step (baseline → incident → recovery,
// seeded noise) and written through StoreWriter exactly as the tracer writes: the semantics
// of docs/schema.md, launch rows sampled with the rest counted in op_seconds, processes rows
// (tracked = 1 for the trainer and its workers), competitors' own sched_switch rows, 1 Hz
// system snapshots. The output depends only on (scenario, seed, duration).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "store/writer.h"

namespace gw {

struct DemoOptions {
  uint64_t seed = 1;
  int64_t duration_s = 120;
};

struct DemoStats {
  int64_t events = 0;
  int64_t session = 0;
};

// Records one scenario as a new session of `writer` (BeginSession … EndSession).
StatusOr<DemoStats> RecordScenario(const std::string& scenario, StoreWriter& writer,
                                   const DemoOptions& options);

// Creates `path` (must not exist or be a gpuwhy database) and records the scenario into it.
StatusOr<DemoStats> WriteDemoDatabase(const std::string& scenario, const std::string& path,
                                      const DemoOptions& options);

}  // namespace gw
