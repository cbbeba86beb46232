// Do-nothing functions with CUDA names and signatures, built like the real libcudart/libcuda
// (frame pointers, no endbr64: `push %rbp; mov %rsp,%rbp` first), so gw_uprobe_cost measures
// the probe mechanism and gpuwhy's BPF work without any work of the function itself.
// Compiled twice: -DGW_TARGET_RUNTIME → libcudart.so.13, -DGW_TARGET_DRIVER → libcuda.so.1.
#include <stddef.h>
#include <stdint.h>

// A call makes every function non-leaf, so GCC keeps its frame (a leaf function with no
// stack use gets no `push %rbp` even under -fno-omit-frame-pointer).
__attribute__((noinline, visibility("hidden"))) void gw_target_touch(void) {
  __asm__ volatile("" ::: "memory");
}
#define BODY gw_target_touch()

#ifdef GW_TARGET_RUNTIME
typedef struct {
  unsigned x, y, z;
} dim3;
int cudaLaunchKernel(const void* func, dim3 grid, dim3 block, void** args, size_t shmem,
                     void* stream) {
  (void)func, (void)grid, (void)block, (void)args, (void)shmem, (void)stream;
  BODY;
  return 0;
}
int cudaStreamSynchronize(void* stream) {
  (void)stream;
  BODY;
  return 0;
}
int cudaMemcpy(void* dst, const void* src, size_t n, int kind) {
  (void)dst, (void)src, (void)n, (void)kind;
  BODY;
  return 0;
}
int cudaMalloc(void** ptr, size_t size) {
  *ptr = (void*)(uintptr_t)(0x700000000000ull + size);
  BODY;
  return 0;
}
int cudaFree(void* ptr) {
  (void)ptr;
  BODY;
  return 0;
}
#endif

#ifdef GW_TARGET_DRIVER
int cuLaunchKernel(void* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                   unsigned bz, unsigned shmem, void* stream, void** params, void** extra) {
  (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shmem;
  (void)stream, (void)params, (void)extra;
  BODY;
  return 0;
}
int cuStreamSynchronize(void* stream) {
  (void)stream;
  BODY;
  return 0;
}
int cuMemcpyHtoD_v2(uint64_t dst, const void* src, size_t n) {
  (void)dst, (void)src, (void)n;
  BODY;
  return 0;
}
#endif
