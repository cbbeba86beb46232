// `gpuwhy demo --live`: a real recording of a workload on the simulated CUDA runtime (sim/,
// built next to the gpuwhy binary) with one fault really injected, traced through the same
// capture path as `gpuwhy trace`. The CLI explains the recording as it explains any other.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace gw {

struct LiveScenario {
  const char* name;
  const char* summary;
  std::vector<std::string> loop_args;  // gw_train_loop flags besides --duration
  int competitors = 0;                 // gw_competitor processes on the training CPU
  bool io_file = false;                // --io-file on a cold file, opened with O_DIRECT
  bool pinned = true;                  // the loop (and competitors) on one CPU
};

const std::vector<LiveScenario>& LiveScenarios();
const LiveScenario* FindLiveScenario(const std::string& name);

struct LiveDemoOptions {
  const LiveScenario* scenario = nullptr;
  int64_t duration_ns = 20'000'000'000;  // at least 5 s
  std::string db_path;                   // the recording goes here
  std::string version;                   // for the sessions table
  std::string command_line;
  // Set (by a signal handler) to end the recording early; the workload is stopped.
  const std::atomic<bool>* interrupt = nullptr;
  // One line of progress ("starting workload (…)…"), for stderr.
  std::function<void(const std::string&)> progress;
};

struct LiveDemoRecording {
  int64_t session_id = 0;
  int64_t events = 0;
  bool interrupted = false;  // *interrupt was set: the recording is partial
};

// Why the live demo cannot run here, before anything is created: not root, the simulated
// runtime not built next to this binary, a duration under 5 s.
Status CheckLiveDemoCanRun(const LiveScenario& scenario, int64_t duration_ns);

// Starts the workload held at its first instruction, starts the tracer, releases it, injects
// the scenario's fault a third of the way in and stops tracer and workload after
// duration_ns. Needs root. Every process it starts is stopped (and a cold file or blkio group
// it made removed) before it returns.
StatusOr<LiveDemoRecording> RecordLiveDemo(const LiveDemoOptions& options);

}  // namespace gw
