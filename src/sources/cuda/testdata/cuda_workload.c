// Test workload for the CUDA source: calls every probed API of the fake libraries once (mode
// "all"), or dlopens a runtime copy given on the command line and calls it after a byte
// arrives on stdin (mode "dlopen", for the Rediscover test), or gives the GPU work around sleeps
// before each kind of sync (mode "work", for since_work_ns). Prints nothing on success.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_cuda.h"

typedef struct {
  fake_dim3 grid, block;
  size_t shmem;
  void* stream;
  void* attrs;
  unsigned num_attrs;
} launch_config;

int cudaMalloc(void** ptr, size_t size);
int cudaMallocAsync(void** ptr, size_t size, void* stream);
int cudaMallocManaged(void** ptr, size_t size, unsigned flags);
int cudaMallocHost(void** ptr, size_t size);
int cudaHostAlloc(void** ptr, size_t size, unsigned flags);
int cudaFreeHost(void* ptr);
int cudaHostRegister(void* ptr, size_t size, unsigned flags);
int cudaHostUnregister(void* ptr);
int cudaFree(void* ptr);
int cudaFreeAsync(void* ptr, void* stream);
int cudaMemcpy(void* dst, const void* src, size_t n, int kind);
int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream);
int cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                 size_t height, int kind);
int cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                      size_t height, int kind, void* stream);
int cudaMemcpyPeer(void* dst, int dst_dev, const void* src, int src_dev, size_t n);
int cudaMemcpyPeerAsync(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                        void* stream);
int cudaMemset(void* ptr, int value, size_t n);
int cudaMemsetAsync(void* ptr, int value, size_t n, void* stream);
int cudaStreamSynchronize(void* stream);
int cudaDeviceSynchronize(void);
int cudaEventSynchronize(void* event);
int cudaStreamWaitEvent(void* stream, void* event, unsigned flags);
int cudaGraphInstantiate(void** exec, void* graph, unsigned long long flags);
int cudaGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags);
int cudaGraphLaunch(void* exec, void* stream);
void __cudaRegisterFunction(void** fatbin, const char* host_fun, char* device_fun,
                            const char* device_name, int thread_limit, void* tid, void* bid,
                            void* bdim, void* gdim, int* wsize);
int cudaLaunchKernel(const void* func, fake_dim3 grid, fake_dim3 block, void** args,
                     size_t shmem, void* stream);
int cudaLaunchKernel_ptsz(const void* func, fake_dim3 grid, fake_dim3 block, void** args,
                          size_t shmem, void* stream);
int cudaLaunchKernelExC(const launch_config* config, const void* func, void** args);

#define STREAM ((void*)0x1234)
#define EVENT ((void*)0x5678)

static void kernel_a(float* x) { (void)x; }
static void kernel_b(int n) { (void)n; }

static void* D(uint64_t p) { return (void*)(uintptr_t)p; }
static uint64_t U(const void* p) { return (uint64_t)(uintptr_t)p; }

static int run_all(void) {
  void *d = NULL, *h = NULL, *d2 = NULL, *d3 = NULL, *h2 = NULL, *exec = NULL;
  char* p = malloc(1 << 16);
  memset(p, 1, 1 << 16);
  cudaMalloc(&d, 1 << 20);
  cudaMallocHost(&h, 1 << 16);
  cudaMemcpy(d, p, 4096, 1);       // pageable H2D
  cudaMemcpy(d, h, 8192, 1);       // pinned H2D
  cudaMemcpy(h, d, 8193, 2);       // pinned D2H
  cudaMemcpyAsync(d, h, 12288, 1, STREAM);
  cudaMemcpy2D(d, 64, p, 64, 64, 32, 1);             // 2048 bytes pageable
  cudaMemcpy2DAsync(d, 64, h, 64, 64, 16, 1, STREAM);  // 1024 bytes pinned
  cudaMemcpyPeer(d, 0, (char*)d + 4096, 1, 512);
  cudaMemcpyPeerAsync(d, 0, (char*)d + 4096, 1, 256, STREAM);
  cudaMemcpy(d, p, 100, 4);  // cudaMemcpyDefault: direction inferred
  cudaHostRegister(p, 1 << 16, 0);  // pin_memory=True style: page-lock an existing buffer
  cudaMemcpy(d, p + 128, 4097, 1);  // pinned through the registration
  cudaHostUnregister(p);
  cudaMemcpy(d, p + 128, 4098, 1);  // pageable again
  cudaMemset(d, 0, 777);
  cudaMemsetAsync(d, 0, 778, STREAM);
  cudaStreamSynchronize(STREAM);
  cudaDeviceSynchronize();
  cudaEventSynchronize(EVENT);
  cudaStreamWaitEvent(STREAM, EVENT, 0);
  cudaGraphInstantiate(&exec, (void*)0x99, 0);
  cudaGraphInstantiateWithFlags(&exec, (void*)0x99, 0);
  cudaGraphLaunch(exec, STREAM);
  cudaMallocAsync(&d2, 3000, STREAM);
  cudaFreeAsync(d2, STREAM);
  cudaMallocManaged(&d3, 5000, 1);
  cudaFree(d3);
  cudaHostAlloc(&h2, 6000, 0);
  cudaFreeHost(h2);

  // Driver API called directly (as cuBLAS or Triton do).
  uint64_t dd = 0;
  cuMemAlloc_v2(&dd, 9000);
  cuMemcpyHtoD_v2(dd, p, 301);
  cuMemcpyDtoH_v2(p, dd, 302);
  cuMemcpyDtoD_v2(dd, dd + 4096, 303);
  cuMemcpyHtoDAsync_v2(dd, h, 304, STREAM);
  cuMemcpyDtoHAsync_v2(h, dd, 305, STREAM);
  cuMemcpyDtoDAsync_v2(dd, dd + 4096, 306, STREAM);
  cuMemcpy(dd, U(p), 307);
  cuMemcpyAsync(dd, U(p), 308, STREAM);
  cuStreamSynchronize(STREAM);
  cuCtxSynchronize();
  cuEventSynchronize(EVENT);
  cuMemFree_v2(dd);

  // Launches: runtime kernels registered like nvcc's static initialisers do.
  __cudaRegisterFunction(NULL, (const char*)&kernel_a, "_Z8kernel_aPf", "_Z8kernel_aPf", -1,
                         NULL, NULL, NULL, NULL, NULL);
  __cudaRegisterFunction(NULL, (const char*)&kernel_b, "_Z8kernel_bi", "_Z8kernel_bi", -1, NULL,
                         NULL, NULL, NULL, NULL);
  fake_dim3 grid = {4, 1, 1}, block = {128, 1, 1};
  for (int i = 0; i < 10; ++i) cudaLaunchKernel((const void*)&kernel_a, grid, block, NULL, 0, STREAM);
  for (int i = 0; i < 3; ++i) cudaLaunchKernel_ptsz((const void*)&kernel_a, grid, block, NULL, 0, STREAM);
  launch_config config = {grid, block, 0, STREAM, NULL, 0};
  for (int i = 0; i < 5; ++i) cudaLaunchKernelExC(&config, (const void*)&kernel_b, NULL);
  void* f = NULL;
  cuModuleGetFunction(&f, (void*)0x77, "driver_kernel");
  for (int i = 0; i < 7; ++i) cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, STREAM, NULL, NULL);
  for (int i = 0; i < 4; ++i) cuLaunchKernelEx(&config, f, NULL, NULL);

  cudaFree(d);
  cudaFreeHost(h);
  free(p);
  return 0;
}

static int run_dlopen(const char* path) {
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    return 1;
  }
  int (*sync)(void) = (int (*)(void))dlsym(lib, "cudaDeviceSynchronize");
  int (*alloc)(void**, size_t) = (int (*)(void**, size_t))dlsym(lib, "cudaMalloc");
  int (*release)(void*) = (int (*)(void*))dlsym(lib, "cudaFree");
  if (sync == NULL || alloc == NULL || release == NULL) return 1;
  // Tell the parent the library is mapped, then wait for it to attach.
  if (write(1, "r", 1) != 1) return 1;
  char go;
  if (read(0, &go, 1) != 1) return 1;
  void* d = NULL;
  alloc(&d, 4242);
  sync();
  release(d);
  return 0;
}

// N pinned cudaMemcpyAsync calls of 4096 bytes, host-to-device and device-to-host in turn
// (each makes a driver copy), then N direct cuMemcpyHtoDAsync_v2 calls: the row budget's test.
static int run_copies(int n) {
  void *d = NULL, *h = NULL;
  cudaMalloc(&d, 1 << 16);
  cudaMallocHost(&h, 1 << 16);
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      cudaMemcpyAsync(d, h, 4096, 1, STREAM);
    } else {
      cudaMemcpyAsync(h, d, 4096, 2, STREAM);
    }
  }
  for (int i = 0; i < n; ++i) cuMemcpyHtoDAsync_v2(U(d), h, 4096, STREAM);
  cudaFree(d);
  cudaFreeHost(h);
  return 0;
}

static void sleep_ms(int ms) { usleep((useconds_t)ms * 1000); }

static void* launch_after_10ms(void* arg) {
  (void)arg;
  sleep_ms(10);
  cudaLaunchKernel((const void*)kernel_a, (fake_dim3){1, 1, 1}, (fake_dim3){1, 1, 1}, NULL, 0,
                   STREAM);
  return NULL;
}

// Work, then a 30 ms sleep, then a sync, five ways; each sync's since_work_ns is asserted by
// CudaSourceTest.SyncsCarryWhenTheProcessLastGaveTheGpuWork:
//   device sync: a launch, the sleep, one 4 KiB copy (a loss read back): >= 30 ms;
//   stream sync: the sleep, then a launch (a C++ loop queuing its step after a wait): < 30 ms;
//   event sync: a launch, the sleep, five 4 KiB copies (more than GW_SMALL_COPIES_MAX): < 30 ms;
//   cuStreamSynchronize: a launch, the sleep, a 1 MiB copy: < 30 ms;
//   cuCtxSynchronize: a launch, the sleep while another thread launches 10 ms in: < 25 ms.
// Then a 20 ms sleep, a cudaFree, a cudaMalloc and a cudaFree: allocations are not work, and
// their rows carry since_work_ns too: >= 20 ms each.
static int run_work(void) {
  void *d = NULL, *h = NULL;
  fake_dim3 one = {1, 1, 1};
  cudaMalloc(&d, 1 << 20);
  cudaMallocHost(&h, 1 << 20);
  cudaLaunchKernel((const void*)kernel_a, one, one, NULL, 0, STREAM);
  sleep_ms(30);
  cudaMemcpyAsync(h, d, 4096, 2, STREAM);
  cudaDeviceSynchronize();

  sleep_ms(30);
  cudaLaunchKernel((const void*)kernel_a, one, one, NULL, 0, STREAM);
  cudaStreamSynchronize(STREAM);

  cudaLaunchKernel((const void*)kernel_a, one, one, NULL, 0, STREAM);
  sleep_ms(30);
  for (int i = 0; i < 5; ++i) cudaMemcpyAsync(h, d, 4096, 2, STREAM);
  cudaEventSynchronize(EVENT);

  cudaLaunchKernel((const void*)kernel_a, one, one, NULL, 0, STREAM);
  sleep_ms(30);
  cudaMemcpyAsync(h, d, 1 << 20, 2, STREAM);
  cuStreamSynchronize(STREAM);

  cudaLaunchKernel((const void*)kernel_a, one, one, NULL, 0, STREAM);
  pthread_t other;
  if (pthread_create(&other, NULL, launch_after_10ms, NULL) != 0) return 1;
  sleep_ms(30);
  pthread_join(other, NULL);
  cuCtxSynchronize();

  sleep_ms(20);
  cudaFree(d);
  cudaMalloc(&d, 4096);
  cudaFree(d);
  cudaFreeHost(h);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 2 && strcmp(argv[1], "all") == 0) return run_all();
  if (argc >= 3 && strcmp(argv[1], "copies") == 0) return run_copies(atoi(argv[2]));
  if (argc >= 3 && strcmp(argv[1], "dlopen") == 0) return run_dlopen(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "work") == 0) return run_work();
  fprintf(stderr, "usage: %s all | copies N | dlopen <libcudart path> | work\n", argv[0]);
  (void)D;
  return 2;
}
