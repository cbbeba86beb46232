// A tiny stand-in for libcudart.so.13 used by the CUDA source's tests. Each call sleeps
// kFakeRuntimeUs and then makes the driver call the real runtime would make, so the tests see
// a runtime row with a nested driver row on the same thread. Exported with the symbol version
// "libcudart.so.13" (see fake_cudart.map) like the real library.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

enum { kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3 };

static uint64_t U(const void* p) { return (uint64_t)(uintptr_t)p; }

// hostFun → CUfunction, filled by __cudaRegisterFunction and resolved on first launch.
struct registration {
  const void* host_fun;
  const char* device_name;
  void* function;
};
static struct registration g_registrations[64];
static int g_registration_count;

void __cudaRegisterFunction(void** fatbin, const char* host_fun, char* device_fun,
                            const char* device_name, int thread_limit, void* tid, void* bid,
                            void* bdim, void* gdim, int* wsize) {
  (void)fatbin, (void)device_fun, (void)thread_limit, (void)tid, (void)bid, (void)bdim;
  (void)gdim, (void)wsize;
  if (g_registration_count < 64) {
    g_registrations[g_registration_count++] =
        (struct registration){host_fun, device_name, NULL};
  }
}

static void* resolve(const void* host_fun) {
  for (int i = 0; i < g_registration_count; ++i) {
    struct registration* r = &g_registrations[i];
    if (r->host_fun != host_fun) continue;
    if (r->function == NULL) {
      void* kernel = NULL;
      cuLibraryGetKernel(&kernel, NULL, r->device_name);
      cuKernelGetFunction(&r->function, kernel);
    }
    return r->function;
  }
  return NULL;
}

static int launch(const void* func, fake_dim3 grid, fake_dim3 block, void** args, size_t shmem,
                  void* stream) {
  return cuLaunchKernel(resolve(func), grid.x, grid.y, grid.z, block.x, block.y, block.z,
                        (unsigned)shmem, stream, args, NULL);
}
int cudaLaunchKernel(const void* func, fake_dim3 grid, fake_dim3 block, void** args,
                     size_t shmem, void* stream) {
  return launch(func, grid, block, args, shmem, stream);
}
int cudaLaunchKernel_ptsz(const void* func, fake_dim3 grid, fake_dim3 block, void** args,
                          size_t shmem, void* stream) {
  return launch(func, grid, block, args, shmem, stream);
}
typedef struct {
  fake_dim3 grid, block;
  size_t shmem;
  void* stream;
  void* attrs;
  unsigned num_attrs;
} fake_launch_config;
int cudaLaunchKernelExC(const fake_launch_config* config, const void* func, void** args) {
  return cuLaunchKernelEx(config, resolve(func), args, NULL);
}

static int runtime_alloc(void** ptr, size_t size) {
  fake_sleep_us(kFakeRuntimeUs);
  uint64_t p = 0;
  int rc = cuMemAlloc_v2(&p, size);
  *ptr = (void*)(uintptr_t)p;
  return rc;
}
int cudaMalloc(void** ptr, size_t size) { return runtime_alloc(ptr, size); }
int cudaMallocAsync(void** ptr, size_t size, void* stream) {
  (void)stream;
  return runtime_alloc(ptr, size);
}
int cudaMallocManaged(void** ptr, size_t size, unsigned flags) {
  (void)flags;
  return runtime_alloc(ptr, size);
}
static int host_alloc(void** ptr, size_t size) {
  fake_sleep_us(kFakeRuntimeUs);
  *ptr = malloc(size);
  return 0;
}
int cudaMallocHost(void** ptr, size_t size) { return host_alloc(ptr, size); }
int cudaHostAlloc(void** ptr, size_t size, unsigned flags) {
  (void)flags;
  return host_alloc(ptr, size);
}
int cudaHostRegister(void* ptr, size_t size, unsigned flags) {
  (void)ptr, (void)size, (void)flags;
  return 0;
}
int cudaHostUnregister(void* ptr) {
  (void)ptr;
  return 0;
}
int cudaFreeHost(void* ptr) {
  free(ptr);
  return 0;
}
int cudaFree(void* ptr) {
  fake_sleep_us(kFakeRuntimeUs);
  return cuMemFree_v2(U(ptr));
}
// Calls the exported cudaFree through the PLT on purpose: same-layer nesting.
int cudaFreeAsync(void* ptr, void* stream) {
  (void)stream;
  return cudaFree(ptr);
}

static int copy(void* dst, const void* src, size_t n, int kind, void* stream, int async) {
  fake_sleep_us(kFakeRuntimeUs);
  switch (kind) {
    case kHostToDevice:
      return async ? cuMemcpyHtoDAsync_v2(U(dst), src, n, stream) : cuMemcpyHtoD_v2(U(dst), src, n);
    case kDeviceToHost:
      return async ? cuMemcpyDtoHAsync_v2(dst, U(src), n, stream) : cuMemcpyDtoH_v2(dst, U(src), n);
    case kDeviceToDevice:
      return async ? cuMemcpyDtoDAsync_v2(U(dst), U(src), n, stream)
                   : cuMemcpyDtoD_v2(U(dst), U(src), n);
    default:
      return async ? cuMemcpyAsync(U(dst), U(src), n, stream) : cuMemcpy(U(dst), U(src), n);
  }
}
int cudaMemcpy(void* dst, const void* src, size_t n, int kind) {
  return copy(dst, src, n, kind, NULL, 0);
}
int cudaMemcpyAsync(void* dst, const void* src, size_t n, int kind, void* stream) {
  return copy(dst, src, n, kind, stream, 1);
}
int cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                 size_t height, int kind) {
  (void)dpitch, (void)spitch;
  return copy(dst, src, width * height, kind, NULL, 0);
}
int cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                      size_t height, int kind, void* stream) {
  (void)dpitch, (void)spitch;
  return copy(dst, src, width * height, kind, stream, 1);
}
int cudaMemcpyPeer(void* dst, int dst_dev, const void* src, int src_dev, size_t n) {
  (void)dst_dev, (void)src_dev;
  return copy(dst, src, n, kDeviceToDevice, NULL, 0);
}
int cudaMemcpyPeerAsync(void* dst, int dst_dev, const void* src, int src_dev, size_t n,
                        void* stream) {
  (void)dst_dev, (void)src_dev;
  return copy(dst, src, n, kDeviceToDevice, stream, 1);
}
static int fill(void* ptr, int value, size_t n) {
  fake_sleep_us(kFakeRuntimeUs);
  memset(ptr, value, n);
  return 0;
}
int cudaMemset(void* ptr, int value, size_t n) { return fill(ptr, value, n); }
int cudaMemsetAsync(void* ptr, int value, size_t n, void* stream) {
  (void)stream;
  return fill(ptr, value, n);
}
int cudaStreamSynchronize(void* stream) {
  fake_sleep_us(kFakeRuntimeUs);
  return cuStreamSynchronize(stream);
}
int cudaDeviceSynchronize(void) {
  fake_sleep_us(kFakeRuntimeUs);
  return cuCtxSynchronize();
}
int cudaEventSynchronize(void* event) {
  fake_sleep_us(kFakeRuntimeUs);
  return cuEventSynchronize(event);
}
int cudaStreamWaitEvent(void* stream, void* event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  fake_sleep_us(kFakeRuntimeUs);
  return 0;
}
static int instantiate(void** exec) {
  fake_sleep_us(kFakeRuntimeUs);
  static char execs[2][16];
  static int next;
  *exec = execs[next++ & 1];
  return 0;
}
int cudaGraphInstantiate(void** exec, void* graph, unsigned long long flags) {
  (void)graph, (void)flags;
  return instantiate(exec);
}
int cudaGraphInstantiateWithFlags(void** exec, void* graph, unsigned long long flags) {
  (void)graph, (void)flags;
  return instantiate(exec);
}
int cudaGraphLaunch(void* exec, void* stream) {
  (void)exec, (void)stream;
  fake_sleep_us(kFakeRuntimeUs);
  return 0;
}
