// Typed, streamed reads of one window for the exporters (src/export): every row of the window in
// (ts, seq) order handed to a callback one at a time, the session's header, the window's launch
// rollups and stack counts. Memory stays flat however long the window is: nothing here loads
// event rows into a container. Bounded like window_rows.h: every event_rows query is a range of
// the clustered (session, ts, seq) key.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/event.h"
#include "store/ops.h"
#include "store/window.h"
#include "store/window_rows.h"

namespace gw {

class StoreReader;

// One event_rows row (its columns as `Event` holds them, kNull where NULL) with its name
// (strings.text of name_id) resolved; "" when none.
struct ExportEvent : Event {
  std::string name;
};

struct ExportSession {
  int64_t session = 0;
  std::string kind;
  int64_t wall_start_ns = 0;  // sessions.wall_start_ns: wall clock = this + ts
  std::string host;
  int64_t drops = 0;
  std::string drops_detail;  // JSON object, "" when none
  std::string gpuwhy_version;
  int64_t launch_duty = 1;  // sessions.launch_duty: launches counted one second in N
  std::map<int32_t, ProcessRecord> processes;  // every process of the session
  int64_t rows_in_window = 0;                  // event_rows in [begin, end)
  // op_seconds of the window's seconds: launches (cudaLaunchKernel*, cuLaunchKernel*,
  // cudaGraphLaunch) per (sec, pid), counted-only launches included; by sec, then pid.
  std::vector<OpSecondRow> launch_seconds;
  // NVML samples of the window (schema 4; empty without them), by ts then gpu.
  std::vector<GpuDevice> gpu_devices;
  std::vector<GpuSample> gpu_samples;
  // CUDA calls (every op below 200) per pid over the window, from op_seconds.
  std::map<int32_t, int64_t> cuda_calls;
};

StatusOr<ExportSession> ReadExportSession(StoreReader& reader, const SessionWindow& window);

// Every row of the window, every process, launch rows included, in (ts, seq) order. `fn`
// returns false to stop early (the status is then Ok).
using ExportEventFn = std::function<bool(const ExportEvent&)>;
Status ForEachWindowEvent(StoreReader& reader, const SessionWindow& window,
                          const ExportEventFn& fn);

// trace --stack: the window's rows that carry a stack, counted per (stack, pid); `ops` empty =
// every op. One entry per distinct stack, not per row.
struct StackCount {
  int64_t stack_id = 0;
  int32_t pid = 0;
  int64_t count = 0;
  int64_t total_ns = 0;  // summed duration_ns (sched_switch: off-CPU time)
};
StatusOr<std::vector<StackCount>> ReadStackCounts(StoreReader& reader, const SessionWindow& window,
                                                  const std::vector<Op>& ops);

// sessions.profile_hz: the on-CPU profile's samples a second per CPU; 0 = none (or schema < 11).
StatusOr<int64_t> ReadProfileHz(StoreReader& reader, int64_t session);

// The frames (innermost first) of each stack of `ids` that the session stores with valid JSON
// frames, one callback per stack in id order. Stacks whose frames are not valid JSON are
// skipped and counted in *malformed.
using StackFramesFn = std::function<void(int64_t stack_id, const std::vector<StackFrameRow>&)>;
Status ForEachStackFrames(StoreReader& reader, int64_t session, const std::vector<int64_t>& ids,
                          const StackFramesFn& fn, int64_t* malformed);

}  // namespace gw
