// ABI shared by cuda.bpf.c and its C++ loader (cuda_source.cc): function ids, attach cookies,
// ring-buffer records and map layouts. Fixed-width types only; nothing else crosses the line.
// The C++ side static_asserts every size.
#ifndef GPUWHY_SOURCES_CUDA_CUDA_ABI_H_
#define GPUWHY_SOURCES_CUDA_CUDA_ABI_H_

#ifdef __cplusplus
#include <linux/types.h>  // __u8 … __s64, the kernel's fixed-width types
#endif

// Every probed function has an id; the uprobe's BPF cookie carries it, so one BPF program
// serves many functions. Ids below GW_CUDA_DRIVER_BASE are CUDA runtime (libcudart) calls,
// ids from it on are CUDA driver (libcuda) calls: the layer picks the per-thread entry slot, so
// a runtime call and the driver calls it makes pair independently.
enum gw_cuda_fn {
  GW_FN_NONE = 0,
  // Runtime.
  GW_FN_CUDA_LAUNCH_KERNEL = 1,         // (func, grid, block, args, shmem, stream)
  GW_FN_CUDA_LAUNCH_KERNEL_PTSZ = 2,    // same, per-thread default stream
  GW_FN_CUDA_LAUNCH_KERNEL_EXC = 3,     // (config*, func, args)
  GW_FN_CUDA_LAUNCH_KERNEL_EXC_PTSZ = 4,
  GW_FN_CUDA_MALLOC = 5,                // (void** ptr, size)
  GW_FN_CUDA_MALLOC_ASYNC = 6,          // (void** ptr, size, stream)
  GW_FN_CUDA_MALLOC_MANAGED = 7,        // (void** ptr, size, flags)
  GW_FN_CUDA_MALLOC_HOST = 8,           // (void** ptr, size): pinned host memory
  GW_FN_CUDA_HOST_ALLOC = 9,            // (void** ptr, size, flags): pinned host memory
  GW_FN_CUDA_FREE = 10,                 // (ptr)
  GW_FN_CUDA_FREE_ASYNC = 11,           // (ptr, stream)
  GW_FN_CUDA_FREE_HOST = 12,            // (ptr): ends a pinned range; no row of its own
  GW_FN_CUDA_MEMCPY = 13,               // (dst, src, count, kind)
  GW_FN_CUDA_MEMCPY_ASYNC = 14,         // (dst, src, count, kind, stream)
  GW_FN_CUDA_MEMCPY_2D = 15,            // (dst, dpitch, src, spitch, width, height, kind)
  GW_FN_CUDA_MEMCPY_2D_ASYNC = 16,      // (... , kind, stream)
  GW_FN_CUDA_MEMCPY_PEER = 17,          // (dst, dst_dev, src, src_dev, count)
  GW_FN_CUDA_MEMCPY_PEER_ASYNC = 18,    // (dst, dst_dev, src, src_dev, count, stream)
  GW_FN_CUDA_MEMSET = 19,               // (ptr, value, count)
  GW_FN_CUDA_MEMSET_ASYNC = 20,         // (ptr, value, count, stream)
  GW_FN_CUDA_STREAM_SYNC = 21,          // (stream)
  GW_FN_CUDA_DEVICE_SYNC = 22,          // ()
  GW_FN_CUDA_EVENT_SYNC = 23,           // (event)
  GW_FN_CUDA_STREAM_WAIT_EVENT = 24,    // (stream, event, flags)
  GW_FN_CUDA_GRAPH_INSTANTIATE = 25,    // (exec*, graph, flags)
  GW_FN_CUDA_GRAPH_INSTANTIATE_WITH_FLAGS = 26,
  GW_FN_CUDA_GRAPH_LAUNCH = 27,         // (exec, stream)
  GW_FN_CUDA_REGISTER_FUNCTION = 28,    // (fatbin**, hostFun, deviceFun, deviceName, ...)
  GW_FN_CUDA_HOST_REGISTER = 29,        // (ptr, size, flags): starts a pinned range; no row
  GW_FN_CUDA_HOST_UNREGISTER = 30,      // (ptr): ends it; no row
  GW_FN_CUDA_STREAM_BEGIN_CAPTURE = 31,  // (stream, mode): the thread's launches become nodes
  GW_FN_CUDA_STREAM_END_CAPTURE = 32,    // (stream, graph*): *graph read at return
  GW_FN_CUDA_GRAPH_LAUNCH_PTSZ = 33,     // as cudaGraphLaunch, per-thread default stream
  GW_CUDA_DRIVER_BASE = 64,
  // Driver.
  GW_FN_CU_LAUNCH_KERNEL = 64,          // (f, gx, gy, gz, bx, by, bz, shmem, stream, ...)
  GW_FN_CU_LAUNCH_KERNEL_EX = 65,       // (config*, f, params, extra)
  GW_FN_CU_MEM_ALLOC = 66,              // (CUdeviceptr* ptr, size)
  GW_FN_CU_MEM_FREE = 67,               // (ptr)
  GW_FN_CU_MEMCPY = 68,                 // (dst, src, count)
  GW_FN_CU_MEMCPY_ASYNC = 69,           // (dst, src, count, stream)
  GW_FN_CU_MEMCPY_HTOD = 70,            // (dst_device, src_host, count)
  GW_FN_CU_MEMCPY_DTOH = 71,            // (dst_host, src_device, count)
  GW_FN_CU_MEMCPY_DTOD = 72,            // (dst_device, src_device, count)
  GW_FN_CU_MEMCPY_HTOD_ASYNC = 73,      // (dst_device, src_host, count, stream)
  GW_FN_CU_MEMCPY_DTOH_ASYNC = 74,
  GW_FN_CU_MEMCPY_DTOD_ASYNC = 75,
  GW_FN_CU_STREAM_SYNC = 76,            // (stream)
  GW_FN_CU_CTX_SYNC = 77,               // ()
  GW_FN_CU_EVENT_SYNC = 78,             // (event)
  GW_FN_CU_MODULE_GET_FUNCTION = 79,    // (CUfunction* out, module, name)
  GW_FN_CU_LIBRARY_GET_KERNEL = 80,     // (CUkernel* out, library, name)
  GW_FN_CU_KERNEL_GET_FUNCTION = 81,    // (CUfunction* out, kernel); no longer probed (the
                                        // CUfunction's object names it: driver_names.h)
  GW_FN_CU_LAUNCH_KERNEL_PTSZ = 82,     // as cuLaunchKernel, per-thread default stream
  GW_FN_CU_LAUNCH_KERNEL_EX_PTSZ = 83,
  GW_FN_CU_STREAM_BEGIN_CAPTURE = 84,   // cuStreamBeginCapture_v2 (stream, mode)
  GW_FN_CU_STREAM_END_CAPTURE = 85,     // (stream, graph*)
  GW_FN_CU_GRAPH_INSTANTIATE = 86,      // cuGraphInstantiateWithFlags (exec*, graph, flags)
  GW_FN_CU_GRAPH_LAUNCH = 87,           // (exec, stream)
  GW_FN_CU_GRAPH_LAUNCH_PTSZ = 88,
  // NCCL (libnccl.so.2). Timed on the runtime layer's entry stack: NCCL is called by the
  // application, like the runtime, and the CUDA calls it makes nest inside it.
  GW_NCCL_BASE = 96,
  GW_FN_NCCL_ALL_REDUCE = 96,      // (send, recv, count, datatype, op, comm | stream)
  GW_FN_NCCL_BROADCAST = 97,       // (send, recv, count, datatype, root, comm | stream)
  GW_FN_NCCL_REDUCE = 98,          // (send, recv, count, datatype, op, root | comm, stream)
  GW_FN_NCCL_ALL_GATHER = 99,      // (send, recv, sendcount, datatype, comm, stream)
  GW_FN_NCCL_REDUCE_SCATTER = 100, // (send, recv, recvcount, datatype, op, comm | stream)
  GW_FN_NCCL_SEND = 101,           // (send, count, datatype, peer, comm, stream)
  GW_FN_NCCL_RECV = 102,           // (recv, count, datatype, peer, comm, stream)
  GW_FN_NCCL_GROUP_START = 103,    // ()
  GW_FN_NCCL_GROUP_END = 104,      // ()
  GW_FN_NCCL_COMM_INIT_RANK = 105,  // (comm*, nranks, ncclUniqueId by value (stack), rank)
  GW_FN_NCCL_COMM_INIT_RANK_CONFIG = 106,  // (comm*, nranks, id (stack), rank, config)
  GW_FN_NCCL_COMM_DESTROY = 107,   // (comm)
  GW_FN_NCCL_COMM_ABORT = 108,     // (comm)
  GW_FN_MAX = 128,
};

// The bytes of an ncclUniqueId (passed by value: in memory, on the stack, on x86-64).
#define GW_NCCL_UNIQUE_ID_BYTES 128

// Key of the per-communicator collective sequence numbers (nccl_seqs): every rank issues a
// communicator's collectives in the same order, so the Nth collective of a communicator is
// the same operation on every rank.
struct gw_nccl_seq_key {
  __u32 tgid;
  __u32 pad;   // zero
  __u64 comm;  // ncclComm_t of that process
};

// A probe's BPF cookie: the function id in the low 16 bits, policy flags above.
#define GW_CUDA_COOKIE_FN_MASK 0xffffull
// gw_cuda_exit: the call is a short, frequent one (async copies, stream waits, graph
// launches): it becomes a full row only when slow, failed or sampled (within the thread's row
// budget); otherwise it is aggregated in-kernel (call_aggs), per (process, function, second).
#define GW_CUDA_COOKIE_AGGREGATE (1ull << 32)

// A sync's row carries when its process last gave the GPU work (gw_cuda_call_record.src). A copy
// or memset smaller than GW_SMALL_COPY_BYTES is not counted as work, up to GW_SMALL_COPIES_MAX
// of them in a row: a few such copies take microseconds, so a sync that waits much longer still
// found work queued before them (docs/schema.md, since_work_ns).
#define GW_SMALL_COPY_BYTES (64u * 1024u)
#define GW_SMALL_COPIES_MAX 4

// Value of the per-process map of when a process last gave the GPU work (proc_work, by tgid).
struct gw_cuda_work {
  __u64 last_work_ns;  // bpf_ktime_get_ns
  __u32 small_copies;  // small copies since (not counted as work)
  __u32 pad;           // zero
};

// Ring-buffer record types (first byte of every record).
enum gw_cuda_record_type {
  GW_CUDA_RECORD_CALL = 1,   // struct gw_cuda_call_record
  GW_CUDA_RECORD_NAME = 2,   // struct gw_cuda_name_record: handle is called name
  GW_CUDA_RECORD_ALIAS = 3,  // struct gw_cuda_name_record: handle takes alias_of's name
};

// gw_cuda_call_record.flags
#define GW_CUDA_FLAG_SAMPLED_LAUNCH 1  // a launch sampled from the counted path (no return)
// A launch made while its thread was capturing a stream (between a successful
// cudaStreamBeginCapture and its cudaStreamEndCapture): a node of the graph being built, not a
// kernel run now. Every such launch is a row; none is counted as a launch.
#define GW_CUDA_FLAG_CAPTURED_LAUNCH 2

// One finished call (entry + return), or one sampled launch (entry only). Which fields a
// function fills is listed per field; unused fields are 0.
// NCCL rows use the same record: collectives and point-to-point calls carry dst = the
// communicator handle, src = the collective's sequence number in its communicator (1, 2, …;
// for ncclSend/ncclRecv the peer rank), bytes = count × the datatype's size, kind = the
// ncclDataType_t, stream = the stream. Communicator inits carry dst = the new communicator
// (read at return), src = a 64-bit FNV-1a hash of the 128-byte ncclUniqueId (the same on
// every rank of the communicator), bytes = nranks, kind = rank. Destroy/abort: dst = comm.
// Syncs (stream, device, context, event) carry src = when the calling process last gave the GPU
// work before the call (bpf_ktime_get_ns; 0 = none seen since the probes attached): the latest
// of any of its threads, since a device sync also waits for the others' work.
struct gw_cuda_call_record {
  __u8 type;         // GW_CUDA_RECORD_CALL
  __u8 flags;        // GW_CUDA_FLAG_*
  __u16 fn;          // enum gw_cuda_fn
  __u32 tgid;        // process
  __u32 tid;         // thread
  __s32 ret;         // return value (cudaError_t / CUresult); 0 for sampled launches
  __u64 ts_ns;       // entry time, bpf_ktime_get_ns (CLOCK_MONOTONIC)
  __u64 duration_ns; // return time - entry time; 0 for sampled launches
  __u64 dst;         // memcpy/memset destination, malloc result (*out at return), free
                     // pointer, launch function handle, graph exec (launch, instantiate's
                     // *out), captured graph (end capture's *out), name-lookup out value
  __u64 src;         // memcpy source; the graph an instantiation made its exec from; a sync's
                     // process's last work (see above)
  __u64 bytes;       // memcpy/memset count (2D: width*height), malloc size
  __s64 kind;        // runtime memcpy cudaMemcpyKind; -1 where the function has none
  __u64 stream;      // stream argument (async calls, syncs, launches), event for event syncs
  __u64 stack_id;    // trace --stack: key into the shared gw_stacks map (stacks.bpf.h); 0 = none
};

#define GW_CUDA_NAME_MAX 488

// A kernel handle's name: from __cudaRegisterFunction (hostFun → deviceName),
// cuModuleGetFunction / cuLibraryGetKernel (out handle → name), or an alias from a runtime
// launch and the driver launch nested in it (host stub → the CUfunction it reached).
struct gw_cuda_name_record {
  __u8 type;       // GW_CUDA_RECORD_NAME or GW_CUDA_RECORD_ALIAS
  __u8 pad0;       // zero
  __u16 fn;        // enum gw_cuda_fn that produced it
  __u32 tgid;      // process the handle belongs to
  __u64 handle;    // hostFun, CUfunction or CUkernel
  __u64 alias_of;  // ALIAS: the CUfunction whose name `handle` (a host stub) takes; 0 for NAME
  char name[GW_CUDA_NAME_MAX];  // NAME: NUL-terminated, truncated to fit
};

// Key of the in-kernel launch counters: one entry per (process, function, kernel handle).
struct gw_cuda_launch_key {
  __u32 tgid;    // process
  __u16 fn;      // launch function id
  __u16 pad;     // zero
  __u64 handle;  // hostFun / CUfunction launched
};

// Key of the launch_pairs map: a host stub of a process that runtime launches pass.
struct gw_cuda_pair_key {
  __u32 tgid;
  __u32 pad;   // zero
  __u64 stub;  // hostFun of cudaLaunchKernel*
};

// Value of the launch counters: launches not recorded as sampled rows, cumulative since
// the entry was created (user space diffs successive reads).
struct gw_cuda_launch_count {
  __u64 count;
};

// Key of the in-kernel aggregates of short calls (call_aggs): one entry per (process,
// function, copy direction, session second of the call's entry). User space reads and deletes
// seconds that are over.
struct gw_cuda_agg_key {
  __u32 tgid;
  __u16 fn;
  __u16 copy_kind;  // a copy's direction: cudaMemcpyKind + 1 (1 HtoH ... 5 default); 0 otherwise
  __u32 sec;   // session second of the entry (session_mono_start_ns = second 0)
  __u32 pad2;  // zero
};

#define GW_CUDA_HIST_BUCKETS 32  // log2 buckets: [2^i, 2^(i+1)) ns; bucket 0 also holds 0

// Calls of one key that did not become rows.
struct gw_cuda_agg_value {
  __u64 count;
  __u64 total_ns;
  __u64 max_ns;
  __u64 bytes;  // copy sizes summed (0 for calls without a size)
  __u64 hist[GW_CUDA_HIST_BUCKETS];
};

// Slots of the per-CPU `call_budget` array: what became of the calls the row budget judged.
enum gw_cuda_budget_slot {
  GW_CUDA_BUDGET_ROW_SLOW = 0,      // a row: slower than call_row_min_ns, or failed
  GW_CUDA_BUDGET_ROW_OUTLIER = 1,   // a row: far slower than the function's recent calls
  GW_CUDA_BUDGET_ROW_SAMPLED = 2,   // a row: every call_sample_every-th call of the thread
  GW_CUDA_BUDGET_AGGREGATED = 3,    // no row: counted in call_aggs
  GW_CUDA_BUDGET_OVER_BUDGET = 4,   // an outlier or sample the thread's token bucket refused
  GW_CUDA_BUDGET_AGG_FULL = 5,      // call_aggs was full: written as a row instead
  GW_CUDA_BUDGET_NESTED = 6,        // a driver call inside a runtime call: not recorded again
  GW_CUDA_BUDGET_SLOTS = 7,
};

// Slots of the per-CPU `launch_nesting` array.
enum gw_cuda_nest_slot {
  GW_CUDA_NEST_RUNTIME = 0,  // runtime launches of tracked processes
  GW_CUDA_NEST_PAIRED = 1,   // driver launches made by one of them (not counted again)
  GW_CUDA_NEST_SLOTS = 2,
};

// Slots of the per-CPU `drops` array.
enum gw_cuda_drop_slot {
  GW_CUDA_DROP_RESERVE = 0,     // ring-buffer reserve failed: a record was lost
  GW_CUDA_DROP_LAUNCH_MAP = 1,  // launch counter map full: a launch went uncounted
  GW_CUDA_DROP_SLOTS = 2,
};

// Flag the CUDA source sets in the shared tracked map (tgid → flags) for a process it saw call
// the CUDA API. Same value as GW_TRACKED_CUDA_CALL in sources/host/host_abi.h, which owns the
// map's flag space.
#define GW_CUDA_TRACKED_CALL 0x8u

#endif  // GPUWHY_SOURCES_CUDA_CUDA_ABI_H_
