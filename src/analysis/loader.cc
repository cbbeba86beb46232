#include "analysis/loader.h"

#include <utility>

#include "store/reader.h"
#include "store/window_rows.h"

namespace gw {

namespace {

// How far before the window an interval that ends inside it may have begun (a thread asleep
// since before the window): rows from this far back are read for the timelines.
constexpr int64_t kCarryInNs = 60'000'000'000;
// Launch rows are counted in op_seconds; this many are read for their durations.
constexpr int64_t kMaxLaunchSamples = 20000;

}  // namespace

StatusOr<WindowData> LoadWindow(StoreReader& reader, const WindowRequest& request) {
  ASSIGN_OR_RETURN(SessionWindow window, ResolveWindow(reader, request));
  ASSIGN_OR_RETURN(WindowRows rows,
                   ReadWindowRows(reader, window, {kCarryInNs, kMaxLaunchSamples}));
  ASSIGN_OR_RETURN(int64_t newest, reader.LatestSession());
  WindowData w;
  w.session = window.session;
  w.newest_session = window.session == newest;
  w.from = window.begin_ns;
  w.to = window.end_ns;
  w.session_first_ts = window.first_ts_ns;
  w.session_last_ts = window.last_ts_ns;
  w.label = std::move(window.label);
  w.cores = rows.cores;
  w.drops = rows.drops;
  w.tracer_pid = rows.tracer_pid;
  w.launches_once = rows.launches_once;
  w.launch_duty = rows.launch_duty;
  w.launch_estimates = rows.launch_estimates;
  w.processes = std::move(rows.processes);
  w.events = std::move(rows.events);
  w.carry_in = std::move(rows.carry_in);
  w.launch_samples = std::move(rows.launch_samples);
  w.op_seconds = std::move(rows.op_seconds);
  w.copy_aggregates = std::move(rows.copy_aggregates);
  w.kernel_launches = std::move(rows.kernel_launches);
  w.switch_totals = std::move(rows.switch_totals);
  w.snapshots = std::move(rows.snapshots);
  w.events_in_window = rows.events_in_window;
  w.stack_uses = std::move(rows.stack_uses);
  w.stack_frames = std::move(rows.stack_frames);
  w.malformed_stacks = rows.malformed_stacks;
  w.profile_hz = rows.profile_hz;
  w.cpu_samples = std::move(rows.cpu_samples);
  w.nccl_calls = std::move(rows.nccl_calls);
  w.gpu_devices = std::move(rows.gpu_devices);
  w.gpu_samples = std::move(rows.gpu_samples);
  w.gpu_process_samples = std::move(rows.gpu_process_samples);
  w.cgroup_cpu = std::move(rows.cgroup_cpu);
  w.process_cgroups = std::move(rows.process_cgroups);
  w.cgroup_memory = std::move(rows.cgroup_memory);
  return w;
}

}  // namespace gw
