#include "store/thread_rollups.h"

#include <algorithm>

namespace gw {

void ThreadRollups::Add(const Event& e) {
  bool sched = e.op == Op::kSchedSwitch;
  Layer layer = OpLayer(e.op);
  bool cuda = (layer == Layer::kCudaRuntime || layer == Layer::kCudaDriver) && !IsLaunch(e.op) &&
              e.op != Op::kGraphNode;
  if (!sched && !cuda) return;
  int64_t sec = e.ts_ns / 1'000'000'000;
  newest_sec_ = std::max(newest_sec_, sec);
  int64_t bucket = sec - ((sec % kThreadRollupSeconds) + kThreadRollupSeconds) %
                             kThreadRollupSeconds;
  ThreadRollup& r = buckets_[{bucket, e.pid, e.tid}];
  if (cuda) {
    ++r.cuda_calls;
    if (IsSync(e.op)) {
      ++r.syncs;
      r.sync_ns += e.duration_ns;
    }
    return;
  }
  ++r.switches;
  int64_t runq = e.runq_ns == kNull ? 0 : std::clamp<int64_t>(e.runq_ns, 0, e.duration_ns);
  int64_t asleep = e.duration_ns - runq;
  r.runq_ns += runq;
  switch (e.kind) {
    case static_cast<int64_t>(SwitchKind::kPreempted): ++r.preempted; break;
    case static_cast<int64_t>(SwitchKind::kBlocked): r.blocked_ns += asleep; break;
    case static_cast<int64_t>(SwitchKind::kBlockedIo): r.io_ns += asleep; break;
    case static_cast<int64_t>(SwitchKind::kBlockedFault): r.fault_ns += asleep; break;
    default: r.blocked_ns += asleep; break;
  }
  if (e.kind != static_cast<int64_t>(SwitchKind::kPreempted) && e.waker_pid != kNull) {
    if (e.waker_pid == 0) {
      ++r.woken_irq;
    } else if (e.waker_pid == e.pid) {
      ++r.woken_same;
    } else {
      ++r.woken_other;
    }
  }
}

Status ThreadRollups::Flush(bool all, const WriteFn& write) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (!all && it->first.sec + kThreadRollupSeconds > newest_sec_ - 2) {
      ++it;
      continue;
    }
    RETURN_IF_ERROR(write(it->first, it->second));
    it = buckets_.erase(it);
  }
  return Status::Ok();
}

}  // namespace gw
