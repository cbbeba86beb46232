#include "check/checks.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "base/scoped.h"
#include "discover/cuda_libs.h"
#include "sources/cuda/cuda_source.h"
#include "sources/nvml/gpu_sampler.h"
#include "sources/selftest/selftest.h"
#include "sources/stacks/python_offsets.h"
#include "sources/system/host_info.h"

namespace gw {

namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Effective capability bits from /proc/self/status.
uint64_t EffectiveCaps() {
  std::istringstream in(ReadSmallFile("/proc/self/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("CapEff:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  }
  return 0;
}

std::string TracefsPath() {
  if (Exists("/sys/kernel/tracing/events")) return "/sys/kernel/tracing";
  if (Exists("/sys/kernel/debug/tracing/events")) return "/sys/kernel/debug/tracing";
  return "";
}

// Where /proc/mounts has a tracefs, readable or not ("" when none is mounted): a user who
// cannot read it should hear that, not that it is missing.
std::string TracefsMountPoint() {
  std::istringstream in(ReadSmallFile("/proc/mounts"));
  std::string device, point, type;
  std::string rest;
  while (in >> device >> point >> type && std::getline(in, rest)) {
    if (type == "tracefs") return point;
  }
  return "";
}

CheckResult CheckKernel() {
  CheckResult r{"kernel", CheckState::kPass, true, "", ""};
  struct utsname u;
  uname(&u);
  int major = 0, minor = 0;
  std::sscanf(u.release, "%d.%d", &major, &minor);
  r.detail = u.release;
  if (major < 5 || (major == 5 && minor < 8)) {
    r.state = CheckState::kFail;
    r.hint = "gpuwhy needs Linux 5.8 or newer (BPF ring buffers, BTF)";
  }
  return r;
}

CheckResult CheckBtf() {
  CheckResult r{"BTF", CheckState::kPass, true, "/sys/kernel/btf/vmlinux", ""};
  if (!Exists("/sys/kernel/btf/vmlinux")) {
    r.state = CheckState::kFail;
    r.detail = "/sys/kernel/btf/vmlinux missing";
    r.hint = "use a kernel built with CONFIG_DEBUG_INFO_BTF=y";
  }
  return r;
}

CheckResult CheckTracefs() {
  CheckResult r{"tracefs", CheckState::kPass, true, "", ""};
  std::string path = TracefsPath();
  if (path.empty() && geteuid() == 0) {
    if (mount("nodev", "/sys/kernel/tracing", "tracefs", 0, nullptr) == 0) {
      path = TracefsPath();
      r.detail = "mounted it at /sys/kernel/tracing";
    }
  }
  std::string mounted = path.empty() ? TracefsMountPoint() : "";
  if (path.empty() && !mounted.empty()) {
    r.state = CheckState::kInfo;  // root (what trace runs as) can read it
    r.detail = "mounted at " + mounted + ", not readable as uid " + std::to_string(geteuid());
    r.hint = "run as root: sudo gpuwhy check";
  } else if (path.empty()) {
    r.state = CheckState::kFail;
    r.detail = "not mounted";
    r.hint = "run as root (gpuwhy mounts it), or: mount -t tracefs nodev /sys/kernel/tracing";
  } else if (r.detail.empty()) {
    r.detail = path;
  }
  return r;
}

CheckResult CheckUprobes() {
  CheckResult r{"uprobes", CheckState::kPass, true, "", ""};
  if (Exists("/sys/bus/event_source/devices/uprobe/type")) {
    r.detail = "uprobe PMU available";
  } else {
    r.state = CheckState::kFail;
    r.detail = "no uprobe PMU";
    r.hint = "use a kernel built with CONFIG_UPROBES and CONFIG_UPROBE_EVENTS";
  }
  return r;
}

CheckResult CheckTracepoints() {
  CheckResult r{"tracepoints", CheckState::kPass, true, "", ""};
  std::string base = TracefsPath();
  const char* const kNeeded[] = {"sched/sched_switch",       "sched/sched_waking",
                                 "sched/sched_process_fork", "sched/sched_process_exit",
                                 "block/block_rq_issue",     "exceptions/page_fault_user"};
  std::string missing;
  int found = 0;
  for (const char* tp : kNeeded) {
    if (!base.empty() && Exists(base + "/events/" + tp)) {
      ++found;
    } else {
      missing += std::string(missing.empty() ? "" : ", ") + tp;
    }
  }
  if (base.empty() && !TracefsMountPoint().empty()) {
    r.state = CheckState::kInfo;
    r.required = false;
    r.detail = "not listed: tracefs is not readable as uid " + std::to_string(geteuid());
    r.hint = "run as root: sudo gpuwhy check";
  } else if (base.empty()) {
    r.state = CheckState::kFail;
    r.detail = "cannot list tracepoints without tracefs";
    r.hint = "mount tracefs (see above)";
  } else if (!missing.empty()) {
    r.state = found >= 2 ? CheckState::kInfo : CheckState::kFail;
    r.required = found < 2;
    r.detail = std::to_string(found) + " of " + std::to_string(std::size(kNeeded)) +
               " present; missing " + missing;
    r.hint = "the matching host events will not be recorded";
  } else {
    r.detail = "sched, block, page-fault tracepoints present";
  }
  return r;
}

CheckResult CheckPrivileges() {
  CheckResult r{"privileges", CheckState::kPass, true, "", ""};
  uint64_t caps = EffectiveCaps();
  const uint64_t kSysAdmin = 1ULL << 21, kPerfmon = 1ULL << 38, kBpf = 1ULL << 39;
  if (geteuid() == 0 && (caps & kSysAdmin)) {
    r.detail = "root";
  } else if ((caps & kBpf) && (caps & kPerfmon) && (caps & kSysAdmin)) {
    r.detail = "CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN";
  } else {
    r.state = CheckState::kFail;
    r.detail = "not root and missing CAP_BPF/CAP_PERFMON/CAP_SYS_ADMIN";
    r.hint =
        "run `sudo gpuwhy trace`, or grant the capabilities: setcap "
        "cap_bpf,cap_perfmon,cap_sys_admin+ep $(which gpuwhy)";
  }
  return r;
}

CheckResult CheckBpfLoad() {
  CheckResult r{"BPF program", CheckState::kPass, true, "", ""};
  Status st = RunBpfSelfTest();
  if (st.ok()) {
    r.detail = "loaded, attached and fired";
  } else {
    r.state = CheckState::kFail;
    r.detail = st.message();
    size_t hint = r.detail.find(" — hint: ");
    if (hint != std::string::npos) {
      r.hint = r.detail.substr(hint + 9);
      r.detail = r.detail.substr(0, hint);
    }
  }
  return r;
}

CheckResult CheckPtraceScope() {
  CheckResult r{"ptrace_scope", CheckState::kInfo, false, "", ""};
  std::string v = ReadSmallFile("/proc/sys/kernel/yama/ptrace_scope");
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  if (v.empty()) {
    r.detail = "Yama not enabled";
  } else {
    r.detail = "kernel.yama.ptrace_scope = " + v;
    if (v == "3") r.hint = "reading other processes' memory is disabled; Python stacks need 0-2";
  }
  return r;
}

// Which launch entry points of the found libraries trace probes, and which it cannot see.
CheckResult CheckLaunchPaths(const std::vector<CudaLibrary>& libs, CudaLibKind kind) {
  CheckResult r{"launches", CheckState::kPass, false, "", ""};
  std::string probed;
  for (const std::string& s : ProbedLaunchSymbols(kind)) probed += (probed.empty() ? "" : ", ") + s;
  r.detail =
      std::string(kind == CudaLibKind::kRuntime ? "libcudart" : "libcuda") + " probed: " + probed;
  std::set<std::string> unseen;
  for (const CudaLibrary& lib : libs) {
    if (lib.kind != kind) continue;
    for (const UnseenLaunchPath& p : UnseenLaunchPaths(lib.path, kind)) {
      unseen.insert(std::string(p.symbol) + " (" + p.what + ")");
    }
  }
  if (!unseen.empty()) {
    r.state = CheckState::kInfo;
    std::string list;
    for (const std::string& u : unseen) list += (list.empty() ? "" : ", ") + u;
    r.hint = "launches through " + list + " are not seen";
  }
  return r;
}

std::vector<CheckResult> CheckCuda(const std::vector<CudaLibrary>& libs) {
  std::vector<CheckResult> out;
  for (CudaLibKind kind : {CudaLibKind::kRuntime, CudaLibKind::kDriver}) {
    CheckResult r{kind == CudaLibKind::kRuntime ? "libcudart" : "libcuda", CheckState::kPass, false,
                  "", ""};
    std::string paths;
    for (const CudaLibrary& lib : libs) {
      if (lib.kind != kind) continue;
      if (!paths.empty()) paths += "; ";
      paths += lib.path;
      if (!lib.pids.empty()) {
        paths += " (mapped by " + std::to_string(lib.pids.size()) + " process" +
                 (lib.pids.size() == 1 ? "" : "es") + ": pid";
        int shown = 0;
        for (int32_t pid : lib.pids) {
          if (shown++ == 5) {
            paths += " …";
            break;
          }
          paths += " " + std::to_string(pid);
        }
        paths += ")";
      }
    }
    if (paths.empty()) {
      r.state = CheckState::kFail;
      r.detail = "not found in running processes or standard paths";
      r.hint = kind == CudaLibKind::kRuntime
                   ? "start the CUDA job first, or name the library with `trace --cuda-lib PATH`"
                   : "no NVIDIA driver library here; trace still records host events";
    } else {
      r.detail = paths;
    }
    out.push_back(r);
    if (r.state == CheckState::kPass) out.push_back(CheckLaunchPaths(libs, kind));
  }
  // NCCL is optional: a single-GPU job has none.
  CheckResult nccl{"libnccl", CheckState::kInfo, false, "", ""};
  std::string paths;
  for (const CudaLibrary& lib : libs) {
    if (lib.kind != CudaLibKind::kNccl) continue;
    paths += (paths.empty() ? "" : "; ") + lib.path;
    if (!lib.pids.empty()) paths += " (mapped by " + std::to_string(lib.pids.size()) + ")";
  }
  std::string probed;
  for (const std::string& s : ProbedSymbols(CudaLibKind::kNccl)) {
    probed += (probed.empty() ? "" : ", ") + s;
  }
  if (paths.empty()) {
    nccl.detail = "not found in running processes or standard paths; probed when found: " + probed;
    nccl.hint =
        "multi-GPU jobs load it (PyTorch: site-packages/nvidia/nccl/lib); "
        "`trace -- CMD` finds it there";
  } else {
    nccl.state = CheckState::kPass;
    nccl.detail = paths + "; probed: " + probed;
  }
  out.push_back(nccl);
  return out;
}

CheckResult CheckGpu() {
  CheckResult r{"NVIDIA GPU", CheckState::kInfo, false, "", ""};
  std::string driver = ReadNvidiaDriverVersion();
  std::vector<GpuInfo> gpus = ReadNvidiaGpus();
  if (driver.empty() && gpus.empty()) {
    r.detail = "no NVIDIA driver loaded (/proc/driver/nvidia absent)";
    r.hint = "without a GPU, `gpuwhy demo` and `gpuwhy demo --live` still work";
    return r;
  }
  r.state = CheckState::kPass;
  r.detail = "driver " + (driver.empty() ? std::string("unknown") : driver);
  for (const GpuInfo& g : gpus) r.detail += ", " + g.model + " at " + g.bus_id;
  return r;
}

// NVML (GPU truth for trace's gpu_samples) and, per GPU, GPM (SM activity and occupancy).
std::vector<CheckResult> CheckNvml(const std::string& library) {
  NvmlProbe probe = ProbeNvml(library);
  CheckResult nvml{"NVML", CheckState::kInfo, false, "", ""};
  if (!probe.present) {
    nvml.detail = "absent: " + probe.error;
    nvml.hint = "trace records no GPU utilization or SM activity (gpu_samples) without it";
    return {nvml};
  }
  nvml.state = CheckState::kPass;
  nvml.detail = probe.library + ": " + std::to_string(probe.devices.size()) + " GPU" +
                (probe.devices.size() == 1 ? "" : "s");
  CheckResult gpm{"GPM", CheckState::kInfo, false, "", ""};
  int supported = 0;
  for (const GpuDevice& d : probe.devices) {
    if (!gpm.detail.empty()) gpm.detail += "; ";
    gpm.detail += "GPU " + std::to_string(d.gpu) + " " + d.name +
                  (d.gpm_supported ? ": supported" : ": not supported");
    supported += d.gpm_supported ? 1 : 0;
  }
  if (!probe.gpm_api) gpm.detail = "not supported: this NVML has no GPM entry points";
  if (supported > 0 && probe.gpm_api) {
    gpm.state = CheckState::kPass;
  } else {
    gpm.hint = "explain shows NVML utilization only (GPM needs a Hopper or newer GPU)";
  }
  return {nvml, gpm};
}

// Python CUDA processes and whether `trace --stack` can walk their frames (CPython 3.10-3.13
// with known offsets), e.g. "pid 4242 python3.12: Python frames walkable (CPython 3.12.3,
// table 3.12)".
CheckResult CheckPython(const std::vector<CudaLibrary>& libs) {
  CheckResult r{"CPython", CheckState::kInfo, false, "", ""};
  std::set<int32_t> pids;
  for (const CudaLibrary& lib : libs) pids.insert(lib.pids.begin(), lib.pids.end());
  int python = 0;
  int walkable = 0;
  for (int32_t pid : pids) {
    std::string version = PythonVersionOf(pid);
    if (version.empty()) continue;
    ++python;
    if (!r.detail.empty()) r.detail += "; ";
    StatusOr<PythonProcess> p = DiscoverPythonProcess(pid);
    if (p.ok()) {
      ++walkable;
      r.detail += "pid " + std::to_string(pid) + ": CPython " + p->version +
                  ", --stack walks its Python frames (" + p->offsets.source + ")";
    } else {
      r.detail += "pid " + std::to_string(pid) + ": Python " + version +
                  ", --stack cannot walk its Python frames: " + p.status().message();
    }
  }
  if (python == 0) {
    r.detail = pids.empty() ? "no CUDA processes running" : "no Python among CUDA processes";
  } else if (walkable < python) {
    r.hint = "trace --stack still records native frames for these processes";
  }
  return r;
}

}  // namespace

CheckReport RunChecks(const CheckOptions& options) {
  std::vector<CudaLibrary> libs = FindCudaLibraries(options.cuda_libs);
  CheckReport report;
  std::vector<CheckResult>& results = report.checks;
  results = {CheckKernel(),  CheckBtf(),         CheckTracefs(),
             CheckUprobes(), CheckTracepoints(), CheckPrivileges()};
  // Loading BPF needs the privileges; without them say so once instead of a confusing EPERM.
  if (results.back().state == CheckState::kPass) {
    results.push_back(CheckBpfLoad());
  } else {
    results.push_back({"BPF program", CheckState::kFail, true, "not tried without privileges",
                       "run as root (sudo gpuwhy check)"});
  }
  results.push_back(CheckPtraceScope());
  for (CheckResult& r : CheckCuda(libs)) results.push_back(r);
  results.push_back(CheckGpu());
  for (CheckResult& r : CheckNvml(options.nvml_lib)) results.push_back(r);
  results.push_back(CheckPython(libs));
  return report;
}

StatusOr<CheckReport> RunChecksInChild(const CheckOptions& options, int timeout_ms) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus("check: create pipe", errno);
  ScopedFd read_end(fds[0]);
  ScopedFd write_end(fds[1]);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return ErrnoStatus("check: fork", errno);
  if (pid == 0) {
    // Nothing the checks or the libraries they load print may reach the parent's stdout.
    int devnull = open("/dev/null", O_RDWR);
    if (devnull >= 0) {
      dup2(devnull, STDIN_FILENO);
      dup2(devnull, STDOUT_FILENO);
    }
    std::string json = CheckReportToJson(RunChecks(options))
                           .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    size_t done = 0;
    while (done < json.size()) {
      ssize_t n = write(write_end.get(), json.data() + done, json.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) _exit(1);
      done += static_cast<size_t>(n);
    }
    _exit(0);
  }
  write_end.Reset();
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd p = {read_end.get(), POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buf[8192];
    ssize_t n = read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (out.size() < (1u << 20)) out.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Unavailable("check: the checks did not finish within " +
                       std::to_string(timeout_ms / 1000) + " s");
  }
  if (out.empty()) return Internal("check: the child running the checks reported nothing");
  nlohmann::json parsed = nlohmann::json::parse(out, nullptr, false);
  if (parsed.is_discarded()) return Internal("check: the checks' report is not JSON");
  return CheckReportFromJson(parsed);
}

}  // namespace gw
