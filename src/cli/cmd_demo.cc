#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analysis/explain.h"
#include "capture/tracer.h"
#include "cli/blkio_throttle.h"
#include "cli/child_process.h"
#include "cli/commands.h"
#include "demo/generator.h"
#include "demo/scenarios.h"
#include "store/reader.h"

namespace gw {

namespace {

// The io-bottleneck scenario's disk: 32 MB batches take 0.25 s to read, ~30 steps' worth.
constexpr int64_t kLiveIoReadBps = 128LL << 20;

void ListLiveScenarios(FILE* out);

void ListScenarios(FILE* out) {
  std::fprintf(out, "Scenarios (gpuwhy demo <scenario>):\n");
  for (const ScenarioInfo& s : AllScenarios()) {
    std::fprintf(out, "  %-22s %s\n", s.name.c_str(), s.summary.c_str());
  }
  std::fprintf(out,
               "\nEach records a synthetic %s trace (baseline → incident → recovery) and runs\n"
               "`gpuwhy explain` on it. --keep FILE keeps the database for `gpuwhy query`.\n",
               "120 s");
  std::fprintf(out,
               "\nAs root, --live runs a real workload on the simulated CUDA runtime with the fault\n"
               "really injected, traces it with eBPF and explains it (this is `make demo`):\n"
               "  sudo gpuwhy demo --live [scenario]    (default cpu-contention, --duration 20s)\n");
  ListLiveScenarios(out);
}

// A private temporary file that is removed when this goes out of scope.
class TempDb {
 public:
  static StatusOr<TempDb> Create() {
    const char* dir = std::getenv("TMPDIR");
    std::string tmpl = std::string(dir && *dir ? dir : "/tmp") + "/gpuwhy-demo-XXXXXX";
    int fd = mkstemp(tmpl.data());
    if (fd < 0) return ErrnoStatus("create temporary database " + tmpl, errno);
    close(fd);
    unlink(tmpl.c_str());  // the writer creates it fresh
    return TempDb(tmpl);
  }
  TempDb(TempDb&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  TempDb(const TempDb&) = delete;
  TempDb& operator=(const TempDb&) = delete;
  TempDb& operator=(TempDb&&) = delete;
  ~TempDb() {
    if (path_.empty()) return;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
      unlink((path_ + suffix).c_str());
    }
  }
  const std::string& path() const { return path_; }

 private:
  explicit TempDb(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// ---- gpuwhy demo --live: the real capture path over the simulated CUDA runtime -------------

std::atomic<bool> g_live_stop{false};

void OnLiveStopSignal(int) { g_live_stop.store(true); }

struct LiveScenario {
  const char* name;
  const char* summary;
  std::vector<std::string> loop_args;  // gw_train_loop flags besides --duration
  int competitors = 0;                 // gw_competitor processes on the training CPU
  bool io_file = false;                // --io-file on a cold file, opened with O_DIRECT
  bool pinned = true;                  // the loop (and competitors) on one CPU
};

// Same loop for every scenario, shaped like a PyTorch job (--shape pytorch: a main thread that
// hands backward to an autograd thread, a pin-memory thread fed by forked 3-thread workers);
// only the injected fault differs. 8 kernels × 1 ms per step keep the GPU the bottleneck when
// the host is healthy; 2 workers × 5 ms of CPU per batch fit on the one pinned CPU with room to
// spare until competitors share it. "{CPU}" in loop_args is the training CPU. The healthy control
// is lighter and not pinned: on a 2-core host, 2 workers × 5 ms on the trainer's CPU cost it about
// 5% of the window in run-queue waits, which is real contention (MEDIUM), not a healthy job.
const std::vector<LiveScenario>& LiveScenarios() {
  static const std::vector<LiveScenario> kScenarios = {
      {"cpu-contention",
       "3 \"noisy_neighbor\" CPU burners pinned to the training loop's CPU from 1/3 in",
       {"--shape", "pytorch", "--workers", "2", "--batch-cpu-ms", "5"},
       3,
       false},
      {"healthy",
       "the same loop shape, light (1 worker, 1 ms of CPU per batch), not pinned, nothing "
       "injected",
       {"--shape", "pytorch", "--workers", "1", "--batch-cpu-ms", "1"},
       0,
       false,
       false},
      {"dataloader-starvation", "one of the 2 workers spends 40 ms more CPU on each batch",
       {"--shape", "pytorch", "--workers", "2", "--batch-cpu-ms", "5", "--slow-worker-ms", "40"},
       0,
       false,
       false},
      {"child-hogs",
       "the training program starts 3 CPU-burning helper programs (fork+exec) on its own CPU",
       {"--shape", "pytorch", "--workers", "2", "--batch-cpu-ms", "5", "--exec-helpers", "3",
        "--helper-cpu", "{CPU}"},
       0,
       false},
      {"memcpy-bottleneck", "64 MB batches in pageable host memory (staged, synchronous copies)",
       {"--shape", "pytorch", "--workers", "1", "--batch-cpu-ms", "0", "--pageable",
        "--batch-bytes", "64M", "--kernels-per-step", "2"},
       0,
       false,
       false},
      {"io-bottleneck",
       "the worker reads 32 MB batches with O_DIRECT from a cold file on a disk throttled to "
       "128 MB/s",
       {"--shape", "pytorch", "--workers", "1", "--batch-cpu-ms", "0", "--batch-bytes", "32M",
        "--odirect"},
       0,
       true,
       false},
  };
  return kScenarios;
}

const LiveScenario* FindLiveScenario(const std::string& name) {
  for (const LiveScenario& s : LiveScenarios()) {
    if (name == s.name) return &s;
  }
  return nullptr;
}

void ListLiveScenarios(FILE* out) {
  std::fprintf(out, "Live scenarios (sudo gpuwhy demo --live <scenario>; default cpu-contention):\n");
  for (const LiveScenario& s : LiveScenarios()) {
    std::fprintf(out, "  %-22s %s\n", s.name, s.summary);
  }
}

struct SimPaths {
  std::string bin;
  std::string lib;
};

StatusOr<SimPaths> FindSimNextToExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return ErrnoStatus("readlink /proc/self/exe", errno);
  std::string exe(buf, static_cast<size_t>(n));
  std::string dir = exe.substr(0, exe.rfind('/'));
  SimPaths p{dir + "/sim/bin", dir + "/sim/lib"};
  for (const std::string& f : {p.bin + "/gw_train_loop", p.bin + "/gw_competitor"}) {
    if (access(f.c_str(), X_OK) != 0) {
      return FailedPrecondition("the simulated runtime is not built next to this gpuwhy: " + f +
                                " is missing — hint: run `make build` (or build the target "
                                "gwsim_all) and use the gpuwhy from that build directory");
    }
  }
  if (access((p.lib + "/libcudart.so.13").c_str(), R_OK) != 0) {
    return FailedPrecondition("the simulated runtime is not built next to this gpuwhy: " + p.lib +
                              "/libcudart.so.13 is missing — hint: run `make build`");
  }
  return p;
}

// The first CPU this process may run on; the workload and the competitors share it.
int FirstAllowedCpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 0;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) return c;
  }
  return 0;
}

// Moves gpuwhy itself (and the tracer threads it starts afterwards) off the workload's CPU when
// another one is allowed, so the tracer is not one of the processes competing with the job.
void MoveSelfOffCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2) return;
  CPU_CLR(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set);
}

// Children started by the live demo. Each is killed (SIGTERM, then SIGKILL) and reaped when
// this goes out of scope; each also gets PR_SET_PDEATHSIG so it dies if gpuwhy is killed.
class ChildSet {
 public:
  ChildSet() = default;
  ChildSet(const ChildSet&) = delete;
  ChildSet& operator=(const ChildSet&) = delete;
  ~ChildSet() { StopAll(); }

  // Starts a child pinned to `cpu` (< 0: not pinned) with stdout/stderr to `log_fd`, in its own
  // process group (a terminal's Ctrl-C reaches gpuwhy, which stops the children). With a gate,
  // it waits until Release() before exec, so a tracer can follow it from its first instruction.
  StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, int cpu, int log_fd, bool gated) {
    ChildOptions options;
    options.argv = argv;
    options.cpu = cpu;
    options.output_fd = log_fd;
    options.stdin_null = true;
    options.own_process_group = true;
    options.die_with_parent = true;
    ASSIGN_OR_RETURN(GatedChild child, GatedChild::Spawn(options));
    pid_t pid = child.pid();
    children_.push_back(std::move(child));
    if (!gated) RETURN_IF_ERROR(Release(pid));
    return pid;
  }

  Status Release(pid_t pid) {
    GatedChild* child = Find(pid);
    return child == nullptr ? Status::Ok() : child->Release();
  }

  // True when `pid` has exited (it is reaped then).
  bool Exited(pid_t pid) {
    GatedChild* child = Find(pid);
    int code = 0;
    return child == nullptr || child->Exited(&code);
  }

  void StopAll() {
    int code = 0;
    for (GatedChild& c : children_) {
      if (!c.Exited(&code)) kill(c.pid(), SIGTERM);
    }
    // Up to ~2 s for a clean exit (the trainer stops its own workers), then SIGKILL.
    for (int i = 0; i < 200; ++i) {
      bool running = false;
      for (GatedChild& c : children_) running |= !c.Exited(&code);
      if (!running) break;
      usleep(10'000);
    }
    for (GatedChild& c : children_) {
      if (!c.Exited(&code)) {
        kill(c.pid(), SIGKILL);
        c.Wait();
      }
    }
    children_.clear();
  }

 private:
  GatedChild* Find(pid_t pid) {
    for (GatedChild& c : children_) {
      if (c.pid() == pid) return &c;
    }
    return nullptr;
  }
  std::vector<GatedChild> children_;
};

// A cold file for the io-bottleneck scenario (O_DIRECT reads never hit the page cache). On
// /var/tmp, not /tmp: tmpfs has no O_DIRECT.
StatusOr<std::string> MakeColdFile(int64_t bytes) {
  std::string tmpl = "/var/tmp/gpuwhy-live-io-XXXXXX";
  int fd = mkstemp(tmpl.data());
  if (fd < 0) return ErrnoStatus("create " + tmpl, errno);
  std::vector<char> block(1 << 20, 'x');
  for (int64_t done = 0; done < bytes; done += static_cast<int64_t>(block.size())) {
    if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size())) {
      int err = errno;
      close(fd);
      unlink(tmpl.c_str());
      return ErrnoStatus("write " + tmpl, err);
    }
  }
  fdatasync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return tmpl;
}
// The database a demo records into: --keep FILE (a note when it already exists: the demo
// adds a session), else a temporary file removed when `temp` goes away.
StatusOr<std::string> DemoDatabasePath(const FlagSet& flags, std::optional<TempDb>* temp) {
  std::string path = flags.GetString("keep");
  if (path.empty()) {
    StatusOr<TempDb> t = TempDb::Create();
    if (!t.ok()) return t.status();
    temp->emplace(std::move(*t));
    return (*temp)->path();
  }
  if (access(path.c_str(), F_OK) == 0) {
    std::fprintf(stderr, "gpuwhy demo: %s exists — the demo adds a new session to it\n",
                 path.c_str());
  }
  return path;
}


int RunLiveDemo(const FlagSet& flags, const std::string& scenario_name,
                const ExplainOptions& options) {
  const LiveScenario* scenario = FindLiveScenario(scenario_name);
  if (scenario == nullptr) {
    std::fprintf(stderr, "gpuwhy demo: unknown live scenario '%s'\n\n", scenario_name.c_str());
    ListLiveScenarios(stderr);
    return kExitUsage;
  }
  if (geteuid() != 0) {
    return ReportError(PermissionDenied(
        "gpuwhy demo --live traces with eBPF and needs root (running as uid " +
        std::to_string(geteuid()) + ") — hint: sudo gpuwhy demo --live " + scenario_name +
        " (or `gpuwhy demo " + scenario_name + "` for the synthetic recording, no root)"));
  }
  StatusOr<SimPaths> sim = FindSimNextToExe();
  if (!sim.ok()) return ReportError(sim.status());
  int64_t duration_ns = flags.GetDurationNs("duration", 20'000'000'000);
  if (duration_ns < 5'000'000'000) {
    return ReportError(InvalidArgument("--duration for --live must be at least 5s"));
  }
  int64_t duration_s = duration_ns / 1'000'000'000;
  bool json = flags.GetBool("json");

  std::optional<TempDb> temp;
  StatusOr<std::string> path_or = DemoDatabasePath(flags, &temp);
  if (!path_or.ok()) return ReportError(path_or.status());
  std::string path = *path_or;
  std::string io_file;
  if (scenario->io_file) {
    std::fprintf(stderr, "gpuwhy demo --live: writing a 256 MB cold file for O_DIRECT reads…\n");
    StatusOr<std::string> f = MakeColdFile(256LL << 20);
    if (!f.ok()) return ReportError(f.status());
    io_file = *f;
  }
  struct FileRemover {
    std::string path;
    ~FileRemover() {
      if (!path.empty()) unlink(path.c_str());
    }
  } io_remover{io_file};

  // The workloads' output (the trainer's --report line) goes to a private log, shown on error.
  char log_tmpl[] = "/tmp/gpuwhy-live-log-XXXXXX";
  int log_fd = mkstemp(log_tmpl);
  if (log_fd >= 0) unlink(log_tmpl);
  struct FdCloser {
    int fd;
    ~FdCloser() {
      if (fd >= 0) close(fd);
    }
  } log_closer{log_fd};

  struct sigaction sa {};
  sa.sa_handler = OnLiveStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Slow storage for real: the workload's reads of the cold file are capped at the disk (the
  // group outlives the children, which must leave it before it can be removed).
  std::optional<BlkioThrottle> throttle;
  if (!io_file.empty()) {
    StatusOr<BlkioThrottle> t = BlkioThrottle::Create(io_file, kLiveIoReadBps);
    if (t.ok()) {
      throttle.emplace(std::move(*t));
    } else {
      std::fprintf(stderr,
                   "gpuwhy demo --live: note: reads are not throttled (%s); how slow they are "
                   "depends on this machine's disk\n",
                   t.status().message().c_str());
    }
  }
  int cpu = FirstAllowedCpu();
  ChildSet children;  // declared after everything the children use; stopped first
  std::vector<std::string> loop_argv = {sim->bin + "/gw_train_loop", "--duration",
                                        std::to_string(duration_s + 5), "--report"};
  for (const std::string& a : scenario->loop_args) {
    loop_argv.push_back(a == "{CPU}" ? std::to_string(cpu) : a);
  }
  if (!io_file.empty()) {
    loop_argv.push_back("--io-file");
    loop_argv.push_back(io_file);
  }
  if (scenario->pinned) {
    std::fprintf(stderr,
                 "gpuwhy demo --live: starting workload (%s: gw_train_loop pinned to CPU %d)…\n",
                 scenario->name, cpu);
  } else {
    std::fprintf(stderr, "gpuwhy demo --live: starting workload (%s: gw_train_loop)…\n",
                 scenario->name);
  }
  StatusOr<pid_t> loop =
      children.Spawn(loop_argv, scenario->pinned ? cpu : -1, log_fd, /*gated=*/true);
  if (!loop.ok()) return ReportError(loop.status());
  if (throttle.has_value()) {
    if (Status st = throttle->Add(*loop); !st.ok()) return ReportError(st);
    std::fprintf(stderr, "gpuwhy demo --live: reads from disk %s capped at %lld MB/s (cgroup blkio)\n",
                 throttle->device().c_str(), static_cast<long long>(kLiveIoReadBps >> 20));
  }
  if (scenario->pinned) MoveSelfOffCpu(cpu);

  TracerOptions topts;
  topts.duration_ns = duration_ns;
  topts.pids = {static_cast<int32_t>(*loop)};
  topts.db_path = path;
  topts.cuda_libs = {sim->lib};
  // The simulated NVML next to the simulated runtime: GPU truth from the simulated device.
  if (access((sim->lib + "/libnvidia-ml.so.1").c_str(), R_OK) == 0) {
    topts.nvml_lib = sim->lib + "/libnvidia-ml.so.1";
  }
  topts.version = VersionString();
  topts.command_line = CommandLine();
  StatusOr<std::unique_ptr<Tracer>> created = Tracer::Create(topts);
  if (!created.ok()) return ReportError(created.status());
  std::unique_ptr<Tracer> tracer = std::move(created).value();
  if (Status st = tracer->Start(); !st.ok()) return ReportError(st);
  if (Status st = children.Release(*loop); !st.ok()) return ReportError(st);

  std::fprintf(stderr, "gpuwhy demo --live: tracing %llds…\n", static_cast<long long>(duration_s));
  int64_t inject_at_ns = duration_ns / 3;
  bool injected = scenario->competitors == 0;
  bool loop_died = false;
  std::atomic<bool> stop{false};
  Status spawn_error = Status::Ok();
  tracer->Wait(&stop, [&] {
    if (g_live_stop.load()) stop.store(true);
    if (children.Exited(*loop)) {
      loop_died = true;
      stop.store(true);
      return;
    }
    if (!injected && tracer->ElapsedNs() >= inject_at_ns) {
      injected = true;
      std::fprintf(stderr,
                   "gpuwhy demo --live: injecting %d noisy_neighbor CPU burners on CPU %d…\n",
                   scenario->competitors, cpu);
      for (int i = 0; i < scenario->competitors; ++i) {
        StatusOr<pid_t> c = children.Spawn(
            {sim->bin + "/gw_competitor", "--duration", "0", "--cpu", std::to_string(cpu),
             "--comm", "noisy_neighbor"},
            cpu, log_fd, /*gated=*/false);
        if (!c.ok()) {
          spawn_error = c.status();
          stop.store(true);
        }
      }
    }
  });
  // Stop the tracer while the workload still runs (its steady state is the recording), then
  // the children.
  StatusOr<TraceSummary> summary = tracer->Stop();
  children.StopAll();
  if (!summary.ok()) return ReportError(summary.status());
  if (!summary->store_error.ok()) return ReportError(summary->store_error);
  if (!spawn_error.ok()) return ReportError(spawn_error);
  if (g_live_stop.load()) {
    std::fprintf(stderr, "gpuwhy demo --live: interrupted; workload stopped\n");
    return 130;  // 128 + SIGINT, like a shell
  }
  if (loop_died) {
    std::string log;
    if (log_fd >= 0) {
      char buf[4096];
      ssize_t n = pread(log_fd, buf, sizeof(buf), 0);
      if (n > 0) log.assign(buf, static_cast<size_t>(n));
    }
    return ReportError(Internal("gw_train_loop exited early; its output:\n" + log));
  }

  std::fprintf(stderr, "gpuwhy demo --live: explaining…\n");
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, options);
  if (!report.ok()) return ReportError(report.status());
  if (!json) {
    std::printf("$ gpuwhy explain --since %llds   # live demo: %s (real eBPF, simulated GPU, "
                "%lld events)\n",
                static_cast<long long>(options.window.since_ns.value_or(kDefaultSinceNs) /
                                       1'000'000'000),
                scenario->name,
                static_cast<long long>(summary->events));
  }
  std::string text = json ? ReportToJson(*report) : ReportToText(*report);
  std::fputs(text.c_str(), stdout);
  if (temp.has_value()) {
    if (!json) {
      std::printf("\n(demo database removed; keep it with --keep FILE to run `gpuwhy query`)\n");
    }
  } else {
    std::fprintf(stderr, "gpuwhy demo: recording kept in %s (session %lld)\n", path.c_str(),
                 static_cast<long long>(summary->session_id));
  }
  return kExitOk;
}

}  // namespace

int RunDemo(const Args& args) {
  FlagSet flags("demo", "gpuwhy demo [scenario] [flags]",
                "Records a synthetic trace of a GPU training job with one injected problem\n"
                "(no root, no GPU) and explains it. With no scenario, lists them.\n\n"
                "With --live (needs root; no GPU): runs gw_train_loop on the simulated CUDA\n"
                "runtime built next to this gpuwhy (<dir of gpuwhy>/sim/bin and sim/lib) with\n"
                "the fault really injected, traces it with eBPF through the same capture path\n"
                "as `gpuwhy trace` (into a temporary database, or --keep FILE) and explains it.\n"
                "Live scenarios (default cpu-contention):\n"
                "  cpu-contention     loop pinned to one CPU; from a third of the way in, 3\n"
                "                     gw_competitor burners named noisy_neighbor on that CPU\n"
                "  healthy            the same loop, light and not pinned, nothing injected\n"
                "  memcpy-bottleneck  64 MB batches copied from pageable host memory\n"
                "  io-bottleneck      the worker reads 32 MB batches with O_DIRECT from a cold\n"
                "                     256 MB file in /var/tmp (removed afterwards), its disk's\n"
                "                     reads capped at 128 MB/s for the workload (cgroup v1 blkio)\n"
                "Progress goes to stderr. Every process it starts is stopped when it ends,\n"
                "including on Ctrl-C (exit 130). --seed applies to synthetic scenarios only.");
  flags.Add({"keep", FlagKind::kString, "FILE", "write the recording to FILE and keep it", ""})
      .Add({"seed", FlagKind::kInt, "N", "random seed (same seed, same recording)", "1"})
      .Add({"live", FlagKind::kBool, "",
            "run and trace a real workload on the simulated GPU instead (root)", ""})
      .Add({"duration", FlagKind::kDuration, "DUR", "length of the recording",
            "120s; 20s with --live, at least 5s"});
  AddExplainWindowFlags(flags);
  int code = 0;
  if (!ParseOrExit(flags, args, &code)) return code;
  bool live = flags.GetBool("live");
  if (flags.positionals().empty() && !live) {
    ListScenarios(stdout);
    return kExitOk;
  }
  if (flags.positionals().size() > 1) {
    std::fprintf(stderr, "gpuwhy demo: expected one scenario\n");
    return kExitUsage;
  }
  if (live) {
    StatusOr<ExplainOptions> live_options = ExplainOptionsFromFlags(flags);
    if (!live_options.ok()) return ReportError(live_options.status());
    return RunLiveDemo(flags, flags.positionals().empty() ? "cpu-contention"
                                                          : flags.positionals()[0],
                       *live_options);
  }
  const std::string& scenario = flags.positionals()[0];
  if (FindScenario(scenario) == nullptr) {
    std::fprintf(stderr, "gpuwhy demo: unknown scenario '%s'\n\n", scenario.c_str());
    ListScenarios(stderr);
    return kExitUsage;
  }
  StatusOr<ExplainOptions> options = ExplainOptionsFromFlags(flags);
  if (!options.ok()) return ReportError(options.status());
  DemoOptions demo;
  demo.seed = static_cast<uint64_t>(flags.GetInt("seed", 1));
  demo.duration_s = flags.GetDurationNs("duration", 120'000'000'000) / 1'000'000'000;

  std::optional<TempDb> temp;
  StatusOr<std::string> path_or = DemoDatabasePath(flags, &temp);
  if (!path_or.ok()) return ReportError(path_or.status());
  std::string path = *path_or;
  StatusOr<DemoStats> stats = WriteDemoDatabase(scenario, path, demo);
  if (!stats.ok()) return ReportError(stats.status());
  auto reader = StoreReader::Open(path);
  if (!reader.ok()) return ReportError(reader.status());
  StatusOr<Report> report = Explain(**reader, *options);
  if (!report.ok()) return ReportError(report.status());
  if (!flags.GetBool("json")) {
    std::printf("$ gpuwhy explain --since %llds   # demo scenario: %s (synthetic, %lld events)\n",
                static_cast<long long>(options->window.since_ns.value_or(kDefaultSinceNs) /
                                            1'000'000'000), scenario.c_str(),
                static_cast<long long>(stats->events));
  }
  std::string text = flags.GetBool("json") ? ReportToJson(*report) : ReportToText(*report);
  std::fputs(text.c_str(), stdout);
  if (temp.has_value()) {
    if (!flags.GetBool("json")) {
      std::printf("\n(demo database removed; keep it with --keep FILE to run `gpuwhy query`)\n");
    }
  } else {
    std::fprintf(stderr, "gpuwhy demo: recording kept in %s (session %lld)\n", path.c_str(),
                 static_cast<long long>(stats->session));
  }
  return kExitOk;
}

}  // namespace gw
