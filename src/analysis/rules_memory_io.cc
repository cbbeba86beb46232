// Storage and memory: reads that keep the feeders waiting on the disk, memory pressure
// (major faults, reclaim, swap), and processes the OOM killer ended.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "analysis/budget.h"
#include "analysis/format.h"
#include "analysis/rules.h"
#include "base/text.h"

namespace gw::rules {

namespace {

// "cgroup /docker/3f4a… (container 3f4a9c1e2b7d) is limited to 256 MB (memory.limit_in_bytes)"
std::string LimitLine(const Facts& f, const MemoryLimit& m) {
  std::string label = JobContainerLabel(f);
  std::string setting;
  if (m.max_bytes != kNull) {
    setting = FormatBytes(static_cast<double>(m.max_bytes)) +
              (m.version == 2 ? " (memory.max)" : " (memory.limit_in_bytes)");
  }
  if (m.high_bytes != kNull) {
    setting += (setting.empty() ? "" : ", ") + FormatBytes(static_cast<double>(m.high_bytes)) +
               " above which it is throttled (memory.high)";
  }
  std::string line = "cgroup " + m.cgroup + (label.empty() ? "" : " (" + label + ")") +
                     " is limited to " + setting;
  if (m.usage_peak != kNull) {
    line += "; it used up to " + FormatBytes(static_cast<double>(m.usage_peak));
  }
  return line;
}

// "hit its limit 1,204 times, 2 OOM kills" — what the limit did over the window.
std::string LimitEventsLine(const MemoryLimit& m) {
  std::vector<std::string> parts;
  if (m.events_max > 0) {
    parts.push_back(Fmt("reached its limit %s times (%s)", FormatCount(m.events_max).c_str(),
                        m.version == 2 ? "memory.events max: reclaimed in the allocating task"
                                       : "memory.failcnt: charges refused, reclaimed in the "
                                         "allocating task"));
  }
  if (m.events_high > 0) {
    parts.push_back(Fmt("went over memory.high %s times (throttled and reclaimed)",
                        FormatCount(m.events_high).c_str()));
  }
  if (m.events_oom > 0) {
    parts.push_back(
        Fmt("%s allocations failed at the limit (oom)", FormatCount(m.events_oom).c_str()));
  }
  if (m.events_oom_kill > 0) {
    parts.push_back(Plural(m.events_oom_kill, "process killed by the OOM killer",
                           "processes killed by the OOM killer"));
  }
  if (m.major_faults != kNull && m.major_faults > 0) {
    parts.push_back(Fmt("%s major faults in the cgroup", FormatCount(m.major_faults).c_str()));
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string RaiseLimitFix(const Facts& f, const MemoryLimit& m) {
  std::string path = ShellQuote((m.version == 2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory") +
                                (m.cgroup == "/" ? std::string() : m.cgroup));
  std::string label = JobContainerLabel(f);
  return Fmt(
      "raise the memory limit of %s: Kubernetes resources.limits.memory, docker run "
      "--memory; on the host: echo %s > %s/%s",
      label.empty() ? "the job's cgroup" : label.c_str(), m.version == 2 ? "max" : "-1",
      path.c_str(),
      m.version == 2 ? (m.max_bytes != kNull ? "memory.max" : "memory.high")
                     : "memory.limit_in_bytes");
}

EvidenceQuery LimitEvidence(const Facts& f) {
  return {
      "the job's memory cgroups' limits and events over the window (cgroup_memory_samples; "
      "counters are cumulative)",
      Sql(f,
          "SELECT cgroup, MAX(max_bytes) AS max_bytes, MAX(high_bytes) AS high_bytes, "
          "MAX(usage_bytes) AS usage_peak_bytes, MAX(events_max) - MIN(events_max) AS "
          "limit_hits, MAX(events_high) - MIN(events_high) AS high_events, "
          "MAX(events_oom) - MIN(events_oom) AS ooms, MAX(events_oom_kill) - "
          "MIN(events_oom_kill) AS oom_kills, MAX(major_faults) - MIN(major_faults) AS "
          "major_faults FROM cgroup_memory_samples WHERE session = {S} AND ts >= {F} AND "
          "ts <= {T} GROUP BY cgroup ORDER BY limit_hits DESC")};
}

}  // namespace

void IoBottleneck(const Facts& f, std::vector<Finding>* out) {
  // The workers' I/O that held batches up; the training process's own is main-thread-io.
  double lost_s = BatchLostS(f, BudgetCause::kBatchIo);
  double share = Share(lost_s, f.budget.window_s);
  std::optional<Severity> sev = Ladder(share);
  if (!sev) return;
  std::vector<int64_t> lat;
  std::vector<int64_t> base_lat;
  double bytes = 0;
  int64_t reads = 0;
  std::vector<int64_t> read_ns;
  int64_t base_end = f.base_bucket >= 0 ? f.buckets[f.base_bucket].end : f.w->from;
  int64_t base_start = f.base_bucket >= 0 ? f.buckets[f.base_bucket].start : f.w->from;
  for (const Event& e : f.events) {
    if (!IsFeeder(f, e.pid)) continue;
    if (e.op == Op::kBlockIo) {
      lat.push_back(e.duration_ns);
      if (e.ts_ns >= base_start && e.ts_ns < base_end) base_lat.push_back(e.duration_ns);
      if (e.bytes != kNull) bytes += static_cast<double>(e.bytes);
    } else if (e.op == Op::kRead) {
      ++reads;
      read_ns.push_back(e.duration_ns);
    }
  }
  Finding x;
  x.rule = "io-bottleneck";
  x.severity = *sev;
  x.cause = "I/O bottleneck in the data path";
  x.effect = "GPU starved of batches";
  x.lost_s = lost_s;
  int64_t wio = At(f.worker_totals, FeedCause::kBlockedIo);
  if (!f.worker_pids.empty()) {
    x.root.push_back(
        Fmt("DataLoader workers blocked on I/O %s s (%s of their time)",
            FormatSeconds(Sec(wio)).c_str(),
            FormatPct(Share(static_cast<double>(wio), static_cast<double>(f.worker_thread_ns)))
                .c_str()));
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
  if (std::string cycles = BatchCycleLine(f); !cycles.empty()) x.root.push_back(cycles);
  if (f.waits.total_ns > 0) {
    x.effects.push_back(
        Fmt("Main thread waited %s s for batches; %s s of it is attributed to "
            "workers blocked on I/O",
            FormatSeconds(Sec(f.waits.total_ns)).c_str(),
            FormatSeconds(BudgetPathS(f, BudgetCause::kBatchIo)).c_str()));
  }
  if (BudgetLostS(f, BudgetCause::kBatchCompute) >= 0.05) {
    x.effects.push_back(Fmt("GPU idle %s s on the reads and %s s more on the batches' "
                            "computing they left no time to hide (the lost time counts both)",
                            FormatSeconds(BudgetLostS(f, BudgetCause::kBatchIo)).c_str(),
                            FormatSeconds(BudgetLostS(f, BudgetCause::kBatchCompute)).c_str()));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  x.fix.push_back(
      "pre-cache the dataset in RAM: copy it to tmpfs (cp -r DATASET /dev/shm/) or "
      "warm the page cache (vmtouch -t DATASET)");
  x.fix.push_back(
      "overlap reads with compute: DataLoader(prefetch_factor=4, "
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
  for (const Event& e : f.events) {
    if (!IsFeeder(f, e.pid)) continue;
    if (e.op == Op::kMajorFault) ++major;
    if (e.op == Op::kDirectReclaim) {
      ++reclaim_n;
      reclaim_ns += e.duration_ns;
    }
  }
  int64_t swap_max = 0;
  double mem_max = 0;
  for (const SystemSnapshot& s : f.w->snapshots) {
    swap_max = std::max(swap_max, s.swap_used_bytes);
    mem_max = std::max(mem_max, s.mem_pct);
  }
  double lost_s = BudgetLostS(f, BudgetCause::kPageFault);
  double share = Share(lost_s, f.budget.window_s);
  std::optional<Severity> sev = Ladder(share);
  double faults_per_s = static_cast<double>(major) / std::max(1.0, f.window_s);
  const std::optional<MemoryLimit>& limit = f.memory_limit;
  bool limited = limit && limit->hits() > 0;
  bool pressure = swap_max >= th::kSwapUsedBytesMin || faults_per_s >= th::kMajorFaultsPerSecMin ||
                  reclaim_n > 0 || limited;
  if (!sev || !pressure) return;
  Finding x;
  x.rule = "memory-pressure";
  x.severity = *sev;
  // A job at its cgroup's memory limit is reclaimed and faults against that limit, whatever the
  // host has free.
  // Major faults with most of the host's memory free, no swap and no reclaim are files read on
  // first touch (libraries at import, memory-mapped data in a cold page cache), not a shortage:
  // freeing memory would not help. Without snapshots the host's memory is unknown.
  bool host_short = swap_max >= th::kSwapUsedBytesMin || reclaim_n > 0 ||
                    mem_max >= th::kMemoryShortUsedPct || f.w->snapshots.empty();
  bool cold_cache = !limited && !host_short;
  x.cause = limited      ? "Memory pressure at the job's cgroup memory limit"
            : cold_cache ? "Page faults reading files into a cold page cache (host memory is "
                           "not short)"
                         : "Host memory pressure";
  x.effect = "feeders stalled in page faults";
  x.lost_s = lost_s;
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
  if (limited) {
    x.root.push_back(LimitLine(f, *limit));
    x.root.push_back("Its limit " + LimitEventsLine(*limit));
    x.fix.push_back(RaiseLimitFix(f, *limit));
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  if (cold_cache) {
    x.fix.push_back(
        "the faults read files on first touch (the job's libraries as it imports them, "
        "memory-mapped data): warm the page cache before the job (vmtouch -t FILES) or keep a "
        "long-lived process; a slow or network file system makes each first touch slower");
    x.fix.push_back("put memory-mapped datasets and the Python environment on local storage");
  } else {
    // The biggest memory users are not known from events; name untracked CPU holders instead.
    x.fix.push_back(
        "free host memory for the job: stop or cap other jobs (systemd-run --scope -p "
        "MemoryMax=8G CMD), or move them to another machine");
    x.fix.push_back(
        "fewer copies of the dataset: a memory-mapped or shared-memory dataset instead of "
        "per-worker lists (each DataLoader worker holds its own copy of Python objects)");
  }
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
  if (limited) x.evidence.push_back(LimitEvidence(f));
  out->push_back(std::move(x));
}

// The job's cgroup memory limit acted (reclaim at the limit, memory.high throttling, OOM) in the
// window, though page faults cost the feeders too little time for memory-pressure: the limit is
// named, LOW unless it killed a process (oom-kill has those).
void MemoryLimitHit(const Facts& f, std::vector<Finding>* out) {
  const std::optional<MemoryLimit>& limit = f.memory_limit;
  if (!limit || limit->hits() == 0) return;
  for (const Finding& other : *out) {
    if (other.rule == "memory-pressure") return;  // it names the limit already
  }
  Finding x;
  x.rule = "memory-limit";
  x.severity = Severity::kLow;
  x.cause = "The job's cgroup memory limit was reached";
  x.effect = "memory reclaimed inside the job's cgroup";
  x.lost_s = BudgetLostS(f, BudgetCause::kPageFault);
  x.root.push_back(LimitLine(f, *limit));
  x.root.push_back("Over the window it " + LimitEventsLine(*limit));
  if (x.lost_s > 0) {
    x.effects.push_back(
        Fmt("The feeders lost %s s in page faults (too little for "
            "memory-pressure)",
            FormatSeconds(x.lost_s).c_str()));
  } else {
    x.effects.push_back(
        "No GPU time measured lost to page faults: the reclaim took page cache "
        "or memory the job did not wait on");
  }
  x.fix.push_back(RaiseLimitFix(f, *limit));
  x.fix.push_back(
      "or use less: fewer DataLoader workers or a smaller prefetch_factor (each holds batches), "
      "a memory-mapped dataset instead of per-worker copies");
  x.metrics.push_back({"limit_bytes", static_cast<double>(limit->limit()), "bytes"});
  x.metrics.push_back({"limit_hits", static_cast<double>(limit->events_max), "count"});
  x.metrics.push_back({"high_events", static_cast<double>(limit->events_high), "count"});
  x.metrics.push_back({"oom_kills", static_cast<double>(limit->events_oom_kill), "count"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(&x, {LimitEvidence(f)});
  out->push_back(std::move(x));
}

void OomKills(const Facts& f, std::vector<Finding>* out) {
  std::vector<const Event*> kills;
  for (const Event& e : f.events) {
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
    if (const ProcessCgroup* pc = ContainerOf(*f.w, kills[i]->pid)) {
      if (!pc->container_id.empty())
        victims += " in container " + pc->container_id.substr(0, 12);
      else if (!pc->pod_uid.empty())
        victims += " in pod " + pc->pod_uid;
      if (pc->ns_pid > 0 && pc->ns_pid != kills[i]->pid) {
        victims += Fmt(" (pid %d there)", pc->ns_pid);
      }
    }
  }
  x.root.push_back(Fmt("%s: %s",
                       Plural(static_cast<int64_t>(kills.size()), "OOM kill", "OOM kills").c_str(),
                       victims.c_str()));
  // Inside a container: the kill was its memory limit's, not the host's.
  const std::optional<MemoryLimit>& limit = f.memory_limit;
  if (limit && limit->events_oom_kill > 0) {
    std::string label = JobContainerLabel(f);
    x.cause = label.empty() ? "Out-of-memory kills at the job's cgroup memory limit"
                            : "Out-of-memory kills in " + label + " at its memory limit";
    x.root.push_back(LimitLine(f, *limit));
    x.root.push_back("Over the window it " + LimitEventsLine(*limit));
    x.fix.push_back(RaiseLimitFix(f, *limit));
  }
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
  if (limit && limit->events_oom_kill > 0) x.evidence.push_back(LimitEvidence(f));
  out->push_back(std::move(x));
}

}  // namespace gw::rules
