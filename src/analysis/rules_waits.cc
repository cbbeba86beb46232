// Waits on the critical path that nothing in the job ended, from the GPU-time budget: the main
// thread asleep until a timer or an interrupt woke it (host_sleep), the main thread waiting
// for another program: a subprocess it ran, the far end of a pipe or socket (other_program),
// and batches late because the DataLoader workers sleep on the network or a timer (batch_wait).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/budget.h"
#include "analysis/callers.h"
#include "analysis/format.h"
#include "analysis/rules.h"

namespace gw::rules {

namespace {

// The source line the sleeps left the CPU at (trace --stack), the seconds of path time behind
// it and the seconds of sleeps that carried a stack; nullopt without stacks.
struct SleepSite {
  CallSite site;
  double seconds = 0;
  double with_stack_s = 0;
};
std::optional<SleepSite> TopSleepSite(const Facts& f) {
  std::map<std::string, SleepSite> by_key;
  double with_stack = 0;
  for (const auto& [stack_id, ns] : f.holders.sleep_stack) {
    auto frames = f.w->stack_frames.find(stack_id);
    if (stack_id == 0 || frames == f.w->stack_frames.end() || frames->second.empty()) continue;
    StackSite s = PickStackSite(frames->second);
    if (s.key.empty()) continue;
    SleepSite& site = by_key[s.key];
    site.site = s.display;
    site.seconds += Sec(ns);
    with_stack += Sec(ns);
  }
  if (by_key.empty()) return std::nullopt;
  auto top = std::max_element(by_key.begin(), by_key.end(), [](const auto& a, const auto& b) {
    return a.second.seconds < b.second.seconds;
  });
  SleepSite out = top->second;
  out.with_stack_s = with_stack;
  return out;
}

EvidenceQuery TimerWakeups(const Facts& f) {
  return {"the main thread's sleeps that a timer or an interrupt ended (waker 0), by length",
          Sql(f, "SELECT CASE WHEN e.duration_ns < 1000000 THEN '< 1 ms' WHEN e.duration_ns < "
                 "10000000 THEN '1-10 ms' WHEN e.duration_ns < 100000000 THEN '10-100 ms' ELSE "
                 "'>= 100 ms' END AS length, COUNT(*) AS sleeps, ROUND(SUM(e.duration_ns - "
                 "COALESCE(e.runq_ns, 0)) / 1e9, 3) AS asleep_s FROM {EVENTS} e WHERE "
                 "{e.IN_S}e.op = 'sched_switch' AND e.tid = " +
                     std::to_string(f.main_tid) +
                     " AND e.kind = 1 AND e.waker_pid = 0 AND e.timestamp >= {F} AND "
                     "e.timestamp < {T} GROUP BY length ORDER BY asleep_s DESC")};
}

EvidenceQuery ProgramWakeups(const Facts& f) {
  return {"the main thread's waits that another program ended, by that program",
          Sql(f,
              "SELECT e.waker_pid AS program_pid, p.name AS program, COUNT(*) AS waits, "
              "ROUND(SUM(e.duration_ns - COALESCE(e.runq_ns, 0)) / 1e9, 3) AS waited_s FROM "
              "{EVENTS} e LEFT JOIN processes p ON p.session = e.session AND p.pid = "
              "e.waker_pid WHERE {e.IN_S}e.op = 'sched_switch' AND e.tid = " +
                  std::to_string(f.main_tid) +
                  " AND e.kind = 1 AND e.waker_pid > 0 AND e.waker_pid NOT IN ({FEED}) AND "
                  "e.timestamp >= {F} AND e.timestamp < {T} GROUP BY e.waker_pid ORDER BY "
                  "waited_s DESC")};
}

}  // namespace

void HostSleep(const Facts& f, std::vector<Finding>* out) {
  double lost = BudgetLostS(f, BudgetCause::kHostSleep);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s), th::kHighLostShare,
                                       th::kMediumLostShare, th::kWaitLowShare);
  if (!sev) return;
  Finding x;
  x.rule = "host-sleep";
  x.severity = *sev;
  x.cause = "The main thread sleeps on its critical path (a timer or an interrupt wakes it)";
  x.effect = "GPU idle while the main thread sleeps";
  x.lost_s = lost;
  double path = BudgetPathS(f, BudgetCause::kHostSleep);
  x.root.push_back(Fmt("Main thread asleep %s times until a timer or an interrupt woke it, no "
                       "thread of the job running meanwhile: %s",
                       FormatCount(f.holders.sleeps).c_str(),
                       IdleLine(f, BudgetCause::kHostSleep).c_str()));
  if (f.holders.sleeps > 0) {
    x.root.push_back(Fmt("%s asleep per sleep on average",
                         FormatNs(static_cast<int64_t>(
                                      path * 1e9 / static_cast<double>(f.holders.sleeps)))
                             .c_str()));
  }
  if (std::optional<SleepSite> site = TopSleepSite(f)) {
    x.root.push_back(Fmt("Where it slept: %s (%s s of the %s s asleep with a stack)",
                         (SiteName(site->site) +
                          (site->site.via.empty() ? "" : " (via " + site->site.via + ")"))
                             .c_str(),
                         FormatSeconds(site->seconds).c_str(),
                         FormatSeconds(site->with_stack_s).c_str()));
  }
  x.effects.push_back(GpuBusyLine(f));
  AddThroughputEffect(f, &x);
  x.fix.push_back(
      "take the sleep or the polling out of the training loop: wait on the thing itself "
      "(threading.Event.wait(), a blocking queue.get()) instead of time.sleep() in a loop, and "
      "keep throttles out of the step");
  x.fix.push_back(
      "if the loop waits for a reply (network, a socket, a timeout), fetch it ahead on a "
      "background thread so the next step is queued on the GPU meanwhile");
  if (f.w->stack_frames.empty()) {
    x.fix.push_back(Fmt("find the line it sleeps on: record with gpuwhy trace --stack, or "
                        "py-spy dump --pid %d while it runs",
                        f.main_pid));
  }
  x.metrics.push_back({"sleeps", static_cast<double>(f.holders.sleeps), "count"});
  x.metrics.push_back({"asleep_path_s", path, "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {TimerWakeups(f), Throughput(f)});
  out->push_back(std::move(x));
}

void OtherProgram(const Facts& f, std::vector<Finding>* out) {
  double lost = BudgetLostS(f, BudgetCause::kOtherProgram);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s), th::kHighLostShare,
                                       th::kMediumLostShare, th::kWaitLowShare);
  if (!sev) return;
  // By program name: a subprocess run each step is a new pid each time.
  struct Program {
    std::string name;
    int64_t ns = 0;
    int32_t pid = 0;  // the one that held the path longest
    int64_t pid_ns = 0;
    int64_t pids = 0;
    bool started = false;  // started by the job (an exec'd child)
  };
  std::map<std::string, Program> by_name;
  for (const auto& [pid, ns] : f.holders.program) {
    Program& p = by_name[ProcessName(*f.w, pid)];
    p.name = ProcessName(*f.w, pid);
    p.ns += ns;
    ++p.pids;
    if (ns > p.pid_ns) p.pid = pid, p.pid_ns = ns;
    p.started |= std::find(f.child_pids.begin(), f.child_pids.end(), pid) != f.child_pids.end();
  }
  std::vector<Program> programs;
  for (auto& [name, p] : by_name) programs.push_back(std::move(p));
  std::sort(programs.begin(), programs.end(),
            [](const Program& a, const Program& b) { return a.ns > b.ns; });
  bool started = !programs.empty() && programs.front().started;
  Finding x;
  x.rule = "waits-for-program";
  x.severity = *sev;
  x.cause = started ? "The main thread waits for a program it started (a subprocess)"
                    : "The main thread waits for another program (a pipe, a socket, a service)";
  x.effect = "GPU idle while the other program works";
  x.lost_s = lost;
  x.root.push_back("Main thread waiting until another program woke it: " +
                   IdleLine(f, BudgetCause::kOtherProgram));
  std::string names;
  for (size_t i = 0; i < programs.size() && i < 3; ++i) {
    const Program& p = programs[i];
    std::string who = p.pids > 1 ? Fmt("%s (%s runs, e.g. PID %d)", p.name.c_str(),
                                       FormatCount(p.pids).c_str(), p.pid)
                                 : ProcessLabel(*f.w, p.pid);
    names += Fmt("%s%s %s s%s", i ? "; " : "", who.c_str(), FormatSeconds(Sec(p.ns)).c_str(),
                 p.started ? ", started by the job" : "");
  }
  if (!names.empty()) x.root.push_back("Woken by: " + names);
  if (programs.size() > 3) {
    x.root.push_back(Fmt("and %s more programs",
                         FormatCount(static_cast<int64_t>(programs.size()) - 3).c_str()));
  }
  x.effects.push_back(GpuBusyLine(f));
  AddThroughputEffect(f, &x);
  if (started) {
    x.fix.push_back(
        "do not wait for it on the training thread: start it with subprocess.Popen and collect "
        "it later (or from a background thread), so the GPU keeps stepping while it runs");
    x.fix.push_back("run it less often, or only on one rank, if its result is not needed every "
                    "step");
  } else {
    x.fix.push_back(
        "ask for the next result ahead of time (a background thread or a prefetch queue), so "
        "the GPU runs this step while the other program produces the next");
    x.fix.push_back("or make that program keep up: give it more CPUs or more instances");
  }
  x.metrics.push_back({"programs", static_cast<double>(f.holders.program.size()), "count"});
  x.metrics.push_back({"waiting_path_s", BudgetPathS(f, BudgetCause::kOtherProgram), "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {ProgramWakeups(f), Throughput(f)});
  out->push_back(std::move(x));
}

void LoaderWaits(const Facts& f, std::vector<Finding>* out) {
  if (f.worker_pids.empty()) return;
  double lost = BatchLostS(f, BudgetCause::kBatchWait);
  std::optional<Severity> sev = Ladder(Share(lost, f.budget.window_s));
  if (!sev) return;
  int64_t workers = static_cast<int64_t>(f.worker_pids.size());
  Finding x;
  x.rule = "loader-waits";
  x.severity = *sev;
  x.cause = "DataLoader workers wait on the network or a timer (neither computing nor reading "
            "local storage)";
  x.effect = "GPU idle between steps, waiting for batches";
  x.lost_s = lost;
  x.root.push_back(Fmt("Main thread waited for batches %s times, %s s in all",
                       FormatCount(f.waits.count).c_str(),
                       FormatSeconds(Sec(f.waits.total_ns)).c_str()));
  x.root.push_back(Fmt(
      "The worker that owed the batch was asleep until the network or a timer woke it %s s of "
      "those waits, computing %s s, on local I/O %s s",
      FormatSeconds(BudgetPathS(f, BudgetCause::kBatchWait)).c_str(),
      FormatSeconds(BudgetPathS(f, BudgetCause::kBatchCompute)).c_str(),
      FormatSeconds(BudgetPathS(f, BudgetCause::kBatchIo)).c_str()));
  if (std::string cycles = BatchCycleLine(f); !cycles.empty()) x.root.push_back(cycles);
  x.root.push_back(Fmt("GPU idle while the main thread waited for those batches: %s s of %s s "
                       "(the workers' computing in those waits included: it would have been "
                       "hidden behind the GPU's work without the sleeps)",
                       FormatSeconds(lost).c_str(), FormatSeconds(f.budget.window_s).c_str()));
  if (f.worker_thread_ns > 0) {
    x.contributing.push_back(
        Fmt("%s, their busiest threads on the CPU %s of the time",
            Plural(workers, "DataLoader worker", "DataLoader workers").c_str(),
            FormatPct(Share(static_cast<double>(At(f.worker_totals, FeedCause::kRunning)),
                            static_cast<double>(f.worker_thread_ns)))
                .c_str()));
  }
  AddThroughputEffect(f, &x);
  // Workers that mostly sleep scale with their number: the loader must deliver window /
  // (window - lost) times as fast for the waits to go, plus one for the variance.
  double need = static_cast<double>(workers) * f.budget.window_s /
                std::max(1e-9, f.budget.window_s - std::min(lost, 0.9 * f.budget.window_s));
  x.fix.push_back(Fmt(
      "more requests in flight: a worker asleep on the network costs no CPU, so more workers "
      "(DataLoader(num_workers=%lld) or more) or concurrent fetches inside the dataset hide the "
      "latency; prefetch_factor=4 queues more batches ahead",
      static_cast<long long>(std::ceil(need - 1e-9)) + 1));
  x.fix.push_back(
      "stage the data where it is read fast: copy the shards to local disk or RAM before "
      "training, or cache them after the first epoch");
  x.fix.push_back(
      "if the workers sleep on purpose (retries with back-off, rate limits), shorten or remove "
      "the sleeps");
  x.metrics.push_back({"batch_waits", static_cast<double>(f.waits.count), "count"});
  x.metrics.push_back({"batch_wait_s", Sec(f.waits.total_ns), "s"});
  x.metrics.push_back({"workers_asleep_path_s", BudgetPathS(f, BudgetCause::kBatchWait), "s"});
  x.metrics.push_back({"lost_s", x.lost_s, "s"});
  AddBudgetEvidence(f, &x);
  SetEvidence(&x, {SwitchKinds(f), Throughput(f)});
  out->push_back(std::move(x));
}

}  // namespace gw::rules
