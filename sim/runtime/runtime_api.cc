// The exported CUDA Runtime API entry points of the sim libcudart. Like the real runtime, each
// call is implemented by calling Driver API functions of libcuda.so.1 on the same thread
// (through the PLT, so probes on the driver see the nested calls): cudaMalloc → cuMemAlloc_v2,
// cudaLaunchKernel → cuLibraryGetKernel + cuKernelGetFunction on first use, then cuLaunchKernel.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/api_counter.h"
#include "gwsim/cuda_driver.h"
#include "gwsim/cuda_runtime.h"
#include "gwsim/fatbin.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// One registered translation unit (fat binary).
struct FatBinary {
  void* handle_slot = nullptr;  // what __cudaRegisterFatBinary's void** points at
  const GwsimFatbinWrapper* wrapper = nullptr;
  CUlibrary library = nullptr;  // loaded lazily on the first launch
};

// One host function registered with __cudaRegisterFunction.
struct RegisteredFunction {
  FatBinary* fatbin = nullptr;
  std::string device_name;
  CUfunction function = nullptr;  // resolved lazily
};

struct Registry {
  std::mutex mu;
  std::map<const void*, RegisteredFunction> functions;  // by host function address
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed (used until exit)
  return *registry;
}

struct ThreadState {
  int device = 0;
  bool context_ready = false;
  cudaError_t last_error = cudaSuccess;
  struct CallConfig {
    dim3 grid;
    dim3 block;
    size_t shared_mem;
    void* stream;
  };
  std::vector<CallConfig> call_configs;
};

ThreadState& Thread() {
  thread_local ThreadState state;
  return state;
}

// The runtime's error codes agree numerically with the driver's for every code the simulator
// produces (see cuda_driver.h and cuda_runtime.h), so the mapping is the identity.
cudaError_t FromDriver(CUresult r) { return static_cast<cudaError_t>(r); }

cudaError_t Record(cudaError_t e) {
  if (e != cudaSuccess) Thread().last_error = e;
  return e;
}

cudaError_t Record(CUresult r) { return Record(FromDriver(r)); }

// Makes the device's primary context current on this thread (cuInit on the first call).
cudaError_t EnsureContext() {
  ThreadState& t = Thread();
  if (t.context_ready) return cudaSuccess;
  static std::once_flag init_once;
  static CUresult init_result = CUDA_SUCCESS;
  std::call_once(init_once, [] { init_result = cuInit(0); });
  if (init_result != CUDA_SUCCESS) {
    return init_result == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : FromDriver(init_result);
  }
  CUcontext ctx = nullptr;
  if (CUresult r = cuDevicePrimaryCtxRetain(&ctx, t.device); r != CUDA_SUCCESS) {
    return FromDriver(r);
  }
  if (CUresult r = cuCtxSetCurrent(ctx); r != CUDA_SUCCESS) return FromDriver(r);
  t.context_ready = true;
  return cudaSuccess;
}

#define GWSIM_ENSURE_CONTEXT()                                               \
  do {                                                                       \
    if (cudaError_t e = EnsureContext(); e != cudaSuccess) return Record(e); \
  } while (0)

CUdeviceptr Dev(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

// Finds (resolving on first use) the driver function for a registered host function.
cudaError_t ResolveFunction(const void* host_fun, CUfunction* out) {
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.functions.find(host_fun);
  if (it == reg.functions.end()) return cudaErrorInvalidDeviceFunction;
  RegisteredFunction& fn = it->second;
  if (fn.function != nullptr) {
    *out = fn.function;
    return cudaSuccess;
  }
  FatBinary* fb = fn.fatbin;
  if (fb->library == nullptr) {
    if (CUresult r =
            cuLibraryLoadData(&fb->library, fb->wrapper, nullptr, nullptr, 0, nullptr, nullptr, 0);
        r != CUDA_SUCCESS) {
      return r == CUDA_ERROR_INVALID_VALUE ? cudaErrorInvalidKernelImage : FromDriver(r);
    }
  }
  CUkernel kernel = nullptr;
  if (CUresult r = cuLibraryGetKernel(&kernel, fb->library, fn.device_name.c_str());
      r != CUDA_SUCCESS) {
    return r == CUDA_ERROR_NOT_FOUND ? cudaErrorInvalidDeviceFunction : FromDriver(r);
  }
  if (CUresult r = cuKernelGetFunction(&fn.function, kernel); r != CUDA_SUCCESS) {
    return FromDriver(r);
  }
  *out = fn.function;
  return cudaSuccess;
}

// GWSIM_LAUNCH_STALL_EVERY=N: every Nth runtime launch (the first excepted) stalls 6 ms between
// its entry and the driver launch it makes, as a thread preempted there on a busy host would
// (tests: a tracer must still count that launch once).
bool StallThisLaunch() {
  static const long every = [] {
    const char* v = getenv("GWSIM_LAUNCH_STALL_EVERY");
    return v != nullptr ? strtol(v, nullptr, 10) : 0L;
  }();
  static std::atomic<long> launches{0};
  if (every <= 0) return false;
  long n = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  return n > 1 && n % every == 0;
}

cudaError_t LaunchOn(const void* func, dim3 grid, dim3 block, void** args, size_t shared_mem,
                     CUstream stream) {
  GWSIM_ENSURE_CONTEXT();
  CUfunction f = nullptr;
  if (cudaError_t e = ResolveFunction(func, &f); e != cudaSuccess) return Record(e);
  if (StallThisLaunch()) usleep(6000);
  return Record(cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                               static_cast<unsigned>(shared_mem), stream, args, nullptr));
}

cudaError_t MemcpyImpl(void* dst, const void* src, size_t count, cudaMemcpyKind kind, bool async,
                       cudaStream_t stream) {
  GWSIM_ENSURE_CONTEXT();
  CUresult r = CUDA_SUCCESS;
  switch (kind) {
    case cudaMemcpyHostToDevice:
      r = async ? cuMemcpyHtoDAsync_v2(Dev(dst), src, count, stream)
                : cuMemcpyHtoD_v2(Dev(dst), src, count);
      break;
    case cudaMemcpyDeviceToHost:
      r = async ? cuMemcpyDtoHAsync_v2(dst, Dev(src), count, stream)
                : cuMemcpyDtoH_v2(dst, Dev(src), count);
      break;
    case cudaMemcpyDeviceToDevice:
      r = async ? cuMemcpyDtoDAsync_v2(Dev(dst), Dev(src), count, stream)
                : cuMemcpyDtoD_v2(Dev(dst), Dev(src), count);
      break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault:
      r = async ? cuMemcpyAsync(Dev(dst), Dev(src), count, stream)
                : cuMemcpy(Dev(dst), Dev(src), count);
      break;
    default:
      return Record(cudaErrorInvalidMemcpyDirection);
  }
  return Record(r);
}

cudaError_t Memcpy2DImpl(void* dst, size_t dpitch, const void* src, size_t spitch, size_t width,
                         size_t height, cudaMemcpyKind kind, bool async, cudaStream_t stream) {
  GWSIM_ENSURE_CONTEXT();
  if (height > 1 && (width > dpitch || width > spitch)) return Record(cudaErrorInvalidPitchValue);
  CUDA_MEMCPY2D c;
  memset(&c, 0, sizeof(c));
  bool src_host = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost;
  bool dst_host = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost;
  if (kind == cudaMemcpyDefault) {
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = Dev(src);
    c.dstDevice = Dev(dst);
  } else if (kind >= cudaMemcpyHostToHost && kind <= cudaMemcpyDeviceToDevice) {
    c.srcMemoryType = src_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.dstMemoryType = dst_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    c.srcHost = src;
    c.srcDevice = Dev(src);
    c.dstHost = dst;
    c.dstDevice = Dev(dst);
  } else {
    return Record(cudaErrorInvalidMemcpyDirection);
  }
  c.srcPitch = spitch;
  c.dstPitch = dpitch;
  c.WidthInBytes = width;
  c.Height = height;
  return Record(async ? cuMemcpy2DAsync_v2(&c, stream) : cuMemcpy2D_v2(&c));
}

cudaError_t PrimaryContext(int device, CUcontext* ctx) {
  CUdevice dev = 0;
  if (CUresult r = cuDeviceGet(&dev, device); r != CUDA_SUCCESS) return FromDriver(r);
  return FromDriver(cuDevicePrimaryCtxRetain(ctx, dev));
}

struct ErrorText {
  cudaError_t code;
  const char* name;
  const char* text;
};

constexpr ErrorText kErrorTexts[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorCudartUnloading, "cudaErrorCudartUnloading", "driver shutting down"},
    {cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {cudaErrorInvalidDevicePointer, "cudaErrorInvalidDevicePointer", "invalid device pointer"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection",
     "invalid copy direction for memcpy"},
    {cudaErrorInvalidDeviceFunction, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidKernelImage, "cudaErrorInvalidKernelImage", "device kernel image is invalid"},
    {cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorLaunchFailure, "cudaErrorLaunchFailure", "unspecified launch failure"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

}  // namespace

// ---------------------------------------------------------------- registration

GWSIM_EXPORT void** __cudaRegisterFatBinary(void* fat_cubin) {
  GWSIM_API_ENTRY("__cudaRegisterFatBinary");
  auto* fb = new FatBinary();  // lives until __cudaUnregisterFatBinary
  fb->wrapper = static_cast<const GwsimFatbinWrapper*>(fat_cubin);
  fb->handle_slot = fb;
  return &fb->handle_slot;
}

GWSIM_EXPORT void __cudaRegisterFatBinaryEnd(void** fat_cubin_handle) {
  GWSIM_API_ENTRY("__cudaRegisterFatBinaryEnd");
  (void)fat_cubin_handle;
}

GWSIM_EXPORT void __cudaUnregisterFatBinary(void** fat_cubin_handle) {
  GWSIM_API_ENTRY("__cudaUnregisterFatBinary");
  if (fat_cubin_handle == nullptr) return;
  auto* fb = static_cast<FatBinary*>(*fat_cubin_handle);
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  for (auto it = reg.functions.begin(); it != reg.functions.end();) {
    it = it->second.fatbin == fb ? reg.functions.erase(it) : std::next(it);
  }
  // The FatBinary itself is kept: its CUlibrary may still back launched functions, and the
  // driver is not called from here (this runs from static destructors at exit).
}

GWSIM_EXPORT void __cudaRegisterFunction(void** fat_cubin_handle, const char* host_fun,
                                         char* device_fun, const char* device_name,
                                         int thread_limit, uint3* tid, uint3* bid, dim3* block_dim,
                                         dim3* grid_dim, int* warp_size) {
  GWSIM_API_ENTRY("__cudaRegisterFunction");
  (void)device_fun;
  (void)thread_limit;
  (void)tid;
  (void)bid;
  (void)block_dim;
  (void)grid_dim;
  (void)warp_size;
  if (fat_cubin_handle == nullptr || host_fun == nullptr || device_name == nullptr) return;
  Registry& reg = GetRegistry();
  std::lock_guard<std::mutex> lock(reg.mu);
  RegisteredFunction& fn = reg.functions[host_fun];
  fn.fatbin = static_cast<FatBinary*>(*fat_cubin_handle);
  fn.device_name = device_name;
  fn.function = nullptr;
}

GWSIM_EXPORT void __cudaRegisterVar(void** fat_cubin_handle, char* host_var, char* device_address,
                                    const char* device_name, int ext, size_t size, int constant,
                                    int global) {
  GWSIM_API_ENTRY("__cudaRegisterVar");
  // Device variables are not simulated.
  (void)fat_cubin_handle;
  (void)host_var;
  (void)device_address;
  (void)device_name;
  (void)ext;
  (void)size;
  (void)constant;
  (void)global;
}

GWSIM_EXPORT unsigned int __cudaPushCallConfiguration(dim3 grid_dim, dim3 block_dim,
                                                      size_t shared_mem,
                                                      struct CUstream_st* stream) {
  GWSIM_API_ENTRY("__cudaPushCallConfiguration");
  Thread().call_configs.push_back({grid_dim, block_dim, shared_mem, stream});
  return 0;
}

GWSIM_EXPORT cudaError_t __cudaPopCallConfiguration(dim3* grid_dim, dim3* block_dim,
                                                    size_t* shared_mem, void* stream) {
  GWSIM_API_ENTRY("__cudaPopCallConfiguration");
  ThreadState& t = Thread();
  if (t.call_configs.empty()) return cudaErrorInvalidValue;
  ThreadState::CallConfig c = t.call_configs.back();
  t.call_configs.pop_back();
  if (grid_dim != nullptr) *grid_dim = c.grid;
  if (block_dim != nullptr) *block_dim = c.block;
  if (shared_mem != nullptr) *shared_mem = c.shared_mem;
  if (stream != nullptr) *static_cast<void**>(stream) = c.stream;
  return cudaSuccess;
}

// ---------------------------------------------------------------- devices and errors

GWSIM_EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  GWSIM_API_ENTRY("cudaGetDeviceCount");
  if (count == nullptr) return Record(cudaErrorInvalidValue);
  *count = 0;
  CUresult r = cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE) return Record(cudaErrorNoDevice);
  if (r != CUDA_SUCCESS) return Record(r);
  return Record(cuDeviceGetCount(count));
}

GWSIM_EXPORT cudaError_t cudaSetDevice(int device) {
  GWSIM_API_ENTRY("cudaSetDevice");
  CUresult r = cuInit(0);
  if (r != CUDA_SUCCESS)
    return Record(r == CUDA_ERROR_NO_DEVICE ? cudaErrorNoDevice : FromDriver(r));
  CUcontext ctx = nullptr;
  if (cudaError_t e = PrimaryContext(device, &ctx); e != cudaSuccess) return Record(e);
  if (CUresult sr = cuCtxSetCurrent(ctx); sr != CUDA_SUCCESS) return Record(sr);
  ThreadState& t = Thread();
  t.device = device;
  t.context_ready = true;
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaGetDevice(int* device) {
  GWSIM_API_ENTRY("cudaGetDevice");
  if (device == nullptr) return Record(cudaErrorInvalidValue);
  *device = Thread().device;
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaDriverGetVersion(int* version) {
  GWSIM_API_ENTRY("cudaDriverGetVersion");
  return Record(cuDriverGetVersion(version));
}

GWSIM_EXPORT cudaError_t cudaRuntimeGetVersion(int* version) {
  GWSIM_API_ENTRY("cudaRuntimeGetVersion");
  if (version == nullptr) return Record(cudaErrorInvalidValue);
  *version = GWSIM_CUDART_VERSION;
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  GWSIM_API_ENTRY("cudaMemGetInfo");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemGetInfo_v2(free_bytes, total_bytes));
}

GWSIM_EXPORT cudaError_t cudaGetLastError(void) {
  GWSIM_API_ENTRY("cudaGetLastError");
  ThreadState& t = Thread();
  cudaError_t e = t.last_error;
  t.last_error = cudaSuccess;
  return e;
}

GWSIM_EXPORT cudaError_t cudaPeekAtLastError(void) {
  GWSIM_API_ENTRY("cudaPeekAtLastError");
  return Thread().last_error;
}

GWSIM_EXPORT const char* cudaGetErrorString(cudaError_t error) {
  GWSIM_API_ENTRY("cudaGetErrorString");
  for (const ErrorText& e : kErrorTexts) {
    if (e.code == error) return e.text;
  }
  return "unrecognized error code";
}

GWSIM_EXPORT const char* cudaGetErrorName(cudaError_t error) {
  GWSIM_API_ENTRY("cudaGetErrorName");
  for (const ErrorText& e : kErrorTexts) {
    if (e.code == error) return e.name;
  }
  return "cudaErrorUnknown";
}

// ---------------------------------------------------------------- memory

GWSIM_EXPORT cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  GWSIM_API_ENTRY("cudaMalloc");
  if (dev_ptr == nullptr) return Record(cudaErrorInvalidValue);
  GWSIM_ENSURE_CONTEXT();
  *dev_ptr = nullptr;
  if (size == 0) return cudaSuccess;  // like the real runtime: success, NULL pointer
  CUdeviceptr p = 0;
  CUresult r = cuMemAlloc_v2(&p, size);
  if (r != CUDA_SUCCESS) return Record(r);
  *dev_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaMallocAsync(void** dev_ptr, size_t size, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaMallocAsync");
  if (dev_ptr == nullptr) return Record(cudaErrorInvalidValue);
  GWSIM_ENSURE_CONTEXT();
  *dev_ptr = nullptr;
  if (size == 0) return cudaSuccess;
  CUdeviceptr p = 0;
  CUresult r = cuMemAllocAsync(&p, size, stream);
  if (r != CUDA_SUCCESS) return Record(r);
  *dev_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaMallocManaged(void** dev_ptr, size_t size, unsigned int flags) {
  GWSIM_API_ENTRY("cudaMallocManaged");
  if (dev_ptr == nullptr) return Record(cudaErrorInvalidValue);
  GWSIM_ENSURE_CONTEXT();
  *dev_ptr = nullptr;
  if (size == 0) return cudaSuccess;
  CUdeviceptr p = 0;
  CUresult r = cuMemAllocManaged(&p, size, flags);
  if (r != CUDA_SUCCESS) return Record(r);
  *dev_ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  return cudaSuccess;
}

GWSIM_EXPORT cudaError_t cudaMallocHost(void** ptr, size_t size) {
  GWSIM_API_ENTRY("cudaMallocHost");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemAllocHost_v2(ptr, size));
}

GWSIM_EXPORT cudaError_t cudaHostAlloc(void** ptr, size_t size, unsigned int flags) {
  GWSIM_API_ENTRY("cudaHostAlloc");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemHostAlloc(ptr, size, flags));
}

GWSIM_EXPORT cudaError_t cudaHostRegister(void* ptr, size_t size, unsigned int flags) {
  GWSIM_API_ENTRY("cudaHostRegister");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemHostRegister_v2(ptr, size, flags));
}

GWSIM_EXPORT cudaError_t cudaHostUnregister(void* ptr) {
  GWSIM_API_ENTRY("cudaHostUnregister");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemHostUnregister(ptr));
}

GWSIM_EXPORT cudaError_t cudaFreeHost(void* ptr) {
  GWSIM_API_ENTRY("cudaFreeHost");
  GWSIM_ENSURE_CONTEXT();
  if (ptr == nullptr) return cudaSuccess;
  return Record(cuMemFreeHost(ptr));
}

GWSIM_EXPORT cudaError_t cudaFree(void* dev_ptr) {
  GWSIM_API_ENTRY("cudaFree");
  GWSIM_ENSURE_CONTEXT();
  if (dev_ptr == nullptr) return cudaSuccess;  // cudaFree(0) only initializes the context
  return Record(cuMemFree_v2(Dev(dev_ptr)));
}

GWSIM_EXPORT cudaError_t cudaFreeAsync(void* dev_ptr, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaFreeAsync");
  GWSIM_ENSURE_CONTEXT();
  if (dev_ptr == nullptr) return cudaSuccess;
  return Record(cuMemFreeAsync(Dev(dev_ptr), stream));
}

// ---------------------------------------------------------------- copies and memset

GWSIM_EXPORT cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  GWSIM_API_ENTRY("cudaMemcpy");
  return MemcpyImpl(dst, src, count, kind, false, nullptr);
}

GWSIM_EXPORT cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count,
                                         cudaMemcpyKind kind, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaMemcpyAsync");
  return MemcpyImpl(dst, src, count, kind, true, stream);
}

GWSIM_EXPORT cudaError_t cudaMemcpy2D(void* dst, size_t dpitch, const void* src, size_t spitch,
                                      size_t width, size_t height, cudaMemcpyKind kind) {
  GWSIM_API_ENTRY("cudaMemcpy2D");
  return Memcpy2DImpl(dst, dpitch, src, spitch, width, height, kind, false, nullptr);
}

GWSIM_EXPORT cudaError_t cudaMemcpy2DAsync(void* dst, size_t dpitch, const void* src, size_t spitch,
                                           size_t width, size_t height, cudaMemcpyKind kind,
                                           cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaMemcpy2DAsync");
  return Memcpy2DImpl(dst, dpitch, src, spitch, width, height, kind, true, stream);
}

GWSIM_EXPORT cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device,
                                        size_t count) {
  GWSIM_API_ENTRY("cudaMemcpyPeer");
  GWSIM_ENSURE_CONTEXT();
  CUcontext dst_ctx = nullptr;
  CUcontext src_ctx = nullptr;
  if (cudaError_t e = PrimaryContext(dst_device, &dst_ctx); e != cudaSuccess) return Record(e);
  if (cudaError_t e = PrimaryContext(src_device, &src_ctx); e != cudaSuccess) return Record(e);
  return Record(cuMemcpyPeer(Dev(dst), dst_ctx, Dev(src), src_ctx, count));
}

GWSIM_EXPORT cudaError_t cudaMemcpyPeerAsync(void* dst, int dst_device, const void* src,
                                             int src_device, size_t count, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaMemcpyPeerAsync");
  GWSIM_ENSURE_CONTEXT();
  CUcontext dst_ctx = nullptr;
  CUcontext src_ctx = nullptr;
  if (cudaError_t e = PrimaryContext(dst_device, &dst_ctx); e != cudaSuccess) return Record(e);
  if (cudaError_t e = PrimaryContext(src_device, &src_ctx); e != cudaSuccess) return Record(e);
  return Record(cuMemcpyPeerAsync(Dev(dst), dst_ctx, Dev(src), src_ctx, count, stream));
}

GWSIM_EXPORT cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) {
  GWSIM_API_ENTRY("cudaMemset");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemsetD8_v2(Dev(dev_ptr), static_cast<unsigned char>(value), count));
}

GWSIM_EXPORT cudaError_t cudaMemsetAsync(void* dev_ptr, int value, size_t count,
                                         cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaMemsetAsync");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuMemsetD8Async(Dev(dev_ptr), static_cast<unsigned char>(value), count, stream));
}

// ---------------------------------------------------------------- streams and events

GWSIM_EXPORT cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  GWSIM_API_ENTRY("cudaStreamCreate");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamCreate(stream, CU_STREAM_DEFAULT));
}

GWSIM_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned int flags) {
  GWSIM_API_ENTRY("cudaStreamCreateWithFlags");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamCreate(stream, flags));
}

GWSIM_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaStreamDestroy");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamDestroy_v2(stream));
}

GWSIM_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaStreamSynchronize");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamSynchronize(stream));
}

GWSIM_EXPORT cudaError_t cudaStreamQuery(cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaStreamQuery");
  GWSIM_ENSURE_CONTEXT();
  CUresult r = cuStreamQuery(stream);
  return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : Record(r);
}

GWSIM_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event,
                                             unsigned int flags) {
  GWSIM_API_ENTRY("cudaStreamWaitEvent");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamWaitEvent(stream, event, flags));
}

GWSIM_EXPORT cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  GWSIM_API_ENTRY("cudaStreamBeginCapture");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamBeginCapture_v2(stream, static_cast<CUstreamCaptureMode>(mode)));
}

GWSIM_EXPORT cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  GWSIM_API_ENTRY("cudaStreamEndCapture");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuStreamEndCapture(stream, graph));
}

GWSIM_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  GWSIM_API_ENTRY("cudaLaunchHostFunc");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuLaunchHostFunc(stream, fn, user_data));
}

GWSIM_EXPORT cudaError_t cudaDeviceSynchronize(void) {
  GWSIM_API_ENTRY("cudaDeviceSynchronize");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuCtxSynchronize());
}

GWSIM_EXPORT cudaError_t cudaEventCreate(cudaEvent_t* event) {
  GWSIM_API_ENTRY("cudaEventCreate");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventCreate(event, cudaEventDefault));
}

GWSIM_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags) {
  GWSIM_API_ENTRY("cudaEventCreateWithFlags");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventCreate(event, flags));
}

GWSIM_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t event) {
  GWSIM_API_ENTRY("cudaEventDestroy");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventDestroy_v2(event));
}

GWSIM_EXPORT cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaEventRecord");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventRecord(event, stream));
}

GWSIM_EXPORT cudaError_t cudaEventQuery(cudaEvent_t event) {
  GWSIM_API_ENTRY("cudaEventQuery");
  GWSIM_ENSURE_CONTEXT();
  CUresult r = cuEventQuery(event);
  return r == CUDA_ERROR_NOT_READY ? cudaErrorNotReady : Record(r);
}

GWSIM_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  GWSIM_API_ENTRY("cudaEventSynchronize");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventSynchronize(event));
}

GWSIM_EXPORT cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  GWSIM_API_ENTRY("cudaEventElapsedTime");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuEventElapsedTime(ms, start, end));
}

// ---------------------------------------------------------------- graphs

GWSIM_EXPORT cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                              unsigned long long flags) {
  GWSIM_API_ENTRY("cudaGraphInstantiate");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuGraphInstantiateWithFlags(exec, graph, flags));
}

GWSIM_EXPORT cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t* exec, cudaGraph_t graph,
                                                       unsigned long long flags) {
  GWSIM_API_ENTRY("cudaGraphInstantiateWithFlags");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuGraphInstantiateWithFlags(exec, graph, flags));
}

GWSIM_EXPORT cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaGraphLaunch");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuGraphLaunch(exec, stream));
}

GWSIM_EXPORT cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  GWSIM_API_ENTRY("cudaGraphDestroy");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuGraphDestroy(graph));
}

GWSIM_EXPORT cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  GWSIM_API_ENTRY("cudaGraphExecDestroy");
  GWSIM_ENSURE_CONTEXT();
  return Record(cuGraphExecDestroy(exec));
}

// ---------------------------------------------------------------- launches

GWSIM_EXPORT cudaError_t cudaLaunchKernel(const void* func, dim3 grid_dim, dim3 block_dim,
                                          void** args, size_t shared_mem, cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaLaunchKernel");
  return LaunchOn(func, grid_dim, block_dim, args, shared_mem, stream);
}

// Per-thread default stream variant (nvcc --default-stream per-thread): stream 0 means the
// calling thread's default stream.
GWSIM_EXPORT cudaError_t cudaLaunchKernel_ptsz(const void* func, dim3 grid_dim, dim3 block_dim,
                                               void** args, size_t shared_mem,
                                               cudaStream_t stream) {
  GWSIM_API_ENTRY("cudaLaunchKernel_ptsz");
  return LaunchOn(func, grid_dim, block_dim, args, shared_mem,
                  stream == nullptr ? CU_STREAM_PER_THREAD : stream);
}

GWSIM_EXPORT cudaError_t cudaLaunchKernelExC(const cudaLaunchConfig_t* config, const void* func,
                                             void** args) {
  GWSIM_API_ENTRY("cudaLaunchKernelExC");
  if (config == nullptr) return Record(cudaErrorInvalidValue);
  GWSIM_ENSURE_CONTEXT();
  CUfunction f = nullptr;
  if (cudaError_t e = ResolveFunction(func, &f); e != cudaSuccess) return Record(e);
  CUlaunchConfig c;
  memset(&c, 0, sizeof(c));
  c.gridDimX = config->gridDim.x;
  c.gridDimY = config->gridDim.y;
  c.gridDimZ = config->gridDim.z;
  c.blockDimX = config->blockDim.x;
  c.blockDimY = config->blockDim.y;
  c.blockDimZ = config->blockDim.z;
  c.sharedMemBytes = static_cast<unsigned>(config->dynamicSmemBytes);
  c.hStream = config->stream;
  return Record(cuLaunchKernelEx(&c, f, args, nullptr));
}

// ---------------------------------------------------------------- simulator introspection

// Calls of `name` (an entry point of this library) so far in this process.
GWSIM_EXPORT unsigned long long gwsimRuntimeCallCount(const char* name) {
  GWSIM_API_ENTRY("gwsimRuntimeCallCount");
  return gwsim::CallCount(name);
}

__attribute__((constructor)) static void RegisterRuntimeCountDump() {
  gwsim::DumpCountsAtExit("libcudart");
}
