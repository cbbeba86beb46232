// The rollup tier's reads (issue 19): what explaining a long window needs without its raw rows.
// `thread_rollups` (schema 7) per thread and 10 s bucket, how many raw rows a window holds
// (from op_seconds, without reading them) and where the session's raw rows begin after
// --max-db pruned the oldest.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "base/status.h"
#include "store/thread_rollups.h"
#include "store/window.h"
#include "store/window_rows.h"

namespace gw {

class StoreReader;

struct ThreadRollupRow {
  ThreadRollupKey key;
  ThreadRollup r;
};

struct RollupWindow {
  std::vector<ThreadRollupRow> threads;  // buckets overlapping the window, by (sec, pid, tid)
  std::map<int32_t, ProcessRecord> processes;
  TierSpan span;  // where the session's raw rows and rollups begin and end
  int32_t tracer_pid = 0;  // sessions.tracer_pid
};

// Raw rows of the window as op_seconds counts them (launch counts excluded: launches are not
// rows), read from op_seconds alone.
StatusOr<int64_t> EstimateWindowRows(StoreReader& reader, const SessionWindow& window);

// The window's thread rollups and the session's processes; `span` (ReadTierSpan, read by the
// caller) is kept with them. Only for sessions that have rollups (span.has_rollups).
StatusOr<RollupWindow> ReadRollupWindow(StoreReader& reader, const SessionWindow& window,
                                        const TierSpan& span);

}  // namespace gw
