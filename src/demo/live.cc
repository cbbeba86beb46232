#include "demo/live.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <optional>

#include "capture/child_process.h"
#include "capture/tracer.h"
#include "demo/blkio_throttle.h"

namespace gw {

namespace {

// The io-bottleneck scenario's disk: 32 MB batches take 0.25 s to read, ~30 steps' worth.
constexpr int64_t kLiveIoReadBps = 128LL << 20;

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

// Removes a file when it goes out of scope ("" = none).
struct FileRemover {
  std::string path;
  ~FileRemover() {
    if (!path.empty()) unlink(path.c_str());
  }
};

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

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
      {"dataloader-starvation",
       "one of the 2 workers spends 40 ms more CPU on each batch",
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
      {"memcpy-bottleneck",
       "64 MB batches in pageable host memory (staged, synchronous copies)",
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

Status CheckLiveDemoCanRun(const LiveScenario& scenario, int64_t duration_ns) {
  if (geteuid() != 0) {
    return PermissionDenied("gpuwhy demo --live traces with eBPF and needs root (running as uid " +
                            std::to_string(geteuid()) + ") — hint: sudo gpuwhy demo --live " +
                            scenario.name + " (or `gpuwhy demo " + scenario.name +
                            "` for the synthetic recording, no root)");
  }
  RETURN_IF_ERROR(FindSimNextToExe().status());
  if (duration_ns < 5'000'000'000) {
    return InvalidArgument("--duration for --live must be at least 5s");
  }
  return Status::Ok();
}

StatusOr<LiveDemoRecording> RecordLiveDemo(const LiveDemoOptions& options) {
  const LiveScenario* scenario = options.scenario;
  GW_CHECK(scenario != nullptr);
  auto progress = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  auto interrupted = [&] { return options.interrupt != nullptr && options.interrupt->load(); };
  RETURN_IF_ERROR(CheckLiveDemoCanRun(*scenario, options.duration_ns));
  ASSIGN_OR_RETURN(SimPaths sim, FindSimNextToExe());
  int64_t duration_s = options.duration_ns / 1'000'000'000;

  std::string io_file;
  if (scenario->io_file) {
    progress("writing a 256 MB cold file for O_DIRECT reads…");
    ASSIGN_OR_RETURN(io_file, MakeColdFile(256LL << 20));
  }
  FileRemover io_remover{io_file};

  // The workloads' output (the trainer's --report line) goes to a private log, shown on error.
  char log_tmpl[] = "/tmp/gpuwhy-live-log-XXXXXX";
  int log_fd = mkstemp(log_tmpl);
  if (log_fd >= 0) unlink(log_tmpl);
  FdCloser log_closer{log_fd};

  // Slow storage for real: the workload's reads of the cold file are capped at the disk (the
  // group outlives the children, which must leave it before it can be removed).
  std::optional<BlkioThrottle> throttle;
  if (!io_file.empty()) {
    StatusOr<BlkioThrottle> t = BlkioThrottle::Create(io_file, kLiveIoReadBps);
    if (t.ok()) {
      throttle.emplace(std::move(*t));
    } else {
      progress("note: reads are not throttled (" + t.status().message() +
               "); how slow they are depends on this machine's disk");
    }
  }
  int cpu = FirstAllowedCpu();
  ChildSet children;  // declared after everything the children use; stopped first
  std::vector<std::string> loop_argv = {sim.bin + "/gw_train_loop", "--duration",
                                        std::to_string(duration_s + 5), "--report"};
  for (const std::string& a : scenario->loop_args) {
    loop_argv.push_back(a == "{CPU}" ? std::to_string(cpu) : a);
  }
  if (!io_file.empty()) {
    loop_argv.push_back("--io-file");
    loop_argv.push_back(io_file);
  }
  if (scenario->pinned) {
    progress(std::string("starting workload (") + scenario->name +
             ": gw_train_loop pinned to CPU " + std::to_string(cpu) + ")…");
  } else {
    progress(std::string("starting workload (") + scenario->name + ": gw_train_loop)…");
  }
  ASSIGN_OR_RETURN(pid_t loop,
                   children.Spawn(loop_argv, scenario->pinned ? cpu : -1, log_fd, /*gated=*/true));
  if (throttle.has_value()) {
    RETURN_IF_ERROR(throttle->Add(loop));
    progress("reads from disk " + throttle->device() + " capped at " +
             std::to_string(kLiveIoReadBps >> 20) + " MB/s (cgroup blkio)");
  }
  if (scenario->pinned) MoveSelfOffCpu(cpu);

  TracerOptions topts;
  topts.duration_ns = options.duration_ns;
  topts.pids = {static_cast<int32_t>(loop)};
  topts.db_path = options.db_path;
  topts.sources.cuda.libraries = {sim.lib};
  // The simulated NVML next to the simulated runtime: GPU truth from the simulated device.
  if (access((sim.lib + "/libnvidia-ml.so.1").c_str(), R_OK) == 0) {
    topts.nvml_lib = sim.lib + "/libnvidia-ml.so.1";
  }
  topts.version = options.version;
  topts.command_line = options.command_line;
  ASSIGN_OR_RETURN(std::unique_ptr<Tracer> tracer, Tracer::Create(topts));
  RETURN_IF_ERROR(tracer->Start());
  RETURN_IF_ERROR(children.Release(loop));

  progress("tracing " + std::to_string(duration_s) + "s…");
  int64_t inject_at_ns = options.duration_ns / 3;
  bool injected = scenario->competitors == 0;
  bool loop_died = false;
  std::atomic<bool> stop{false};
  Status spawn_error = Status::Ok();
  tracer->Wait(&stop, [&] {
    if (interrupted()) stop.store(true);
    if (children.Exited(loop)) {
      loop_died = true;
      stop.store(true);
      return;
    }
    if (!injected && tracer->ElapsedNs() >= inject_at_ns) {
      injected = true;
      progress("injecting " + std::to_string(scenario->competitors) +
               " noisy_neighbor CPU burners on CPU " + std::to_string(cpu) + "…");
      for (int i = 0; i < scenario->competitors; ++i) {
        StatusOr<pid_t> c = children.Spawn({sim.bin + "/gw_competitor", "--duration", "0", "--cpu",
                                            std::to_string(cpu), "--comm", "noisy_neighbor"},
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
  RETURN_IF_ERROR(summary.status());
  RETURN_IF_ERROR(summary->store_error);
  RETURN_IF_ERROR(spawn_error);
  LiveDemoRecording recording;
  recording.session_id = summary->session_id;
  recording.events = summary->events;
  if (interrupted()) {
    recording.interrupted = true;
    return recording;
  }
  if (loop_died) {
    std::string log;
    if (log_fd >= 0) {
      char buf[4096];
      ssize_t n = pread(log_fd, buf, sizeof(buf), 0);
      if (n > 0) log.assign(buf, static_cast<size_t>(n));
    }
    return Internal("gw_train_loop exited early; its output:\n" + log);
  }
  return recording;
}

}  // namespace gw
