// CPU scheduling and the input pipeline: contention for the training process's CPUs, and
// DataLoader workers that cannot keep up.
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <set>
#include <string>

#include "analysis/budget.h"
#include "analysis/format.h"
#include "analysis/rules.h"

namespace gw::rules {

namespace {

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
  // The switch row names the task that took the CPU when the thread left it; explain credits a
  // wait to whoever held the CPU during it (the job's own runs on that CPU, others in between),
  // so for waits after a sleep the two can differ.
  return {"who took the CPU when the training process and its workers left it, and the "
          "run-queue wait that followed",
          Sql(f,
              "SELECT COALESCE(p.name, 'pid ' || e.other_pid) AS took_cpu, e.other_pid, "
              "COUNT(*) AS waits, ROUND(SUM(e.runq_ns) / 1e9, 2) AS runq_s FROM {EVENTS} e "
              "LEFT JOIN processes p ON p.session = e.session AND p.pid = e.other_pid "
              "WHERE {e.IN_S}e.op = 'sched_switch' AND e.pid IN ({FEED}) AND e.timestamp >= "
              "{F} AND e.timestamp < {T} AND e.runq_ns > 0 GROUP BY e.other_pid ORDER BY "
              "runq_s DESC")};
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

// "0-3,8": a CPU list as taskset and cpusets write it.
std::string CpuList(const std::vector<int32_t>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(cpus[i]);
    if (j > i) out += "-" + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

// The host's CPUs the feeders did not run on.
std::vector<int32_t> OtherCpus(const Facts& f) {
  std::vector<int32_t> out;
  for (int32_t c = 0; c < f.cores; ++c) {
    if (!std::binary_search(f.feeder_cpu_list.begin(), f.feeder_cpu_list.end(), c)) {
      out.push_back(c);
    }
  }
  return out;
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

// DataLoader worker respawns (an epoch boundary without persistent_workers): a worker that
// started after another worker of the job had exited. A first start inside the window (under
// `trace -- CMD`, or after a long import) is not a respawn.
int64_t WorkerRespawns(const Facts& f) {
  int64_t first_exit = kNull;
  for (int32_t pid : f.worker_pids) {
    auto it = f.w->processes.find(pid);
    if (it == f.w->processes.end() || it->second.exit_ts == kNull) continue;
    if (first_exit == kNull || it->second.exit_ts < first_exit) first_exit = it->second.exit_ts;
  }
  if (first_exit == kNull) return 0;
  int64_t n = 0;
  for (int32_t pid : f.worker_pids) {
    auto it = f.w->processes.find(pid);
    if (it != f.w->processes.end() && it->second.first_ts != kNull &&
        it->second.first_ts > first_exit && it->second.first_ts >= f.w->from) {
      ++n;
    }
  }
  return n;
}

std::string HolderList(const Facts& f, const std::vector<Competitor>& list, size_t max) {
  std::string s;
  for (size_t i = 0; i < list.size() && i < max; ++i) {
    if (!s.empty()) s += ", ";
    s += ProcessLabel(*f.w, list[i].pid) + " " + FormatSeconds(Sec(list[i].ns)) + " s";
  }
  return s;
}

}  // namespace

bool OthersCrowdTheJob(const Facts& f) {
  return 1.0 - f.own_runq_share >= th::kOthersRunqStoryShare;
}

bool WakeupLatencyOnly(const Facts& f) {
  return f.host_busy >= 0 && f.host_busy < th::kSelfContentionHostBusyMax && f.cores > 0 &&
         f.feeder_cpus >= f.cores;
}

std::string WakeupLatencyLine(const Facts& f) {
  return Fmt(
      "No other process held the CPUs and the host's %s were %s idle: these are wake-up "
      "delays among the job's own threads, not a shortage of CPUs",
      Plural(f.cores, "core", "cores").c_str(), FormatPct(1.0 - f.host_busy).c_str());
}

void CpuContention(const Facts& f, std::vector<Finding>* out) {
  // Run-queue waits are one story: other processes crowding the job's CPUs (here), or the job's
  // own threads alone (cpu-oversubscription). While others take a real share of them, the job's
  // threads also crowd each other onto the CPUs left: those waits are the same shortage.
  double lost_other = BudgetLostS(f, BudgetCause::kRunqOther);
  double lost_own = BudgetLostS(f, BudgetCause::kRunqOwn);
  if (!OthersCrowdTheJob(f)) return;
  double lost_s = lost_other + lost_own;
  double share = Share(lost_s, f.budget.window_s);
  std::optional<Severity> sev = Ladder(share);
  if (!sev) return;
  int64_t feed_ns = f.train_thread_ns + f.worker_thread_ns;
  double feed_runq = static_cast<double>(At(f.train_totals, FeedCause::kRunqWait) +
                                         At(f.worker_totals, FeedCause::kRunqWait));
  if (Share(feed_runq, static_cast<double>(feed_ns)) < th::kContentionRunqShareMin) {
    sev = Severity::kLow;
  }
  // Nobody outside the job held the CPUs, the feeders ran across all of them and the host was
  // mostly idle: the waits are wake-up latency among the job's own threads (several woken at
  // once), which neither pinning, renicing nor fewer workers would remove.
  bool tracer_held = f.tracer_runq_ns > 0;
  bool wakeup_latency = f.competitors.empty() && !tracer_held && WakeupLatencyOnly(f);
  if (wakeup_latency) sev = Severity::kLow;
  // Pinning moves the job away from others; it cannot undo wake-up latency among its own threads
  // nor a cgroup quota that stops all of them (cpu-quota's fix).
  bool pinning_helps = !wakeup_latency && !QuotaThrottles(f);
  Finding x;
  x.rule = "cpu-contention";
  x.severity = *sev;
  x.cause = "CPU scheduling contention";
  x.effect = "CUDA throughput drop";
  x.lost_s = lost_s;
  auto sw = f.switches.find(f.main_pid);
  int64_t main_switches = sw == f.switches.end() ? 0 : sw->second.count;
  int64_t worker_switches = 0;
  for (int32_t pid : f.worker_pids) {
    if (auto it = f.switches.find(pid); it != f.switches.end()) worker_switches += it->second.count;
  }
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  x.root.push_back(Fmt("%s context switches on training process (PID %d)%s",
                       FormatCount(main_switches).c_str(), f.main_pid,
                       workers == 0
                           ? ""
                           : Fmt(", %s on its %s", FormatCount(worker_switches).c_str(),
                                 Plural(workers, "DataLoader worker", "DataLoader workers").c_str())
                                 .c_str()));
  const CauseTimes& m = f.main_totals;
  int64_t runq = At(m, FeedCause::kRunqWait);
  int64_t off = runq + At(m, FeedCause::kBlockedIo) + At(m, FeedCause::kPageFault) +
                At(m, FeedCause::kBlockedOther);
  x.root.push_back(Fmt(
      "Main thread off-CPU outside CUDA syncs %s of %s seconds (%s of wall clock): %s s runnable "
      "but waiting for a CPU",
      FormatSeconds(Sec(off)).c_str(), FormatSeconds(f.window_s).c_str(),
      FormatPct(Share(Sec(off), f.window_s)).c_str(), FormatSeconds(Sec(runq)).c_str()));
  double through_others = f.lost_contention - static_cast<double>(runq);
  if (Sec(through_others) >= 0.05) {
    x.root.push_back(
        Fmt("Main thread waited %s s more for helper threads and workers that were "
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
  if (lost_own >= 0.05) {
    x.root.push_back(
        Fmt("GPU idle %s s behind other processes, %s s more behind the job's own "
            "threads crowded onto the CPUs left to them",
            FormatSeconds(lost_other).c_str(), FormatSeconds(lost_own).c_str()));
  }
  if (wakeup_latency) x.root.push_back(WakeupLatencyLine(f));
  if (tracer_held) {
    x.root.push_back(Fmt("gpuwhy's own tracer (PID %d) held the CPU %s s while the job's threads "
                         "waited: the cost of tracing on this host",
                         f.w->tracer_pid, FormatSeconds(Sec(f.tracer_runq_ns)).c_str()));
    x.metrics.push_back({"tracer_held_s", Sec(f.tracer_runq_ns), "s"});
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
  if (children > 0)
    who += " + " + Plural(children, "program the job started", "programs the job started");
  who += " + " + Plural(background, "background process", "background processes");
  x.contributing.push_back(
      Fmt("%s competing for %s", who.c_str(), Plural(f.cores, "core", "cores").c_str()));
  if (!competitors.empty()) {
    x.contributing.push_back("CPU held while feeders waited: " + HolderList(f, competitors, 4));
  }
  // A job that ran on fewer CPUs than the host has is pinned already (taskset, a cpuset): the
  // fix is to keep the others off its CPUs, not to pin it again.
  bool confined = f.cores > 0 && f.feeder_cpus > 0 && f.feeder_cpus < f.cores;
  std::string job_cpus = confined ? CpuList(f.feeder_cpu_list) : CoreRange(0, TrainingCores(f) - 1);
  std::string rest = confined ? CpuList(OtherCpus(f)) : "";
  int64_t k = TrainingCores(f);
  if (!confined && pinning_helps) {
    std::vector<int32_t> feeders = {f.main_pid};
    feeders.insert(feeders.end(), f.worker_pids.begin(), f.worker_pids.end());
    std::string inside = NamespacePids(*f.w, feeders);
    std::string where = JobContainerLabel(f);
    // The host's pids work from the host; in the container (docker exec, kubectl exec) the same
    // processes have other pids.
    x.fix.push_back(
        Fmt("pin the job to dedicated cores: for p in %s; do taskset -apc %s $p; done%s",
            FeederPids(f).c_str(), job_cpus.c_str(),
            inside.empty()
                ? ""
                : Fmt(" (host pids; in the %s: for p in %s; do taskset "
                      "-apc %s $p; done)",
                      where.empty() ? "container" : where.c_str(), inside.c_str(), job_cpus.c_str())
                      .c_str()));
    if (k < f.cores) rest = CoreRange(k, f.cores - 1);
  } else if (confined) {
    x.contributing.push_back(Fmt("The job already runs on CPUs %s only (pinned, or a cpuset): "
                                 "others were scheduled onto them",
                                 job_cpus.c_str()));
  }
  if (!competitors.empty()) {
    std::string pids;
    for (size_t i = 0; i < competitors.size() && i < 4; ++i) {
      pids += " " + std::to_string(competitors[i].pid);
    }
    x.fix.push_back("lower the competitors' priority: renice -n 19 -p" + pids);
    if (!rest.empty() && pinning_helps) {
      x.fix.push_back(
          Fmt("%s move them off the job's CPUs: for p in%s; do taskset -apc %s "
              "$p; done (or a cgroup: systemd-run --scope -p CPUWeight=10 ...)",
              confined ? "and" : "or", pids.c_str(), rest.c_str()));
    }
    if (children > 0) {
      x.fix.push_back(
          "the job's own helper programs compete too: start them with nice -n 19, "
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
  double lost_s = BatchLostS(f, BudgetCause::kBatchCompute);
  double share = Share(lost_s, f.budget.window_s);
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
  x.lost_s = lost_s;
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
  if (std::string cycles = BatchCycleLine(f); !cycles.empty()) x.root.push_back(cycles);
  std::vector<int32_t> worker_tids;
  for (const auto& [pid, tid] : f.worker_rep_tid) worker_tids.push_back(tid);
  KernelTime kernel = KernelTimeOf(f, worker_tids, f.worker_pids);
  if (auto line =
          KernelTimeLine(kernel, "The workers'", "the workers spend their time", &x.fix)) {
    x.root.push_back(*line);
    if (kernel.faults_per_s >= th::kFaultHeavyPerS) {
      // A worker also writes every batch it sends into fresh shared memory (the tensors'
      // storage moves to /dev/shm): the bigger the batch, the more pages.
      x.fix.push_back(
          "send smaller batches from the workers: each one is written into fresh shared memory "
          "on its way to the main process (uint8 images instead of float32, normalized on the "
          "GPU, are a quarter of the pages)");
    }
  }
  AddThroughputEffect(f, &x);
  AddSyncEffect(f, &x);
  x.contributing.push_back(Fmt("%s on %s",
                               Plural(workers, "DataLoader worker", "DataLoader workers").c_str(),
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
  x.fix.push_back(
      "if one worker is slower than the rest, look for uneven samples (sizes, "
      "decode cost) in the dataset's __getitem__");
  x.metrics.push_back({"batch_wait_s", Sec(f.waits.total_ns), "s"});
  x.metrics.push_back({"batch_waits", static_cast<double>(f.waits.count), "count"});
  x.metrics.push_back({"workers_busy_share", busy * 100, "%"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  SetEvidence(&x, {SwitchKinds(f), Throughput(f)});
  out->push_back(std::move(x));
}

}  // namespace gw::rules
