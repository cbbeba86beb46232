// A tiny stand-in for libcuda.so.1 used by the CUDA source's tests: real symbol names and
// argument order, fixed durations (so the tests can check measured durations), host memory as
// "device" memory. Not the simulated runtime (sim/): just enough to trigger every probe.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

void fake_sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int cuMemAlloc_v2(uint64_t* ptr, size_t size) {
  fake_sleep_us(kFakeDriverUs);
  *ptr = (uint64_t)(uintptr_t)malloc(size);
  return *ptr ? 0 : 2;
}
int cuMemFree_v2(uint64_t ptr) {
  fake_sleep_us(kFakeDriverUs);
  free((void*)(uintptr_t)ptr);
  return 0;
}
static int copy(uint64_t dst, uint64_t src, size_t n) {
  fake_sleep_us(kFakeDriverUs);
  memcpy((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
  return 0;
}
int cuMemcpy(uint64_t dst, uint64_t src, size_t n) { return copy(dst, src, n); }
int cuMemcpyAsync(uint64_t dst, uint64_t src, size_t n, void* stream) {
  (void)stream;
  return copy(dst, src, n);
}
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t n) {
  return copy(dst, (uint64_t)(uintptr_t)src, n);
}
int cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t n) {
  return copy((uint64_t)(uintptr_t)dst, src, n);
}
int cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t n) { return copy(dst, src, n); }
int cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* stream) {
  (void)stream;
  return copy(dst, (uint64_t)(uintptr_t)src, n);
}
int cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* stream) {
  (void)stream;
  return copy((uint64_t)(uintptr_t)dst, src, n);
}
int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* stream) {
  (void)stream;
  return copy(dst, src, n);
}
int cuStreamSynchronize(void* stream) {
  (void)stream;
  fake_sleep_us(kFakeDriverUs);
  return 0;
}
int cuCtxSynchronize(void) {
  fake_sleep_us(kFakeDriverUs);
  return 0;
}
int cuEventSynchronize(void* event) {
  (void)event;
  fake_sleep_us(kFakeDriverUs);
  return 0;
}

// Handles are addresses of static slots (nothing to free: the workload runs under LSan in
// sanitizer builds).
static char g_handles[64][8];
static int g_next_handle;
static void* next_handle(void) { return g_handles[g_next_handle++ & 63]; }

int cuModuleGetFunction(void** out, void* module, const char* name) {
  (void)module, (void)name;
  *out = next_handle();
  return 0;
}
int cuLibraryGetKernel(void** out, void* library, const char* name) {
  (void)library, (void)name;
  *out = next_handle();
  return 0;
}
int cuKernelGetFunction(void** out, void* kernel) {
  (void)kernel;
  *out = next_handle();
  return 0;
}

volatile uint64_t g_fake_launches;

int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, void* stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
  (void)stream, (void)params, (void)extra;
  g_fake_launches++;
  return 0;
}
int cuLaunchKernelEx(const void* config, void* f, void** params, void** extra) {
  (void)config, (void)f, (void)params, (void)extra;
  g_fake_launches++;
  return 0;
}
