// BPF tests of the CUDA source: load the real programs, attach them to the fake CUDA libraries
// (testdata/), run a workload that calls every probed API, and check what comes out.
// Trigger → capture → assert. Needs root; in CI it runs as root and must not skip.
#include "sources/cuda/cuda_source.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/scoped.h"
#include "sources/cuda/testdata/fake_cuda.h"
#include "sources/testing/bpf_test.h"
#include "store/ops.h"

namespace gw {
namespace {

// Kernel launches (cudaGraphLaunch is a full call row, not a counted launch).
bool IsKernelLaunch(Op op) { return IsLaunch(op) && op != Op::kCudaGraphLaunch; }

using ::gw::testing::CollectingSink;
using ::gw::testing::DrainUntilExit;
using ::gw::testing::TestContext;

// Launches of `pid` per (op, kernel name): sampled rows plus counted ones.
std::map<std::pair<Op, std::string>, int64_t> Launches(CollectingSink& sink, int32_t pid) {
  std::map<std::pair<Op, std::string>, int64_t> out;
  for (const Event& e : sink.Events()) {
    if (e.pid == pid && IsKernelLaunch(e.op)) out[{e.op, sink.String(e.name_id)}] += 1;
  }
  for (const OpCount& c : sink.Counts()) {
    if (c.pid == pid && IsKernelLaunch(c.op)) out[{c.op, sink.String(c.name_id)}] += c.count;
  }
  return out;
}

// Calls of `op` by `pid`: its rows plus the calls counted without a row.
int64_t CallsOf(CollectingSink& sink, Op op, int32_t pid) {
  int64_t n = static_cast<int64_t>(sink.EventsOf(op, pid).size());
  for (const OpCount& c : sink.Counts()) {
    if (c.pid == pid && c.op == op) n += c.count;
  }
  return n;
}

size_t SampledRows(CollectingSink& sink, int32_t pid) {
  std::vector<Event> events = sink.Events();
  return std::count_if(events.begin(), events.end(),
                       [&](const Event& e) { return e.pid == pid && IsKernelLaunch(e.op); });
}

const std::string kFakeDir = GW_FAKE_CUDA_DIR;
const std::string kWorkload = GW_CUDA_WORKLOAD;

// The source on the fake libraries only, with a small ring.
CudaSourceOptions FakeOptions() {
  CudaSourceOptions options;
  options.discover = false;
  options.libraries = {kFakeDir + "/libcudart.so.13", kFakeDir + "/libcuda.so.1"};
  options.ring_bytes = 1 << 20;
  return options;
}

// Runs the workload to completion; returns its pid.
pid_t RunWorkload(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv{const_cast<char*>(kWorkload.c_str())};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(kWorkload.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "workload status " << status;
  return pid;
}

using CudaSourceTest = ::gw::testing::BpfTest;

const Event* Find(const std::vector<Event>& events, int64_t bytes) {
  for (const Event& e : events) {
    if (e.bytes == bytes) return &e;
  }
  return nullptr;
}

constexpr int64_t kUs = 1000;
constexpr int64_t kSlack = 200 * 1000 * kUs;  // generous upper bound on a loaded CI machine

// Runs with multi-uprobe links (the default) and with one perf-event uprobe per function.
class CudaSourceAttachTest : public CudaSourceTest, public ::testing::WithParamInterface<bool> {};

INSTANTIATE_TEST_SUITE_P(AttachModes, CudaSourceAttachTest, ::testing::Values(true, false),
                         [](const auto& info) {
                           return std::string(info.param ? "MultiUprobe" : "PerfEvent");
                         });

TEST_P(CudaSourceAttachTest, EveryProbedApiYieldsItsRow) {
  // A tracked map of our own, shared like the host source shares its map.
  ScopedFd tracked(bpf_map_create(BPF_MAP_TYPE_HASH, "gw_tracked_t", 4, 4, 1024, nullptr));
  ASSERT_TRUE(tracked) << "bpf_map_create: " << std::strerror(errno);

  CudaSourceOptions options = FakeOptions();
  options.launch_sample_every = 4;
  options.multi_uprobe = GetParam();
  options.row_budget = false;  // --all-rows: every call a row, nested driver calls too
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  Status started = (*source)->Start(TestContext(&sink, tracked.get()));
  ASSERT_TRUE(started.ok()) << started.message();
  EXPECT_EQ((*source)->UsesMultiUprobeLinks(), GetParam());  // kernel 6.18 has them
  // 22 runtime functions timed (×2), 4 launches, 1 registration (×2); 16 driver calls timed
  // (×2), 2 name lookups (×2), 2 launches. The _ptsz forms the fake lacks are skipped.
  EXPECT_EQ((*source)->LinkCount(), 22u * 2 + 4 + 2 + 16 * 2 + 2 * 2 + 2 - 1);
  EXPECT_EQ((*source)->AttachedLibraries().size(), 2u);
  std::vector<std::string> notes = (*source)->TakeNotes();
  ASSERT_EQ(notes.size(), 2u);

  pid_t pid = RunWorkload({"all"});
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();

  // The workload joined the tracked set, flagged as a CUDA caller (host_abi.h's
  // GW_TRACKED_CUDA_CALL).
  uint32_t key = static_cast<uint32_t>(pid), value = 0;
  EXPECT_EQ(bpf_map_lookup_elem(tracked.get(), &key, &value), 0);
  EXPECT_EQ(value, 0x8u);

  const int64_t runtime_min = (kFakeRuntimeUs + kFakeDriverUs) * kUs;
  const int64_t driver_min = kFakeDriverUs * kUs;

  // Memcpy: bytes, direction, pinned bit, and the nested driver row inside the runtime row.
  auto memcpys = sink.EventsOf(Op::kCudaMemcpy, pid);
  ASSERT_EQ(memcpys.size(), 6u);
  const Event* registered = Find(memcpys, 4097);
  ASSERT_NE(registered, nullptr);
  EXPECT_EQ(registered->kind, static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost);
  const Event* unregistered = Find(memcpys, 4098);
  ASSERT_NE(unregistered, nullptr);
  EXPECT_EQ(unregistered->kind, static_cast<int64_t>(CopyKind::kHostToDevice));
  const Event* pageable = Find(memcpys, 4096);
  ASSERT_NE(pageable, nullptr);
  EXPECT_EQ(pageable->kind, static_cast<int64_t>(CopyKind::kHostToDevice));
  EXPECT_EQ(pageable->ret, 0);
  EXPECT_GE(pageable->duration_ns, runtime_min);
  EXPECT_LT(pageable->duration_ns, runtime_min + kSlack);
  EXPECT_NE(pageable->tid, 0);
  const Event* pinned = Find(memcpys, 8192);
  ASSERT_NE(pinned, nullptr);
  EXPECT_EQ(pinned->kind, static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost);
  const Event* pinned_d2h = Find(memcpys, 8193);
  ASSERT_NE(pinned_d2h, nullptr);
  EXPECT_EQ(pinned_d2h->kind, static_cast<int64_t>(CopyKind::kDeviceToHost) | kCopyPinnedHost);
  const Event* inferred = Find(memcpys, 100);
  ASSERT_NE(inferred, nullptr);
  EXPECT_EQ(inferred->kind, static_cast<int64_t>(CopyKind::kHostToDevice));

  auto htod = sink.EventsOf(Op::kCuMemcpyHtoD, pid);
  const Event* inner = Find(htod, 4096);
  ASSERT_NE(inner, nullptr);
  EXPECT_EQ(inner->kind, static_cast<int64_t>(CopyKind::kHostToDevice));
  EXPECT_EQ(inner->tid, pageable->tid);
  EXPECT_GE(inner->duration_ns, driver_min);
  EXPECT_GE(pageable->duration_ns, inner->duration_ns + kFakeRuntimeUs * kUs);
  EXPECT_GE(inner->ts_ns, pageable->ts_ns);
  EXPECT_LE(inner->ts_ns + inner->duration_ns, pageable->ts_ns + pageable->duration_ns);

  auto async = sink.EventsOf(Op::kCudaMemcpyAsync, pid);
  ASSERT_EQ(async.size(), 1u);
  EXPECT_EQ(async[0].bytes, 12288);
  EXPECT_EQ(async[0].kind, 1 | kCopyPinnedHost);
  auto m2d = sink.EventsOf(Op::kCudaMemcpy2D, pid);
  ASSERT_EQ(m2d.size(), 1u);
  EXPECT_EQ(m2d[0].bytes, 64 * 32);
  EXPECT_EQ(m2d[0].kind, 1);
  auto m2da = sink.EventsOf(Op::kCudaMemcpy2DAsync, pid);
  ASSERT_EQ(m2da.size(), 1u);
  EXPECT_EQ(m2da[0].bytes, 64 * 16);
  EXPECT_EQ(m2da[0].kind, 1 | kCopyPinnedHost);
  auto peer = sink.EventsOf(Op::kCudaMemcpyPeer, pid);
  ASSERT_EQ(peer.size(), 1u);
  EXPECT_EQ(peer[0].bytes, 512);
  EXPECT_EQ(peer[0].kind, 3);
  auto peer_async = sink.EventsOf(Op::kCudaMemcpyPeerAsync, pid);
  ASSERT_EQ(peer_async.size(), 1u);
  EXPECT_EQ(peer_async[0].bytes, 256);

  // Driver copies called directly: direction from the function.
  struct DriverCopy {
    Op op;
    int64_t bytes;
    int64_t kind;
  };
  for (const DriverCopy& c : {DriverCopy{Op::kCuMemcpyHtoD, 301, 1}, {Op::kCuMemcpyDtoH, 302, 2},
                              {Op::kCuMemcpyDtoD, 303, 3}, {Op::kCuMemcpyHtoDAsync, 304, 1 | 16},
                              {Op::kCuMemcpyDtoHAsync, 305, 2 | 16},
                              {Op::kCuMemcpyDtoDAsync, 306, 3}, {Op::kCuMemcpy, 307, 1},
                              {Op::kCuMemcpyAsync, 308, 1}}) {
    std::vector<Event> rows = sink.EventsOf(c.op, pid);
    const Event* e = Find(rows, c.bytes);
    ASSERT_NE(e, nullptr) << OpName(c.op);
    EXPECT_EQ(e->kind, c.kind) << OpName(c.op);
    EXPECT_GE(e->duration_ns, driver_min) << OpName(c.op);
  }

  // Allocation: size and pointer; free: the size from our own tracking.
  auto mallocs = sink.EventsOf(Op::kCudaMalloc, pid);
  ASSERT_EQ(mallocs.size(), 1u);
  EXPECT_EQ(mallocs[0].bytes, 1 << 20);
  EXPECT_NE(mallocs[0].addr, 0);
  EXPECT_NE(mallocs[0].addr, kNull);
  EXPECT_GE(mallocs[0].duration_ns, runtime_min);
  auto frees = sink.EventsOf(Op::kCudaFree, pid);
  // cudaFree(d3), cudaFree(d) and the cudaFree the fake cudaFreeAsync calls (same-layer
  // nesting through the PLT).
  ASSERT_EQ(frees.size(), 3u);
  EXPECT_NE(Find(frees, 5000), nullptr);
  EXPECT_NE(Find(frees, 3000), nullptr);
  const Event* big_free = Find(frees, 1 << 20);
  ASSERT_NE(big_free, nullptr);
  EXPECT_EQ(big_free->addr, mallocs[0].addr);
  auto cu_allocs = sink.EventsOf(Op::kCuMemAlloc, pid);
  EXPECT_NE(Find(cu_allocs, 9000), nullptr);
  EXPECT_NE(Find(cu_allocs, 1 << 20), nullptr);  // nested in cudaMalloc
  EXPECT_NE(Find(sink.EventsOf(Op::kCuMemFree, pid), 9000), nullptr);
  ASSERT_EQ(sink.EventsOf(Op::kCudaMallocAsync, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaMallocAsync, pid)[0].bytes, 3000);
  ASSERT_EQ(sink.EventsOf(Op::kCudaFreeAsync, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaFreeAsync, pid)[0].bytes, 3000);
  EXPECT_EQ(sink.EventsOf(Op::kCudaMallocManaged, pid).size(), 1u);
  ASSERT_EQ(sink.EventsOf(Op::kCudaMallocHost, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaMallocHost, pid)[0].bytes, 1 << 16);
  ASSERT_EQ(sink.EventsOf(Op::kCudaHostAlloc, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaHostAlloc, pid)[0].bytes, 6000);

  // Memset, syncs, graphs.
  EXPECT_NE(Find(sink.EventsOf(Op::kCudaMemset, pid), 777), nullptr);
  EXPECT_NE(Find(sink.EventsOf(Op::kCudaMemsetAsync, pid), 778), nullptr);
  for (Op op : {Op::kCudaStreamSync, Op::kCudaEventSync, Op::kCudaDeviceSync}) {
    auto rows = sink.EventsOf(op, pid);
    ASSERT_EQ(rows.size(), 1u) << OpName(op);
    EXPECT_GE(rows[0].duration_ns, runtime_min) << OpName(op);
    EXPECT_LT(rows[0].duration_ns, runtime_min + kSlack) << OpName(op);
  }
  EXPECT_EQ(sink.EventsOf(Op::kCudaStreamSync, pid)[0].addr, 0x1234);
  EXPECT_EQ(sink.EventsOf(Op::kCudaEventSync, pid)[0].addr, 0x5678);
  for (Op op : {Op::kCuStreamSync, Op::kCuCtxSync, Op::kCuEventSync}) {
    auto rows = sink.EventsOf(op, pid);
    ASSERT_EQ(rows.size(), 2u) << OpName(op);  // nested + direct
    for (const Event& e : rows) EXPECT_GE(e.duration_ns, driver_min) << OpName(op);
  }
  ASSERT_EQ(sink.EventsOf(Op::kCudaStreamWaitEvent, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaStreamWaitEvent, pid)[0].addr, 0x1234);
  EXPECT_EQ(sink.EventsOf(Op::kCudaGraphInstantiate, pid).size(), 2u);
  ASSERT_EQ(sink.EventsOf(Op::kCudaGraphLaunch, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCudaGraphLaunch, pid)[0].addr, 0x1234);
  EXPECT_EQ(sink.EventsOf(Op::kCuModuleGetFunction, pid).size(), 1u);
  EXPECT_EQ(sink.EventsOf(Op::kCuLibraryGetKernel, pid).size(), 2u);
  // Not probed: the CUfunction's driver object names it (driver_names.h).
  EXPECT_TRUE(sink.EventsOf(Op::kCuKernelGetFunction, pid).empty());

  // Every launch counted once, with its kernel name: the driver launches nested in the
  // runtime launches only pair the two and are not counted again.
  auto launches = Launches(sink, pid);
  std::map<std::pair<Op, std::string>, int64_t> expected{
      {{Op::kCudaLaunchKernel, "kernel_a(float*)"}, 13},
      {{Op::kCudaLaunchKernelExC, "kernel_b(int)"}, 5},
      {{Op::kCuLaunchKernel, "driver_kernel"}, 7},
      {{Op::kCuLaunchKernelEx, "driver_kernel"}, 4},
  };
  EXPECT_EQ(launches, expected);
  // Every 4th counted launch of a thread, per layer, is a row: 18 runtime → 4, 11 driver → 2.
  EXPECT_EQ(SampledRows(sink, pid), 18u / 4 + 11u / 4);
  for (const Event& e : sink.EventsOf(Op::kCudaLaunchKernel, pid)) EXPECT_EQ(e.addr, 0x1234);
  for (const Event& e : sink.EventsOf(Op::kCuLaunchKernel, pid)) EXPECT_EQ(e.addr, 0x1234);

  DropCounts drops = (*source)->Drops();
  EXPECT_EQ(drops["cuda_bpf_reserve"], 0);
}

// The per-thread token bucket of the row budget. Trigger: 20 cudaMemcpyAsync calls on one thread
// (1.5 ms each in the fake; host-to-device and device-to-host in turn) and 20 direct driver
// copies. Capture with no call slow enough for a row of its own, every call a sample and 3
// tokens a second. Assert: 3 rows, the other 17 in the aggregates with their bytes and
// durations, each aggregate named by its direction; nothing lost, nothing counted twice.
TEST_F(CudaSourceTest, RowBudgetTokenBucketCapsSampledRowsAndAggregatesTheRest) {
  CudaSourceOptions options = FakeOptions();
  options.call_row_min_ns = 10'000'000'000;  // 10 s: no call is slow
  options.call_sample_every = 1;
  options.row_tokens_per_s = 3;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  pid_t pid = RunWorkload({"copies", "20"});
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();

  auto rows = sink.EventsOf(Op::kCudaMemcpyAsync, pid);
  EXPECT_EQ(rows.size(), 3u);
  for (const Event& e : rows) EXPECT_EQ(e.bytes, 4096);
  std::map<std::string, int64_t> by_direction;  // rows + aggregated calls
  for (const Event& e : rows) by_direction[std::string(CopyKindName(e.kind & ~kCopyPinnedHost))]++;
  int64_t count = 0, bytes = 0, total_ns = 0, max_ns = 0;
  for (const OpCount& c : sink.Counts()) {
    if (c.pid != pid) continue;
    if (c.op == Op::kCuMemcpyHtoDAsync) {
      EXPECT_EQ(sink.String(c.name_id), "HtoD");
    }
    if (c.op != Op::kCudaMemcpyAsync) continue;
    count += c.count, bytes += c.bytes, total_ns += c.total_ns;
    max_ns = std::max(max_ns, c.max_ns);
    by_direction[sink.String(c.name_id)] += c.count;
  }
  EXPECT_EQ(count, 17);
  EXPECT_EQ(by_direction["HtoD"], 10);
  EXPECT_EQ(by_direction["DtoH"], 10);
  EXPECT_EQ(by_direction.size(), 2u);
  EXPECT_EQ(bytes, 17 * 4096);
  const int64_t runtime_min = (kFakeRuntimeUs + kFakeDriverUs) * kUs;
  EXPECT_GE(total_ns, 17 * runtime_min);
  EXPECT_GE(max_ns, runtime_min);
  // Direct driver copies are the thread's own calls; nested ones are not recorded.
  EXPECT_EQ(CallsOf(sink, Op::kCuMemcpyHtoDAsync, pid), 20);
  bool noted = false;
  for (const std::string& n : (*source)->TakeNotes()) {
    noted |= n.find("cuda row budget: ") != std::string::npos;
  }
  EXPECT_TRUE(noted);
}

TEST_F(CudaSourceTest, LibraryLoadedAfterStartIsAttachedByRediscover) {
  // A copy of the runtime at a new path is a new file (inode) nobody has attached to.
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw-cuda-rediscover-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::filesystem::path copy = dir / "libcudart.so.13";
  std::filesystem::copy_file(kFakeDir + "/libcudart.so.13", copy,
                             std::filesystem::copy_options::overwrite_existing);

  CudaSourceOptions options;
  options.ring_bytes = 1 << 20;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  auto attached = (*source)->AttachedLibraries();
  EXPECT_EQ(std::count(attached.begin(), attached.end(), copy.string()), 0);

  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    execl(kWorkload.c_str(), kWorkload.c_str(), "dlopen", copy.c_str(), nullptr);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  char ready = 0;
  ASSERT_EQ(read(from_child[0], &ready, 1), 1);  // the copy is mapped now
  (*source)->Rediscover();
  attached = (*source)->AttachedLibraries();
  EXPECT_EQ(std::count(attached.begin(), attached.end(), copy.string()), 1);
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(to_child[1]);
  close(from_child[0]);
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();

  auto mallocs = sink.EventsOf(Op::kCudaMalloc, pid);
  ASSERT_EQ(mallocs.size(), 1u);
  EXPECT_EQ(mallocs[0].bytes, 4242);
  EXPECT_EQ(sink.EventsOf(Op::kCudaDeviceSync, pid).size(), 1u);
  std::filesystem::remove_all(dir);
}

// A sync's row says how long before it the process last gave the GPU work, which is how the
// budget tells a sleep the GPU worked through from one it idled through. Trigger: the workload's
// "work" mode (a launch or none, a 30 ms sleep, small or large copies, another thread's launch,
// then each kind of sync). Capture: every call a row. Assert: only the sync after a launch and
// one small copy reaches back past the sleep; a launch, a sixth small copy in a row, a large
// copy or another thread's launch after the sleep's start cuts it short.
TEST_F(CudaSourceTest, SyncsCarryWhenTheProcessLastGaveTheGpuWork) {
  ScopedFd tracked(bpf_map_create(BPF_MAP_TYPE_HASH, "gw_tracked_t", 4, 4, 1024, nullptr));
  ASSERT_TRUE(tracked);
  CudaSourceOptions options = FakeOptions();
  options.row_budget = false;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, tracked.get())).ok());
  pid_t pid = RunWorkload({"work"});
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();
  constexpr int64_t kMs = 1000 * kUs;
  auto since = [&](Op op) -> int64_t {
    auto rows = sink.EventsOf(op, pid);
    if (rows.size() != 1) {
      ADD_FAILURE() << OpName(op) << ": " << rows.size() << " rows";
      return kNull;
    }
    return rows[0].since_work_ns;
  };
  int64_t device = since(Op::kCudaDeviceSync);
  EXPECT_NE(device, kNull);
  EXPECT_GE(device, 30 * kMs);      // the launch before the sleep; the 4 KiB copy is not work
  EXPECT_LT(device, 30 * kMs + kSlack);
  int64_t stream = since(Op::kCudaStreamSync);
  EXPECT_NE(stream, kNull);
  EXPECT_LT(stream, 20 * kMs);      // the launch after the sleep
  int64_t event = since(Op::kCudaEventSync);
  EXPECT_NE(event, kNull);
  EXPECT_LT(event, 20 * kMs);       // the fifth small copy counts as work
  // Direct driver syncs (not nested in a runtime sync: those are the runtime rows above).
  std::vector<Event> cu_stream;
  for (const Event& e : sink.EventsOf(Op::kCuStreamSync, pid)) {
    if (e.since_work_ns != kNull && e.ts_ns > sink.EventsOf(Op::kCudaEventSync, pid)[0].ts_ns) {
      cu_stream.push_back(e);
    }
  }
  ASSERT_EQ(cu_stream.size(), 1u);
  EXPECT_LT(cu_stream[0].since_work_ns, 20 * kMs);  // the 1 MiB copy
  std::vector<Event> ctx;
  for (const Event& e : sink.EventsOf(Op::kCuCtxSync, pid)) {
    if (e.ts_ns > cu_stream[0].ts_ns) ctx.push_back(e);
  }
  ASSERT_EQ(ctx.size(), 1u);
  EXPECT_NE(ctx[0].since_work_ns, kNull);
  EXPECT_LT(ctx[0].since_work_ns, 25 * kMs);  // the other thread's launch, 10 ms into the sleep
  // The allocations after the last 20 ms sleep: not work, and they carry the last work too.
  std::vector<Event> allocs;
  for (Op op : {Op::kCudaFree, Op::kCudaMalloc}) {
    for (const Event& e : sink.EventsOf(op, pid)) {
      if (e.ts_ns > ctx[0].ts_ns) allocs.push_back(e);
    }
  }
  ASSERT_EQ(allocs.size(), 3u);  // free, malloc, free
  std::sort(allocs.begin(), allocs.end(),
            [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  for (const Event& e : allocs) {
    ASSERT_NE(e.since_work_ns, kNull) << OpName(e.op);
    EXPECT_GE(e.since_work_ns, 20 * kMs) << OpName(e.op);
    // All three point at the work cuCtxSynchronize saw last (the other thread's launch): the
    // sync and the calls between them are not work.
    EXPECT_NEAR(static_cast<double>(e.ts_ns - e.since_work_ns),
                static_cast<double>(ctx[0].ts_ns - ctx[0].since_work_ns), 1000.0)
        << OpName(e.op);
  }
  // Other calls carry none.
  for (const Event& e : sink.EventsOf(Op::kCudaMemcpyAsync, pid)) {
    EXPECT_EQ(e.since_work_ns, kNull);
  }
}

TEST_F(CudaSourceTest, FiltersRecordOnlyTrackedProcesses) {
  ScopedFd tracked(bpf_map_create(BPF_MAP_TYPE_HASH, "gw_tracked_t", 4, 4, 1024, nullptr));
  ASSERT_TRUE(tracked);
  CudaSourceOptions options = FakeOptions();
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok());
  CollectingSink sink;
  SourceContext context = TestContext(&sink, tracked.get());
  context.pids = {1};  // any filter: the tracked map decides
  ASSERT_TRUE((*source)->Start(context).ok());
  pid_t untracked = RunWorkload({"all"});
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();
  EXPECT_TRUE(sink.EventsOf(Op::kCudaMemcpy, untracked).empty());
  EXPECT_TRUE(Launches(sink, untracked).empty());
  uint32_t key = static_cast<uint32_t>(untracked), value = 0;
  EXPECT_NE(bpf_map_lookup_elem(tracked.get(), &key, &value), 0);  // not added either
}

TEST_F(CudaSourceTest, FiltersRecordProcessesTheHostSourceTracks) {
  ScopedFd tracked(bpf_map_create(BPF_MAP_TYPE_HASH, "gw_tracked_t", 4, 4, 1024, nullptr));
  ASSERT_TRUE(tracked);
  CudaSourceOptions options = FakeOptions();
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok());
  CollectingSink sink;
  SourceContext context = TestContext(&sink, tracked.get());
  context.comms = {"anything"};
  ASSERT_TRUE((*source)->Start(context).ok());

  // The child maps the runtime and waits; we track it (as the host source would on a --pid
  // match or a fork) and let it call.
  int to_child[2], from_child[2];
  ASSERT_EQ(pipe(to_child), 0);
  ASSERT_EQ(pipe(from_child), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(to_child[0], 0);
    dup2(from_child[1], 1);
    std::string lib = kFakeDir + "/libcudart.so.13";
    execl(kWorkload.c_str(), kWorkload.c_str(), "dlopen", lib.c_str(), nullptr);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  char ready = 0;
  ASSERT_EQ(read(from_child[0], &ready, 1), 1);
  uint32_t key = static_cast<uint32_t>(pid), value = 0x2;  // GW_TRACKED_FILTER
  ASSERT_EQ(bpf_map_update_elem(tracked.get(), &key, &value, BPF_ANY), 0);
  ASSERT_EQ(write(to_child[1], "g", 1), 1);
  int status = 0;
  waitpid(pid, &status, 0);
  close(to_child[1]);
  close(from_child[0]);
  (*source)->Poll();
  (*source)->Stop();
  (*source)->Poll();
  ASSERT_EQ(sink.EventsOf(Op::kCudaMalloc, pid).size(), 1u);
  // Made inside cudaMalloc: the runtime row stands for both (the row budget's default).
  EXPECT_TRUE(sink.EventsOf(Op::kCuMemAlloc, pid).empty());
  ASSERT_EQ(bpf_map_lookup_elem(tracked.get(), &key, &value), 0);
  EXPECT_EQ(value, 0x2u | 0x8u);  // the CUDA-caller bit joined the host source's flag
}

}  // namespace
}  // namespace gw

#ifdef GW_SIM_DIR
namespace gw {
namespace {

// The source on the simulated runtime's libraries only.
CudaSourceOptions SimOptions() {
  const std::string sim = GW_SIM_DIR;
  CudaSourceOptions options;
  options.discover = false;
  options.libraries = {sim + "/lib/libcudart.so.13", sim + "/lib/libcuda.so.1"};
  options.ring_bytes = 4 << 20;
  return options;
}

// The simulated CUDA runtime (sim/): a training loop whose runtime calls nest into the sim
// driver through the PLT, kernels registered through __cudaRegisterFunction and resolved with
// cuLibraryGetKernel + cuKernelGetFunction, batches pinned with cudaHostRegister.
TEST_F(CudaSourceTest, SimulatedTrainingLoop) {
  const std::string sim = GW_SIM_DIR;
  CudaSourceOptions options = SimOptions();
  options.launch_sample_every = 8;
  options.row_budget = false;  // every copy and nested driver call a row, to check their pairing
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  for (const std::string& note : (*source)->TakeNotes()) std::fprintf(stderr, "%s\n", note.c_str());

  const int steps = 20, kernels = 4;
  pid_t pid = fork();
  if (pid == 0) {
    std::string bin = sim + "/bin/gw_train_loop";
    execl(bin.c_str(), bin.c_str(), "--steps", "20", "--duration", "0", "--workers", "1",
          "--kernels-per-step", "4", "--kernel-us", "200", "--batch-cpu-ms", "1",
          "--batch-bytes", "64K", "--malloc-per-step", "--dtoh-every", "5", nullptr);
    _exit(127);
  }
  int status = DrainUntilExit(**source, pid, 1);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  // Launches: every one counted with a kernel name; the runtime's nest into the driver's.
  int64_t runtime_launches = 0, driver_launches = 0;
  for (const auto& [key, n] : Launches(sink, pid)) {
    EXPECT_EQ(key.second.rfind("fn@", 0), std::string::npos)
        << "unnamed kernel " << key.second << " launched by " << OpName(key.first) << " ×" << n;
    (OpLayer(key.first) == Layer::kCudaRuntime ? runtime_launches : driver_launches) += n;
  }
  EXPECT_GE(runtime_launches, steps * kernels);
  // Each runtime launch nests a driver launch, which is not counted again.
  EXPECT_EQ(driver_launches, 0);
  // Sampled rows (1 in 8 per thread) are runtime launches, with names.
  EXPECT_GE(sink.EventsOf(Op::kCudaLaunchKernel, pid).size(), 80u / 8);
  EXPECT_TRUE(sink.EventsOf(Op::kCuLaunchKernel, pid).empty());

  // H2D copies of pinned (cudaHostRegister'ed) batches, with their nested driver copies.
  auto copies = sink.EventsOf(Op::kCudaMemcpyAsync, pid);
  ASSERT_GE(copies.size(), static_cast<size_t>(steps));
  int pinned_h2d = 0;
  for (const Event& e : copies) {
    if (e.kind == (static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost)) ++pinned_h2d;
  }
  EXPECT_GE(pinned_h2d, steps);
  EXPECT_GE(sink.EventsOf(Op::kCuMemcpyHtoDAsync, pid).size(), static_cast<size_t>(steps));

  // Syncs pair with their nested driver syncs: outer ⊇ inner on the same thread.
  auto syncs = sink.EventsOf(Op::kCudaStreamSync, pid);
  auto inner = sink.EventsOf(Op::kCuStreamSync, pid);
  ASSERT_GE(syncs.size(), static_cast<size_t>(steps));
  ASSERT_EQ(inner.size(), syncs.size());
  for (size_t i = 0; i < syncs.size(); ++i) {
    EXPECT_EQ(syncs[i].ret, 0);
    EXPECT_EQ(inner[i].tid, syncs[i].tid);
    EXPECT_LE(syncs[i].ts_ns, inner[i].ts_ns);
    EXPECT_GE(syncs[i].ts_ns + syncs[i].duration_ns, inner[i].ts_ns + inner[i].duration_ns);
  }

  // cudaMalloc/cudaFree every step: sizes and pointers match.
  auto mallocs = sink.EventsOf(Op::kCudaMalloc, pid);
  auto frees = sink.EventsOf(Op::kCudaFree, pid);
  ASSERT_GE(mallocs.size(), static_cast<size_t>(steps));
  int matched = 0;
  for (const Event& f : frees) {
    for (const Event& m : mallocs) {
      if (m.addr == f.addr && m.bytes == f.bytes && m.ts_ns < f.ts_ns) {
        ++matched;
        break;
      }
    }
  }
  EXPECT_GE(matched, steps);
  EXPECT_EQ((*source)->Drops()["cuda_bpf_reserve"], 0);
}

// trace attaches to a job that registered and loaded its kernels before the probes existed:
// no registration or lookup record is ever seen, and a stripped binary has no stub symbols.
// Runtime launches are still named, through the driver launch each one makes (host stub →
// CUfunction) and the name the CUfunction's driver object points to.
TEST_F(CudaSourceTest, LateAttachNamesEveryLaunchOfAStrippedJob) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_late_attach_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string bin = (dir / "gw_train_loop").string();
  std::filesystem::copy_file(sim + "/bin/gw_train_loop", bin,
                             std::filesystem::copy_options::overwrite_existing);
  ASSERT_EQ(std::system(("strip --strip-all " + bin).c_str()), 0);
  ASSERT_EQ(std::system(("nm " + bin + " 2>&1 | grep -q 'no symbols'").c_str()), 0)
      << "the copy still has symbols";

  pid_t pid = fork();
  if (pid == 0) {
    execl(bin.c_str(), bin.c_str(), "--duration", "4", "--workers", "1", "--kernels-per-step",
          "4", "--kernel-us", "200", "--batch-cpu-ms", "1", nullptr);
    _exit(127);
  }
  // Long enough for every kernel to be registered, loaded and launched before the attach.
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  ASSERT_EQ(waitpid(pid, nullptr, WNOHANG), 0) << "the job ended before the attach";

  CudaSourceOptions options = SimOptions();
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
  while (std::chrono::steady_clock::now() < until) {
    (*source)->Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  (*source)->Stop();
  (*source)->Poll();
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  std::filesystem::remove_all(dir);

  EXPECT_TRUE(sink.EventsOf(Op::kCuLibraryGetKernel, pid).empty()) << "attached too early";
  int64_t launches = 0;
  std::set<std::string> names;
  for (const auto& [key, n] : Launches(sink, pid)) {
    EXPECT_EQ(key.second.rfind("fn@", 0), std::string::npos)
        << "unnamed kernel " << key.second << " launched by " << OpName(key.first) << " ×" << n;
    launches += n;
    names.insert(key.second);
  }
  EXPECT_GE(launches, 100);
  EXPECT_TRUE(names.count("gemm_kernel(float const*, float const*, float*, int, int, int)"))
      << ::testing::PrintToString(names);
  EXPECT_TRUE(names.count("ampere_sgemm_128x64_tn")) << ::testing::PrintToString(names);
}

// "<name> <count>" lines the sim libraries write at exit (GWSIM_CALL_COUNTS_DIR).
std::map<std::string, int64_t> ReadCallCounts(const std::string& path) {
  std::map<std::string, int64_t> out;
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (f == nullptr) return out;
  char name[128];
  long long n = 0;
  while (std::fscanf(f, "%127s %lld", name, &n) == 2) out[name] = n;
  std::fclose(f);
  return out;
}

// gw_train_loop with `args`. The sim libraries write their own per-call counts into
// `counts_dir` at exit (the ground truth).
pid_t StartSimLoop(const std::string& sim, const std::string& counts_dir,
                   const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    setenv("GWSIM_CALL_COUNTS_DIR", counts_dir.c_str(), 1);
    std::string bin = sim + "/bin/gw_train_loop";
    std::vector<char*> argv = {bin.data()};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// The simulated loop for 4 s, 64 launches of 1 µs per step: launch-heavy.
pid_t StartLaunchHeavyLoop(const std::string& sim, const std::string& counts_dir,
                           const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--duration", "4", "--workers", "1", "--kernels-per-step",
                                   "64", "--kernel-us", "1", "--batch-cpu-ms", "0"};
  args.insert(args.end(), extra.begin(), extra.end());
  return StartSimLoop(sim, counts_dir, args);
}

// A launch-heavy job: once every runtime launch is seen to make a driver launch, the runtime
// launch probes are detached. Launches stay exact across the switch: every launch the job made
// (the simulated driver's own count) is counted once, with its name.
TEST_F(CudaSourceTest, LaunchesStayExactWhenRuntimeLaunchProbesAreDetached) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_detach_counts_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CudaSourceOptions options = SimOptions();
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  size_t links_before = (*source)->LinkCount();

  pid_t pid = StartLaunchHeavyLoop(sim, dir.string());
  int status = DrainUntilExit(**source, pid, 5);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  EXPECT_TRUE((*source)->RuntimeLaunchesDetached());
  EXPECT_LT((*source)->LinkCount(), links_before);
  bool noted = false;
  for (const std::string& n : (*source)->TakeNotes()) {
    noted |= n.find("runtime launch probes were detached") != std::string::npos;
  }
  EXPECT_TRUE(noted);

  std::string suffix = "." + std::to_string(pid) + ".counts";
  auto driver = ReadCallCounts((dir / ("libcuda" + suffix)).string());
  auto runtime = ReadCallCounts((dir / ("libcudart" + suffix)).string());
  std::filesystem::remove_all(dir);
  int64_t made = driver["cuLaunchKernel"] + driver["cuLaunchKernelEx"];
  ASSERT_GT(runtime["cudaLaunchKernel"], 2000) << "not launch-heavy enough to switch";
  int64_t counted = 0, runtime_counted = 0, driver_counted = 0;
  for (const auto& [key, n] : Launches(sink, pid)) {
    EXPECT_EQ(key.second.rfind("fn@", 0), std::string::npos) << "unnamed " << key.second;
    counted += n;
    (OpLayer(key.first) == Layer::kCudaRuntime ? runtime_counted : driver_counted) += n;
  }
  EXPECT_EQ(counted, made);
  EXPECT_GT(runtime_counted, 0);  // before the switch
  EXPECT_GT(driver_counted, 0);   // after it
}

// Attaching to a job already launching, under the launch duty cycle: the runtime launch probes
// retire at the first proof. Launches made while only the runtime layer is probed must not count
// as runtime launches that failed to nest: at the start (drivers are attached first) and at
// each counting second's re-attach (the driver's launch probes go on first and off last).
// Trigger: a launch-heavy loop, the source started 300 ms into it with the runtime library named
// first, --launch-duty 2. Capture: the source's proof state. Assert: retired, and no proof
// window failed.
TEST_F(CudaSourceTest, RuntimeLaunchProbesRetireAtTheFirstProofWhenAttachingToARunningJob) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_retire_counts_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CudaSourceOptions options = SimOptions();  // libcudart before libcuda
  options.launch_duty = 2;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  pid_t pid = StartLaunchHeavyLoop(sim, dir.string());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  int status = DrainUntilExit(**source, pid, 5);
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE((*source)->RuntimeLaunchesDetached());
  EXPECT_EQ((*source)->NestingProofsFailed(), 0);
}

// A job some of whose runtime launches never reach the driver (they fail in the runtime): the
// runtime launch probes must stay, or those launches would go unseen, and the user is told why
// launches cost two probe hits. Trigger: the launch-heavy loop with one launch of an unregistered
// function a step (1 in 65 fails). Capture: proof state and notes. Assert: not retired, proofs
// failed, the note says so with the last window's numbers, and every launch the job made is
// counted, the failed ones included.
TEST_F(CudaSourceTest, RuntimeLaunchProbesStayWhenRuntimeLaunchesDoNotReachTheDriver) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_stay_counts_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  auto source = CudaSource::Create(SimOptions());
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  pid_t pid = StartLaunchHeavyLoop(sim, dir.string(), {"--failed-launches-per-step", "1"});
  int status = DrainUntilExit(**source, pid, 5);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE((*source)->RuntimeLaunchesDetached());
  EXPECT_GT((*source)->NestingProofsFailed(), 0);
  std::string note;
  for (const std::string& n : (*source)->TakeNotes()) {
    if (n.find("runtime launch probes stayed attached") != std::string::npos) note = n;
  }
  const std::regex said("in [0-9]+ windows .* the last: [0-9]+ of [0-9]+");
  EXPECT_TRUE(std::regex_search(note, said)) << note;

  std::string suffix = "." + std::to_string(pid) + ".counts";
  auto runtime = ReadCallCounts((dir / ("libcudart" + suffix)).string());
  std::filesystem::remove_all(dir);
  int64_t counted = 0;
  for (const auto& [key, n] : Launches(sink, pid)) {
    if (OpLayer(key.first) == Layer::kCudaRuntime) counted += n;
  }
  EXPECT_EQ(counted, runtime["cudaLaunchKernel"]);  // failed launches included
}

// trace -- ./program: a native program linked against its own libcudart (DT_RUNPATH with $ORIGIN)
// has that folder attached before it runs, so its first launches are counted. Before, the folder
// was found only once the job had mapped it (up to a second of launches missed).
TEST(CudaLibDirsTest, AProgramsOwnRunpathFoldersAreAttachedBeforeItRuns) {
  const std::string sim = GW_SIM_DIR;
  std::vector<std::string> dirs = CudaLibDirsNextTo(sim + "/bin/gw_train_loop", nullptr);
  bool found = false;
  for (const std::string& d : dirs) {
    found |= std::filesystem::equivalent(d, sim + "/lib");
  }
  EXPECT_TRUE(found) << dirs.size() << " folders";
}

// --launch-duty 2: the launch probes stay attached until two seconds in a row with launches are
// counted, then one second in two from there. Trigger: a launch-heavy loop for 4 s. Capture: the
// counts and the coverage rows. Assert: launches are counted only in seconds the probes covered
// (launch_coverage), the cycle's seconds alternate (whole seconds covered one in two after the
// first two), and between a quarter and four fifths of the launches made were counted.
TEST_F(CudaSourceTest, LaunchDutyCountsOnlyInItsCountingSeconds) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_duty_counts_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CudaSourceOptions options = SimOptions();
  options.launch_duty = 2;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());

  pid_t pid = StartLaunchHeavyLoop(sim, dir.string());
  int status = DrainUntilExit(**source, pid, 5);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  (*source)->Stop();
  (*source)->Poll();

  std::string suffix = "." + std::to_string(pid) + ".counts";
  auto driver = ReadCallCounts((dir / ("libcuda" + suffix)).string());
  std::filesystem::remove_all(dir);
  int64_t made = driver["cuLaunchKernel"] + driver["cuLaunchKernelEx"];
  ASSERT_GT(made, 10000);
  int64_t counted = 0;
  std::set<int64_t> seconds;
  std::map<int64_t, int64_t> covered;  // ns by second
  for (const OpCount& c : sink.Counts()) {
    if (c.op == Op::kLaunchCoverage) covered[c.sec] += c.total_ns;
    if (c.pid != pid || !IsKernelLaunch(c.op)) continue;
    counted += c.count;
    seconds.insert(c.sec);
  }
  ASSERT_GE(seconds.size(), 2u);
  for (int64_t sec : seconds) {
    EXPECT_GT(covered[sec], 0) << "launches counted in second " << sec << ", not covered";
  }
  // The duty cycle: covered whole seconds at most two apart, with a second the probes were off
  // (a detached probe's moment at most) between two of them.
  std::vector<int64_t> whole;
  for (const auto& [sec, ns] : covered) {
    if (ns >= 900'000'000) whole.push_back(sec);
  }
  ASSERT_GE(whole.size(), 2u);
  bool gap = false;
  for (size_t i = 1; i < whole.size(); ++i) {
    EXPECT_LE(whole[i] - whole[i - 1], 2) << "covered whole: second " << whole[i];
    if (whole[i] - whole[i - 1] == 2) gap |= covered[whole[i] - 1] < 500'000'000;
  }
  EXPECT_TRUE(gap) << "no second between counting seconds";
  EXPECT_GT(counted, made / 4) << "counted " << counted << " of " << made;
  EXPECT_LT(counted, made * 4 / 5) << "counted " << counted << " of " << made;
}

// Entry-only counted calls (cudaMemsetAsync) are always probed, whatever the launch duty cycle:
// each second's count is filed under that second, not lumped into the next counting second.
// Trigger: a PyTorch-shaped loop (memsets on the autograd thread) for 4 s under --launch-duty 3.
// Capture: the counts. Assert: every memset is counted once, and memsets are counted in seconds
// between the counting seconds of launches too.
TEST_F(CudaSourceTest, CountedCallsStayInTheirSecondUnderTheLaunchDutyCycle) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_duty_memsets_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CudaSourceOptions options = SimOptions();
  options.launch_duty = 3;
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  pid_t pid = StartSimLoop(sim, dir.string(),
                           {"--duration", "4", "--workers", "1", "--shape", "pytorch",
                            "--kernels-per-step", "16", "--kernel-us", "20",
                            "--batch-cpu-ms", "1"});
  int status = DrainUntilExit(**source, pid, 6);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  (*source)->Stop();
  (*source)->Poll();
  auto runtime = ReadCallCounts((dir / ("libcudart." + std::to_string(pid) + ".counts")).string());
  std::filesystem::remove_all(dir);

  std::set<int64_t> launch_seconds, memset_seconds;
  std::map<int64_t, int64_t> covered;  // ns by second the launch probes were attached
  for (const OpCount& c : sink.Counts()) {
    if (c.op == Op::kLaunchCoverage) covered[c.sec] += c.total_ns;
  }
  int64_t memsets = 0;
  for (const OpCount& c : sink.Counts()) {
    if (c.pid != pid) continue;
    // Counting seconds: launches counted with the probes attached most of the second (a
    // detached probe fires on for a moment into the next one).
    if (IsKernelLaunch(c.op) && covered[c.sec] >= 500'000'000) launch_seconds.insert(c.sec);
    if (c.op == Op::kCudaMemsetAsync) {
      memsets += c.count;
      memset_seconds.insert(c.sec);
    }
  }
  ASSERT_GT(runtime["cudaMemsetAsync"], 0);
  EXPECT_EQ(memsets, runtime["cudaMemsetAsync"]);
  ASSERT_FALSE(launch_seconds.empty());
  std::set<int64_t> between;
  for (int64_t sec : memset_seconds) {
    if (launch_seconds.count(sec) == 0) between.insert(sec);
  }
  EXPECT_GE(between.size(), 2u) << memset_seconds.size() << " seconds with memsets, "
                                << launch_seconds.size() << " with launches";
}

// The row budget on a PyTorch-shaped job (main, autograd and pin-memory threads) with pageable
// batches. Trigger: the simulated loop for 2 s. Capture: rows and counts. Assert against the
// sim libraries' own call counts: every cudaMemsetAsync and cudaMemcpyAsync is counted exactly
// once, as a row or in an aggregate; the slow (staged, pageable) batch copies all have rows;
// aggregated copies were all fast, their histograms hold every one of them; the driver copies
// the runtime copies make are not recorded again.
TEST_F(CudaSourceTest, RowBudgetCountsEveryShortCallOnceAndKeepsSlowOnesAsRows) {
  const std::string sim = GW_SIM_DIR;
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("gw_budget_counts_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  CudaSourceOptions options = SimOptions();
  ASSERT_TRUE(options.row_budget);  // the default
  auto source = CudaSource::Create(options);
  ASSERT_TRUE(source.ok()) << source.status().message();
  CollectingSink sink;
  ASSERT_TRUE((*source)->Start(TestContext(&sink, -1)).ok());
  pid_t pid = fork();
  if (pid == 0) {
    setenv("GWSIM_CALL_COUNTS_DIR", dir.c_str(), 1);
    std::string bin = sim + "/bin/gw_train_loop";
    execl(bin.c_str(), bin.c_str(), "--duration", "2", "--workers", "1", "--shape", "pytorch",
          "--kernels-per-step", "16", "--kernel-us", "20", "--batch-cpu-ms", "1",
          "--batch-bytes", "4K", "--dtoh-every", "1", nullptr);
    _exit(127);
  }
  int status = DrainUntilExit(**source, pid, 5);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  (*source)->Stop();
  (*source)->Poll();
  std::string suffix = "." + std::to_string(pid) + ".counts";
  auto runtime = ReadCallCounts((dir / ("libcudart" + suffix)).string());
  auto driver = ReadCallCounts((dir / ("libcuda" + suffix)).string());
  std::filesystem::remove_all(dir);

  ASSERT_GT(runtime["cudaMemsetAsync"], 0);
  EXPECT_EQ(CallsOf(sink, Op::kCudaMemsetAsync, pid), runtime["cudaMemsetAsync"]);
  EXPECT_TRUE(sink.EventsOf(Op::kCudaMemsetAsync, pid).empty()) << "memsets are counted only";
  ASSERT_GT(runtime["cudaMemcpyAsync"], 0);
  EXPECT_EQ(CallsOf(sink, Op::kCudaMemcpyAsync, pid), runtime["cudaMemcpyAsync"]);

  int64_t slow_rows = 0, fast_rows = 0;
  for (const Event& e : sink.EventsOf(Op::kCudaMemcpyAsync, pid)) {
    (e.duration_ns >= static_cast<int64_t>(options.call_row_min_ns) ? slow_rows : fast_rows) += 1;
  }
  int64_t aggregated = 0;
  for (const OpCount& c : sink.Counts()) {
    if (c.pid != pid || c.op != Op::kCudaMemcpyAsync) continue;
    aggregated += c.count;
    EXPECT_LT(c.max_ns, static_cast<int64_t>(options.call_row_min_ns)) << "second " << c.sec;
    int64_t in_hist = 0;
    for (int64_t n : c.log2_hist) in_hist += n;
    EXPECT_EQ(in_hist, c.count) << "second " << c.sec;
    EXPECT_LE(c.total_ns, c.count * c.max_ns);
    EXPECT_EQ(c.bytes % 4, 0);
  }
  std::fprintf(stderr, "cudaMemcpyAsync: %lld slow rows, %lld fast rows, %lld aggregated\n",
               static_cast<long long>(slow_rows), static_cast<long long>(fast_rows),
               static_cast<long long>(aggregated));
  EXPECT_GT(slow_rows, 0) << "the loss reads wait for the stream: slow, so rows";
  EXPECT_GT(aggregated, fast_rows) << "the 4 KiB pinned batch copies are fast";

  // The driver copies the runtime copies make: neither rows nor counts.
  ASSERT_GT(driver["cuMemcpyHtoDAsync_v2"] + driver["cuMemcpyDtoHAsync_v2"], 0);
  for (Op op : {Op::kCuMemcpyHtoDAsync, Op::kCuMemcpyDtoHAsync, Op::kCuMemcpyDtoDAsync,
                Op::kCuMemcpyAsync, Op::kCuStreamSync}) {
    EXPECT_EQ(CallsOf(sink, op, pid), 0) << OpName(op);
  }
  EXPECT_GE(CallsOf(sink, Op::kCudaStreamSync, pid), runtime["cudaStreamSynchronize"]);
}

}  // namespace
}  // namespace gw
#endif  // GW_SIM_DIR
