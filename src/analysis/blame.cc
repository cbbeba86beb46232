#include "analysis/blame.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <vector>

#include "analysis/thresholds.h"
#include "analysis/timeline.h"

namespace gw {

namespace {

constexpr int64_t kSecond = 1'000'000'000;

}  // namespace

const RuleSpec* BlamedCauseOf(const std::string& rule) {
  const RuleSpec* r = RuleById(rule);
  return r != nullptr && r->blames ? r : nullptr;
}

void AddFindingIntervals(const Facts& f, Report* r) {
  if (!f.main_tl) return;
  const ThreadTimeline& tl = *f.main_tl;
  for (Finding& finding : r->findings) {
    const RuleSpec* blamed = BlamedCauseOf(finding.rule);
    if (blamed == nullptr) continue;
    std::vector<const ThreadTimeline*> threads = {&tl};
    if (blamed->in_feeders) {
      for (const ThreadTimeline& t : f.train_tls) {
        if (t.tid() != tl.tid()) threads.push_back(&t);
      }
      for (const ThreadTimeline& t : f.worker_tls) threads.push_back(&t);
    }
    bool open = false;
    for (int64_t a = tl.begin(); a < tl.end(); a += kSecond) {
      int64_t b = std::min(tl.end(), a + kSecond);
      // Causes the feeders hold in their own right count on each feeder's own timeline; the
      // others on the main thread's critical path (its sleeps resolved by who woke it).
      int64_t held_ns = blamed->in_feeders ? At(tl.Overlap(a, b), blamed->cause)
                                           : At(PathOverlap(f, a, b), blamed->cause);
      for (size_t i = 1; i < threads.size(); ++i) {
        held_ns += At(threads[i]->Overlap(a, b), blamed->cause);
      }
      double share = static_cast<double>(held_ns) / static_cast<double>(b - a);
      bool held = share >= thresholds::kGpuBlameShare;
      if (held && open) {
        finding.intervals.back().end_ns = b;
      } else if (held) {
        finding.intervals.push_back({a, b});
      }
      open = held;
    }
  }
}

}  // namespace gw
