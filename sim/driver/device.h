// The simulated device behind the sim libcuda.so.1: contexts, streams with one executor thread
// each, events, graphs, modules and a memory map of every allocation the simulator handed out.
//
// Only the GPU is simulated. Device memory is host memory the simulator maps; copies really
// move bytes; a kernel occupies its stream for the duration its first argument names. All
// state is guarded by one mutex (Sim::mu); executor threads release it while they sleep or copy.
#ifndef GWSIM_DRIVER_DEVICE_H_
#define GWSIM_DRIVER_DEVICE_H_

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gwsim/cuda_driver.h"

namespace gwsim {

enum class MemKind { kDevice, kManaged, kPinnedHost, kRegisteredHost };

struct Allocation {
  uintptr_t base = 0;
  size_t size = 0;         // bytes requested
  size_t mapped_size = 0;  // bytes mapped (0 for registered host memory, which we do not own)
  MemKind kind = MemKind::kDevice;
  int device = 0;
  bool free_pending = false;  // cuMemFreeAsync queued
};

// A copy of `height` rows of `width` bytes (height 1 for a linear copy).
struct CopyDesc {
  void* dst = nullptr;
  const void* src = nullptr;
  size_t width = 0;
  size_t height = 1;
  size_t dst_pitch = 0;
  size_t src_pitch = 0;
  size_t Bytes() const { return width * height; }
};

enum class WorkKind {
  kKernel,
  kCopy,
  kMemset,
  kEventRecord,
  kWaitEvent,
  kWaitStream,
  kFree,
  kHostFunc,
};

struct WorkItem {
  WorkKind kind = WorkKind::kKernel;
  int64_t enqueue_ns = 0;      // when the host queued it (CLOCK_MONOTONIC)
  uint64_t duration_ns = 0;    // kKernel
  CopyDesc copy;               // kCopy
  bool over_pcie = false;      // kCopy: paced at the simulated PCIe bandwidth
  void* memset_dst = nullptr;  // kMemset
  uint32_t memset_value = 0;
  size_t memset_count = 0;
  unsigned memset_elem_size = 1;
  CUevent_st* event = nullptr;  // kEventRecord, kWaitEvent
  uint64_t generation = 0;
  CUstream_st* other = nullptr;  // kWaitStream
  uint64_t count = 0;
  uintptr_t free_base = 0;     // kFree
  CUhostFn host_fn = nullptr;  // kHostFunc
  void* user_data = nullptr;
};

}  // namespace gwsim

// The handle types of the driver API are these structs.
struct CUctx_st {
  int device = 0;
  bool primary = false;
  CUstream_st* legacy = nullptr;      // the NULL / legacy default stream
  std::vector<CUstream_st*> streams;  // every live stream, legacy and per-thread included
};

struct CUstream_st {
  CUctx_st* ctx = nullptr;
  unsigned flags = 0;
  bool legacy = false;
  bool destroying = false;
  bool dead = false;
  std::deque<gwsim::WorkItem> queue;
  uint64_t enqueued = 0;   // items ever queued
  uint64_t completed = 0;  // items ever finished
  // Smallest `completed` value a waiter needs: the executor notifies Sim::progress only when
  // reaching it (or on event records), so waiters are not woken once per finished kernel.
  uint64_t wake_at = UINT64_MAX;
  std::condition_variable cv;
  CUgraph_st* capture = nullptr;  // non-null while capturing into a graph
};

struct CUevent_st {
  unsigned flags = 0;
  uint64_t recorded = 0;   // generation of the latest record call
  uint64_t completed = 0;  // generation the device has reached
  int64_t timestamp_ns = 0;
};

struct CUgraph_st {
  std::vector<gwsim::WorkItem> items;
};

struct CUgraphExec_st {
  std::vector<gwsim::WorkItem> items;
};

// Which kernel names an image provides; an image the simulator cannot read provides any name.
struct GwsimImage {
  bool any_name = true;
  std::set<std::string> names;
};

struct CUkern_st;

// Function and kernel objects start the way driver 580's do where gpuwhy looks at them
// (docs/kernel-names.md): a kind word, then a pointer to the kernel's name, which is what
// cuFuncGetName / cuKernelGetName return. The rest is the simulator's own.
struct CUfunc_st {
  explicit CUfunc_st(std::string n) : name(std::move(n)) { name_ptr = name.c_str(); }
  CUfunc_st(const CUfunc_st&) = delete;
  CUfunc_st& operator=(const CUfunc_st&) = delete;
  uint64_t kind = 1;
  const char* name_ptr = nullptr;
  std::string name;
  CUkern_st* kernel = nullptr;  // null for functions from cuModuleGetFunction
};

struct CUkern_st {
  explicit CUkern_st(std::string n) : name(std::move(n)) { name_ptr = name.c_str(); }
  CUkern_st(const CUkern_st&) = delete;
  CUkern_st& operator=(const CUkern_st&) = delete;
  uint64_t kind = 2;
  const char* name_ptr = nullptr;
  std::string name;
  CUfunc_st* function = nullptr;
};

struct CUmod_st {
  GwsimImage image;
  std::map<std::string, CUfunc_st*> functions;
};

struct CUlib_st {
  GwsimImage image;
  std::map<std::string, CUkern_st*> kernels;
};

namespace gwsim {

enum class HandleKind {
  kContext,
  kStream,
  kEvent,
  kGraph,
  kGraphExec,
  kModule,
  kLibrary,
  kKernel,
  kFunction
};

struct Config {
  size_t device_mem_bytes = 16384ull << 20;  // GWSIM_DEVICE_MEM_MB
  int device_count = 1;                      // GWSIM_DEVICE_COUNT
  double pcie_bytes_per_ns = 25.0;           // GWSIM_PCIE_GBPS (GB/s == bytes/ns); 0: unpaced
  double pageable_bytes_per_ns = 10.0;       // GWSIM_PAGEABLE_GBPS: staged copies; 0: unpaced
  uint64_t max_kernel_ns = 10'000'000'000;   // GWSIM_MAX_KERNEL_NS
  size_t populate_max_bytes = 256ull << 20;  // GWSIM_POPULATE_MAX_MB
  // GWSIM_SHARED_DEVICE=1: kernels of every process on a device index take turns (device.cc).
  bool shared_device = false;
  uint64_t shared_slice_ns = 2'000'000;  // GWSIM_SHARED_DEVICE_SLICE_US: time slice (0: none)
};

struct DeviceState {
  size_t used_bytes = 0;
  CUctx_st* primary = nullptr;
  int primary_refs = 0;
};

// Process-wide simulator state. Never destroyed: executor threads may still be parked on its
// condition variables when the process exits.
class Sim {
 public:
  static Sim& Get();

  std::mutex mu;
  std::condition_variable progress;  // notified when a waited-for ticket or an event completes
  bool initialized = false;
  Config config;
  std::vector<DeviceState> devices;
  std::map<uintptr_t, Allocation> allocations;  // by base address
  std::unordered_map<const void*, HandleKind> handles;

  // --- everything below requires `mu` held (the lock is passed where a call may wait) ---
  bool IsHandle(const void* p, HandleKind kind) const;
  CUctx_st* NewContext(int device, bool primary);
  CUstream_st* NewStream(CUctx_st* ctx, unsigned flags, bool legacy);
  // Resolves a stream handle (NULL/legacy, per-thread or created) in `ctx`; null if invalid.
  CUstream_st* ResolveStream(CUstream handle, CUctx_st* ctx);
  // Queues an item (respecting legacy-stream ordering, or appending to a capture graph).
  // Returns the ticket (stream->completed value meaning "done"), 0 when captured.
  uint64_t Enqueue(CUstream_st* s, const WorkItem& item);
  void WaitTicket(std::unique_lock<std::mutex>& lock, CUstream_st* s, uint64_t ticket);
  void DrainStream(std::unique_lock<std::mutex>& lock, CUstream_st* s);
  void DrainContext(std::unique_lock<std::mutex>& lock, CUctx_st* ctx);
  // The allocation containing [p, p+len), or null.
  Allocation* Find(const void* p, size_t len);

 private:
  Sim();
};

// The calling thread's current context (driver semantics), or null.
CUctx_st*& CurrentContext();

// Executes a copy on the calling thread through a pinned staging buffer (pageable host memory),
// taking at least Bytes() / bytes_per_ns when it crosses the simulated PCIe link.
void StagedCopy(const CopyDesc& copy, bool over_pcie, double bytes_per_ns);
// Executes a copy directly (pinned or device memory).
void DirectCopy(const CopyDesc& copy);
int64_t NowNs();
void SleepUntilNs(int64_t deadline_ns);

}  // namespace gwsim

#endif  // GWSIM_DRIVER_DEVICE_H_
