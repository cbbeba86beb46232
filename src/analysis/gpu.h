// Internal: NVML truth in the report (docs/detections.md, "GPU truth"): per-GPU summaries for
// System Context, each host-side finding's SM activity during the intervals it blames vs the
// quietest samples, and the "GPU is the bottleneck" verdict.
#pragma once

#include "analysis/facts.h"
#include "analysis/report.h"
#include "analysis/window_data.h"

namespace gw {

// Medians of the window's samples, per GPU.
std::vector<GpuSummary> SummarizeGpus(const WindowData& w);

// The job's GPU: the one NVML's per-process samples show `pid` using most (a multi-GPU host:
// each NCCL rank on its own GPU); without such samples the busiest GPU (JobGpu).
const GpuSummary* JobGpuOf(const std::vector<GpuSummary>& gpus, const WindowData& w, int32_t pid);

// Fills each finding's `gpu` (and an Effect line), and the report's verdict. Needs the main
// thread's timeline; does nothing without GPU samples.
void AddGpuEffects(const Facts& f, Report* r);

}  // namespace gw
