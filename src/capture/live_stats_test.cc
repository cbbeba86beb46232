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

// The live view on an 80×24 terminal: every op of a busy trace would not fit, so the tables are
// capped (the rest counted) and the System line drops its bars; the header stays on screen.
TEST(LiveStatsTest, ViewFitsAnEightyByTwentyFourTerminal) {
  LiveStats stats;
  std::vector<Event> events;
  size_t n_ops = 0;
  const OpInfo* ops = AllOps(&n_ops);
  for (size_t i = 0; i < n_ops; ++i) {  // every op the runtime, driver and host layers have
    Event e;
    e.pid = 100;
    e.tid = 100;
    e.op = ops[i].op;
    e.duration_ns = 1000;
    events.push_back(e);
  }
  stats.AddEvents(events.data(), events.size());
  SystemSnapshot sys;
  sys.cpu_pct = 50;
  sys.mem_pct = 10;
  sys.cores = 2;
  stats.SetSystem(sys);
  std::string view = RenderLiveView(stats.Snapshot(5'000'000'000), 80, 24);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = view.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(view.substr(start, nl - start));
  }
  EXPECT_LE(lines.size(), 20u) << view;  // 4 left for notes
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0].rfind("gpuwhy trace", 0), 0u);
  EXPECT_EQ(lines[1].rfind("System: CPU 50.0%", 0), 0u) << lines[1];
  EXPECT_LE(lines[1].size(), 80u);
  EXPECT_NE(view.find("more ops"), std::string::npos) << view;
  // Without a height every op is listed.
  EXPECT_EQ(RenderLiveView(stats.Snapshot(5'000'000'000), 80).find("more ops"), std::string::npos);
}

}  // namespace
}  // namespace gw
