// `gpuwhy export --format folded`: the stacks of a `trace --stack` recording as folded stacks
// (`frame;frame;frame count`, outermost first), the input of flamegraph.pl, speedscope and
// inferno. One line per distinct stack: the process, then its frames.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "store/ops.h"
#include "store/window.h"

namespace gw {

class OutputFile;
class StoreReader;

enum class FoldedWeight { kCount, kTimeUs };

struct FoldedExportOptions {
  WindowRequest window;  // default: the whole session
  int32_t pid = 0;       // 0 = every process; else it and its descendants
  // The rows whose stacks are folded; empty = off-CPU samples (sched_switch).
  std::vector<Op> ops;
  FoldedWeight weight = FoldedWeight::kCount;  // rows, or their summed duration in µs
};

struct FoldedExportSummary {
  SessionWindow window;
  int64_t stacks = 0;  // distinct stacks read
  int64_t lines = 0;   // folded lines written (stacks that fold to the same frames merge)
  int64_t rows = 0;    // rows with a stack
  int64_t malformed = 0;
};

StatusOr<FoldedExportSummary> ExportFolded(StoreReader& reader, const FoldedExportOptions& options,
                                           OutputFile* out);

// `cudaStreamSync`, the CUDA API spelling `cudaStreamSynchronize`, or `off-cpu` (sched_switch).
std::optional<Op> FoldedOpFromName(const std::string& name);

}  // namespace gw
