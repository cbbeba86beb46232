// Shared by stacks_test.cc and bench/stacks_bench.cc: loads stacks_test.bpf.c with its maps
// shared with a StackRegistry, attaches it to gw_stack_target, and drives target processes
// over pipes ("ready" → "go" → "called …" → "done").
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "base/scoped.h"
#include "base/status.h"
#include "sources/stacks/stack_registry.h"

struct stacks_test_bpf;
struct bpf_link;

namespace gw {

// Paths of the test targets: the environment variable `name` when set, else `built`.
std::string StackTestPath(const char* name, const char* built);

void DestroyStacksTestSkel(stacks_test_bpf* skel);
void DestroyStacksTestLink(bpf_link* link);

class StackTestProbe {
 public:
  // Loads the probe; `capture` false makes it count only. A non-zero `budget_interval_ns`
  // makes each uprobe hit ask gw_stack_budget_ok(budget_interval_ns, budget_burst) first.
  static StatusOr<std::unique_ptr<StackTestProbe>> Create(StackRegistry* registry, bool capture,
                                                          uint64_t budget_interval_ns = 0,
                                                          uint32_t budget_burst = 0);
  // Attaches to `function` (default gw_stack_target) in `library` for `pid` (-1: any).
  Status Attach(const std::string& library, int32_t pid,
                const std::string& function = "gw_stack_target");
  // Captures where threads of `pid` stop (tp_btf/sched_switch).
  Status AttachSchedSwitch(int32_t pid);
  uint64_t hits() const { return Result(0); }
  uint64_t last_key() const { return Result(1); }
  uint64_t sched_hits() const { return Result(2); }
  uint64_t last_sched_key() const { return Result(3); }
  uint64_t budget_allowed() const { return Result(5); }

 private:
  StackTestProbe() = default;
  uint64_t Result(uint32_t index) const;
  // Declared so the link is destroyed before the skeleton.
  ScopedResource<stacks_test_bpf*, DestroyStacksTestSkel, nullptr> skel_;
  ScopedResource<bpf_link*, DestroyStacksTestLink, nullptr> link_;
  ScopedResource<bpf_link*, DestroyStacksTestLink, nullptr> sched_link_;
};

// A child process with its stdin/stdout on pipes.
class TargetProcess {
 public:
  static StatusOr<std::unique_ptr<TargetProcess>> Start(const std::vector<std::string>& argv);
  ~TargetProcess();
  // Reads one line from the child's stdout (empty on EOF or after `timeout_ms`).
  std::string ReadLine(int timeout_ms = 20000);
  void WriteLine(const std::string& line);
  int Wait();  // exit status
  pid_t pid() const { return pid_; }

 private:
  TargetProcess() = default;
  pid_t pid_ = -1;
  ScopedFd to_child_, from_child_;
  std::string buffer_;
};

}  // namespace gw
