// The exported CUDA Driver API entry points of the sim libcuda.so.1. Each validates its
// arguments like the documented API, then acts on the simulated device (device.h).
#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "common/api_counter.h"
#include "driver/device.h"
#include "gwsim/cuda_driver.h"
#include "gwsim/fatbin.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

using gwsim::Allocation;
using gwsim::CopyDesc;
using gwsim::CurrentContext;
using gwsim::HandleKind;
using gwsim::MemKind;
using gwsim::Sim;
using gwsim::WorkItem;
using gwsim::WorkKind;

namespace {

using Lock = std::unique_lock<std::mutex>;

constexpr size_t kPageBytes = 4096;
// cuLaunchKernel `extra` keys (documented values).
constexpr uintptr_t kLaunchParamEnd = 0x0;
constexpr uintptr_t kLaunchParamBufferPointer = 0x1;
constexpr uintptr_t kLaunchParamBufferSize = 0x2;

CUresult CurrentCtx(Sim& sim, CUctx_st** ctx) {
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  CUctx_st* c = CurrentContext();
  if (c == nullptr || !sim.IsHandle(c, HandleKind::kContext)) return CUDA_ERROR_INVALID_CONTEXT;
  *ctx = c;
  return CUDA_SUCCESS;
}

size_t RoundUpToPage(size_t n) { return (n + kPageBytes - 1) & ~(kPageBytes - 1); }

bool IsDeviceSide(const Allocation* a) {
  return a != nullptr && (a->kind == MemKind::kDevice || a->kind == MemKind::kManaged);
}

CUresult AllocDevice(CUdeviceptr* out, size_t size, MemKind kind) {
  if (out == nullptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
  *out = 0;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  gwsim::DeviceState& dev = sim.devices[static_cast<size_t>(ctx->device)];
  if (size > sim.config.device_mem_bytes - dev.used_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  dev.used_bytes += size;  // reserved while the mapping is made without the lock
  size_t mapped = RoundUpToPage(size);
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  // Small allocations are populated up front so that later copies into "device memory" do not
  // page-fault on the host (real device memory never does); huge ones stay lazy.
  if (mapped <= sim.config.populate_max_bytes) flags |= MAP_POPULATE;
  lock.unlock();
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
  lock.lock();
  if (p == MAP_FAILED) {
    dev.used_bytes -= size;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.mapped_size = mapped;
  a.kind = kind;
  a.device = ctx->device;
  sim.allocations[a.base] = a;
  *out = static_cast<CUdeviceptr>(a.base);
  return CUDA_SUCCESS;
}

CUresult AllocPinnedHost(void** out, size_t size) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *out = nullptr;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  {
    Lock lock(sim.mu);
    CUctx_st* ctx = nullptr;
    if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  }
  if (size > (size_t{1} << 46)) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t mapped = RoundUpToPage(size);
  // Pinned memory is resident: populate now (and lock if the limit allows).
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  (void)mlock(p, mapped);  // best effort: RLIMIT_MEMLOCK may forbid it
  Lock lock(sim.mu);
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = size;
  a.mapped_size = mapped;
  a.kind = MemKind::kPinnedHost;
  a.device = CurrentContext()->device;
  sim.allocations[a.base] = a;
  *out = p;
  return CUDA_SUCCESS;
}

enum class CopyDir { kHtoD, kDtoH, kDtoD, kUnified };

size_t Span(size_t width, size_t height, size_t pitch) {
  return height <= 1 ? width : (height - 1) * pitch + width;
}

// One implementation for every copy entry point. Pageable host memory goes through the staging
// buffer on the calling thread after the stream (async) or the whole context (sync) drains,
// which is what the real driver does; pinned and device memory are copied by the stream.
CUresult Copy(CopyDir dir, CopyDesc desc, bool async, CUstream stream) {
  if (desc.height <= 1) {
    desc.height = 1;
    desc.dst_pitch = desc.src_pitch = desc.width;
  }
  if (desc.height > 1 && (desc.width > desc.dst_pitch || desc.width > desc.src_pitch)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = async ? sim.ResolveStream(stream, ctx) : ctx->legacy;
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (desc.width == 0) return CUDA_SUCCESS;
  if (desc.dst == nullptr || desc.src == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const Allocation* d = sim.Find(desc.dst, Span(desc.width, desc.height, desc.dst_pitch));
  const Allocation* s = sim.Find(desc.src, Span(desc.width, desc.height, desc.src_pitch));
  switch (dir) {
    case CopyDir::kHtoD:
      if (d == nullptr) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyDir::kDtoH:
      if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyDir::kDtoD:
      if (d == nullptr || s == nullptr) return CUDA_ERROR_INVALID_VALUE;
      break;
    case CopyDir::kUnified:
      break;
  }
  bool over_pcie = IsDeviceSide(d) != IsDeviceSide(s);
  if (d == nullptr || s == nullptr) {  // a pageable host side
    if (st->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (async) {
      sim.DrainStream(lock, st);
    } else {
      sim.DrainContext(lock, ctx);
    }
    double rate = sim.config.pageable_bytes_per_ns;
    lock.unlock();
    if (d == nullptr && s == nullptr) {
      gwsim::DirectCopy(desc);  // host to host
    } else {
      gwsim::StagedCopy(desc, over_pcie, rate);
    }
    return CUDA_SUCCESS;
  }
  WorkItem item;
  item.kind = WorkKind::kCopy;
  item.copy = desc;
  item.over_pcie = over_pcie;
  uint64_t ticket = sim.Enqueue(st, item);
  // Synchronous copies touching host memory return when done; device-to-device ones do not.
  if (!async && over_pcie && ticket != 0) sim.WaitTicket(lock, st, ticket);
  return CUDA_SUCCESS;
}

CopyDesc Linear(void* dst, const void* src, size_t bytes) {
  CopyDesc c;
  c.dst = dst;
  c.src = src;
  c.width = bytes;
  return c;
}

void* Ptr(CUdeviceptr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

CUresult Memset(CUdeviceptr dst, uint32_t value, size_t count, unsigned elem_size, bool async,
                CUstream stream) {
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = async ? sim.ResolveStream(stream, ctx) : ctx->legacy;
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (count == 0) return CUDA_SUCCESS;
  if (count > SIZE_MAX / elem_size || sim.Find(Ptr(dst), count * elem_size) == nullptr) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  WorkItem item;
  item.kind = WorkKind::kMemset;
  item.memset_dst = Ptr(dst);
  item.memset_value = value;
  item.memset_count = count;
  item.memset_elem_size = elem_size;
  sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

CUresult ParseImage(const void* image, GwsimImage* out) {
  if (image == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const void* payload = image;
  const auto* wrapper = static_cast<const GwsimFatbinWrapper*>(image);
  if (wrapper->magic == GWSIM_FATBIN_WRAPPER_MAGIC) payload = wrapper->data;
  out->any_name = true;
  if (payload == nullptr) return CUDA_SUCCESS;
  const char* p = static_cast<const char*>(payload);
  size_t magic_len = strlen(GWSIM_FATBIN_PAYLOAD_MAGIC);
  if (memcmp(p, GWSIM_FATBIN_PAYLOAD_MAGIC, magic_len) != 0) return CUDA_SUCCESS;
  out->any_name = false;
  for (p += magic_len; *p != '\0'; p += strlen(p) + 1) out->names.insert(p);
  return CUDA_SUCCESS;
}

bool ImageHas(const GwsimImage& image, const char* name) {
  return image.any_name || image.names.count(name) != 0;
}

// Reads the simulated duration: the first kernel argument, a uint64_t of nanoseconds.
uint64_t KernelDurationNs(void** params, void** extra, uint64_t max_ns) {
  uint64_t ns = 0;
  if (params != nullptr && params[0] != nullptr) {
    memcpy(&ns, params[0], sizeof(ns));
  } else if (extra != nullptr) {
    const void* buffer = nullptr;
    size_t size = 0;
    for (size_t i = 0; reinterpret_cast<uintptr_t>(extra[i]) != kLaunchParamEnd; i += 2) {
      auto key = reinterpret_cast<uintptr_t>(extra[i]);
      if (key == kLaunchParamBufferPointer) buffer = extra[i + 1];
      if (key == kLaunchParamBufferSize && extra[i + 1] != nullptr) {
        size = *static_cast<const size_t*>(extra[i + 1]);
      }
    }
    if (buffer != nullptr && size >= sizeof(ns)) memcpy(&ns, buffer, sizeof(ns));
  }
  return std::min(ns, max_ns);
}

CUresult Launch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, CUstream stream, void** params, void** extra) {
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  // A CUkernel may be passed where a CUfunction is expected (documented since CUDA 12).
  if (!sim.IsHandle(f, HandleKind::kFunction) && !sim.IsHandle(f, HandleKind::kKernel)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  WorkItem item;
  item.kind = WorkKind::kKernel;
  item.duration_ns = KernelDurationNs(params, extra, sim.config.max_kernel_ns);
  sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

}  // namespace

// ---------------------------------------------------------------- initialization, devices

GWSIM_EXPORT CUresult cuInit(unsigned int flags) {
  GWSIM_API_ENTRY("cuInit");
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (sim.config.device_count == 0) return CUDA_ERROR_NO_DEVICE;
  sim.initialized = true;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDriverGetVersion(int* version) {
  GWSIM_API_ENTRY("cuDriverGetVersion");
  if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetCount(int* count) {
  GWSIM_API_ENTRY("cuDeviceGetCount");
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *count = sim.config.device_count;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  GWSIM_API_ENTRY("cuDeviceGet");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || ordinal >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  GWSIM_API_ENTRY("cuDeviceGetName");
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  snprintf(name, static_cast<size_t>(len), "gpuwhy simulated GPU");
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  GWSIM_API_ENTRY("cuDeviceTotalMem_v2");
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = sim.config.device_mem_bytes;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- contexts

GWSIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  GWSIM_API_ENTRY("cuDevicePrimaryCtxRetain");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  gwsim::DeviceState& state = sim.devices[static_cast<size_t>(dev)];
  if (state.primary == nullptr) state.primary = sim.NewContext(dev, /*primary=*/true);
  ++state.primary_refs;
  *pctx = state.primary;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  GWSIM_API_ENTRY("cuDevicePrimaryCtxRelease_v2");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  gwsim::DeviceState& state = sim.devices[static_cast<size_t>(dev)];
  if (state.primary_refs > 0) --state.primary_refs;  // the primary context is kept
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  GWSIM_API_ENTRY("cuCtxCreate_v2");
  (void)flags;
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || dev >= sim.config.device_count) return CUDA_ERROR_INVALID_DEVICE;
  *pctx = sim.NewContext(dev, /*primary=*/false);
  CurrentContext() = *pctx;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  GWSIM_API_ENTRY("cuCtxCreate");
  return cuCtxCreate_v2(pctx, flags, dev);
}

GWSIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
  GWSIM_API_ENTRY("cuCtxDestroy_v2");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(ctx, HandleKind::kContext) || ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
  sim.DrainContext(lock, ctx);
  sim.handles.erase(ctx);
  for (CUstream_st* s : ctx->streams) {
    s->destroying = true;
    s->cv.notify_one();
  }
  if (CurrentContext() == ctx) CurrentContext() = nullptr;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  GWSIM_API_ENTRY("cuCtxSetCurrent");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (ctx != nullptr && !sim.IsHandle(ctx, HandleKind::kContext)) {
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  CurrentContext() = ctx;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  GWSIM_API_ENTRY("cuCtxGetCurrent");
  if (pctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  *pctx = CurrentContext();
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxGetDevice(CUdevice* device) {
  GWSIM_API_ENTRY("cuCtxGetDevice");
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuCtxSynchronize(void) {
  GWSIM_API_ENTRY("cuCtxSynchronize");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  sim.DrainContext(lock, ctx);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  GWSIM_API_ENTRY("cuMemGetInfo_v2");
  if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  *total_bytes = sim.config.device_mem_bytes;
  *free_bytes = *total_bytes - sim.devices[static_cast<size_t>(ctx->device)].used_bytes;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- memory

GWSIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  GWSIM_API_ENTRY("cuMemAlloc_v2");
  return AllocDevice(dptr, bytesize, MemKind::kDevice);
}

GWSIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t bytesize, unsigned int flags) {
  GWSIM_API_ENTRY("cuMemAllocManaged");
  (void)flags;
  return AllocDevice(dptr, bytesize, MemKind::kManaged);
}

GWSIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream stream) {
  GWSIM_API_ENTRY("cuMemAllocAsync");
  {
    Sim& sim = Sim::Get();
    Lock lock(sim.mu);
    CUctx_st* ctx = nullptr;
    if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
    if (sim.ResolveStream(stream, ctx) == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  }
  // The pool is not modelled: memory is usable at once, which stream order also allows.
  return AllocDevice(dptr, bytesize, MemKind::kDevice);
}

GWSIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
  GWSIM_API_ENTRY("cuMemFree_v2");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  auto valid = [&sim, dptr] {
    auto it = sim.allocations.find(static_cast<uintptr_t>(dptr));
    return it != sim.allocations.end() && IsDeviceSide(&it->second) && !it->second.free_pending;
  };
  if (!valid()) return CUDA_ERROR_INVALID_VALUE;
  sim.DrainContext(lock, ctx);  // cuMemFree synchronizes with the device, like the real one
  if (!valid()) return CUDA_ERROR_INVALID_VALUE;
  auto it = sim.allocations.find(static_cast<uintptr_t>(dptr));
  Allocation a = it->second;
  sim.allocations.erase(it);
  sim.devices[static_cast<size_t>(a.device)].used_bytes -= a.size;
  lock.unlock();
  munmap(Ptr(a.base), a.mapped_size);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
  GWSIM_API_ENTRY("cuMemFreeAsync");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  auto it = sim.allocations.find(static_cast<uintptr_t>(dptr));
  if (it == sim.allocations.end() || !IsDeviceSide(&it->second) || it->second.free_pending) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  it->second.free_pending = true;
  WorkItem item;
  item.kind = WorkKind::kFree;
  item.free_base = it->second.base;
  sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  GWSIM_API_ENTRY("cuMemAllocHost_v2");
  return AllocPinnedHost(pp, bytesize);
}

GWSIM_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int flags) {
  GWSIM_API_ENTRY("cuMemHostAlloc");
  (void)flags;
  return AllocPinnedHost(pp, bytesize);
}

GWSIM_EXPORT CUresult cuMemFreeHost(void* p) {
  GWSIM_API_ENTRY("cuMemFreeHost");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = sim.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == sim.allocations.end() || it->second.kind != MemKind::kPinnedHost) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  Allocation a = it->second;
  sim.allocations.erase(it);
  lock.unlock();
  munmap(p, a.mapped_size);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int flags) {
  GWSIM_API_ENTRY("cuMemHostRegister_v2");
  (void)flags;
  if (p == nullptr || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  if (sim.Find(p, 0) != nullptr) return CUDA_ERROR_INVALID_VALUE;  // already known
  Allocation a;
  a.base = reinterpret_cast<uintptr_t>(p);
  a.size = bytesize;
  a.kind = MemKind::kRegisteredHost;
  a.device = ctx->device;
  sim.allocations[a.base] = a;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuMemHostUnregister(void* p) {
  GWSIM_API_ENTRY("cuMemHostUnregister");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  auto it = sim.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == sim.allocations.end() || it->second.kind != MemKind::kRegisteredHost) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  sim.allocations.erase(it);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- copies and memset

GWSIM_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  GWSIM_API_ENTRY("cuMemcpy");
  return Copy(CopyDir::kUnified, Linear(Ptr(dst), Ptr(src), bytes), false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                    CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpyAsync");
  return Copy(CopyDir::kUnified, Linear(Ptr(dst), Ptr(src), bytes), true, stream);
}

GWSIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  GWSIM_API_ENTRY("cuMemcpyHtoD_v2");
  return Copy(CopyDir::kHtoD, Linear(Ptr(dst), src, bytes), false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  GWSIM_API_ENTRY("cuMemcpyDtoH_v2");
  return Copy(CopyDir::kDtoH, Linear(dst, Ptr(src), bytes), false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  GWSIM_API_ENTRY("cuMemcpyDtoD_v2");
  return Copy(CopyDir::kDtoD, Linear(Ptr(dst), Ptr(src), bytes), false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes,
                                           CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpyHtoDAsync_v2");
  return Copy(CopyDir::kHtoD, Linear(Ptr(dst), src, bytes), true, stream);
}

GWSIM_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes,
                                           CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpyDtoHAsync_v2");
  return Copy(CopyDir::kDtoH, Linear(dst, Ptr(src), bytes), true, stream);
}

GWSIM_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                           CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpyDtoDAsync_v2");
  return Copy(CopyDir::kDtoD, Linear(Ptr(dst), Ptr(src), bytes), true, stream);
}

namespace {

CUresult Copy2D(const CUDA_MEMCPY2D* c, bool async, CUstream stream) {
  if (c == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (c->srcMemoryType == CU_MEMORYTYPE_ARRAY || c->dstMemoryType == CU_MEMORYTYPE_ARRAY) {
    return CUDA_ERROR_NOT_SUPPORTED;  // CUDA arrays are not simulated
  }
  auto base = [](CUmemorytype type, const void* host, CUdeviceptr dev) -> const char* {
    return type == CU_MEMORYTYPE_HOST ? static_cast<const char*>(host)
                                      : static_cast<const char*>(Ptr(dev));
  };
  CopyDesc desc;
  desc.src =
      base(c->srcMemoryType, c->srcHost, c->srcDevice) + c->srcY * c->srcPitch + c->srcXInBytes;
  desc.dst = const_cast<char*>(base(c->dstMemoryType, c->dstHost, c->dstDevice)) +
             c->dstY * c->dstPitch + c->dstXInBytes;
  desc.width = c->WidthInBytes;
  desc.height = c->Height;
  desc.src_pitch = c->srcPitch;
  desc.dst_pitch = c->dstPitch;
  if (desc.height > 1 && (desc.src_pitch == 0 || desc.dst_pitch == 0)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  CopyDir dir = CopyDir::kUnified;
  if (c->srcMemoryType == CU_MEMORYTYPE_HOST && c->dstMemoryType == CU_MEMORYTYPE_DEVICE) {
    dir = CopyDir::kHtoD;
  } else if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE && c->dstMemoryType == CU_MEMORYTYPE_HOST) {
    dir = CopyDir::kDtoH;
  } else if (c->srcMemoryType == CU_MEMORYTYPE_DEVICE && c->dstMemoryType == CU_MEMORYTYPE_DEVICE) {
    dir = CopyDir::kDtoD;
  }
  return Copy(dir, desc, async, stream);
}

}  // namespace

GWSIM_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* copy) {
  GWSIM_API_ENTRY("cuMemcpy2D_v2");
  return Copy2D(copy, false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* copy, CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpy2DAsync_v2");
  return Copy2D(copy, true, stream);
}

GWSIM_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                   CUcontext src_ctx, size_t bytes) {
  GWSIM_API_ENTRY("cuMemcpyPeer");
  (void)dst_ctx;
  (void)src_ctx;
  return Copy(CopyDir::kDtoD, Linear(Ptr(dst), Ptr(src), bytes), false, nullptr);
}

GWSIM_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                        CUcontext src_ctx, size_t bytes, CUstream stream) {
  GWSIM_API_ENTRY("cuMemcpyPeerAsync");
  (void)dst_ctx;
  (void)src_ctx;
  return Copy(CopyDir::kDtoD, Linear(Ptr(dst), Ptr(src), bytes), true, stream);
}

GWSIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
  GWSIM_API_ENTRY("cuMemsetD8_v2");
  return Memset(dst, value, count, 1, false, nullptr);
}

GWSIM_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count,
                                      CUstream stream) {
  GWSIM_API_ENTRY("cuMemsetD8Async");
  return Memset(dst, value, count, 1, true, stream);
}

GWSIM_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
  GWSIM_API_ENTRY("cuMemsetD32_v2");
  return Memset(dst, value, count, 4, false, nullptr);
}

GWSIM_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count,
                                       CUstream stream) {
  GWSIM_API_ENTRY("cuMemsetD32Async");
  return Memset(dst, value, count, 4, true, stream);
}

// ---------------------------------------------------------------- streams

GWSIM_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  GWSIM_API_ENTRY("cuStreamCreate");
  if (stream == nullptr || (flags & ~1u) != 0) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  *stream = sim.NewStream(ctx, flags, /*legacy=*/false);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags,
                                                 int priority) {
  GWSIM_API_ENTRY("cuStreamCreateWithPriority");
  (void)priority;
  return cuStreamCreate(stream, flags);
}

GWSIM_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
  GWSIM_API_ENTRY("cuStreamDestroy_v2");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(stream, HandleKind::kStream) || stream->destroying) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  stream->destroying = true;  // its executor finishes the queue, then exits
  stream->cv.notify_one();
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  GWSIM_API_ENTRY("cuStreamSynchronize");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (st->legacy) {
    // The legacy stream is ordered after all blocking streams' earlier work.
    std::vector<std::pair<CUstream_st*, uint64_t>> tickets;
    for (CUstream_st* s : ctx->streams) {
      if (s == st || (s->flags & CU_STREAM_NON_BLOCKING) == 0) tickets.emplace_back(s, s->enqueued);
    }
    for (auto& [s, ticket] : tickets) sim.WaitTicket(lock, s, ticket);
  } else {
    sim.DrainStream(lock, st);
  }
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamQuery(CUstream stream) {
  GWSIM_API_ENTRY("cuStreamQuery");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  return st->completed >= st->enqueued ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GWSIM_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
  GWSIM_API_ENTRY("cuStreamWaitEvent");
  (void)flags;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr || !sim.IsHandle(event, HandleKind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if (event->completed < event->recorded) {
    WorkItem item;
    item.kind = WorkKind::kWaitEvent;
    item.event = event;
    item.generation = event->recorded;
    sim.Enqueue(st, item);
  }
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
  GWSIM_API_ENTRY("cuLaunchHostFunc");
  if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  WorkItem item;
  item.kind = WorkKind::kHostFunc;
  item.host_fn = fn;
  item.user_data = user_data;
  sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream stream, CUstreamCaptureMode mode) {
  GWSIM_API_ENTRY("cuStreamBeginCapture_v2");
  (void)mode;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (st->legacy) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (st->capture != nullptr) return CUDA_ERROR_INVALID_VALUE;
  st->capture = new CUgraph_st();
  sim.handles[st->capture] = HandleKind::kGraph;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuStreamEndCapture(CUstream stream, CUgraph* graph) {
  GWSIM_API_ENTRY("cuStreamEndCapture");
  if (graph == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *graph = st->capture;
  st->capture = nullptr;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- events

GWSIM_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
  GWSIM_API_ENTRY("cuEventCreate");
  if (event == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  auto* e = new CUevent_st();
  e->flags = flags;
  sim.handles[e] = HandleKind::kEvent;
  *event = e;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
  GWSIM_API_ENTRY("cuEventDestroy_v2");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(event, HandleKind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  sim.handles.erase(event);  // the struct is kept: queued waits may still reference it
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  GWSIM_API_ENTRY("cuEventRecord");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr || !sim.IsHandle(event, HandleKind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  if (st->capture != nullptr) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  WorkItem item;
  item.kind = WorkKind::kEventRecord;
  item.event = event;
  item.generation = ++event->recorded;
  sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventQuery(CUevent event) {
  GWSIM_API_ENTRY("cuEventQuery");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(event, HandleKind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  return event->completed >= event->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

GWSIM_EXPORT CUresult cuEventSynchronize(CUevent event) {
  GWSIM_API_ENTRY("cuEventSynchronize");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(event, HandleKind::kEvent)) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t target = event->recorded;
  sim.progress.wait(lock, [event, target] { return event->completed >= target; });
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  GWSIM_API_ENTRY("cuEventElapsedTime");
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(start, HandleKind::kEvent) || !sim.IsHandle(end, HandleKind::kEvent)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  if (start->recorded == 0 || end->recorded == 0) return CUDA_ERROR_INVALID_HANDLE;
  if (start->completed < start->recorded || end->completed < end->recorded) {
    return CUDA_ERROR_NOT_READY;
  }
  *ms = static_cast<float>(static_cast<double>(end->timestamp_ns - start->timestamp_ns) / 1e6);
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- modules, libraries, kernels

GWSIM_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  GWSIM_API_ENTRY("cuModuleLoadData");
  if (module == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GwsimImage parsed;
  if (CUresult r = ParseImage(image, &parsed); r != CUDA_SUCCESS) return r;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  auto* m = new CUmod_st();
  m->image = std::move(parsed);
  sim.handles[m] = HandleKind::kModule;
  *module = m;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuModuleUnload(CUmodule module) {
  GWSIM_API_ENTRY("cuModuleUnload");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(module, HandleKind::kModule)) return CUDA_ERROR_INVALID_HANDLE;
  sim.handles.erase(module);  // functions stay valid pointers (never freed)
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuModuleGetFunction(CUfunction* func, CUmodule module, const char* name) {
  GWSIM_API_ENTRY("cuModuleGetFunction");
  if (func == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  if (!sim.IsHandle(module, HandleKind::kModule)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ImageHas(module->image, name)) return CUDA_ERROR_NOT_FOUND;
  CUfunc_st*& f = module->functions[name];
  if (f == nullptr) {
    f = new CUfunc_st(name);
    sim.handles[f] = HandleKind::kFunction;
  }
  *func = f;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuLibraryLoadData(CUlibrary* library, const void* code,
                                        CUjit_option* jit_options, void** jit_option_values,
                                        unsigned int num_jit_options,
                                        CUlibraryOption* library_options,
                                        void** library_option_values,
                                        unsigned int num_library_options) {
  GWSIM_API_ENTRY("cuLibraryLoadData");
  (void)jit_options;
  (void)jit_option_values;
  (void)num_jit_options;
  (void)library_options;
  (void)library_option_values;
  (void)num_library_options;
  if (library == nullptr) return CUDA_ERROR_INVALID_VALUE;
  GwsimImage parsed;
  if (CUresult r = ParseImage(code, &parsed); r != CUDA_SUCCESS) return r;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;  // context-independent
  auto* lib = new CUlib_st();
  lib->image = std::move(parsed);
  sim.handles[lib] = HandleKind::kLibrary;
  *library = lib;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuLibraryUnload(CUlibrary library) {
  GWSIM_API_ENTRY("cuLibraryUnload");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(library, HandleKind::kLibrary)) return CUDA_ERROR_INVALID_HANDLE;
  sim.handles.erase(library);  // kernels stay valid pointers (never freed)
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuLibraryGetKernel(CUkernel* kernel, CUlibrary library, const char* name) {
  GWSIM_API_ENTRY("cuLibraryGetKernel");
  if (kernel == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.initialized) return CUDA_ERROR_NOT_INITIALIZED;
  if (!sim.IsHandle(library, HandleKind::kLibrary)) return CUDA_ERROR_INVALID_HANDLE;
  if (!ImageHas(library->image, name)) return CUDA_ERROR_NOT_FOUND;
  CUkern_st*& k = library->kernels[name];
  if (k == nullptr) {
    k = new CUkern_st(name);
    k->function = new CUfunc_st(name);
    k->function->kernel = k;
    sim.handles[k] = HandleKind::kKernel;
    sim.handles[k->function] = HandleKind::kFunction;
  }
  *kernel = k;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuKernelGetFunction(CUfunction* func, CUkernel kernel) {
  GWSIM_API_ENTRY("cuKernelGetFunction");
  if (func == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  if (!sim.IsHandle(kernel, HandleKind::kKernel)) return CUDA_ERROR_INVALID_HANDLE;
  *func = kernel->function;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuKernelGetName(const char** name, CUkernel kernel) {
  GWSIM_API_ENTRY("cuKernelGetName");
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.IsHandle(kernel, HandleKind::kKernel)) return CUDA_ERROR_INVALID_HANDLE;
  *name = kernel->name.c_str();
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuFuncGetName(const char** name, CUfunction func) {
  GWSIM_API_ENTRY("cuFuncGetName");
  if (name == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (sim.IsHandle(func, HandleKind::kFunction)) {
    *name = func->name.c_str();
    return CUDA_SUCCESS;
  }
  const void* as_kernel = func;
  if (sim.IsHandle(as_kernel, HandleKind::kKernel)) {
    *name = static_cast<const CUkern_st*>(as_kernel)->name.c_str();
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_HANDLE;
}

// ---------------------------------------------------------------- launches and graphs

GWSIM_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                     unsigned int grid_z, unsigned int block_x,
                                     unsigned int block_y, unsigned int block_z,
                                     unsigned int shared_mem_bytes, CUstream stream,
                                     void** kernel_params, void** extra) {
  GWSIM_API_ENTRY("cuLaunchKernel");
  (void)shared_mem_bytes;
  return Launch(f, grid_x, grid_y, grid_z, block_x, block_y, block_z, stream, kernel_params, extra);
}

GWSIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f,
                                       void** kernel_params, void** extra) {
  GWSIM_API_ENTRY("cuLaunchKernelEx");
  if (config == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                config->blockDimY, config->blockDimZ, config->hStream, kernel_params, extra);
}

GWSIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                  unsigned long long flags) {
  GWSIM_API_ENTRY("cuGraphInstantiateWithFlags");
  (void)flags;
  if (exec == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  if (!sim.IsHandle(graph, HandleKind::kGraph)) return CUDA_ERROR_INVALID_HANDLE;
  auto* e = new CUgraphExec_st();
  e->items = graph->items;
  sim.handles[e] = HandleKind::kGraphExec;
  *exec = e;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  GWSIM_API_ENTRY("cuGraphLaunch");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  CUctx_st* ctx = nullptr;
  if (CUresult r = CurrentCtx(sim, &ctx); r != CUDA_SUCCESS) return r;
  CUstream_st* st = sim.ResolveStream(stream, ctx);
  if (st == nullptr || !sim.IsHandle(exec, HandleKind::kGraphExec)) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (const WorkItem& item : exec->items) sim.Enqueue(st, item);
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphDestroy(CUgraph graph) {
  GWSIM_API_ENTRY("cuGraphDestroy");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.IsHandle(graph, HandleKind::kGraph)) return CUDA_ERROR_INVALID_HANDLE;
  sim.handles.erase(graph);
  delete graph;
  return CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec) {
  GWSIM_API_ENTRY("cuGraphExecDestroy");
  Sim& sim = Sim::Get();
  Lock lock(sim.mu);
  if (!sim.IsHandle(exec, HandleKind::kGraphExec)) return CUDA_ERROR_INVALID_HANDLE;
  sim.handles.erase(exec);
  delete exec;
  return CUDA_SUCCESS;
}

// ---------------------------------------------------------------- errors

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

constexpr ErrorText kErrorTexts[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const ErrorText* FindError(CUresult error) {
  for (const ErrorText& e : kErrorTexts) {
    if (e.code == error) return &e;
  }
  return nullptr;
}

}  // namespace

GWSIM_EXPORT CUresult cuGetErrorString(CUresult error, const char** str) {
  GWSIM_API_ENTRY("cuGetErrorString");
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *str = e == nullptr ? nullptr : e->text;
  return e == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

GWSIM_EXPORT CUresult cuGetErrorName(CUresult error, const char** str) {
  GWSIM_API_ENTRY("cuGetErrorName");
  if (str == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const ErrorText* e = FindError(error);
  *str = e == nullptr ? nullptr : e->name;
  return e == nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

// ---------------------------------------------------------------- simulator introspection

// Calls of `name` (an entry point of this library) so far in this process.
GWSIM_EXPORT unsigned long long gwsimDriverCallCount(const char* name) {
  GWSIM_API_ENTRY("gwsimDriverCallCount");
  return gwsim::CallCount(name);
}

__attribute__((constructor)) static void RegisterDriverCountDump() {
  gwsim::DumpCountsAtExit("libcuda");
}
