#include "analysis/facts.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "analysis/budget.h"
#include "analysis/cpu_profile.h"
#include "analysis/thresholds.h"

namespace gw {

namespace {

namespace th = thresholds;

constexpr int64_t kNsPerSec = 1'000'000'000;

bool IsCudaOp(Op op) { return OpLayer(op) != Layer::kHost; }

// a / b rounded down (b > 0), for every a (INT64_MIN included).
int64_t FloorDiv(int64_t a, int64_t b) { return a / b - (a % b < 0 ? 1 : 0); }

double Share(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

int64_t HostWait(const CauseTimes& t) {
  return At(t, FeedCause::kRunqWait) + At(t, FeedCause::kBlockedIo) + At(t, FeedCause::kPageFault);
}

// Lifetime of a process clipped to the window.
void Lifetime(const WindowData& w, int32_t pid, int64_t* begin, int64_t* end) {
  *begin = w.from;
  *end = w.to;
  auto it = w.processes.find(pid);
  if (it == w.processes.end()) return;
  if (it->second.first_ts != kNull) *begin = std::max(*begin, it->second.first_ts);
  if (it->second.exit_ts != kNull) *end = std::min(*end, it->second.exit_ts);
  *end = std::max(*begin, *end);
}

// Rows of tracked processes in the window, a driver call nested in a runtime call on the same
// thread dropped (the runtime call stands for both).
std::vector<Event> WithoutNestedDriverCalls(const std::vector<Event>& rows) {
  std::vector<Event> out;
  out.reserve(rows.size());
  std::map<int32_t, int64_t> runtime_end;  // tid → end of its latest runtime call
  for (const Event& e : rows) {
    Layer layer = OpLayer(e.op);
    if (layer == Layer::kCudaDriver) {
      auto it = runtime_end.find(e.tid);
      if (it != runtime_end.end() && e.ts_ns < it->second && e.End() <= it->second) continue;
    } else if (layer == Layer::kCudaRuntime) {
      int64_t& end = runtime_end[e.tid];
      end = std::max(end, e.End());
    }
    out.push_back(e);
  }
  return out;
}

// The share of the feeders' run-queue time not held by the job that the cgroup's throttling
// explains over [a, b) (the mean of its seconds' shares); 0 without a quota.
double QuotaShare(const Facts& f, int64_t a, int64_t b) {
  if (!f.quota || f.quota->share_by_sec.empty() || b <= a) return 0;
  const std::vector<double>& share = f.quota->share_by_sec;
  double sum = 0;
  for (int64_t i = std::max<int64_t>(0, FloorDiv(a - f.w->from, kNsPerSec));
       i < static_cast<int64_t>(share.size()); ++i) {
    int64_t s0 = f.w->from + i * kNsPerSec;
    if (s0 >= b) break;
    int64_t cut = std::min(b, s0 + kNsPerSec) - std::max(a, s0);
    if (cut > 0) sum += share[static_cast<size_t>(i)] * static_cast<double>(cut);
  }
  return sum / static_cast<double>(b - a);
}

// Moves `share` of the run-queue time of holders that are not the job's (other processes,
// unnamed, unknown) to kQuotaHolder: while the cgroup is throttled, no CPU runs its threads.
void CarveQuota(const Facts& f, double share, std::map<int32_t, int64_t>* holders) {
  if (share <= 0) return;
  int64_t moved = 0;
  for (auto& [pid, ns] : *holders) {
    if (pid == kQuotaHolder || (pid > 0 && IsOwnPid(f, pid))) continue;
    auto q = static_cast<int64_t>(std::min(1.0, share) * static_cast<double>(ns));
    ns -= q;
    moved += q;
  }
  if (moved > 0) (*holders)[kQuotaHolder] += moved;
}

// Calls wait(start, end) for each of tl's run-queue waits (its adjacent run-queue segments,
// whatever their holders) that overlaps [a, b), in order.
template <typename F>
void ForEachRunqWait(const ThreadTimeline& tl, int64_t a, int64_t b, F wait) {
  const std::vector<TimelineSegment>& segs = tl.segments();
  auto it = std::lower_bound(segs.begin(), segs.end(), a,
                             [](const TimelineSegment& s, int64_t v) { return s.end <= v; });
  // Back to the first segment of the wait `it` is in.
  while (it != segs.end() && it != segs.begin() && it->cause == FeedCause::kRunqWait &&
         std::prev(it)->cause == FeedCause::kRunqWait && std::prev(it)->end == it->start) {
    --it;
  }
  while (it != segs.end() && it->start < b) {
    if (it->cause != FeedCause::kRunqWait) {
      ++it;
      continue;
    }
    auto last = it;
    while (std::next(last) != segs.end() && std::next(last)->cause == FeedCause::kRunqWait &&
           std::next(last)->start == last->end) {
      ++last;
    }
    wait(it, std::next(last));
    it = std::next(last);
  }
}

// tl's run-queue time over [a, b) by holder, added to *out, with the throttled cgroup's part
// carved out: with a refill grid, the waits that ended on it (but for the stretches one of the
// job's own threads held the CPU); without, second by second in the share throttling explains.
void RunqHoldersIn(const Facts& f, const ThreadTimeline& tl, int64_t a, int64_t b,
                   std::map<int32_t, int64_t>* out) {
  if (f.quota && f.quota->refill_phase_ns >= 0) {
    ForEachRunqWait(tl, a, b, [&](auto first, auto end) {
      bool refill = f.quota->EndsOnRefill(std::prev(end)->end);
      for (auto s = first; s != end; ++s) {
        int64_t d = std::min(b, s->end) - std::max(a, s->start);
        if (d <= 0) continue;
        bool own = s->other_pid > 0 && IsOwnPid(f, s->other_pid);
        (*out)[refill && !own ? kQuotaHolder : s->other_pid] += d;
      }
    });
    return;
  }
  if (!f.quota || f.quota->share_by_sec.empty()) {
    tl.RunqByHolder(a, b, out);
    return;
  }
  for (int64_t s0 = a; s0 < b;) {
    int64_t s1 = std::min(b, f.w->from + (FloorDiv(s0 - f.w->from, kNsPerSec) + 1) * kNsPerSec);
    std::map<int32_t, int64_t> part;
    tl.RunqByHolder(s0, s1, &part);
    CarveQuota(f, QuotaShare(f, s0, s1), &part);
    for (const auto& [pid, ns] : part) (*out)[pid] += ns;
    s0 = s1;
  }
}

// Run-queue ns by the process that held the CPU, credited to the job's own threads or to
// others (kOtherHolder: another process, unnamed) or to the CPU quota (kQuotaHolder); an unknown
// holder (0) is split by the job-wide share.
void CreditRunqHolders(const Facts& f, const std::map<int32_t, int64_t>& by_holder,
                       BudgetTimes* d) {
  for (const auto& [pid, ns] : by_holder) {
    if (pid == kQuotaHolder) {
      At(*d, BudgetCause::kRunqQuota) += ns;
      continue;
    }
    if (pid > 0 || pid == kOtherHolder) {
      At(*d, pid > 0 && IsOwnPid(f, pid) ? BudgetCause::kRunqOwn : BudgetCause::kRunqOther) += ns;
      continue;
    }
    auto own = static_cast<int64_t>(f.own_runq_share * static_cast<double>(ns));
    At(*d, BudgetCause::kRunqOwn) += own;
    At(*d, BudgetCause::kRunqOther) += ns - own;
  }
}

// Adds the resolved stretches' `field` pro rata over [a, b) to *out; returns the ns moved.
template <typename Times>
int64_t SpreadPathSpans(const Facts& f, int64_t a, int64_t b, Times PathSpan::*field, Times* out) {
  int64_t moved = 0;
  auto it = std::lower_bound(f.path_spans.begin(), f.path_spans.end(), a,
                             [](const PathSpan& s, int64_t v) { return s.end <= v; });
  for (; it != f.path_spans.end() && it->start < b; ++it) {
    int64_t len = it->end - it->start;
    int64_t cut = std::min(b, it->end) - std::max(a, it->start);
    if (len <= 0 || cut <= 0) continue;
    const Times& part = (*it).*field;
    for (size_t i = 0; i < part.size(); ++i) {
      auto v = static_cast<int64_t>(static_cast<double>(part[i]) * static_cast<double>(cut) /
                                    static_cast<double>(len));
      (*out)[i] += v;
      moved += v;
    }
  }
  return moved;
}

// One sleep of a thread: from leaving the CPU to being woken, and by whom.
struct Sleep {
  int64_t start = 0;
  int64_t wake = 0;
  int64_t waker_pid = kNull;
  int64_t waker_tid = kNull;
  // A wait for CPython's GIL: woken by a thread that had just released it (kind 4), or a timed
  // wait that ran out with the thread's next sleep, right after, being one (take_gil() waits
  // in switch-interval slices, asking the holder to drop the lock after each).
  bool gil = false;
  int64_t stack_id = kNull;  // where the thread left the CPU (trace --stack)
};

// How soon after a timed-out sleep the next one must begin to be the same GIL wait: the
// waiter only sets the drop request and waits again.
constexpr int64_t kGilRetryGapNs = 200'000;

// The job as the critical path sees it: who each thread is, where its time went, and what woke
// it from each sleep.
class JobGraph {
 public:
  // The delivering workers' batch cycles seen while resolving (Facts::batch_cycles).
  const BudgetTimes& batch_cycles() const { return batch_cycles_; }

  JobGraph(const Facts& f, const std::map<int32_t, std::vector<const Event*>>& rows_by_tid,
           const std::map<int32_t, ThreadTimeline>& tls)
      : f_(f), tls_(tls) {
    for (const auto& [tid, rows] : rows_by_tid) {
      std::vector<Sleep>& sleeps = sleeps_[tid];
      for (const Event* e : rows) {
        if (e->op != Op::kSchedSwitch || e->kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
          continue;
        }
        int64_t runq = e->runq_ns == kNull ? 0 : std::clamp<int64_t>(e->runq_ns, 0, e->duration_ns);
        sleeps.push_back({e->ts_ns, e->End() - runq, e->waker_pid, e->waker_tid,
                          e->kind == static_cast<int64_t>(SwitchKind::kBlockedGil), e->stack_id});
      }
      std::sort(sleeps.begin(), sleeps.end(),
                [](const Sleep& a, const Sleep& b) { return a.start < b.start; });
      for (size_t i = sleeps.size(); i-- > 1;) {
        Sleep& s = sleeps[i - 1];
        if (!s.gil && s.waker_pid == 0 && sleeps[i].gil &&
            sleeps[i].start - s.wake <= kGilRetryGapNs) {
          s.gil = true;
        }
      }
    }
    for (int32_t pid : f.worker_pids) workers_.insert(pid);
    // The on-CPU profile checks the timelines: a thread with no off-CPU rows reads as running
    // (a sleep that began before the window and outlasts it leaves no row), but if it ran, the
    // profile sampled it.
    if (f.w != nullptr && f.w->profile_hz > 0) {
      std::map<int32_t, int64_t> samples;
      for (const CpuSampleRow& s : f.w->cpu_samples) ++samples[s.tid];
      for (const auto& [tid, tl] : tls_) {
        if (!ProfileAgrees(tl, f.w->profile_hz, samples[tid])) not_running_.insert(tid);
      }
    }
    helpers_.insert(f.helper_tids.begin(), f.helper_tids.end());
    for (const auto& [tid, sleeps] : sleeps_) {
      for (const Sleep& s : sleeps) {
        if (s.gil && s.waker_tid != kNull && s.waker_pid == f.main_pid) {
          gil_holders_.insert(static_cast<int32_t>(s.waker_tid));
        }
      }
    }
  }

  // The main thread's own timeline with every "blocked otherwise" stretch resolved through the
  // thread that ended it. Fills the batch and helper wait tallies, each span's budget detail and
  // who held the path in its waits.
  CauseTimes ResolveMain(BatchWaits* batches, HelperWaits* helpers, std::vector<PathSpan>* spans,
                         PathHolders* holders) {
    CauseTimes out{};
    const ThreadTimeline& tl = tls_.at(f_.main_tid);
    AddTo(out, tl.Totals());
    int64_t blocked = At(out, FeedCause::kBlockedOther);
    At(out, FeedCause::kBlockedOther) = 0;
    int64_t resolved = 0;
    const std::vector<Sleep>* sleeps = SleepsOf(f_.main_tid);
    for (const TimelineSegment& seg : tl.segments()) {
      if (seg.cause != FeedCause::kBlockedOther) continue;
      const Sleep* s = sleeps ? Containing(*sleeps, seg.start) : nullptr;
      BudgetTimes detail{};
      CauseTimes part = ResolveWait(f_.main_tid, s, seg.start, seg.end, 0, &detail);
      for (int64_t v : part) resolved += v;
      // Whatever the resolution left uncovered (a waker's lifetime shorter than the wait).
      int64_t covered = 0;
      for (int64_t v : detail) covered += v;
      if (covered < seg.end - seg.start) {
        At(detail, BudgetCause::kNotAttributed) += seg.end - seg.start - covered;
      }
      spans->push_back({seg.start, seg.end, part, detail});
      AddTo(out, part);
    }
    At(out, FeedCause::kBlockedOther) += blocked - resolved;  // rounding safety: totals hold
    *holders = holders_;
    // Tally the waits per sleep (a sleep may span several segments).
    if (sleeps) {
      for (const Sleep& s : *sleeps) {
        int64_t waited = At(tl.Overlap(s.start, s.wake), FeedCause::kBlockedOther);
        if (waited < th::kBatchWaitMinNs) continue;
        switch (Classify(s)) {
          case WaitKind::kBatch:
            ++batches->count;
            batches->total_ns += waited;
            batches->durations.push_back(waited);
            AddTo(batches->delivered, DeliveringWorkerState(s, s.start, s.wake));
            break;
          case WaitKind::kHelper:
            ++helpers->count;
            helpers->total_ns += waited;
            break;
          case WaitKind::kOther:
            break;
        }
      }
    }
    return out;
  }

 private:
  enum class WaitKind { kBatch, kHelper, kOther };

  const std::vector<Sleep>* SleepsOf(int32_t tid) const {
    auto it = sleeps_.find(tid);
    return it == sleeps_.end() ? nullptr : &it->second;
  }

  static const Sleep* Containing(const std::vector<Sleep>& sleeps, int64_t t) {
    auto it = std::upper_bound(sleeps.begin(), sleeps.end(), t,
                               [](int64_t v, const Sleep& s) { return v < s.start; });
    if (it == sleeps.begin()) return nullptr;
    --it;
    return t < it->wake ? &*it : nullptr;
  }

  bool IsWorkerPid(int64_t pid) const {
    return pid != kNull && workers_.count(static_cast<int32_t>(pid)) > 0;
  }
  bool IsMainProcess(int64_t pid) const { return pid == f_.main_pid; }
  // The recording gpuwhy: its wake-ups (the start gate of `trace -- CMD`) are the tracing's, not
  // a program the job depends on; they stay unattributed.
  bool IsTracer(int64_t pid) const {
    return f_.w != nullptr && f_.w->tracer_pid > 0 && pid == f_.w->tracer_pid;
  }
  // A waker outside the job (not the main process, not a worker) and not the tracer: a
  // subprocess the job waited for, the far end of a pipe or socket.
  bool IsOtherProgram(int64_t pid) const {
    return pid > 0 && !IsMainProcess(pid) && !IsWorkerPid(pid) && !IsTracer(pid);
  }

  WaitKind Classify(const Sleep& s) const {
    if (s.waker_tid == kNull) return f_.worker_pids.empty() ? WaitKind::kOther : WaitKind::kBatch;
    if (IsWorkerPid(s.waker_pid)) return WaitKind::kBatch;
    if (IsMainProcess(s.waker_pid) && s.waker_tid != f_.main_tid) {
      // A relay (the pin-memory thread, which may call CUDA for pinned blocks) that a worker
      // woke last: a batch wait. Otherwise a CUDA helper's (backward) or nothing known.
      if (RelayedWorker(s)) return WaitKind::kBatch;
      return helpers_.count(static_cast<int32_t>(s.waker_tid)) ? WaitKind::kHelper
                                                               : WaitKind::kOther;
    }
    return WaitKind::kOther;
  }

  // A thread of the training process without CUDA calls that woke the main thread (the
  // pin-memory thread): the worker that woke it last before that, if any.
  std::optional<int32_t> RelayedWorker(const Sleep& s) const {
    const std::vector<Sleep>* relay = SleepsOf(static_cast<int32_t>(s.waker_tid));
    if (!relay) return std::nullopt;
    int looked = 0;
    for (auto it = relay->rbegin(); it != relay->rend() && looked < 8; ++it) {
      if (it->wake > s.wake) continue;
      ++looked;
      if (IsWorkerPid(it->waker_pid)) return static_cast<int32_t>(it->waker_pid);
    }
    return std::nullopt;
  }

  // What the pipeline was doing during a batch wait: the delivering worker's busiest thread;
  // without one, instant by instant the most blocking state of any worker.
  CauseTimes DeliveringWorkerState(const Sleep& s, int64_t a, int64_t b) const {
    if (const ThreadTimeline* tl = DeliveringWorker(s)) return tl->Overlap(a, b);
    return AnyWorkerState(a, b);
  }

  // The busiest thread of the worker that delivered the batch ending sleep `s` (directly or
  // through a relay); null when unknown.
  const ThreadTimeline* DeliveringWorker(const Sleep& s) const {
    std::optional<int32_t> worker;
    if (IsWorkerPid(s.waker_pid)) {
      worker = static_cast<int32_t>(s.waker_pid);
    } else if (s.waker_tid != kNull && IsMainProcess(s.waker_pid)) {
      worker = RelayedWorker(s);
    }
    if (!worker) return nullptr;
    auto rep = f_.worker_rep_tid.find(*worker);
    if (rep == f_.worker_rep_tid.end()) return nullptr;
    auto tl = tls_.find(rep->second);
    return tl == tls_.end() ? nullptr : &tl->second;
  }

  // A thread of the main process that calls no CUDA, relays no worker's batches and has a
  // timeline of its own: a sibling whose running can hold the main thread (the GIL, a lock).
  bool IsSibling(int32_t tid) const {
    return tid != f_.main_tid && !helpers_.count(tid) && tls_.count(tid) > 0 &&
           tls_.at(tid).pid() == f_.main_pid;
  }

  // kGil: a sibling that held the GIL (the sleep's evidence says so), kSibling otherwise.
  enum class Via { kHelper, kSibling, kGil, kWorker };

  // The sibling of the main thread (IsSibling) other than `self` that ran most over [a, b), if
  // it ran at least thresholds::kThreadHoldBusyShare of it.
  const ThreadTimeline* BusySibling(int32_t self, int64_t a, int64_t b) const {
    const ThreadTimeline* best = nullptr;
    int64_t best_ns = 0;
    for (const auto& [tid, tl] : tls_) {
      if (tid == self || !IsSibling(tid) || not_running_.count(tid)) continue;
      int64_t ran = At(tl.Overlap(a, b), FeedCause::kRunning);
      if (ran > best_ns) {
        best_ns = ran;
        best = &tl;
      }
    }
    return static_cast<double>(best_ns) >= th::kThreadHoldBusyShare * static_cast<double>(b - a)
               ? best
               : nullptr;
  }

  // False when the profile sampled a thread far less than its timeline's running time implies
  // (under a tenth of the samples expected, where at least 20 were): it was not running.
  static bool ProfileAgrees(const ThreadTimeline& tl, int64_t hz, int64_t samples) {
    double expected =
        static_cast<double>(At(tl.Totals(), FeedCause::kRunning)) * static_cast<double>(hz) / 1e9;
    if (expected < static_cast<double>(th::kProfileMinSamples)) return true;
    return static_cast<double>(samples) >= 0.1 * expected;
  }

  // A thread's own time over [a, b) by budget cause, "blocked otherwise" left to the caller.
  void CreditThread(const ThreadTimeline& tl, int64_t a, int64_t b, Via via, BudgetTimes* d) const {
    CauseTimes own = tl.Overlap(a, b);
    int64_t run = At(own, FeedCause::kRunning);
    int64_t copies = At(own, FeedCause::kMemcpy);
    int64_t syncs = At(own, FeedCause::kSync);
    switch (via) {
      case Via::kWorker:
        At(*d, BudgetCause::kBatchCompute) += run + copies + syncs;
        At(*d, BudgetCause::kBatchIo) += At(own, FeedCause::kBlockedIo);
        break;
      case Via::kHelper:
      case Via::kSibling:
      case Via::kGil:
        if (via == Via::kHelper) {
          At(*d, BudgetCause::kHelperCompute) += run;
        } else {
          At(*d, via == Via::kGil ? BudgetCause::kGilHold : BudgetCause::kThreadHold) += run;
          if (run > 0) (via == Via::kGil ? holders_.gil : holders_.thread)[tl.tid()] += run;
        }
        At(*d, BudgetCause::kMemcpy) += copies;
        At(*d, BudgetCause::kSyncWait) += syncs;
        At(*d, BudgetCause::kProcessIo) += At(own, FeedCause::kBlockedIo);
        if (At(own, FeedCause::kBlockedIo) > 0) {
          holders_.io[tl.tid()] += At(own, FeedCause::kBlockedIo);
        }
        break;
    }
    At(*d, BudgetCause::kPageFault) += At(own, FeedCause::kPageFault);
    std::map<int32_t, int64_t> holders;
    RunqHoldersIn(f_, tl, a, b, &holders);
    CreditRunqHolders(f_, holders, d);
  }

  // AnyWorkerState's instant-by-instant merge over [a, b) by budget cause (no single thread, so
  // no holder).
  void CreditAnyWorker(const CauseTimes& c, int64_t a, int64_t b, BudgetTimes* d) const {
    At(*d, BudgetCause::kBatchCompute) +=
        At(c, FeedCause::kRunning) + At(c, FeedCause::kMemcpy) + At(c, FeedCause::kSync);
    At(*d, BudgetCause::kBatchIo) += At(c, FeedCause::kBlockedIo);
    At(*d, BudgetCause::kPageFault) += At(c, FeedCause::kPageFault);
    std::map<int32_t, int64_t> holders = {{0, At(c, FeedCause::kRunqWait)}};
    CarveQuota(f_, QuotaShare(f_, a, b), &holders);
    CreditRunqHolders(f_, holders, d);
    At(*d, BudgetCause::kNotAttributed) += At(c, FeedCause::kBlockedOther);
  }

  // The delivering worker's sleeps over [a, b), by what ended them: a timer or an interrupt (a
  // network reply, a sleep between retries) is the batch's wait; another program is that
  // program's; the job itself (the main process handing it the next index) means the worker was
  // idle, which nothing is credited with.
  void CreditWorkerSleeps(const ThreadTimeline& tl, int64_t a, int64_t b, BudgetTimes* d,
                          bool note_programs = true) const {
    const std::vector<Sleep>* sleeps = SleepsOf(tl.tid());
    for (const TimelineSegment& seg : tl.segments()) {
      if (seg.cause != FeedCause::kBlockedOther || seg.end <= a || seg.start >= b) continue;
      int64_t x = std::max(a, seg.start), y = std::min(b, seg.end);
      const Sleep* s = sleeps ? Containing(*sleeps, x) : nullptr;
      BudgetCause cause = BudgetCause::kNotAttributed;
      if (s != nullptr && s->waker_tid != kNull && !s->gil) {
        if (s->waker_pid == 0) {
          cause = BudgetCause::kBatchWait;
        } else if (IsOtherProgram(s->waker_pid)) {
          cause = BudgetCause::kOtherProgram;
          if (note_programs) holders_.program[static_cast<int32_t>(s->waker_pid)] += y - x;
        }
      }
      At(*d, cause) += y - x;
    }
  }

  // The delivering worker's cycle for the batch that ended sleep `s` (whose piece [a, ...) is
  // being resolved): from the worker's previous delivery the path waited for (else a) to this
  // one, by what the worker spent it on. The waits overlap only the end of a cycle; the whole
  // cycle says what limits how fast the worker delivers (batch_cycles in facts.h).
  void NoteBatchCycle(const ThreadTimeline& tl, const Sleep& s, int64_t a) const {
    auto [it, first] = last_delivery_.try_emplace(tl.tid(), a);
    if (!first && s.wake <= it->second) return;  // this delivery is counted
    int64_t from = std::max(tl.begin(), it->second);
    it->second = s.wake;
    if (s.wake <= from) return;
    CauseTimes own = tl.Overlap(from, s.wake);
    At(batch_cycles_, BudgetCause::kBatchCompute) += At(own, FeedCause::kRunning) +
                                                     At(own, FeedCause::kMemcpy) +
                                                     At(own, FeedCause::kSync);
    At(batch_cycles_, BudgetCause::kBatchIo) += At(own, FeedCause::kBlockedIo);
    BudgetTimes sleeps{};
    CreditWorkerSleeps(tl, from, s.wake, &sleeps, false);
    At(batch_cycles_, BudgetCause::kBatchWait) += At(sleeps, BudgetCause::kBatchWait);
  }

  // [a, b) of a batch wait, by what the delivering worker (or, unknown, any worker) was doing.
  CauseTimes ResolveBatch(const Sleep* s, int64_t a, int64_t b, BudgetTimes* d) const {
    if (const ThreadTimeline* tl = s ? DeliveringWorker(*s) : nullptr) {
      NoteBatchCycle(*tl, *s, a);
      CauseTimes c = tl->Overlap(a, b);
      CreditThread(*tl, a, b, Via::kWorker, d);
      CreditWorkerSleeps(*tl, a, b, d);
      return AsPipeline(c);
    }
    CauseTimes c = AnyWorkerState(a, b);
    CreditAnyWorker(c, a, b, d);
    return AsPipeline(c);
  }

  // Instant by instant over the workers' busiest threads: waiting for a CPU > I/O > page fault >
  // computing > idle.
  CauseTimes AnyWorkerState(int64_t a, int64_t b) const {
    CauseTimes out{};
    if (b <= a) return out;
    std::vector<const ThreadTimeline*> reps;
    for (const auto& [pid, tid] : f_.worker_rep_tid) {
      if (auto tl = tls_.find(tid); tl != tls_.end()) reps.push_back(&tl->second);
    }
    if (reps.empty()) {
      At(out, FeedCause::kBlockedOther) = b - a;
      return out;
    }
    std::vector<int64_t> cuts = {a, b};
    for (const ThreadTimeline* tl : reps) {
      for (const TimelineSegment& seg : tl->segments()) {
        if (seg.end <= a || seg.start >= b) continue;
        cuts.push_back(std::max(a, seg.start));
        cuts.push_back(std::min(b, seg.end));
      }
      if (tl->begin() > a && tl->begin() < b) cuts.push_back(tl->begin());
      if (tl->end() > a && tl->end() < b) cuts.push_back(tl->end());
    }
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    constexpr FeedCause kOrder[] = {FeedCause::kRunqWait, FeedCause::kBlockedIo,
                                    FeedCause::kPageFault, FeedCause::kRunning};
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      int64_t x = cuts[i], y = cuts[i + 1];
      FeedCause best = FeedCause::kBlockedOther;
      int rank = 99;
      for (const ThreadTimeline* tl : reps) {
        if (tl->begin() > x || tl->end() < y) continue;
        CauseTimes c = tl->Overlap(x, y);
        for (int r = 0; r < 4; ++r) {
          if (At(c, kOrder[r]) > 0 && r < rank) {
            rank = r;
            best = kOrder[r];
          }
        }
      }
      At(out, best) += y - x;
    }
    return out;
  }

  // A worker's state, as the critical path reads it: computing is the pipeline's own work.
  static CauseTimes AsPipeline(CauseTimes c) {
    At(c, FeedCause::kWorkerCompute) +=
        At(c, FeedCause::kRunning) + At(c, FeedCause::kMemcpy) + At(c, FeedCause::kSync);
    At(c, FeedCause::kRunning) = 0;
    At(c, FeedCause::kMemcpy) = 0;
    At(c, FeedCause::kSync) = 0;
    return c;
  }

  // [a, b) of a sleep of `tid` (s: the sleep, or null when unknown), resolved through its waker.
  CauseTimes ResolveWait(int32_t tid, const Sleep* s, int64_t a, int64_t b, int depth,
                         BudgetTimes* d) const {
    CauseTimes out{};
    if (b <= a) return out;
    auto other = [&] {
      At(out, FeedCause::kBlockedOther) += b - a;
      At(*d, BudgetCause::kNotAttributed) += b - a;
      return out;
    };
    if (!s) return other();
    if (s->waker_tid == kNull) {
      // No waker recorded (an older recording): the main thread's sleeps are batch waits when
      // the job has workers, split by what the workers were doing.
      if (tid != f_.main_tid || f_.worker_pids.empty()) return other();
      CauseTimes c = AnyWorkerState(a, b);
      CreditAnyWorker(c, a, b, d);
      return AsPipeline(c);
    }
    if (IsWorkerPid(s->waker_pid)) return ResolveBatch(s, a, b, d);
    if (s->waker_pid == 0) {
      // A timed wait a timer ended, while a sibling ran through it: CPython's GIL wait (5 ms
      // timeouts, a drop request each time, until the holder lets go) or a lock polled the same
      // way. The sibling's running is the hold; the rest stays unattributed.
      if (const ThreadTimeline* holder = BusySibling(tid, a, b)) {
        CauseTimes own = holder->Overlap(a, b);
        At(out, FeedCause::kThreadHold) += At(own, FeedCause::kRunning);
        // A sibling seen handing the GIL over (kind 4) that ran through a timed wait: the
        // GIL's own timed waits, which a timer ends when the holder is slow to let go.
        bool gil = s->gil || gil_holders_.count(holder->tid()) > 0;
        CreditThread(*holder, a, b, gil ? Via::kGil : Via::kSibling, d);
        int64_t credited = At(own, FeedCause::kRunning) + At(own, FeedCause::kRunqWait) +
                           At(own, FeedCause::kBlockedIo) + At(own, FeedCause::kPageFault) +
                           At(own, FeedCause::kMemcpy) + At(own, FeedCause::kSync);
        for (FeedCause c : {FeedCause::kRunqWait, FeedCause::kBlockedIo, FeedCause::kPageFault,
                            FeedCause::kMemcpy, FeedCause::kSync}) {
          At(out, c) += At(own, c);
        }
        At(out, FeedCause::kBlockedOther) += (b - a) - credited;
        At(*d, BudgetCause::kNotAttributed) += (b - a) - credited;
        return out;
      }
      // No sibling ran through it: the thread slept until a timer or an interrupt ended the
      // sleep (time.sleep, a polling loop, a timeout, a socket). A GIL wait whose holder is not
      // seen stays unattributed.
      if (s->gil) return other();
      At(out, FeedCause::kBlockedOther) += b - a;
      At(*d, BudgetCause::kHostSleep) += b - a;
      holders_.sleep_stack[s->stack_id == kNull ? 0 : s->stack_id] += b - a;
      if (slept_.insert(s).second) ++holders_.sleeps;
      return out;
    }
    if (IsOtherProgram(s->waker_pid)) {
      // Another program ended the wait (the job's workers' wake-ups were batch waits, above).
      At(out, FeedCause::kBlockedOther) += b - a;
      At(*d, BudgetCause::kOtherProgram) += b - a;
      holders_.program[static_cast<int32_t>(s->waker_pid)] += b - a;
      return out;
    }
    if (!IsMainProcess(s->waker_pid) || s->waker_tid == tid || s->waker_tid == f_.main_tid ||
        depth >= 3) {
      return other();  // a cycle back to the main thread, or too deep
    }
    int32_t waker = static_cast<int32_t>(s->waker_tid);
    Via via = Via::kHelper;
    if (!helpers_.count(waker)) {
      // A relay of the training process (the pin-memory thread): a batch wait when a worker fed
      // it. Another thread that ran while this one slept held it up itself (the GIL, a lock).
      if (RelayedWorker(*s)) return ResolveBatch(s, a, b, d);
      if (!IsSibling(waker)) {
        if (!f_.worker_pids.empty()) return ResolveBatch(s, a, b, d);
        return other();
      }
      via = s->gil ? Via::kGil : Via::kSibling;
    }
    // A CUDA helper (autograd) or a sibling: its own time over [a, b), its sleeps resolved in
    // turn.
    auto tl = tls_.find(waker);
    if (tl == tls_.end()) return other();
    CauseTimes own = tl->second.Overlap(a, b);
    At(out, via == Via::kHelper ? FeedCause::kHelperWork : FeedCause::kThreadHold) +=
        At(own, FeedCause::kRunning);
    for (FeedCause c : {FeedCause::kRunqWait, FeedCause::kBlockedIo, FeedCause::kPageFault,
                        FeedCause::kMemcpy, FeedCause::kSync}) {
      At(out, c) += At(own, c);
    }
    CreditThread(tl->second, a, b, via, d);
    const std::vector<Sleep>* sleeps = SleepsOf(waker);
    for (const TimelineSegment& seg : tl->second.segments()) {
      if (seg.cause != FeedCause::kBlockedOther || seg.end <= a || seg.start >= b) continue;
      int64_t x = std::max(a, seg.start), y = std::min(b, seg.end);
      const Sleep* inner = sleeps ? Containing(*sleeps, x) : nullptr;
      AddTo(out, ResolveWait(waker, inner, x, y, depth + 1, d));
    }
    // The helper's lifetime may not cover [a, b) entirely.
    int64_t covered = 0;
    for (int64_t v : out) covered += v;
    if (covered < b - a) {
      At(out, FeedCause::kBlockedOther) += (b - a) - covered;
      At(*d, BudgetCause::kNotAttributed) += (b - a) - covered;
    }
    return out;
  }

  const Facts& f_;
  const std::map<int32_t, ThreadTimeline>& tls_;
  std::map<int32_t, std::vector<Sleep>> sleeps_;
  std::set<int32_t> workers_;
  std::set<int32_t> helpers_;
  mutable PathHolders holders_;  // filled as ResolveWait credits holders
  mutable std::map<int32_t, int64_t> last_delivery_;  // worker tid → its last cycle's end
  mutable BudgetTimes batch_cycles_{};                 // NoteBatchCycle's sums
  mutable std::set<const Sleep*> slept_;  // the sleeps counted in holders_.sleeps
  std::set<int32_t> gil_holders_;  // threads of the main process seen releasing the GIL
  // Threads whose timeline says running but the on-CPU profile did not see them run.
  std::set<int32_t> not_running_;
};

bool IsKernelThread(const ProcessRecord& p) { return p.pid == 2 || p.ppid == 2; }

}  // namespace

int64_t Percentile(std::vector<int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  // p × n / 100 with one rounding (exact when it is a whole number), so the rank is the SQL
  // evidence's integer (p × n + 99) / 100.
  size_t rank = static_cast<size_t>(std::ceil(p * static_cast<double>(v.size()) / 100.0));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

std::string ProcessName(const WindowData& w, int32_t pid) {
  auto it = w.processes.find(pid);
  if (it == w.processes.end() || it->second.name.empty()) return "pid " + std::to_string(pid);
  return it->second.name;
}

std::string ProcessLabel(const WindowData& w, int32_t pid) {
  return ProcessName(w, pid) + " (PID " + std::to_string(pid) + ")";
}

CauseTimes PathOverlap(const Facts& f, int64_t a, int64_t b) {
  CauseTimes out{};
  if (!f.main_tl || b <= a) return out;
  out = f.main_tl->Overlap(a, b);
  int64_t blocked = At(out, FeedCause::kBlockedOther);
  At(out, FeedCause::kBlockedOther) = 0;
  int64_t moved = SpreadPathSpans(f, a, b, &PathSpan::causes, &out);
  At(out, FeedCause::kBlockedOther) += std::max<int64_t>(0, blocked - moved);
  return out;
}

bool IsOwnPid(const Facts& f, int32_t pid) {
  // Programs the job started (exec'd children) are other programs: they compete with the job
  // for CPUs or the GPU like any other process, and are named as such.
  return pid == f.main_pid ||
         std::find(f.worker_pids.begin(), f.worker_pids.end(), pid) != f.worker_pids.end();
}

TimeSpans MergeSpans(TimeSpans spans) {
  std::sort(spans.begin(), spans.end());
  TimeSpans out;
  for (const auto& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

int64_t RunningInSpans(const ThreadTimeline& tl, const TimeSpans& spans, int64_t a, int64_t b) {
  int64_t ns = 0;
  auto it = std::upper_bound(spans.begin(), spans.end(), a,
                             [](int64_t x, const auto& s) { return x < s.second; });
  for (; it != spans.end() && it->first < b; ++it) {
    ns += At(tl.Overlap(std::max(a, it->first), std::min(b, it->second)), FeedCause::kRunning);
  }
  return ns;
}

BudgetTimes PathDetailOverlap(const Facts& f, int64_t a, int64_t b) {
  BudgetTimes out{};
  if (!f.main_tl || b <= a) return out;
  const ThreadTimeline& tl = *f.main_tl;
  CauseTimes own = tl.Overlap(a, b);
  // The profile's writing samples in [a, b), one sampling period each: that much of the
  // thread's running was writing.
  const std::vector<int64_t>& ts = f.main_writer.writer_ts;
  auto first = std::lower_bound(ts.begin(), ts.end(), a);
  auto last = std::lower_bound(first, ts.end(), b);
  int64_t writing = 0;
  if (last != first) {
    auto period = static_cast<double>(last - first) * 1e9 / static_cast<double>(f.w->profile_hz);
    writing = std::min(At(own, FeedCause::kRunning), static_cast<int64_t>(period));
  }
  At(out, BudgetCause::kHostWrite) += writing;
  // The running time inside allocator calls (at most what is left of it).
  int64_t allocating = std::min(RunningInSpans(tl, f.main_alloc_spans, a, b),
                                At(own, FeedCause::kRunning) - writing);
  At(out, BudgetCause::kAllocator) += allocating;
  At(out, BudgetCause::kHostCompute) += At(own, FeedCause::kRunning) - writing - allocating;
  At(out, BudgetCause::kProcessIo) += At(own, FeedCause::kBlockedIo);
  At(out, BudgetCause::kPageFault) += At(own, FeedCause::kPageFault);
  At(out, BudgetCause::kMemcpy) += At(own, FeedCause::kMemcpy);
  At(out, BudgetCause::kSyncWait) += At(own, FeedCause::kSync);
  std::map<int32_t, int64_t> holders;
  RunqHoldersIn(f, tl, a, b, &holders);
  CreditRunqHolders(f, holders, &out);
  int64_t blocked = At(own, FeedCause::kBlockedOther);
  int64_t moved = SpreadPathSpans(f, a, b, &PathSpan::detail, &out);
  At(out, BudgetCause::kNotAttributed) += std::max<int64_t>(0, blocked - moved);
  return out;
}

std::pair<int32_t, int64_t> TopGilHolder(const Facts& f) {
  std::pair<int32_t, int64_t> top{0, 0};
  for (const auto& [tid, ns] : f.holders.gil) {
    if (ns > top.second) top = {tid, ns};
  }
  return top;
}

int64_t UsableCpus(const Facts& f) {
  if (!f.quota || f.quota->cpus() <= 0) return f.cores;
  auto quota = std::max<int64_t>(1, static_cast<int64_t>(std::floor(f.quota->cpus())));
  return f.cores > 0 ? std::min(f.cores, quota) : quota;
}

const ProcessCgroup* ContainerOf(const WindowData& w, int32_t pid) {
  // Rows are by pid, then ts: the last row of the pid is where it was seen last.
  auto it = std::upper_bound(w.process_cgroups.begin(), w.process_cgroups.end(), pid,
                             [](int32_t p, const ProcessCgroup& pc) { return p < pc.pid; });
  if (it == w.process_cgroups.begin() || (it - 1)->pid != pid) return nullptr;
  const ProcessCgroup& pc = *(it - 1);
  if (pc.container_id.empty() && pc.pod_uid.empty() && (pc.ns_pid <= 0 || pc.ns_pid == pid)) {
    return nullptr;
  }
  return &pc;
}

std::string JobContainerLabel(const Facts& f) {
  const ProcessCgroup* pc = ContainerOf(*f.w, f.main_pid);
  if (pc == nullptr) return "";
  if (!pc->container_id.empty()) return "container " + pc->container_id.substr(0, 12);
  if (!pc->pod_uid.empty()) return "pod " + pc->pod_uid;
  return "";
}

std::string NamespacePids(const WindowData& w, const std::vector<int32_t>& pids) {
  std::string out;
  bool differs = false;
  for (int32_t pid : pids) {
    const ProcessCgroup* pc = ContainerOf(w, pid);
    int32_t ns = pc != nullptr && pc->ns_pid > 0 ? pc->ns_pid : 0;
    if (ns > 0 && ns != pid) differs = true;
    out += (out.empty() ? "" : " ") + (ns > 0 ? std::to_string(ns) : std::string("?"));
  }
  return differs ? out : "";
}

std::optional<int64_t> RecommendedWorkers(const Facts& f) {
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  int64_t cpus = UsableCpus(f);
  if (workers == 0 || cpus <= 0) return std::nullopt;
  int64_t fit = std::max<int64_t>(1, cpus - 2);  // keep cores for the main thread and the OS
  double contention = f.window_ns > 0 ? f.lost_contention / static_cast<double>(f.window_ns) : 0;
  if (workers + 1 > cpus) return fit;  // more feeders than CPUs: they fight each other
  if (contention >= th::kMediumLostShare) return std::nullopt;  // more would fight for CPUs too
  // Starved by busy workers, with cores to spare: add workers.
  double starved = f.window_ns > 0 ? f.lost_starvation / static_cast<double>(f.window_ns) : 0;
  int64_t wt = 0;
  for (int64_t v : f.waits.delivered) wt += v;
  double busy = Share(At(f.waits.delivered, FeedCause::kRunning), wt);
  if (starved >= th::kLowLostShare && busy >= th::kStarvationWorkerBusyShare && fit > workers) {
    return std::min(fit, 2 * workers);
  }
  return std::nullopt;
}

namespace {

// ---- The window: cores, per-process switch totals, the rows with nested driver calls removed.
void InitWindowFacts(const WindowData& w, Facts* f) {
  f->w = &w;
  f->cores = w.cores;
  for (const SystemSnapshot& s : w.snapshots) {
    if (s.cores > 0) f->cores = s.cores;
  }
  for (const SwitchTotals& s : w.switch_totals) f->switches[s.pid] = s;
  f->events = WithoutNestedDriverCalls(w.events);
  f->job_begin = w.from;
  f->job_end = w.to;
  f->window_ns = SaturatingSub(w.to, w.from);
  f->window_s = static_cast<double>(f->window_ns) / 1e9;
}

// CUDA calls per tracked process into f->cuda_calls (op_seconds counts, or 1 for a process seen
// only in rows); fills f->cuda_ops_per_sec for the window's full seconds.
void CountCudaCalls(const WindowData& w, Facts* f) {
  std::map<int32_t, int64_t>& cuda_calls = f->cuda_calls;
  for (const OpSecondRow& r : w.op_seconds) {
    // Kernels of graph launches and captured ones are not calls (their launches are).
    if (!IsCudaOp(r.op) || r.op == Op::kGraphKernels || r.op == Op::kGraphNode) continue;
    auto p = w.processes.find(r.pid);
    if (p != w.processes.end() && !p->second.tracked) continue;
    // Launches counted one second in launch_duty: N × the count estimates them, and they stay
    // out of the per-second series (their seconds between counting seconds read as none).
    bool sampled = w.launch_duty > 1 && IsLaunch(r.op);
    cuda_calls[r.pid] +=
        IsLaunch(r.op) ? w.launch_estimates.Scaled(r.pid, r.count) : r.count;
    int64_t sec_start = r.sec * 1'000'000'000;
    if (!sampled && sec_start >= w.from && sec_start + 1'000'000'000 <= w.to) {
      f->cuda_ops_per_sec[r.pid][r.sec] += r.count;
    }
  }
  for (const Event& e : f->events) {
    if (IsCudaOp(e.op) && cuda_calls.count(e.pid) == 0) cuda_calls[e.pid] = 1;
  }
}

// explain --pid: that process and its tracked descendants.
std::set<int32_t> PidScope(const WindowData& w, int32_t pid) {
  std::set<int32_t> scope = {pid};
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [child, p] : w.processes) {
      if (p.tracked && scope.count(p.ppid) && !scope.count(child)) {
        scope.insert(child);
        grew = true;
      }
    }
  }
  return scope;
}

// ---- Roles: CUDA processes by call count (in --pid's scope), the first is the main process;
// the job's lifetime becomes its. False when there is no CUDA process.
bool PickMainProcess(const WindowData& w, const std::map<int32_t, int64_t>& cuda_calls,
                     int32_t only_pid, Facts* f) {
  std::set<int32_t> scope;
  if (only_pid != 0) scope = PidScope(w, only_pid);
  std::vector<std::pair<int64_t, int32_t>> ranked;
  for (const auto& [pid, n] : cuda_calls) ranked.push_back({-n, pid});
  std::sort(ranked.begin(), ranked.end());
  for (const auto& [neg, pid] : ranked) {
    if (only_pid != 0 && !scope.count(pid)) continue;
    f->cuda_pids.push_back(pid);
  }
  if (f->cuda_pids.empty()) return false;
  f->main_pid = f->cuda_pids[0];
  if (auto it = w.processes.find(f->main_pid); it != w.processes.end()) {
    f->main_name = it->second.name;
    f->main_cmdline = it->second.cmdline;
  }
  if (f->main_name.empty()) f->main_name = "pid " + std::to_string(f->main_pid);
  Lifetime(w, f->main_pid, &f->job_begin, &f->job_end);
  f->window_ns = SaturatingSub(f->job_end, f->job_begin);
  f->window_s = static_cast<double>(f->window_ns) / 1e9;
  return true;
}

// Roles: the main process's descendants without CUDA calls. Forked ones (same command line as
// their parent, or a wake-up of the trainer by them) are DataLoader workers; exec'd ones are
// other programs (f->child_pids).
void ClassifyDescendants(const WindowData& w, const std::map<int32_t, int64_t>& cuda_calls,
                         Facts* f) {
  // Who woke whom, per process: a descendant whose threads woke the training process's threads
  // again and again feeds it. Once is not enough: a program started with subprocess.Popen wakes
  // its parent once as it execs (the close-on-exec error pipe closes).
  std::map<int32_t, int64_t> wakes_main;
  for (const Event& e : f->events) {
    if (e.op == Op::kSchedSwitch && e.pid == f->main_pid && e.waker_pid != kNull &&
        e.waker_pid != f->main_pid) {
      ++wakes_main[static_cast<int32_t>(e.waker_pid)];
    }
  }
  std::set<int32_t> feeds_main;
  for (const auto& [pid, n] : wakes_main) {
    if (n >= th::kFeederMinWakes) feeds_main.insert(pid);
  }
  // The main process's first CUDA call in the window: descendants gone before it (or before the
  // window) are start-up helpers — a shell shim's subshells before it exec'd Python, `readlink`
  // — not DataLoader workers, and not programs that compete with the job either.
  int64_t first_cuda = w.to;
  for (const Event& e : f->events) {
    if (e.pid == f->main_pid && IsCudaOp(e.op)) {
      first_cuda = e.ts_ns;
      break;
    }
  }
  std::set<int32_t> family = {f->main_pid};
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, p] : w.processes) {
      if (!p.tracked || !family.count(p.ppid) || family.count(pid) || cuda_calls.count(pid)) {
        continue;
      }
      family.insert(pid);
      grew = true;
      if (p.exit_ts != kNull && (p.exit_ts < w.from || p.exit_ts < first_cuda)) continue;
      auto parent = w.processes.find(p.ppid);
      bool forked =
          parent != w.processes.end() && !p.cmdline.empty() && p.cmdline == parent->second.cmdline;
      bool known_parent_line = parent != w.processes.end() && !parent->second.cmdline.empty();
      if (forked || feeds_main.count(pid) || p.cmdline.empty() || !known_parent_line) {
        f->worker_pids.push_back(pid);
      } else {
        f->child_pids.push_back(pid);
      }
    }
  }
  // A child of an exec'd program (its own workers) is not the trainer's worker either.
  std::sort(f->worker_pids.begin(), f->worker_pids.end());
  std::sort(f->child_pids.begin(), f->child_pids.end());
}

// The rows of the main process's and the workers' threads, grouped by thread.
struct ThreadRows {
  std::map<int32_t, std::vector<const Event*>> by_tid;  // carry-in rows first, then the window's
  std::map<int32_t, int32_t> tid_pid;  // every thread that gets a timeline → its process
  std::map<int32_t, int64_t> cuda_rows_by_tid, sync_rows_by_tid;  // main process's threads
};

ThreadRows GroupRowsByThread(const WindowData& w, const Facts& f) {
  ThreadRows t;
  std::set<int32_t> workers(f.worker_pids.begin(), f.worker_pids.end());
  auto take = [&](const Event& e) {
    if (e.pid != f.main_pid && !workers.count(e.pid)) return;
    t.by_tid[e.tid].push_back(&e);
    t.tid_pid[e.tid] = e.pid;
  };
  for (const Event& e : w.carry_in) take(e);
  for (const Event& e : f.events) {
    take(e);
    if (e.pid == f.main_pid && IsCudaOp(e.op)) {
      ++t.cuda_rows_by_tid[e.tid];
      if (IsSync(e.op)) ++t.sync_rows_by_tid[e.tid];
    }
  }
  for (const Event& e : w.launch_samples) {
    if (e.pid == f.main_pid) ++t.cuda_rows_by_tid[e.tid];
  }
  // A worker with no rows at all ran without ever leaving the CPU: its main thread still counts.
  for (int32_t pid : f.worker_pids) {
    bool seen = false;
    for (const auto& [tid, owner] : t.tid_pid) seen |= owner == pid;
    if (!seen) t.tid_pid[pid] = pid;
  }
  // The same for a thread of the main process the on-CPU profile sampled but that never left
  // the CPU in the window (a pure-Python thread holding the GIL on an idle machine): its
  // samples show it exists and ran, so it gets a timeline (running throughout).
  for (const CpuSampleRow& s : w.cpu_samples) {
    if (s.pid == f.main_pid && s.tid > 0 && !t.tid_pid.count(s.tid)) t.tid_pid[s.tid] = s.pid;
  }
  return t;
}

// Roles: the main thread is the initial thread when it calls CUDA (CPython runs the script
// there); otherwise the CUDA thread that syncs most (it drives the loop), then the busiest
// caller. The main process's other CUDA threads are helpers.
void PickMainThread(ThreadRows& rows, Facts* f) {
  if (rows.cuda_rows_by_tid.count(f->main_pid)) {
    f->main_tid = f->main_pid;
  } else {
    int64_t best = -1;
    for (const auto& [tid, n] : rows.cuda_rows_by_tid) {
      int64_t key = rows.sync_rows_by_tid[tid] * 1'000'000 + n;
      if (key > best) {
        best = key;
        f->main_tid = tid;
      }
    }
  }
  if (f->main_tid == 0) f->main_tid = f->main_pid;
  for (const auto& [tid, n] : rows.cuda_rows_by_tid) {
    if (tid != f->main_tid) f->helper_tids.push_back(tid);
  }
  rows.tid_pid[f->main_tid] = f->main_pid;
}

// ---- Timelines of every thread of rows.tid_pid, each over its process's lifetime in the
// window; fills the main thread's and the training threads' timelines and totals.
std::map<int32_t, ThreadTimeline> BuildTimelines(const WindowData& w, ThreadRows& rows, Facts* f) {
  CpuOccupancy occupancy;
  for (const auto& [tid, pid] : rows.tid_pid) occupancy.AddThread(pid, tid, rows.by_tid[tid]);
  occupancy.Finish();
  std::map<int32_t, ThreadTimeline> tls;
  for (const auto& [tid, pid] : rows.tid_pid) {
    int64_t b = 0, e = 0;
    Lifetime(w, pid, &b, &e);
    tls.emplace(tid, ThreadTimeline::Build(pid, tid, b, e, rows.by_tid[tid], &occupancy));
  }
  f->main_tl = tls.at(f->main_tid);
  f->main_totals = f->main_tl->Totals();
  std::vector<int32_t> train_tids = {f->main_tid};
  train_tids.insert(train_tids.end(), f->helper_tids.begin(), f->helper_tids.end());
  for (int32_t tid : train_tids) {
    f->train_tls.push_back(tls.at(tid));
  }
  return tls;
}

// CPU time of a thread that its own switch rows prove: the stretches between one switch's
// return to the CPU and the next switch out. Before its first row and after its last the thread
// may as well have been asleep (a thread asleep for good leaves no row after it fell asleep), so
// those stretches do not count.
int64_t ProvenRunningNs(const std::vector<const Event*>& rows, int32_t tid) {
  int64_t ns = 0;
  const Event* prev = nullptr;
  for (const Event* e : rows) {
    if (e->op != Op::kSchedSwitch || e->tid != tid) continue;
    if (prev != nullptr && e->ts_ns > prev->End()) ns += e->ts_ns - prev->End();
    if (prev == nullptr || e->End() > prev->End()) prev = e;
  }
  return ns;
}

// Each worker process is judged by its computing thread: the one with the most CPU time its
// rows prove, then the most switches. Not the most switches first: a PyTorch worker's queue
// feeder thread wakes for every batch it hands over while the thread that computes the batches
// runs for long stretches with few switches, and a pool of idle threads sits beside both.
void PickWorkerThreads(ThreadRows& rows, const std::map<int32_t, ThreadTimeline>& tls, Facts* f) {
  for (int32_t pid : f->worker_pids) {
    int32_t rep = 0;
    std::pair<int64_t, int64_t> best = {-1, -1};
    for (const auto& [tid, owner] : rows.tid_pid) {
      if (owner != pid) continue;
      const std::vector<const Event*>& mine = rows.by_tid[tid];
      int64_t switches = 0;
      for (const Event* e : mine) switches += e->op == Op::kSchedSwitch ? 1 : 0;
      std::pair<int64_t, int64_t> key = {ProvenRunningNs(mine, tid), switches};
      if (key > best) {
        best = key;
        rep = tid;
      }
    }
    if (rep == 0) continue;
    f->worker_rep_tid[pid] = rep;
    f->worker_tls.push_back(tls.at(rep));
  }
}

// ---- Competitors: who took CPUs from the feeders (f->runq_holders), never the job itself, the
// tracer, the idle task or kernel threads, and not below a floor of CPU time.
void FindCompetitors(const WindowData& w, Facts* f) {
  int64_t total = 0;
  for (const auto& [pid, ns] : f->runq_holders) total += ns;
  int64_t floor =
      std::max<int64_t>(th::kCompetitorMinNs,
                        static_cast<int64_t>(th::kCompetitorMinShare * static_cast<double>(total)));
  std::set<int32_t> workers(f->worker_pids.begin(), f->worker_pids.end());
  std::set<int32_t> children(f->child_pids.begin(), f->child_pids.end());
  for (const auto& [pid, ns] : f->runq_holders) {
    if (pid <= 0 || pid == f->main_pid || workers.count(pid)) continue;
    if (ns < floor) continue;
    if (pid == w.tracer_pid) {
      f->tracer_runq_ns = ns;
      continue;
    }
    auto p = w.processes.find(pid);
    if (p != w.processes.end() && IsKernelThread(p->second)) continue;
    if (p != w.processes.end() && p->second.tracked && !children.count(pid) &&
        std::find(f->cuda_pids.begin(), f->cuda_pids.end(), pid) == f->cuda_pids.end()) {
      continue;  // a descendant of another traced job's tree: not this job's competitor
    }
    f->competitors.push_back({pid, ns, children.count(pid) > 0});
  }
  std::sort(f->competitors.begin(), f->competitors.end(),
            [](const Competitor& a, const Competitor& b) {
              return a.ns != b.ns ? a.ns > b.ns : a.pid < b.pid;
            });
}

// ---- How much room the host had: the CPUs the feeders ran on and the system's busy share.
void MeasureCpuRoom(const WindowData& w, const ThreadRows& rows, Facts* f) {
  std::vector<int32_t> feeders = {f->main_tid};
  feeders.insert(feeders.end(), f->helper_tids.begin(), f->helper_tids.end());
  for (const auto& [pid, tid] : f->worker_rep_tid) feeders.push_back(tid);
  std::set<int32_t> cpus;
  for (int32_t tid : feeders) {
    auto it = rows.by_tid.find(tid);
    if (it == rows.by_tid.end()) continue;
    for (const Event* e : it->second) {
      if (e->op == Op::kSchedSwitch && e->cpu >= 0) cpus.insert(e->cpu);
    }
  }
  f->feeder_cpus = static_cast<int64_t>(cpus.size());
  f->feeder_cpu_list.assign(cpus.begin(), cpus.end());
  double sum = 0;
  int64_t n = 0;
  for (const SystemSnapshot& s : w.snapshots) {
    if (s.ts_ns < w.from || s.ts_ns > w.to) continue;
    sum += s.cpu_pct;
    ++n;
  }
  if (n > 0) f->host_busy = sum / static_cast<double>(n) / 100.0;
}

// ---- The job's loop (Facts::loop_begin): the main thread's lifetime less the start-up before
// the main process's first CUDA call, where the process started in the window or with the
// session (within kLoopStartSlackNs of either start), and less the exit after its last, where it
// exited in the window. The training threads' and the workers' totals cover the loop.
void SumOverTheLoop(const std::vector<ThreadTimeline>& tls, const Facts& f, CauseTimes* totals,
                    int64_t* thread_ns) {
  for (const ThreadTimeline& tl : tls) {
    AddTo(*totals, tl.Overlap(f.loop_begin, f.loop_end));
    *thread_ns +=
        std::max<int64_t>(0, std::min(tl.end(), f.loop_end) - std::max(tl.begin(), f.loop_begin));
  }
}

void LoopBounds(const WindowData& w, Facts* f) {
  f->loop_begin = f->main_tl->begin();
  f->loop_end = f->main_tl->end();
  int64_t first = -1, last = -1;
  for (const Event& e : f->events) {
    if (e.pid != f->main_pid || OpLayer(e.op) == Layer::kHost) continue;
    if (first < 0) first = e.ts_ns;
    last = std::max(last, e.End());
  }
  if (first < 0) return;
  auto it = w.processes.find(f->main_pid);
  if (it == w.processes.end()) return;
  const ProcessRecord& p = it->second;
  // Started in the window, or with the session when the window opens it: `trace -- CMD` forks
  // the job at its clock's start and holds it until the probes are attached, which on a busy
  // host takes seconds, so the session's first row (the window's start) can come well after.
  bool opens_session = w.from <= w.session_first_ts + th::kLoopStartSlackNs;
  if (p.first_ts != kNull && (p.first_ts >= w.from - th::kLoopStartSlackNs ||
                              (opens_session && p.first_ts >= -th::kLoopStartSlackNs))) {
    f->loop_begin = std::clamp(first, f->loop_begin, f->loop_end);
  }
  if (p.exit_ts != kNull && p.exit_ts <= w.to) {
    f->loop_end = std::clamp(last, f->loop_begin, f->loop_end);
  }
}

void FindLoop(const WindowData& w, Facts* f) {
  LoopBounds(w, f);
  SumOverTheLoop(f->train_tls, *f, &f->train_totals, &f->train_thread_ns);
  SumOverTheLoop(f->worker_tls, *f, &f->worker_totals, &f->worker_thread_ns);
}

// ---- Critical path of the main thread: its waits resolved through who woke it.
// The main thread's device allocator calls as merged spans (a runtime call and the driver call
// nested in it are one).
TimeSpans MainAllocatorSpans(const Facts& f) {
  TimeSpans spans;
  for (const Event& e : f.events) {
    if (e.tid != f.main_tid || !IsDeviceAllocation(e.op) || e.duration_ns <= 0) continue;
    spans.push_back({e.ts_ns, e.End()});
  }
  return MergeSpans(std::move(spans));
}

void ResolveCriticalPath(const ThreadRows& rows, const std::map<int32_t, ThreadTimeline>& tls,
                         Facts* f) {
  JobGraph graph(*f, rows.by_tid, tls);
  int64_t own = 0, all = 0;
  for (const auto& [pid, ns] : f->runq_holders) {
    if (pid <= 0 && pid != kOtherHolder) continue;
    all += ns;
    if (pid > 0 && IsOwnPid(*f, pid)) own += ns;
  }
  f->own_runq_share = Share(own, all);
  f->path = graph.ResolveMain(&f->waits, &f->helper_waits, &f->path_spans, &f->holders);
  f->batch_cycles = graph.batch_cycles();
  f->main_writer = WriterSamples(*f->w, f->main_tid, f->loop_begin, f->loop_end);
  f->main_alloc_spans = MainAllocatorSpans(*f);
  f->path_detail = PathDetailOverlap(*f, f->loop_begin, f->loop_end);
  f->lost_contention = static_cast<double>(At(f->path, FeedCause::kRunqWait));
  f->lost_io = static_cast<double>(At(f->path, FeedCause::kBlockedIo));
  f->lost_memory = static_cast<double>(At(f->path, FeedCause::kPageFault));
  f->lost_starvation = static_cast<double>(At(f->path, FeedCause::kWorkerCompute));
  f->lost_wait_other = static_cast<double>(At(f->path, FeedCause::kBlockedOther));
}

// ---- Syncs of the main process, by ts; f->sync_count and the most frequent sync op.
std::vector<const Event*> MainProcessSyncs(Facts* f) {
  std::map<Op, int64_t> sync_ops;
  std::vector<const Event*> syncs;
  for (const Event& e : f->events) {
    if (e.pid == f->main_pid && IsSync(e.op)) {
      ++sync_ops[e.op];
      syncs.push_back(&e);
    }
  }
  f->sync_count = static_cast<int64_t>(syncs.size());
  int64_t top = 0;
  for (const auto& [op, n] : sync_ops) {
    if (n > top) {
      top = n;
      f->sync_op = std::string(OpName(op));
    }
  }
  return syncs;
}

// Buckets of the window (thresholds::kBucketNs): the feeders' host-wait share, the main
// process's CUDA throughput and its syncs in each.
void BuildBuckets(const WindowData& w, const std::vector<const Event*>& syncs, Facts* f) {
  for (int64_t b = FloorDiv(w.from, th::kBucketNs); b * th::kBucketNs < w.to; ++b) {
    Bucket bucket;
    bucket.start = std::max(w.from, b * th::kBucketNs);
    bucket.end = std::min(w.to, (b + 1) * th::kBucketNs);
    CauseTimes feed{};
    int64_t thread_ns = 0;
    auto add_feed = [&](const ThreadTimeline& tl) {
      AddTo(feed, tl.Overlap(bucket.start, bucket.end));
      thread_ns +=
          std::max<int64_t>(0, std::min(tl.end(), bucket.end) - std::max(tl.begin(), bucket.start));
    };
    for (const ThreadTimeline& tl : f->train_tls) add_feed(tl);
    for (const ThreadTimeline& tl : f->worker_tls) add_feed(tl);
    bucket.host_wait_share = Share(HostWait(feed), thread_ns);
    int64_t ops = 0;
    for (const auto& [sec, n] : f->cuda_ops_per_sec[f->main_pid]) {
      int64_t s = sec * 1'000'000'000;
      if (s >= bucket.start && s + 1'000'000'000 <= bucket.end) ops += n;
    }
    // Seconds with no CUDA row at all still count as full seconds of zero throughput, while
    // the job existed.
    int64_t live_start = std::max(bucket.start, f->job_begin);
    int64_t live_end = std::min(bucket.end, f->job_end);
    bucket.full_seconds = static_cast<int>(std::max<int64_t>(
        0, FloorDiv(live_end, 1'000'000'000) - (live_start + 999'999'999) / 1'000'000'000));
    bucket.cuda_ops_per_s =
        bucket.full_seconds > 0 ? static_cast<double>(ops) / bucket.full_seconds : 0;
    f->buckets.push_back(std::move(bucket));
  }
  for (const Event* e : syncs) {
    for (Bucket& b : f->buckets) {
      if (e->ts_ns >= b.start && e->ts_ns < b.end) {
        b.sync_ns.push_back(e->duration_ns);
        break;
      }
    }
  }
}

// Baseline (the calmest bucket with enough syncs: lowest host-wait share) and peak (highest
// sync p99) of the main process's sync latency; without such buckets, all syncs.
void PickSyncBaseline(const std::vector<const Event*>& syncs, Facts* f) {
  for (size_t i = 0; i < f->buckets.size(); ++i) {
    Bucket& b = f->buckets[i];
    b.sync_p50 = Percentile(b.sync_ns, 50);
    b.sync_p99 = Percentile(b.sync_ns, 99);
    bool enough = static_cast<int64_t>(b.sync_ns.size()) >= th::kMinSyncsPerBucket &&
                  b.end - b.start >= th::kBucketNs / 2;
    if (!enough) continue;
    int idx = static_cast<int>(i);
    if (f->base_bucket < 0 || b.host_wait_share < f->buckets[f->base_bucket].host_wait_share) {
      f->base_bucket = idx;
    }
    if (f->peak_bucket < 0 || b.sync_p99 > f->buckets[f->peak_bucket].sync_p99) {
      f->peak_bucket = idx;
    }
  }
  if (f->base_bucket >= 0) {
    f->base_p50 = f->buckets[f->base_bucket].sync_p50;
    f->base_p99 = f->buckets[f->base_bucket].sync_p99;
    f->peak_p99 = f->buckets[f->peak_bucket].sync_p99;
  } else if (!syncs.empty()) {
    std::vector<int64_t> all;
    for (const Event* e : syncs) all.push_back(e->duration_ns);
    f->base_p50 = Percentile(all, 50);
    f->base_p99 = f->peak_p99 = Percentile(all, 99);
  }
}

// The buckets of highest and lowest CUDA throughput, among those at least half full seconds.
void PickThroughputBuckets(Facts* f) {
  for (size_t i = 0; i < f->buckets.size(); ++i) {
    const Bucket& b = f->buckets[i];
    if (b.full_seconds * 2 < th::kBucketNs / 1'000'000'000) continue;
    int idx = static_cast<int>(i);
    if (f->tput_peak_bucket < 0 ||
        b.cuda_ops_per_s > f->buckets[f->tput_peak_bucket].cuda_ops_per_s) {
      f->tput_peak_bucket = idx;
    }
    if (f->tput_low_bucket < 0 ||
        b.cuda_ops_per_s < f->buckets[f->tput_low_bucket].cuda_ops_per_s) {
      f->tput_low_bucket = idx;
    }
  }
}

// ---- The CPU quota of the job's cgroup: the cgroups its processes were seen in and their
// ancestors; of those with a quota, the one that throttled most over the window, and the share
// of the feeders' waits for CPUs they did not hold that it explains, second by second.
void MeasureCpuQuota(const WindowData& w, Facts* f) {
  std::set<std::string> candidates;
  for (const ProcessCgroup& pc : w.process_cgroups) {
    if (!IsOwnPid(*f, pc.pid) || pc.ts_ns > w.to) continue;
    for (std::string p = pc.cgroup; !p.empty();) {
      candidates.insert(p);
      if (p == "/") break;
      size_t slash = p.rfind('/');
      p = slash == 0 ? "/" : p.substr(0, slash);
    }
  }
  // Samples are by cgroup, then ts: one run per cgroup.
  const CgroupCpuSample* best_first = nullptr;
  const CgroupCpuSample* best_last = nullptr;
  int64_t best_throttled = -1;
  for (size_t i = 0; i < w.cgroup_cpu.size();) {
    size_t j = i;
    while (j < w.cgroup_cpu.size() && w.cgroup_cpu[j].cgroup == w.cgroup_cpu[i].cgroup) ++j;
    const CgroupCpuSample& first = w.cgroup_cpu[i];
    const CgroupCpuSample& last = w.cgroup_cpu[j - 1];
    if (j - i >= 2 && candidates.count(first.cgroup) > 0 && last.quota_us != kNull &&
        last.period_us != kNull && last.period_us > 0 && last.throttled_ns != kNull &&
        first.throttled_ns != kNull) {
      int64_t throttled = last.throttled_ns - first.throttled_ns;
      if (throttled > best_throttled) {
        best_throttled = throttled;
        best_first = &first;
        best_last = &last;
      }
    }
    i = j;
  }
  if (best_first == nullptr) return;
  CpuQuota q;
  q.cgroup = best_last->cgroup;
  q.version = best_last->version;
  q.quota_us = best_last->quota_us;
  q.period_us = best_last->period_us;
  auto delta = [](int64_t a, int64_t b) { return a == kNull || b == kNull ? 0 : std::max<int64_t>(0, b - a); };
  q.periods = delta(best_first->nr_periods, best_last->nr_periods);
  q.throttled_periods = delta(best_first->nr_throttled, best_last->nr_throttled);
  q.throttled_ns = delta(best_first->throttled_ns, best_last->throttled_ns);
  if (best_first->usage_ns != kNull && best_last->usage_ns != kNull) {
    q.usage_ns = delta(best_first->usage_ns, best_last->usage_ns);
  }
  q.span_ns = best_last->ts_ns - best_first->ts_ns;
  if (q.throttled_ns > 0 && w.to > w.from) {
    // Per second of the window: the CPU-seconds its run queues sat throttled (T), and the
    // CPU-seconds other processes used (O: the host's busy time, system_snapshots, less the
    // cgroup's own use). Waits for a CPU the job did not hold are the quota's in the proportion
    // T / (T + O): with no one else on the CPUs, a runnable thread waited for its quota.
    size_t secs = static_cast<size_t>((w.to - w.from + kNsPerSec - 1) / kNsPerSec);
    auto spread = [&](int64_t CgroupCpuSample::*field) {
      std::vector<double> out(secs, 0.0);
      for (const CgroupCpuSample* s = best_first; s < best_last; ++s) {
        int64_t t0 = s->ts_ns, t1 = (s + 1)->ts_ns;
        double d = static_cast<double>(delta(s->*field, (s + 1)->*field));
        if (t1 <= t0 || d <= 0) continue;
        // Only the seconds [t0, t1) overlaps, not every second of the window.
        int64_t first = std::max<int64_t>(0, FloorDiv(t0 - w.from, kNsPerSec));
        for (auto k = static_cast<size_t>(first); k < secs; ++k) {
          int64_t a = w.from + static_cast<int64_t>(k) * kNsPerSec;
          if (a >= t1) break;
          int64_t cut = std::min({t1, a + kNsPerSec, w.to}) - std::max(t0, a);
          if (cut > 0) out[k] += d * static_cast<double>(cut) / static_cast<double>(t1 - t0);
        }
      }
      return out;
    };
    std::vector<double> throttled = spread(&CgroupCpuSample::throttled_ns);
    std::vector<double> used = spread(&CgroupCpuSample::usage_ns);
    std::vector<double> host(secs, -1.0);  // busy CPU-ns of the host; -1 = no snapshot
    for (const SystemSnapshot& snap : w.snapshots) {
      // A snapshot covers the second before it.
      int64_t k = FloorDiv(snap.ts_ns - 1 - w.from, kNsPerSec);
      if (k < 0 || k >= static_cast<int64_t>(secs) || snap.cores <= 0) continue;
      host[static_cast<size_t>(k)] =
          snap.cpu_pct / 100.0 * static_cast<double>(snap.cores) * static_cast<double>(kNsPerSec);
    }
    q.share_by_sec.assign(secs, 0.0);
    for (size_t k = 0; k < secs; ++k) {
      if (throttled[k] <= 0) continue;
      // Without the cgroup's usage (v1 with cpuacct mounted apart), a throttled second used
      // its whole quota.
      double own = q.usage_ns != kNull ? used[k] : q.cpus() * static_cast<double>(kNsPerSec);
      double others = host[k] < 0 ? 0.0 : std::max(0.0, host[k] - own);
      q.share_by_sec[k] = throttled[k] / (throttled[k] + others);
    }
  }
  f->quota = std::move(q);
}

// ---- The quota's refill grid: where the job's long run-queue waits pile up at one offset of the
// quota's period (thresholds.h kQuotaGridMinShare), that offset is when the bandwidth timer
// refilled the quota.
void FindRefillGrid(const std::map<int32_t, ThreadTimeline>& tls, Facts* f) {
  if (!f->quota || f->quota->throttled_periods == 0) return;
  CpuQuota& q = *f->quota;
  int64_t period = q.period_us * 1000;
  if (period < th::kQuotaGridMinSlacks * th::kQuotaRefillSlackNs) return;
  constexpr int64_t kBins = 8;  // bins per slack
  int64_t bin_ns = th::kQuotaRefillSlackNs / kBins;
  auto n = static_cast<size_t>((period + bin_ns - 1) / bin_ns);
  std::vector<int64_t> by_bin(n, 0);
  int64_t total = 0;
  for (const auto& [tid, tl] : tls) {
    if (!IsOwnPid(*f, tl.pid())) continue;
    ForEachRunqWait(tl, tl.begin(), tl.end(), [&](auto first, auto end) {
      int64_t len = std::prev(end)->end - first->start;
      if (len < th::kQuotaGridMinWaitNs) return;
      int64_t phase = std::prev(end)->end % period;
      if (phase < 0) phase += period;
      by_bin[static_cast<size_t>(phase / bin_ns) % n] += len;
      total += len;
    });
  }
  if (total <= 0) return;
  // The arc of kBins bins (one slack) with the most time; it may wrap around the period.
  int64_t arc = 0;
  for (size_t i = 0; i < static_cast<size_t>(kBins); ++i) arc += by_bin[i % n];
  int64_t best = arc;
  size_t best_start = 0;
  for (size_t i = 1; i < n; ++i) {
    arc += by_bin[(i + kBins - 1) % n] - by_bin[i - 1];
    if (arc > best) {
      best = arc;
      best_start = i;
    }
  }
  double share = Share(best, total);
  if (share < th::kQuotaGridMinShare) return;
  q.refill_phase_ns = static_cast<int64_t>(best_start) * bin_ns;
  q.refill_share = share;
}

// ---- The memory limit of the job's memory cgroup: every cgroup sampled was a tracked
// process's own memory cgroup or an ancestor with a limit (cgroup_memory.h). Of those with a
// limit, the one whose limit acted most (its events over the window), then the tightest.
void MeasureMemoryLimit(const WindowData& w, Facts* f) {
  std::optional<MemoryLimit> best;
  auto delta = [](int64_t a, int64_t b) {
    return a == kNull || b == kNull ? 0 : std::max<int64_t>(0, b - a);
  };
  for (size_t i = 0; i < w.cgroup_memory.size();) {
    size_t j = i;
    while (j < w.cgroup_memory.size() && w.cgroup_memory[j].cgroup == w.cgroup_memory[i].cgroup) {
      ++j;
    }
    const CgroupMemorySample& first = w.cgroup_memory[i];
    const CgroupMemorySample& last = w.cgroup_memory[j - 1];
    if (last.max_bytes != kNull || last.high_bytes != kNull) {
      MemoryLimit m;
      m.cgroup = last.cgroup;
      m.version = last.version;
      m.max_bytes = last.max_bytes;
      m.high_bytes = last.high_bytes;
      for (size_t k = i; k < j; ++k) {
        if (w.cgroup_memory[k].usage_bytes != kNull) {
          m.usage_peak = std::max(m.usage_peak, w.cgroup_memory[k].usage_bytes);
        }
      }
      m.events_high = delta(first.events_high, last.events_high);
      m.events_max = delta(first.events_max, last.events_max);
      m.events_oom = delta(first.events_oom, last.events_oom);
      m.events_oom_kill = delta(first.events_oom_kill, last.events_oom_kill);
      if (first.major_faults != kNull && last.major_faults != kNull) {
        m.major_faults = delta(first.major_faults, last.major_faults);
      }
      if (!best || m.hits() > best->hits() ||
          (m.hits() == best->hits() && m.limit() < best->limit())) {
        best = std::move(m);
      }
    }
    i = j;
  }
  f->memory_limit = std::move(best);
}

// ---- Per-call attribution of slow syncs (thresholds::kSlowSyncFactor × the baseline p50):
// the syncing thread's time by cause, who held its CPU, the workers' state meanwhile.
void AttributeSlowSyncs(const std::vector<const Event*>& syncs, Facts* f) {
  f->slow.threshold_ns = std::max<int64_t>(
      th::kSlowSyncFloorNs,
      static_cast<int64_t>(th::kSlowSyncFactor * static_cast<double>(f->base_p50)));
  for (const Event* e : syncs) {
    if (e->duration_ns < f->slow.threshold_ns) continue;
    ++f->slow.count;
    f->slow.total_ns += e->duration_ns;
    for (const ThreadTimeline& tl : f->train_tls) {
      if (tl.tid() != e->tid) continue;
      AddTo(f->slow.thread, tl.Overlap(e->ts_ns, e->End()));
      RunqHoldersIn(*f, tl, e->ts_ns, e->End(), &f->slow.runq_holders);
    }
    for (const ThreadTimeline& tl : f->worker_tls) {
      AddTo(f->slow.workers, tl.Overlap(e->ts_ns, e->End()));
    }
  }
}

}  // namespace

bool CpuQuota::EndsOnRefill(int64_t end_ns) const {
  if (refill_phase_ns < 0 || period_us <= 0) return false;
  int64_t period = period_us * 1000;
  int64_t off = (end_ns - refill_phase_ns) % period;
  if (off < 0) off += period;
  return off < th::kQuotaRefillSlackNs;
}

Facts ComputeFacts(const WindowData& w, const ExplainOptions& options) {
  Facts f;
  InitWindowFacts(w, &f);
  CountCudaCalls(w, &f);
  if (!PickMainProcess(w, f.cuda_calls, options.pid, &f)) return f;
  ClassifyDescendants(w, f.cuda_calls, &f);

  ThreadRows rows = GroupRowsByThread(w, f);
  PickMainThread(rows, &f);
  std::map<int32_t, ThreadTimeline> tls = BuildTimelines(w, rows, &f);
  PickWorkerThreads(rows, tls, &f);
  MeasureCpuQuota(w, &f);
  FindRefillGrid(tls, &f);
  MeasureMemoryLimit(w, &f);
  // Run-queue time of every feeding thread by who held the CPU.
  for (const auto& [tid, tl] : tls) RunqHoldersIn(f, tl, w.from, w.to, &f.runq_holders);
  FindCompetitors(w, &f);
  MeasureCpuRoom(w, rows, &f);
  FindLoop(w, &f);
  ResolveCriticalPath(rows, tls, &f);

  std::vector<const Event*> syncs = MainProcessSyncs(&f);
  BuildBuckets(w, syncs, &f);
  PickSyncBaseline(syncs, &f);
  PickThroughputBuckets(&f);
  AttributeSlowSyncs(syncs, &f);
  ComputeBudget(&f);
  return f;
}

}  // namespace gw
