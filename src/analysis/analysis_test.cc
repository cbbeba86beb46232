// Unit tests of the causal engine on hand-built windows (no database).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "analysis/analyze.h"
#include "analysis/callers.h"
#include "analysis/cpu_profile.h"
#include "analysis/explain.h"
#include "analysis/facts.h"
#include "analysis/format.h"
#include "analysis/nccl.h"
#include "analysis/thresholds.h"
#include "analysis/timeline.h"

namespace gw {
namespace {

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int32_t kMain = 100;

Event Sw(int32_t pid, int64_t ts, int64_t dur, SwitchKind kind, int64_t runq, int32_t other = 0,
         int32_t tid = 0) {
  Event e;
  e.pid = pid;
  e.tid = tid ? tid : pid;
  e.ts_ns = ts;
  e.duration_ns = dur;
  e.op = Op::kSchedSwitch;
  e.kind = static_cast<int64_t>(kind);
  e.runq_ns = runq;
  e.other_pid = other;
  return e;
}

Event Call(int32_t pid, Op op, int64_t ts, int64_t dur) {
  Event e;
  e.pid = pid;
  e.tid = pid;
  e.ts_ns = ts;
  e.duration_ns = dur;
  e.op = op;
  e.ret = 0;
  return e;
}

// A window with a training process (pid 100) that syncs every 10 ms for `secs` seconds, GPU
// ops counted in op_seconds, 8 cores.
struct Builder {
  WindowData w;
  explicit Builder(int64_t secs = 100) {
    w.session = 1;
    w.from = 0;
    w.to = secs * kSec;
    w.session_first_ts = 0;
    w.session_last_ts = w.to - 1;
    w.cores = 8;
    w.label = "test";
    Proc(kMain, 1, "python3 (train.py)", true);
    w.processes[kMain].cmdline = "python3 train.py";
    for (int64_t t = 0; t < w.to; t += 10 * kMs) {
      w.events.push_back(Call(kMain, Op::kCudaStreamSync, t + 5 * kMs, 50'000));
    }
    for (int64_t s = 0; s < secs; ++s) {
      w.op_seconds.push_back({s, kMain, Op::kCudaLaunchKernel, 2000, 2000 * 4000, 9000});
      w.op_seconds.push_back({s, kMain, Op::kCudaStreamSync, 100, 100 * 50'000, 60'000});
    }
  }
  void Proc(int32_t pid, int32_t ppid, const std::string& name, bool tracked) {
    ProcessRecord p;
    p.pid = pid;
    p.ppid = ppid;
    p.name = name;
    p.tracked = tracked;
    p.first_ts = 0;
    w.processes[pid] = p;
  }
  void Add(const Event& e) { w.events.push_back(e); }
  // Spread `total` ns of preemption (run-queue wait) over the window on the main thread.
  void Preempt(int64_t total, int32_t holder, int n = 200) {
    int64_t each = total / n;
    for (int i = 0; i < n; ++i) {
      Add(Sw(kMain, w.from + i * ((w.to - w.from) / n) + 100'000, each, SwitchKind::kPreempted,
             each, holder));
    }
  }
  Report Run() {
    std::sort(w.events.begin(), w.events.end(),
              [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
    return Analyze(w, ExplainOptions{});
  }
};

const Finding* Find(const Report& r, const std::string& rule) {
  for (const Finding& f : r.findings) {
    if (f.rule == rule) return &f;
  }
  return nullptr;
}

// NVML samples of GPU 0 every 100 ms over [from, to): `sm(ts)` gives SM activity.
template <typename Fn>
void AddGpu(WindowData& w, Fn sm) {
  w.gpu_devices.push_back({0, "NVIDIA H200", true});
  for (int64_t t = w.from + 100 * kMs; t < w.to; t += 100 * kMs) {
    GpuSample g;
    g.ts_ns = t;
    g.util_pct = static_cast<int64_t>(sm(t) * 1.2);
    g.sm_active_pct = sm(t);
    g.sm_occupancy_pct = sm(t) / 4;
    g.power_mw = 400000;
    w.gpu_samples.push_back(g);
  }
}

// ---- GPU truth (gpu.cc) ---------------------------------------------------------------------

// Held by its cause from start to end (the H200 accuracy runs attach after the fault began):
// the quietest samples are starved too, so no idle-seconds figure is derived from them.
TEST(GpuTruthTest, NoIdleClaimWithoutAnUnaffectedStretch) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  for (int64_t t = 0; t < 100 * kSec; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 10 * kMs, 60 * kMs, SwitchKind::kPreempted, 60 * kMs, 900));
  }
  AddGpu(b.w, [](int64_t) { return 27.0; });
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gpu.present);
  EXPECT_NEAR(f->gpu.blamed_pct, 27, 1);
  EXPECT_LT(f->gpu.gpu_idle_s, 0) << "no baseline: no idle figure";
  std::string effects;
  for (const std::string& e : f->effects) effects += e + "\n";
  EXPECT_NE(effects.find("no unaffected stretch"), std::string::npos) << effects;
  EXPECT_EQ(effects.find("GPU-seconds idle"), std::string::npos) << effects;
}

TEST(GpuTruthTest, ContentionEffectQuotesSmActivityWhileItHeld) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  // The first half: 60 ms of every 100 ms waiting for a CPU; the second half quiet.
  for (int64_t t = 0; t < 50 * kSec; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 10 * kMs, 60 * kMs, SwitchKind::kPreempted, 60 * kMs, 900));
  }
  AddGpu(b.w, [](int64_t t) { return t <= 50 * kSec ? 25.0 : 71.0; });
  Report r = b.Run();
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_EQ(r.gpus[0].name, "NVIDIA H200");
  EXPECT_NEAR(r.gpus[0].sm_active_pct, 48, 24);  // a median of 25s and 71s
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gpu.present);
  EXPECT_EQ(f->gpu.metric, "SM active");
  EXPECT_NEAR(f->gpu.blamed_pct, 25, 1);
  EXPECT_NEAR(f->gpu.quiet_pct, 71, 1);
  EXPECT_NEAR(f->gpu.blamed_s, 50, 1);
  EXPECT_NEAR(f->gpu.gpu_idle_s, 50 * 0.46, 1);
  std::string effects;
  for (const std::string& e : f->effects) effects += e + "\n";
  EXPECT_NE(effects.find("GPU 0 SM active 25% while the main thread waited for a CPU"),
            std::string::npos)
      << effects;
  EXPECT_NE(effects.find("vs 71% in the quietest samples"), std::string::npos) << effects;
  EXPECT_TRUE(r.gpu_verdict.empty()) << "host-side causes explain much of this window";
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("  GPU 0 (H200): nvidia-smi util "), std::string::npos) << text;
  EXPECT_NE(text.find("| SM active "), std::string::npos) << text;
  auto j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_EQ(j["gpus"][0]["name"], "NVIDIA H200");
  EXPECT_NEAR(j["findings"][0]["gpu_effect"]["blamed_pct"].get<double>(), 25, 1);
}

// A PyTorch main thread sleeps while the autograd thread runs backward, all window long: those
// sleeps resolve to the helper's work, not a host cause, so the first half (no contention) is
// the unaffected stretch the contended second half is compared with.
TEST(GpuTruthTest, BaselineComesFromTheResolvedCriticalPath) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  constexpr int32_t kAutograd = 150;
  for (int64_t t = 0; t < 100 * kSec; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 10 * kMs, 40 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = kMain;
    wait.waker_tid = kAutograd;
    b.Add(wait);
    Event backward = Call(kMain, Op::kCudaLaunchKernel, t + 12 * kMs, 10'000);
    backward.tid = kAutograd;
    b.Add(backward);
    if (t >= 50 * kSec) {
      b.Add(Sw(kMain, t + 55 * kMs, 40 * kMs, SwitchKind::kPreempted, 40 * kMs, 900));
    }
  }
  AddGpu(b.w, [](int64_t t) { return t <= 50 * kSec ? 71.0 : 25.0; });
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->gpu.present);
  EXPECT_NEAR(f->gpu.blamed_pct, 25, 1);
  EXPECT_NEAR(f->gpu.quiet_pct, 71, 1);
  EXPECT_NEAR(f->gpu.gpu_idle_s, 50 * 0.46, 1.5);
}

TEST(GpuTruthTest, BusyGpuWithoutHostCausesIsTheBottleneck) {
  Builder b;
  b.Preempt(200 * kMs, 0);
  AddGpu(b.w, [](int64_t) { return 80.0; });
  Report r = b.Run();
  for (const Finding& f : r.findings) EXPECT_EQ(f.severity, Severity::kLow) << f.rule;
  EXPECT_NE(r.gpu_verdict.find("the GPU is the bottleneck: GPU 0 SM active 80%"), std::string::npos)
      << r.gpu_verdict;
  EXPECT_NE(ReportToText(r).find("→ the GPU is the bottleneck"), std::string::npos);
}

TEST(GpuTruthTest, IdleGpuIsNoBottleneckAndNoSamplesMeansNoGpuKeys) {
  Builder b;
  AddGpu(b.w, [](int64_t) { return 10.0; });
  EXPECT_TRUE(b.Run().gpu_verdict.empty());
  Builder none;
  Report r = none.Run();
  EXPECT_TRUE(r.gpus.empty());
  auto j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_FALSE(j.contains("gpus"));
  EXPECT_EQ(ReportToText(r).find("GPU 0"), std::string::npos);
}

TEST(GpuTruthTest, WithoutGpmUtilizationStandsIn) {
  Builder b;
  b.w.gpu_devices.push_back({0, "Tesla T4", false});
  for (int64_t t = 100 * kMs; t < b.w.to; t += 100 * kMs) {
    GpuSample g;
    g.ts_ns = t;
    g.util_pct = 90;
    b.w.gpu_samples.push_back(g);
  }
  Report r = b.Run();
  ASSERT_EQ(r.gpus.size(), 1u);
  EXPECT_LT(r.gpus[0].sm_active_pct, 0);
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("GPU 0 (Tesla T4): nvidia-smi util 90% | no GPM"), std::string::npos) << text;
  EXPECT_NE(r.gpu_verdict.find("utilization 90%"), std::string::npos) << r.gpu_verdict;
}

// ---- Timeline precedence -------------------------------------------------------------------

// A unit changes where the rounded number would reach 1000: "1.0ms", never "1000µs".
TEST(FormatTest, DurationsSwitchUnitBeforeReading1000) {
  EXPECT_EQ(FormatNs(999), "999ns");
  EXPECT_EQ(FormatNs(999'400), "999µs");
  EXPECT_EQ(FormatNs(999'600), "1.0ms");
  EXPECT_EQ(FormatNs(999'600'000), "1.00s");
  EXPECT_EQ(FormatNs(12'300'000), "12ms");
}

TEST(TimelineTest, BlockedInsideSyncIsSyncAndWakeDelayIsRunq) {
  Event sync = Call(1, Op::kCudaStreamSync, 0, 10 * kMs);
  Event sw = Sw(1, 1 * kMs, 8 * kMs, SwitchKind::kBlocked, 2 * kMs, 77);
  ThreadTimeline t = ThreadTimeline::Build(1, 1, 0, 20 * kMs, {&sync, &sw});
  CauseTimes c = t.Totals();
  EXPECT_EQ(At(c, FeedCause::kSync), 8 * kMs);  // 0-1 on CPU in sync, 1-7 asleep, 9-10
  EXPECT_EQ(At(c, FeedCause::kRunqWait), 2 * kMs);
  EXPECT_EQ(At(c, FeedCause::kRunning), 10 * kMs);
  std::map<int32_t, int64_t> holders;
  t.RunqByHolder(0, 20 * kMs, &holders);
  EXPECT_EQ(holders[77], 2 * kMs);
}

TEST(TimelineTest, PrecedenceOrder) {
  EXPECT_GT(CausePrecedence(FeedCause::kRunqWait), CausePrecedence(FeedCause::kPageFault));
  EXPECT_GT(CausePrecedence(FeedCause::kPageFault), CausePrecedence(FeedCause::kBlockedIo));
  EXPECT_GT(CausePrecedence(FeedCause::kBlockedIo), CausePrecedence(FeedCause::kMemcpy));
  EXPECT_GT(CausePrecedence(FeedCause::kMemcpy), CausePrecedence(FeedCause::kSync));
  EXPECT_GT(CausePrecedence(FeedCause::kSync), CausePrecedence(FeedCause::kBlockedOther));
  EXPECT_GT(CausePrecedence(FeedCause::kBlockedOther), CausePrecedence(FeedCause::kRunning));
}

TEST(TimelineTest, KindsMapToCausesAndClipToLifetime) {
  Event pre = Sw(1, 0, 3 * kMs, SwitchKind::kPreempted, 3 * kMs);
  Event io = Sw(1, 5 * kMs, 4 * kMs, SwitchKind::kBlockedIo, 1 * kMs);
  Event fault = Sw(1, 10 * kMs, 2 * kMs, SwitchKind::kBlockedFault, 0);
  Event copy = Call(1, Op::kCudaMemcpy, 12 * kMs, 4 * kMs);
  Event sleep = Sw(1, 13 * kMs, 2 * kMs, SwitchKind::kBlocked, 0);  // inside the memcpy
  Event late = Sw(1, 18 * kMs, 10 * kMs, SwitchKind::kBlocked, 0);  // runs past the end
  ThreadTimeline t =
      ThreadTimeline::Build(1, 1, 1 * kMs, 20 * kMs, {&pre, &io, &fault, &copy, &sleep, &late});
  CauseTimes c = t.Totals();
  EXPECT_EQ(At(c, FeedCause::kRunqWait), 2 * kMs + 1 * kMs);
  EXPECT_EQ(At(c, FeedCause::kBlockedIo), 3 * kMs);
  EXPECT_EQ(At(c, FeedCause::kPageFault), 2 * kMs);
  EXPECT_EQ(At(c, FeedCause::kMemcpy), 4 * kMs);
  EXPECT_EQ(At(c, FeedCause::kBlockedOther), 2 * kMs);
  int64_t sum = 0;
  for (int64_t v : c) sum += v;
  EXPECT_EQ(sum, 19 * kMs);
  CauseTimes part = t.Overlap(6 * kMs, 8 * kMs);
  EXPECT_EQ(At(part, FeedCause::kBlockedIo), 2 * kMs);
}

// The main thread (tid 1) sleeps and hands its CPU 0 to the job's own thread 2; once woken it
// waits 4 ms for CPU 0. Thread 2 ran there for the first 1 ms of that wait and another process
// for the other 3 ms: the wait is 1 ms the job's own and 3 ms another process's, not all the
// job's (the switch row names only who took the CPU when the main thread fell asleep).
TEST(TimelineTest, RunqWaitCreditedToWhoHeldTheCpuItWaitedFor) {
  auto on = [](Event e, int32_t cpu) {
    e.cpu = cpu;
    return e;
  };
  // Main thread: asleep 10..16 ms, runnable 16..20 ms, back on CPU 0 (its next row left CPU 0).
  Event m1 = on(Sw(1, 10 * kMs, 10 * kMs, SwitchKind::kBlocked, 4 * kMs, 1), 0);
  Event m2 = on(Sw(1, 25 * kMs, 1 * kMs, SwitchKind::kBlocked, 0, 0), 0);
  // Thread 2 of the job: ran on CPU 0 from 12 to 17 ms (between its two rows).
  Event t1 = on(Sw(1, 5 * kMs, 7 * kMs, SwitchKind::kBlocked, 0, 0, /*tid=*/2), 0);
  Event t2 = on(Sw(1, 17 * kMs, 20 * kMs, SwitchKind::kBlocked, 0, 0, /*tid=*/2), 0);
  // Thread 3 of the job ran on CPU 1 all the while: not the CPU the main thread waited for.
  Event u1 = on(Sw(1, 1 * kMs, 1 * kMs, SwitchKind::kBlocked, 0, 0, /*tid=*/3), 1);
  Event u2 = on(Sw(1, 30 * kMs, 1 * kMs, SwitchKind::kBlocked, 0, 0, /*tid=*/3), 1);
  std::vector<const Event*> rows = {&m1, &m2, &t1, &t2, &u1, &u2};
  CpuOccupancy occupancy;
  for (int32_t tid : {1, 2, 3}) occupancy.AddThread(1, tid, rows);
  occupancy.Finish();
  ThreadTimeline with = ThreadTimeline::Build(1, 1, 0, 40 * kMs, rows, &occupancy);
  std::map<int32_t, int64_t> holders;
  with.RunqByHolder(0, 40 * kMs, &holders);
  EXPECT_EQ(holders[1], 1 * kMs);
  EXPECT_EQ(holders[kOtherHolder], 3 * kMs);
  EXPECT_EQ(At(with.Totals(), FeedCause::kRunqWait), 4 * kMs);
  // Without occupancy: all of it to the process the switch row named.
  ThreadTimeline without = ThreadTimeline::Build(1, 1, 0, 40 * kMs, rows);
  holders.clear();
  without.RunqByHolder(0, 40 * kMs, &holders);
  EXPECT_EQ(holders[1], 4 * kMs);
}

TEST(TimelineTest, OtherThreadsIgnored) {
  Event other = Sw(1, 0, 5 * kMs, SwitchKind::kPreempted, 5 * kMs, 0, /*tid=*/2);
  ThreadTimeline t = ThreadTimeline::Build(1, 1, 0, 10 * kMs, {&other});
  EXPECT_EQ(At(t.Totals(), FeedCause::kRunning), 10 * kMs);
}

// ---- CPU contention: the severity ladder at its boundaries ---------------------------------

Severity ContentionAt(double share, bool* found) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  b.Preempt(static_cast<int64_t>(share * 100 * kSec), 900);
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  *found = f != nullptr;
  return f ? f->severity : Severity::kLow;
}

TEST(CpuContentionTest, LadderBoundaries) {
  bool found = false;
  ContentionAt(thresholds::kLowLostShare * 0.9, &found);
  EXPECT_FALSE(found);
  EXPECT_EQ(ContentionAt(thresholds::kLowLostShare * 1.1, &found), Severity::kLow);
  EXPECT_TRUE(found);
  EXPECT_EQ(ContentionAt(thresholds::kMediumLostShare * 0.95, &found), Severity::kLow);
  EXPECT_EQ(ContentionAt(thresholds::kMediumLostShare * 1.05, &found), Severity::kMedium);
  EXPECT_EQ(ContentionAt(thresholds::kHighLostShare * 0.95, &found), Severity::kMedium);
  EXPECT_EQ(ContentionAt(thresholds::kHighLostShare * 1.05, &found), Severity::kHigh);
}

TEST(CpuContentionTest, FixNamesCompetitorAndCoreList) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  for (int i = 0; i < 4; ++i) b.Proc(101 + i, kMain, "pt_data_worker:" + std::to_string(i), true);
  b.Preempt(30 * kSec, 900);
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "cpu-contention");
  EXPECT_EQ(f.severity, Severity::kHigh);
  std::string fixes;
  for (const std::string& s : f.fix) fixes += s + "\n";
  // Pids, never the job's own command line (untrusted text) pasted into a shell command.
  EXPECT_NE(fixes.find("for p in 100 101 102 103 104; do taskset -apc 0-3 $p; done"),
            std::string::npos)
      << fixes;
  EXPECT_EQ(fixes.find("train.py"), std::string::npos) << fixes;
  EXPECT_NE(fixes.find("renice -n 19 -p 900"), std::string::npos) << fixes;
  std::string contributing;
  for (const std::string& s : f.contributing) contributing += s + "\n";
  EXPECT_NE(contributing.find("ffmpeg (PID 900)"), std::string::npos) << contributing;
}

TEST(CpuContentionTest, QuietRunHasNothingAboveLow) {
  Builder b;
  b.Preempt(200 * kMs, 0);
  Report r = b.Run();
  for (const Finding& f : r.findings) EXPECT_EQ(f.severity, Severity::kLow) << f.rule;
}

// Run-queue waits that only the job's own threads caused. `busy_pct` is the host's CPU busy
// share in the snapshots; `spread` puts the main thread's switches on both CPUs (else CPU 0:
// pinned); `holder` took the CPU each time (101: the job's own worker).
Severity SelfContention(double busy_pct, bool spread, int32_t holder, std::string* root,
                        const char* rule = "cpu-contention") {
  Builder b;
  b.w.cores = 2;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  b.Proc(900, 1, "ffmpeg", false);
  for (int64_t t = 0; t < b.w.to; t += kSec) {
    SystemSnapshot s;
    s.ts_ns = t;
    s.cpu_pct = busy_pct;
    s.cores = 2;
    b.w.snapshots.push_back(s);
  }
  b.Preempt(10 * kSec, holder);  // 10% of the window
  int i = 0;
  for (Event& e : b.w.events) {
    if (e.op == Op::kSchedSwitch) e.cpu = spread ? (i++ % 2) : 0;
  }
  Report r = b.Run();
  const Finding* f = Find(r, rule);
  EXPECT_NE(f, nullptr) << rule;
  if (f == nullptr) return Severity::kLow;
  root->clear();
  for (const std::string& line : f->root) *root += line + "\n";
  return f->severity;
}

TEST(CpuContentionTest, OwnThreadsOnAnIdleHostAreWakeupLatencyNotContention) {
  std::string root;
  const char* own = "cpu-oversubscription";
  EXPECT_EQ(SelfContention(20, true, 101, &root, own), Severity::kLow);
  EXPECT_NE(root.find("No other process held the CPUs and the host's 2 cores were 80.0% idle"),
            std::string::npos)
      << root;
  // The same waits cost the job when the host is busy or the job is pinned to fewer CPUs than
  // the host has: its own threads crowd its CPUs (oversubscription). Behind another process
  // they are contention.
  EXPECT_EQ(SelfContention(90, true, 101, &root, own), Severity::kMedium);
  EXPECT_EQ(root.find("No other process"), std::string::npos) << root;
  EXPECT_EQ(SelfContention(20, false, 101, &root, own), Severity::kMedium);
  EXPECT_EQ(SelfContention(20, true, 900, &root), Severity::kMedium);
}

// A job that already ran on 2 of the host's 8 CPUs (taskset, a cpuset) is not told to pin itself
// again: the others are told to keep off its CPUs.
TEST(CpuContentionTest, AlreadyPinnedJobIsNotToldToPinItself) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  b.Preempt(30 * kSec, 900);
  int i = 0;
  for (Event& e : b.w.events) {
    if (e.op == Op::kSchedSwitch) e.cpu = 2 + (i++ % 2);  // CPUs 2-3 only
  }
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  std::string fixes;
  for (const std::string& x : f->fix) fixes += x + "\n";
  EXPECT_EQ(fixes.find("pin the job"), std::string::npos) << fixes;
  EXPECT_NE(fixes.find("move them off the job's CPUs: for p in 900; do taskset -apc 0-1,4-7 $p"),
            std::string::npos)
      << fixes;
  std::string contributing;
  for (const std::string& x : f->contributing) contributing += x + "\n";
  EXPECT_NE(contributing.find("already runs on CPUs 2-3"), std::string::npos) << contributing;
}

// On a small host the tracer itself can take CPU from the job (seen under ASan on 2 cores): the
// finding names it rather than blaming "other processes" it then lists as none.
TEST(CpuContentionTest, TheTracerHoldingTheCpuIsNamedNotHidden) {
  Builder b;
  b.Proc(950, 1, "gpuwhy", false);
  b.w.tracer_pid = 950;
  b.Preempt(30 * kSec, 950);
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  std::string root, fixes;
  for (const std::string& x : f->root) root += x + "\n";
  for (const std::string& x : f->fix) fixes += x + "\n";
  EXPECT_NE(root.find("gpuwhy's own tracer (PID 950) held the CPU"), std::string::npos) << root;
  EXPECT_EQ(fixes.find("renice -n 19 -p 950"), std::string::npos) << fixes;
  bool metric = false;
  for (const Metric& m : f->metrics) metric |= m.name == "tracer_held_s" && m.value > 20;
  EXPECT_TRUE(metric);
}

// The job (kMain) in cgroup "/job" with a quota of quota_us per 100 ms period, throttled in
// `throttled` of each second's 10 periods (400 ms of run queues throttled a second), using
// used_ms of CPU a second; the 2-core host busy cpu_pct% by snapshot.
void QuotaSamples(Builder* b, int64_t quota_us, int64_t throttled, int64_t used_ms,
                  double cpu_pct) {
  b->w.process_cgroups.push_back({kMain, "/job", 0});
  for (int64_t s = 0; s * kSec <= b->w.to; ++s) {
    CgroupCpuSample c;
    c.ts_ns = s * kSec;
    c.cgroup = "/job";
    c.version = 2;
    c.quota_us = quota_us;
    c.period_us = 100'000;
    c.nr_periods = s * 10;
    c.nr_throttled = s * throttled;
    c.throttled_ns = s * 400 * kMs;
    c.usage_ns = s * used_ms * kMs;
    b->w.cgroup_cpu.push_back(c);
    SystemSnapshot snap;
    snap.ts_ns = s * kSec;
    snap.cpu_pct = cpu_pct;
    snap.cores = 2;
    b->w.snapshots.push_back(snap);
  }
}

// A cgroup quota that throttles the job is not fixed by pinning: beside cpu-quota, a contention
// finding on the same waits must not advise taskset.
TEST(CpuContentionTest, NoPinningAdviceWhileTheQuotaThrottles) {
  Builder b;
  b.w.cores = 2;
  b.Proc(900, 1, "ffmpeg", false);
  QuotaSamples(&b, 50'000, 8, 500, 50);
  b.Preempt(30 * kSec, 0, 100);
  b.Preempt(10 * kSec, 900, 100);
  // Ends spread over the quota's period (no refill grid: the per-second share decides).
  int64_t i = 0;
  for (Event& e : b.w.events) {
    if (e.op == Op::kSchedSwitch) e.ts_ns += (i++ * 37 % 100) * kMs;
  }
  Report r = b.Run();
  ASSERT_NE(Find(r, "cpu-quota"), nullptr);
  for (const Finding& f : r.findings) {
    for (const std::string& x : f.fix) {
      EXPECT_EQ(x.find("pin the job"), std::string::npos) << f.rule << ": " << x;
      EXPECT_EQ(x.find("move them off"), std::string::npos) << f.rule << ": " << x;
    }
  }
  std::string rules;
  for (const Finding& f : r.findings) rules += f.rule + " ";
  EXPECT_NE(rules.find("cpu-contention"), std::string::npos) << rules;
}

// A throttled cgroup's threads all run again when the period timer refills the quota, so their
// run-queue waits end together once a period. Waits that pile up at one offset of the period are
// the quota's, however busy other processes kept the CPUs; the same waits ending anywhere get
// only the share the host's load leaves to the quota.
double QuotaShareOfWaits(bool on_grid, int64_t* phase) {
  Builder b(30);
  b.w.cores = 2;
  b.Proc(900, 1, "ffmpeg", false);
  QuotaSamples(&b, 30'000, 9, 300, 100);  // others kept the rest of both CPUs busy
  int64_t waited = 0;
  for (int64_t k = 1; k < 290; ++k) {
    int64_t len = 40 * kMs + (k % 7) * kMs;
    // On the grid: every end within 0.5 ms after 37 ms into the period; else spread over it.
    int64_t end = k * 100 * kMs + (on_grid ? 37 * kMs + (k % 5) * 100'000 : (k * 37 % 100) * kMs);
    b.Add(Sw(kMain, end - len, len, SwitchKind::kPreempted, len, 900));
    waited += len;
  }
  std::sort(b.w.events.begin(), b.w.events.end(),
            [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
  Facts f = ComputeFacts(b.w, ExplainOptions{});
  EXPECT_TRUE(f.quota.has_value());
  *phase = f.quota ? f.quota->refill_phase_ns : -2;
  auto it = f.runq_holders.find(kQuotaHolder);
  return it == f.runq_holders.end() ? 0.0 : static_cast<double>(it->second) / waited;
}

TEST(CpuQuotaTest, WaitsEndingWhenTheQuotaRefillsAreTheQuotas) {
  int64_t phase = 0;
  double share = QuotaShareOfWaits(true, &phase);
  EXPECT_GE(phase, 35 * kMs);
  EXPECT_LE(phase, 37 * kMs);
  EXPECT_GT(share, 0.97);
  share = QuotaShareOfWaits(false, &phase);
  EXPECT_EQ(phase, -1);
  // T / (T + O): 0.4 throttled CPU-s a second against 1.7 CPU-s of others' use.
  EXPECT_GT(share, 0.1);
  EXPECT_LT(share, 0.35);
}

// Programs the job starts with subprocess.Popen wake it once, as they exec; a worker with its
// own command line (multiprocessing's spawn) wakes it for every batch.
TEST(RolesTest, OneWakeAtExecDoesNotMakeAWorker) {
  Builder b;
  b.Proc(201, kMain, "python3 (-c)", true);
  b.w.processes[201].cmdline = "python3 -c while True: pass";
  b.Proc(202, kMain, "python3 (-c)", true);
  b.w.processes[202].cmdline = "python3 -c from multiprocessing.spawn import spawn_main";
  for (int64_t t = 0; t < 50; ++t) {
    Event wait = Sw(kMain, t * kSec + 20 * kMs, 5 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = (t == 0) ? 201 : 202;
    wait.waker_tid = wait.waker_pid;
    b.Add(wait);
    b.Add(Sw(201, t * kSec + 50 * kMs, kMs, SwitchKind::kPreempted, kMs, kMain));
    b.Add(Sw(202, t * kSec + 60 * kMs, kMs, SwitchKind::kBlocked, 0));
  }
  std::sort(b.w.events.begin(), b.w.events.end(),
            [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
  Facts f = ComputeFacts(b.w, ExplainOptions{});
  EXPECT_EQ(f.child_pids, std::vector<int32_t>{201});
  EXPECT_EQ(f.worker_pids, std::vector<int32_t>{202});
}

// trace --launch-duty 10: launches counted one second in 10 (0, 10, 20, …), in a recording
// without coverage rows: every launch figure is 10 × the count and marked estimated; the seconds
// between are not read as a throughput drop. (The coverage estimate: launch_estimate_test.cc.)
TEST(LaunchDutyTest, CountedSecondsAreScaledAndNotReadAsAThroughputDrop) {
  Builder b;
  b.w.launch_duty = 10;
  b.w.launch_estimates.duty = 10;
  std::vector<OpSecondRow> kept;
  int64_t counted = 0;
  for (const OpSecondRow& r : b.w.op_seconds) {
    if (IsLaunch(r.op) && r.sec % 10 != 0) continue;
    if (IsLaunch(r.op)) counted += r.count;
    kept.push_back(r);
  }
  b.w.op_seconds = kept;
  b.w.kernel_launches.push_back({kMain, Op::kCudaLaunchKernel, "gemm", counted});
  Report r = b.Run();
  EXPECT_EQ(r.kernels.launch_duty, 10);
  EXPECT_EQ(r.kernels.launches, counted * 10);
  for (const Finding& f : r.findings) {
    for (const std::string& e : f.effects) {
      EXPECT_EQ(e.find("throughput dropped"), std::string::npos) << f.rule << ": " << e;
    }
  }
  std::string notes;
  for (const std::string& n : r.notes) notes += n + "\n";
  EXPECT_NE(notes.find("counted 1 s in 10 (trace --launch-duty)"), std::string::npos) << notes;
  EXPECT_NE(ReportToText(r).find("~" + FormatCount(counted * 10) + " launches"),
            std::string::npos)
      << ReportToText(r);
  EXPECT_NE(ReportToText(r).find("(estimated from " + FormatCount(counted) + " counted)"),
            std::string::npos);
  Facts f = ComputeFacts(b.w, ExplainOptions{});
  EXPECT_EQ(f.cuda_calls[kMain], counted * 10 + 100 * 100);
  for (const auto& [sec, n] : f.cuda_ops_per_sec[kMain]) EXPECT_EQ(n, 100) << sec;
}

// ---- DataLoader starvation vs contention: what the workers did during the waits -----------

TEST(StarvationTest, BusyWorkersMeanStarvationPreemptedWorkersMeanContention) {
  for (bool preempted : {false, true}) {
    Builder b;
    b.Proc(101, kMain, "pt_data_worker:0", true);
    b.Proc(900, 1, "ffmpeg", false);
    // The main thread waits 20 ms of every 100 ms for a batch (20% of wall clock).
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      b.Add(Sw(kMain, t + 60 * kMs, 20 * kMs, SwitchKind::kBlocked, 0));
      if (preempted) b.Add(Sw(101, t + 60 * kMs, 20 * kMs, SwitchKind::kPreempted, 20 * kMs, 900));
      // Otherwise the worker is on CPU: no row.
    }
    Report r = b.Run();
    ASSERT_FALSE(r.findings.empty());
    EXPECT_EQ(r.findings[0].rule, preempted ? "cpu-contention" : "dataloader-starvation");
    EXPECT_EQ(r.findings[0].severity, Severity::kHigh);
  }
}

// A PyTorch worker: its computing thread runs for long stretches (few switches) while its queue
// feeder thread wakes for every batch it hands over (many switches, asleep almost always). The
// worker's state is its computing thread's, whichever thread delivered the batch.
TEST(StarvationTest, WorkerIsJudgedByItsComputingThreadNotItsBusiestWaker) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  constexpr int32_t kFeeder = 1011;
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 30 * kMs, 60 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 101;
    wait.waker_tid = kFeeder;
    b.Add(wait);
    b.Add(Sw(101, t + 95 * kMs, 1 * kMs, SwitchKind::kBlocked, 0));  // computes 99 ms of 100
    for (int64_t k = 0; k < 10; ++k) {
      b.Add(Sw(101, t + k * 10 * kMs, 10 * kMs - 20'000, SwitchKind::kBlocked, 0, 0, kFeeder));
    }
  }
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "dataloader-starvation");
  EXPECT_EQ(r.findings[0].severity, Severity::kHigh);
}

// ---- I/O and memory ------------------------------------------------------------------------

TEST(IoTest, WorkersBlockedOnIoDuringWaits) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 60 * kMs, 10 * kMs, SwitchKind::kBlocked, 0));
    b.Add(Sw(101, t + 60 * kMs, 10 * kMs, SwitchKind::kBlockedIo, 0));
    Event io = Call(101, Op::kBlockIo, t + 60 * kMs, 9 * kMs);
    io.bytes = 1 << 20;
    b.Add(io);
  }
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "io-bottleneck");
  EXPECT_EQ(r.findings[0].severity, Severity::kMedium);  // 10% lost
}

TEST(MemoryTest, FaultStallsNeedPressureEvidence) {
  for (bool faults_recorded : {false, true}) {
    Builder b;
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      b.Add(Sw(kMain, t + 60 * kMs, 10 * kMs, SwitchKind::kBlockedFault, 0));
      for (int i = 0; faults_recorded && i < 10; ++i) {
        b.Add(Call(kMain, Op::kMajorFault, t + 60 * kMs, 0));
      }
    }
    Report r = b.Run();
    const Finding* f = Find(r, "memory-pressure");
    // 100 faults/s crosses kMajorFaultsPerSecMin; without fault rows or swap, no finding.
    EXPECT_EQ(f != nullptr, faults_recorded);
    if (f) {
      EXPECT_EQ(f->severity, Severity::kMedium);
    }
  }
}

// Major faults with the host's memory mostly free, no swap and no reclaim: files read into a cold
// page cache (a job importing its libraries), not memory pressure: no advice to free memory (the
// H200's NCCL job at start-up got "Host memory pressure" HIGH at 1.1% memory used).
TEST(MemoryTest, FaultsWithFreeMemoryAreAColdPageCacheNotPressure) {
  for (double used : {20.0, 95.0}) {
    Builder b;
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      b.Add(Sw(kMain, t + 60 * kMs, 10 * kMs, SwitchKind::kBlockedFault, 0));
      for (int i = 0; i < 10; ++i) b.Add(Call(kMain, Op::kMajorFault, t + 60 * kMs, 0));
    }
    for (int64_t t = 0; t < b.w.to; t += kSec) {
      SystemSnapshot s;
      s.ts_ns = t;
      s.mem_pct = used;
      s.cores = 8;
      b.w.snapshots.push_back(s);
    }
    Report r = b.Run();
    const Finding* f = Find(r, "memory-pressure");
    ASSERT_NE(f, nullptr);
    std::string fixes;
    for (const std::string& x : f->fix) fixes += x + "\n";
    if (used < 90) {
      EXPECT_NE(f->cause.find("cold page cache"), std::string::npos) << f->cause;
      EXPECT_EQ(fixes.find("free host memory"), std::string::npos) << fixes;
      EXPECT_NE(fixes.find("vmtouch"), std::string::npos) << fixes;
    } else {
      EXPECT_EQ(f->cause, "Host memory pressure");
      EXPECT_NE(fixes.find("free host memory"), std::string::npos) << fixes;
    }
  }
}

// ---- memcpy ----------------------------------------------------------------------------------

TEST(MemcpyTest, ShareBoundariesAndPinnedBit) {
  for (double share : {0.049, 0.051, 0.16, 0.31}) {
    for (bool pinned : {false, true}) {
      Builder b;
      int n = 1000;
      int64_t each = static_cast<int64_t>(share * 100 * kSec) / n;
      for (int i = 0; i < n; ++i) {
        Event c = Call(kMain, Op::kCudaMemcpyAsync, i * 100 * kMs + 6 * kMs, each);
        c.bytes = 8 << 20;
        c.kind = 1 | (pinned ? kCopyPinnedHost : 0);
        b.Add(c);
      }
      Report r = b.Run();
      const Finding* f = Find(r, "memcpy-bottleneck");
      if (share < thresholds::kMemcpyLowShare) {
        EXPECT_EQ(f, nullptr);
        continue;
      }
      ASSERT_NE(f, nullptr) << share;
      Severity want = share >= thresholds::kMemcpyHighShare     ? Severity::kHigh
                      : share >= thresholds::kMemcpyMediumShare ? Severity::kMedium
                                                                : Severity::kLow;
      EXPECT_EQ(f->severity, want) << share;
      bool says_pin = false;
      for (const std::string& s : f->fix)
        says_pin |= s.find("pin_memory=True") != std::string::npos;
      EXPECT_EQ(says_pin, !pinned);
    }
  }
}

// `loss.item()`: a 4-byte device-to-host copy that waits for the kernels queued before it is a
// sync, not a data transfer. 30% of the window in such copies is no memcpy-bottleneck, and the
// main thread's critical path counts the time as sync; the same copies moving 8 MB each are.
TEST(MemcpyTest, ReadbackWaitingForTheStreamIsASync) {
  for (int64_t bytes : {int64_t{4}, int64_t{8} << 20}) {
    Builder b;
    for (int i = 0; i < 1000; ++i) {
      Event c = Call(kMain, Op::kCudaMemcpyAsync, i * 100 * kMs + 6 * kMs, 30 * kMs);
      c.bytes = bytes;
      c.kind = static_cast<int64_t>(CopyKind::kDeviceToHost);
      b.Add(c);
    }
    std::sort(b.w.events.begin(), b.w.events.end(),
              [](const Event& x, const Event& y) { return x.ts_ns < y.ts_ns; });
    Facts f = ComputeFacts(b.w, ExplainOptions{});
    Report r = Analyze(b.w, ExplainOptions{});
    if (bytes == 4) {
      EXPECT_EQ(Find(r, "memcpy-bottleneck"), nullptr);
      EXPECT_GE(At(f.path, FeedCause::kSync), 30 * kSec);
      EXPECT_EQ(At(f.path, FeedCause::kMemcpy), 0);
    } else {
      ASSERT_NE(Find(r, "memcpy-bottleneck"), nullptr) << "8 MB in 30 ms is a transfer";
      EXPECT_GE(At(f.path, FeedCause::kMemcpy), 30 * kSec);
    }
  }
}

// Copies short enough for the row budget to count them in the kernel have no rows: 8% of the
// window in host-device ones is a finding; device-to-device ones and other processes' are not.
TEST(MemcpyTest, ShortCopiesCountedInTheKernelCount) {
  Builder b;
  b.w.copy_aggregates.push_back({kMain, Op::kCudaMemcpyAsync, "HtoD", 800'000, 15 * kSec, 1 << 30});
  b.w.copy_aggregates.push_back({kMain, Op::kCudaMemcpyAsync, "DtoH", 200'000, 5 * kSec, 1 << 20});
  Report r = b.Run();
  const Finding* f = Find(r, "memcpy-bottleneck");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kMedium);
  EXPECT_NEAR(f->lost_s, 20.0, 0.01);
  ASSERT_FALSE(f->root.empty());
  EXPECT_NE(f->root[0].find("1,000,000"), std::string::npos) << f->root[0];
  bool sql = false;
  for (const EvidenceQuery& q : f->evidence) {
    sql |= q.sql.find("op_stats_seconds") != std::string::npos;
  }
  EXPECT_TRUE(sql) << "the evidence reads the aggregates";

  Builder other;
  other.w.copy_aggregates.push_back({kMain, Op::kCudaMemcpyAsync, "DtoD", 800'000, 20 * kSec, 0});
  other.w.copy_aggregates.push_back({kMain + 1, Op::kCudaMemcpyAsync, "HtoD", 8, 20 * kSec, 0});
  EXPECT_EQ(Find(other.Run(), "memcpy-bottleneck"), nullptr);
}

// ---- CUDA-side rules -------------------------------------------------------------------------

double PathS(const Report& r, BudgetCause c);
double LostS(const Report& r, BudgetCause c);

// Lost time is the budget's: the GPU idle while the host computed into a drained queue, and
// the severity follows it.
TEST(SyncHeavyTest, ManySyncsFewLaunches) {
  Builder b;
  for (OpSecondRow& r : b.w.op_seconds) {
    if (r.op == Op::kCudaStreamSync) r.count = 600;
    if (r.op == Op::kCudaLaunchKernel) r.count = 1200;
  }
  Report r = b.Run();
  const Finding* f = Find(r, "sync-heavy");
  ASSERT_NE(f, nullptr);
  double lost = LostS(r, BudgetCause::kHostCompute) + LostS(r, BudgetCause::kHelperCompute);
  EXPECT_NEAR(f->lost_s, lost, 1e-9);
  double share = lost / r.budget.window_s;
  EXPECT_EQ(f->severity, share >= 0.15  ? Severity::kHigh
                         : share >= 0.05 ? Severity::kMedium
                                         : Severity::kLow);
  EXPECT_EQ(Find(r, "host-compute"), nullptr) << "the same seconds are reported once";
  for (OpSecondRow& row : b.w.op_seconds) {
    if (row.op == Op::kCudaLaunchKernel) row.count = 600 * 25;  // 25 launches per sync
  }
  EXPECT_EQ(Find(b.Run(), "sync-heavy"), nullptr);
}

// The rates' evidence divides the window's counts by the seconds the process ran, and counts
// runtime launches only where a recording counted nested driver launches again.
TEST(SyncHeavyTest, EvidenceCountsLaunchesTheWayTheRecordingDid) {
  for (bool once : {true, false}) {
    Builder b;
    b.w.launches_once = once;
    for (OpSecondRow& r : b.w.op_seconds) {
      if (r.op == Op::kCudaStreamSync) r.count = 600;
      if (r.op == Op::kCudaLaunchKernel) r.count = 1200;
    }
    Report r = b.Run();
    const Finding* f = Find(r, "sync-heavy");
    ASSERT_NE(f, nullptr);
    ASSERT_FALSE(f->evidence.empty());
    const std::string& sql = f->evidence[0].sql;
    EXPECT_NE(sql.find("/ 100.000000000, 1) AS syncs_per_s"), std::string::npos) << sql;
    EXPECT_NE(sql.find("'cudaLaunchKernel'"), std::string::npos) << sql;
    EXPECT_EQ(sql.find("'cuLaunchKernel'") != std::string::npos, once) << sql;
  }
}

TEST(LaunchBoundTest, LaunchShareWithIdleGpu) {
  Builder b;
  for (OpSecondRow& r : b.w.op_seconds) {
    if (r.op == Op::kCudaLaunchKernel) {
      r.count = 120'000;
      r.total_ns = 120'000 * 5'000;  // 60% of each second inside launches
    }
  }
  const Finding* f = nullptr;
  Report r = b.Run();
  f = Find(r, "launch-bound");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kMedium);
}

TEST(AllocatorTest, PeriodicSpikesDetected) {
  Builder b;
  for (int64_t s = 5; s < 100; s += 10) {
    b.w.op_seconds.push_back({s, kMain, Op::kCudaMalloc, 30, 250 * kMs, 10 * kMs});
    b.w.op_seconds.push_back({s, kMain, Op::kCudaFree, 30, 90 * kMs, 4 * kMs});
  }
  Report r = b.Run();
  const Finding* f = Find(r, "allocator-spikes");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kMedium);
  EXPECT_NE(f->root[0].find("every 10 s"), std::string::npos) << f->root[0];
  // Two spikes are not a pattern.
  Builder two;
  two.w.op_seconds.push_back({20, kMain, Op::kCudaMalloc, 30, 250 * kMs, 10 * kMs});
  two.w.op_seconds.push_back({50, kMain, Op::kCudaMalloc, 30, 250 * kMs, 10 * kMs});
  EXPECT_EQ(Find(two.Run(), "allocator-spikes"), nullptr);
}

TEST(ColdStartTest, SlowRampFromSessionStart) {
  Builder b;
  for (OpSecondRow& r : b.w.op_seconds) {
    if (r.sec < 12) r.count /= 10;
  }
  Report r = b.Run();
  const Finding* f = Find(r, "cold-start");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->severity, Severity::kMedium);  // 12 s of 100
  // A window that starts later never reports cold start.
  b.w.from = 20 * kSec;
  EXPECT_EQ(Find(b.Run(), "cold-start"), nullptr);
}

TEST(GpuSharingTest, SecondCudaProcessInflatesSyncs) {
  Builder b;
  b.Proc(200, 1, "python3 (eval.py)", true);
  for (int64_t s = 50; s < 100; ++s)
    b.w.op_seconds.push_back({s, 200, Op::kCudaLaunchKernel, 900, 0, 0});
  for (Event& e : b.w.events) {
    if (e.op == Op::kCudaStreamSync && e.ts_ns >= 50 * kSec) e.duration_ns = 400'000;
  }
  Report r = b.Run();
  const Finding* f = Find(r, "gpu-sharing");
  ASSERT_NE(f, nullptr);
  EXPECT_GE(static_cast<int>(f->severity), static_cast<int>(Severity::kMedium));
}

TEST(FailureTest, OomAndAllocFailuresAreHigh) {
  Builder b;
  Event oom = Call(kMain, Op::kOomKill, 10 * kSec, 0);
  oom.ret = kNull;
  b.Add(oom);
  Event bad = Call(kMain, Op::kCudaMalloc, 11 * kSec, 1000);
  bad.ret = 2;
  bad.bytes = 8ll << 30;
  b.Add(bad);
  Report r = b.Run();
  ASSERT_NE(Find(r, "oom-kill"), nullptr);
  ASSERT_NE(Find(r, "alloc-failure"), nullptr);
  EXPECT_EQ(Find(r, "oom-kill")->severity, Severity::kHigh);
  EXPECT_EQ(Find(r, "alloc-failure")->severity, Severity::kHigh);
}

// ---- Containers (issue 36) -------------------------------------------------------------------

// A job in a container: the pin fix gives the host's pids and the pids in the container, the
// report lists the container with each pid's namespace pid.
TEST(ContainerTest, PinFixAndReportNameTheContainerAndItsPids) {
  const std::string id(64, 'c');
  const std::string uid = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  for (int i = 0; i < 2; ++i) b.Proc(101 + i, kMain, "pt_data_worker:" + std::to_string(i), true);
  b.w.process_cgroups.push_back(
      {kMain, "/kubepods/burstable/pod" + uid + "/" + id, 0, id, uid, "", 1});
  b.w.process_cgroups.push_back(
      {101, "/kubepods/burstable/pod" + uid + "/" + id, 0, id, uid, "", 7});
  b.w.process_cgroups.push_back(
      {102, "/kubepods/burstable/pod" + uid + "/" + id, 0, id, uid, "", 8});
  b.Preempt(30 * kSec, 900);
  Report r = b.Run();
  const Finding* f = Find(r, "cpu-contention");
  ASSERT_NE(f, nullptr);
  std::string fixes;
  for (const std::string& s : f->fix) fixes += s + "\n";
  EXPECT_NE(fixes.find("for p in 100 101 102; do taskset -apc 0-2 $p; done (host pids; in the "
                       "container cccccccccccc: for p in 1 7 8; do taskset -apc 0-2 $p; done)"),
            std::string::npos)
      << fixes;
  ASSERT_EQ(r.containers.size(), 1u);
  EXPECT_EQ(r.containers[0].container_id, id);
  EXPECT_EQ(r.containers[0].pod_uid, uid);
  ASSERT_GE(r.containers[0].pids.size(), 3u);
  EXPECT_EQ(r.containers[0].pids[0], (std::pair<int32_t, int32_t>{kMain, 1}));
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("Container: " + id + " (pod " + uid +
                      "): pids 100 is 1 in the container, "
                      "101 is 7, 102 is 8"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ns_pid"), std::string::npos) << text;
  nlohmann::ordered_json j = ReportJson(r);
  EXPECT_EQ(j["containers"][0]["container_id"], id);
  EXPECT_EQ(j["top_processes"][0]["ns_pid"], 1);
}

// A host job: no container line, no extra columns, no container keys.
TEST(ContainerTest, HostJobOutputIsUnchanged) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  b.w.process_cgroups.push_back({kMain, "/user.slice", 0, "", "", "", kMain});
  b.Preempt(30 * kSec, 900);
  Report r = b.Run();
  EXPECT_TRUE(r.containers.empty());
  std::string text = ReportToText(r);
  EXPECT_EQ(text.find("Container:"), std::string::npos);
  EXPECT_EQ(text.find("ns_pid"), std::string::npos);
  EXPECT_FALSE(ReportJson(r).contains("containers"));
}

// The job's memory cgroup reached its limit: memory-limit (LOW) names the limit and the
// container; an OOM kill in it names the container in oom-kill's cause.
TEST(ContainerTest, MemoryLimitAndOomKillNameTheContainer) {
  const std::string id(64, 'd');
  Builder b;
  b.w.process_cgroups.push_back({kMain, "/docker/" + id, 0, id, "", "docker", 1});
  for (int64_t s = 0; s <= 20; ++s) {
    CgroupMemorySample m;
    m.ts_ns = s * kSec;
    m.cgroup = "/docker/" + id;
    m.version = 1;
    m.max_bytes = 128ll << 20;
    m.usage_bytes = (120ll << 20) + s;
    m.events_max = s * 50;
    m.events_oom_kill = s >= 10 ? 1 : 0;
    b.w.cgroup_memory.push_back(m);
  }
  Event oom = Call(kMain + 5, Op::kOomKill, 10 * kSec, 0);
  b.Add(oom);
  Report r = b.Run();
  const Finding* lim = Find(r, "memory-limit");
  ASSERT_NE(lim, nullptr);
  EXPECT_EQ(lim->severity, Severity::kLow);
  std::string root;
  for (const std::string& s : lim->root) root += s + "\n";
  EXPECT_NE(root.find("cgroup /docker/" + id + " (container dddddddddddd) is limited to"),
            std::string::npos)
      << root;
  EXPECT_NE(root.find("(memory.limit_in_bytes)"), std::string::npos) << root;
  EXPECT_NE(root.find("reached its limit 1,000 times"), std::string::npos) << root;
  const Finding* kill = Find(r, "oom-kill");
  ASSERT_NE(kill, nullptr);
  EXPECT_EQ(kill->cause, "Out-of-memory kills in container dddddddddddd at its memory limit");
  bool raise = false;
  for (const std::string& s : kill->fix)
    raise |= s.find("raise the memory limit of container") == 0;
  EXPECT_TRUE(raise);
}

// ---- Evidence SQL ----------------------------------------------------------------------------

// The newest session reads the `events` view with no session filter, as the brief writes SQL;
// an older one `events_all` with its id. Ops are named, never numbered; no raw tables.
TEST(EvidenceTest, ViewsAndOpNamesForNewestAndOlderSessions) {
  for (bool newest : {true, false}) {
    Builder b;
    b.w.session = 3;
    b.w.newest_session = newest;
    b.Proc(900, 1, "ffmpeg", false);
    b.Preempt(30 * kSec, 900);
    Event oom = Call(kMain, Op::kOomKill, 10 * kSec, 0);
    b.Add(oom);
    Report r = b.Run();
    ASSERT_NE(Find(r, "cpu-contention"), nullptr);
    ASSERT_NE(Find(r, "oom-kill"), nullptr);
    for (const Finding& f : r.findings) {
      for (const EvidenceQuery& q : f.evidence) {
        SCOPED_TRACE(f.rule + ": " + q.sql);
        EXPECT_EQ(q.sql.find("event_rows"), std::string::npos);
        EXPECT_EQ(q.sql.find("op_seconds"), std::string::npos);
        EXPECT_EQ(q.sql.find("op < "), std::string::npos);
        EXPECT_EQ(q.sql.find("op = 2"), std::string::npos);
        EXPECT_EQ(q.sql.find("op IN (1"), std::string::npos);
        bool reads_events = q.sql.find("FROM events") != std::string::npos;
        bool reads_all = q.sql.find("FROM events_all") != std::string::npos;
        if (newest) {
          EXPECT_FALSE(reads_all);
          EXPECT_EQ(q.sql.find("e.session = 3 AND"), std::string::npos);
        } else if (reads_events) {
          EXPECT_TRUE(reads_all);
          EXPECT_NE(q.sql.find("session = 3 AND"), std::string::npos);
        }
      }
    }
    std::string oom_sql = Find(r, "oom-kill")->evidence.at(0).sql;
    EXPECT_NE(oom_sql.find("e.op = 'oom_kill'"), std::string::npos) << oom_sql;
    std::string sync_sql;
    for (const EvidenceQuery& q : Find(r, "cpu-contention")->evidence) {
      if (q.sql.find("p99_us") != std::string::npos) sync_sql = q.sql;
    }
    EXPECT_NE(sync_sql.find("'cudaStreamSync', 'cudaDeviceSync', 'cudaEventSync', "
                            "'cuStreamSync', 'cuCtxSync', 'cuEventSync'"),
              std::string::npos)
        << sync_sql;
  }
}

// ---- Rendering -----------------------------------------------------------------------------

TEST(RenderTest, JsonCarriesWhatTextShows) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  b.Preempt(30 * kSec, 900);
  Report r = b.Run();
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("[HIGH] CPU scheduling contention → CUDA throughput drop"), std::string::npos)
      << text;
  EXPECT_NE(text.find("GPU feed-time attribution"), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_EQ(j["findings"][0]["rule"], "cpu-contention");
  EXPECT_EQ(j["findings"][0]["severity"], "HIGH");
  EXPECT_FALSE(j["findings"][0]["evidence"].empty());
  EXPECT_EQ(j["feed_time"][0]["causes"].size(), kFeedCauseCount);
}

// An edited database can hold any integers: analysis clamps instead of overflowing (the
// sanitizer build aborts on signed overflow).
TEST(RobustnessTest, ExtremeValuesFromAnEditedFileDoNotOverflow) {
  Builder b;
  b.w.session_first_ts = INT64_MIN + 5;
  b.w.session_last_ts = INT64_MAX - 5;
  b.Add(Sw(kMain, INT64_MAX - 100, INT64_MAX / 2, SwitchKind::kBlocked, 0));
  b.Add(Call(kMain, Op::kCudaStreamSync, 5 * kSec, INT64_MAX));
  Report r = b.Run();
  EXPECT_EQ(r.window.from_ns, b.w.from);
}

// Issue 34: kworker and bash rows with 0.0 in every column filled the process table. A process
// that is not the job's shows only when one of its numbers prints; the job's rows always do.
TEST(RenderTest, ProcessTableLeavesOutRowsThatPrintAsZero) {
  Builder b;
  b.Proc(300, 2, "kworker/0:1", false);
  b.Proc(301, 1, "bash", false);
  b.Proc(302, 1, "fluent-bit", false);
  SwitchTotals main_totals{kMain, 100, 2 * kSec, kSec / 10, 30 * kMs, 30 * kMs, 0};
  SwitchTotals kworker{300, 40, 30'000, 1'000, 2'000, 2'000, 0};  // 30 µs off the CPU
  SwitchTotals bash{301, 3, 40 * kMs, 0, 20 * kMs, 20 * kMs, 0};  // 0.04 s, but a 20 ms stall
  SwitchTotals fluent{302, 500, 90 * kSec, kSec, 150 * kMs, 150 * kMs, 0};
  b.w.switch_totals = {main_totals, kworker, bash, fluent};
  Report r = b.Run();
  std::set<int32_t> shown;
  for (const ProcessStat& p : r.top_processes) shown.insert(p.pid);
  EXPECT_EQ(shown, (std::set<int32_t>{kMain, 301, 302}));
  EXPECT_EQ(ReportToText(r).find("kworker"), std::string::npos);
}

TEST(RenderTest, EmptyWindowExplainsItself) {
  WindowData w;
  w.to = 10 * kSec;
  w.label = "test";
  Report r = Analyze(w, ExplainOptions{});
  EXPECT_TRUE(r.findings.empty());
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(ReportToText(r).find("no CUDA calls"), std::string::npos);
}

// ---- Stack attribution (trace --stack) -------------------------------------------------------

StackFrameRow Py(const std::string& function, const std::string& file, int64_t line) {
  StackFrameRow f;
  f.python = true;
  f.function = function;
  f.file = file;
  f.line = line;
  return f;
}

StackFrameRow Native(const std::string& function, const std::string& module,
                     const std::string& file = "", int64_t line = 0) {
  StackFrameRow f;
  f.function = function;
  f.module = module;
  f.file = file;
  f.line = line;
  return f;
}

TEST(CallersTest, SiteIsTheInnermostUserLineWithTheLibraryFrameAsVia) {
  StackSite s = PickStackSite(
      {Native("cudaDeviceSynchronize", "/x/libcudart.so.13"),
       Py("synchronize", "/venv/lib/python3.12/site-packages/torch/cuda/__init__.py", 1162),
       Py("step", "/home/u/train.py", 142), Py("<module>", "/home/u/train.py", 200)});
  EXPECT_EQ(s.key.rfind("/home/u/train.py:142 via synchronize ", 0), 0u) << s.key;
  EXPECT_EQ(s.display.location, "train.py:142");
  EXPECT_EQ(s.display.function, "step");
  EXPECT_EQ(s.display.via, "synchronize (torch/cuda/__init__.py:1162)");
  // The same line reached through other library code is another site.
  StackSite other = PickStackSite(
      {Py("get", "/usr/lib/python3.12/queue.py", 180), Py("step", "/home/u/train.py", 142)});
  EXPECT_EQ(other.display.location, "train.py:142");
  EXPECT_NE(other.key, s.key);
}

TEST(CallersTest, NativeSiteSkipsTheCudaLibrary) {
  StackSite s = PickStackSite({Native("cudaStreamSynchronize", "/x/libcudart.so.12", "rt.cc", 9),
                               Native("Train", "/x/loop", "/src/loop.cc", 662),
                               Native("main", "/x/loop", "/src/loop.cc", 700)});
  EXPECT_EQ(s.display.location, "loop.cc:662");
  EXPECT_EQ(s.display.function, "Train");
  EXPECT_EQ(s.display.via, "");
  StackSite bare = PickStackSite({Native("", "/usr/lib/libc.so.6")});
  EXPECT_EQ(bare.display.location, "libc.so.6");
  StackSite cpp = PickStackSite(
      {Native("void at::native::gpu_reduce_kernel<float, 4>(at::TensorIterator&, double) "
              "[clone .isra.0]",
              "/t/libtorch_cuda.so")});
  EXPECT_EQ(cpp.display.location, "at::native::gpu_reduce_kernel");
  EXPECT_EQ(PickStackSite({Native("std::vector<int>::operator[](unsigned long)", "/t/a")})
                .display.location,
            "std::vector::operator[]");
}

TEST(CallersTest, SectionsGroupSitesAcrossProcessesAndPreferRuntimeOps) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker", true);
  b.Proc(102, kMain, "pt_data_worker", true);
  b.Proc(900, 1, "ffmpeg", false);
  WindowData& w = b.w;
  w.stack_frames[1] = {Py("train", "/t/train.py", 142)};
  w.stack_frames[2] = {Py("train", "/t/train.py", 145)};
  w.stack_frames[3] = {Py("produce", "/t/train.py", 60), Py("worker", "/t/train.py", 70)};
  w.stack_frames[4] = {Py("produce", "/t/train.py", 60)};  // same line, other stack
  w.stack_frames[5] = {Py("next_batch", "/t/train.py", 90)};
  w.stack_uses = {
      {Op::kCudaStreamSync, kMain, 1, 89, 89 * 2 * kMs, 7 * kMs, 0},
      {Op::kCudaStreamSync, kMain, 2, 34, 34 * 1 * kMs, 4 * kMs, 0},
      {Op::kCuStreamSync, kMain, 1, 89, 89 * 2 * kMs, 7 * kMs, 0},  // nested driver call
      {Op::kSchedSwitch, 101, 3, 10, 10 * kMs, 3 * kMs, 8},
      {Op::kSchedSwitch, 102, 4, 5, 5 * kMs, 2 * kMs, 5},
      {Op::kSchedSwitch, 900, 4, 50, 50 * kMs, 9 * kMs, 50},  // not a feeding process
      {Op::kSchedSwitch, kMain, 5, 3, 300 * kMs, 200 * kMs, 0},  // long waits, never preempted
  };
  Report r = b.Run();
  ASSERT_EQ(r.callers.size(), 1u) << "driver ops hide behind their runtime op";
  const CallerSection& sync = r.callers[0];
  EXPECT_EQ(sync.op, "cudaStreamSync");
  EXPECT_EQ(sync.with_stacks, 123);
  ASSERT_EQ(sync.sites.size(), 2u);
  EXPECT_EQ(sync.sites[0].location, "train.py:142");
  EXPECT_EQ(sync.sites[0].count, 89);
  EXPECT_DOUBLE_EQ(sync.sites[0].avg_ms, 2.0);
  EXPECT_DOUBLE_EQ(sync.sites[0].max_ms, 7.0);
  EXPECT_EQ(sync.sites[0].processes, "python3 (train.py)");
  const CallerSection& v = r.sched_victims;
  EXPECT_EQ(v.with_stacks, 18) << "ffmpeg's switches are not the job's";
  ASSERT_EQ(v.sites.size(), 2u);
  EXPECT_EQ(v.sites[1].location, "train.py:90") << "preempted sites rank before long waits";
  EXPECT_EQ(v.sites[1].blocked, 3);
  EXPECT_EQ(v.sites[0].location, "train.py:60");
  EXPECT_EQ(v.sites[0].function, "produce");
  EXPECT_EQ(v.sites[0].preempted, 13);
  EXPECT_EQ(v.sites[0].blocked, 2);
  EXPECT_EQ(v.sites[0].processes, "pt_data_worker ×2");
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("Top cudaStreamSync callers (test, 123 calls with stacks):\n"
                      "  train.py:142 in train → cudaStreamSync | 89 calls | avg 2.0ms | "
                      "max 7.0ms | python3 (train.py)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  train.py:60 in produce → pt_data_worker ×2 | preempted 13 times, "
                      "blocked 2 times"),
            std::string::npos)
      << text;
  nlohmann::json j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_EQ(j["callers"][0]["sites"][0]["line"], 142);
  EXPECT_EQ(j["sched_victims"]["sites"][0]["preempted"], 13);
}

TEST(CallersTest, NoStacksNoSections) {
  Report r = Builder().Run();
  EXPECT_TRUE(r.callers.empty());
  EXPECT_TRUE(r.sched_victims.sites.empty());
  EXPECT_EQ(ReportToText(r).find("Top "), std::string::npos);
  nlohmann::json j = nlohmann::json::parse(ReportToJson(r));
  EXPECT_TRUE(j["callers"].empty());
  EXPECT_TRUE(j["sched_victims"].is_null());
}

// Issue 32 item 10: the source file a caller line is read from is named by the traced job. Its
// text is printed as one line without escapes; a FIFO does not hang explain; under sudo a file
// only root can read is not shown to the invoking user.
TEST(CallersTest, SourceLinesAreReadSafelyFromWhatTheJobNamed) {
  char tmpl[] = "/tmp/gw_callers_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  auto site_for = [](const std::string& file) {
    CallSite site;
    site.file = file;
    site.line = 1;
    return site;
  };
  { std::ofstream(dir + "/a.py") << "  x = 1\x1b]0;t\x07\r\n"; }
  ASSERT_EQ(mkfifo((dir + "/fifo.py").c_str(), 0666), 0);
  { std::ofstream(dir + "/secret.py") << "root only\n"; }
  chmod((dir + "/secret.py").c_str(), 0600);
  chmod(dir.c_str(), 0755);
  Report r;
  r.callers.resize(1);
  r.callers[0].sites = {site_for(dir + "/a.py"), site_for(dir + "/fifo.py")};
  FillSourceLines(&r);  // before the fix: blocked forever opening the FIFO
  EXPECT_EQ(r.callers[0].sites[0].source_line, "x = 1?]0;t?");
  EXPECT_EQ(r.callers[0].sites[1].source_line, "");
  if (geteuid() == 0) {  // as root directly, root's files are root's to see
    r.callers[0].sites = {site_for(dir + "/secret.py")};
    FillSourceLines(&r);
    EXPECT_EQ(r.callers[0].sites[0].source_line, "root only");
    setenv("SUDO_UID", "65534", 1);  // sudo for nobody: read as nobody
    setenv("SUDO_GID", "65534", 1);
    setenv("SUDO_USER", "nobody", 1);
    r.callers[0].sites = {site_for(dir + "/secret.py"), site_for(dir + "/a.py")};
    FillSourceLines(&r);
    unsetenv("SUDO_UID");
    unsetenv("SUDO_GID");
    unsetenv("SUDO_USER");
    EXPECT_EQ(r.callers[0].sites[0].source_line, "") << "a root-only file reached nobody's report";
    EXPECT_EQ(r.callers[0].sites[1].source_line, "x = 1?]0;t?");
  }
  (void)system(("rm -rf " + dir).c_str());
}


// ---- The GPU-time budget (budget.cc) and the rules that read it -------------------------------


double PathS(const Report& r, BudgetCause c) {
  return r.budget.lines.at(static_cast<size_t>(c)).path_s;
}
double LostS(const Report& r, BudgetCause c) {
  return r.budget.lines.at(static_cast<size_t>(c)).lost_s;
}

// NVML utilization `util(ts)` every 100 ms (no GPM), optionally with per-process samples.
template <typename Fn>
void AddUtil(WindowData& w, Fn util) {
  w.gpu_devices.push_back({0, "NVIDIA H200", false});
  for (int64_t t = w.from + 100 * kMs; t < w.to; t += 100 * kMs) {
    GpuSample g;
    g.ts_ns = t;
    g.util_pct = static_cast<int64_t>(util(t));
    w.gpu_samples.push_back(g);
  }
}


// The critical path's rows are a partition of the window: the budget's path seconds sum to it.
TEST(BudgetTest, CausesPartitionTheWindow) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  b.Proc(900, 1, "ffmpeg", false);
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 20 * kMs, 10 * kMs, SwitchKind::kPreempted, 10 * kMs, 900));
    b.Add(Sw(kMain, t + 40 * kMs, 10 * kMs, SwitchKind::kBlockedIo, 0));
    Event wait = Sw(kMain, t + 60 * kMs, 20 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 101;
    wait.waker_tid = 101;
    b.Add(wait);
  }
  Report r = b.Run();
  ASSERT_TRUE(r.budget.present);
  double sum = 0;
  for (const BudgetLine& l : r.budget.lines) sum += l.path_s;
  EXPECT_NEAR(sum, r.budget.window_s, 0.01);
  EXPECT_NEAR(PathS(r, BudgetCause::kRunqOther), 10, 0.1);
  EXPECT_NEAR(PathS(r, BudgetCause::kProcessIo), 10, 0.1);
  EXPECT_NEAR(PathS(r, BudgetCause::kBatchCompute), 20, 0.2);
  EXPECT_EQ(r.budget.source, "stream");
  // Stream evidence: waits are idle GPU time; the 50 µs syncs may have found the GPU working,
  // so the main thread's computing is not counted as idle.
  EXPECT_NEAR(LostS(r, BudgetCause::kBatchCompute), 20, 0.2);
  EXPECT_NEAR(LostS(r, BudgetCause::kHostCompute), 0, 0.01);
  auto j = nlohmann::json::parse(ReportToJson(r));
  ASSERT_TRUE(j.contains("budget"));
  EXPECT_EQ(j["budget"]["causes"].size(), kBudgetCauseCount);
  EXPECT_EQ(j["budget"]["causes"][0]["cause"], "host_compute");
  EXPECT_NE(ReportToText(r).find("GPU time over 100.0 s (the job's syncs; no GPU samples)"),
            std::string::npos)
      << ReportToText(r);
}

// Each finding's lost_s is its cause's line of the budget: one definition everywhere.
TEST(BudgetTest, FindingsTakeTheirLostSecondsFromTheBudget) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 60 * kMs, 30 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 101;
    wait.waker_tid = 101;
    b.Add(wait);
  }
  // The GPU idles 20% of every interval: the 30 ms batch waits explain 20 ms of it.
  AddUtil(b.w, [](int64_t) { return 80.0; });
  Report r = b.Run();
  EXPECT_EQ(r.budget.source, "nvml");
  const Finding* f = Find(r, "dataloader-starvation");
  ASSERT_NE(f, nullptr);
  EXPECT_NEAR(f->lost_s, LostS(r, BudgetCause::kBatchCompute), 1e-9);
  EXPECT_NEAR(f->lost_s, 20, 0.5);
  EXPECT_NEAR(r.budget.gpu_idle_s, 20, 0.5);
  EXPECT_NEAR(r.budget.gpu_busy_job_s, 80, 0.5);
}

// `trace -- CMD`: the job's process starts with the window and computes 20 s on the CPU before
// its first CUDA call (imports, model and data set-up), runs a healthy loop, and exits 5 s after
// its last call. No steps/s slowdown includes the start-up or the exit: the budget covers the
// loop (75 s), says what it left out, and nothing rises above LOW; so too where the job was held
// at `trace`'s start gate until the probes were attached and the session's first row came 3 s
// after its start. The same 20 s in a job traced after it started (attached) are the loop's:
// host-compute.
TEST(BudgetTest, StartUpBeforeTheFirstCudaCallIsOutsideTheLoop) {
  enum Start { kWithTheWindow, kHeldAtTheGate, kAttached };
  for (Start start : {kWithTheWindow, kHeldAtTheGate, kAttached}) {
    SCOPED_TRACE(start);
    bool started_here = start != kAttached;
    Builder b;
    std::erase_if(b.w.events,
                  [](const Event& e) { return e.ts_ns < 20 * kSec || e.ts_ns >= 95 * kSec; });
    b.w.processes[kMain].first_ts = start == kAttached ? -1000 * kSec : 0;
    if (start == kHeldAtTheGate) {
      // Forked at the session clock's start, held until the probes were attached: the session's
      // first row, and so the whole-session window, starts 3 s later.
      b.w.processes[kMain].first_ts = -60 * kMs;
      b.w.from = b.w.session_first_ts = 3 * kSec;
    }
    b.w.processes[kMain].exit_ts = 100 * kSec - 1;
    AddUtil(b.w, [](int64_t t) { return t < 20 * kSec || t > 95 * kSec ? 0.0 : 97.0; });
    // The on-CPU profile: the start-up's imports, then the loop's step code.
    b.w.profile_hz = 100;
    b.w.stack_frames[1] = {StackFrameRow{}};
    b.w.stack_frames[1][0].function = "import_everything";
    b.w.stack_frames[2] = {StackFrameRow{}};
    b.w.stack_frames[2][0].function = "train_step";
    for (int64_t t = b.w.from; t < 95 * kSec; t += 10 * kMs) {
      b.w.cpu_samples.push_back({t + 2 * kMs, kMain, kMain, t < 20 * kSec ? 1 : 2, false});
    }
    Report r = b.Run();
    const CpuProfileSection* main_profile = nullptr;
    for (const CpuProfileSection& p : r.cpu_profiles) {
      if (p.role == "main") main_profile = &p;
    }
    ASSERT_NE(main_profile, nullptr);
    bool imports = false;
    for (const CallSite& c : main_profile->sites) {
      imports |= (c.location + c.function).find("import_everything") != std::string::npos;
    }
    if (started_here) {
      // The profile covers the loop, as the budget does: the imports are not the job's lines.
      EXPECT_FALSE(imports);
      EXPECT_NEAR(main_profile->window_s, 75, 0.1);
      EXPECT_NEAR(main_profile->cpu_s, 75, 0.1);
      EXPECT_NEAR(r.budget.startup_s, start == kHeldAtTheGate ? 17 : 20, 0.1);
      EXPECT_NEAR(r.budget.exit_s, 5, 0.1);
      EXPECT_NEAR(r.budget.window_s, 75, 0.1);
      EXPECT_TRUE(r.budget.gpu_bound);
      for (const Finding& f : r.findings) EXPECT_EQ(f.severity, Severity::kLow) << f.rule;
      std::string text = ReportToText(r);
      EXPECT_NE(text.find(start == kHeldAtTheGate
                              ? "outside the loop, not in the budget: 17.0 s of start-up"
                              : "outside the loop, not in the budget: 20.0 s of start-up before "
                                "the job's first CUDA call, 5.0 s of exit after its last"),
                std::string::npos)
          << text;
      auto j = nlohmann::json::parse(ReportToJson(r));
      EXPECT_NEAR(j["budget"]["startup_s"].get<double>(), r.budget.startup_s, 0.01);
    } else {
      EXPECT_TRUE(imports);  // attached: no start-up is known, the window is the loop's
      EXPECT_EQ(r.budget.startup_s, 0);
      EXPECT_NEAR(r.budget.exit_s, 5, 0.1);  // it exited in the window all the same
      ASSERT_FALSE(r.findings.empty());
      EXPECT_EQ(r.findings[0].rule, "host-compute");
      EXPECT_NEAR(r.findings[0].lost_s, 20 + 0.03 * 75, 0.5);  // and the loop's 3% idle
    }
  }
}

// Workers whose computing is mostly the kernel's: with 200,000 page faults a second in their
// process they fault in fresh memory (the fix: reuse the buffers, first), with 500 a second they
// make system calls (the fix: strace them); workers computing in user mode get neither line. The
// main thread's own computing is read the same way (host-compute).
TEST(BudgetTest, ComputingInTheKernelNamesPageFaultsOrSystemCalls) {
  for (int64_t faults : {200'000, 500, -1}) {  // -1: the samples in user mode
    SCOPED_TRACE(faults);
    Builder b;
    b.Proc(101, kMain, "pt_data_worker:0", true);
    b.w.profile_hz = 50;
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      Event wait = Sw(kMain, t + 40 * kMs, 60 * kMs, SwitchKind::kBlocked, 0);
      wait.waker_pid = 101;
      wait.waker_tid = 101;
      b.Add(wait);
    }
    for (int64_t t = 0; t < b.w.to; t += 20 * kMs) {
      b.w.cpu_samples.push_back({t, 101, 101, 0, faults >= 0 && t % (100 * kMs) != 0});
    }
    for (int64_t sec = 0; sec < 100; ++sec) {
      b.w.op_seconds.push_back({sec, 101, Op::kPageFault, std::max<int64_t>(faults, 0), 0, 0});
    }
    AddUtil(b.w, [](int64_t) { return 40.0; });
    Report r = b.Run();
    ASSERT_FALSE(r.findings.empty());
    const Finding& f = r.findings[0];
    EXPECT_EQ(f.rule, "dataloader-starvation");
    std::string root;
    for (const std::string& x : f.root) root += x + "\n";
    if (faults == 200'000) {
      EXPECT_NE(root.find("The workers' CPU time was 80.0% in the kernel, with 200,000 page "
                          "faults a second"),
                std::string::npos)
          << root;
      EXPECT_EQ(f.fix.at(0).rfind("reuse each batch's buffers", 0), 0u) << f.fix.at(0);
      EXPECT_EQ(f.fix.at(1).rfind("send smaller batches from the workers", 0), 0u) << f.fix.at(1);
    } else if (faults == 500) {
      EXPECT_NE(root.find("in the kernel (system calls: few page faults, 500 a second)"),
                std::string::npos)
          << root;
      EXPECT_EQ(f.fix.at(0).rfind("find the system calls: strace -c -f -p 101", 0), 0u)
          << f.fix.at(0);
    } else {
      EXPECT_EQ(root.find("in the kernel"), std::string::npos) << root;
    }
    if (faults == 200'000) {
      EXPECT_NE(ReportToText(r).find("Where the CPU time of the DataLoader workers (tid 101)"),
                std::string::npos);
    }
  }
}

// A healthy loop: the GPU busy 97% of the time; the main thread's Python time overlaps its
// kernels. Nothing above LOW, and the report says the job is GPU-bound.
TEST(BudgetTest, BusyGpuIsGpuBoundAndQuiet) {
  Builder b;
  AddUtil(b.w, [](int64_t) { return 97.0; });
  Report r = b.Run();
  for (const Finding& f : r.findings) EXPECT_EQ(f.severity, Severity::kLow) << f.rule;
  EXPECT_TRUE(r.budget.gpu_bound);
  EXPECT_NE(ReportToText(r).find("GPU-bound: the job kept its GPU busy"), std::string::npos);
}

// The main thread on the CPU while the GPU sits idle 60% of the window: host-compute, with the
// fix for the main thread's own work (no launches to speak of, no helper threads).
TEST(BudgetTest, IdleGpuWhileTheMainThreadComputesIsHostCompute) {
  Builder b;
  AddUtil(b.w, [](int64_t) { return 40.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "host-compute");
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_NEAR(f.lost_s, 60, 1);
  std::string fixes;
  for (const std::string& x : f.fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("num_workers>0"), std::string::npos) << fixes;
  EXPECT_EQ(fixes.find("taskset"), std::string::npos) << fixes;
}

// CUDA Graphs recorded again every 2 s in steady state: each capture is 300 ms of the main
// thread's computing with the GPU idle, each instantiation 50 ms. graph-recapture takes their
// share of host_compute's lost seconds (and host-compute keeps the rest); captures during the
// first tenth of the session (warm-up) are cold-start's and do not count.
TEST(GraphRecaptureTest, RepeatedCapturesTakeTheirShareOfTheComputing) {
  Builder b;
  AddUtil(b.w, [](int64_t) { return 40.0; });
  int64_t captures = 0;
  for (int64_t t = 1 * kSec; t < b.w.to - kSec; t += 2 * kSec) {
    b.Add(Call(kMain, Op::kCudaStreamBeginCapture, t, 5'000));
    b.Add(Call(kMain, Op::kCudaStreamEndCapture, t + 300 * kMs - 10'000, 10'000));
    b.Add(Call(kMain, Op::kCudaGraphInstantiate, t + 300 * kMs, 50 * kMs));
    if (t >= 10 * kSec) ++captures;
  }
  Report r = b.Run();
  const Finding* g = Find(r, "graph-recapture");
  ASSERT_NE(g, nullptr);
  const Finding* h = Find(r, "host-compute");
  ASSERT_NE(h, nullptr);
  // 44 steady captures (t = 11 … 97 s) of 350 ms: 15.4 s of the main thread's ~100 s running;
  // host_compute lost 60 s, so ~9.3 s of it is the captures'.
  EXPECT_EQ(captures, 44);
  double share = captures * 0.35 / (b.w.to / 1e9);
  EXPECT_NEAR(g->lost_s, LostS(r, BudgetCause::kHostCompute) * share, 0.3);
  EXPECT_NEAR(g->lost_s + h->lost_s, LostS(r, BudgetCause::kHostCompute), 0.05);
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("44 stream captures and 44 graph instantiations after warm-up"),
            std::string::npos)
      << text;
  std::string fixes;
  for (const std::string& x : g->fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("bucket"), std::string::npos) << fixes;
}

// A job that records its graphs once while it warms up and then replays them has no finding.
TEST(GraphRecaptureTest, CapturesDuringWarmUpAreNotRecapture) {
  Builder b;
  AddUtil(b.w, [](int64_t) { return 40.0; });
  for (int64_t t = 1 * kSec; t < 9 * kSec; t += 2 * kSec) {
    b.Add(Call(kMain, Op::kCudaStreamBeginCapture, t, 5'000));
    b.Add(Call(kMain, Op::kCudaStreamEndCapture, t + 300 * kMs, 10'000));
    b.Add(Call(kMain, Op::kCudaGraphInstantiate, t + 400 * kMs, 50 * kMs));
  }
  Report r = b.Run();
  EXPECT_EQ(Find(r, "graph-recapture"), nullptr);
}

// Waits explain idle time before the computing does: contention holding the main thread 60 ms of
// every 100 while the GPU idles 68% is contention's, not the computing's.
TEST(BudgetTest, WaitsExplainIdleTimeBeforeComputing) {
  Builder b;
  b.Proc(900, 1, "ffmpeg", false);
  for (int64_t t = 0; t < 100 * kSec; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 10 * kMs, 60 * kMs, SwitchKind::kPreempted, 60 * kMs, 900));
  }
  AddUtil(b.w, [](int64_t) { return 32.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "cpu-contention");
  EXPECT_NEAR(r.findings[0].lost_s, 60, 1);
  EXPECT_EQ(Find(r, "host-compute"), nullptr) << "8% of the window is below its ladder";
}

// A thread of the trainer without CUDA calls runs while the main thread sleeps until it wakes
// it (a pure-Python thread holding the GIL): lock-contention names that thread.
TEST(BudgetTest, SiblingThreadHoldingTheMainThreadIsLockContention) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);  // workers exist, but did not deliver these
  constexpr int32_t kSpinner = 177;
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 10 * kMs, 80 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = kMain;
    wait.waker_tid = kSpinner;
    b.Add(wait);
    // The spinner is on the CPU except for 5 ms of every 100 ms.
    b.Add(Sw(kMain, t + 92 * kMs, 5 * kMs, SwitchKind::kBlocked, 0, 0, kSpinner));
  }
  AddUtil(b.w, [](int64_t) { return 10.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "lock-contention");
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_NEAR(f.lost_s, 80, 1);
  EXPECT_EQ(r.budget.hold_tid, kSpinner);
  EXPECT_NE(f.root[0].find("thread 177"), std::string::npos) << f.root[0];
  EXPECT_NE(f.cause.find("GIL"), std::string::npos) << f.cause;
  EXPECT_EQ(Find(r, "dataloader-starvation"), nullptr);
}

// CUDA's default sync spins: a profile sample taken inside a sync of its thread is the CPU
// waiting for the GPU. Such samples are counted apart and left out of the lines, so the hottest
// line is the work (before: torch.cuda.synchronize() topped the main thread's profile).
TEST(CpuProfileTest, SamplesInsideCudaSyncsAreAWaitNotALine) {
  Builder b(10);
  b.w.profile_hz = 100;
  b.w.events.clear();
  for (int64_t t = 0; t < b.w.to; t += 10 * kMs) {
    b.Add(Call(kMain, Op::kCudaStreamSync, t + 5 * kMs, 4 * kMs));  // 4 ms of every 10 ms
    b.w.cpu_samples.push_back({t + 6 * kMs, kMain, kMain, 7, false});  // inside the sync
    b.w.cpu_samples.push_back({t + 2 * kMs, kMain, kMain, 8, false});  // outside: the work
  }
  b.w.stack_frames[7] = {StackFrameRow{}};
  b.w.stack_frames[7][0].function = "cudaStreamSynchronize";
  b.w.stack_frames[8] = {StackFrameRow{}};
  b.w.stack_frames[8][0].function = "burn_cpu";
  std::optional<CpuProfileSection> p = ProfileThreads(b.w, {kMain}, b.w.from, b.w.to);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->samples, 2000);
  EXPECT_EQ(p->sync_samples, 1000);
  ASSERT_FALSE(p->sites.empty());
  for (const CallSite& s : p->sites) {
    EXPECT_EQ(s.location.find("cudaStreamSynchronize"), std::string::npos) << s.location;
    EXPECT_EQ(s.function.find("cudaStreamSynchronize"), std::string::npos) << s.function;
  }
  EXPECT_EQ(p->sites[0].count, 1000);
}

// A checkpoint written by the main thread every 2 s: 300 ms blocked on I/O (fsync) and 500 ms on
// the CPU under torch.save (200 ms of it in the kernel under write(), 300 ms pickling), with the
// GPU idle throughout; the loop's steps keep it 90% busy. main-thread-io claims the blocked
// seconds and the GPU idle time of the writing itself (host_write), not a share of the whole
// window's computing; the loop's own CPU stays host-compute's. A function that writes a line now
// and then is no writer.
TEST(CpuProfileTest, TheMainThreadsCheckpointCpuIsTheCheckpoints) {
  Builder b;
  b.w.profile_hz = 100;
  AddUtil(b.w, [](int64_t t) {
    int64_t phase = t % (2 * kSec);
    return phase > 0 && phase <= 800 * kMs ? 0.0 : 90.0;
  });
  b.w.stack_frames[1] = {Native("__GI___libc_write", "/lib/libc.so.6"),
                         Py("_save", "/t/torch/serialization.py", 900),
                         Py("save", "/t/torch/serialization.py", 650), Py("main", "/t/train.py", 40)};
  b.w.stack_frames[2] = {Native("save_global", "/usr/bin/python3"),
                         Py("_save", "/t/torch/serialization.py", 880),
                         Py("save", "/t/torch/serialization.py", 650), Py("main", "/t/train.py", 40)};
  b.w.stack_frames[3] = {Py("forward", "/t/model.py", 12), Py("main", "/t/train.py", 30)};
  // The loop logs a line with write() now and then: not a writer.
  b.w.stack_frames[4] = {Native("write", "/lib/libc.so.6"), Py("log", "/t/train.py", 70),
                         Py("main", "/t/train.py", 35)};
  b.w.stack_frames[5] = {Native("format_line", "/usr/bin/python3"), Py("log", "/t/train.py", 66),
                         Py("main", "/t/train.py", 35)};
  for (int64_t t = 0; t < b.w.to; t += 10 * kMs) {
    int64_t phase = t % (2 * kSec);
    int64_t stack = 3;
    bool kernel = false;
    if (phase < 200 * kMs) {
      stack = 1, kernel = true;
    } else if (phase < 500 * kMs) {
      stack = 2;
    } else if (phase >= 800 * kMs && phase < 1700 * kMs && phase % (50 * kMs) == 0) {
      stack = phase == 1000 * kMs ? 4 : 5;  // 1 of its 18 samples in write()
      kernel = stack == 4;
    }
    if (phase >= 500 * kMs && phase < 800 * kMs) continue;  // blocked in fsync: no sample
    b.w.cpu_samples.push_back({t, kMain, kMain, stack, kernel});
  }
  for (int64_t t = 0; t < b.w.to; t += 2 * kSec) {
    b.Add(Sw(kMain, t + 500 * kMs, 300 * kMs, SwitchKind::kBlockedIo, 0));
  }
  WriterProfile p = WriterSamples(b.w, kMain, b.w.from, b.w.to);
  EXPECT_EQ(p.write_samples, 50 * 20 + 50);   // torch.save's and the log's write() samples
  EXPECT_EQ(p.writer_samples, 50 * 50 + 50);  // under _save, and the log's own write()s
  EXPECT_EQ(p.function, "_save");
  Report r = b.Run();
  const Finding* io = Find(r, "main-thread-io");
  ASSERT_NE(io, nullptr);
  const Finding* host = Find(r, "host-compute");
  double blocked = LostS(r, BudgetCause::kProcessIo);
  EXPECT_NEAR(blocked, 15, 0.5);  // 50 fsyncs of 300 ms
  // The writing: 50 × 500 ms of idle GPU (and the log's 50 write() samples, 10 ms each, in
  // stretches where the GPU idled 10%).
  EXPECT_NEAR(LostS(r, BudgetCause::kHostWrite), 25, 1.5);
  EXPECT_NEAR(io->lost_s, blocked + LostS(r, BudgetCause::kHostWrite), 0.01);
  // The loop's computing overlapped the GPU: only the 10% idle of its stretches.
  EXPECT_NEAR(LostS(r, BudgetCause::kHostCompute), 6, 1.5);
  EXPECT_NEAR(io->lost_s + (host ? host->lost_s : 0),
              blocked + LostS(r, BudgetCause::kHostWrite) +
                  (host ? LostS(r, BudgetCause::kHostCompute) : 0),
              0.05);
  std::string text = ReportToText(r);
  EXPECT_NE(text.find("serialization.py:900 in _save"), std::string::npos) << text;
}

// A training loop that os.write()s a pipe (or logs a line) every step from its own body: its
// write() calls are 20% of its samples, but the loop function is under all of the thread's
// samples. Its write calls are writing; the rest of the loop's computing is not.
TEST(CpuProfileTest, TheLoopFunctionIsNoWriter) {
  Builder b;
  b.w.profile_hz = 100;
  b.w.stack_frames[1] = {Native("__write", "/lib/libc.so.6"), Py("train", "/t/train.py", 661),
                         Py("<module>", "/t/train.py", 756)};
  b.w.stack_frames[2] = {Py("train", "/t/train.py", 639), Py("<module>", "/t/train.py", 756)};
  b.w.stack_frames[3] = {Native("tuplehash", "/usr/bin/python3"),
                         Py("train", "/t/train.py", 619), Py("<module>", "/t/train.py", 756)};
  int64_t n = 0;
  for (int64_t t = 0; t < b.w.to; t += 10 * kMs, ++n) {
    int64_t stack = n % 5 == 0 ? 1 : n % 2 ? 2 : 3;
    b.w.cpu_samples.push_back({t + 2 * kMs, kMain, kMain, stack, stack == 1});
  }
  WriterProfile p = WriterSamples(b.w, kMain, b.w.from, b.w.to);
  EXPECT_EQ(p.write_samples, n / 5);
  EXPECT_EQ(p.writer_samples, p.write_samples);  // not every sample under train()
  EXPECT_EQ(p.function, "");
  Report r = b.Run();
  EXPECT_NEAR(PathS(r, BudgetCause::kHostWrite), 0.2 * 100, 0.5);
}

// The other way round: a GPU-bound loop with almost no host work of its own, spinning in its syncs
// between checkpoints, whose torch.save is 97% of its computing. The save is the writer (its
// pickling is writing's, not host-compute's): the loop function holds the syncs, the save not.
TEST(CpuProfileTest, ACheckpointThatIsMostOfTheComputingIsStillTheWriter) {
  Builder b;
  b.w.profile_hz = 100;
  b.w.stack_frames[1] = {Native("__write", "/lib/libc.so.6"),
                         Py("_save", "/t/torch/serialization.py", 900),
                         Py("train", "/t/train.py", 50), Py("<module>", "/t/train.py", 90)};
  b.w.stack_frames[2] = {Native("save_global", "/usr/bin/python3"),
                         Py("_save", "/t/torch/serialization.py", 880),
                         Py("train", "/t/train.py", 50), Py("<module>", "/t/train.py", 90)};
  b.w.stack_frames[3] = {Py("forward", "/t/model.py", 12), Py("train", "/t/train.py", 30),
                         Py("<module>", "/t/train.py", 90)};
  b.w.stack_frames[4] = {Native("cudaStreamSynchronize", "/t/libcudart.so.13"),
                         Py("train", "/t/train.py", 40), Py("<module>", "/t/train.py", 90)};
  b.w.events.clear();  // the loop's syncs are the ones below
  for (int64_t cycle = 0; cycle < b.w.to; cycle += 2 * kSec) {
    b.Add(Call(kMain, Op::kCudaStreamSync, cycle + 820 * kMs, 1170 * kMs));
    for (int64_t t = cycle; t < cycle + 2 * kSec; t += 10 * kMs) {
      int64_t phase = t - cycle;
      int64_t stack = phase < 240 * kMs ? 1 : phase < 800 * kMs ? 2 : phase < 820 * kMs ? 3 : 4;
      b.w.cpu_samples.push_back({t + 1 * kMs, kMain, kMain, stack, stack == 1});
    }
  }
  WriterProfile p = WriterSamples(b.w, kMain, b.w.from, b.w.to);
  EXPECT_EQ(p.write_samples, 50 * 24);
  EXPECT_EQ(p.writer_samples, 50 * 80);  // the whole save, pickling included
  EXPECT_EQ(p.function, "_save");
}

// The GIL's timed waits (a timer ends most of them) go to the sibling that ran through them. A
// thread asleep across the whole window leaves no row and reads as running on its timeline; the
// on-CPU profile, which never sampled it, says it was not: the holder is the sampled thread.
TEST(BudgetTest, TheProfileTellsTheGilHolderFromAThreadAsleepAcrossTheWindow) {
  Builder b;
  constexpr int32_t kSpinner = 177, kAsleep = 178;
  b.w.profile_hz = 49;
  // The asleep thread's one row, before the window's waits: then nothing (asleep until after).
  b.Add(Sw(kMain, 0, kMs, SwitchKind::kBlocked, 0, 0, kAsleep));
  int i = 0;
  for (int64_t t = 10 * kMs; t + 10 * kMs < b.w.to; t += 10 * kMs, ++i) {
    Event wait = Sw(kMain, t, 5 * kMs, SwitchKind::kBlocked, 0);
    if (i % 10 == 0) {  // one wait in ten ends at the holder's GIL release
      wait.kind = static_cast<int64_t>(SwitchKind::kBlockedGil);
      wait.waker_pid = kMain;
      wait.waker_tid = kSpinner;
    } else {
      wait.waker_pid = 0;  // a timer
      wait.waker_tid = 0;
    }
    b.Add(wait);
    // The holder leaves the CPU for a moment in every wait (its own GIL drop request).
    b.Add(Sw(kMain, t + kMs, kMs / 2, SwitchKind::kBlocked, 0, 0, kSpinner));
  }
  for (int64_t t = 0; t < b.w.to; t += kSec / 49) {
    b.w.cpu_samples.push_back({t, kMain, kSpinner, 0, false});
  }
  AddUtil(b.w, [](int64_t) { return 5.0; });
  Report r = b.Run();
  const Finding* f = Find(r, "gil-contention");
  ASSERT_NE(f, nullptr) << ReportToText(r);
  EXPECT_NE(f->root[0].find("thread 177"), std::string::npos) << f->root[0];
  EXPECT_EQ(f->root[0].find("thread 178"), std::string::npos) << f->root[0];
}

// Run-queue time behind the job's own workers is oversubscription, with a thread-count fix, not
// contention with a pinning fix.
TEST(BudgetTest, RunqBehindTheJobsOwnThreadsIsOversubscription) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  b.Proc(102, kMain, "pt_data_worker:1", true);
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 10 * kMs, 40 * kMs, SwitchKind::kPreempted, 40 * kMs, 101));
    b.Add(Sw(101, t + 60 * kMs, 5 * kMs, SwitchKind::kPreempted, 5 * kMs, 102));
  }
  AddUtil(b.w, [](int64_t) { return 55.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "cpu-oversubscription");
  EXPECT_EQ(Find(r, "cpu-contention"), nullptr);
  std::string fixes;
  for (const std::string& x : r.findings[0].fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("torch.set_num_threads(1)"), std::string::npos) << fixes;
  EXPECT_EQ(fixes.find("taskset"), std::string::npos) << fixes;
}

// The training process's own writes (a checkpoint): main-thread-io with a checkpoint fix, not a
// dataset-caching fix.
TEST(BudgetTest, MainThreadWritesAreTheProcessesOwnIo) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  for (int64_t t = 0; t < b.w.to; t += 2 * kSec) {
    b.Add(Sw(kMain, t + 100 * kMs, 600 * kMs, SwitchKind::kBlockedIo, 0));
  }
  AddUtil(b.w, [](int64_t t) { return (t % (2 * kSec)) < 800 * kMs ? 20.0 : 95.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  EXPECT_EQ(r.findings[0].rule, "main-thread-io");
  EXPECT_EQ(Find(r, "io-bottleneck"), nullptr);
  std::string fixes;
  for (const std::string& x : r.findings[0].fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("checkpoint asynchronously"), std::string::npos) << fixes;
  EXPECT_EQ(fixes.find("tmpfs"), std::string::npos) << fixes;
}

// A saver thread of the trainer holds a lock across its serializing (10 ms on the CPU) and its
// writes and fsyncs (30 ms blocked on I/O), and the main thread takes the same lock each step: it
// sleeps until that thread wakes it. main-thread-io claims the whole wait (the thread's I/O and
// its computing in the same waits), names the thread and tells the loop to stop waiting for it,
// not to checkpoint asynchronously (the writes already are on another thread); lock-contention
// does not count the same thread again.
TEST(BudgetTest, IoOfAThreadTheLoopWaitsForNamesThatThread) {
  Builder b;
  constexpr int32_t kLogger = 188;
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 10 * kMs, 40 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = kMain;
    wait.waker_tid = kLogger;
    b.Add(wait);
    b.Add(Sw(kMain, t + 20 * kMs, 30 * kMs, SwitchKind::kBlockedIo, 0, 0, kLogger));
  }
  // One save's 1 GB, seen at both layers: the write call and the block requests carrying it.
  Event write = Call(kMain, Op::kWrite, 20 * kMs, 25 * kMs);
  write.tid = kLogger;
  write.kind = 0;
  write.bytes = 1'000'000'000;
  b.Add(write);
  for (int i = 0; i < 4; ++i) {
    Event block = Call(kMain, Op::kBlockIo, 30 * kMs + i * kMs, kMs);
    block.kind = 1;
    block.bytes = 250'000'000;
    b.Add(block);
  }
  AddUtil(b.w, [](int64_t) { return 55.0; });
  Report r = b.Run();
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "main-thread-io");
  EXPECT_NEAR(f.lost_s, 40, 2);
  std::string root, fixes;
  for (const std::string& x : f.root) root += x + "\n";
  for (const std::string& x : f.fix) fixes += x + "\n";
  EXPECT_NE(f.cause.find("A thread the training loop waits for"), std::string::npos) << f.cause;
  EXPECT_NE(root.find("in thread 188 of"), std::string::npos) << root;
  EXPECT_NE(root.find("1.0 GB written"), std::string::npos) << root;  // not 2.0 GB
  EXPECT_NE(fixes.find("stop the training loop waiting for thread 188"), std::string::npos)
      << fixes;
  EXPECT_EQ(fixes.find("checkpoint asynchronously"), std::string::npos) << fixes;
  EXPECT_NEAR(LostS(r, BudgetCause::kThreadHold), 10, 1);
  EXPECT_EQ(Find(r, "lock-contention"), nullptr);
}

// Another process (traced or not) keeps the GPU busy while the job waits in syncs: gpu-sharing
// from the per-process samples, and the verdict does not tell the job to write faster kernels.
TEST(BudgetTest, NeighbourOnTheGpuIsGpuSharingFromProcessSamples) {
  Builder b;
  for (Event& e : b.w.events) {
    if (e.op == Op::kCudaStreamSync) e.duration_ns = 8 * kMs;  // 8 ms of every 10 in syncs
  }
  AddUtil(b.w, [](int64_t) { return 95.0; });
  for (const GpuSample& s : std::vector<GpuSample>(b.w.gpu_samples)) {
    b.w.gpu_process_samples.push_back({s.ts_ns, 0, kMain, 30, 0});
    b.w.gpu_process_samples.push_back({s.ts_ns, 0, 4242, 60, 0});
  }
  Report r = b.Run();
  EXPECT_EQ(r.budget.source, "nvml-process");
  EXPECT_NEAR(r.budget.gpu_busy_other_s, 100 * 0.95 * 60 / 90, 1);
  const Finding* f = Find(r, "gpu-sharing");
  ASSERT_NE(f, nullptr);
  EXPECT_GE(f->severity, Severity::kMedium);
  // The GPU's time for the other process while the job waited on it (at most its waiting).
  EXPECT_NEAR(f->lost_s, 100 * 0.95 * 60 / 90, 1.5);
  EXPECT_EQ(r.gpu_verdict.find("faster kernels"), std::string::npos) << r.gpu_verdict;
  EXPECT_NE(r.gpu_verdict.find("the GPU is shared"), std::string::npos) << r.gpu_verdict;
}

// The main thread sleeps 50 ms of every 100 until a timer ends the sleep, no thread of the job
// running meanwhile (time.sleep in the loop, a polling wait): host_sleep, the host-sleep finding
// with the line it slept on (trace --stack), and nothing left unattributed.
TEST(BudgetTest, SleepsATimerEndedAreTheMainThreadsSleep) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);  // workers exist, but did not end these
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 10 * kMs, 50 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 0;  // a timer
    wait.waker_tid = 0;
    wait.stack_id = t < 80 * kSec ? 7 : 8;
    b.Add(wait);
  }
  StackFrameRow sleep = Native("clock_nanosleep", "/usr/lib/x86_64-linux-gnu/libc.so.6");
  b.w.stack_frames[7] = {sleep, Py("train_step", "/srv/job/train.py", 88)};
  b.w.stack_frames[8] = {sleep, Py("train_step", "/srv/job/train.py", 120)};
  AddUtil(b.w, [](int64_t) { return 50.0; });
  Report r = b.Run();
  EXPECT_NEAR(PathS(r, BudgetCause::kHostSleep), 50, 0.5);
  EXPECT_NEAR(LostS(r, BudgetCause::kHostSleep), 50, 0.5);
  EXPECT_NEAR(PathS(r, BudgetCause::kNotAttributed), 0, 0.5);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "host-sleep");
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_NEAR(f.lost_s, 50, 0.5);
  std::string root;
  for (const std::string& x : f.root) root += x + "\n";
  EXPECT_NE(root.find("asleep 1,000 times"), std::string::npos) << root;
  // Line 88 holds 4 of every 5 sleeps (the window's first 80 s), line 120 the rest.
  EXPECT_NE(root.find("Where it slept: train.py:88 in train_step (39.8 s of the 49.8 s"),
            std::string::npos)
      << root;
  std::string fixes;
  for (const std::string& x : f.fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("time.sleep()"), std::string::npos) << fixes;
  EXPECT_EQ(fixes.find("num_workers"), std::string::npos) << fixes;
}

// A throttle that sleeps after the step is queued (time.sleep, then torch.cuda.synchronize()):
// the sync after the sleep still waits 30 ms, and the job gave the GPU no work since before the
// sleep (since_work_ns), so the GPU had work all through it. The window's idle time (10%) is
// not the sleep's but the computing's, with NVML samples and with stream evidence alike, and
// there is no host-sleep finding.
TEST(BudgetTest, ASleepTheGpuWorkedThroughCostsNoGpuTime) {
  for (bool nvml : {true, false}) {
    SCOPED_TRACE(nvml ? "NVML" : "stream evidence");
    Builder b;
    b.w.events.clear();
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      Event sleep = Sw(kMain, t + 40 * kMs, 15 * kMs, SwitchKind::kBlocked, 0);
      sleep.waker_pid = 0;  // the throttle's timer
      sleep.waker_tid = 0;
      b.Add(sleep);
      Event sync = Call(kMain, Op::kCudaDeviceSync, t + 55 * kMs + 50'000, 30 * kMs);
      sync.since_work_ns = 15 * kMs + 50'000;  // the step's last launch, before the sleep
      b.Add(sync);
    }
    if (nvml) AddUtil(b.w, [](int64_t) { return 90.0; });
    Report r = b.Run();
    EXPECT_NEAR(PathS(r, BudgetCause::kHostSleep), 15, 0.5);
    EXPECT_LT(LostS(r, BudgetCause::kHostSleep), 0.1);
    EXPECT_EQ(Find(r, "host-sleep"), nullptr);
    // With NVML: the main thread computes 55 ms of every 100 and the GPU idles 10: the
    // computing's. The stream evidence cannot tell (every sync found the GPU working).
    if (nvml) {
      EXPECT_NEAR(LostS(r, BudgetCause::kHostCompute), 10, 0.5);
    }
  }
}

// Both sleeps traced under the launch duty cycle: the probes attached in one second of every ten
// (launch_estimates.unprobed holds the other nine), the batch copy (always probed) 5 ms into
// each step. Where the probes were detached the step's launches left no trace, so every sync
// there says the last work was the copy, before the sleep: no proof, since the sync may have
// waited for a launch made after the sleep. The seconds the probes watched decide, and their
// share stands in for the rest: the throttle after the launches is worked through there (no
// idle time for the sleep anywhere), the sleep before the launches is not (all of it idle).
TEST(BudgetTest, WhereTheLaunchProbesWereDetachedTheWatchedSecondsDecide) {
  for (bool after_launches : {true, false}) {
    SCOPED_TRACE(after_launches ? "sleep after the launches" : "sleep before the launches");
    Builder b;
    b.w.events.clear();
    for (int64_t sec = 0; sec * kSec < b.w.to; ++sec) {
      if (sec % 10 != 0) b.w.launch_estimates.unprobed.push_back({sec * kSec, (sec + 1) * kSec});
    }
    b.w.launch_estimates.unprobed = MergeSpans(b.w.launch_estimates.unprobed);
    for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
      bool probed = (t / kSec) % 10 == 0;
      Event sleep = Sw(kMain, t + 40 * kMs, 15 * kMs, SwitchKind::kBlocked, 0);
      sleep.waker_pid = 0;
      sleep.waker_tid = 0;
      b.Add(sleep);
      Event sync = Call(kMain, Op::kCudaDeviceSync, t + 55 * kMs + 50'000, 30 * kMs);
      // The last work seen: the step's last launch (where probed), else the batch copy.
      int64_t last_launch = after_launches ? t + 25 * kMs : t + 55 * kMs + 40'000;
      sync.since_work_ns = sync.ts_ns - (probed ? last_launch : t + 5 * kMs);
      b.Add(sync);
    }
    Report r = b.Run();
    EXPECT_NEAR(PathS(r, BudgetCause::kHostSleep), 15, 0.5);
    EXPECT_NEAR(LostS(r, BudgetCause::kHostSleep), after_launches ? 0 : 15, 0.5);
  }
}

// The same sleep before the step is launched (a C++ loop or a CUDA Graph replay queues the whole
// step in microseconds after it): the sync still waits 30 ms, but the job gave the GPU work after
// the sleep, so nothing proves the GPU worked through it, and the idle time is the sleep's.
// A loop that empties the allocator's cache every step (torch.cuda.empty_cache()), shaped as on
// the H100: the first cudaFree waits out the step's kernels (14 ms), then 26 more frees follow it
// back to back (3 µs apart) and a device sync, all with nothing of the job's on the GPU. NVML
// reads the GPU busy 95% (the driver's unmapping counts as busy), yet the job's GPU idled 4 ms
// of every 50: the allocator's 3.9 ms (the first free's 14 ms were a wait for the GPU, a sync),
// with NVML and with stream evidence alike, and from a
// recording whose allocator rows carry no since_work_ns (before 2026-12-07). With the frees 50 µs
// apart (room for a launch no probe saw) or a thread that launches kernels running meanwhile,
// nothing is proven and only NVML's idle time is shared out, unless the launch probes watched
// the time (then the rows' since_work_ns prove the gaps empty too). A free whose row shows work
// given since the drain (another thread's copy) is not in the stretch; the next one drains again.
TEST(BudgetTest, AllocatorCallsAfterADrainingFreeIdleTheGpu) {
  enum Shape { kBackToBack, kStream, kOldRows, kSeenWork, kGaps, kLauncherRuns, kWatchedGaps };
  for (Shape shape :
       {kBackToBack, kStream, kOldRows, kSeenWork, kGaps, kLauncherRuns, kWatchedGaps}) {
    SCOPED_TRACE(shape);
    Builder b;
    b.w.events.clear();
    // Launches counted one second in ten; kWatchedGaps: the probes watched the whole window
    // (coverage known, nothing unprobed), so the rows' since_work_ns span any gap.
    b.w.launch_duty = 10;
    b.w.launch_estimates.coverage_known = shape == kWatchedGaps;
    constexpr int32_t kHelper = kMain + 1;  // the autograd thread: it launches kernels
    b.Add(Call(kMain, Op::kCudaLaunchKernel, 0, 5'000));
    Event launch = Call(kMain, Op::kCudaLaunchKernel, 10'000, 5'000);
    launch.tid = kHelper;
    b.Add(launch);
    int64_t gap = shape == kGaps || shape == kWatchedGaps ? 50'000 : 3'000;
    for (int64_t t = 0; t < b.w.to; t += 50 * kMs) {
      Event wait = Call(kMain, Op::kCudaFree, t + 30 * kMs, 14 * kMs);
      wait.since_work_ns = kMs;  // the step's last launch
      wait.addr = 0x7f0000000000;
      b.Add(wait);
      int64_t ts = t + 44 * kMs;
      for (int i = 0; i < 26; ++i) {
        ts += gap;
        Event free = Call(kMain, Op::kCudaFree, ts, 150'000);
        if (shape != kOldRows) free.since_work_ns = ts - (t + 29 * kMs);
        if (shape == kSeenWork && i == 12) free.since_work_ns = 50'000;
        free.addr = 0x7f0000000000 + (i + 1) * 0x100000;
        b.Add(free);
        ts += 150'000;
      }
      Event sync = Call(kMain, Op::kCudaDeviceSync, ts + gap, 8'000);
      sync.since_work_ns = ts + gap - (t + 29 * kMs);
      b.Add(sync);
      // The helper thread sleeps through the step, or wakes for 2 ms during the frees.
      auto helper_sleeps = [&](int64_t from, int64_t to) {
        b.Add(Sw(kMain, from, to - from, SwitchKind::kBlocked, 0, 0, kHelper));
      };
      if (shape == kLauncherRuns) {
        helper_sleeps(t + 100'000, t + 44 * kMs);
        helper_sleeps(t + 46 * kMs, t + 50 * kMs);
      } else {
        helper_sleeps(t + 100'000, t + 50 * kMs);
      }
    }
    for (int64_t s = 0; s < 100; ++s) {
      b.w.op_seconds.push_back({s, kMain, Op::kCudaFree, 540, 540 * 800'000, 14 * kMs});
    }
    if (shape != kStream) AddUtil(b.w, [](int64_t) { return 95.0; });
    Report r = b.Run();
    const Finding* f = Find(r, "malloc-churn");
    ASSERT_NE(f, nullptr);
    // The first free's 14 ms are the wait for the step's kernels: a sync, not the allocator's.
    EXPECT_NEAR(PathS(r, BudgetCause::kAllocator), 2000 * 26 * 0.15 / 1e3, 0.2);
    EXPECT_NEAR(PathS(r, BudgetCause::kSyncWait), 2000 * (14 + 0.008) / 1e3, 0.2);
    // torch.cuda.empty_cache()'s signature, named with its fix.
    std::string root, fixes;
    for (const std::string& x : f->root) root += x + "\n";
    for (const std::string& x : f->fix) fixes += x + "\n";
    EXPECT_NE(root.find("2000 bursts of 27 frees"), std::string::npos) << root;
    EXPECT_NE(root.find("28.0 s of it frees waiting for the GPU"), std::string::npos) << root;
    EXPECT_NE(fixes.find("remove torch.cuda.empty_cache()"), std::string::npos) << fixes;
    if (shape == kSeenWork) {
      EXPECT_NEAR(LostS(r, BudgetCause::kAllocator), 25 * 0.15 * 2, 0.15);
    } else if (shape == kBackToBack || shape == kStream || shape == kOldRows) {
      EXPECT_NEAR(r.budget.gpu_idle_s, 8.0, 0.2);
      EXPECT_NEAR(LostS(r, BudgetCause::kAllocator), 7.8, 0.2);
      EXPECT_NEAR(f->lost_s, 7.8, 0.2);
      EXPECT_GE(f->severity, Severity::kMedium);
      // A MEDIUM finding whose fix speeds the job up: the GPU is not "the bottleneck".
      EXPECT_EQ(r.gpu_verdict.find("faster kernels"), std::string::npos) << r.gpu_verdict;
    } else if (shape == kWatchedGaps) {
      // The 27 gaps of 50 µs are drained too (10.5 s idle), the calls in them the allocator's.
      EXPECT_NEAR(r.budget.gpu_idle_s, 2000 * (26 * 0.2 + 0.05) / 1e3, 0.2);
      EXPECT_NEAR(LostS(r, BudgetCause::kAllocator), 7.8, 0.2);
    } else {
      EXPECT_NEAR(r.budget.gpu_idle_s, 5, 0.2);
      EXPECT_LT(LostS(r, BudgetCause::kAllocator), 5.0);
    }
  }
}

// A loop that allocates one buffer a step, launches its kernels and frees the buffer (the free
// waits out the step): frees 0.85 ms apart, but with the step's calls between them, so no burst
// and no empty_cache() fix. The free drained the GPU, so the allocation after it is idle GPU
// time (6.4% of the window); the severity follows those lost seconds, MEDIUM, whatever the call
// rate (160 a second; a rate rule used to cap it at LOW below 200).
TEST(BudgetTest, OneBufferAStepIsNotEmptyCache) {
  Builder b;
  b.w.events.clear();
  for (int64_t t = 0; t < b.w.to; t += 12'500'000) {
    b.Add(Call(kMain, Op::kCudaMalloc, t, 800'000));
    b.Add(Call(kMain, Op::kCudaLaunchKernel, t + 800'000, 5'000));
    Event free = Call(kMain, Op::kCudaFree, t + 850'000, 11'650'000);
    free.since_work_ns = 45'000;
    free.addr = 0x7f0000000000;
    b.Add(free);
  }
  for (int64_t s = 0; s < 100; ++s) {
    b.w.op_seconds.push_back({s, kMain, Op::kCudaMalloc, 80, 80 * 800'000, 900'000});
    b.w.op_seconds.push_back({s, kMain, Op::kCudaFree, 80, 80 * 11'650'000, 12 * kMs});
  }
  AddUtil(b.w, [](int64_t) { return 93.6; });
  Report r = b.Run();
  const Finding* f = Find(r, "malloc-churn");
  ASSERT_NE(f, nullptr);
  std::string root, fixes;
  for (const std::string& x : f->root) root += x + "\n";
  for (const std::string& x : f->fix) fixes += x + "\n";
  EXPECT_EQ(root.find("bursts of"), std::string::npos) << root;
  EXPECT_EQ(fixes.find("empty_cache"), std::string::npos) << fixes;
  EXPECT_NEAR(f->lost_s, 6.4, 0.3);
  EXPECT_EQ(f->severity, Severity::kMedium);
}

// A loop of tiny kernels that ends each 10 ms step with torch.cuda.synchronize(), which finds the
// GPU drained: its launches have no rows (the launch probes are attached one second in ten), so
// the next step's sync says no work was seen since the last one. That is no proof: the GPU's
// idle time is NVML's (80%), not the whole window.
TEST(BudgetTest, UnseenLaunchesBetweenSyncsProveNothing) {
  Builder b;
  b.w.events.clear();
  b.w.launch_duty = 10;  // recorded without coverage rows: nothing says which seconds were watched
  for (int64_t t = 0; t < b.w.to; t += 10 * kMs) {
    Event sync = Call(kMain, Op::kCudaDeviceSync, t + 9 * kMs, 5'000);
    sync.since_work_ns = t > 0 ? 10 * kMs : 1 * kMs;
    b.Add(sync);
  }
  AddUtil(b.w, [](int64_t) { return 20.0; });
  Report r = b.Run();
  EXPECT_NEAR(r.budget.gpu_idle_s, 80, 1);
}

TEST(BudgetTest, ASleepBeforeTheStepIsQueuedKeepsItsIdleTime) {
  Builder b;
  b.w.events.clear();
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event sleep = Sw(kMain, t, 15 * kMs, SwitchKind::kBlocked, 0);
    sleep.waker_pid = 0;
    sleep.waker_tid = 0;
    b.Add(sleep);
    Event sync = Call(kMain, Op::kCudaStreamSync, t + 15 * kMs + 100'000, 30 * kMs);
    sync.since_work_ns = 40'000;  // the graph launch right before it
    b.Add(sync);
  }
  AddUtil(b.w, [](int64_t) { return 90.0; });
  Report r = b.Run();
  EXPECT_NEAR(PathS(r, BudgetCause::kHostSleep), 15, 0.5);
  EXPECT_NEAR(LostS(r, BudgetCause::kHostSleep), 10, 0.5);
  ASSERT_NE(Find(r, "host-sleep"), nullptr);
}

// Batches are late because the worker that owes them sleeps 40 ms of every 100 until a timer or
// an interrupt (a network reply) wakes it, and computes 10 ms: loader-waits, not
// dataloader-starvation (the worker is not computing) and not io-bottleneck (no disk I/O). The
// finding's lost seconds are all of the batch waits' idle time; its fix is more requests in
// flight, not faster transforms.
TEST(BudgetTest, WorkersAsleepOnTheNetworkAreLoaderWaits) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    Event wait = Sw(kMain, t + 40 * kMs, 50 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 101;
    wait.waker_tid = 101;
    b.Add(wait);
    Event fetch = Sw(101, t + 40 * kMs, 40 * kMs, SwitchKind::kBlocked, 0);
    fetch.waker_pid = 0;  // the NIC's interrupt
    fetch.waker_tid = 0;
    b.Add(fetch);  // then 10 ms computing the batch
    // Delivered at t + 90 ms, idle until the main process hands it the next index (then 1 ms
    // on the CPU taking it).
    Event idle = Sw(101, t + 90 * kMs, 49 * kMs, SwitchKind::kBlocked, 0);
    idle.waker_pid = kMain;
    idle.waker_tid = kMain;
    b.Add(idle);
  }
  AddUtil(b.w, [](int64_t) { return 50.0; });
  Report r = b.Run();
  EXPECT_NEAR(PathS(r, BudgetCause::kBatchWait), 40, 0.5);
  EXPECT_NEAR(PathS(r, BudgetCause::kBatchCompute), 10, 0.5);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "loader-waits");
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_NEAR(f.lost_s, 50, 0.5);
  EXPECT_EQ(Find(r, "dataloader-starvation"), nullptr);
  EXPECT_EQ(Find(r, "io-bottleneck"), nullptr);
  std::string fixes;
  for (const std::string& x : f.fix) fixes += x + "\n";
  // Half the window lost: twice the workers, plus one.
  EXPECT_NE(fixes.find("num_workers=3"), std::string::npos) << fixes;
}

// The path's waits see only the end of the worker's cycle. A worker that sleeps 30 ms on the
// network and computes 5 ms a batch, owed a batch for 9 ms at a time, is computing in 5 of
// them: still loader-waits, because its whole cycle is mostly the sleep (what limits how fast it
// delivers). The same waits with a worker computing 30 ms and sleeping 5 are starvation.
std::string TopOfShortBatchWaits(int64_t sleep_ms, int64_t compute_ms) {
  Builder b;
  b.Proc(101, kMain, "pt_data_worker:0", true);
  int64_t cycle = sleep_ms + compute_ms;
  for (int64_t t = 0; t + cycle * kMs < b.w.to; t += cycle * kMs) {
    int64_t done = t + cycle * kMs;  // delivered
    Event wait = Sw(kMain, done - 9 * kMs, 9 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = 101;
    wait.waker_tid = 101;
    b.Add(wait);
    Event fetch = Sw(101, t, sleep_ms * kMs, SwitchKind::kBlocked, 0);
    fetch.waker_pid = 0;  // a timer or the NIC's interrupt
    fetch.waker_tid = 0;
    b.Add(fetch);  // then compute_ms computing, delivered at `done`, the next fetch at once
  }
  AddUtil(b.w, [](int64_t) { return 70.0; });
  Report r = b.Run();
  return r.findings.empty() ? "-" : r.findings[0].rule;
}

TEST(BudgetTest, TheWorkersWholeCycleNamesWhatLimitsThem) {
  EXPECT_EQ(TopOfShortBatchWaits(30, 5), "loader-waits");
  EXPECT_EQ(TopOfShortBatchWaits(5, 30), "dataloader-starvation");
}

// The same sleeps woken by another program instead: the program the job started and waited for
// (a subprocess.run each step) is named, with the seconds the main thread waited for it. The
// recording gpuwhy's own wake-ups (its start gate) are not a program the job waits for.
TEST(BudgetTest, WaitsAnotherProgramEndedAreThatPrograms) {
  Builder b;
  b.w.tracer_pid = 950;
  int32_t pid = 1000;
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs, ++pid) {
    b.Proc(pid, kMain, "eval.sh", true);
    b.w.processes[pid].cmdline = "/bin/sh eval.sh";
    Event wait = Sw(kMain, t + 10 * kMs, 50 * kMs, SwitchKind::kBlocked, 0);
    wait.waker_pid = t < 2 * kSec ? 950 : pid;  // the child's exit woke its parent
    wait.waker_tid = wait.waker_pid;
    b.Add(wait);
  }
  AddUtil(b.w, [](int64_t) { return 50.0; });
  Report r = b.Run();
  EXPECT_NEAR(LostS(r, BudgetCause::kOtherProgram), 49, 0.5);
  EXPECT_NEAR(PathS(r, BudgetCause::kNotAttributed), 1, 0.5);
  ASSERT_FALSE(r.findings.empty());
  const Finding& f = r.findings[0];
  EXPECT_EQ(f.rule, "waits-for-program");
  EXPECT_EQ(f.severity, Severity::kHigh);
  EXPECT_NEAR(f.lost_s, 49, 0.5);
  std::string root;
  for (const std::string& x : f.root) root += x + "\n";
  EXPECT_NE(root.find("eval.sh (980 runs, e.g. PID"), std::string::npos) << root;
  EXPECT_NE(root.find("started by the job"), std::string::npos) << root;
  std::string fixes;
  for (const std::string& x : f.fix) fixes += x + "\n";
  EXPECT_NE(fixes.find("subprocess.Popen"), std::string::npos) << fixes;
}

// A sleep with no waker recorded (a recording older than wake-up causality) in a job without
// workers stays not attributed; the remainder is printed with its seconds.
TEST(BudgetTest, NotAttributedIsPrintedWithItsSeconds) {
  Builder b;
  for (int64_t t = 0; t < b.w.to; t += 100 * kMs) {
    b.Add(Sw(kMain, t + 10 * kMs, 50 * kMs, SwitchKind::kBlocked, 0));
  }
  AddUtil(b.w, [](int64_t) { return 50.0; });
  Report r = b.Run();
  EXPECT_NEAR(PathS(r, BudgetCause::kNotAttributed), 50, 0.5);
  EXPECT_NEAR(LostS(r, BudgetCause::kNotAttributed), 50, 0.5);
  EXPECT_NE(ReportToText(r).find("not attributed"), std::string::npos);
}

// ---- NCCL: lateness, the straggler test and the wait it caused (nccl.h) ---------------------

NcclCallRow NcclInit(int32_t pid, int64_t rank, int64_t nranks, int64_t ts = 0) {
  NcclCallRow c;
  c.pid = pid;
  c.tid = pid;
  c.ts = ts;
  c.op = Op::kNcclCommInit;
  c.ret = 0;
  c.bytes = nranks;
  c.kind = rank;
  c.comm = "nccl 00000000000000aa";
  return c;
}

NcclCallRow NcclCollective(int32_t pid, int64_t seq, int64_t ts) {
  NcclCallRow c;
  c.pid = pid;
  c.tid = pid;
  c.ts = ts;
  c.duration = 20'000;
  c.op = Op::kNcclAllReduce;
  c.ret = 0;
  c.bytes = 4 << 20;
  c.kind = 7;
  c.seq = seq;
  c.comm = "nccl 00000000000000aa";
  return c;
}

// `ranks` ranks (pids 100, 101, …), `steps` steps of 50 ms: each rank enqueues one all-reduce
// at step start + late(rank, step), then syncs until the last rank's enqueue + 8 ms.
struct NcclJobBuilder {
  std::vector<NcclCallRow> calls;
  std::vector<Event> syncs;
  NcclJobBuilder(int ranks, int steps, const std::function<int64_t(int, int)>& late) {
    for (int r = 0; r < ranks; ++r) calls.push_back(NcclInit(100 + r, r, ranks));
    for (int step = 0; step < steps; ++step) {
      int64_t t0 = kSec + step * 50 * kMs;
      int64_t last = t0;
      for (int r = 0; r < ranks; ++r) last = std::max(last, t0 + late(r, step));
      for (int r = 0; r < ranks; ++r) {
        int64_t enq = t0 + late(r, step);
        calls.push_back(NcclCollective(100 + r, step + 1, enq));
        int64_t sync_start = enq + 100'000;
        syncs.push_back(Call(100 + r, Op::kCudaStreamSync, sync_start,
                             std::max<int64_t>(last + 8 * kMs - sync_start, 1000)));
      }
    }
    std::stable_sort(calls.begin(), calls.end(), [](auto& a, auto& b) { return a.ts < b.ts; });
    std::stable_sort(syncs.begin(), syncs.end(),
                     [](auto& a, auto& b) { return a.ts_ns < b.ts_ns; });
  }
};

TEST(NcclTest, MedianAndMad) {
  EXPECT_EQ(MedianNs({}), 0);
  EXPECT_EQ(MedianNs({5, 1, 3}), 3);
  EXPECT_EQ(MedianNs({4, 1, 3, 2}), 2);  // the low median
  EXPECT_EQ(MadNs({1, 2, 3, 4, 100}), 1);
  EXPECT_EQ(MadNs({7, 7, 7}), 0);
}

TEST(NcclTest, LatenessIsBehindTheEarliestRankAndTheLateRankIsTheStraggler) {
  // Rank 2 is 30 ms late in every step; ranks 0 and 1 within 0.3 ms of each other.
  NcclJobBuilder b(3, 40, [](int r, int step) -> int64_t {
    if (r == 2) return 30 * kMs;
    return r == 1 ? (step % 2) * 300'000 : 0;
  });
  NcclJob job = AnalyzeNccl(b.calls, b.syncs);
  ASSERT_EQ(job.comms.size(), 1u);
  const NcclCommunicator& c = job.comms[0];
  EXPECT_EQ(c.collectives, 40);
  EXPECT_EQ(c.nranks, 3);
  EXPECT_EQ(c.op, "ncclAllReduce");
  ASSERT_EQ(c.straggler, 2);
  EXPECT_EQ(c.ranks[2].pid, 102);
  EXPECT_EQ(c.ranks[2].late_median_ns, 30 * kMs);
  EXPECT_EQ(c.ranks[2].late_mean_ns, 30 * kMs);
  EXPECT_EQ(c.ranks[2].last, 40);
  EXPECT_EQ(c.threshold_ns, thresholds::kNcclLateFloorNs);  // the others' MAD is tiny
  // The others waited from their sync's start (enqueue + 0.1 ms) to rank 2's enqueue.
  EXPECT_NEAR(c.ranks[0].waited_s, 40 * (30 * kMs - 100'000) / 1e9, 1e-9);
  EXPECT_NEAR(c.ranks[1].waited_s,
              20 * (30 * kMs - 100'000) / 1e9 + 20 * (30 * kMs - 400'000) / 1e9, 1e-9);
  EXPECT_EQ(c.ranks[2].waited_s, 0);
  EXPECT_NEAR(c.others_waited_s, c.ranks[0].waited_s + c.ranks[1].waited_s, 1e-12);
}

TEST(NcclTest, JitterBelowTheFloorIsNoStraggler) {
  // Whoever is last changes every step, by up to 1.5 ms: no rank is consistently late.
  NcclJobBuilder b(4, 60, [](int r, int step) -> int64_t { return ((r + step) % 4) * 500'000; });
  NcclJob job = AnalyzeNccl(b.calls, b.syncs);
  ASSERT_EQ(job.comms.size(), 1u);
  EXPECT_EQ(job.comms[0].straggler, -1);
  EXPECT_EQ(job.comms[0].others_waited_s, 0);
}

TEST(NcclTest, ConsistentButSmallLatenessBelowTheFloorIsNoStraggler) {
  NcclJobBuilder b(2, 60, [](int r, int) -> int64_t { return r == 1 ? 1 * kMs : 0; });
  EXPECT_EQ(AnalyzeNccl(b.calls, b.syncs).comms[0].straggler, -1);
  NcclJobBuilder c(2, 60, [](int r, int) -> int64_t { return r == 1 ? 3 * kMs : 0; });
  EXPECT_EQ(AnalyzeNccl(c.calls, c.syncs).comms[0].straggler, 1);  // two ranks work too
}

TEST(NcclTest, NoisyRanksRaiseTheThresholdByTheirMad) {
  // Ranks 0-2 are late by 0-12 ms at random-looking steps; rank 3 by 8 ms always: not beyond
  // 3 robust standard deviations of the others' noise.
  NcclJobBuilder b(4, 60, [](int r, int step) -> int64_t {
    if (r == 3) return 8 * kMs;
    return ((step * 7 + r * 3) % 5) * 3 * kMs;
  });
  NcclJob job = AnalyzeNccl(b.calls, b.syncs);
  ASSERT_FALSE(job.comms.empty());
  const NcclCommunicator& c = job.comms[0];
  EXPECT_GT(c.threshold_ns, thresholds::kNcclLateFloorNs);
  EXPECT_EQ(c.straggler, -1);
}

TEST(NcclTest, TooFewOrIncompleteCollectivesNameNobody) {
  NcclJobBuilder b(3, static_cast<int>(thresholds::kNcclMinCollectives) - 1,
                   [](int r, int) -> int64_t { return r == 2 ? 30 * kMs : 0; });
  EXPECT_EQ(AnalyzeNccl(b.calls, b.syncs).comms[0].straggler, -1);
  // A collective whose row is missing on one rank is not complete, and not counted.
  NcclJobBuilder d(3, 20, [](int r, int) -> int64_t { return r == 2 ? 30 * kMs : 0; });
  auto drop = std::find_if(d.calls.begin(), d.calls.end(),
                           [](const NcclCallRow& c) { return c.pid == 101 && c.seq == 5; });
  d.calls.erase(drop);
  NcclJob incomplete = AnalyzeNccl(d.calls, d.syncs);
  ASSERT_FALSE(incomplete.comms.empty());
  const NcclCommunicator& c = incomplete.comms[0];
  EXPECT_EQ(c.collectives, 19);
  EXPECT_EQ(c.incomplete, 1);
  // Rows of a communicator whose init was not seen are not aligned across ranks.
  std::vector<NcclCallRow> late_attach = {NcclCollective(100, 1, kSec)};
  late_attach[0].comm = "nccl handle 0x1234";
  NcclJob job = AnalyzeNccl(late_attach, {});
  EXPECT_TRUE(job.comms.empty());
  EXPECT_EQ(job.unaligned_rows, 1);
}

TEST(NcclTest, BucketsBeforeOneSyncCountThatSyncOnce) {
  // Two all-reduces per step before one sync: the sync's wait counts once, to the later one.
  std::vector<NcclCallRow> calls = {NcclInit(100, 0, 2), NcclInit(101, 1, 2)};
  std::vector<Event> syncs;
  for (int step = 0; step < 20; ++step) {
    int64_t t0 = kSec + step * 100 * kMs;
    calls.push_back(NcclCollective(100, 2 * step + 1, t0));
    calls.push_back(NcclCollective(100, 2 * step + 2, t0 + kMs));
    calls.push_back(NcclCollective(101, 2 * step + 1, t0 + 40 * kMs));
    calls.push_back(NcclCollective(101, 2 * step + 2, t0 + 41 * kMs));
    syncs.push_back(Call(100, Op::kCudaStreamSync, t0 + 2 * kMs, 50 * kMs));
    syncs.push_back(Call(101, Op::kCudaStreamSync, t0 + 42 * kMs, 10 * kMs));
  }
  std::stable_sort(calls.begin(), calls.end(),
                   [](const NcclCallRow& a, const NcclCallRow& b) { return a.ts < b.ts; });
  NcclJob job = AnalyzeNccl(calls, syncs);
  ASSERT_FALSE(job.comms.empty());
  const NcclCommunicator& c = job.comms[0];
  ASSERT_EQ(c.straggler, 1);
  EXPECT_EQ(c.collectives, 40);
  EXPECT_NEAR(c.ranks[0].waited_s, 20 * 39 * kMs / 1e9, 1e-9);  // t0+2 ms … t0+41 ms
}

TEST(NcclTest, TheFindingNamesTheStragglerAndEachRanksReportBlamesIt) {
  Builder b(5);
  for (int r = 1; r < 3; ++r) b.Proc(100 + r, 1, "gw_nccl_train", true);
  NcclJobBuilder n(3, 60, [](int r, int) -> int64_t { return r == 2 ? 30 * kMs : 0; });
  b.w.nccl_calls = n.calls;
  b.w.events.clear();
  for (const Event& e : n.syncs) b.w.events.push_back(e);
  ExplainOptions o;
  Report r = Analyze(b.w, o);
  const Finding* f = nullptr;
  for (const Finding& x : r.findings) {
    if (x.rule == "collective-straggler") f = &x;
  }
  ASSERT_NE(f, nullptr) << ReportToText(r);
  EXPECT_NE(f->root[0].find("rank 2 (pid 102) enqueued ncclAllReduce 30ms late"), std::string::npos)
      << f->root[0];
  EXPECT_NEAR(f->lost_s, 2 * 60 * (30 * kMs - 100'000) / 1e9, 1e-6);
  o.pid = 100;
  Report r0 = Analyze(b.w, o);
  EXPECT_NE(ReportToText(r0).find("caused by rank 2 (pid 102), not by itself"), std::string::npos)
      << ReportToText(r0);
  o.pid = 102;
  EXPECT_NE(ReportToText(Analyze(b.w, o)).find("this process is that rank"), std::string::npos);
  // The same job without the late rank: no finding.
  NcclJobBuilder h(3, 60, [](int, int) -> int64_t { return 0; });
  b.w.nccl_calls = h.calls;
  b.w.events.assign(h.syncs.begin(), h.syncs.end());
  o.pid = 0;
  for (const Finding& x : Analyze(b.w, o).findings) EXPECT_NE(x.rule, "collective-straggler");
}

TEST(NcclTest, NodesAreAlignedOnCollectiveCompletionBeforeRanksAreCompared) {
  // Ranks 0 and 1 on node a, rank 2 (30 ms late) on node b, whose clock runs 5 s behind and
  // whose session started 2 s later by its own clock. Node b's rank has the same pid as one of
  // node a's. Unaligned, rank 2 would look 5 s early.
  NcclJobBuilder b(3, 40, [](int r, int) -> int64_t { return r == 2 ? 30 * kMs : 0; });
  const int64_t wall_a = 1000 * kSec, wall_b = 1002 * kSec, behind = 5 * kSec;
  NcclNodeRows a{"a", wall_a, {}, {}}, nb{"b", wall_b, {}, {}};
  auto to_b = [&](int64_t ts_a) { return ts_a + wall_a - behind - wall_b; };
  for (NcclCallRow c : b.calls) {
    if (c.pid == 102) {
      c.pid = 100;
      c.ts = to_b(c.ts);
      nb.calls.push_back(c);
    } else {
      a.calls.push_back(c);
    }
  }
  for (Event e : b.syncs) {
    if (e.pid == 102) {
      e.pid = 100;
      e.ts_ns = to_b(e.ts_ns);
      nb.syncs.push_back(e);
    } else {
      a.syncs.push_back(e);
    }
  }
  NcclFleet fleet = AnalyzeNcclAcrossNodes({a, nb});
  ASSERT_EQ(fleet.clocks.size(), 2u);
  EXPECT_EQ(fleet.clocks[1].offset_ns, behind);
  EXPECT_EQ(fleet.clocks[1].error_ns, 0);
  EXPECT_EQ(fleet.clocks[1].collectives, 40);
  ASSERT_EQ(fleet.job.comms.size(), 1u);
  const NcclCommunicator& c = fleet.job.comms[0];
  ASSERT_EQ(c.ranks.size(), 3u);
  ASSERT_EQ(c.straggler, 2);
  EXPECT_EQ(c.ranks[2].node, 1);
  EXPECT_EQ(c.ranks[2].pid, 100);
  EXPECT_EQ(c.ranks[2].late_median_ns, 30 * kMs);
  EXPECT_EQ(c.ranks[0].node, 0);
  EXPECT_NEAR(c.others_waited_s, 2 * 40 * (30 * kMs - 100'000) / 1e9, 1e-9);
}

}  // namespace
}  // namespace gw
