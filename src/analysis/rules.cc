// The findings. Each rule reads Facts (facts.cc) and appends findings with numbers, evidence
// SQL and concrete fixes. Thresholds live in thresholds.h; docs/detections.md documents both.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "analysis/facts.h"
#include "analysis/format.h"
#include "analysis/thresholds.h"
#include "store/ops.h"

namespace gw {

namespace {

namespace th = thresholds;

double Sec(double ns) { return ns / 1e9; }
double Sec(int64_t ns) { return static_cast<double>(ns) / 1e9; }
double Share(double part, double whole) { return whole > 0 ? part / whole : 0.0; }
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

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

Severity Max(Severity a, Severity b) { return static_cast<int>(a) > static_cast<int>(b) ? a : b; }

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
std::string OpNamesWhere(bool (*pred)(Op)) {
  size_t n = 0;
  const OpInfo* ops = AllOps(&n);
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    if (!pred(ops[i].op)) continue;
    if (!out.empty()) out += ", ";
    out += "'" + std::string(ops[i].name) + "'";
  }
  return out;
}

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

EvidenceQuery SwitchesByProcess(const Facts& f) {
  return {"context switches, run-queue wait and blocked time per process",
          Sql(f,
              "SELECT p.name AS process, e.pid, COUNT(*) AS switches, "
              "ROUND(SUM(e.duration_ns) / 1e9, 2) AS off_cpu_s, "
              "ROUND(SUM(COALESCE(e.runq_ns, 0)) / 1e9, 2) AS runq_s, "
              "ROUND(SUM(e.duration_ns - COALESCE(e.runq_ns, 0)) / 1e9, 2) AS blocked_s, "
              "ROUND(MAX(e.duration_ns) / 1e6, 1) AS worst_stall_ms FROM {EVENTS} e "
              "LEFT JOIN processes p ON p.session = e.session AND p.pid = e.pid "
              "WHERE {e.IN_S}e.op = 'sched_switch' AND e.timestamp >= {F} AND e.timestamp < "
              "{T} GROUP BY e.pid ORDER BY runq_s DESC LIMIT 15")};
}

EvidenceQuery RunqHolders(const Facts& f) {
  return {"who held the CPU while the training process and its workers waited to run",
          Sql(f,
              "SELECT COALESCE(p.name, 'pid ' || e.other_pid) AS held_cpu, e.other_pid, "
              "COUNT(*) AS waits, ROUND(SUM(e.runq_ns) / 1e9, 2) AS runq_s FROM {EVENTS} e "
              "LEFT JOIN processes p ON p.session = e.session AND p.pid = e.other_pid "
              "WHERE {e.IN_S}e.op = 'sched_switch' AND e.pid IN ({FEED}) AND e.timestamp >= "
              "{F} AND e.timestamp < {T} AND e.runq_ns > 0 GROUP BY e.other_pid ORDER BY "
              "runq_s DESC")};
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

int64_t BucketSec(const Bucket& b) {
  return FloorDiv(b.start, th::kBucketNs) * (th::kBucketNs / 1'000'000'000);
}

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

EvidenceQuery SlowSyncs(const Facts& f) {
  return {Fmt("slow syncs of the training process: at least %s (%.0fx the baseline p50, at "
              "least %s)",
              FormatNs(f.slow.threshold_ns).c_str(), th::kSlowSyncFactor,
              FormatNs(th::kSlowSyncFloorNs).c_str()),
          SyncRows(f) +
              "SELECT COUNT(*) AS slow_syncs, ROUND(SUM(duration_ns) / 1e9, 3) AS "
              "seconds FROM syncs WHERE duration_ns >= " +
              std::to_string(f.slow.threshold_ns)};
}

EvidenceQuery Throughput(const Facts& f) {
  return {
      "CUDA calls per second of the training process (op_stats_seconds rollup)",
      Sql(f,
          "SELECT sec, SUM(count) AS cuda_ops FROM op_stats_seconds WHERE session = {S} AND "
          "pid = {P} AND " +
              CudaOpCondition("op") + " AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY sec")};
}

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

std::string CoreRange(int64_t first, int64_t last) {
  if (first >= last) return std::to_string(first);
  return std::to_string(first) + "-" + std::to_string(last);
}

// Cores for the training process and its workers: one per feeding process, at most half the
// machine (at least one), leaving the rest for everything else.
int64_t TrainingCores(const Facts& f) {
  int64_t cores = std::max<int64_t>(1, f.cores);
  int64_t want = 1 + static_cast<int64_t>(f.worker_pids.size());
  return std::clamp<int64_t>(want, 1, std::max<int64_t>(1, cores / 2));
}

// The job's processes as a shell word list: pids only, never a traced process's own text
// (a command line or name is untrusted input and must not be pasted into a command).
std::string FeederPids(const Facts& f) {
  std::string s = std::to_string(f.main_pid);
  for (int32_t pid : f.worker_pids) s += " " + std::to_string(pid);
  return s;
}

bool IsFeeder(const Facts& f, int32_t pid) {
  return pid == f.main_pid ||
         std::find(f.worker_pids.begin(), f.worker_pids.end(), pid) != f.worker_pids.end();
}

std::string Plural(int64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// Workers that started after the training process had been running a while (not the first
// spawn), or exited inside the window: DataLoader worker respawns at epoch boundaries.
int64_t WorkerRespawns(const Facts& f) {
  int64_t main_start = f.w->session_first_ts;
  if (auto m = f.w->processes.find(f.main_pid);
      m != f.w->processes.end() && m->second.first_ts != kNull) {
    main_start = m->second.first_ts;
  }
  int64_t n = 0;
  for (int32_t pid : f.worker_pids) {
    auto it = f.w->processes.find(pid);
    if (it == f.w->processes.end()) continue;
    const ProcessRecord& p = it->second;
    bool late_start = p.first_ts != kNull && p.first_ts > f.w->from &&
                      p.first_ts > main_start + th::kWorkerRespawnAfterNs;
    bool exited = p.exit_ts != kNull && p.exit_ts >= f.w->from && p.exit_ts < f.w->to;
    if (late_start || exited) ++n;
  }
  return n;
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

std::string HolderList(const Facts& f, const std::vector<Competitor>& list, size_t max) {
  std::string s;
  for (size_t i = 0; i < list.size() && i < max; ++i) {
    if (!s.empty()) s += ", ";
    s += ProcessLabel(*f.w, list[i].pid) + " " + FormatSeconds(Sec(list[i].ns)) + " s";
  }
  return s;
}

// ---------------------------------------------------------------------------------------------

void CpuContention(const Facts& f, std::vector<Finding>* out) {
  double share = Share(f.lost_contention, static_cast<double>(f.window_ns));
  std::optional<Severity> sev = Ladder(share);
  if (!sev) return;
  int64_t feed_ns = f.train_thread_ns + f.worker_thread_ns;
  double feed_runq = static_cast<double>(At(f.train_totals, FeedCause::kRunqWait) +
                                         At(f.worker_totals, FeedCause::kRunqWait));
  if (Share(feed_runq, static_cast<double>(feed_ns)) < th::kContentionRunqShareMin) {
    sev = Severity::kLow;
  }
  Finding x;
  x.rule = "cpu-contention";
  x.severity = *sev;
  x.cause = "CPU scheduling contention";
  x.effect = "CUDA throughput drop";
  x.lost_s = Sec(f.lost_contention);
  auto sw = f.switches.find(f.main_pid);
  int64_t main_switches = sw == f.switches.end() ? 0 : sw->second.count;
  int64_t worker_switches = 0;
  for (int32_t pid : f.worker_pids) {
    if (auto it = f.switches.find(pid); it != f.switches.end()) worker_switches += it->second.count;
  }
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  x.root.push_back(Fmt("%s context switches on training process (PID %d)%s",
                       FormatCount(main_switches).c_str(), f.main_pid,
                       workers == 0 ? ""
                                    : Fmt(", %s on its %s", FormatCount(worker_switches).c_str(),
                                          Plural(workers, "DataLoader worker", "DataLoader workers")
                                              .c_str())
                                          .c_str()));
  const CauseTimes& m = f.main_totals;
  int64_t runq = At(m, FeedCause::kRunqWait);
  int64_t off = runq + At(m, FeedCause::kBlockedIo) + At(m, FeedCause::kPageFault) +
                At(m, FeedCause::kBlockedOther);
  x.root.push_back(
      Fmt("Main thread off-CPU %s of %s seconds (%s of wall clock): %s s runnable "
          "but waiting for a CPU",
          FormatSeconds(Sec(off)).c_str(), FormatSeconds(f.window_s).c_str(),
          FormatPct(Share(Sec(off), f.window_s)).c_str(), FormatSeconds(Sec(runq)).c_str()));
  double through_others = f.lost_contention - static_cast<double>(runq);
  if (Sec(through_others) >= 0.05) {
    x.root.push_back(Fmt("Main thread waited %s s more for helper threads and workers that were "
                         "themselves waiting for a CPU",
                         FormatSeconds(Sec(through_others)).c_str()));
  }
  int64_t wrunq = At(f.worker_totals, FeedCause::kRunqWait);
  if (workers > 0) {
    x.root.push_back(
        Fmt("DataLoader workers waited %s s for a CPU (%s of their time)",
            FormatSeconds(Sec(wrunq)).c_str(),
            FormatPct(Share(static_cast<double>(wrunq), static_cast<double>(f.worker_thread_ns)))
                .c_str()));
  }
  AddSyncEffect(f, &x);
  AddThroughputEffect(f, &x);
  if (f.slow.count > 0 && f.slow.total_ns >= 50'000'000) {
    int64_t sr = At(f.slow.thread, FeedCause::kRunqWait);
    x.effects.push_back(Fmt(
        "%s slow syncs (> %s) lasted %s s; the syncing thread waited for a "
        "CPU %s of that time",
        FormatCount(f.slow.count).c_str(), FormatNs(f.slow.threshold_ns).c_str(),
        FormatSeconds(Sec(f.slow.total_ns)).c_str(),
        FormatPct(Share(static_cast<double>(sr), static_cast<double>(f.slow.total_ns))).c_str()));
    x.metrics.push_back({"slow_syncs", static_cast<double>(f.slow.count), "count"});
    x.metrics.push_back({"slow_sync_s", Sec(f.slow.total_ns), "s"});
    x.evidence.push_back(SlowSyncs(f));
  }
  if (f.waits.total_ns >= 50'000'000 && workers > 0) {
    int64_t wt = 0;
    for (int64_t v : f.waits.delivered) wt += v;
    x.effects.push_back(
        Fmt("Main thread waited %s s for batches; meanwhile the delivering workers were "
            "runnable-but-waiting %s of the time",
            FormatSeconds(Sec(f.waits.total_ns)).c_str(),
            FormatPct(Share(static_cast<double>(At(f.waits.delivered, FeedCause::kRunqWait)),
                            static_cast<double>(wt)))
                .c_str()));
  }
  const std::vector<Competitor>& competitors = f.competitors;
  int64_t children = 0;
  for (const Competitor& c : competitors) children += c.child ? 1 : 0;
  int64_t background = static_cast<int64_t>(competitors.size()) - children;
  std::string who = Plural(workers, "DataLoader worker", "DataLoader workers");
  if (children > 0) who += " + " + Plural(children, "program the job started", "programs the job started");
  who += " + " + Plural(background, "background process", "background processes");
  x.contributing.push_back(
      Fmt("%s competing for %s", who.c_str(), Plural(f.cores, "core", "cores").c_str()));
  if (!competitors.empty()) {
    x.contributing.push_back("CPU held while feeders waited: " + HolderList(f, competitors, 4));
  }
  int64_t k = TrainingCores(f);
  x.fix.push_back(Fmt("pin the job to dedicated cores: for p in %s; do taskset -apc %s $p; done",
                      FeederPids(f).c_str(), CoreRange(0, k - 1).c_str()));
  if (!competitors.empty()) {
    std::string pids;
    for (size_t i = 0; i < competitors.size() && i < 4; ++i) {
      pids += " " + std::to_string(competitors[i].pid);
    }
    x.fix.push_back("lower the competitors' priority: renice -n 19 -p" + pids);
    if (k < f.cores) {
      x.fix.push_back(
          Fmt("or move them off the training cores: for p in%s; do taskset -apc %s "
              "$p; done (or a cgroup: systemd-run --scope -p CPUWeight=10 ...)",
              pids.c_str(), CoreRange(k, f.cores - 1).c_str()));
    }
    if (children > 0) {
      x.fix.push_back("the job's own helper programs compete too: start them with nice -n 19, "
                      "or on cores outside the training set");
    }
  }
  if (std::optional<int64_t> n = RecommendedWorkers(f); n && *n < workers) {
    x.fix.push_back(Fmt("size the DataLoader to the machine: num_workers=%lld (%s)",
                        static_cast<long long>(*n), Plural(f.cores, "core", "cores").c_str()));
  }
  if (WorkerRespawns(f) > 0) {
    x.fix.push_back(
        "set DataLoader persistent_workers=True (workers were respawned in this "
        "window)");
  }
  x.metrics.push_back({"main_context_switches", static_cast<double>(main_switches), "count"});
  x.metrics.push_back({"main_runq_s", Sec(runq), "s"});
  x.metrics.push_back({"main_off_cpu_s", Sec(off), "s"});
  x.metrics.push_back({"workers_runq_s", Sec(wrunq), "s"});
  x.metrics.push_back({"competitors", static_cast<double>(competitors.size()), "count"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(&x, {SwitchesByProcess(f), RunqHolders(f), SyncBuckets(f), Throughput(f)});
  out->push_back(std::move(x));
}

void DataLoaderStarvation(const Facts& f, std::vector<Finding>* out) {
  if (f.worker_pids.empty() || f.waits.total_ns == 0) return;
  double share = Share(f.lost_starvation, static_cast<double>(f.window_ns));
  std::optional<Severity> sev = Ladder(share);
  if (!sev) return;
  int64_t wt = 0;
  for (int64_t v : f.waits.delivered) wt += v;
  const CauseTimes& d = f.waits.delivered;
  double busy = Share(static_cast<double>(At(d, FeedCause::kRunning)), static_cast<double>(wt));
  // Waits the workers spent waiting for a CPU, on I/O or in page faults belong to those
  // findings; this one is about workers that compute too slowly.
  if (busy < th::kStarvationWorkerBusyShare) return;
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  Finding x;
  x.rule = "dataloader-starvation";
  x.severity = *sev;
  x.cause = "DataLoader starvation";
  x.effect = "GPU idle between steps";
  x.lost_s = Sec(f.lost_starvation);
  x.root.push_back(
      Fmt("Main thread waited for batches %s times, %s s in all (%s of wall clock), "
          "p99 wait %s",
          FormatCount(f.waits.count).c_str(), FormatSeconds(Sec(f.waits.total_ns)).c_str(),
          FormatPct(Share(Sec(f.waits.total_ns), f.window_s)).c_str(),
          FormatNs(Percentile(f.waits.durations, 99)).c_str()));
  x.root.push_back(Fmt(
      "During those waits the worker that delivered the batch was computing %s of the time "
      "(waiting for a CPU %s, on I/O %s): the workers are too slow%s",
      FormatPct(busy).c_str(),
      FormatPct(Share(static_cast<double>(At(d, FeedCause::kRunqWait)), static_cast<double>(wt)))
          .c_str(),
      FormatPct(Share(static_cast<double>(At(d, FeedCause::kBlockedIo)), static_cast<double>(wt)))
          .c_str(),
      workers < f.cores - 1 ? " or too few" : ""));
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  x.contributing.push_back(Fmt("%s on %s", Plural(workers, "DataLoader worker", "DataLoader workers").c_str(),
                               Plural(f.cores, "core", "cores").c_str()));
  if (std::optional<int64_t> n = RecommendedWorkers(f); n && *n > workers) {
    x.fix.push_back(
        Fmt("add workers: DataLoader(num_workers=%lld) (%s; keep 2 for the training loop and "
            "the OS)",
            static_cast<long long>(*n), Plural(f.cores, "core", "cores").c_str()));
  }
  x.fix.push_back(
      "queue more batches ahead: DataLoader(prefetch_factor=4, persistent_workers=True)");
  x.fix.push_back(
      "move heavy augmentation to the GPU (torchvision.transforms.v2 on CUDA tensors, "
      "DALI) or precompute it offline");
  x.fix.push_back("if one worker is slower than the rest, look for uneven samples (sizes, "
                  "decode cost) in the dataset's __getitem__");
  x.metrics.push_back({"batch_wait_s", Sec(f.waits.total_ns), "s"});
  x.metrics.push_back({"batch_waits", static_cast<double>(f.waits.count), "count"});
  x.metrics.push_back({"workers_busy_share", busy * 100, "%"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(&x, {SwitchKinds(f), Throughput(f)});
  out->push_back(std::move(x));
}

void IoBottleneck(const Facts& f, std::vector<Finding>* out) {
  double share = Share(f.lost_io, static_cast<double>(f.window_ns));
  std::optional<Severity> sev = Ladder(share);
  if (!sev) return;
  std::vector<int64_t> lat;
  std::vector<int64_t> base_lat;
  double bytes = 0;
  int64_t reads = 0;
  std::vector<int64_t> read_ns;
  int64_t base_end = f.base_bucket >= 0 ? f.buckets[f.base_bucket].end : f.w->from;
  int64_t base_start = f.base_bucket >= 0 ? f.buckets[f.base_bucket].start : f.w->from;
  for (const RawEvent& e : f.events) {
    if (!IsFeeder(f, e.pid)) continue;
    if (e.op == Op::kBlockIo) {
      lat.push_back(e.duration);
      if (e.ts >= base_start && e.ts < base_end) base_lat.push_back(e.duration);
      if (e.bytes != kNull) bytes += static_cast<double>(e.bytes);
    } else if (e.op == Op::kRead) {
      ++reads;
      read_ns.push_back(e.duration);
    }
  }
  Finding x;
  x.rule = "io-bottleneck";
  x.severity = *sev;
  x.cause = "I/O bottleneck in the data path";
  x.effect = "GPU starved of batches";
  x.lost_s = Sec(f.lost_io);
  int64_t wio = At(f.worker_totals, FeedCause::kBlockedIo);
  int64_t mio = At(f.main_totals, FeedCause::kBlockedIo);
  if (!f.worker_pids.empty()) {
    x.root.push_back(
        Fmt("DataLoader workers blocked on I/O %s s (%s of their time)",
            FormatSeconds(Sec(wio)).c_str(),
            FormatPct(Share(static_cast<double>(wio), static_cast<double>(f.worker_thread_ns)))
                .c_str()));
  }
  if (mio > 0) {
    x.root.push_back(Fmt("Main thread blocked on I/O %s s", FormatSeconds(Sec(mio)).c_str()));
  }
  if (!lat.empty()) {
    int64_t p99 = Percentile(lat, 99);
    int64_t base = Percentile(base_lat.empty() ? lat : base_lat, 50);
    x.root.push_back(Fmt("%s block I/O requests (%s), latency p50 %s, p99 %s (baseline p50 %s)",
                         FormatCount(static_cast<int64_t>(lat.size())).c_str(),
                         FormatBytes(bytes).c_str(), FormatNs(Percentile(lat, 50)).c_str(),
                         FormatNs(p99).c_str(), FormatNs(base).c_str()));
    x.metrics.push_back({"block_io_p99_ms", static_cast<double>(p99) / 1e6, "ms"});
    x.metrics.push_back({"block_io_baseline_p50_ms", static_cast<double>(base) / 1e6, "ms"});
  }
  if (reads > 0) {
    x.root.push_back(Fmt("%s read() calls in the feeders, p99 %s", FormatCount(reads).c_str(),
                         FormatNs(Percentile(read_ns, 99)).c_str()));
  }
  if (f.waits.total_ns > 0) {
    x.effects.push_back(
        Fmt("Main thread waited %s s for batches; %s s of it is attributed to "
            "workers blocked on I/O",
            FormatSeconds(Sec(f.waits.total_ns)).c_str(),
            FormatSeconds(Sec(f.lost_io - static_cast<double>(mio))).c_str()));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  x.fix.push_back(
      "pre-cache the dataset in RAM: copy it to tmpfs (cp -r DATASET /dev/shm/) or "
      "warm the page cache (vmtouch -t DATASET)");
  x.fix.push_back("overlap reads with compute: DataLoader(prefetch_factor=4, "
                  "persistent_workers=True), and more workers only while cores are idle");
  x.fix.push_back("pack small files into large shards (WebDataset/TFRecord) to read sequentially");
  x.metrics.push_back({"workers_io_s", Sec(wio), "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  std::string io = "'" + std::string(OpName(Op::kBlockIo)) + "'";
  EvidenceQuery feeder_io = {
      "the feeders' block I/O and slow read() calls: count, bytes, p50/p99 latency (and block "
      "I/O in the baseline 10 s window)",
      Sql(f,
          "WITH io AS (SELECT op, timestamp, duration_ns, bytes FROM {EVENTS} WHERE {IN_S}pid IN "
          "({FEED}) AND op IN (" +
              io + ", '" + std::string(OpName(Op::kRead)) +
              "') AND timestamp >= {F} AND timestamp < {T}), grouped AS (SELECT op AS rows, "
              "duration_ns, bytes FROM io UNION ALL SELECT '" +
              std::string(OpName(Op::kBlockIo)) +
              ", baseline window', duration_ns, bytes FROM io WHERE op = " + io +
              " AND timestamp >= " + std::to_string(base_start) + " AND timestamp < " +
              std::to_string(base_end) +
              ") SELECT rows, COUNT(*) AS requests, SUM(bytes) AS bytes, " + NearestRank(50) +
              " / 1e6 AS p50_ms, " + NearestRank(99) +
              " / 1e6 AS p99_ms FROM (SELECT rows, duration_ns, bytes, ROW_NUMBER() OVER "
              "(PARTITION BY rows ORDER BY duration_ns) AS rank, COUNT(*) OVER (PARTITION BY "
              "rows) AS n FROM grouped) GROUP BY rows ORDER BY rows")};
  SetEvidence(
      &x, {SwitchKinds(f),
           feeder_io,
           {"block I/O latency per 10 s window",
            Sql(f,
                "SELECT (timestamp / 10000000000) * 10 AS window_sec, COUNT(*) AS requests, "
                "ROUND(AVG(duration_ns) / 1e6, 2) AS avg_ms, ROUND(MAX(duration_ns) / 1e6, 2) AS "
                "max_ms, SUM(bytes) / 1000000 AS mb FROM {EVENTS} WHERE {IN_S}op = '" +
                    std::string(OpName(Op::kBlockIo)) +
                    "' AND timestamp >= {F} AND timestamp < {T} GROUP BY window_sec ORDER BY "
                    "window_sec")}});
  out->push_back(std::move(x));
}

void MemoryPressure(const Facts& f, std::vector<Finding>* out) {
  int64_t major = 0, reclaim_n = 0, reclaim_ns = 0;
  for (const RawEvent& e : f.events) {
    if (!IsFeeder(f, e.pid)) continue;
    if (e.op == Op::kMajorFault) ++major;
    if (e.op == Op::kDirectReclaim) {
      ++reclaim_n;
      reclaim_ns += e.duration;
    }
  }
  int64_t swap_max = 0;
  double mem_max = 0;
  for (const SystemSnapshot& s : f.w->snapshots) {
    swap_max = std::max(swap_max, s.swap_used_bytes);
    mem_max = std::max(mem_max, s.mem_pct);
  }
  double share = Share(f.lost_memory, static_cast<double>(f.window_ns));
  std::optional<Severity> sev = Ladder(share);
  double faults_per_s = static_cast<double>(major) / std::max(1.0, f.window_s);
  bool pressure = swap_max >= th::kSwapUsedBytesMin || faults_per_s >= th::kMajorFaultsPerSecMin ||
                  reclaim_n > 0;
  if (!sev || !pressure) return;
  Finding x;
  x.rule = "memory-pressure";
  x.severity = *sev;
  x.cause = "Host memory pressure";
  x.effect = "feeders stalled in page faults";
  x.lost_s = Sec(f.lost_memory);
  int64_t wf = At(f.worker_totals, FeedCause::kPageFault);
  int64_t mf = At(f.main_totals, FeedCause::kPageFault);
  x.root.push_back(Fmt("%s major page faults in the training process and workers (%.0f/s)",
                       FormatCount(major).c_str(), faults_per_s));
  x.root.push_back(Fmt("Stalled in page faults and reclaim: main thread %s s, workers %s s",
                       FormatSeconds(Sec(mf)).c_str(), FormatSeconds(Sec(wf)).c_str()));
  if (reclaim_n > 0) {
    x.root.push_back(Fmt("%s direct reclaims, %s s", FormatCount(reclaim_n).c_str(),
                         FormatSeconds(Sec(reclaim_ns)).c_str()));
  }
  if (swap_max > 0 || mem_max > 0) {
    x.root.push_back(Fmt("Memory up to %.1f%% used, swap up to %s", mem_max,
                         FormatBytes(static_cast<double>(swap_max)).c_str()));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  // The biggest memory users are not known from events; name untracked CPU holders instead.
  x.fix.push_back(
      "free host memory for the job: stop or cap other jobs (systemd-run --scope -p "
      "MemoryMax=8G CMD), or move them to another machine");
  x.fix.push_back(
      "fewer copies of the dataset: a memory-mapped or shared-memory dataset instead of "
      "per-worker lists (each DataLoader worker holds its own copy of Python objects)");
  if (swap_max > 0) {
    x.fix.push_back(
        "keep the job out of swap: sysctl vm.swappiness=10, or MemorySwapMax=0 on "
        "its cgroup");
  }
  x.metrics.push_back({"major_faults", static_cast<double>(major), "count"});
  x.metrics.push_back({"swap_max_bytes", static_cast<double>(swap_max), "bytes"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(
      &x, {{"major page faults and direct reclaim of the training process and its workers",
            Sql(f, "SELECT COUNT(CASE WHEN op = '" + std::string(OpName(Op::kMajorFault)) +
                       "' THEN 1 END) AS major_faults, COUNT(CASE WHEN op = '" +
                       std::string(OpName(Op::kDirectReclaim)) +
                       "' THEN 1 END) AS direct_reclaims, ROUND(COALESCE(SUM(CASE WHEN op = '" +
                       std::string(OpName(Op::kDirectReclaim)) +
                       "' THEN duration_ns END), 0) / 1e9, 3) AS reclaim_s FROM {EVENTS} WHERE "
                       "{IN_S}pid IN ({FEED}) AND timestamp >= {F} AND timestamp < {T}")},
           {"page faults and reclaim per process",
            Sql(f,
                "SELECT pid, op, COUNT(*) AS events, ROUND(SUM(duration_ns) / 1e9, 3) AS seconds "
                "FROM {EVENTS} WHERE {IN_S}op IN (" +
                    OpNames({Op::kPageFault, Op::kMajorFault, Op::kDirectReclaim}) +
                    ") AND timestamp >= {F} AND timestamp < {T} GROUP BY pid, op ORDER BY seconds "
                    "DESC")},
           {"memory, swap and major faults per second (1 Hz snapshots)",
            Sql(f,
                "SELECT ts / 1000000000 AS sec, mem_pct, swap_used_bytes / 1048576 AS swap_mb, "
                "major_faults_per_s FROM system_snapshots WHERE session = {S} AND ts >= {F} AND ts "
                "< {T} ORDER BY ts")},
           SwitchKinds(f)});
  out->push_back(std::move(x));
}

void MemcpyBottleneck(const Facts& f, std::vector<Finding>* out) {
  int64_t n = 0, ns = 0;
  double bytes = 0, pageable_bytes = 0, pageable_ns = 0, pinned_bytes = 0, pinned_ns = 0;
  for (const RawEvent& e : f.events) {
    // The main thread's host↔device copies: what its memcpy time was spent on.
    if (e.tid != f.main_tid || !IsMemcpy(e.op)) continue;
    bool pinned = e.kind != kNull && (e.kind & kCopyPinnedHost) != 0;
    int64_t dir = e.kind == kNull ? 4 : (e.kind & ~kCopyPinnedHost);
    if (dir == static_cast<int64_t>(CopyKind::kDeviceToDevice)) continue;
    ++n;
    ns += e.duration;
    double b = e.bytes == kNull ? 0 : static_cast<double>(e.bytes);
    bytes += b;
    if (pinned) {
      pinned_bytes += b;
      pinned_ns += static_cast<double>(e.duration);
    } else {
      pageable_bytes += b;
      pageable_ns += static_cast<double>(e.duration);
    }
  }
  // The main thread's own copies, plus copies of the helper threads it waited for.
  int64_t main_memcpy = At(f.path, FeedCause::kMemcpy);
  double share = Share(static_cast<double>(main_memcpy), static_cast<double>(f.window_ns));
  std::optional<Severity> graded =
      Ladder(share, th::kMemcpyHighShare, th::kMemcpyMediumShare, th::kMemcpyLowShare);
  if (!graded) return;
  Severity sev = *graded;
  double pageable_share = Share(pageable_bytes, pageable_bytes + pinned_bytes);
  Finding x;
  x.rule = "memcpy-bottleneck";
  x.severity = sev;
  x.cause = pageable_share >= th::kPageableBytesShareMin ? "Pageable host-to-device copies"
                                                         : "Host-device copies";
  x.effect = "GPU waiting on data transfer";
  x.lost_s = Sec(main_memcpy);
  x.root.push_back(
      Fmt("%s host-device cudaMemcpy* calls took %s s of %s s on the main thread (%s of wall "
          "clock), %s moved",
          FormatCount(n).c_str(), FormatSeconds(Sec(main_memcpy)).c_str(),
          FormatSeconds(f.window_s).c_str(), FormatPct(share).c_str(), FormatBytes(bytes).c_str()));
  if (pageable_bytes > 0) {
    std::string pinned_bw =
        pinned_ns > 0 ? Fmt(" vs pinned %.1f GB/s", pinned_bytes / pinned_ns) : std::string();
    x.root.push_back(Fmt("%s of host bytes copied from pageable memory at %.1f GB/s%s",
                         FormatPct(pageable_share).c_str(),
                         pageable_ns > 0 ? pageable_bytes / pageable_ns : 0.0, pinned_bw.c_str()));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  if (pageable_share >= th::kPageableBytesShareMin) {
    x.fix.push_back(
        "use page-locked buffers: DataLoader(pin_memory=True) and "
        "tensor.to('cuda', non_blocking=True)");
  }
  x.fix.push_back(
      "overlap copies with compute: issue them on a side stream "
      "(torch.cuda.Stream) one batch ahead");
  x.fix.push_back("move less: send uint8/fp16 tensors and convert/normalize on the GPU");
  x.metrics.push_back({"memcpy_s", Sec(main_memcpy), "s"});
  x.metrics.push_back({"memcpy_share", share * 100, "%"});
  x.metrics.push_back({"pageable_bytes_share", pageable_share * 100, "%"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(
      &x,
      {{"the main thread's host-device copies (device-to-device left out) from pageable and "
        "pinned host memory",
        CudaCalls(f) + "SELECT CASE WHEN kind & " + std::to_string(kCopyPinnedHost) +
            " THEN 'pinned' ELSE 'pageable' END AS host_memory, COUNT(*) AS copies, SUM(bytes) "
            "AS bytes, ROUND(100.0 * SUM(bytes) / SUM(SUM(bytes)) OVER (), 1) AS bytes_pct, "
            "ROUND(SUM(bytes) * 1.0 / SUM(duration_ns), 1) AS gb_per_s FROM calls WHERE tid = " +
            std::to_string(f.main_tid) + " AND op IN (" + OpNamesWhere(IsMemcpy) +
            ") AND COALESCE(kind & ~" + std::to_string(kCopyPinnedHost) + ", " +
            std::to_string(static_cast<int64_t>(CopyKind::kDefault)) +
            ") != " + std::to_string(static_cast<int64_t>(CopyKind::kDeviceToDevice)) +
            " GROUP BY host_memory"},
       {"copies by op and kind (kind & 16 = pinned host memory; 1 HtoD, 2 DtoH)",
        Sql(f,
            "SELECT op, kind, COUNT(*) AS copies, SUM(bytes) / 1000000 AS mb, "
            "ROUND(SUM(duration_ns) / 1e9, 2) AS seconds, ROUND(SUM(bytes) * 1.0 / "
            "SUM(duration_ns), 2) AS gb_per_s FROM {EVENTS} WHERE {IN_S}pid = {P} AND op IN (" +
                OpNamesWhere(IsMemcpy) +
                ") AND timestamp >= {F} AND timestamp < {T} GROUP BY op, kind ORDER BY seconds "
                "DESC")}});
  out->push_back(std::move(x));
}

// Per-second launch and sync counts of the main process (op_seconds).
void LaunchAndSyncRates(const Facts& f, double* launches_per_s, double* syncs_per_s,
                        double* launch_ns_per_s) {
  int64_t launches = 0, syncs = 0;
  double launch_ns = 0;
  int64_t launch_rows_ns = 0, launch_rows = 0;
  for (const RawEvent& e : f.w->launch_samples) {
    if (e.pid != f.main_pid) continue;
    launch_rows_ns += e.duration;
    ++launch_rows;
  }
  double mean = launch_rows > 0 ? static_cast<double>(launch_rows_ns) / launch_rows : 0;
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid) continue;
    if (IsLaunch(r.op)) {
      // Older recordings counted a nested driver launch again: there, runtime launches only.
      if (f.w->launches_once || OpLayer(r.op) == Layer::kCudaRuntime) {
        launches += r.count;
        launch_ns +=
            r.total_ns > 0 ? static_cast<double>(r.total_ns) : mean * static_cast<double>(r.count);
      }
    }
    if (IsSync(r.op)) syncs += r.count;
  }
  if (launches > 0 && launch_rows > 0) {
    // Counted-only launches carry no time: scale the sampled mean to every call.
    launch_ns = std::max(launch_ns, mean * static_cast<double>(launches));
  }
  double s = std::max(1.0, f.window_s);
  *launches_per_s = static_cast<double>(launches) / s;
  *syncs_per_s = static_cast<double>(syncs) / s;
  *launch_ns_per_s = launch_ns / s;
}

bool IsRuntimeLaunch(Op op) { return IsLaunch(op) && OpLayer(op) == Layer::kCudaRuntime; }

// LaunchAndSyncRates in SQL: the main process's syncs and launches in the window's seconds
// over the seconds it was alive in the window (at least 1).
EvidenceQuery LaunchAndSyncRatesQuery(const Facts& f) {
  std::string syncs = "op IN (" + OpNamesWhere(IsSync) + ")";
  std::string launches =
      "op IN (" + OpNamesWhere(f.w->launches_once ? IsLaunch : IsRuntimeLaunch) + ")";
  std::string seconds = Fmt("%.9f", std::max(1.0, f.window_s));
  return {f.w->launches_once
              ? "syncs and kernel launches of the training process, per second it ran"
              : "syncs and kernel launches of the training process, per second it ran (this "
                "recording counted nested driver launches again: runtime launches only)",
          Sql(f, "SELECT SUM(CASE WHEN " + syncs +
                     " THEN count ELSE 0 END) AS syncs, SUM(CASE "
                     "WHEN " +
                     launches + " THEN count ELSE 0 END) AS launches, ROUND(SUM(CASE WHEN " +
                     syncs + " THEN count ELSE 0 END) / " + seconds +
                     ", 1) AS syncs_per_s, ROUND(SUM(CASE WHEN " + launches +
                     " THEN count ELSE 0 END) / " + seconds +
                     ", 1) AS launches_per_s FROM op_stats_seconds WHERE session = {S} AND pid "
                     "= {P} AND sec >= {FS} AND sec < {TS}")};
}

void SyncHeavy(const Facts& f, std::vector<Finding>* out) {
  double lps = 0, sps = 0, lns = 0;
  LaunchAndSyncRates(f, &lps, &sps, &lns);
  if (sps < th::kSyncHeavyPerSec) return;
  double per_sync = sps > 0 ? lps / sps : 0;
  if (per_sync >= th::kSyncHeavyLaunchesPerSync) return;
  Finding x;
  x.rule = "sync-heavy";
  x.severity = sps >= th::kSyncHeavyMediumPerSec ? Severity::kMedium : Severity::kLow;
  x.cause = "Sync-heavy training loop";
  x.effect = "GPU pipeline drained at every sync";
  x.lost_s = Sec(At(f.main_totals, FeedCause::kSync));
  x.root.push_back(
      Fmt("%s synchronizations/s against %s kernel launches/s (%.1f launches per "
          "sync)",
          FormatRate(sps).c_str(), FormatRate(lps).c_str(), per_sync));
  x.effects.push_back(Fmt("Main thread inside syncs %s s (%s of wall clock)",
                          FormatSeconds(x.lost_s).c_str(),
                          FormatPct(Share(x.lost_s, f.window_s)).c_str()));
  x.fix.push_back(
      "remove per-step host reads of GPU values (.item(), .cpu(), print(loss)); "
      "accumulate on the GPU and log every N steps");
  x.fix.push_back("call torch.cuda.synchronize() only around timed regions");
  x.metrics.push_back({"syncs_per_s", sps, "ops/s"});
  x.metrics.push_back({"launches_per_sync", per_sync, ""});
  SetEvidence(&x, {LaunchAndSyncRatesQuery(f), Throughput(f)});
  out->push_back(std::move(x));
}

void LaunchBound(const Facts& f, std::vector<Finding>* out) {
  double lps = 0, sps = 0, lns = 0;
  LaunchAndSyncRates(f, &lps, &sps, &lns);
  double share = lns / 1e9;
  double sync_share = Share(Sec(At(f.main_totals, FeedCause::kSync)), f.window_s);
  if (sync_share > th::kLaunchMaxSyncShare) return;
  std::optional<Severity> graded =
      Ladder(share, th::kLaunchHighShare, th::kLaunchMediumShare, th::kLaunchLowShare);
  if (!graded) return;
  Severity sev = *graded;
  Finding x;
  x.rule = "launch-bound";
  x.severity = sev;
  x.cause = "Kernel launch overhead";
  x.effect = "GPU waits for the CPU to launch tiny kernels";
  x.lost_s = share * f.window_s;
  x.root.push_back(
      Fmt("%s kernel launches/s; the main thread spends %s of wall clock inside "
          "launch calls (%.1f µs each)",
          FormatRate(lps).c_str(), FormatPct(share).c_str(), lps > 0 ? lns / lps / 1e3 : 0.0));
  x.effects.push_back(
      Fmt("Only %s of wall clock waiting in syncs: the GPU finishes before the "
          "next kernel arrives",
          FormatPct(sync_share).c_str()));
  x.fix.push_back(
      "capture the step in a CUDA Graph: torch.compile(model, "
      "mode=\"reduce-overhead\") or torch.cuda.graphs");
  x.fix.push_back(
      "fuse small ops (torch.compile, fused optimizers: AdamW(fused=True)) and use "
      "larger batches");
  x.metrics.push_back({"launches_per_s", lps, "ops/s"});
  x.metrics.push_back({"launch_share", share * 100, "%"});
  SetEvidence(&x, {LaunchAndSyncRatesQuery(f), Throughput(f)});
  out->push_back(std::move(x));
}

void AllocatorSpikes(const Facts& f, std::vector<Finding>* out) {
  std::map<int64_t, std::pair<int64_t, int64_t>> per_sec;  // sec -> (calls, ns)
  for (const OpSecondRow& r : f.w->op_seconds) {
    if (r.pid != f.main_pid || !(IsAlloc(r.op) || IsFree(r.op))) continue;
    if (r.op == Op::kCudaMallocHost || r.op == Op::kCudaHostAlloc) continue;
    per_sec[r.sec].first += r.count;
    per_sec[r.sec].second += r.total_ns;
  }
  // Steady state: skip the first tenth of the session (warm-up allocations).
  int64_t warm_end = SaturatingAdd(
      f.w->session_first_ts, SaturatingSub(f.w->session_last_ts, f.w->session_first_ts) / 10);
  std::vector<int64_t> ns_by_sec;
  int64_t calls = 0, seconds = 0;
  for (int64_t s = f.w->from / 1'000'000'000; s * 1'000'000'000 < f.w->to; ++s) {
    if (s * 1'000'000'000 < warm_end) continue;
    auto it = per_sec.find(s);
    ns_by_sec.push_back(it == per_sec.end() ? 0 : it->second.second);
    calls += it == per_sec.end() ? 0 : it->second.first;
    ++seconds;
  }
  if (seconds == 0) return;
  int64_t median = Percentile(ns_by_sec, 50);
  std::vector<int64_t> spikes;
  int64_t spike_ns = 0;
  for (const auto& [s, v] : per_sec) {
    if (s * 1'000'000'000 < warm_end) continue;
    if (v.second >= th::kMallocSpikeMinNs &&
        static_cast<double>(v.second) >= th::kMallocSpikeFactor * static_cast<double>(median)) {
      spikes.push_back(s);
      spike_ns += v.second;
    }
  }
  double rate = static_cast<double>(calls) / static_cast<double>(seconds);
  if (static_cast<int>(spikes.size()) >= th::kMallocSpikeMinCount) {
    std::vector<int64_t> gaps;
    for (size_t i = 1; i < spikes.size(); ++i) gaps.push_back(spikes[i] - spikes[i - 1]);
    int64_t period = Percentile(gaps, 50);
    int regular = 0;
    for (int64_t g : gaps) {
      if (std::abs(static_cast<double>(g - period)) <=
          std::max(1.0, th::kPeriodJitterShare * static_cast<double>(period))) {
        ++regular;
      }
    }
    bool periodic = period > 1 && regular * 2 >= static_cast<int>(gaps.size()) + 1;
    // Stall per spike: the drop in CUDA throughput during spike seconds.
    double lost = Sec(spike_ns);
    auto ops = f.cuda_ops_per_sec.find(f.main_pid);
    if (ops != f.cuda_ops_per_sec.end()) {
      std::vector<int64_t> rates;
      for (const auto& [s, n] : ops->second) rates.push_back(n);
      double med = static_cast<double>(Percentile(rates, 50));
      double drop = 0;
      for (int64_t s : spikes) {
        auto it = ops->second.find(s);
        double n = it == ops->second.end() ? 0 : static_cast<double>(it->second);
        if (med > 0) drop += std::max(0.0, 1 - n / med);
      }
      lost = std::max(lost, drop);
    }
    std::optional<Severity> sev = Ladder(Share(lost, f.window_s));
    Severity s = sev.value_or(Severity::kLow);
    if (periodic && Sec(spike_ns) / static_cast<double>(spikes.size()) >= 0.1) {
      s = Max(s, Severity::kMedium);
    }
    Finding x;
    x.rule = "allocator-spikes";
    x.severity = s;
    x.cause = periodic ? "Periodic CUDA allocator spikes" : "CUDA allocator spikes";
    x.effect = "step time spikes";
    x.lost_s = lost;
    x.root.push_back(
        Fmt("%zu seconds with cudaMalloc/cudaFree time ≥ %s (median second: %s)%s", spikes.size(),
            FormatNs(th::kMallocSpikeMinNs).c_str(), FormatNs(median).c_str(),
            periodic ? Fmt(", every %lld s", static_cast<long long>(period)).c_str() : ""));
    x.root.push_back(Fmt("Allocator calls in those seconds took %s s (%s per spike)",
                         FormatSeconds(Sec(spike_ns)).c_str(),
                         FormatNs(spike_ns / static_cast<int64_t>(spikes.size())).c_str()));
    x.effects.push_back(Fmt("CUDA throughput lost ≈ %s s of work in the spike seconds",
                            FormatSeconds(lost).c_str()));
    AddSyncEffect(f, &x);
    x.fix.push_back("remove torch.cuda.empty_cache() (and gc.collect()) from the training loop");
    x.fix.push_back(
        "let the caching allocator grow instead of fragmenting: "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
    x.fix.push_back(
        "keep tensor shapes stable between steps (pad variable-length batches to "
        "a few bucket sizes)");
    x.metrics.push_back({"spikes", static_cast<double>(spikes.size()), "count"});
    x.metrics.push_back({"period_s", periodic ? static_cast<double>(period) : 0, "s"});
    x.metrics.push_back({"spike_allocator_s", Sec(spike_ns), "s"});
    x.metrics.push_back({"lost_s", lost, "s"});
    SetEvidence(
        &x,
        {{"allocator calls and time per second (op_stats_seconds)",
          Sql(f,
              "SELECT sec, SUM(count) AS calls, ROUND(SUM(total_ns) / 1e6, 1) AS ms FROM "
              "op_stats_seconds WHERE session = {S} AND pid = {P} AND op IN (" +
                  OpNames({Op::kCudaMalloc, Op::kCudaMallocAsync, Op::kCudaMallocManaged,
                           Op::kCudaFree, Op::kCudaFreeAsync, Op::kCuMemAlloc, Op::kCuMemFree}) +
                  ") AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY ms DESC LIMIT 20")}});
    out->push_back(std::move(x));
  } else if (rate >= th::kMallocChurnPerSec) {
    Finding x;
    x.rule = "malloc-churn";
    x.severity = rate >= 4 * th::kMallocChurnPerSec ? Severity::kMedium : Severity::kLow;
    x.cause = "cudaMalloc/cudaFree churn";
    x.effect = "implicit synchronizations and CPU time in the allocator";
    int64_t total_ns = 0;
    for (const auto& [sec, v] : per_sec) total_ns += v.second;
    x.lost_s = Sec(total_ns);
    x.root.push_back(
        Fmt("%.0f cudaMalloc/cudaFree calls per second in steady state (%s s inside "
            "them)",
            rate, FormatSeconds(x.lost_s).c_str()));
    x.fix.push_back(
        "reuse buffers across steps (the PyTorch caching allocator does this unless "
        "PYTORCH_NO_CUDA_MEMORY_CACHING=1 is set)");
    x.fix.push_back("allocate once outside the loop, or use cudaMallocAsync with a memory pool");
    x.metrics.push_back({"allocator_calls_per_s", rate, "ops/s"});
    SetEvidence(
        &x,
        {{"allocator calls per second (op_stats_seconds)",
          Sql(f,
              "SELECT sec, SUM(count) AS calls, ROUND(SUM(total_ns) / 1e6, 1) AS ms FROM "
              "op_stats_seconds WHERE session = {S} AND pid = {P} AND op IN (" +
                  OpNames({Op::kCudaMalloc, Op::kCudaMallocAsync, Op::kCudaMallocManaged,
                           Op::kCudaFree, Op::kCudaFreeAsync, Op::kCuMemAlloc, Op::kCuMemFree}) +
                  ") AND sec >= {FS} AND sec < {TS} GROUP BY sec ORDER BY sec")}});
    out->push_back(std::move(x));
  }
}

void ColdStart(const Facts& f, std::vector<Finding>* out) {
  // Only meaningful when the window covers the start of the session.
  if (f.w->from > f.w->session_first_ts + 1'000'000'000) return;
  int64_t first_call = -1;
  std::map<Op, std::pair<int64_t, int64_t>> early;  // op -> (calls, ns) before steady state
  for (const RawEvent& e : f.events) {
    if (e.pid != f.main_pid || OpLayer(e.op) == Layer::kHost) continue;
    if (first_call < 0) first_call = e.ts;
  }
  auto ops = f.cuda_ops_per_sec.find(f.main_pid);
  if (ops == f.cuda_ops_per_sec.end() || ops->second.empty()) return;
  if (first_call < 0) first_call = ops->second.begin()->first * 1'000'000'000;
  // Steady rate: median over the last three quarters of the window's seconds.
  std::vector<int64_t> late;
  int64_t cut = f.w->from + f.window_ns / 4;
  for (const auto& [sec, n] : ops->second) {
    if (sec * 1'000'000'000 >= cut) late.push_back(n);
  }
  double steady = static_cast<double>(Percentile(late, 50));
  if (steady <= 0) return;
  int64_t ready_sec = -1;
  for (const auto& [sec, n] : ops->second) {
    if (static_cast<double>(n) >= th::kColdStartSteadyShare * steady) {
      ready_sec = sec;
      break;
    }
  }
  if (ready_sec < 0) return;
  int64_t ready = ready_sec * 1'000'000'000;
  int64_t cold_ns = ready - first_call;
  if (cold_ns < th::kColdStartMinNs) return;
  for (const RawEvent& e : f.events) {
    if (e.pid != f.main_pid || OpLayer(e.op) == Layer::kHost || e.ts >= ready) continue;
    early[e.op].first += 1;
    early[e.op].second += e.duration;
  }
  double share = Share(Sec(cold_ns), f.window_s);
  Finding x;
  x.rule = "cold-start";
  x.severity = share >= th::kColdStartHighShare     ? Severity::kHigh
               : share >= th::kColdStartMediumShare ? Severity::kMedium
                                                    : Severity::kLow;
  x.cause = "Cold start";
  x.effect = "no useful GPU work at the start of the run";
  x.lost_s = Sec(cold_ns);
  x.root.push_back(Fmt(
      "%s s from the first CUDA call to steady throughput (%s of the window; "
      "steady = %s ops/sec)",
      FormatSeconds(Sec(cold_ns)).c_str(), FormatPct(share).c_str(), FormatRate(steady).c_str()));
  std::vector<std::pair<int64_t, Op>> slow;
  for (const auto& [op, v] : early) slow.push_back({-v.second, op});
  std::sort(slow.begin(), slow.end());
  for (size_t i = 0; i < slow.size() && i < 3; ++i) {
    const auto& v = early[slow[i].second];
    if (v.second < 10'000'000) break;
    x.root.push_back(Fmt("%s: %s calls, %s s during warm-up",
                         std::string(OpName(slow[i].second)).c_str(), FormatCount(v.first).c_str(),
                         FormatSeconds(Sec(v.second)).c_str()));
  }
  x.effects.push_back(Fmt("GPU throughput below half of steady state for the first %s s",
                          FormatSeconds(Sec(cold_ns)).c_str()));
  x.fix.push_back(
      "load kernels on first use: CUDA_MODULE_LOADING=LAZY (opt-in since CUDA 11.7, the "
      "default since CUDA 12.2: check the job does not set CUDA_MODULE_LOADING=EAGER)");
  x.fix.push_back(
      "cache compiled kernels between runs: TORCHINDUCTOR_FX_GRAPH_CACHE=1 "
      "TORCHINDUCTOR_CACHE_DIR=/var/cache/inductor");
  x.fix.push_back(
      "keep the process warm: run a warm-up step before timing, or serve from a "
      "long-lived process instead of one process per job");
  x.metrics.push_back({"cold_start_s", Sec(cold_ns), "s"});
  x.metrics.push_back({"steady_ops_per_s", steady, "ops/s"});
  SetEvidence(&x,
              {{"the main process's CUDA calls before steady throughput (launches counted in "
                "op_stats_seconds)",
                CudaCalls(f) +
                    "SELECT op, COUNT(*) AS calls, ROUND(SUM(duration_ns) / 1e9, 3) AS seconds, "
                    "ROUND(MAX(duration_ns) / 1e6, 1) AS worst_ms FROM calls WHERE timestamp < " +
                    std::to_string(ready) + " GROUP BY op ORDER BY seconds DESC"},
               Throughput(f)});
  out->push_back(std::move(x));
}

void GpuSharing(const Facts& f, std::vector<Finding>* out) {
  if (f.cuda_pids.size() < 2) return;
  auto main_ops = f.cuda_ops_per_sec.find(f.main_pid);
  if (main_ops == f.cuda_ops_per_sec.end()) return;
  std::set<int64_t> shared_secs;
  std::vector<int32_t> peers;
  for (size_t i = 1; i < f.cuda_pids.size(); ++i) {
    auto it = f.cuda_ops_per_sec.find(f.cuda_pids[i]);
    if (it == f.cuda_ops_per_sec.end()) continue;
    bool any = false;
    for (const auto& [sec, n] : it->second) {
      if (n > 0 && main_ops->second.count(sec)) {
        shared_secs.insert(sec);
        any = true;
      }
    }
    if (any) peers.push_back(f.cuda_pids[i]);
  }
  if (peers.empty()) return;
  double overlap =
      Share(static_cast<double>(shared_secs.size()), static_cast<double>(main_ops->second.size()));
  std::vector<int64_t> alone, shared;
  for (const RawEvent& e : f.events) {
    if (e.pid != f.main_pid || !IsSync(e.op)) continue;
    (shared_secs.count(e.ts / 1'000'000'000) ? shared : alone).push_back(e.duration);
  }
  int64_t p50_alone = Percentile(alone, 50);
  int64_t p50_shared = Percentile(shared, 50);
  double inflation = p50_alone > 0 ? static_cast<double>(p50_shared) / p50_alone : 0;
  double lost = 0;
  for (int64_t d : shared) lost += static_cast<double>(std::max<int64_t>(0, d - p50_alone));
  Severity sev = Ladder(Share(Sec(lost), f.window_s)).value_or(Severity::kLow);
  if (overlap >= th::kGpuShareOverlapMin && inflation >= th::kGpuShareHighInflation) {
    sev = Max(sev, Severity::kMedium);
  } else {
    sev = Severity::kLow;
  }
  Finding x;
  x.rule = "gpu-sharing";
  x.severity = sev;
  x.cause = "GPU shared with other processes";
  x.effect = "training kernels wait behind another job's";
  x.lost_s = Sec(lost);
  std::string names;
  for (int32_t p : peers) names += (names.empty() ? "" : ", ") + ProcessLabel(*f.w, p);
  x.root.push_back(
      Fmt("%s made CUDA calls during %zu of the training process's %zu active seconds (%s): %s",
          Plural(static_cast<int64_t>(peers.size()), "other process", "other processes").c_str(),
          shared_secs.size(), main_ops->second.size(), FormatPct(overlap).c_str(),
          names.c_str()));
  if (!alone.empty() && !shared.empty()) {
    x.effects.push_back(Fmt("%s p50 %s alone → %s while shared (%s)", f.sync_op.c_str(),
                            FormatNs(p50_alone).c_str(), FormatNs(p50_shared).c_str(),
                            FormatFactor(inflation).c_str()));
  }
  AddThroughputEffect(f, &x);
  x.fix.push_back(Fmt("give each job its own GPU: CUDA_VISIBLE_DEVICES=<free gpu> for %s",
                      ProcessName(*f.w, peers[0]).c_str()));
  x.fix.push_back(
      "or share it fairly: run both under MPS (nvidia-cuda-mps-control -d) or split "
      "the GPU with MIG");
  x.fix.push_back("or schedule the other job between training epochs");
  x.metrics.push_back({"shared_seconds", static_cast<double>(shared_secs.size()), "s"});
  x.metrics.push_back({"sync_p50_inflation", inflation, "x"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(
      &x,
      {{"CUDA calls per second of every process that used the GPU",
        Sql(f,
            "SELECT q.sec, q.pid, p.name, SUM(q.count) AS cuda_ops FROM op_stats_seconds q "
            "LEFT JOIN processes p ON p.session = q.session AND p.pid = q.pid WHERE q.session = "
            "{S} AND " +
                CudaOpCondition("q.op") +
                " AND q.sec >= {FS} AND q.sec < {TS} GROUP BY q.sec, q.pid ORDER BY q.sec, "
                "q.pid")},
       SyncBuckets(f)});
  out->push_back(std::move(x));
}

void OomKills(const Facts& f, std::vector<Finding>* out) {
  std::vector<const RawEvent*> kills;
  for (const RawEvent& e : f.events) {
    if (e.op == Op::kOomKill) kills.push_back(&e);
  }
  if (kills.empty()) return;
  Finding x;
  x.rule = "oom-kill";
  x.severity = Severity::kHigh;
  x.cause = "Out-of-memory kills";
  x.effect = "processes of the job killed";
  std::string victims;
  for (size_t i = 0; i < kills.size() && i < 5; ++i) {
    victims += (victims.empty() ? "" : ", ") + ProcessLabel(*f.w, kills[i]->pid);
  }
  x.root.push_back(Fmt("%s: %s",
                       Plural(static_cast<int64_t>(kills.size()), "OOM kill", "OOM kills").c_str(),
                       victims.c_str()));
  x.fix.push_back(
      "reduce host memory per DataLoader worker (memory-mapped datasets), or run fewer "
      "workers");
  x.fix.push_back(
      "cap other jobs' memory (systemd-run --scope -p MemoryMax=...) so the kernel "
      "does not pick the trainer");
  x.metrics.push_back({"oom_kills", static_cast<double>(kills.size()), "count"});
  SetEvidence(&x, {{"OOM kills",
                    Sql(f,
                        "SELECT e.timestamp, e.pid, p.name FROM {EVENTS} e LEFT JOIN processes "
                        "p ON p.session = e.session AND p.pid = e.pid WHERE {e.IN_S}e.op = '" +
                            std::string(OpName(Op::kOomKill)) +
                            "' AND e.timestamp >= {F} AND e.timestamp < {T} ORDER BY "
                            "e.timestamp")}});
  out->push_back(std::move(x));
}

void AllocFailures(const Facts& f, std::vector<Finding>* out) {
  int64_t failed = 0;
  int64_t largest = 0;
  std::set<int64_t> codes;
  for (const RawEvent& e : f.events) {
    if (!IsAlloc(e.op) || e.ret == kNull || e.ret == 0) continue;
    ++failed;
    codes.insert(e.ret);
    if (e.bytes != kNull) largest = std::max(largest, e.bytes);
  }
  if (failed == 0) return;
  Finding x;
  x.rule = "alloc-failure";
  x.severity = Severity::kHigh;
  x.cause = "GPU memory allocation failures";
  x.effect = "out-of-memory errors and retries";
  std::string code_list;
  for (int64_t c : codes) code_list += (code_list.empty() ? "" : ", ") + std::to_string(c);
  x.root.push_back(
      Fmt("%s allocation calls failed (return codes %s; 2 = "
          "cudaErrorMemoryAllocation), largest failed request %s",
          FormatCount(failed).c_str(), code_list.c_str(),
          FormatBytes(static_cast<double>(largest)).c_str()));
  x.fix.push_back("lower the batch size or use activation checkpointing");
  x.fix.push_back("reduce fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True");
  x.fix.push_back(
      "check for other processes on the GPU: nvidia-smi --query-compute-apps=pid,"
      "used_memory --format=csv");
  x.metrics.push_back({"failed_allocations", static_cast<double>(failed), "count"});
  SetEvidence(&x, {{"failed allocations",
                    Sql(f,
                        "SELECT op, ret, COUNT(*) AS calls, MAX(bytes) AS largest_bytes FROM "
                        "{EVENTS} WHERE {IN_S}op IN (" +
                            OpNamesWhere(IsAlloc) +
                            ") AND ret != 0 AND timestamp >= {F} AND timestamp < {T} GROUP BY op, "
                            "ret")}});
  out->push_back(std::move(x));
}

}  // namespace

void RunRules(const Facts& f, std::vector<Finding>* out) {
  if (f.main_pid == 0) return;
  CpuContention(f, out);
  DataLoaderStarvation(f, out);
  IoBottleneck(f, out);
  MemoryPressure(f, out);
  MemcpyBottleneck(f, out);
  SyncHeavy(f, out);
  LaunchBound(f, out);
  AllocatorSpikes(f, out);
  ColdStart(f, out);
  GpuSharing(f, out);
  OomKills(f, out);
  AllocFailures(f, out);
}

}  // namespace gw
