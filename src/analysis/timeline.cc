#include "analysis/timeline.h"

#include <algorithm>

#include "analysis/thresholds.h"
#include "base/saturating.h"

namespace gw {

namespace {

struct Interval {
  int64_t start;
  int64_t end;
  FeedCause cause;
  int32_t other_pid;
  bool on_cpu_only = false;  // a slow file syscall: I/O only where nothing else explains it
};

// Sweep rank of an interval (higher wins): twice the cause's precedence, so that a slow file
// syscall's time (rank 1) counts as I/O over running time but leaves its sleeps to the switch
// rows: a read of a pipe that sleeps until a DataLoader worker writes is a batch wait, resolved
// through its waker, not file I/O.
int Rank(const Interval& iv) { return iv.on_cpu_only ? 1 : 2 * CausePrecedence(iv.cause); }
constexpr int kRanks = 2 * 6 + 1;

FeedCause BlockedCause(int64_t kind) {
  if (kind == static_cast<int64_t>(SwitchKind::kBlockedIo)) return FeedCause::kBlockedIo;
  if (kind == static_cast<int64_t>(SwitchKind::kBlockedFault)) return FeedCause::kPageFault;
  return FeedCause::kBlockedOther;
}

// A run-queue wait [a, b) that ended on `cpu` (-1: not known): with the job's occupancy of that
// CPU, the stretches its threads held are theirs and the rest belongs to other processes (the
// switch row's process if it is not the job's, else unnamed); without it, all to `other`.
void AppendRunq(int64_t a, int64_t b, int32_t other, int32_t cpu, const CpuOccupancy* occupancy,
                std::vector<Interval>* out) {
  if (occupancy == nullptr || cpu < 0) {
    out->push_back({a, b, FeedCause::kRunqWait, other});
    return;
  }
  bool other_is_own = false;
  occupancy->ForEachHeld(cpu, a, b, [&](int64_t, int64_t, int32_t pid) {
    other_is_own |= pid == other;
  });
  int32_t outside = other > 0 && !other_is_own ? other : kOtherHolder;
  int64_t at = a;
  occupancy->ForEachHeld(cpu, a, b, [&](int64_t s, int64_t e, int32_t pid) {
    if (s > at) out->push_back({at, s, FeedCause::kRunqWait, outside});
    out->push_back({s, e, FeedCause::kRunqWait, pid});
    at = e;
  });
  if (b > at) out->push_back({at, b, FeedCause::kRunqWait, outside});
}

// back_on: the CPU the thread ran on next (-1: not known).
void AppendIntervals(const Event& e, int32_t back_on, const CpuOccupancy* occupancy,
                     std::vector<Interval>* out) {
  if (e.duration_ns <= 0) return;
  if (e.op == Op::kSchedSwitch) {
    int32_t other = e.other_pid == kNull ? 0 : static_cast<int32_t>(e.other_pid);
    int64_t runq = e.runq_ns == kNull ? 0 : std::clamp<int64_t>(e.runq_ns, 0, e.duration_ns);
    if (e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
      // Preempted: runnable from the moment it left the CPU.
      AppendRunq(e.ts_ns, e.End(), other, back_on, occupancy, out);
      return;
    }
    // Blocked: slept first, then waited for a CPU after the wake-up.
    int64_t wake = SaturatingSub(e.End(), runq);
    if (wake > e.ts_ns) out->push_back({e.ts_ns, wake, BlockedCause(e.kind), other});
    if (runq > 0) AppendRunq(wake, e.End(), other, back_on, occupancy, out);
    return;
  }
  if (IsSync(e.op) || CopyWaitedForStream(e) || FreeWaitedForDevice(e)) {
    out->push_back({e.ts_ns, e.End(), FeedCause::kSync, 0});
  } else if (IsMemcpy(e.op)) {
    out->push_back({e.ts_ns, e.End(), FeedCause::kMemcpy, 0});
  } else if (e.op == Op::kMajorFault || e.op == Op::kDirectReclaim) {
    out->push_back({e.ts_ns, e.End(), FeedCause::kPageFault, 0});
  } else if (e.op == Op::kRead || e.op == Op::kWrite) {
    // A slow file syscall: its time is the file I/O's, the CPU part (copying to or from the
    // page cache) included.
    out->push_back({e.ts_ns, e.End(), FeedCause::kBlockedIo, 0, true});
  }
}

}  // namespace

bool CopyWaitedForStream(const Event& e) {
  if (!IsMemcpy(e.op) || e.bytes == kNull || e.duration_ns < thresholds::kCopyWaitMinNs)
    return false;
  return static_cast<double>(e.bytes) <
         thresholds::kCopyWaitMaxBytesPerNs * static_cast<double>(e.duration_ns);
}

bool DrainedDevice(const Event& e) {
  if (!DrainsDevice(e.op) || !(e.ret == 0 || e.ret == kNull)) return false;
  return IsSync(e.op) || (e.addr != 0 && e.addr != kNull);
}

bool FreeWaitedForDevice(const Event& e) {
  return IsFree(e.op) && e.duration_ns >= thresholds::kFreeWaitMinNs && DrainedDevice(e);
}

int CausePrecedence(FeedCause cause) {
  switch (cause) {
    case FeedCause::kRunning:
      return 0;
    case FeedCause::kBlockedOther:
      return 1;
    case FeedCause::kSync:
      return 2;
    case FeedCause::kMemcpy:
      return 3;
    case FeedCause::kBlockedIo:
      return 4;
    case FeedCause::kPageFault:
      return 5;
    case FeedCause::kRunqWait:
      return 6;
    case FeedCause::kHelperWork:  // never in a thread's own timeline
    case FeedCause::kWorkerCompute:
    case FeedCause::kThreadHold:
      return 0;
  }
  return 0;
}

void AddTo(CauseTimes& sum, const CauseTimes& add) {
  for (size_t i = 0; i < kFeedCauseCount; ++i) sum[i] += add[i];
}

void CpuOccupancy::AddThread(int32_t pid, int32_t tid, const std::vector<const Event*>& rows) {
  std::vector<const Event*> switches;
  for (const Event* e : rows) {
    if (e->tid == tid && e->op == Op::kSchedSwitch) switches.push_back(e);
  }
  std::sort(switches.begin(), switches.end(),
            [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
  // Before the first row and after the last the thread may as well have been asleep: only the
  // stretches between two rows are known runs.
  for (size_t i = 1; i < switches.size(); ++i) {
    int64_t start = switches[i - 1]->End();
    int64_t end = switches[i]->ts_ns;
    if (switches[i]->cpu >= 0 && end > start) by_cpu_[switches[i]->cpu].push_back({start, end, pid});
  }
}

void CpuOccupancy::Finish() {
  for (auto& [cpu, runs] : by_cpu_) {
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.start < b.start; });
  }
}

ThreadTimeline ThreadTimeline::Build(int32_t pid, int32_t tid, int64_t begin, int64_t end,
                                     const std::vector<const Event*>& rows,
                                     const CpuOccupancy* occupancy) {
  ThreadTimeline t;
  t.pid_ = pid;
  t.tid_ = tid;
  t.begin_ = begin;
  t.end_ = std::max(begin, end);
  std::vector<Interval> intervals;
  std::vector<const Event*> switches;
  for (const Event* e : rows) {
    if (e->tid != tid) continue;
    if (e->op == Op::kSchedSwitch) {
      switches.push_back(e);
    } else {
      AppendIntervals(*e, -1, occupancy, &intervals);
    }
  }
  // A wait for a CPU ends on the CPU the thread runs on next: the one its next switch row left.
  std::sort(switches.begin(), switches.end(),
            [](const Event* a, const Event* b) { return a->ts_ns < b->ts_ns; });
  for (size_t i = 0; i < switches.size(); ++i) {
    int64_t next_cpu = i + 1 < switches.size() ? switches[i + 1]->cpu : kNull;
    int32_t back_on = next_cpu >= 0 ? static_cast<int32_t>(next_cpu) : -1;
    AppendIntervals(*switches[i], back_on, occupancy, &intervals);
  }
  // Sweep over interval boundaries; at each elementary stretch the highest-precedence active
  // cause wins.
  struct Edge {
    int64_t t;
    int delta;
    size_t index;
  };
  std::vector<Edge> edges;
  edges.reserve(intervals.size() * 2);
  for (size_t i = 0; i < intervals.size(); ++i) {
    Interval& iv = intervals[i];
    iv.start = std::max(iv.start, t.begin_);
    iv.end = std::min(iv.end, t.end_);
    if (iv.end <= iv.start) continue;
    edges.push_back({iv.start, +1, i});
    edges.push_back({iv.end, -1, i});
  }
  std::sort(edges.begin(), edges.end(), [](const Edge& a, const Edge& b) {
    return a.t != b.t ? a.t < b.t : a.delta < b.delta;
  });
  std::array<int, kRanks> active{};
  std::array<FeedCause, kRanks> rank_cause{};
  for (const Interval& iv : intervals) rank_cause[static_cast<size_t>(Rank(iv))] = iv.cause;
  int32_t runq_holder = 0;
  for (size_t k = 0; k < edges.size();) {
    int64_t now = edges[k].t;
    while (k < edges.size() && edges[k].t == now) {
      const Interval& iv = intervals[edges[k].index];
      active[static_cast<size_t>(Rank(iv))] += edges[k].delta;
      if (edges[k].delta > 0 && iv.cause == FeedCause::kRunqWait) runq_holder = iv.other_pid;
      ++k;
    }
    if (k >= edges.size()) break;
    int64_t next = edges[k].t;
    FeedCause best = FeedCause::kRunning;
    for (int r = kRanks - 1; r > 0; --r) {
      if (active[static_cast<size_t>(r)] > 0) {
        best = rank_cause[static_cast<size_t>(r)];
        break;
      }
    }
    if (best == FeedCause::kRunning || next <= now) continue;
    int32_t holder = best == FeedCause::kRunqWait ? runq_holder : 0;
    if (!t.segments_.empty() && t.segments_.back().end == now && t.segments_.back().cause == best &&
        t.segments_.back().other_pid == holder) {
      t.segments_.back().end = next;
    } else {
      t.segments_.push_back({now, next, best, holder});
    }
  }
  return t;
}

CauseTimes ThreadTimeline::Overlap(int64_t a, int64_t b) const {
  CauseTimes out{};
  a = std::max(a, begin_);
  b = std::min(b, end_);
  if (b <= a) return out;
  auto it = std::lower_bound(segments_.begin(), segments_.end(), a,
                             [](const TimelineSegment& s, int64_t v) { return s.end <= v; });
  int64_t busy = 0;
  for (; it != segments_.end() && it->start < b; ++it) {
    int64_t d = std::min(b, it->end) - std::max(a, it->start);
    if (d <= 0) continue;
    At(out, it->cause) += d;
    busy += d;
  }
  At(out, FeedCause::kRunning) += (b - a) - busy;
  return out;
}

void ThreadTimeline::RunqByHolder(int64_t a, int64_t b, std::map<int32_t, int64_t>* out) const {
  a = std::max(a, begin_);
  b = std::min(b, end_);
  auto it = std::lower_bound(segments_.begin(), segments_.end(), a,
                             [](const TimelineSegment& s, int64_t v) { return s.end <= v; });
  for (; it != segments_.end() && it->start < b; ++it) {
    if (it->cause != FeedCause::kRunqWait) continue;
    int64_t d = std::min(b, it->end) - std::max(a, it->start);
    if (d > 0) (*out)[it->other_pid] += d;
  }
}

}  // namespace gw
