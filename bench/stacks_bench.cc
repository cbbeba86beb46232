// Cost of stack capture per probed call (issue 5): a target calls gw_stack_target() N times
// in a loop and reports ns per call, under
//   none        no probe attached
//   probe       entry uprobe that only counts (the probe's own cost)
//   native      + gw_capture_stack(): frame-pointer user stack, hash, dedup insert
//   native+py   + the CPython frame walk (the process is Watch()ed as Python)
// for a native C++ target and for CPython targets (ctypes calls). Medians of --rounds.
// Usage (root): gw_stacks_bench [--calls N] [--rounds R] [python ...]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sources/stacks/stack_registry.h"
#include "sources/stacks/stacks_test_util.h"

namespace gw {
namespace {

enum class Mode { kNone, kProbe, kNative, kNativePython };

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kNone:
      return "none";
    case Mode::kProbe:
      return "probe";
    case Mode::kNative:
      return "native";
    case Mode::kNativePython:
      return "native+py";
  }
  return "?";
}

// Returns ns per call, or a negative value on failure.
double RunOnce(const std::vector<std::string>& argv, Mode mode, StackStats* stats) {
  auto registry = StackRegistry::Create({});
  if (!registry.ok()) {
    std::fprintf(stderr, "%s\n", registry.status().message().c_str());
    return -1;
  }
  std::unique_ptr<StackTestProbe> probe;
  if (mode != Mode::kNone) {
    auto p = StackTestProbe::Create(registry->get(), mode != Mode::kProbe);
    if (!p.ok()) {
      std::fprintf(stderr, "%s\n", p.status().message().c_str());
      return -1;
    }
    probe = std::move(p).value();
  }
  auto target = TargetProcess::Start(argv);
  if (!target.ok() || (*target)->ReadLine() != "ready") return -1;
  if (mode == Mode::kNativePython) {
    auto w = (*registry)->Watch((*target)->pid());
    if (!w.ok() || !w->python) {
      std::fprintf(stderr, "not walkable as Python: %s\n", w.ok() ? w->note.c_str() : "");
      return -1;
    }
  }
  if (probe) {
    Status st =
        probe->Attach(StackTestPath("GW_STACK_TARGET_LIB", GW_STACK_TARGET_LIB), (*target)->pid());
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.message().c_str());
      return -1;
    }
  }
  (*target)->WriteLine("go");
  std::string called = (*target)->ReadLine(600000);
  (*target)->WriteLine("done");
  (*target)->Wait();
  *stats = (*registry)->Stats();
  (void)(*registry)->Drain();
  if (called.rfind("called ", 0) != 0) return -1;
  return std::atof(called.c_str() + 7);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? -1 : v[v.size() / 2];
}

void Bench(const std::string& label, const std::vector<std::string>& argv, bool python,
           int rounds) {
  std::vector<Mode> modes = {Mode::kNone, Mode::kProbe, Mode::kNative};
  if (python) modes.push_back(Mode::kNativePython);
  std::vector<std::vector<double>> samples(modes.size());
  StackStats stats[4];
  // Interleave modes round by round so drift on a shared VM spreads over all of them.
  for (int r = 0; r < rounds; ++r) {
    for (size_t m = 0; m < modes.size(); ++m)
      samples[m].push_back(RunOnce(argv, modes[m], &stats[m]));
  }
  double base = Median(samples[0]);
  for (size_t m = 0; m < modes.size(); ++m) {
    double med = Median(samples[m]);
    double lo = *std::min_element(samples[m].begin(), samples[m].end());
    double hi = *std::max_element(samples[m].begin(), samples[m].end());
    std::printf("%-18s %-10s %9.1f ns/call (min %.1f, max %.1f)  +%.1f ns vs none", label.c_str(),
                ModeName(modes[m]), med, lo, hi, med - base);
    if (modes[m] == Mode::kNative || modes[m] == Mode::kNativePython) {
      std::printf("  [captures %lld, distinct %lld, no-thread %lld]",
                  static_cast<long long>(stats[m].captures),
                  static_cast<long long>(stats[m].new_stacks),
                  static_cast<long long>(stats[m].python_no_thread));
    }
    std::printf("\n");
  }
}

}  // namespace
}  // namespace gw

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    std::fprintf(stderr, "gw_stacks_bench: needs root (loads BPF programs)\n");
    return 1;
  }
  long calls = 200000;
  int rounds = 5;
  std::vector<std::string> pythons;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) {
      calls = std::atol(argv[++i]);
    } else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::atoi(argv[++i]);
    } else {
      pythons.push_back(argv[i]);
    }
  }
  std::string n = std::to_string(calls);
  std::string lib = gw::StackTestPath("GW_STACK_TARGET_LIB", GW_STACK_TARGET_LIB);
  std::string workload =
      gw::StackTestPath("GW_STACKS_TESTDATA", GW_STACKS_TESTDATA) + "/stack_workload.py";
  std::string deep =
      gw::StackTestPath("GW_STACKS_TESTDATA", GW_STACKS_TESTDATA) + "/stack_deep_workload.py";
  std::printf("calls per run %ld, rounds %d, medians\n", calls, rounds);
  gw::Bench("native C++", {gw::StackTestPath("GW_STACK_NATIVE_TARGET", GW_STACK_NATIVE_TARGET), n},
            false, rounds);
  for (const std::string& python : pythons) {
    std::string label = python.substr(python.rfind('/') + 1);
    gw::Bench(label, {python, workload, lib, n}, true, rounds);
    // The same call 28 Python frames deeper (31 in all): the walk's per-frame cost.
    gw::Bench(label + " d31", {python, deep, lib, n, "28"}, true, rounds);
  }
  return 0;
}
