// Internal: the GPU-time budget of a window (report.h, GpuBudget; docs/detections.md, "The
// GPU-time budget"). The job's window is split into the GPU busy for this job, busy for other
// processes and idle; every idle second is attributed once, to what held the main thread's
// critical path at that moment. Findings take their lost seconds from here.
#pragma once

#include "analysis/facts.h"
#include "analysis/report.h"

namespace gw {

// Fills f->budget from the critical path (f->path_spans and the main thread's timeline) and the
// window's GPU samples (the job's GPU, per-process samples where NVML gives them); without GPU
// samples, from the main thread's syncs (stream evidence). Does nothing without a main thread.
void ComputeBudget(Facts* f);

// One cause's line of f.budget (seconds): on the critical path, and the GPU idle time it explains.
double BudgetPathS(const Facts& f, BudgetCause c);
double BudgetLostS(const Facts& f, BudgetCause c);

}  // namespace gw
