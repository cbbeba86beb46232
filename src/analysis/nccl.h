// Multi-rank NCCL jobs (docs/nccl.md); explain.h exposes the view across nodes to `fleet`. Which
// ranks enqueue each collective late, and how long the other ranks then waited for them in their
// next sync. Pure: NCCL rows and sync rows in, numbers out (unit tests: analysis_test.cc, "Nccl").
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/window_rows.h"

namespace gw {

// One rank of a communicator, over the window's complete collectives (those every rank's row
// is in).
struct NcclRankStats {
  int32_t pid = 0;
  int32_t node = -1;  // AnalyzeNcclAcrossNodes: index into its nodes; -1 on one host
  int64_t rank = -1;
  int64_t collectives = 0;     // complete collectives
  int64_t late_median_ns = 0;  // lateness = this rank's enqueue − the earliest rank's
  int64_t late_mean_ns = 0;
  int64_t last = 0;  // collectives this rank enqueued last
  // Seconds this rank sat in its next sync after a collective, from its sync's start until the
  // straggler enqueued the same collective (only for collectives the straggler enqueued last;
  // 0 for the straggler itself): the wait the straggler caused, measured.
  double waited_s = 0;
};

struct NcclCommunicator {
  std::string comm;                  // "nccl <id hash>"
  int64_t nranks = 0;                // from the init rows (0: not seen)
  int64_t collectives = 0;           // complete collectives in the window
  int64_t incomplete = 0;            // collectives not every rank's row was seen for
  std::string op;                    // the most frequent collective op
  std::vector<NcclRankStats> ranks;  // by rank (then pid)
  // The straggler: index into `ranks`, -1 when none. A rank is one when its median lateness
  // exceeds the others' pooled median by more than max(kNcclLateFloorNs, kNcclMadK × 1.4826 ×
  // their MAD) and it enqueued at least kNcclLastShare of the collectives last.
  int straggler = -1;
  int64_t threshold_ns = 0;    // the lateness the straggler had to exceed
  double others_waited_s = 0;  // sum of the other ranks' waited_s
};

struct NcclJob {
  std::vector<NcclCommunicator> comms;  // communicators with at least 2 ranks seen
  int64_t unaligned_rows = 0;           // collectives of communicators whose init was not seen
};

// `calls`: NCCL rows by ts (NcclCallRow); `syncs`: sync rows (IsSync) of every pid, by ts.
NcclJob AnalyzeNccl(const std::vector<NcclCallRow>& calls, const std::vector<Event>& syncs);

// One node's rows for the view across nodes (`fleet --nccl`): timestamps are that node's
// session ns; wall_start_ns (sessions.wall_start_ns) puts them on its wall clock.
struct NcclNodeRows {
  std::string node;
  int64_t wall_start_ns = 0;
  std::vector<NcclCallRow> calls;  // by ts
  std::vector<Event> syncs;        // by ts
};

// How a node's clock was aligned to the first node's: the offset added to its wall-clock
// times, from the collectives both saw complete. A collective completes at one instant on every
// rank (the last rank's arrival releases them all), and each rank sees it in its next sync's
// return; the offset is the median, over shared collectives, of (first node's completion −
// this node's), each node's completion the median over its ranks; `error_ns` is their median
// absolute deviation (sync wake-up jitter and the clocks' drift over the window).
struct NcclNodeClock {
  std::string node;
  int64_t offset_ns = 0;
  int64_t error_ns = 0;
  int64_t collectives = 0;  // shared complete collectives the offset stands on (0: not aligned)
};

struct NcclFleet {
  NcclJob job;                        // ranks' `node` set; times on the first node's wall clock
  std::vector<NcclNodeClock> clocks;  // per node, in input order (the first: offset 0)
};

// The ranks of every node lined up on one clock and analysed as one job (AnalyzeNccl).
NcclFleet AnalyzeNcclAcrossNodes(const std::vector<NcclNodeRows>& nodes);

// Whether two processes are ranks of one communicator: peers of a multi-GPU job, each on a GPU
// of its own (NCCL refuses two ranks on one GPU), not neighbours sharing a GPU.
bool NcclPeers(const NcclJob& job, int32_t a, int32_t b);

// Median and median absolute deviation of `v` (0 for empty), nearest-rank low median.
int64_t MedianNs(std::vector<int64_t> v);
int64_t MadNs(const std::vector<int64_t>& v);

}  // namespace gw
