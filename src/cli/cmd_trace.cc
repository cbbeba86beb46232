// gpuwhy trace: record CUDA API calls and host kernel events of GPU jobs into the database,
// with a live view (or JSON lines) while it runs.
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <sstream>
#include <string_view>

#include "base/table.h"
#include "base/text.h"
#include "base/trusted_path.h"
#include "capture/child_process.h"
#include "capture/tracer.h"
#include "cli/commands.h"
#include "cli/trace_prometheus.h"
#include "clickhouse/schema.h"
#include "clickhouse/sink.h"
#include "discover/cuda_libs.h"
#include "sources/system/container.h"
#include "sources/system/host_info.h"
#include "store/window.h"

namespace gw {

namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_stop_signal{0};         // the signal that stopped the trace
std::atomic<bool> g_stop_from_tty{false};  // sent by the terminal (the job got it too)

void OnStopSignal(int sig, siginfo_t* info, void*) {
  g_stop_signal.store(sig);
  g_stop_from_tty.store(info != nullptr && info->si_code == SI_KERNEL);
  g_stop.store(true);
}

// The job of `trace -- CMD` once released, and whether it has a session of its own (run as
// the sudo user): then a terminal's signals reach gpuwhy alone, and gpuwhy passes them on.
std::atomic<pid_t> g_job_pid{0};
std::atomic<bool> g_job_own_session{false};

// Where a signal gpuwhy got goes: a terminal's (Ctrl-C, Ctrl-\, Ctrl-Z, a resize, a hangup)
// to the job's process group, as the terminal would have sent it; any other to the job's
// process. 0: nowhere (the job is gone, or shares gpuwhy's group and the terminal reached it).
pid_t ForwardTarget(int sig, bool from_tty) {
  pid_t job = g_job_pid.load();
  if (job <= 0) return 0;
  if (!g_job_own_session.load()) return from_tty ? 0 : job;
  return from_tty || sig == SIGCONT ? -job : job;
}

// Every other catchable signal while a job runs under the tracer (SIGUSR1, SIGQUIT, SIGWINCH,
// real-time signals, …): passed on, and the tracer keeps going. A stop request (Ctrl-Z) stops
// the job (SIGSTOP: its own session has no terminal to stop it) and then gpuwhy, the way the
// default action would; SIGCONT resumes both.
void OnForwardSignal(int sig, siginfo_t* info, void*) {
  int saved_errno = errno;
  bool stop = sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
  if (pid_t target = ForwardTarget(sig, info != nullptr && info->si_code == SI_KERNEL);
      target != 0) {
    kill(target, stop ? SIGSTOP : sig);
  }
  if (stop) raise(SIGSTOP);
  errno = saved_errno;
}

void ForwardOtherSignals() {
  struct sigaction sa {};
  sa.sa_sigaction = OnForwardSignal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH, SIGCONT, SIGTSTP, SIGTTIN, SIGTTOU,
                  SIGPWR, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGURG}) {
    sigaction(sig, &sa, nullptr);
  }
  for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig) sigaction(sig, &sa, nullptr);
}

// Effective capabilities from /proc/self/status (bit numbers from linux/capability.h).
constexpr int kCapSysAdmin = 21;
constexpr int kCapPerfmon = 38;
constexpr int kCapBpf = 39;

Status CheckTracePrivileges() {
  uint64_t caps = 0;
  std::istringstream in(ReadSmallFile("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) caps = std::stoull(line.substr(7), nullptr, 16);
  }
  auto has = [&](int bit) { return (caps >> bit) & 1; };
  if (has(kCapSysAdmin) || (has(kCapBpf) && has(kCapPerfmon))) return Status::Ok();
  return PermissionDenied(
      "gpuwhy trace loads BPF programs and needs privileges: running as uid " +
      std::to_string(geteuid()) +
      " without CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN — hint: run as root (sudo gpuwhy trace …) or "
      "grant the capabilities: sudo setcap cap_bpf,cap_perfmon,cap_sys_admin+ep $(command -v "
      "gpuwhy)");
}

// --pid and --comm may repeat and take comma lists; FlagSet keeps only the last value, so they
// are collected here from the raw arguments.
Status CollectRepeated(const Args& args, const std::string& name, std::vector<std::string>* out) {
  std::string flag = "--" + name;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == flag) {
      if (i + 1 >= args.size()) return InvalidArgument(flag + " needs a value");
      value = args[++i];
    } else if (args[i].rfind(flag + "=", 0) == 0) {
      value = args[i].substr(flag.size() + 1);
    } else {
      continue;
    }
    std::stringstream ss(value);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (!item.empty()) out->push_back(item);
    }
  }
  return Status::Ok();
}

int TerminalWidth() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 100;
}

int TerminalHeight() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0) return ws.ws_row;
  return 0;  // unknown: no cap
}

// The first `width - 1` characters of a line (UTF-8 aware), "…" when cut: a frame's line that
// wrapped would push the header off the screen.
std::string FitWidth(const std::string& line, int width) {
  size_t limit = width > 1 ? static_cast<size_t>(width - 1) : 1;
  size_t chars = 0;
  for (size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (++chars > limit) return line.substr(0, i) + "…";
  }
  return line;
}

// Redraws in place: cursor home, each line cleared to its end, then clear below. No full-
// screen clear per frame, so no flicker.
void DrawFrame(const std::string& text) {
  std::string frame = "\x1b[H";
  std::istringstream in(text);
  std::string line;
  int width = TerminalWidth();
  // The only escapes on screen are these: any in the text (names, notes) become '?'.
  while (std::getline(in, line)) frame += FitWidth(TerminalSafe(line), width) + "\x1b[K\n";
  frame += "\x1b[J";
  std::fwrite(frame.data(), 1, frame.size(), stdout);
  std::fflush(stdout);
}

void PrintSummary(FILE* out, const TraceSummary& s, const LiveSnapshot& live, bool filtered) {
  std::fprintf(out, "gpuwhy trace: %.1f s, %s events, %s drops\n",
               static_cast<double>(s.elapsed_ns) / 1e9, WithThousands(s.events).c_str(),
               WithThousands(s.drops).c_str());
  if (!s.db_path.empty()) {
    std::fprintf(out, "  recorded to %s (session %lld, %s rows written)\n", s.db_path.c_str(),
                 static_cast<long long>(s.session_id), WithThousands(s.events_written).c_str());
  }
  std::fprintf(out, "  host: %s records emitted by BPF, %s decoded (%lld lost at stop)\n",
               WithThousands(s.host_records_emitted).c_str(),
               WithThousands(s.host_records_consumed).c_str(),
               static_cast<long long>(s.host_records_emitted - s.host_records_consumed));
  std::string detail;  // only the counters that dropped something
  for (const auto& [where, n] : s.drops_detail) {
    if (n == 0) continue;
    if (!detail.empty()) detail += " ";
    detail += where + "=" + std::to_string(n);
  }
  if (!detail.empty()) std::fprintf(out, "  drops: %s\n", detail.c_str());
  std::string sources;
  for (const std::string& name : s.sources) sources += (sources.empty() ? "" : ", ") + name;
  std::string tracked = filtered ? WithThousands(live.processes_ever_tracked) : "all";
  std::fprintf(out, "  sources: %s · processes tracked: %s · making CUDA calls: %s\n",
               sources.c_str(), tracked.c_str(), WithThousands(live.cuda_processes).c_str());
  for (const std::string& n : s.notes) std::fprintf(out, "  note: %s\n", TerminalSafe(n).c_str());
  if (live.cuda_processes == 0) {
    std::fprintf(out,
                 "  no CUDA process was seen; is the job running? `gpuwhy check` lists the "
                 "processes that map libcudart%s\n",
                 s.db_path.empty() ? "" : " (the host events are recorded all the same)");
  } else if (!s.db_path.empty()) {
    std::fprintf(out, "  next: gpuwhy explain --db %s\n", ShellQuote(s.db_path).c_str());
  }
}

// Everything after "--" is the job to run under the tracer; only what comes before is ours.
void SplitJobCommand(const Args& all_args, Args* args, std::vector<std::string>* command) {
  *args = all_args;
  if (auto dash = std::find(args->begin(), args->end(), "--"); dash != args->end()) {
    command->assign(dash + 1, args->end());
    args->erase(dash, args->end());
  }
}

// The flags of `gpuwhy trace`; their declarations are also its --help.
FlagSet TraceFlags() {
  FlagSet flags("trace", "gpuwhy trace [flags] [-- COMMAND [ARGS...]]",
                "Trace CUDA API calls and host kernel events of GPU jobs (needs root or "
                "CAP_BPF+CAP_PERFMON+CAP_SYS_ADMIN).\n\n"
                "With -- COMMAND: runs the job under the tracer, traced from its first "
                "instruction; the trace\nends when the job exits and gpuwhy exits with the "
                "job's exit status. gpuwhy passes every\nsignal it gets on to the job. Under "
                "sudo the job runs as the invoking user the way sudo\nstarts a program: in a "
                "session of its own (no access to root's terminal; Ctrl-C and the\nother "
                "terminal signals are passed on), none of root's open files, and only the "
                "locale,\nterminal, PATH and GPU/ML/Python variables of the environment (see "
                "--keep-env). Without\n-- COMMAND: attaches to running jobs (--pid, --comm, "
                "--container, --pod, or every CUDA process).");
  flags.Add({"duration", FlagKind::kDuration, "DUR",
             "stop after this long (120s, 2m; more than 0); "
             "default: until Ctrl-C, SIGTERM or SIGHUP",
             ""});
  flags.Add({"pid", FlagKind::kString, "PID[,PID]",
             "trace only these processes and their descendants (repeatable)", ""});
  flags.Add({"comm", FlagKind::kString, "NAME[,NAME]",
             "trace only processes with this command name and their descendants (repeatable)", ""});
  flags.Add({"container", FlagKind::kString, "ID[,ID]",
             "trace only the processes of this container (its id or a unique prefix, as docker "
             "ps or crictl ps print it; read from each process's cgroup) and their descendants "
             "(repeatable)",
             ""});
  flags.Add({"pod", FlagKind::kString, "UID[,UID]",
             "trace only the processes of this Kubernetes pod (its UID: kubectl get pod NAME -o "
             "jsonpath='{.metadata.uid}') and their descendants (repeatable)",
             ""});
  AddDbFlag(flags);
  flags.Add({"record", FlagKind::kBool, "", "write events to the database", "true"});
  flags.Add({"max-db", FlagKind::kSize, "SIZE",
             "keep the database and its WAL under SIZE by "
             "pruning the oldest rows (2G)",
             ""});
  flags.Add({"cuda-lib", FlagKind::kString, "PATH",
             "also attach to this CUDA library file or "
             "directory",
             ""});
  flags.Add({"gpu-interval", FlagKind::kString, "DUR",
             "sample every GPU through NVML this often (utilization, GPM SM activity and "
             "occupancy, clocks, power, per-process use) into gpu_samples; 0 or off: never",
             "200ms"});
  flags.Add({"launch-duty", FlagKind::kInt, "N",
             "count kernel launches in one second of every N (from the second second in a row with "
             "launches) and estimate the rest from each process's other CUDA calls or its launch "
             "rate, with an error bar (kernel names from the counted seconds): each launch costs a "
             "probe hit only while counting. 1: count every launch (exact, a few percent slower "
             "on launch-heavy loops)",
             "10"});
  flags.Add({"row-min", FlagKind::kString, "DUR",
             "the row budget: async copies and stream waits shorter than this become full rows "
             "only as outliers (8× their recent average) or 1 in 64 samples, at most 200 a "
             "second per thread; the rest are counted with their time, bytes and a log2 latency "
             "histogram (op_seconds, op_latency). Slow or failed calls always get their row",
             "20us"});
  flags.Add({"all-rows", FlagKind::kBool, "",
             "no row budget: every probed CUDA call is a full row (cudaMemsetAsync included, "
             "and driver calls made inside runtime calls too); costs more probe time on "
             "launch-heavy jobs",
             ""});
  flags.Add({"nvml-lib", FlagKind::kString, "PATH",
             "load NVML from this file instead of libnvidia-ml.so.1 (tests, unusual installs)",
             ""});
  flags.Add({"stack", FlagKind::kBool, "",
             "record the caller's stack (Python file:line and native frames) on CUDA calls and "
             "sampled off-CPU switches; explain then shows top callers and sched_switch victims",
             ""});
  flags.Add({"stack-rate", FlagKind::kInt, "N",
             "with --stack: at most N stacks a second per thread (bursts of N/5) for CUDA calls "
             "shorter than 1 ms, and one off-CPU sample per thread every 1/N s; slower or "
             "failed calls always get theirs, other rows have none (each capture costs a few µs "
             "on the calling thread)",
             "50"});
  flags.Add({"profile-hz", FlagKind::kInt, "N",
             "on-CPU profile: N times a second, each CPU running a thread of the job records "
             "that thread's stack (Python file:line and native frames) as a cpu_sample row; "
             "explain then shows where the main thread's and the CUDA helper threads' CPU went "
             "and names the thread holding the GIL. 0 turns it off; at most 1000",
             std::to_string(kDefaultProfileHz)});
  flags.Add(
      {"json", FlagKind::kBool, "", "stream events as JSON lines instead of the live view", ""});
  flags.Add({"quiet", FlagKind::kBool, "", "print only the final summary", ""});
  flags.Add({"sink", FlagKind::kString, "URL",
             "also stream every row to ClickHouse: clickhouse://[USER[:PASS]@]HOST[:PORT][/DB] "
             "(HTTP port, default 8123, database gpuwhy); rows wait in the database while it "
             "is unreachable and are sent later (docs/clickhouse.md)",
             ""});
  flags.Add({"node", FlagKind::kString, "NAME",
             "this host's name in ClickHouse (with --sink); default: the host name", ""});
  flags.Add({"sink-spool", FlagKind::kSize, "SIZE",
             "with --sink: at most this much unsent data waits in the database; beyond it the "
             "oldest unsent rows are dropped from the spool (still kept locally) and counted",
             "512M"});
  flags.Add({"poll-interval", FlagKind::kDuration, "DUR",
             "how often the ring buffers are drained (1ms-100ms); shorter costs the agent more "
             "CPU",
             "5ms"});
  flags.Add({"keep-env", FlagKind::kString, "NAME[,NAME]",
             "with -- COMMAND under sudo: also pass these variables of the environment on to the "
             "job (NAME, or PREFIX* for every name starting so; repeatable). Kept anyway: "
             "PATH, TERM, LANG/LC_*, TZ, TMPDIR, and CUDA_*, NCCL_*, TORCH*, PYTORCH_*, "
             "PYTHON*, OMP_*, MKL_*, HF_*, WANDB_* and the like; LD_* and SUDO_* only if named",
             ""});
  AddPrometheusFlags(flags);
  return flags;
}

// What the command line of `gpuwhy trace` asks for.
struct TraceRequest {
  TracerOptions options;
  std::vector<std::string> command;   // the job after --; empty: attach to running jobs
  std::vector<std::string> keep_env;  // --keep-env: more variables passed on to the job
  bool quiet = false;                 // --quiet: only the final summary
  std::optional<SinkOptions> sink;    // --sink: the recording is also streamed to ClickHouse
};

// Words no flag takes, and a -- with nothing after it.
Status CheckPositionals(const FlagSet& flags, bool dash_given, bool has_command) {
  if (!flags.positionals().empty()) {
    return InvalidArgument("unexpected argument '" + flags.positionals()[0] +
                           "' — hint: to run a job under the tracer, put it after "
                           "--: gpuwhy trace [flags] -- " +
                           flags.positionals()[0] + " ...");
  }
  if (dash_given && !has_command) {
    return InvalidArgument("nothing after -- — hint: gpuwhy trace -- python3 train.py");
  }
  return Status::Ok();
}

// --keep-env: names (or PREFIX*) of variables, only for a job run with -- COMMAND.
Status CollectKeepEnv(const Args& args, bool has_command, std::vector<std::string>* keep_env) {
  RETURN_IF_ERROR(CollectRepeated(args, "keep-env", keep_env));
  for (const std::string& name : *keep_env) {
    std::string_view base(name);
    if (!base.empty() && base.back() == '*') base.remove_suffix(1);
    bool valid = !name.empty() && std::all_of(base.begin(), base.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!valid) {
      return InvalidArgument("--keep-env: '" + TerminalSafe(name) +
                             "' is not a variable name (letters, digits, _; a "
                             "trailing * for a prefix)");
    }
  }
  if (!keep_env->empty() && !has_command) {
    return InvalidArgument("--keep-env is for a job run with -- COMMAND");
  }
  return Status::Ok();
}

// --pid, --comm, --container and --pod: the running processes to trace (none: every CUDA
// process). --container and --pod become the pids of the processes in them now; their
// children are tracked as --pid's are.
Status ResolveTargets(const FlagSet& flags, const Args& args, bool has_command,
                      TracerOptions* options) {
  std::vector<std::string> pid_texts;
  RETURN_IF_ERROR(CollectRepeated(args, "pid", &pid_texts));
  RETURN_IF_ERROR(CollectRepeated(args, "comm", &options->comms));
  std::vector<std::string> container_texts, pod_texts, containers, pods;
  RETURN_IF_ERROR(CollectRepeated(args, "container", &container_texts));
  RETURN_IF_ERROR(CollectRepeated(args, "pod", &pod_texts));
  for (const std::string& text : container_texts) {
    ASSIGN_OR_RETURN(std::string id, NormalizeContainerId(text));
    containers.push_back(id);
  }
  for (const std::string& text : pod_texts) {
    ASSIGN_OR_RETURN(std::string uid, NormalizePodUid(text));
    pods.push_back(uid);
  }
  if (has_command && (!containers.empty() || !pods.empty())) {
    return InvalidArgument(
        "-- COMMAND traces that job and its descendants; --container and --pod are for jobs "
        "already running — use one or the other");
  }
  if (!containers.empty() || !pods.empty()) {
    ASSIGN_OR_RETURN(ContainerMatch match, FindContainerProcesses("/proc", containers, pods));
    options->pids_if_alive = match.pids;
    std::string what;
    for (const std::string& c : match.containers) what += " container " + c.substr(0, 12);
    for (const std::string& p : match.pods) what += " pod " + p;
    if (!flags.GetBool("quiet", false) && !flags.GetBool("json", false)) {
      std::fprintf(stderr, "gpuwhy trace:%s: %zu processes\n", what.c_str(), match.pids.size());
    }
  }
  for (const std::string& text : pid_texts) {
    StatusOr<int64_t> pid = ParseInt(text);
    if (!pid.ok() || *pid <= 0) return InvalidArgument("--pid " + text + ": not a pid");
    // Checked before a session is opened, so a typo leaves no empty session behind.
    if (access(("/proc/" + std::to_string(*pid)).c_str(), F_OK) != 0) {
      return NotFound("--pid " + text + ": no such process");
    }
    options->pids.push_back(static_cast<int32_t>(*pid));
  }
  return Status::Ok();
}

// The kernel keeps 15 bytes of a command name (TASK_COMM_LEN 16): a longer --comm never matches.
Status CheckCommNames(const std::vector<std::string>& comms) {
  for (const std::string& comm : comms) {
    if (comm.size() > 15) {
      return InvalidArgument("--comm " + comm +
                             ": longer than the kernel's 15-character command names, so it "
                             "would never match — hint: use its first 15 characters: " +
                             comm.substr(0, 15));
    }
  }
  return Status::Ok();
}

Status DurationFromFlags(const FlagSet& flags, int64_t* duration_ns) {
  *duration_ns = flags.GetDurationNs("duration", 0);
  if (flags.Has("duration") && *duration_ns <= 0) {
    return InvalidArgument(
        "--duration must be more than 0 — hint: leave it out to trace until Ctrl-C");
  }
  return Status::Ok();
}

// The flags other than the targets and the duration into `options`, each value checked
// against its range.
Status TracerOptionsFromFlags(const FlagSet& flags, const Args& args, TracerOptions* options) {
  CudaSourceOptions& cuda = options->sources.cuda;
  RETURN_IF_ERROR(CollectRepeated(args, "cuda-lib", &cuda.libraries));
  for (const std::string& lib : cuda.libraries) {
    if (access(lib.c_str(), R_OK) != 0) {
      std::fprintf(stderr, "gpuwhy trace: warning: --cuda-lib %s: %s (nothing to attach there)\n",
                   lib.c_str(), std::strerror(errno));
    }
  }
  options->record = flags.GetBool("record", true);
  options->max_db_bytes = flags.GetSizeBytes("max-db", 0);
  options->json = flags.GetBool("json", false);
  options->stacks = flags.GetBool("stack", false);
  if (int64_t rate = flags.GetInt("stack-rate", kDefaultStackRate); rate < 1 || rate > 100'000) {
    return InvalidArgument("--stack-rate " + std::to_string(rate) +
                           ": stacks a second per thread, from 1 to 100000");
  } else {
    options->stack_rate = static_cast<uint32_t>(rate);
  }
  if (flags.Has("stack-rate") && !options->stacks) {
    return InvalidArgument("--stack-rate needs --stack");
  }
  if (int64_t hz = flags.GetInt("profile-hz", kDefaultProfileHz); hz < 0 || hz > 1000) {
    return InvalidArgument("--profile-hz " + std::to_string(hz) +
                           ": samples a second per CPU, from 0 (off) to 1000");
  } else {
    options->profile_hz = static_cast<uint32_t>(hz);
  }
  options->poll_interval_ns = flags.GetDurationNs("poll-interval", 5'000'000);
  if (options->poll_interval_ns < 1'000'000 || options->poll_interval_ns > 100'000'000) {
    return InvalidArgument("--poll-interval must be between 1ms and 100ms");
  }
  if (std::string text = flags.GetString("gpu-interval", "200ms"); text == "off" || text == "0") {
    options->gpu_interval_ns = 0;
  } else {
    StatusOr<int64_t> ns = ParseDurationNs(text);
    if (!ns.ok() || *ns < 10'000'000 || *ns > 60'000'000'000) {
      return InvalidArgument("--gpu-interval " + text +
                             ": a duration between 10ms and 60s, or 0/off");
    }
    options->gpu_interval_ns = *ns;
  }
  options->nvml_lib = flags.GetString("nvml-lib", "");
  RETURN_IF_ERROR(CheckLoadableUnderSudo(options->nvml_lib, "--nvml-lib"));
  if (int64_t duty = flags.GetInt("launch-duty", 10); duty < 1 || duty > 3600) {
    return InvalidArgument("--launch-duty " + std::to_string(duty) +
                           ": a whole number of seconds from 1 to 3600");
  } else {
    cuda.launch_duty = static_cast<uint32_t>(duty);
  }
  cuda.row_budget = !flags.GetBool("all-rows", false);
  if (std::string text = flags.GetString("row-min", "20us"); !text.empty()) {
    StatusOr<int64_t> ns = ParseDurationNs(text);
    if (!ns.ok() || *ns < 1'000 || *ns > 10'000'000'000) {
      return InvalidArgument("--row-min " + text +
                             ": a duration between 1us and 10s (--all-rows: "
                             "every call a row)");
    }
    cuda.call_row_min_ns = static_cast<uint64_t>(*ns);
  }
  options->db_path = DatabasePath(flags);
  // An older file is migrated before the trace starts; a large one takes a while.
  options->on_migration = [path = options->db_path](int64_t done, int64_t total) {
    if (total < kMigrationProgressRows) return;
    std::fprintf(stderr,
                 "gpuwhy trace: updating %s to this version's format (events into chunks): "
                 "%s of %s rows (%d%%)\n",
                 path.c_str(), WithThousands(done).c_str(), WithThousands(total).c_str(),
                 static_cast<int>(100 * done / total));
  };
  options->version = VersionString();
  options->command_line = CommandLine();
  return Status::Ok();
}

// --sink URL, --node, --sink-spool: where the recording is also streamed; the writer then
// spools what is committed in its outbox.
Status SinkFromFlags(const FlagSet& flags, TracerOptions* options,
                     std::optional<SinkOptions>* sink) {
  if (std::string url = flags.GetString("sink", ""); !url.empty() || flags.Has("sink")) {
    StatusOr<ClickHouseUrl> parsed = ParseClickHouseUrl(url);
    if (!parsed.ok()) return parsed.status().WithContext("--sink");
    if (!options->record) {
      return InvalidArgument(
          "--sink forwards what is recorded: it cannot be used with --record=false");
    }
    sink->emplace();
    (*sink)->url = *parsed;
    (*sink)->node = flags.GetString("node", ReadHostInfo().host);
    RETURN_IF_ERROR(ValidateNodeName((*sink)->node));
    options->outbox = true;
    options->outbox_max_bytes = flags.GetSizeBytes("sink-spool", int64_t{512} << 20);
    if (options->outbox_max_bytes < (int64_t{1} << 20)) {
      return InvalidArgument("--sink-spool must be at least 1M");
    }
  } else if (flags.Has("node") || flags.Has("sink-spool")) {
    return InvalidArgument("--node and --sink-spool go with --sink URL");
  }
  return Status::Ok();
}

// The whole command line, checked, into `request` (whose `command` is already set).
Status RequestFromFlags(const FlagSet& flags, const Args& args, bool dash_given,
                        TraceRequest* request) {
  bool has_command = !request->command.empty();
  RETURN_IF_ERROR(CheckPositionals(flags, dash_given, has_command));
  RETURN_IF_ERROR(CollectKeepEnv(args, has_command, &request->keep_env));
  TracerOptions& options = request->options;
  RETURN_IF_ERROR(ResolveTargets(flags, args, has_command, &options));
  // In this order, the one the errors have always come in.
  RETURN_IF_ERROR(DurationFromFlags(flags, &options.duration_ns));
  RETURN_IF_ERROR(CheckCommNames(options.comms));
  RETURN_IF_ERROR(TracerOptionsFromFlags(flags, args, &options));
  request->quiet = flags.GetBool("quiet", false);
  RETURN_IF_ERROR(SinkFromFlags(flags, &options, &request->sink));
  if (has_command &&
      (!options.pids.empty() || !options.pids_if_alive.empty() || !options.comms.empty())) {
    return InvalidArgument(
        "-- COMMAND traces that job and its descendants; --pid, --comm, "
        "--container and --pod are for jobs already running — use one or the "
        "other");
  }
  return Status::Ok();
}

// The ClickHouse sink of `trace --sink`: started once the session row exists, finished after
// the session is closed, with what it sent (and what is left) as notes of the summary.
class TraceSink {
 public:
  // Hooks the sink into `options` (on_session, on_closing): it must outlive the tracer.
  TraceSink(SinkOptions sink_options, TracerOptions* options) : options_(std::move(sink_options)) {
    options->on_session = [this](StoreWriter* writer) { return Start(writer); };
    options->on_closing = [this](TraceSummary* summary) { Finish(summary); };
  }
  TraceSink(const TraceSink&) = delete;
  TraceSink& operator=(const TraceSink&) = delete;

 private:
  Status Start(StoreWriter* writer) {
    writer_ = writer;
    ASSIGN_OR_RETURN(sink_, ClickHouseSink::Start(writer, options_));
    return Status::Ok();
  }

  void Finish(TraceSummary* summary) {
    if (!sink_) return;
    sink_->Finish(10'000);  // the last rows, and the session row with its totals
    SinkStats st = sink_->stats();
    std::string note = "sink: " + WithThousands(st.rows_sent) + " rows sent to " +
                       options_.url.Display() + " as node " + options_.node;
    if (st.duplicates_skipped > 0) {
      note += " (" + WithThousands(st.duplicates_skipped) +
              " batches found already there after an unanswered request)";
    }
    summary->notes.push_back(note);
    if (st.rows_rejected > 0) {
      summary->notes.push_back("sink: ClickHouse refused " + WithThousands(st.rows_rejected) +
                               " rows: " + st.last_error);
    }
    StatusOr<OutboxStatus> left = writer_->OutboxState();
    if (left.ok() && left->rows > 0) {
      summary->notes.push_back("sink: " + WithThousands(left->rows) + " rows wait in " +
                               summary->db_path +
                               " (ClickHouse: " + (st.last_error.empty() ? "slow" : st.last_error) +
                               "); the next `gpuwhy trace --sink` on this file sends them");
    }
    if (left.ok() && left->rows_dropped > 0) {
      summary->notes.push_back("sink: " + WithThousands(left->rows_dropped) +
                               " rows were dropped from the spool unsent (over --sink-spool); "
                               "they are still in the local file");
    }
  }

  SinkOptions options_;
  std::unique_ptr<ClickHouseSink> sink_;
  StoreWriter* writer_ = nullptr;
};

// The job of `trace -- COMMAND`: forked now, while gpuwhy has one thread, held at a gate until
// every probe is attached, then exec'd as the user who ran sudo (`*as_user`: in a session of
// its own). pip-installed CUDA runtimes next to it (a venv's site-packages/nvidia/*/lib) are
// attached before it runs, so its first CUDA calls and kernel registrations are seen.
StatusOr<GatedChild> SpawnJob(const std::vector<std::string>& command,
                              const std::vector<std::string>& keep_env, TracerOptions* options,
                              bool* as_user) {
  ChildOptions child;
  child.argv = command;
  child.uid = InvokingUserUid();
  child.keep_env = keep_env;
  *as_user = child.uid >= 0;
  ASSIGN_OR_RETURN(GatedChild job, GatedChild::Spawn(child));
  options->pids = {static_cast<int32_t>(job.pid())};
  options->session_kind = kJobSessionKind;  // explain's default window: the job's lifetime
  for (std::string& dir : CudaLibDirsNextTo(command[0], std::getenv("PATH")))
    options->sources.cuda.libraries.push_back(dir);
  return job;
}

void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_sigaction = OnStopSignal;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);  // an ssh disconnect: flush and close the session too
  signal(SIGPIPE, SIG_IGN);
}

// What the terminal shows while a trace runs: the notes as they come and the live view, a
// frame redrawn in place on a TTY, one status line a second otherwise. A job run under the
// tracer owns the terminal: no full-screen view over its output, just the start line and the
// summary.
class TraceConsole {
 public:
  TraceConsole(bool quiet, bool json, bool job)
      : quiet_(quiet),
        live_(!quiet && !json && !job),
        tty_(isatty(STDOUT_FILENO) == 1),
        info_(json ? stderr : stdout) {}

  FILE* info() const { return info_; }
  bool live() const { return live_; }

  void PrintStart(const TracerOptions& options, const std::string& job) {
    if (quiet_) return;
    std::fprintf(info_, "gpuwhy trace: tracing%s %s%s — %s\n", job.c_str(),
                 options.record ? ("into " + options.db_path).c_str() : "without recording",
                 options.duration_ns > 0
                     ? (" for " + std::to_string(options.duration_ns / 1'000'000'000) + "s").c_str()
                     : "",
                 job.empty() ? "Ctrl-C to stop" : "until it exits");
    std::fflush(info_);
  }

  void ShowNotes(std::vector<std::string> notes) {
    for (std::string& n : notes) {
      if (quiet_) continue;
      if (live_ && tty_) {
        recent_notes_.push_back(std::move(n));  // shown under the frame
        if (recent_notes_.size() > 4) recent_notes_.erase(recent_notes_.begin());
      } else {
        std::fprintf(info_, "gpuwhy trace: %s\n", TerminalSafe(n).c_str());
      }
    }
    std::fflush(info_);
  }

  void ClearOnce() {
    if (live_ && tty_) std::fputs("\x1b[2J", stdout);  // once; frames then redraw in place
  }

  void ShowLive(const LiveSnapshot& snap) {
    if (tty_) {
      std::string frame = RenderLiveView(snap, TerminalWidth(), TerminalHeight());
      for (const std::string& n : recent_notes_) frame += "note: " + n + "\n";  // fit by DrawFrame
      DrawFrame(frame);
    } else {
      std::printf("%s\n", TerminalSafe(RenderStatusLine(snap)).c_str());
      std::fflush(stdout);
    }
  }

  void ShowLastFrame(const LiveSnapshot& snap) {
    if (live_ && tty_) DrawFrame(RenderLiveView(snap, TerminalWidth(), TerminalHeight()));
  }

 private:
  bool quiet_;
  bool live_;
  bool tty_;
  FILE* info_;
  std::vector<std::string> recent_notes_;
};

// Stopped by a signal or --duration while the job runs: the session is closed; pass the signal
// on (a terminal's Ctrl-C reached the job already) and wait, like a shell would. Returns the
// job's exit status.
int WaitForJob(GatedChild& job, const std::string& name) {
  int sig = g_stop_signal.load();
  if (pid_t target = ForwardTarget(sig, g_stop_from_tty.load()); sig != 0 && target != 0) {
    kill(target, sig);
  }
  std::fprintf(stderr, "gpuwhy trace: session closed; waiting for %s (pid %d) to exit\n",
               name.c_str(), job.pid());
  return job.Wait();
}

// Runs a started tracer: releases the job, shows the trace until it stops (the duration, a
// signal, the job's exit), stops it, prints the summary and waits for the job. Returns the
// exit code: the job's, else 0 or an error's.
int TraceUntilStopped(const TraceRequest& request, Tracer* tracer, TracePrometheus* prometheus,
                      GatedChild* job, bool job_as_user) {
  const TracerOptions& options = request.options;
  std::vector<std::string> own_notes;
  if (prometheus) {
    own_notes.push_back(prometheus->Started(tracer->session_id(), tracer->database_file()));
  }
  if (job) {
    if (Status st = job->Release(); !st.ok()) {
      (void)tracer->Stop();
      std::fprintf(stderr, "gpuwhy trace: %s\n", st.message().c_str());
      return 127;  // like a shell for a command it cannot run
    }
    g_job_own_session.store(job_as_user);
    g_job_pid.store(job->pid());
    ForwardOtherSignals();
  }

  TraceConsole console(request.quiet, options.json, job != nullptr);
  console.PrintStart(
      options, job ? " " + request.command[0] + " (pid " + std::to_string(job->pid()) + ")" : "");
  std::vector<std::string> notes = tracer->TakeNotes();
  notes.insert(notes.begin(), own_notes.begin(), own_notes.end());
  console.ShowNotes(std::move(notes));
  console.ClearOnce();
  bool job_exited = false;
  int job_code = 0;
  tracer->Wait(&g_stop, [&] {
    if (job && job->Exited(&job_code)) {
      job_exited = true;
      g_stop.store(true);
    }
    console.ShowNotes(tracer->TakeNotes());
    if (console.live()) console.ShowLive(tracer->Live());
  });
  StatusOr<TraceSummary> summary = tracer->Stop();
  if (!summary.ok()) return ReportError(summary.status());
  LiveSnapshot last = tracer->Live();
  console.ShowLastFrame(last);
  bool filtered = !options.pids.empty() || !options.pids_if_alive.empty() || !options.comms.empty();
  PrintSummary(console.info(), *summary, last, filtered);
  if (prometheus) prometheus->Finished();     // final values (and --prometheus-linger)
  if (job && job_exited) g_job_pid.store(0);  // reaped: its pid may be reused
  if (job && !job_exited) job_code = WaitForJob(*job, request.command[0]);
  if (!summary->store_error.ok()) return ReportError(summary->store_error);
  return job ? job_code : kExitOk;
}

}  // namespace

int RunTrace(const Args& all_args) {
  Args args;
  TraceRequest request;
  SplitJobCommand(all_args, &args, &request.command);
  FlagSet flags = TraceFlags();
  int exit_code = 0;
  if (!ParseOrExit(flags, args, &exit_code)) return exit_code;
  if (Status st = RequestFromFlags(flags, args, all_args.size() != args.size(), &request);
      !st.ok()) {
    return ReportError(st);
  }
  TracerOptions& options = request.options;
  std::optional<TraceSink> sink;
  if (request.sink) sink.emplace(*request.sink, &options);

  if (Status st = CheckTracePrivileges(); !st.ok()) return ReportError(st);
  // Bound before the job is spawned and anything is loaded: a taken port fails here.
  StatusOr<std::unique_ptr<TracePrometheus>> prometheus =
      TracePrometheus::FromFlags(flags, options.record ? options.db_path : "", options.version);
  if (!prometheus.ok()) return ReportError(prometheus.status());
  if (*prometheus) options.observer = (*prometheus)->observer();

  std::optional<GatedChild> job;
  bool job_as_user = false;
  if (!request.command.empty()) {
    StatusOr<GatedChild> spawned =
        SpawnJob(request.command, request.keep_env, &options, &job_as_user);
    if (!spawned.ok()) return ReportError(spawned.status());
    job.emplace(std::move(*spawned));
  }

  StatusOr<std::unique_ptr<Tracer>> created = Tracer::Create(options);
  if (!created.ok()) return ReportError(created.status());
  std::unique_ptr<Tracer> tracer = std::move(created).value();
  InstallStopHandlers();
  if (Status st = tracer->Start(); !st.ok()) {
    sink.reset();  // its thread reads the writer, which goes with the tracer
    return ReportError(st);
  }
  return TraceUntilStopped(request, tracer.get(), prometheus->get(), job ? &*job : nullptr,
                           job_as_user);
}

}  // namespace gw
