// BPF tests for stack capture (trigger → capture → assert). They load real BPF programs and
// need root; without it they skip loudly. Every CPython under /root/.pyenv/versions (3.10–3.13)
// runs testdata/stack_workload.py; a native C++ target checks frame-pointer stacks and DWARF.
#include <gtest/gtest.h>
#include <time.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "elf/elf_file.h"
#include "sources/stacks/stack_registry.h"
#include "sources/stacks/stacks_test_util.h"
#include "sources/testing/bpf_test.h"

namespace gw {
namespace {

// Build-tree paths, overridable by the environment variables of the same names (to run a
// copied build elsewhere, e.g. on the GPU machine).
const std::string kLibrary = StackTestPath("GW_STACK_TARGET_LIB", GW_STACK_TARGET_LIB);
const std::string kNativeTarget = StackTestPath("GW_STACK_NATIVE_TARGET", GW_STACK_NATIVE_TARGET);
const std::string kWorkload =
    StackTestPath("GW_STACKS_TESTDATA", GW_STACKS_TESTDATA) + "/stack_workload.py";

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Dump(const std::vector<Frame>& frames) {
  std::string out;
  for (const Frame& f : frames) out += "  " + f.Display() + "\n";
  return out;
}

// Runs a target through ready → go → called, then drains its stack while it still lives.
struct Captured {
  SymbolizedStack stack;  // at the uprobe on gw_stack_target
  SymbolizedStack stall;  // at the target's last sched_switch: blocked reading "done"
  WatchResult watch;
};

// `drain_after_exit`: symbolize only after the target exited (native frames must still
// resolve from the maps snapshot; Python code objects would be gone).
Captured RunAndCapture(const std::vector<std::string>& argv, bool drain_after_exit = false) {
  Captured out;
  auto registry = StackRegistry::Create({});
  EXPECT_TRUE(registry.ok()) << registry.status().message();
  if (!registry.ok()) return out;
  auto probe = StackTestProbe::Create(registry->get(), /*capture=*/true);
  EXPECT_TRUE(probe.ok()) << probe.status().message();
  if (!probe.ok()) return out;
  auto target = TargetProcess::Start(argv);
  EXPECT_TRUE(target.ok()) << target.status().message();
  if (!target.ok()) return out;
  EXPECT_EQ((*target)->ReadLine(), "ready");
  auto watch = (*registry)->Watch((*target)->pid());
  EXPECT_TRUE(watch.ok()) << watch.status().message();
  if (watch.ok()) out.watch = *watch;
  Status attached = (*probe)->Attach(kLibrary, (*target)->pid());
  EXPECT_TRUE(attached.ok()) << attached.message();
  attached = (*probe)->AttachSchedSwitch((*target)->pid());
  EXPECT_TRUE(attached.ok()) << attached.message();
  (*target)->WriteLine("go");
  std::string called = (*target)->ReadLine();
  EXPECT_EQ(called.rfind("called", 0), 0u) << called;
  usleep(300 * 1000);  // the target blocks reading "done"; its last switch records where
  EXPECT_EQ((*probe)->hits(), 1u);
  EXPECT_GT((*probe)->sched_hits(), 0u);
  uint64_t key = (*probe)->last_key();
  uint64_t stall_key = (*probe)->last_sched_key();
  EXPECT_NE(key, 0u);
  EXPECT_NE(stall_key, 0u);
  // Every hit so far captured a stack. Checked while the target is blocked: after it exits,
  // its last switch (in do_task_dead, after the parent was told of the exit) may have counted
  // its hit but not yet its capture.
  StackStats stats = (*registry)->Stats();
  EXPECT_EQ(stats.captures, 1 + static_cast<int64_t>((*probe)->sched_hits()));
  EXPECT_EQ(stats.map_full, 0);
  EXPECT_EQ(stats.busy, 0);
  std::vector<SymbolizedStack> stacks;
  if (!drain_after_exit) stacks = (*registry)->Drain();
  (*target)->WriteLine("done");
  EXPECT_EQ((*target)->Wait(), 0);
  if (drain_after_exit) stacks = (*registry)->Drain();
  for (SymbolizedStack& s : stacks) {
    if (static_cast<uint64_t>(s.id) == key) out.stack = s;
    if (static_cast<uint64_t>(s.id) == stall_key) out.stall = s;
  }
  EXPECT_EQ(static_cast<uint64_t>(out.stack.id), key) << "captured key not drained";
  EXPECT_EQ(static_cast<uint64_t>(out.stall.id), stall_key) << "sched_switch key not drained";
  stats = (*registry)->Stats();
  EXPECT_EQ(stats.map_full, 0);
  EXPECT_EQ(stats.busy, 0);
  return out;
}

using StacksTest = ::gw::testing::BpfTest;

}  // namespace
}  // namespace gw

// Probed by the stack-budget test in this very process (a uprobe on the test binary).
extern "C" __attribute__((noinline)) int GwStackBudgetTarget(int x) {
  asm volatile("" : "+r"(x));
  return x + 1;
}

namespace gw {
namespace {

// Attaches the test probe, with a stack budget, to GwStackBudgetTarget in this process.
std::unique_ptr<StackTestProbe> BudgetProbe(StackRegistry* registry, uint64_t interval_ns,
                                            uint32_t burst) {
  auto probe = StackTestProbe::Create(registry, /*capture=*/true, interval_ns, burst);
  EXPECT_TRUE(probe.ok()) << probe.status().message();
  if (!probe.ok()) return nullptr;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  EXPECT_GT(n, 0);
  if (n <= 0) return nullptr;
  self[n] = '\0';
  Status attached = (*probe)->Attach(self, getpid(), "GwStackBudgetTarget");
  EXPECT_TRUE(attached.ok()) << attached.message();
  return attached.ok() ? std::move(*probe) : nullptr;
}

// trigger → capture → assert: 300 calls in a burst against a budget of 4 at once and one per 10 s.
TEST_F(StacksTest, StackBudgetAllowsItsBurstThenRefuses) {
  auto registry = StackRegistry::Create({});
  ASSERT_TRUE(registry.ok()) << registry.status().message();
  std::unique_ptr<StackTestProbe> probe = BudgetProbe(registry->get(), 10'000'000'000, 4);
  ASSERT_NE(probe, nullptr);
  int x = 0;
  for (int i = 0; i < 300; ++i) x = GwStackBudgetTarget(x);
  EXPECT_EQ(x, 300);
  EXPECT_EQ(probe->hits(), 300u);
  EXPECT_EQ(probe->budget_allowed(), 4u) << "the burst, then nothing for 10 s";
  EXPECT_EQ((*registry)->Stats().captures, 4);
}

// Calls every 2 ms for 0.4 s against one stack per 40 ms (burst 1): about one call in twenty
// captures, spread over the time, not bunched at the start.
TEST_F(StacksTest, StackBudgetRefillsAtItsRate) {
  auto registry = StackRegistry::Create({});
  ASSERT_TRUE(registry.ok()) << registry.status().message();
  std::unique_ptr<StackTestProbe> probe = BudgetProbe(registry->get(), 40'000'000, 1);
  ASSERT_NE(probe, nullptr);
  timespec t0{}, t1{};
  clock_gettime(CLOCK_MONOTONIC, &t0);
  int x = 0;
  uint64_t allowed_at_half = 0;
  for (int i = 0; i < 200; ++i) {
    x = GwStackBudgetTarget(x);
    if (i == 99) allowed_at_half = probe->budget_allowed();
    usleep(2000);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double elapsed_ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
  uint64_t allowed = probe->budget_allowed();
  EXPECT_EQ(probe->hits(), 200u);
  // One at the start, then at most one per 40 ms of elapsed time.
  EXPECT_LE(allowed, 1 + static_cast<uint64_t>(elapsed_ms / 40.0)) << elapsed_ms << " ms";
  // A call comes every 2 ms (more on a loaded machine), so each 40 ms interval has one.
  EXPECT_GE(allowed, 8u) << elapsed_ms << " ms";
  EXPECT_GE(allowed_at_half, 3u) << "captures spread over the run";
  EXPECT_LT(allowed_at_half, allowed);
}

TEST_F(StacksTest, NativeStackHasFunctionsAndLines) {
  Captured c = RunAndCapture({kNativeTarget, "1"}, /*drain_after_exit=*/true);
  const std::vector<Frame>& f = c.stack.frames;
  ASSERT_GE(f.size(), 4u) << Dump(f);
  EXPECT_FALSE(c.watch.python);
  EXPECT_EQ(f[0].function, "gw_stack_target") << Dump(f);
  EXPECT_EQ(f[0].function_offset, 0u) << Dump(f);
  EXPECT_TRUE(EndsWith(f[0].file, "stack_target.c")) << Dump(f);
  EXPECT_EQ(f[0].line, 7) << Dump(f);
  EXPECT_TRUE(EndsWith(f[0].module, "libgw_stack_target.so")) << Dump(f);
  EXPECT_EQ(f[1].function, "gw_native_inner(int)") << Dump(f);
  EXPECT_TRUE(EndsWith(f[1].file, "stack_native_target.cc")) << Dump(f);
  EXPECT_EQ(f[1].line, 12) << Dump(f);
  EXPECT_EQ(f[2].function, "gw_native_outer(int)") << Dump(f);
  EXPECT_EQ(f[2].line, 17) << Dump(f);
  EXPECT_EQ(f[3].function, "main") << Dump(f);
  for (const Frame& frame : f) EXPECT_EQ(frame.kind, FrameKind::kNative);
}

class PythonStacksTest : public StacksTest, public ::testing::WithParamInterface<std::string> {};

// Runs stack_workload.py under `python` (CPython `minor`, e.g. "3.12") and checks the stack.
void CheckPythonStack(const std::string& python, const std::string& minor) {
  Captured c = RunAndCapture({python, kWorkload, kLibrary, "1"});
  ASSERT_TRUE(c.watch.python) << c.watch.note;
  EXPECT_EQ(c.watch.python_version.substr(0, minor.size()), minor);
  const std::vector<Frame>& f = c.stack.frames;
  ASSERT_FALSE(f.empty());
  EXPECT_EQ(f[0].function, "gw_stack_target") << Dump(f);
  std::vector<const Frame*> py;
  for (const Frame& frame : f) {
    if (frame.kind == FrameKind::kPython) py.push_back(&frame);
  }
  ASSERT_EQ(py.size(), 3u) << Dump(f);
  EXPECT_EQ(py[0]->function, "step") << Dump(f);
  EXPECT_EQ(py[0]->line, 14) << Dump(f);
  EXPECT_EQ(py[0]->file, kWorkload) << Dump(f);
  EXPECT_EQ(py[1]->function, "main") << Dump(f);
  EXPECT_EQ(py[1]->line, 23) << Dump(f);
  EXPECT_EQ(py[2]->function, "<module>") << Dump(f);
  EXPECT_EQ(py[2]->line, 30) << Dump(f);
  EXPECT_EQ(c.stack.location, kWorkload + ":14");
  // The library was mapped after Watch(): the symbolizer re-read the maps to resolve it.
  EXPECT_TRUE(EndsWith(f[0].module, "libgw_stack_target.so")) << Dump(f);
  // Python frames read top to bottom after the probed native function.
  EXPECT_GT(py[0] - &f[0], 0);
  EXPECT_EQ(c.stack.flags & (GW_STACK_PY_NO_THREAD | GW_STACK_PY_READ_ERROR), 0u);
  // Which frames start a C-level eval call: every frame in 3.10; in 3.11+ calls between Python
  // functions stay inside one _PyEval_EvalFrameDefault, so only <module> does.
  ASSERT_EQ(c.stack.raw.python.size(), 3u);
  bool every_frame = minor == "3.10";
  EXPECT_EQ(c.stack.raw.python[0].entry, every_frame);
  EXPECT_EQ(c.stack.raw.python[1].entry, every_frame);
  EXPECT_TRUE(c.stack.raw.python[2].entry);
  // Where the process stopped (sched_switch): main() blocked in sys.stdin.readline() at line 26.
  std::vector<const Frame*> stall;
  for (const Frame& frame : c.stall.frames) {
    if (frame.kind == FrameKind::kPython) stall.push_back(&frame);
  }
  ASSERT_EQ(stall.size(), 2u) << Dump(c.stall.frames);
  EXPECT_EQ(stall[0]->function, "main") << Dump(c.stall.frames);
  EXPECT_EQ(stall[0]->line, 26) << Dump(c.stall.frames);
  EXPECT_EQ(stall[1]->function, "<module>") << Dump(c.stall.frames);
  EXPECT_EQ(stall[1]->line, 30) << Dump(c.stall.frames);
  std::printf("%s (%s) stack:\n%sstopped at:\n%s", python.c_str(), c.watch.python_version.c_str(),
              Dump(f).c_str(), Dump(c.stall.frames).c_str());
}

TEST_P(PythonStacksTest, PythonFramesHaveExecutingLines) {
  const std::string version = GetParam();  // "3.12.1"
  std::string minor = version.substr(0, version.rfind('.'));
  std::string python = "/root/.pyenv/versions/" + version + "/bin/python" + minor;
  if (access(python.c_str(), X_OK) != 0) {
    GTEST_SKIP() << "*** SKIPPED: " << python << " not installed ***";
  }
  CheckPythonStack(python, minor);
}

// GW_TEST_PYTHONS="/usr/bin/python3.12 …": more interpreters (distribution builds, which
// often keep frame pointers so the Python frames splice at _PyEval_EvalFrameDefault).
TEST_F(StacksTest, PythonsFromEnvironment) {
  const char* list = std::getenv("GW_TEST_PYTHONS");
  if (list == nullptr || *list == '\0') GTEST_SKIP() << "GW_TEST_PYTHONS not set";
  std::istringstream in(list);
  std::string python;
  while (in >> python) {
    size_t at = python.rfind("python3.");
    ASSERT_NE(at, std::string::npos) << python << ": name must end in python3.X";
    SCOPED_TRACE(python);
    CheckPythonStack(python, python.substr(at + 6));
  }
}

// The 3.13 _Py_DebugOffsets embedded in libpython3.13 (initialized data of _PyRuntime) agree
// with the frozen table that tools/py_offsets_probe.sh printed from the headers.
TEST(PythonOffsetsTest, DebugOffsetsOf313MatchTable) {
  const std::string lib = "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0";
  if (access(lib.c_str(), R_OK) != 0) GTEST_SKIP() << "*** SKIPPED: " << lib << " missing ***";
  auto elf = ElfFile::Open(lib);
  ASSERT_TRUE(elf.ok()) << elf.status().message();
  std::optional<uint64_t> runtime = (*elf)->SymbolAddress("_PyRuntime");
  ASSERT_TRUE(runtime.has_value());
  std::optional<std::string> block = (*elf)->ReadAddress(*runtime, kDebugOffsetsReadSize);
  ASSERT_TRUE(block.has_value());
  auto parsed = PythonOffsetsFromDebugOffsets(*block);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  auto table = PythonOffsetsForVersion(13);
  ASSERT_TRUE(table.ok());
  EXPECT_EQ(std::memcmp(&parsed->bpf, &table->bpf, sizeof(gw_py_offsets)), 0);
  EXPECT_EQ(parsed->code.code_filename, table->code.code_filename);
  EXPECT_EQ(parsed->code.code_qualname, table->code.code_qualname);
  EXPECT_EQ(parsed->code.code_linetable, table->code.code_linetable);
  EXPECT_EQ(parsed->code.code_firstlineno, table->code.code_firstlineno);
  EXPECT_EQ(parsed->code.code_adaptive, table->code.code_adaptive);
  EXPECT_EQ(parsed->code.unicode_ascii_size, table->code.unicode_ascii_size);
  EXPECT_EQ(parsed->source, "_Py_DebugOffsets 3.13.0");
}

TEST_F(StacksTest, DescribesRunningPythonProcesses) {
  const std::string python = "/root/.pyenv/versions/3.12.1/bin/python3.12";
  if (access(python.c_str(), X_OK) != 0)
    GTEST_SKIP() << "*** SKIPPED: " << python << " missing ***";
  auto target = TargetProcess::Start({python, kWorkload, kLibrary, "1"});
  ASSERT_TRUE(target.ok());
  ASSERT_EQ((*target)->ReadLine(), "ready");
  std::string want = "pid " + std::to_string((*target)->pid()) +
                     " python3.12: Python frames walkable (CPython 3.12.1, table 3.12)";
  bool found = false;
  for (const std::string& line : DescribePythonProcesses()) found = found || line == want;
  EXPECT_TRUE(found) << want;
}

TEST(PythonOffsetsTest, UnknownVersionsAreRefused) {
  EXPECT_FALSE(PythonOffsetsForVersion(9).ok());
  EXPECT_FALSE(PythonOffsetsFromDebugOffsets(std::string(600, 'x')).ok());
}

TEST(ElfFileTest, FunctionsLinesAndOffsets) {
  auto elf = ElfFile::Open(kLibrary);
  ASSERT_TRUE(elf.ok()) << elf.status().message();
  std::optional<uint64_t> address = (*elf)->SymbolAddress("gw_stack_target");
  ASSERT_TRUE(address.has_value());
  const ElfFunction* fn = (*elf)->FindFunction(*address + 4);
  ASSERT_NE(fn, nullptr);
  EXPECT_EQ((*elf)->FunctionName(*fn), "gw_stack_target");
  std::optional<SourceLine> line = (*elf)->FindLine(*address);
  ASSERT_TRUE(line.has_value());
  EXPECT_TRUE(EndsWith(line->file, "stack_target.c"));
  EXPECT_EQ(line->line, 7);
  std::optional<uint64_t> off = (*elf)->AddressToFileOffset(*address);
  ASSERT_TRUE(off.has_value());
  EXPECT_EQ((*elf)->FileOffsetToAddress(*off), address);
}

INSTANTIATE_TEST_SUITE_P(CPython, PythonStacksTest,
                         ::testing::Values("3.10.13", "3.11.7", "3.12.1", "3.13.0"),
                         [](const auto& info) {
                           std::string n = "py" + info.param;
                           for (char& ch : n)
                             if (ch == '.') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace gw
