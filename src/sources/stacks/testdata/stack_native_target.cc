// Native workload: main → gw_native_outer (line 17) → gw_native_inner (line 12) →
// gw_stack_target. stacks_test.cc asserts these lines; keep them in sync.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

extern "C" int gw_stack_target(int x);

__attribute__((noinline)) int gw_native_inner(int x) {
  int r = gw_stack_target(x);
  return r + 1;
}

__attribute__((noinline)) int gw_native_outer(int x) {
  int r = gw_native_inner(x);
  return r * 2;
}

// Usage: stack_native_target [calls]. Prints "ready", waits for a line, makes the calls,
// prints "called <ns per call>", waits for a line, exits.
int main(int argc, char** argv) {
  long calls = argc > 1 ? std::atol(argv[1]) : 1;
  std::string line;
  std::printf("ready\n");
  std::fflush(stdout);
  std::getline(std::cin, line);
  auto start = std::chrono::steady_clock::now();
  long sum = 0;
  for (long i = 0; i < calls; ++i) sum += gw_native_outer(static_cast<int>(i));
  auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  std::printf("called %.1f %ld\n", static_cast<double>(ns) / static_cast<double>(calls), sum & 1);
  std::fflush(stdout);
  std::getline(std::cin, line);
  return 0;
}
