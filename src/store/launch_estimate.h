// How many kernel launches each process made in a window, from the launches the tracer counted.
//
// Launch probes are attached only part of the time: from the attach until the duty cycle starts,
// then one second in every N (trace --launch-duty N). The tracer files, with each flush of launch
// counts, the time the probes were attached (op_seconds rows of op `launch_coverage`, pid 0,
// total_ns). A process's launches are then what was counted, plus an extrapolation over the time
// the probes did not cover:
//  - by ratio, where the process makes other CUDA calls (syncs, copies, always counted): its
//    launches per other call in the covered seconds, times its other calls in the uncovered
//    time. This follows the job's step rate as it changes (a job slowed by a fault launches
//    less) and ends where the job's CUDA calls end;
//  - else by time: its launch rate in the covered seconds times the part of its launching span
//    not covered. The span runs from its first to its last CUDA activity in the window (clipped
//    where covered seconds show that launching had not begun, or had stopped).
// Either way a job that starts or ends between counting seconds, or that was launching before
// the probes were attached, is neither over- nor under-counted. Sessions recorded before
// coverage was filed fall back to N x the count.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "store/window.h"

namespace gw {

class StoreReader;

struct LaunchEstimate {
  int64_t counted = 0;    // launches counted in the window
  double estimated = 0;   // counted + the extrapolation (== counted when nothing was missed)
  double error = 0;       // ± launches: one standard error of the extrapolation
  double uncovered_s = 0;  // the process's launching time the probes did not cover
};

struct LaunchEstimates {
  // The session filed launch_coverage rows. false: an older recording, scaled by `duty`.
  bool coverage_known = false;
  int64_t duty = 1;                         // sessions.launch_duty
  std::map<int32_t, LaunchEstimate> by_pid;  // processes with counted launches
  LaunchEstimate total;                     // errors added in quadrature
  // The window's stretches (session ns, sorted, disjoint) in which the launch probes were
  // detached, so that a launch there left no row and no trace in since_work_ns: the duty cycle's
  // off seconds, from the coverage filed per second (UnprobedSpans). Empty where coverage is
  // not known (older recordings: readers take the probes as attached throughout).
  std::vector<std::pair<int64_t, int64_t>> unprobed;

  // estimated / counted for a process's launches (1 when none were counted).
  double Scale(int32_t pid) const;
  // `counted` launches of the process, scaled (rounded).
  int64_t Scaled(int32_t pid, int64_t counted) const;
  // Any launch figure of the window is an estimate (not a plain count).
  bool estimated() const;
  // The total's error as a share of its estimate (0 when exact).
  double RelativeError() const;
};

// What the estimate is computed from (read by ReadLaunchEstimates; tests build it directly).
struct LaunchCountingInput {
  int64_t begin_ns = 0;  // the window, session time
  int64_t end_ns = 0;
  int64_t duty = 1;
  bool coverage_known = false;
  std::map<int64_t, int64_t> covered_ns;  // by second: the probes' attached time filed there
  // The session's first second with coverage, and its last where coverage lasted to the
  // session's end (-1: none): before the first attach and after the stop no CUDA call was seen
  // either, so these count as covered whole.
  int64_t attach_sec = -1;
  int64_t stop_sec = -1;
  struct Process {
    std::map<int64_t, int64_t> launches;  // by second: launches counted
    std::map<int64_t, int64_t> calls;     // by second: its other CUDA calls (always counted)
    int64_t first_ns = -1;  // its first and last CUDA activity in the window (-1: unknown)
    int64_t last_ns = -1;
    int64_t exit_ns = -1;   // when it exited, -1: alive at the window's end
  };
  std::map<int32_t, Process> processes;
};

LaunchEstimates EstimateLaunches(const LaunchCountingInput& in);

// Where in [begin_ns, end_ns) the launch probes were detached, from the coverage filed per
// second. A second's coverage is one stretch: the probes go on a poll interval after a second
// starts and off a poll interval after a later one starts, so a partly covered second holds its
// coverage at its end, unless the second before was covered to its end (the detach's spill-over:
// then at its start). Seconds without a coverage row were not covered.
std::vector<std::pair<int64_t, int64_t>> UnprobedSpans(const LaunchCountingInput& in);

// Reads the window's counted launches, the coverage and each process's CUDA activity (pid > 0:
// only that process), and estimates.
StatusOr<LaunchEstimates> ReadLaunchEstimates(StoreReader& reader, const SessionWindow& window,
                                              int32_t pid = 0);

}  // namespace gw
