#include "capture/child_process.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace gw {
namespace {

int StatusToCode(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Exact names a job run as another user keeps from the caller's environment.
constexpr std::string_view kJobEnvNames[] = {"PATH",
                                             "TERM",
                                             "COLORTERM",
                                             "COLUMNS",
                                             "LINES",
                                             "LANG",
                                             "LANGUAGE",
                                             "TZ",
                                             "TMPDIR",
                                             "DISPLAY",
                                             "VIRTUAL_ENV",
                                             "MASTER_ADDR",
                                             "MASTER_PORT",
                                             "RANK",
                                             "LOCAL_RANK",
                                             "WORLD_SIZE",
                                             "LOCAL_WORLD_SIZE",
                                             "NODE_RANK",
                                             "GROUP_RANK"};
// Prefixes of names it keeps: locale, and what configures GPU, ML and Python jobs (GWSIM_ is
// the simulated CUDA runtime's).
constexpr std::string_view kJobEnvPrefixes[] = {
    "LC_",         "CUDA_",    "CUDNN_",  "CUBLAS", "NVIDIA_", "NCCL_",       "NV_",
    "TORCH",       "PYTORCH_", "PYTHON",  "OMP_",   "MKL_",    "KMP_",        "OPENBLAS_",
    "GOMP_",       "TRITON_",  "XLA_",    "JAX_",   "TF_",     "HF_",         "TRANSFORMERS_",
    "TOKENIZERS_", "WANDB_",   "MLFLOW_", "CONDA_", "DS_",     "ACCELERATE_", "GWSIM_"};

// In the child: the caller's environment reduced to what JobEnvKept allows.
void KeepJobEnv(const std::vector<std::string>& keep) {
  std::vector<std::string> kept;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    size_t eq = entry.find('=');
    if (eq != std::string_view::npos && JobEnvKept(entry.substr(0, eq), keep)) {
      kept.emplace_back(entry);
    }
  }
  clearenv();
  for (std::string& entry : kept) {
    size_t eq = entry.find('=');
    entry[eq] = '\0';
    setenv(entry.c_str(), entry.c_str() + eq + 1, 1);
  }
}

// In the child: become `uid` for good (groups first, then gid, then uid), with the user's
// HOME, USER, LOGNAME and SHELL. Returns 0 or an errno.
int BecomeUser(int uid) {
  struct passwd* pw = getpwuid(static_cast<uid_t>(uid));
  if (pw == nullptr) return ENOENT;
  if (initgroups(pw->pw_name, pw->pw_gid) != 0) return errno;
  if (setgid(pw->pw_gid) != 0) return errno;
  if (setuid(pw->pw_uid) != 0) return errno;
  if (setuid(0) == 0) return EPERM;  // privileges must be gone for good
  setenv("HOME", pw->pw_dir, 1);
  setenv("USER", pw->pw_name, 1);
  setenv("LOGNAME", pw->pw_name, 1);
  setenv("SHELL", pw->pw_shell != nullptr && *pw->pw_shell != '\0' ? pw->pw_shell : "/bin/sh", 1);
  return 0;
}

// In the child: closes every descriptor above 2 except `keep_a` and `keep_b`.
void CloseOtherFds(int keep_a, int keep_b) {
  int lo = std::min(keep_a, keep_b), hi = std::max(keep_a, keep_b);
  unsigned first = 3;
  for (int keep : {lo, hi}) {
    if (keep >= static_cast<int>(first)) {
      if (keep > static_cast<int>(first)) syscall(SYS_close_range, first, keep - 1, 0);
      first = keep + 1;
    }
  }
  syscall(SYS_close_range, first, ~0U, 0);
}

}  // namespace

bool JobEnvKept(std::string_view name, const std::vector<std::string>& keep) {
  if (name.empty()) return false;
  for (const std::string& k : keep) {
    if (!k.empty() && k.back() == '*') {
      if (name.rfind(std::string_view(k).substr(0, k.size() - 1), 0) == 0) return true;
    } else if (name == k) {
      return true;
    }
  }
  if (name.rfind("LD_", 0) == 0) return false;  // the loader's: only when named in `keep`
  for (std::string_view n : kJobEnvNames) {
    if (name == n) return true;
  }
  for (std::string_view p : kJobEnvPrefixes) {
    if (name.rfind(p, 0) == 0) return true;
  }
  return false;
}

int InvokingUserUid() {
  if (getuid() != 0) return -1;
  const char* text = std::getenv("SUDO_UID");
  if (text == nullptr || *text == '\0') return -1;
  char* end = nullptr;
  long uid = std::strtol(text, &end, 10);
  if (*end != '\0' || uid <= 0 || uid > 0x7fffffff) return -1;
  if (getpwuid(static_cast<uid_t>(uid)) == nullptr) return -1;
  return static_cast<int>(uid);
}

StatusOr<GatedChild> GatedChild::Spawn(const ChildOptions& options) {
  if (options.argv.empty()) return InvalidArgument("no program to run");
  int gate[2], error[2];
  if (pipe2(gate, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  if (pipe2(error, O_CLOEXEC) != 0) {
    int err = errno;
    close(gate[0]);
    close(gate[1]);
    return ErrnoStatus("pipe", err);
  }
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    for (int fd : {gate[0], gate[1], error[0], error[1]}) close(fd);
    return ErrnoStatus("fork", err);
  }
  if (pid == 0) {
    close(gate[1]);
    close(error[0]);
    auto fail = [&](int err) {
      ssize_t ignored = write(error[1], &err, sizeof(err));
      (void)ignored;
      _exit(127);
    };
    if (options.die_with_parent) {
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
      if (getppid() != parent) _exit(127);
    }
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.uid >= 0) {
      setsid();  // no controlling terminal: root's stays out of the job's reach
    } else if (options.own_process_group) {
      setpgid(0, 0);
    }
    if (options.cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(options.cpu, &set);
      sched_setaffinity(0, sizeof(set), &set);
    }
    if (options.output_fd >= 0) {
      dup2(options.output_fd, STDOUT_FILENO);
      dup2(options.output_fd, STDERR_FILENO);
    }
    if (options.stdin_null) {
      int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, STDIN_FILENO);
    }
    if (options.uid >= 0) {
      CloseOtherFds(gate[0], error[1]);
      KeepJobEnv(options.keep_env);
      if (int err = BecomeUser(options.uid); err != 0) fail(err);
    }
    char c;
    if (read(gate[0], &c, 1) != 1) _exit(127);  // the parent gave up: never run
    close(gate[0]);
    execvp(argv[0], argv.data());
    fail(errno);
  }
  close(gate[0]);
  close(error[1]);
  return GatedChild(pid, gate[1], error[0], options.argv[0]);
}

GatedChild::GatedChild(GatedChild&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      gate_fd_(std::exchange(other.gate_fd_, -1)),
      error_fd_(std::exchange(other.error_fd_, -1)),
      program_(std::move(other.program_)),
      reaped_(other.reaped_),
      exit_code_(other.exit_code_) {}

GatedChild::~GatedChild() {
  if (gate_fd_ >= 0) {
    close(gate_fd_);  // an unreleased child exits without running anything
    if (!reaped_ && pid_ > 0) Wait();
  }
  if (error_fd_ >= 0) close(error_fd_);
}

Status GatedChild::Release() {
  if (gate_fd_ < 0) return Status::Ok();
  ssize_t n = write(gate_fd_, "g", 1);
  close(gate_fd_);
  gate_fd_ = -1;
  int err = 0;
  ssize_t got;
  do {
    got = read(error_fd_, &err, sizeof(err));  // EOF: exec succeeded (the pipe is CLOEXEC)
  } while (got < 0 && errno == EINTR);
  close(error_fd_);
  error_fd_ = -1;
  if (n != 1 && got <= 0) return Internal("the child exited before it could be started");
  if (got == sizeof(err)) {
    Wait();
    if (err == ENOENT) {
      return NotFound("cannot run '" + program_ + "': no such program (not in PATH?)");
    }
    return ErrnoStatus("cannot run '" + program_ + "'", err);
  }
  return Status::Ok();
}

bool GatedChild::Exited(int* code) {
  if (reaped_) {
    *code = exit_code_;
    return true;
  }
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return false;
  reaped_ = true;
  exit_code_ = StatusToCode(status);
  *code = exit_code_;
  return true;
}

int GatedChild::Wait() {
  if (reaped_) return exit_code_;
  int status = 0;
  pid_t r;
  do {
    r = waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  reaped_ = true;
  exit_code_ = r == pid_ ? StatusToCode(status) : 1;
  return exit_code_;
}

}  // namespace gw
