// Shared by the fake libcuda/libcudart test libraries and the test workload.
#ifndef GPUWHY_SOURCES_CUDA_TESTDATA_FAKE_CUDA_H_
#define GPUWHY_SOURCES_CUDA_TESTDATA_FAKE_CUDA_H_

#include <stddef.h>
#include <stdint.h>

// Every fake driver call sleeps this long; a runtime call sleeps kFakeRuntimeUs and then calls
// the driver, so runtime ≥ driver + kFakeRuntimeUs.
enum { kFakeDriverUs = 1000, kFakeRuntimeUs = 500 };

void fake_sleep_us(long us);

typedef struct {
  unsigned x, y, z;
} fake_dim3;

// The driver calls the fake runtime makes (nesting).
int cuMemAlloc_v2(uint64_t* ptr, size_t size);
int cuMemFree_v2(uint64_t ptr);
int cuMemcpy(uint64_t dst, uint64_t src, size_t n);
int cuMemcpyAsync(uint64_t dst, uint64_t src, size_t n, void* stream);
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t n);
int cuMemcpyDtoH_v2(void* dst, uint64_t src, size_t n);
int cuMemcpyDtoD_v2(uint64_t dst, uint64_t src, size_t n);
int cuMemcpyHtoDAsync_v2(uint64_t dst, const void* src, size_t n, void* stream);
int cuMemcpyDtoHAsync_v2(void* dst, uint64_t src, size_t n, void* stream);
int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t n, void* stream);
int cuStreamSynchronize(void* stream);
int cuCtxSynchronize(void);
int cuEventSynchronize(void* event);
int cuModuleGetFunction(void** out, void* module, const char* name);
int cuLibraryGetKernel(void** out, void* library, const char* name);
int cuKernelGetFunction(void** out, void* kernel);
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, void* stream, void** params, void** extra);
int cuLaunchKernelEx(const void* config, void* f, void** params, void** extra);

#endif  // GPUWHY_SOURCES_CUDA_TESTDATA_FAKE_CUDA_H_
