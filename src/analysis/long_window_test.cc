// Long windows from rollups (issue 19): which process is the job, where its incident is, and
// what the whole window's rollups add up to. Hand-built rollups, no database.
#include "analysis/long_window.h"

#include <gtest/gtest.h>

namespace gw {
namespace {

constexpr int64_t kS = 1'000'000'000;

// 1 h of a job (pid 10, main thread 10, 200 CUDA calls per bucket), a worker (pid 11) and the
// tracer (pid 99, which made the most calls of all and must never be the job). The main thread
// loses 1 s per bucket, except 30 s per bucket in [2000 s, 2120 s).
RollupWindow Hour() {
  RollupWindow r;
  r.tracer_pid = 99;
  r.processes[10] = ProcessRecord{10, 1, "python3 (train.py)", "", true};
  r.processes[11] = ProcessRecord{11, 10, "pt_data_worker:0", "", true};
  r.span.has_raw = true;
  r.span.raw_first = 0;
  r.span.raw_last = 3600 * kS - 1;
  r.span.has_rollups = true;
  r.span.rollup_first = 0;
  r.span.rollup_last = 3600 * kS - 1;
  for (int64_t sec = 0; sec < 3600; sec += 10) {
    bool bad = sec >= 2000 && sec < 2120;
    ThreadRollupRow main{{sec, 10, 10}, {}};
    main.r.switches = 50;
    main.r.runq_ns = (bad ? 30 : 1) * kS;
    main.r.blocked_ns = 4 * kS;  // all of it inside syncs: not lost
    main.r.sync_ns = 4 * kS;
    main.r.cuda_calls = bad ? 50 : 200;
    main.r.syncs = 10;
    r.threads.push_back(main);
    ThreadRollupRow worker{{sec, 11, 11}, {}};
    worker.r.switches = 7;
    worker.r.runq_ns = 2 * kS;
    r.threads.push_back(worker);
    ThreadRollupRow tracer{{sec, 99, 99}, {}};
    tracer.r.cuda_calls = 100000;
    r.threads.push_back(tracer);
  }
  return r;
}

SessionWindow Window(int64_t from_s, int64_t to_s) {
  SessionWindow w;
  w.session = 1;
  w.begin_ns = from_s * kS;
  w.end_ns = to_s * kS;
  w.label = "test";
  return w;
}

TEST(LongWindowTest, TheIncidentIsWhereTheMainThreadLostTheMostTime) {
  LongWindowSummary s = SummarizeRollups(Hour(), Window(0, 3600), 0, 120 * kS);
  EXPECT_EQ(s.tier, "rollups+incident");
  EXPECT_EQ(s.main_pid, 10);
  EXPECT_EQ(s.main_tid, 10);
  ASSERT_TRUE(s.has_incident);
  EXPECT_EQ(s.incident_from_ns, 2000 * kS);
  EXPECT_EQ(s.incident_to_ns, 2120 * kS);
  EXPECT_DOUBLE_EQ(s.incident_lost_s, 12 * 30.0);
  EXPECT_DOUBLE_EQ(s.lost_s, 348 * 1.0 + 12 * 30.0);  // sync sleeps are not lost
  EXPECT_DOUBLE_EQ(s.active_s, 3600);
  EXPECT_DOUBLE_EQ(s.calls_per_s_median, 20);
  EXPECT_DOUBLE_EQ(s.calls_per_s_incident, 5);
  EXPECT_EQ(s.low_buckets, 12);
  EXPECT_EQ(s.buckets, 360);
  EXPECT_DOUBLE_EQ(s.others_runq_s, 360 * 2.0);  // the worker; never the tracer
  EXPECT_EQ(s.others_switches, 360 * 7);
}

TEST(LongWindowTest, TheIncidentStaysInsideTheRawRowsThatAreLeft) {
  RollupWindow r = Hour();
  r.span.raw_first = 2500 * kS + 5;  // pruned under --max-db up to there
  LongWindowSummary s = SummarizeRollups(r, Window(0, 3600), 0, 120 * kS);
  ASSERT_TRUE(s.has_incident);
  EXPECT_GE(s.incident_from_ns, r.span.raw_first);
  EXPECT_LE(s.incident_to_ns - s.incident_from_ns, 120 * kS);
  // Nothing stands out there: the latest stretch, as a plain explain would read.
  EXPECT_EQ(s.incident_to_ns, 3600 * kS);
  r.span.has_raw = false;  // every raw row gone: rollups only
  s = SummarizeRollups(r, Window(0, 3600), 0, 120 * kS);
  EXPECT_FALSE(s.has_incident);
  EXPECT_EQ(s.tier, "rollups");
  EXPECT_EQ(s.main_pid, 10);
  EXPECT_DOUBLE_EQ(s.calls_per_s_median, 20);
}

TEST(LongWindowTest, APidChoosesTheJobAndTheWindowClipsTheSpan) {
  // --pid 11, a worker without CUDA calls: no job to follow, so the latest 2 min, as a plain
  // explain of the window would read.
  LongWindowSummary s = SummarizeRollups(Hour(), Window(1000, 1600), 11, 120 * kS);
  EXPECT_EQ(s.main_pid, 11);
  ASSERT_TRUE(s.has_incident);
  EXPECT_EQ(s.incident_from_ns, 1480 * kS);
  EXPECT_EQ(s.incident_to_ns, 1600 * kS);
  EXPECT_TRUE(s.incident_latest);
  EXPECT_EQ(s.buckets, 0);
  s = SummarizeRollups(Hour(), Window(1005, 1600), 0, 120 * kS);
  EXPECT_DOUBLE_EQ(s.active_s, 595);
  EXPECT_GE(s.incident_from_ns, 1005 * kS);
}

TEST(LongWindowTest, IncidentLengthFitsTheRawRowBudget) {
  EXPECT_EQ(IncidentLength(10'000'000, 3600 * kS, 1'000'000), 120 * kS);
  // 100 M rows an hour: 2 min would hold 3.3 M rows; 30 s holds 0.83 M.
  EXPECT_EQ(IncidentLength(100'000'000, 3600 * kS, 1'000'000), 30 * kS);
  EXPECT_EQ(IncidentLength(int64_t{1} << 40, 3600 * kS, 1'000'000), 10 * kS);
}

}  // namespace
}  // namespace gw
