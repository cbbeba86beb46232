// What the rule families share (rules.h): evidence SQL built from the Facts, the effect lines
// several findings add, and RunRules, which runs every family in a fixed order.
#include "analysis/rules.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "analysis/budget.h"
#include "analysis/cpu_profile.h"
#include "analysis/format.h"

namespace gw {
namespace rules {

namespace {

int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

std::string PidList(const std::vector<int32_t>& pids) {
  std::string out;
  for (int32_t p : pids) {
    if (!out.empty()) out += ", ";
    out += std::to_string(p);
  }
  return out.empty() ? "0" : out;
}

}  // namespace

double BatchLostS(const Facts& f, BudgetCause c) {
  constexpr BudgetCause kBatch[] = {BudgetCause::kBatchCompute, BudgetCause::kBatchIo,
                                    BudgetCause::kBatchWait};
  // The dominant cause: by the delivering workers' whole batch cycles where they are known,
  // else by the path's waits.
  int64_t cycles = 0;
  for (BudgetCause x : kBatch) cycles += At(f.batch_cycles, x);
  auto weight = [&](BudgetCause x) {
    return cycles > 0 ? static_cast<double>(At(f.batch_cycles, x)) : BudgetPathS(f, x);
  };
  BudgetCause dominant = kBatch[0];
  double lost = 0;
  for (BudgetCause x : kBatch) {
    if (weight(x) > weight(dominant)) dominant = x;
    lost += BudgetLostS(f, x);
  }
  return c == dominant ? lost : 0;
}

std::string BatchCycleLine(const Facts& f) {
  int64_t wait = At(f.batch_cycles, BudgetCause::kBatchWait);
  int64_t compute = At(f.batch_cycles, BudgetCause::kBatchCompute);
  int64_t io = At(f.batch_cycles, BudgetCause::kBatchIo);
  if (wait + compute + io <= 0) return "";
  return Fmt("Over the delivering workers' whole batch cycles (from one batch the loop waited "
             "for to the next): computing %s s, on local I/O %s s, asleep until the network or "
             "a timer woke them %s s: what limits how fast they deliver",
             FormatSeconds(Sec(compute)).c_str(), FormatSeconds(Sec(io)).c_str(),
             FormatSeconds(Sec(wait)).c_str());
}

KernelTime KernelTimeOf(const Facts& f, const std::vector<int32_t>& tids,
                        const std::vector<int32_t>& pids) {
  KernelTime k;
  k.pid = pids.empty() ? 0 : pids.front();
  std::optional<CpuProfileSection> p =
      ProfileThreads(*f.w, tids, f.loop_begin, f.loop_end);
  if (!p) return k;
  k.samples = p->samples - p->sync_samples;
  // Samples inside a CUDA sync may be in the kernel too (a blocking sync's wait): not work.
  k.kernel_share = k.samples > 0 ? Share(static_cast<double>(p->kernel_samples -
                                                             std::min(p->kernel_samples,
                                                                      p->sync_samples)),
                                         static_cast<double>(k.samples))
                                 : 0.0;
  int64_t first = f.loop_begin / 1'000'000'000, last = (f.loop_end - 1) / 1'000'000'000;
  int64_t faults = 0;
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.op != Op::kPageFault || r.sec < first || r.sec > last) continue;
    if (std::find(pids.begin(), pids.end(), r.pid) != pids.end()) faults += r.count;
  }
  double secs = static_cast<double>(last - first + 1);
  k.faults_per_s = secs > 0 ? static_cast<double>(faults) / secs : 0.0;
  return k;
}

std::optional<std::string> KernelTimeLine(const KernelTime& k, const char* whose, const char* who,
                                          std::vector<std::string>* fixes) {
  if (k.samples < th::kProfileMinSamples || k.kernel_share < th::kKernelHeavyShare) {
    return std::nullopt;
  }
  if (k.faults_per_s >= th::kFaultHeavyPerS) {
    fixes->push_back(
        "reuse each batch's buffers instead of allocating fresh memory for every batch: the "
        "first touch of every fresh 4 KiB page is a page fault, and glibc maps allocations "
        "above its mmap threshold (32 MiB at most) anew each time and unmaps them on free "
        "(allocate arrays once and fill them in place: numpy out=, torch.empty once + copy_)");
    return Fmt("%s CPU time was %s in the kernel, with %s page faults a second (%s of fresh "
               "4 KiB pages a second): %s faulting in fresh memory",
               whose, FormatPct(k.kernel_share).c_str(), FormatRate(k.faults_per_s).c_str(),
               FormatBytes(k.faults_per_s * 4096).c_str(), who);
  }
  fixes->push_back(Fmt("find the system calls: strace -c -f -p %d for a few seconds counts them "
                       "by call and time",
                       k.pid));
  return Fmt("%s CPU time was %s in the kernel (system calls: few page faults, %s a second)",
             whose, FormatPct(k.kernel_share).c_str(), FormatRate(k.faults_per_s).c_str());
}

// The severity a value earns against three rising thresholds; nullopt below the lowest.
std::optional<Severity> Ladder(double value, double high, double medium, double low) {
  if (value >= high) return Severity::kHigh;
  if (value >= medium) return Severity::kMedium;
  if (value >= low) return Severity::kLow;
  return std::nullopt;
}

std::optional<Severity> Ladder(double lost_share) {
  return Ladder(lost_share, th::kHighLostShare, th::kMediumLostShare, th::kLowLostShare);
}

// Op names as a quoted SQL list ('cudaMalloc', 'cudaFree'), from ops.h: evidence names ops the
// way users write them, and a renumbering of ids cannot break it.
std::string OpNames(std::initializer_list<Op> ops) {
  std::string out;
  for (Op op : ops) {
    if (!out.empty()) out += ", ";
    out += "'" + std::string(OpName(op)) + "'";
  }
  return out;
}

// Every op `pred` holds for, as OpNames does.
std::string OpNamesWhere(bool (*pred)(Op)) { return OpSqlList(pred, OpListForm::kNames); }

// "CUDA ops" (the analysis's IsCudaOp: every op of the two CUDA layers), as a condition on an
// op name column.
std::string CudaOpCondition(const std::string& column) {
  return column + " IN (SELECT name FROM op_names WHERE layer IN ('" +
         std::string(LayerName(Layer::kCudaRuntime)) + "', '" +
         std::string(LayerName(Layer::kCudaDriver)) + "'))";
}

// Substitutes {EVENTS} (`events`, the newest session's rows as the brief writes them, or
// `events_all` for an older session), {IN_S} / {e.IN_S} (nothing, or "session = N AND " for
// events_all), {S} session, {F}/{T} window ns, {FS}/{TS} window seconds, {P} main pid,
// {FEED} main pid + workers, {W} workers.
std::string Sql(const Facts& f, const std::string& tmpl) {
  std::vector<int32_t> feed = {f.main_pid};
  feed.insert(feed.end(), f.worker_pids.begin(), f.worker_pids.end());
  std::string session = std::to_string(f.w->session);
  bool newest = f.w->newest_session;
  std::string s = tmpl;
  s = Replace(s, "{EVENTS}", newest ? "events" : "events_all");
  s = Replace(s, "{e.IN_S}", newest ? "" : "e.session = " + session + " AND ");
  s = Replace(s, "{IN_S}", newest ? "" : "session = " + session + " AND ");
  s = Replace(s, "{S}", session);
  s = Replace(s, "{FS}", std::to_string(f.w->from / 1'000'000'000));
  s = Replace(s, "{TS}", std::to_string((f.w->to + 999'999'999) / 1'000'000'000));
  s = Replace(s, "{F}", std::to_string(f.w->from));
  s = Replace(s, "{T}", std::to_string(f.w->to));
  s = Replace(s, "{P}", std::to_string(f.main_pid));
  s = Replace(s, "{FEED}", PidList(feed));
  s = Replace(s, "{W}", PidList(f.worker_pids));
  return s;
}

// The main process's CUDA calls in the window as the analysis reads them
// (WithoutNestedDriverCalls), as CTEs: `cuda` numbers each thread's calls (launches are not rows
// the analysis reads) with the end of its latest runtime call, and `calls` drops a driver call
// nested in one (cudaStreamSynchronize calling cuStreamSynchronize is one sync, not two).
std::string CudaCalls(const Facts& f) {
  std::string runtime(LayerName(Layer::kCudaRuntime));
  std::string driver(LayerName(Layer::kCudaDriver));
  return Sql(f,
             "WITH cuda AS (SELECT e.timestamp, e.tid, e.op, o.layer, e.duration_ns, e.bytes, "
             "e.kind, MAX(CASE WHEN o.layer = '" +
                 runtime +
                 "' THEN e.timestamp + e.duration_ns END) OVER (PARTITION BY e.tid ORDER BY "
                 "e.timestamp ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS runtime_end "
                 "FROM {EVENTS} e JOIN op_names o ON o.name = e.op WHERE {e.IN_S}e.pid = {P} "
                 "AND o.layer IN ('" +
                 runtime + "', '" + driver + "') AND e.op NOT IN (" + OpNamesWhere(IsLaunch) +
                 ") AND e.timestamp >= {F} AND e.timestamp < {T}), calls AS (SELECT * FROM cuda "
                 "WHERE NOT (layer = '" +
                 driver +
                 "' AND timestamp < COALESCE(runtime_end, timestamp) AND timestamp + "
                 "duration_ns <= runtime_end)) ");
}

// The main process's syncs (MainProcessSyncs): CudaCalls plus `syncs`.
std::string SyncRows(const Facts& f) {
  return CudaCalls(f) + ", syncs AS (SELECT * FROM calls WHERE op IN (" + OpNamesWhere(IsSync) +
         ")) ";
}

// Nearest-rank percentile of duration_ns over rows numbered `rank` of `n` (Percentile()).
std::string NearestRank(int p) {
  return Fmt("MAX(CASE WHEN rank = (%d * n + 99) / 100 THEN duration_ns END)", p);
}

namespace {

int64_t BucketSec(const Bucket& b) {
  return FloorDiv(b.start, th::kBucketNs) * (th::kBucketNs / 1'000'000'000);
}

}  // namespace

EvidenceQuery SyncBuckets(const Facts& f) {
  // Nearest-rank percentiles, as the analysis takes them: the ceil(p/100 × n)-th shortest.
  std::string note = "NULL";
  if (f.base_bucket >= 0) {
    int64_t base = BucketSec(f.buckets[f.base_bucket]);
    int64_t peak = BucketSec(f.buckets[f.peak_bucket]);
    note = base == peak ? Fmt("CASE window_sec WHEN %lld THEN 'baseline, peak' END",
                              static_cast<long long>(base))
                        : Fmt("CASE window_sec WHEN %lld THEN 'baseline' WHEN %lld THEN 'peak' END",
                              static_cast<long long>(base), static_cast<long long>(peak));
  }
  return {
      "the training process's syncs per 10 s window: count and p50/p99 latency (baseline "
      "= the window whose feeders waited least for CPU, I/O and faults; peak = highest p99 "
      "among windows with " +
          std::to_string(th::kMinSyncsPerBucket) + "+ syncs)",
      SyncRows(f) + "SELECT window_sec, COUNT(*) AS syncs, " + NearestRank(50) +
          " / 1000.0 AS p50_us, " + NearestRank(99) + " / 1000.0 AS p99_us, " + note +
          " AS note FROM (SELECT timestamp / 10000000000 * 10 AS window_sec, duration_ns, "
          "ROW_NUMBER() OVER (PARTITION BY timestamp / 10000000000 ORDER BY duration_ns) "
          "AS rank, COUNT(*) OVER (PARTITION BY timestamp / 10000000000) AS n FROM syncs) "
          "GROUP BY window_sec ORDER BY window_sec"};
}

EvidenceQuery Throughput(const Facts& f) {
  return {
      "CUDA calls per second of the training process (op_stats_seconds rollup)",
      Sql(f,
          "SELECT sec, SUM(count) AS cuda_ops FROM op_stats_seconds WHERE session = {S} AND "
          "pid = {P} AND " +
              CudaOpCondition("op") + " AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY sec")};
}

namespace {

// The peak and lowest 10 s windows of AddThroughputEffect: CUDA calls in the window's full
// seconds over the full seconds the training process was alive in it.
EvidenceQuery ThroughputPeakAndLow(const Facts& f) {
  auto one = [&](const char* label, const Bucket& b) {
    int64_t from = (b.start + 999'999'999) / 1'000'000'000;
    int64_t to = FloorDiv(b.end, 1'000'000'000);
    return Fmt(
        "SELECT '%s' AS bucket, %lld AS from_sec, %lld AS to_sec, SUM(count) AS "
        "cuda_ops, ROUND(SUM(count) / %d.0, 1) AS ops_per_s FROM op_stats_seconds WHERE "
        "session = {S} AND pid = {P} AND %s AND sec >= %lld AND sec < %lld",
        label, static_cast<long long>(from), static_cast<long long>(to), b.full_seconds,
        CudaOpCondition("op").c_str(), static_cast<long long>(from), static_cast<long long>(to));
  };
  return {
      "CUDA calls per second in the peak and the lowest 10 s window (calls in the "
      "window's full seconds / full seconds the training process was alive)",
      Sql(f, one("peak", f.buckets[f.tput_peak_bucket]) + " UNION ALL " +
                 one("lowest", f.buckets[f.tput_low_bucket]))};
}

}  // namespace

EvidenceQuery SwitchKinds(const Facts& f) {
  return {
      "off-CPU time of the training process and workers by reason (kind: 0 preempted, "
      "1 blocked, 2 I/O, 3 page fault)",
      Sql(f,
          "SELECT e.pid, e.kind, COUNT(*) AS switches, ROUND(SUM(e.duration_ns - "
          "COALESCE(e.runq_ns, 0)) / 1e9, 2) AS asleep_s, ROUND(SUM(COALESCE(e.runq_ns, 0)) "
          "/ 1e9, 2) AS runq_s FROM {EVENTS} e WHERE {e.IN_S}e.op = 'sched_switch' AND "
          "e.pid IN ({FEED}) AND e.timestamp >= {F} AND e.timestamp < {T} GROUP BY e.pid, "
          "e.kind ORDER BY e.pid, e.kind")};
}

bool IsFeeder(const Facts& f, int32_t pid) {
  return pid == f.main_pid ||
         std::find(f.worker_pids.begin(), f.worker_pids.end(), pid) != f.worker_pids.end();
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A finding's evidence: `base` first, then what its effect lines added (AddSyncEffect,
// AddThroughputEffect), each query once.
void SetEvidence(Finding* x, std::vector<EvidenceQuery> base) {
  for (EvidenceQuery& q : x->evidence) {
    bool seen = false;
    for (const EvidenceQuery& b : base) seen |= b.sql == q.sql;
    if (!seen) base.push_back(std::move(q));
  }
  x->evidence = std::move(base);
}

void AddSyncEffect(const Facts& f, Finding* out) {
  if (f.base_bucket < 0 || f.base_p99 <= 0 || f.peak_p99 < 2 * f.base_p99) return;
  double factor = static_cast<double>(f.peak_p99) / static_cast<double>(f.base_p99);
  out->effects.push_back(Fmt("%s p99 inflated %s (%s → %s), baseline = quietest 10 s window",
                             f.sync_op.c_str(), FormatFactor(factor).c_str(),
                             FormatNs(f.base_p99).c_str(), FormatNs(f.peak_p99).c_str()));
  out->metrics.push_back({"sync_p99_baseline_us", static_cast<double>(f.base_p99) / 1e3, "us"});
  out->metrics.push_back({"sync_p99_peak_us", static_cast<double>(f.peak_p99) / 1e3, "us"});
  out->metrics.push_back({"sync_p99_inflation", factor, "x"});
  out->evidence.push_back(SyncBuckets(f));
}

void AddThroughputEffect(const Facts& f, Finding* out) {
  if (f.tput_peak_bucket < 0) return;
  double peak = f.buckets[f.tput_peak_bucket].cuda_ops_per_s;
  double low = f.buckets[f.tput_low_bucket].cuda_ops_per_s;
  if (peak <= 0 || low > 0.9 * peak) return;
  out->effects.push_back(Fmt("CUDA op throughput dropped %.0f%% from peak (%s → %s ops/sec)",
                             100.0 * (1 - low / peak), FormatRate(peak).c_str(),
                             FormatRate(low).c_str()));
  out->metrics.push_back({"cuda_ops_per_s_peak", peak, "ops/s"});
  out->metrics.push_back({"cuda_ops_per_s_low", low, "ops/s"});
  out->evidence.push_back(ThroughputPeakAndLow(f));
}

// The budget line every host finding quotes: "N s of the window's GPU idle time (M s on the
// critical path)".
std::string IdleLine(const Facts& f, BudgetCause c) {
  return Fmt("%s s of GPU idle time in %s s (%s of the window), %s s on the critical path",
             FormatSeconds(BudgetLostS(f, c)).c_str(), FormatSeconds(f.budget.window_s).c_str(),
             FormatPct(Share(BudgetLostS(f, c), f.budget.window_s)).c_str(),
             FormatSeconds(BudgetPathS(f, c)).c_str());
}

std::string GpuBusyLine(const Facts& f, const std::string& note) {
  return Fmt("GPU busy for this job %s s of %s s (%s%s)",
             FormatSeconds(f.budget.gpu_busy_job_s).c_str(),
             FormatSeconds(f.budget.window_s).c_str(),
             FormatPct(Share(f.budget.gpu_busy_job_s, f.budget.window_s)).c_str(),
             note.empty() ? "" : ("; " + note).c_str());
}

EvidenceQuery MainThreadSwitches(const Facts& f) {
  return {
      "the main thread's off-CPU time by reason and who woke it (kind: 0 preempted, 1 "
      "blocked, 2 I/O, 3 page fault; waker in the same process or not)",
      Sql(f,
          "SELECT e.kind, CASE WHEN e.waker_pid = e.pid THEN 'same process' WHEN "
          "e.waker_pid = 0 THEN 'interrupt' WHEN e.waker_pid IS NULL THEN 'preempted' "
          "ELSE 'other process' END AS woken_by, COUNT(*) AS switches, "
          "ROUND(SUM(e.duration_ns) / 1e9, 3) AS off_cpu_s FROM {EVENTS} e WHERE "
          "{e.IN_S}e.op = 'sched_switch' AND e.tid = " +
              std::to_string(f.main_tid) +
              " AND e.timestamp >= {F} AND e.timestamp < {T} GROUP BY e.kind, woken_by "
              "ORDER BY off_cpu_s DESC")};
}

EvidenceQuery GpuSamples(const Facts& f) {
  return {"the GPU's utilization over the window (NVML samples)",
          Sql(f,
              "SELECT gpu, COUNT(*) AS samples, ROUND(AVG(util_pct), 1) AS util_pct, "
              "ROUND(AVG(sm_active_pct), 1) AS sm_active_pct FROM gpu_samples WHERE session = "
              "{S} AND ts >= {F} AND ts < {T} GROUP BY gpu")};
}

void AddBudgetEvidence(const Facts& f, Finding* x) {
  x->evidence.push_back(MainThreadSwitches(f));
  if (f.budget.source != "stream") x->evidence.push_back(GpuSamples(f));
}

}  // namespace rules

namespace {

using FC = FeedCause;
constexpr bool kBlames = true, kNoBlame = false, kFeeders = true, kMainOnly = false, kStory = true,
               kAlone = false;

constexpr RuleSpec kRules[] = {
    {"cpu-contention", rules::CpuContention, kBlames, FC::kRunqWait,
     "while the main thread waited for a CPU", kFeeders, kStory},
    {"dataloader-starvation", rules::DataLoaderStarvation, kBlames, FC::kWorkerCompute,
     "while the main thread waited for workers computing batches", kMainOnly, kStory},
    {"host-compute", rules::HostCompute, kBlames, FC::kRunning,
     "while the main thread computed on the CPU", kMainOnly, kStory},
    {"gil-contention", rules::GilContention, kBlames, FC::kThreadHold,
     "while another thread of the process held the GIL", kMainOnly, kStory},
    {"lock-contention", rules::LockContention, kBlames, FC::kThreadHold,
     "while another thread of the process held the main thread", kMainOnly, kStory},
    {"cpu-oversubscription", rules::CpuOversubscription, kBlames, FC::kRunqWait,
     "while the main thread waited for a CPU", kFeeders, kStory},
    {"cpu-quota", rules::CpuQuota, kBlames, FC::kRunqWait,
     "while the job's cgroup was throttled by its CPU quota", kFeeders, kStory},
    {"main-thread-io", rules::ProcessIo, kBlames, FC::kBlockedIo,
     "while the main thread waited for its own I/O", kMainOnly, kStory},
    {"io-bottleneck", rules::IoBottleneck, kBlames, FC::kBlockedIo,
     "while the main thread waited for I/O", kFeeders, kStory},
    {"host-sleep", rules::HostSleep, kBlames, FC::kBlockedOther,
     "while the main thread slept until a timer or an interrupt", kMainOnly, kStory},
    {"waits-for-program", rules::OtherProgram, kBlames, FC::kBlockedOther,
     "while the main thread waited for another program", kMainOnly, kStory},
    {"loader-waits", rules::LoaderWaits, kBlames, FC::kBlockedOther,
     "while the main thread waited for workers asleep on the network or a timer", kMainOnly,
     kStory},
    {"memory-pressure", rules::MemoryPressure, kBlames, FC::kPageFault,
     "while the main thread waited on page faults", kFeeders, kStory},
    {"memory-limit", rules::MemoryLimitHit, kNoBlame, FC::kPageFault, "", kMainOnly, kAlone},
    {"memcpy-bottleneck", rules::MemcpyBottleneck, kBlames, FC::kMemcpy,
     "while the main thread was in host copies", kMainOnly, kAlone},
    {"sync-heavy", rules::SyncHeavy, kNoBlame, FC::kSync, "", kMainOnly, kAlone},
    {"launch-bound", rules::LaunchBound, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    // Also emits "malloc-churn".
    {"allocator-spikes", rules::AllocatorSpikes, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    {"graph-recapture", rules::GraphRecapture, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    {"cold-start", rules::ColdStart, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    {"gpu-sharing", rules::GpuSharing, kNoBlame, FC::kSync, "", kMainOnly, kAlone},
    {"oom-kill", rules::OomKills, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    {"alloc-failure", rules::AllocFailures, kNoBlame, FC::kRunning, "", kMainOnly, kAlone},
    {"collective-straggler", rules::CollectiveStraggler, kNoBlame, FC::kSync, "", kMainOnly,
     kAlone},
};

}  // namespace

const RuleSpec* RulesBegin() { return std::begin(kRules); }
const RuleSpec* RulesEnd() { return std::end(kRules); }

const RuleSpec* RuleById(const std::string& id) {
  for (const RuleSpec& r : kRules) {
    if (id == r.id) return &r;
  }
  return nullptr;
}

void RunRules(const Facts& f, std::vector<Finding>* out) {
  if (f.main_pid == 0) return;
  for (const RuleSpec& r : kRules) r.run(f, out);
}

}  // namespace gw
