// Behaviour of the simulated CUDA runtime and driver: kernel durations, synchronization,
// copies, errors, graphs, and nesting (every runtime call reaches the driver through the PLT,
// observed by interposing driver functions from this executable).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gwsim/cuda_driver.h"
#include "gwsim/cuda_runtime.h"
#include "gwsim/fatbin.h"

extern "C" unsigned long long gwsimDriverCallCount(const char* name);
extern "C" unsigned long long gwsimRuntimeCallCount(const char* name);

// ----------------------------------------------------------------- driver interposition
// This executable exports these driver symbols (ENABLE_EXPORTS), so the dynamic linker binds
// libcudart's PLT references to them first; each counts the call and forwards to libcuda.so.1.
namespace {

struct Interposed {
  std::mutex mu;
  std::map<std::string, int> calls;
  std::map<std::string, long> last_tid;
};

Interposed& Seen() {
  static Interposed* seen = new Interposed();
  return *seen;
}

long Tid() { return syscall(SYS_gettid); }

void Note(const char* name) {
  Interposed& s = Seen();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.calls[name];
  s.last_tid[name] = Tid();
}

int Calls(const char* name) {
  Interposed& s = Seen();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.calls[name];
}

long LastTid(const char* name) {
  Interposed& s = Seen();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.last_tid[name];
}

template <typename Fn>
Fn Next(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

#define GWSIM_INTERPOSE(ret, name, params, args)   \
  extern "C" ret name params {                     \
    Note(#name);                                   \
    static auto real = Next<ret(*) params>(#name); \
    return real args;                              \
  }

GWSIM_INTERPOSE(CUresult, cuMemAlloc_v2, (CUdeviceptr * p, size_t n), (p, n))
GWSIM_INTERPOSE(CUresult, cuMemFree_v2, (CUdeviceptr p), (p))
GWSIM_INTERPOSE(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr d, const void* s, size_t n), (d, s, n))
GWSIM_INTERPOSE(CUresult, cuMemcpyDtoH_v2, (void* d, CUdeviceptr s, size_t n), (d, s, n))
GWSIM_INTERPOSE(CUresult, cuMemcpyDtoD_v2, (CUdeviceptr d, CUdeviceptr s, size_t n), (d, s, n))
GWSIM_INTERPOSE(CUresult, cuMemcpyHtoDAsync_v2,
                (CUdeviceptr d, const void* s, size_t n, CUstream st), (d, s, n, st))
GWSIM_INTERPOSE(CUresult, cuMemcpyDtoHAsync_v2, (void* d, CUdeviceptr s, size_t n, CUstream st),
                (d, s, n, st))
GWSIM_INTERPOSE(CUresult, cuStreamSynchronize, (CUstream s), (s))
GWSIM_INTERPOSE(CUresult, cuCtxSynchronize, (void), ())
GWSIM_INTERPOSE(CUresult, cuEventSynchronize, (CUevent e), (e))
GWSIM_INTERPOSE(CUresult, cuLibraryGetKernel, (CUkernel * k, CUlibrary l, const char* n), (k, l, n))
GWSIM_INTERPOSE(CUresult, cuKernelGetFunction, (CUfunction * f, CUkernel k), (f, k))
GWSIM_INTERPOSE(CUresult, cuLaunchKernel,
                (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                 unsigned bz, unsigned sm, CUstream s, void** p, void** e),
                (f, gx, gy, gz, bx, by, bz, sm, s, p, e))

namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// A translation unit's worth of registered kernels, as nvcc-generated code would register them.
constexpr char kPayload[] =
    "GWSIMFB1"
    "_Z11gemm_kernelPKfS0_Pfiii\0"
    "_Z13relu_backwardPfPKfi\0"
    "ampere_sgemm_128x64_tn\0";
GwsimFatbinWrapper kWrapper = {GWSIM_FATBIN_WRAPPER_MAGIC, 1, kPayload, nullptr};
// Host stubs: only their addresses matter.
char gemm_stub;
char relu_stub;
char missing_stub;  // registered under a name the fat binary does not contain

void RegisterKernels() {
  static bool done = false;
  if (done) return;
  done = true;
  void** handle = __cudaRegisterFatBinary(&kWrapper);
  __cudaRegisterFunction(handle, &gemm_stub, const_cast<char*>("_Z11gemm_kernelPKfS0_Pfiii"),
                         "_Z11gemm_kernelPKfS0_Pfiii", -1, nullptr, nullptr, nullptr, nullptr,
                         nullptr);
  __cudaRegisterFunction(handle, &relu_stub, const_cast<char*>("_Z13relu_backwardPfPKfi"),
                         "_Z13relu_backwardPfPKfi", -1, nullptr, nullptr, nullptr, nullptr,
                         nullptr);
  __cudaRegisterFunction(handle, &missing_stub, const_cast<char*>("not_in_image"), "not_in_image",
                         -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(handle);
}

cudaError_t Launch(const void* stub, uint64_t ns, cudaStream_t stream = nullptr) {
  void* args[] = {&ns};
  return cudaLaunchKernel(stub, dim3(4), dim3(128), args, 0, stream);
}

class SimRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterKernels();
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
    cudaGetLastError();
  }
};

// Upper bounds are loose where they only guard against gross errors: this runs on shared 2-CPU
// machines where other builds delay thread wake-ups. Lower bounds are exact.
TEST_F(SimRuntimeTest, KernelRunsForItsStatedDuration) {
  auto t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 30'000'000), cudaSuccess);
  double launch_ms = MsSince(t0);
  EXPECT_LT(launch_ms, 20.0) << "a launch is asynchronous";
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  double total_ms = MsSince(t0);
  EXPECT_GE(total_ms, 29.9);
  EXPECT_LT(total_ms, 150.0);
}

TEST_F(SimRuntimeTest, BackToBackKernelsAddUpOnTheDevice) {
  // A 200 ms gate kernel holds the stream while 100 × 0.5 ms kernels are queued behind it, so
  // they run back to back; events bracket them on the device timeline.
  cudaEvent_t begin = nullptr;
  cudaEvent_t end = nullptr;
  ASSERT_EQ(cudaEventCreate(&begin), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&end), cudaSuccess);
  auto t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 200'000'000), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(begin, nullptr), cudaSuccess);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(Launch(&relu_stub, 500'000), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(end, nullptr), cudaSuccess);
  bool queued_in_time = MsSince(t0) < 190.0;
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  float ms = 0;
  ASSERT_EQ(cudaEventElapsedTime(&ms, begin, end), cudaSuccess);
  EXPECT_GE(ms, 49.9f);
  if (queued_in_time) {
    EXPECT_LT(ms, 75.0f) << "back-to-back kernels accumulate only their durations";
  }
  EXPECT_GE(MsSince(t0), 249.9);
}

TEST_F(SimRuntimeTest, SyncBlocksUntilQueueDrains) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  cudaEvent_t done = nullptr;
  ASSERT_EQ(cudaEventCreate(&done), cudaSuccess);
  ASSERT_EQ(Launch(&gemm_stub, 20'000'000, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(done, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  EXPECT_EQ(cudaEventQuery(done), cudaErrorNotReady);
  auto t0 = Clock::now();
  ASSERT_EQ(cudaEventSynchronize(done), cudaSuccess);
  EXPECT_GE(MsSince(t0), 15.0);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(done), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(done), cudaSuccess);
}

TEST_F(SimRuntimeTest, StreamsRunConcurrentlyAndEventsOrderThem) {
  cudaStream_t a = nullptr;
  cudaStream_t b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  auto t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 100'000'000, a), cudaSuccess);
  ASSERT_EQ(Launch(&gemm_stub, 100'000'000, b), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  double concurrent_ms = MsSince(t0);
  EXPECT_GE(concurrent_ms, 99.9);
  EXPECT_LT(concurrent_ms, 180.0) << "two streams overlap";
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 20'000'000, a), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  ASSERT_EQ(Launch(&gemm_stub, 20'000'000, b), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_GE(MsSince(t0), 39.0) << "b waited for a's event";
}

TEST_F(SimRuntimeTest, LegacyDefaultStreamWaitsForBlockingStreams) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);  // blocking w.r.t. the legacy stream
  void* d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 4096), cudaSuccess);
  char host[4096] = {1};
  auto t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 25'000'000, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_GE(MsSince(t0), 24.5) << "a synchronous copy waits for prior work";
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

TEST_F(SimRuntimeTest, MemcpyMovesBytes) {
  constexpr size_t kBytes = 3 << 20;  // spans several staging chunks
  std::vector<unsigned char> src(kBytes), back(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + 7);
  void* d = nullptr;
  void* d2 = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d2, kBytes), cudaSuccess);
  // Pageable round trip through a device-to-device copy.
  ASSERT_EQ(cudaMemcpy(d, src.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d2, d, kBytes, cudaMemcpyDeviceToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), d2, kBytes, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(memcmp(src.data(), back.data(), kBytes), 0);
  // Pinned asynchronous round trip.
  void* pinned_in = nullptr;
  void* pinned_out = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned_in, kBytes), cudaSuccess);
  ASSERT_EQ(cudaHostAlloc(&pinned_out, kBytes, cudaHostAllocDefault), cudaSuccess);
  memcpy(pinned_in, src.data(), kBytes);
  memset(pinned_out, 0, kBytes);
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, kBytes, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, pinned_in, kBytes, cudaMemcpyHostToDevice, s), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(pinned_out, d, kBytes, cudaMemcpyDeviceToHost, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(memcmp(src.data(), pinned_out, kBytes), 0);
  // Memset, then a 2D copy of a 16x8 window with pitches.
  ASSERT_EQ(cudaMemset(d, 0xab, 1024), cudaSuccess);
  unsigned char row[1024];
  ASSERT_EQ(cudaMemcpy(row, d, sizeof(row), cudaMemcpyDeviceToHost), cudaSuccess);
  for (unsigned char c : row) ASSERT_EQ(c, 0xab);
  unsigned char grid[8][32];
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 32; ++x) grid[y][x] = static_cast<unsigned char>(y * 32 + x);
  ASSERT_EQ(cudaMemcpy2D(d2, 64, grid, 32, 16, 8, cudaMemcpyHostToDevice), cudaSuccess);
  unsigned char out[8][16];
  ASSERT_EQ(cudaMemcpy2D(out, 16, d2, 64, 16, 8, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 16; ++x) ASSERT_EQ(out[y][x], grid[y][x]);
  EXPECT_EQ(cudaFreeHost(pinned_in), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned_out), cudaSuccess);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(d2), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

TEST_F(SimRuntimeTest, PageableCopiesAreSlowerThanPinned) {
  constexpr size_t kBytes = 64 << 20;
  void* d = nullptr;
  void* pinned = nullptr;
  ASSERT_EQ(cudaMalloc(&d, kBytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned, kBytes), cudaSuccess);
  std::vector<char> pageable(kBytes, 1);
  memset(pinned, 1, kBytes);
  double best_pinned = 1e9;
  double best_pageable = 1e9;
  for (int round = 0; round < 6; ++round) {
    auto t0 = Clock::now();
    ASSERT_EQ(cudaMemcpy(d, pinned, kBytes, cudaMemcpyHostToDevice), cudaSuccess);
    best_pinned = std::min(best_pinned, MsSince(t0));
    t0 = Clock::now();
    ASSERT_EQ(cudaMemcpy(d, pageable.data(), kBytes, cudaMemcpyHostToDevice), cudaSuccess);
    best_pageable = std::min(best_pageable, MsSince(t0));
  }
  EXPECT_GT(best_pageable, best_pinned * 1.5)
      << "pinned " << best_pinned << " ms, pageable " << best_pageable << " ms";
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(SimRuntimeTest, ErrorsMatchTheRealRuntime) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, size_t{1} << 50), cudaErrorMemoryAllocation);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(cudaGetLastError(), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  int on_stack = 0;
  EXPECT_EQ(cudaFree(&on_stack), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(nullptr), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&p, 1024), cudaSuccess);
  EXPECT_EQ(cudaFree(static_cast<char*>(p) + 16), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaErrorInvalidValue) << "double free";
  char unregistered = 0;
  EXPECT_EQ(Launch(&unregistered, 1000), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(Launch(&missing_stub, 1000), cudaErrorInvalidDeviceFunction);
  EXPECT_EQ(cudaSetDevice(7), cudaErrorInvalidDevice);
  EXPECT_EQ(cudaMemcpy(&on_stack, &on_stack, 4, static_cast<cudaMemcpyKind>(9)),
            cudaErrorInvalidMemcpyDirection);
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  cudaGetLastError();
}

TEST_F(SimRuntimeTest, DeviceMemorySizeComesFromEnvironment) {
  // main() sets GWSIM_DEVICE_MEM_MB=2048 before the first CUDA call.
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  EXPECT_EQ(total_bytes, size_t{2048} << 20);
  void* big = nullptr;
  ASSERT_EQ(cudaMalloc(&big, size_t{1536} << 20), cudaSuccess);  // lazily mapped
  void* more = nullptr;
  EXPECT_EQ(cudaMalloc(&more, size_t{1024} << 20), cudaErrorMemoryAllocation);
  EXPECT_EQ(cudaFree(big), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&more, size_t{1024} << 20), cudaSuccess);
  EXPECT_EQ(cudaFree(more), cudaSuccess);
  cudaGetLastError();
}

TEST_F(SimRuntimeTest, CudaFreeWaitsForTheDevice) {
  void* p = nullptr;
  ASSERT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  auto t0 = Clock::now();
  ASSERT_EQ(Launch(&gemm_stub, 20'000'000), cudaSuccess);
  ASSERT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_GE(MsSince(t0), 19.5);
}

TEST_F(SimRuntimeTest, GraphsReplayCapturedWork) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreate(&s), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(Launch(&gemm_stub, 5'000'000, s), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaSuccess) << "captured work does not run";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  auto t0 = Clock::now();
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  double ms = MsSince(t0);
  EXPECT_GE(ms, 29.9);
  EXPECT_LT(ms, 150.0);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(SimRuntimeTest, LaunchExAndPerThreadStream) {
  uint64_t ns = 2'000'000;
  void* args[] = {&ns};
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(2);
  config.blockDim = dim3(64);
  ASSERT_EQ(cudaLaunchKernelExC(&config, &relu_stub, args), cudaSuccess);
  ASSERT_EQ(cudaLaunchKernel_ptsz(&relu_stub, dim3(1), dim3(1), args, 0, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(SimRuntimeTest, RuntimeCallsNestIntoDriverCallsOnTheSameThread) {
  int launches = Calls("cuLaunchKernel");
  int allocs = Calls("cuMemAlloc_v2");
  int htod = Calls("cuMemcpyHtoD_v2");
  int dtoh = Calls("cuMemcpyDtoH_v2");
  int htod_async = Calls("cuMemcpyHtoDAsync_v2");
  int stream_syncs = Calls("cuStreamSynchronize");
  int ctx_syncs = Calls("cuCtxSynchronize");
  int event_syncs = Calls("cuEventSynchronize");
  int frees = Calls("cuMemFree_v2");
  unsigned long long counted_launches = gwsimDriverCallCount("cuLaunchKernel");
  unsigned long long runtime_launches = gwsimRuntimeCallCount("cudaLaunchKernel");

  void* d = nullptr;
  char host[256] = {};
  ASSERT_EQ(cudaMalloc(&d, sizeof(host)), cudaSuccess);
  ASSERT_EQ(Launch(&gemm_stub, 1000), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d, host, sizeof(host), cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(host, d, sizeof(host), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(d, host, sizeof(host), cudaMemcpyHostToDevice, nullptr), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(nullptr), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreate(&e), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, nullptr), cudaSuccess);
  ASSERT_EQ(cudaEventSynchronize(e), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);

  EXPECT_EQ(Calls("cuLaunchKernel"), launches + 1);
  EXPECT_EQ(Calls("cuMemAlloc_v2"), allocs + 1);
  EXPECT_EQ(Calls("cuMemcpyHtoD_v2"), htod + 1);
  EXPECT_EQ(Calls("cuMemcpyDtoH_v2"), dtoh + 1);
  EXPECT_EQ(Calls("cuMemcpyHtoDAsync_v2"), htod_async + 1);
  EXPECT_EQ(Calls("cuStreamSynchronize"), stream_syncs + 1);
  EXPECT_EQ(Calls("cuCtxSynchronize"), ctx_syncs + 1);
  EXPECT_EQ(Calls("cuEventSynchronize"), event_syncs + 1);
  EXPECT_EQ(Calls("cuMemFree_v2"), frees + 1);
  for (const char* name : {"cuLaunchKernel", "cuMemAlloc_v2", "cuMemcpyHtoD_v2",
                           "cuStreamSynchronize", "cuCtxSynchronize", "cuMemFree_v2"}) {
    EXPECT_EQ(LastTid(name), Tid()) << name << " ran on the calling thread";
  }
  // The library's own counters agree.
  EXPECT_EQ(gwsimDriverCallCount("cuLaunchKernel"), counted_launches + 1);
  EXPECT_EQ(gwsimRuntimeCallCount("cudaLaunchKernel"), runtime_launches + 1);
}

TEST_F(SimRuntimeTest, FirstLaunchResolvesTheKernelByName) {
  // relu_stub may already be resolved by an earlier test; ampere's name is only resolvable
  // through a fresh registration, done here.
  static char ampere_stub;
  void** handle = __cudaRegisterFatBinary(&kWrapper);
  __cudaRegisterFunction(handle, &ampere_stub, const_cast<char*>("ampere_sgemm_128x64_tn"),
                         "ampere_sgemm_128x64_tn", -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  int get_kernel = Calls("cuLibraryGetKernel");
  int get_function = Calls("cuKernelGetFunction");
  ASSERT_EQ(Launch(&ampere_stub, 1000), cudaSuccess);
  ASSERT_EQ(Launch(&ampere_stub, 1000), cudaSuccess);
  EXPECT_EQ(Calls("cuLibraryGetKernel"), get_kernel + 1) << "resolved once, then cached";
  EXPECT_EQ(Calls("cuKernelGetFunction"), get_function + 1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST(SimDriverTest, DriverApiDirectly) {
  ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
  CUdevice dev = -1;
  ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
  CUcontext ctx = nullptr;
  ASSERT_EQ(cuCtxCreate(&ctx, 0, dev), CUDA_SUCCESS);
  CUmodule mod = nullptr;
  ASSERT_EQ(cuModuleLoadData(&mod, kPayload), CUDA_SUCCESS);
  CUfunction f = nullptr;
  EXPECT_EQ(cuModuleGetFunction(&f, mod, "nope"), CUDA_ERROR_NOT_FOUND);
  ASSERT_EQ(cuModuleGetFunction(&f, mod, "ampere_sgemm_128x64_tn"), CUDA_SUCCESS);
  CUfunction again = nullptr;
  ASSERT_EQ(cuModuleGetFunction(&again, mod, "ampere_sgemm_128x64_tn"), CUDA_SUCCESS);
  EXPECT_EQ(f, again) << "handles are stable";
  const char* name = nullptr;
  ASSERT_EQ(cuFuncGetName(&name, f), CUDA_SUCCESS);
  EXPECT_STREQ(name, "ampere_sgemm_128x64_tn");

  CUlibrary lib = nullptr;
  ASSERT_EQ(cuLibraryLoadData(&lib, &kWrapper, nullptr, nullptr, 0, nullptr, nullptr, 0),
            CUDA_SUCCESS);
  CUkernel k = nullptr;
  ASSERT_EQ(cuLibraryGetKernel(&k, lib, "_Z13relu_backwardPfPKfi"), CUDA_SUCCESS);
  CUfunction kf = nullptr;
  ASSERT_EQ(cuKernelGetFunction(&kf, k), CUDA_SUCCESS);
  ASSERT_EQ(cuFuncGetName(&name, kf), CUDA_SUCCESS);
  EXPECT_STREQ(name, "_Z13relu_backwardPfPKfi");

  uint64_t ns = 10'000'000;
  void* params[] = {&ns};
  auto t0 = Clock::now();
  ASSERT_EQ(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr), CUDA_SUCCESS);
  CUlaunchConfig config;
  memset(&config, 0, sizeof(config));
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  ASSERT_EQ(cuLaunchKernelEx(&config, kf, params, nullptr), CUDA_SUCCESS);
  EXPECT_EQ(cuLaunchKernel(f, 0, 1, 1, 32, 1, 1, 0, nullptr, params, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  ASSERT_EQ(cuCtxSynchronize(), CUDA_SUCCESS);
  EXPECT_GE(MsSince(t0), 19.5);

  CUdeviceptr d = 0;
  ASSERT_EQ(cuMemAlloc_v2(&d, 64), CUDA_SUCCESS);
  EXPECT_EQ(cuMemFree_v2(d + 8), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree_v2(d), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxDestroy_v2(ctx), CUDA_SUCCESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
}

}  // namespace

int main(int argc, char** argv) {
  setenv("GWSIM_DEVICE_MEM_MB", "2048", 1);
  // Link rates low enough that simulated transfer time, not this machine's memcpy speed (and
  // CPU contention from parallel builds), decides the pinned/pageable comparison.
  setenv("GWSIM_PCIE_GBPS", "4", 1);
  setenv("GWSIM_PAGEABLE_GBPS", "1.5", 1);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
