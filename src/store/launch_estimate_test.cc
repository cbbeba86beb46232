#include "store/launch_estimate.h"

#include <gtest/gtest.h>

#include <cmath>

namespace gw {
namespace {

constexpr int64_t kS = 1'000'000'000;

// A job launching `rate` a second and making `calls` other CUDA calls a second over
// [start_s, end_s), traced from 0 with the duty cycle counting `counting` seconds.
LaunchCountingInput Job(double start_s, double end_s, double rate, double calls,
                        const std::vector<int64_t>& counting, int64_t duty, double rate_late = -1) {
  LaunchCountingInput in;
  in.begin_ns = 0;
  in.end_ns = static_cast<int64_t>(std::ceil(end_s + 1)) * kS;
  in.duty = duty;
  in.coverage_known = true;
  for (int64_t sec : counting) in.covered_ns[sec] = kS;
  in.attach_sec = counting.empty() ? -1 : counting.front();
  LaunchCountingInput::Process& p = in.processes[100];
  for (int64_t sec = 0; sec * kS < in.end_ns; ++sec) {
    double lo = std::max<double>(start_s, static_cast<double>(sec));
    double hi = std::min<double>(end_s, static_cast<double>(sec + 1));
    if (hi <= lo) continue;
    double r = rate_late >= 0 && sec >= (start_s + end_s) / 2 ? rate_late : rate;
    p.calls[sec] = std::llround(calls * (hi - lo) * (r / rate));
    if (in.covered_ns.count(sec)) p.launches[sec] = std::llround(r * (hi - lo));
  }
  p.first_ns = static_cast<int64_t>(start_s * kS);
  p.last_ns = static_cast<int64_t>(end_s * kS);
  return in;
}

double TrueLaunches(double start_s, double end_s, double rate, double rate_late = -1) {
  if (rate_late < 0) return rate * (end_s - start_s);
  double mid = std::ceil((start_s + end_s) / 2);
  return rate * (mid - start_s) + rate_late * (end_s - mid);
}

TEST(LaunchEstimate, EveryLaunchCountedIsExact) {
  LaunchCountingInput in = Job(0.3, 5.3, 900, 250, {0, 1, 2, 3, 4, 5}, 1);
  LaunchEstimates e = EstimateLaunches(in);
  EXPECT_EQ(e.total.counted, 4500);
  EXPECT_DOUBLE_EQ(e.total.estimated, 4500);
  EXPECT_EQ(e.total.error, 0);
  EXPECT_FALSE(e.estimated());
}

TEST(LaunchEstimate, AShortJobBetweenCountingSecondsIsNotScaledByTheDuty) {
  // Counted in seconds 0-2 (until the cycle starts), then not again before the job ends: the
  // old estimate (10 x the count) said ~25,000 for 4,500.
  LaunchCountingInput in = Job(0.3, 5.3, 900, 250, {0, 1, 2}, 10);
  LaunchEstimates e = EstimateLaunches(in);
  double truth = TrueLaunches(0.3, 5.3, 900);
  EXPECT_NEAR(e.total.estimated, truth, 0.05 * truth);
  EXPECT_TRUE(e.estimated());
  EXPECT_GT(e.total.error, 0);
  EXPECT_NEAR(e.Scale(100), e.total.estimated / e.total.counted, 1e-9);
}

TEST(LaunchEstimate, TheRatioFollowsTheJobWhenItSlowsDown) {
  // The job halves its step rate after mid-run, where nothing was counted: launches follow its
  // other calls, not the rate of the counted seconds.
  LaunchCountingInput in = Job(0, 30, 1000, 200, {0, 1, 11, 21}, 10, 500);
  LaunchEstimates e = EstimateLaunches(in);
  double truth = TrueLaunches(0, 30, 1000, 500);
  EXPECT_NEAR(e.total.estimated, truth, 0.05 * truth);
}

TEST(LaunchEstimate, WithoutOtherCallsTheLaunchingSpanIsUsed) {
  // No syncs or copies (a pure launch loop): launches per second of the span, which ends at the
  // process's last CUDA activity.
  LaunchCountingInput in = Job(0.3, 25.5, 1000, 0, {0, 1, 11, 21}, 10);
  LaunchEstimates e = EstimateLaunches(in);
  double truth = TrueLaunches(0.3, 25.5, 1000);
  EXPECT_NEAR(e.total.estimated, truth, 0.05 * truth);
}

TEST(LaunchEstimate, OlderRecordingsScaleByTheDuty) {
  LaunchCountingInput in = Job(0, 20, 100, 10, {0, 10}, 10);
  in.coverage_known = false;
  LaunchEstimates e = EstimateLaunches(in);
  EXPECT_EQ(e.total.counted, 200);
  EXPECT_DOUBLE_EQ(e.total.estimated, 2000);
  EXPECT_DOUBLE_EQ(e.Scale(100), 10);
}

TEST(LaunchEstimate, AProcessWithNoCountedLaunchesHasNoEstimate) {
  LaunchCountingInput in = Job(0, 20, 100, 10, {0}, 10);
  in.processes[100].launches.clear();
  LaunchEstimates e = EstimateLaunches(in);
  EXPECT_TRUE(e.by_pid.empty());
  EXPECT_DOUBLE_EQ(e.Scale(100), 1.0);
}

// The time the probes were detached, as the duty cycle leaves it: attached from the session's
// start (second 0) through second 1, detached 3 ms into second 3 (the poll's spill-over), then
// on again 4 ms into second 12 for that second only. Every launch outside the covered time left
// no trace, so those stretches are unprobed; without coverage rows nothing can be said.
TEST(LaunchEstimate, UnprobedSpansFollowTheDutyCycle) {
  LaunchCountingInput in;
  in.begin_ns = 500'000'000;
  in.end_ns = 15 * kS;
  in.duty = 10;
  in.coverage_known = true;
  in.attach_sec = 0;
  in.covered_ns = {{0, kS}, {1, kS}, {2, kS}, {3, 3'000'000}, {12, kS - 4'000'000},
                   {13, 2'000'000}};
  using Spans = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(UnprobedSpans(in), (Spans{{3 * kS + 3'000'000, 12 * kS + 4'000'000},
                                      {13 * kS + 2'000'000, 15 * kS}}));
  EXPECT_EQ(EstimateLaunches(in).unprobed, UnprobedSpans(in));
  // A second partly covered after one that was not: the probes went on late in it.
  in.covered_ns = {{0, kS}, {5, kS / 2}, {6, kS}, {7, 1'000}};
  EXPECT_EQ(UnprobedSpans(in), (Spans{{kS, 5 * kS + kS / 2}, {7 * kS + 1'000, 15 * kS}}));
  in.coverage_known = false;
  EXPECT_TRUE(UnprobedSpans(in).empty());
}

}  // namespace
}  // namespace gw
