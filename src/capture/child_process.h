// Starting a program for a tracer to follow from its first instruction: fork, wait at a gate
// until the tracer is attached, then exec. Shared by `trace -- CMD` and `demo --live`.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace gw {

struct ChildOptions {
  std::vector<std::string> argv;   // argv[0] is looked up in PATH when it has no '/'
  int cpu = -1;                    // pin to this CPU; -1: not pinned
  int output_fd = -1;              // stdout and stderr go here; -1: inherited
  bool stdin_null = false;         // stdin from /dev/null instead of inherited
  bool own_process_group = false;  // setpgid(0, 0): a terminal's Ctrl-C reaches only gpuwhy
  bool die_with_parent = false;    // PR_SET_PDEATHSIG SIGKILL
  // Run as this user instead of root, the way sudo, su and runuser start a user's program:
  //  - the user's uid, gid, supplementary groups, HOME/USER/LOGNAME/SHELL;
  //  - a session of its own (setsid): root's terminal is not its controlling terminal, so it
  //    cannot push input into it (TIOCSTI) or take it over; it still reads and writes the
  //    descriptors 0-2 it was given. The caller forwards signals (a terminal's to the job's
  //    process group);
  //  - no descriptor above 2 (none of the caller's open files);
  //  - only the environment JobEnvKept() allows, plus the names in keep_env.
  // uid < 0: as the caller, in its session, with its descriptors and environment.
  int uid = -1;
  std::vector<std::string> keep_env;  // names (or PREFIX*) kept beyond the allow-list
};

// The user a root gpuwhy started under sudo runs jobs as: SUDO_UID when the real uid is 0 and
// SUDO_UID names another existing user; -1 otherwise (run as the caller).
int InvokingUserUid();

// Whether a variable of the caller's environment reaches a job run as another user: the
// locale, terminal, PATH, and the variables that configure a GPU job (CUDA_*, NCCL_*, TORCH*,
// PYTHON*, OMP_*, …, see the list in child_process.cc), or a name in `keep` (an entry ending in
// '*' is a prefix). LD_* (the loader's preload and search paths), SUDO_* and the caller's
// HOME/USER/LOGNAME/SHELL/MAIL only when named in `keep`.
bool JobEnvKept(std::string_view name, const std::vector<std::string>& keep);

class GatedChild {
 public:
  // Forks the child, which waits at the gate. Call before the process starts threads: the
  // child calls getpwuid/setgroups/execvp, which are only safe after fork of a one-thread
  // process.
  static StatusOr<GatedChild> Spawn(const ChildOptions& options);

  GatedChild(GatedChild&& other) noexcept;
  GatedChild& operator=(GatedChild&&) = delete;
  GatedChild(const GatedChild&) = delete;
  GatedChild& operator=(const GatedChild&) = delete;
  // A child never released exits at once (the gate closes) and is reaped; a released one that
  // is still running is left alone (Wait() first to reap it).
  ~GatedChild();

  pid_t pid() const { return pid_; }
  // Lets the child exec. Returns the exec error (the program cannot be run) as a Status; the
  // child has then exited with 127.
  Status Release();
  // True once the child has exited (reaped); `*code` gets its exit status, or 128 + signal.
  bool Exited(int* code);
  // Waits for the exit; returns the exit status, or 128 + signal.
  int Wait();

 private:
  GatedChild(pid_t pid, int gate_fd, int error_fd, std::string program)
      : pid_(pid), gate_fd_(gate_fd), error_fd_(error_fd), program_(std::move(program)) {}
  pid_t pid_ = -1;
  int gate_fd_ = -1;     // write end: one byte releases the child
  int error_fd_ = -1;    // read end: the child's errno when exec fails, EOF when exec succeeded
  std::string program_;  // argv[0], for messages
  bool reaped_ = false;
  int exit_code_ = 0;  // once reaped
};

}  // namespace gw
