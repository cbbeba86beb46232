// Tries stack capture on any program: attaches the test probe (stacks_test.bpf.c) to FUNCTION
// in LIBRARY, runs COMMAND (which speaks the tests' protocol: prints "ready", waits for a line,
// does its work, prints "called …", waits for a line) and prints every distinct stack.
// Usage (root): gw_stacks_try LIBRARY FUNCTION COMMAND [ARGS...]
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "sources/stacks/stack_registry.h"
#include "sources/stacks/stacks_test_util.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: gw_stacks_try LIBRARY FUNCTION COMMAND [ARGS...]\n");
    return 2;
  }
  auto registry = gw::StackRegistry::Create({});
  if (!registry.ok()) {
    std::fprintf(stderr, "%s\n", registry.status().message().c_str());
    return 1;
  }
  auto probe = gw::StackTestProbe::Create(registry->get(), true);
  if (!probe.ok()) {
    std::fprintf(stderr, "%s\n", probe.status().message().c_str());
    return 1;
  }
  std::vector<std::string> command(argv + 3, argv + argc);
  auto target = gw::TargetProcess::Start(command);
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.status().message().c_str());
    return 1;
  }
  std::string ready = (*target)->ReadLine(600000);
  if (ready != "ready") {
    std::fprintf(stderr, "target said \"%s\", not \"ready\"\n", ready.c_str());
    return 1;
  }
  auto watch = (*registry)->Watch((*target)->pid());
  if (watch.ok()) {
    std::printf("pid %d: python=%d version=%s offsets=%s %s\n", (*target)->pid(), watch->python,
                watch->python_version.c_str(), watch->offsets_source.c_str(), watch->note.c_str());
  }
  gw::Status st = (*probe)->Attach(argv[1], (*target)->pid(), argv[2]);
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.message().c_str());
    return 1;
  }
  (*target)->WriteLine("go");
  std::string called = (*target)->ReadLine(600000);
  std::vector<gw::SymbolizedStack> stacks = (*registry)->Drain();
  (*target)->WriteLine("done");
  (*target)->Wait();
  gw::StackStats s = (*registry)->Stats();
  std::printf("%s | hits %llu captures %lld distinct %lld no-thread %lld read-errors %lld\n",
              called.c_str(), static_cast<unsigned long long>((*probe)->hits()),
              static_cast<long long>(s.captures), static_cast<long long>(s.new_stacks),
              static_cast<long long>(s.python_no_thread),
              static_cast<long long>(s.python_read_errors));
  for (const gw::SymbolizedStack& stack : stacks) {
    std::printf("stack %016llx pid %d flags 0x%x location %s\n",
                static_cast<unsigned long long>(stack.id), stack.pid, stack.flags,
                stack.location.c_str());
    for (const gw::Frame& f : stack.frames) std::printf("  %s\n", f.Display().c_str());
  }
  return 0;
}
