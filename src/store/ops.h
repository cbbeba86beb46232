// The closed list of operations gpuwhy records. Ids are stored in database files: never
// renumber an existing op, only append. Names are what users write in SQL (`op = '...'`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gw {

enum class Layer : uint8_t { kCudaRuntime, kCudaDriver, kHost };

// X(enumerator, id, sql name, layer)
#define GW_OPS(X)                                                     \
  X(kCudaLaunchKernel, 1, "cudaLaunchKernel", kCudaRuntime)           \
  X(kCudaLaunchKernelExC, 2, "cudaLaunchKernelExC", kCudaRuntime)     \
  X(kCudaMalloc, 3, "cudaMalloc", kCudaRuntime)                       \
  X(kCudaMallocAsync, 4, "cudaMallocAsync", kCudaRuntime)             \
  X(kCudaMallocManaged, 5, "cudaMallocManaged", kCudaRuntime)         \
  X(kCudaMallocHost, 6, "cudaMallocHost", kCudaRuntime)               \
  X(kCudaHostAlloc, 7, "cudaHostAlloc", kCudaRuntime)                 \
  X(kCudaFree, 8, "cudaFree", kCudaRuntime)                           \
  X(kCudaFreeAsync, 9, "cudaFreeAsync", kCudaRuntime)                 \
  X(kCudaMemcpy, 10, "cudaMemcpy", kCudaRuntime)                      \
  X(kCudaMemcpyAsync, 11, "cudaMemcpyAsync", kCudaRuntime)            \
  X(kCudaMemcpy2D, 12, "cudaMemcpy2D", kCudaRuntime)                  \
  X(kCudaMemcpy2DAsync, 13, "cudaMemcpy2DAsync", kCudaRuntime)        \
  X(kCudaMemcpyPeer, 14, "cudaMemcpyPeer", kCudaRuntime)              \
  X(kCudaMemcpyPeerAsync, 15, "cudaMemcpyPeerAsync", kCudaRuntime)    \
  X(kCudaMemset, 16, "cudaMemset", kCudaRuntime)                      \
  X(kCudaMemsetAsync, 17, "cudaMemsetAsync", kCudaRuntime)            \
  X(kCudaStreamSync, 18, "cudaStreamSync", kCudaRuntime)              \
  X(kCudaDeviceSync, 19, "cudaDeviceSync", kCudaRuntime)              \
  X(kCudaEventSync, 20, "cudaEventSync", kCudaRuntime)                \
  X(kCudaStreamWaitEvent, 21, "cudaStreamWaitEvent", kCudaRuntime)    \
  X(kCudaGraphInstantiate, 22, "cudaGraphInstantiate", kCudaRuntime)  \
  X(kCudaGraphLaunch, 23, "cudaGraphLaunch", kCudaRuntime)            \
  X(kCudaStreamBeginCapture, 24, "cudaStreamBeginCapture", kCudaRuntime) \
  X(kCudaStreamEndCapture, 25, "cudaStreamEndCapture", kCudaRuntime)  \
  X(kGraphNode, 26, "graph_node", kCudaRuntime)                       \
  X(kGraphKernels, 27, "graph_kernels", kCudaRuntime)                 \
  X(kCuLaunchKernel, 100, "cuLaunchKernel", kCudaDriver)              \
  X(kCuLaunchKernelEx, 101, "cuLaunchKernelEx", kCudaDriver)          \
  X(kCuMemAlloc, 102, "cuMemAlloc", kCudaDriver)                      \
  X(kCuMemFree, 103, "cuMemFree", kCudaDriver)                        \
  X(kCuMemcpy, 104, "cuMemcpy", kCudaDriver)                          \
  X(kCuMemcpyAsync, 105, "cuMemcpyAsync", kCudaDriver)                \
  X(kCuMemcpyHtoD, 106, "cuMemcpyHtoD", kCudaDriver)                  \
  X(kCuMemcpyDtoH, 107, "cuMemcpyDtoH", kCudaDriver)                  \
  X(kCuMemcpyDtoD, 108, "cuMemcpyDtoD", kCudaDriver)                  \
  X(kCuMemcpyHtoDAsync, 109, "cuMemcpyHtoDAsync", kCudaDriver)        \
  X(kCuMemcpyDtoHAsync, 110, "cuMemcpyDtoHAsync", kCudaDriver)        \
  X(kCuMemcpyDtoDAsync, 111, "cuMemcpyDtoDAsync", kCudaDriver)        \
  X(kCuStreamSync, 112, "cuStreamSync", kCudaDriver)                  \
  X(kCuCtxSync, 113, "cuCtxSync", kCudaDriver)                        \
  X(kCuEventSync, 114, "cuEventSync", kCudaDriver)                    \
  X(kCuModuleGetFunction, 115, "cuModuleGetFunction", kCudaDriver)    \
  X(kCuLibraryGetKernel, 116, "cuLibraryGetKernel", kCudaDriver)      \
  X(kCuKernelGetFunction, 117, "cuKernelGetFunction", kCudaDriver)    \
  X(kNcclAllReduce, 300, "ncclAllReduce", kCudaRuntime)               \
  X(kNcclBroadcast, 301, "ncclBroadcast", kCudaRuntime)               \
  X(kNcclReduce, 302, "ncclReduce", kCudaRuntime)                     \
  X(kNcclAllGather, 303, "ncclAllGather", kCudaRuntime)               \
  X(kNcclReduceScatter, 304, "ncclReduceScatter", kCudaRuntime)       \
  X(kNcclSend, 305, "ncclSend", kCudaRuntime)                         \
  X(kNcclRecv, 306, "ncclRecv", kCudaRuntime)                         \
  X(kNcclGroupStart, 307, "ncclGroupStart", kCudaRuntime)             \
  X(kNcclGroupEnd, 308, "ncclGroupEnd", kCudaRuntime)                 \
  X(kNcclCommInit, 309, "ncclCommInitRank", kCudaRuntime)             \
  X(kNcclCommDestroy, 310, "ncclCommDestroy", kCudaRuntime)           \
  X(kSchedSwitch, 200, "sched_switch", kHost)                         \
  X(kSchedWakeup, 201, "sched_wakeup", kHost)                         \
  X(kPageFault, 202, "page_fault", kHost)                             \
  X(kMajorFault, 203, "major_fault", kHost)                           \
  X(kFileFault, 204, "file_fault", kHost)                             \
  X(kDirectReclaim, 205, "direct_reclaim", kHost)                     \
  X(kBlockIo, 206, "block_io", kHost)                                 \
  X(kProcExec, 207, "process_exec", kHost)                            \
  X(kProcFork, 208, "process_fork", kHost)                            \
  X(kProcExit, 209, "process_exit", kHost)                            \
  X(kOomKill, 210, "oom_kill", kHost)                                 \
  X(kRead, 211, "read", kHost)                                        \
  X(kWrite, 212, "write", kHost)                                      \
  X(kCpuSample, 213, "cpu_sample", kHost)                             \
  X(kLaunchCoverage, 214, "launch_coverage", kHost)

enum class Op : uint16_t {
#define GW_OP_ENUM(e, id, name, layer) e = id,
  GW_OPS(GW_OP_ENUM)
#undef GW_OP_ENUM
};

struct OpInfo {
  Op op;
  std::string_view name;
  Layer layer;
};

// Every op, in id order.
const OpInfo* AllOps(size_t* count);
std::string_view OpName(Op op);
Layer OpLayer(Op op);
std::string_view LayerName(Layer layer);
std::optional<Op> OpFromName(std::string_view name);
std::optional<Op> OpFromId(int64_t id);

// Classes analysis and capture reason about.
// Kernel launches made one by one (cudaLaunchKernel…, cuLaunchKernel…): counted in BPF one
// second in launch_duty, so their figures are estimates (store/launch_estimate.h).
bool IsLaunch(Op op);
// CUDA Graphs. The graph calls of both layers are recorded under the runtime's names (the
// driver's cuGraphLaunch is a `cudaGraphLaunch` row): a runtime graph call and the driver call it
// makes are one row. A launch made while its thread captured a stream is a `graph_node` row (a
// kernel put into a graph, not run; name = the kernel). `graph_kernels` is counted only, in
// op_seconds: the kernels graph launches ran, N per launch of a graph of N captured kernels, by
// graph (name = "graph G (N kernels: …)"); every graph launch is seen, so never scaled.
bool IsGraphKernels(Op op);
// Kernels run: launches one by one plus the kernels of graph launches (the kernel table).
bool IsKernelRun(Op op);
bool IsSync(Op op);
// NCCL (libnccl, recorded in the runtime layer: calls the application makes). Collectives:
// every rank of a communicator issues them in the same order (all-reduce, broadcast, reduce,
// all-gather, reduce-scatter); point-to-point: send/recv.
bool IsNcclCollective(Op op);
bool IsNccl(Op op);
bool IsMemcpy(Op op);
bool IsAlloc(Op op);
bool IsFree(Op op);
// Device memory allocated or freed (IsAlloc or IsFree, pinned host allocations left out).
bool IsDeviceAllocation(Op op);
// Calls that return only once the device ran out of the process's earlier work: device and
// context syncs, and cudaFree/cuMemFree, which synchronize the device before they free
// (measured on PyTorch 2.11, CUDA 13: the first cudaFree after a step waits out the step's
// kernels; docs/detections.md, "The GPU-time budget").
bool DrainsDevice(Op op);

// Memcpy direction, stored in the `kind` column of memcpy rows (cudaMemcpyKind numbering).
enum class CopyKind : int64_t { kHostToHost = 0, kHostToDevice = 1, kDeviceToHost = 2, kDeviceToDevice = 3, kDefault = 4 };
std::string_view CopyKindName(int64_t kind);

// Every op `pred` holds for, as an SQL list: quoted names ('cudaMemcpy', 'cudaMemcpyAsync'),
// the way evidence SQL shows them to users, or ids (10, 11) for queries on the tables.
enum class OpListForm { kNames, kIds };
std::string OpSqlList(bool (*pred)(Op), OpListForm form);

// Memcpy rows: `kind` = CopyKind | kCopyPinnedHost when the host buffer is known to be
// page-locked (allocated with cudaMallocHost/cudaHostAlloc); pageable copies lack the bit.
inline constexpr int64_t kCopyPinnedHost = 16;

// sched_switch `kind` column: why the task left the CPU. A sched_switch row is one off-CPU
// interval of a task: ts = when it left the CPU, duration_ns = until it ran again, runq_ns =
// the part spent runnable but waiting for a CPU (after preemption or wake-up), other_pid = the
// process (tgid) that took the CPU when it left, cpu = the CPU it left. Blocked time =
// duration_ns - runq_ns.
enum class SwitchKind : int64_t {
  kPreempted = 0,    // left while runnable (involuntary): contention
  kBlocked = 1,      // slept (futex, pipe, poll, wait): locks or waiting for other tasks
  kBlockedIo = 2,    // slept in I/O wait (task in_iowait): block I/O, read from disk
  kBlockedFault = 3, // slept in I/O wait right after a user page fault: major fault
  kBlockedGil = 4,   // slept until a thread of its own process released CPython's GIL
};

// block_io `kind`: 0 read, 1 write, 2 other (flush, discard).

}  // namespace gw
