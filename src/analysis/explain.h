// gpuwhy's causal engine, its entry points: Explain() turns one window of a recording into a
// Report (report.h: findings with root cause, effect, evidence, fix, and a GPU feed-time
// attribution), Diff() compares two sessions; front ends (CLI `explain`, the MCP server)
// render them with ReportToText() / ReportToJson() / ReportJson().
//
// Stable API: other components code against this header. Add functions, never repurpose them.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "analysis/nccl.h"
#include "analysis/report.h"
#include "base/status.h"
#include "store/launch_estimate.h"

namespace gw {

struct KernelLaunchRow;  // store/window_rows.h

class StoreReader;

// Launches per kernel over `seconds` (each launch once: runtime-layer ops only in recordings
// that counted nested driver launches too, !launches_once).
KernelSummary SummarizeKernels(const std::vector<KernelLaunchRow>& rows, bool launches_once,
                               const LaunchEstimates& estimates,
                               double seconds);

// The window's launch figure as users read it: "4,448", or "~5,610 ± 3%" when estimated.
std::string LaunchFigure(const KernelSummary& k);
// What an estimated figure rests on: counted launches and the launching time not covered.
std::string LaunchEstimateNote(const KernelSummary& k);

StatusOr<Report> Explain(StoreReader& reader, const ExplainOptions& options);
std::string ReportToText(const Report& report);
// "GPU 0 (H200): nvidia-smi util 83% | SM active 71% | … (median of N samples)".
std::string GpuLine(const GpuSummary& g);
// The job's GPU: the busiest by median activity (SM active where GPM has it, else NVML
// utilization); nullptr without samples.
const GpuSummary* JobGpu(const std::vector<GpuSummary>& gpus);
// The report's most severe finding that blames a cause of its main thread's time
// (cpu-contention, dataloader-starvation, host-compute, …); nullptr when none.
const Finding* TopHostCause(const Report& report);
// Whether a finding of MEDIUM or more says what would speed the job up (then the report does not
// call the job GPU-bound).
bool HasFindingWorthFixing(const std::vector<Finding>& findings);
// One node's NCCL rows and sync rows in `window`, for AnalyzeNcclAcrossNodes (nccl.h;
// `fleet --nccl`). wall_start_ns is the session's (sessions.wall_start_ns).
StatusOr<NcclNodeRows> LoadNcclNode(StoreReader& reader, const WindowRequest& window,
                                    const std::string& node, int64_t wall_start_ns);
// "CPU scheduling contention → CUDA throughput drop".
std::string FindingTitle(const Finding& f);
// What `explain --json` prints, as a value (the MCP explain tool returns it) and as text.
nlohmann::ordered_json ReportJson(const Report& report);
std::string ReportToJson(const Report& report);

// ---- diff: before/after between two sessions (same or different files) ----

// Compares whole sessions (session 0 = newest in that file). Rates are normalized per second
// so runs of different lengths compare.
StatusOr<DiffReport> Diff(StoreReader& a, int64_t session_a, StoreReader& b, int64_t session_b);
std::string DiffToText(const DiffReport& diff);
nlohmann::ordered_json DiffJson(const DiffReport& diff);
std::string DiffToJson(const DiffReport& diff);

}  // namespace gw
