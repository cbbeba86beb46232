// GraphTracker: captures joined to instantiations and launches, counted as kernels run.
#include "sources/cuda/cuda_graphs.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace gw {
namespace {

struct Fixture {
  std::map<std::string, int64_t> ids;
  std::map<int64_t, std::string> texts;
  std::map<uint64_t, std::string> names = {{0xa, "gemm_kernel(float const*)"}, {0xb, "relu"}};
  GraphTracker tracker{[this](const std::string& t) {
                         auto [it, added] = ids.emplace(t, static_cast<int64_t>(ids.size()) + 1);
                         texts[it->second] = t;
                         return it->second;
                       },
                       [this](int32_t, uint64_t handle, bool) {
                         auto it = names.find(handle);
                         return it == names.end() ? std::string() : it->second;
                       }};
  // Kernels counted per label over every take.
  std::map<std::string, int64_t> Counts() {
    std::map<std::string, int64_t> out;
    for (const OpCount& c : tracker.TakeCounts()) {
      EXPECT_EQ(c.op, Op::kGraphKernels);
      out[texts[c.name_id]] += c.count;
    }
    return out;
  }
};

TEST(GraphTrackerTest, EachLaunchCountsTheCapturedKernels) {
  Fixture f;
  f.tracker.CaptureBegin(7, 70, 1000);
  EXPECT_TRUE(f.tracker.AnyCaptureOpen());
  for (int i = 0; i < 3; ++i) f.tracker.CapturedLaunch(7, 70, 0xa, true);
  f.tracker.CapturedLaunch(7, 70, 0xb, false);
  f.tracker.CaptureEnd(7, 70, 0x100, /*complete=*/true);
  EXPECT_FALSE(f.tracker.AnyCaptureOpen());
  f.tracker.Instantiate(7, 0x100, 0x200);
  for (int i = 0; i < 5; ++i) f.tracker.Launch(7, 0x200, 2);
  std::map<std::string, int64_t> counts = f.Counts();
  ASSERT_EQ(counts.size(), 1u);
  EXPECT_EQ(counts.begin()->first, "graph 1 (4 kernels: gemm_kernel x3, relu)");
  EXPECT_EQ(counts.begin()->second, 20);
  EXPECT_TRUE(f.Counts().empty());  // taken
}

TEST(GraphTrackerTest, CapturesOnOtherThreadsAreTheirOwn) {
  Fixture f;
  f.tracker.CaptureBegin(7, 70, 1000);
  f.tracker.CaptureBegin(7, 71, 1000);
  f.tracker.CapturedLaunch(7, 70, 0xa, true);
  f.tracker.CapturedLaunch(7, 71, 0xb, true);
  f.tracker.CapturedLaunch(7, 71, 0xb, true);
  f.tracker.CaptureEnd(7, 71, 0x101, true);
  f.tracker.CaptureEnd(7, 70, 0x100, true);
  f.tracker.Instantiate(7, 0x100, 0x200);
  f.tracker.Instantiate(7, 0x101, 0x201);
  f.tracker.Launch(7, 0x200, 0);
  f.tracker.Launch(7, 0x201, 0);
  std::map<std::string, int64_t> counts = f.Counts();
  EXPECT_EQ(counts["graph 1 (1 kernel: gemm_kernel)"], 1);
  EXPECT_EQ(counts["graph 2 (2 kernels: relu x2)"], 2);
}

// A capture the launch probes did not see whole, or an exec instantiated before the attach:
// its kernel count is unknown, each launch counts once, and the name says so.
TEST(GraphTrackerTest, UnseenCapturesCountEachLaunchOnceAndSaySo) {
  Fixture f;
  f.tracker.CaptureBegin(7, 70, 1000);
  f.tracker.CapturedLaunch(7, 70, 0xa, true);
  f.tracker.CaptureEnd(7, 70, 0x100, /*complete=*/false);
  f.tracker.Instantiate(7, 0x100, 0x200);
  f.tracker.Launch(7, 0x200, 0);
  f.tracker.Launch(7, 0x200, 0);
  f.tracker.Launch(7, 0x999, 0);
  std::map<std::string, int64_t> counts = f.Counts();
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts["graph 1 (kernels unknown: its capture was not seen whole; each launch "
                   "counted once)"],
            2);
  EXPECT_EQ(counts["graph exec 0x999 (kernels unknown: instantiated before gpuwhy attached; "
                   "each launch counted once)"],
            1);
}

TEST(GraphTrackerTest, AFailedCaptureMakesNoGraphAndForgetDropsTheProcess) {
  Fixture f;
  f.tracker.CaptureBegin(7, 70, 1000);
  f.tracker.CapturedLaunch(7, 70, 0xa, true);
  f.tracker.CaptureEnd(7, 70, 0, true);  // failed: no graph
  f.tracker.Instantiate(7, 0, 0x200);    // of nothing known
  f.tracker.Launch(7, 0x200, 0);
  EXPECT_EQ(f.Counts().begin()->first.rfind("graph 1 (kernels unknown", 0), 0u);
  f.tracker.CaptureBegin(8, 80, 0);
  f.tracker.Forget(8);
  EXPECT_FALSE(f.tracker.AnyCaptureOpen());
}

}  // namespace
}  // namespace gw
