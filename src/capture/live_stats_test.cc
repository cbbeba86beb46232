#include "capture/live_stats.h"

#include <gtest/gtest.h>

namespace gw {
namespace {

TEST(LatencyHistogramTest, QuantilesWithinBucketError) {
  LatencyHistogram h;
  for (int64_t v = 1; v <= 1000; ++v) h.Add(v * 1000);  // 1 µs … 1 ms
  EXPECT_EQ(h.count(), 1000);
  auto near = [](int64_t got, int64_t want) {
    return got >= want && got <= want + want / 8 + 1;  // upper bound of a 12.5% bucket
  };
  EXPECT_TRUE(near(h.Quantile(0.50), 500'000)) << h.Quantile(0.50);
  EXPECT_TRUE(near(h.Quantile(0.99), 990'000)) << h.Quantile(0.99);
  EXPECT_EQ(LatencyHistogram().Quantile(0.5), 0);
}

TEST(LiveStatsTest, CorrelationNamesTopPreemptorOfTrackedTasks) {
  LiveStats stats;
  ProcessInfo train;
  train.pid = 100;
  train.name = "python3 (train.py)";
  train.tracked = true;
  stats.AddProcess(train);
  ProcessInfo hog;
  hog.pid = 200;
  hog.name = "gw_competitor";
  stats.AddProcess(hog);
  std::vector<Event> events;
  for (int i = 0; i < 50; ++i) {
    Event e;
    e.ts_ns = i * 100'000'000LL;  // 5 s
    e.pid = 100;
    e.tid = 100;
    e.op = Op::kSchedSwitch;
    e.duration_ns = 40'000'000;
    e.runq_ns = 40'000'000;
    e.kind = static_cast<int64_t>(SwitchKind::kPreempted);
    e.other_pid = 200;
    events.push_back(e);
  }
  Event launch;
  launch.pid = 100;
  launch.op = Op::kCudaLaunchKernel;
  launch.duration_ns = 5000;
  events.push_back(launch);
  stats.AddEvents(events.data(), events.size());
  LiveSnapshot s = stats.Snapshot(5'000'000'000);
  EXPECT_EQ(s.events, 51);
  ASSERT_EQ(s.host.size(), 1u);
  EXPECT_EQ(s.host[0].count, 50);
  ASSERT_EQ(s.runtime.size(), 1u);
  EXPECT_NE(s.correlation.find("training pid 100"), std::string::npos) << s.correlation;
  EXPECT_NE(s.correlation.find("top preemptor: gw_competitor"), std::string::npos)
      << s.correlation;
  std::string view = RenderLiveView(s, 100);
  EXPECT_NE(view.find("CUDA Runtime"), std::string::npos);
  EXPECT_NE(view.find("sched_switch"), std::string::npos);
  EXPECT_EQ(RenderStatusLine(s).find('\x1b'), std::string::npos) << "no escapes off a TTY";
}

}  // namespace
}  // namespace gw
