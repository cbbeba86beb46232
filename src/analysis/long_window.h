// Internal: long windows from the rollup tier (issue 19). SummarizeRollups() reads one
// window's thread_rollups and picks its incident: the stretch of `incident_ns` in which the
// main thread lost the most time (waiting for a CPU, for I/O, for page faults, or asleep beyond
// its CUDA syncs). Explain() then reads raw rows for that stretch only. Pure: no I/O.
#pragma once

#include <cstdint>

#include "analysis/report.h"
#include "store/rollup_rows.h"
#include "store/window.h"

namespace gw {

// `pid`: explain --pid (0 = the tracked process with the most CUDA calls; never the tracer).
// The incident lies inside the window and inside the session's raw rows.
LongWindowSummary SummarizeRollups(const RollupWindow& rollups, const SessionWindow& window,
                                   int32_t pid, int64_t incident_ns);

// The incident length for a window holding `rows` raw rows over `window_ns`: 2 min, shorter
// (down to one 10 s bucket) where 2 min would hold more than `max_rows` rows.
int64_t IncidentLength(int64_t rows, int64_t window_ns, int64_t max_rows);

}  // namespace gw
