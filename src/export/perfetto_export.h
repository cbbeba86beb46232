// `gpuwhy export --format perfetto`: one window of a recording as a Perfetto trace (TracePacket
// protobuf, docs/export.md), streamed from the store row by row.
//
// Tracks: a process track per process with rows in the window (the training process first),
// a thread track per thread carrying its CUDA calls (and slow host calls) as slices, a "state"
// child track per thread with its off-CPU intervals split into blocked / I/O / page fault /
// runnable-waiting-for-CPU and, for tracked processes, "running" between them; a "CUDA
// launches/s" counter per process (op_seconds); one track per CPU with the slices of the
// processes that preempted a traced thread there; the findings of `explain` over the same window
// as slices spanning the evidence window; a notes track stating drops and sampling. Timestamps
// are wall clock (sessions.wall_start_ns + ts).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "store/window.h"

namespace gw {

class OutputFile;
class StoreReader;

struct PerfettoExportOptions {
  // Resolved by store/window.h; the default is the whole session.
  WindowRequest window;
  int32_t pid = 0;       // 0 = every process; else this process and its descendants
  bool findings = true;  // run explain over the window and add its findings
  // Called now and then while rows are streamed (rows done, rows in the window).
  std::function<void(int64_t done, int64_t total)> progress;
};

struct PerfettoExportSummary {
  SessionWindow window;
  int64_t rows = 0;  // rows of the window read
  int64_t packets = 0;
  int64_t tracks = 0;
  int64_t slices = 0;        // every slice (CUDA calls, states, preemptions, findings)
  int64_t cuda_slices = 0;   // CUDA calls
  int64_t state_slices = 0;  // off-CPU pieces and running intervals
  int64_t instants = 0;
  int64_t counter_values = 0;
  int64_t findings = 0;
  int64_t clipped = 0;        // slices shortened or dropped to keep a track's slices nested
  int64_t drops = 0;          // the session's lost events
  std::string explain_error;  // why findings are missing, when explain failed
};

StatusOr<PerfettoExportSummary> ExportPerfetto(StoreReader& reader,
                                               const PerfettoExportOptions& options,
                                               OutputFile* out);

}  // namespace gw
