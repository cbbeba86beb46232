// CUDA runtime (libcudart) and driver (libcuda) probes.
//
// One program serves many functions: the uprobe's BPF cookie is the function id
// (enum gw_cuda_fn), so arguments are decoded by a switch on it.
//   gw_cuda_enter / gw_cuda_exit   uprobe + uretprobe pair: a full row with duration, return
//                                  code and arguments (syncs, memcpy, memset, malloc, free,
//                                  graphs). Entries are kept in BPF task storage on a small
//                                  stack per layer (runtime, driver): a runtime call and the
//                                  driver calls it makes on the same thread pair independently,
//                                  and so do same-layer calls through the PLT. Under the row
//                                  budget a driver call nested in a runtime call is not
//                                  recorded again, and short calls (GW_CUDA_COOKIE_AGGREGATE:
//                                  async copies, stream waits) are rows only when slow, failed
//                                  or sampled within the thread's token bucket; the others are
//                                  aggregated in call_aggs (count, sum, max, bytes, log2
//                                  histogram per process, function and second).
//   gw_cuda_count                  entry-only uprobe on calls nothing needs the duration of
//                                  (cudaMemsetAsync): counted in-kernel like launches.
//   gw_cuda_launch                 entry-only uprobe on launches: counted in-kernel per
//                                  (tgid, function, kernel handle); every Nth launch of a thread
//                                  is also emitted as a sampled row (launch_sample_every). A
//                                  driver launch nested in a runtime launch is not counted again:
//                                  it only pairs the runtime's host stub with the driver's
//                                  CUfunction (an alias record, once per stub), which is how a
//                                  runtime launch gets its name after a late attach.
//   gw_cuda_register_exit          return of __cudaRegisterFunction (entered through
//                                  gw_cuda_enter): hostFun → device name.
//   gw_cuda_name_exit              uretprobe of cuModuleGetFunction / cuLibraryGetKernel: the
//                                  out handle → name.
// Records go to one ring buffer without wake-ups; user space drains it every few ms.
//
// With trace --stack (capture_stacks), rows carry the caller's stack (native + Python,
// sources/stacks/stacks.bpf.h) within a per-thread stack budget: a call row's stack is taken
// at its return, always when the call failed or took stack_always_ns or more (the capture is
// then a small share of the call), otherwise when the thread's budget (stack_interval_ns,
// stack_burst) allows; a sampled launch row's at its entry, within the same budget. A row
// over the budget has no stack (stack_id 0) and is counted (GW_STAT_OVER_BUDGET).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>

#include "sources/cuda/cuda_abi.h"
#include "sources/stacks/stacks.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Tunables, set by user space before load.
const volatile __u32 filter_tracked = 0;       // 1: record only tgids already in `tracked`
const volatile __u32 launch_sample_every = 0;  // emit every Nth launch of a thread as a row
const volatile __u32 capture_stacks = 0;       // trace --stack: stack keys in call records
const volatile __u64 stack_always_ns = 1000000;     // calls this slow always get their stack
const volatile __u64 stack_interval_ns = 20000000;  // otherwise one stack per interval per thread
const volatile __u32 stack_burst = 10;              // and up to this many at once
// A driver launch this soon after a runtime launch on the same thread is the one the runtime
// launch makes (the runtime's own work before it is a few µs; loading a module on first use
// can take longer, and such a first launch is then counted on both layers).
const volatile __u64 launch_nest_ns = 5000000;
// The row budget (trace --row-min; all 0 with --all-rows: every call a row).
//   skip_nested_rows     a driver call made inside a runtime call on the same thread is not
//                        recorded again (the runtime call stands for both)
//   call_row_min_ns      a short call (GW_CUDA_COOKIE_AGGREGATE) this slow, or failed, is a row
//   call_sample_every    every Nth short call of a thread is a row (0: none)
//   row_tokens_per_s     outliers and samples a thread may write per second (its token
//                        bucket; the burst is one second's worth); the rest are aggregated
//   session_mono_start_ns  second 0 of the aggregates' session seconds
const volatile __u32 skip_nested_rows = 0;
const volatile __u64 call_row_min_ns = 0;
const volatile __u32 call_sample_every = 0;
const volatile __u32 row_tokens_per_s = 0;
const volatile __u64 session_mono_start_ns = 0;
// A call slower than this many times its function's recent average (on this CPU) is an
// outlier, written as a row within the token bucket.
#define OUTLIER_FACTOR 8

#define BPF_LOCAL_STORAGE_GET_F_CREATE_ 1  // uapi value; vmlinux.h has no #defines

// libbpf 1.1.2's bpf_tracing.h stops at PARM5; x86-64 passes the sixth integer argument in r9.
#ifndef PT_REGS_PARM6
#define PT_REGS_PARM6(x) ((x)->r9)
#endif

// Shared with the host source (tgid → flags); user space swaps in its fd before load.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, __u32);
  __type(value, __u32);
} tracked SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20);  // resized by user space before load
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct gw_cuda_launch_key);
  __type(value, struct gw_cuda_launch_count);
} launch_counts SEC(".maps");

// Host stubs already paired with the CUfunction their launches reach: an alias record is sent
// when a stub is first paired (or reaches a different function, e.g. on another context).
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct gw_cuda_pair_key);
  __type(value, __u64);
} launch_pairs SEC(".maps");

// Runtime launches counted, and driver launches paired with one (enum gw_cuda_nest_slot): when
// every runtime launch nests a driver launch, user space detaches the runtime launch probes and
// counts launches at the driver alone, one probe hit per launch instead of two.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_CUDA_NEST_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} launch_nesting SEC(".maps");

static __always_inline void count_nesting(__u32 slot) {
  __u64 *n = bpf_map_lookup_elem(&launch_nesting, &slot);
  if (n) *n += 1;
}

// When a launch was last counted, per CPU: a detached launch probe fires on for a moment (the
// kernel releases a closed link after a grace period), and user space extends the time it
// says launches were counted over to the last one.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u64);
} launch_last_ns SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_CUDA_DROP_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} drops SEC(".maps");

// A call in flight on one layer of one thread.
struct entry_slot {
  __u64 ts_ns;    // entry time; 0 = empty
  __u64 args[8];  // integer arguments 1-6 from registers, 7-8 from the stack where needed
  __u64 ip;       // capture_stacks: the probed function's address, for the stack at return
  __u32 fn;       // enum gw_cuda_fn being timed
  __u32 seq;      // NCCL collectives: the call's sequence number in its communicator
};

#define STACK_DEPTH 4  // power of two: indexes are masked with STACK_DEPTH - 1

// Calls in flight per layer form a small stack: a runtime call may call another exported
// runtime function through the PLT (cudaFreeAsync → cudaFree), and driver calls nest in
// runtime calls on their own stack.
struct task_state {
  struct entry_slot slot[2][STACK_DEPTH];  // [0] runtime, [1] driver
  __u32 depth[2];                          // calls in flight per layer
  __u32 tracked;                           // this thread's process is known to be recorded
  // Launches since the last sampled one, per layer: with one counter a runtime launch and the
  // driver launch nested in it would alternate, and sampling would always pick the same layer.
  __u32 launch_tick[2];
  // A stream capture begun on this thread is open (cudaStreamBeginCapture returned success, its
  // cudaStreamEndCapture has not returned): launches now are nodes of the graph being captured.
  __u32 capturing;
  // The latest runtime launch (entry-only: the driver launch it makes ends it), for pairing.
  __u64 rt_launch_handle;
  __u64 rt_launch_ts;  // 0 = none pending
  // The row budget of short calls: a token bucket (refilled at row_tokens_per_s, from
  // tokens_ts) and the count since the last sampled call.
  __u64 tokens_ts;
  __u32 tokens;
  __u32 sample_tick;
};

// Task storage rather than a hash keyed by tid: ~0.2 µs cheaper per pair (docs/facts.md), and it
// disappears with the thread.
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);  // required for local storage maps
  __type(key, int);
  __type(value, struct task_state);
} task_states SEC(".maps");

// When each process last gave the GPU work (gw_cuda_work): a sync's row carries it, so user
// space can tell a wait the GPU worked through (the sync still found work queued before the
// wait) from one it idled through. Per process, not per thread: a device sync also waits for
// work another thread queued.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);  // tgid
  __type(value, struct gw_cuda_work);
} proc_work SEC(".maps");

// Aggregates of short calls that did not become rows (gw_cuda_agg_key → gw_cuda_agg_value).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, struct gw_cuda_agg_key);
  __type(value, struct gw_cuda_agg_value);
} call_aggs SEC(".maps");

// The collectives issued per (process, communicator) (gw_nccl_seq_key → count): the sequence
// number of the next one. Reset when a communicator is made or destroyed at that handle.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, struct gw_nccl_seq_key);
  __type(value, __u64);
} nccl_seqs SEC(".maps");

// Recent average duration per function on this CPU (an exponential moving average, 1/16).
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_FN_MAX);
  __type(key, __u32);
  __type(value, __u64);
} call_avg_ns SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_CUDA_BUDGET_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} call_budget SEC(".maps");

static __always_inline void count_budget(__u32 slot) {
  __u64 *n = bpf_map_lookup_elem(&call_budget, &slot);
  if (n) *n += 1;
}

static __always_inline void count_drop(__u32 slot) {
  __u64 *n = bpf_map_lookup_elem(&drops, &slot);
  if (n) *n += 1;  // per-CPU slot: no atomic needed
}

// The entry stack a function's calls use: 1 for the driver, 0 for the runtime and NCCL (whose
// CUDA calls nest inside it).
static __always_inline __u32 layer_of(__u32 fn) {
  return fn >= GW_CUDA_DRIVER_BASE && fn < GW_NCCL_BASE ? 1 : 0;
}

static __always_inline int is_nccl_fn(__u32 fn) { return fn >= GW_NCCL_BASE && fn < GW_FN_MAX; }

static __always_inline int is_name_fn(__u32 fn) {
  return fn == GW_FN_CU_MODULE_GET_FUNCTION || fn == GW_FN_CU_LIBRARY_GET_KERNEL ||
         fn == GW_FN_CUDA_REGISTER_FUNCTION;
}

// Syncs on either layer: they give the GPU no work.
static __always_inline int is_sync_fn(__u32 fn) {
  return fn == GW_FN_CUDA_STREAM_SYNC || fn == GW_FN_CUDA_DEVICE_SYNC ||
         fn == GW_FN_CUDA_EVENT_SYNC || fn == GW_FN_CU_STREAM_SYNC || fn == GW_FN_CU_CTX_SYNC ||
         fn == GW_FN_CU_EVENT_SYNC;
}

// Allocation calls, synchronous on either layer: they give the GPU no work (the stream-ordered
// cudaMallocAsync/cudaFreeAsync are left as work). Their rows carry the last work like a sync's:
// one that shows work since a draining cudaFree ends the stretch the GPU had none of the job's.
static __always_inline int is_alloc_fn(__u32 fn) {
  return fn == GW_FN_CUDA_MALLOC || fn == GW_FN_CUDA_MALLOC_MANAGED ||
         fn == GW_FN_CUDA_MALLOC_HOST || fn == GW_FN_CUDA_HOST_ALLOC || fn == GW_FN_CUDA_FREE ||
         fn == GW_FN_CUDA_FREE_HOST || fn == GW_FN_CU_MEM_ALLOC || fn == GW_FN_CU_MEM_FREE;
}

// Process `tgid` gave the GPU work now: any CUDA call but a sync, an allocation or a name lookup.
// A copy or memset under GW_SMALL_COPY_BYTES (a loss read back with .item(), a flag) is not work
// unless more than GW_SMALL_COPIES_MAX of them came since the last work: a sync that waits far
// longer than those few can take still proves that work queued before them was running. `bytes`
// = ~0 for calls that are not copies. Not atomic: threads racing here can each keep a slightly
// older time, which only shortens what a sync proves.
static __always_inline void note_work(__u32 tgid, __u64 now, __u64 bytes) {
  struct gw_cuda_work *w = bpf_map_lookup_elem(&proc_work, &tgid);
  if (!w) {
    struct gw_cuda_work first = {.last_work_ns = now, .small_copies = 0, .pad = 0};
    bpf_map_update_elem(&proc_work, &tgid, &first, BPF_ANY);
    return;
  }
  if (bytes < GW_SMALL_COPY_BYTES && ++w->small_copies <= GW_SMALL_COPIES_MAX) return;
  if (now > w->last_work_ns) w->last_work_ns = now;
  w->small_copies = 0;
}

// When process `tgid` last gave the GPU work; 0 = none seen.
static __always_inline __u64 last_work(__u32 tgid) {
  struct gw_cuda_work *w = bpf_map_lookup_elem(&proc_work, &tgid);
  return w ? w->last_work_ns : 0;
}

static __always_inline struct task_state *current_state(int create) {
  return bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
                              create ? BPF_LOCAL_STORAGE_GET_F_CREATE_ : 0);
}

// Whether this process is recorded. Without filters every CUDA process is, and joins the
// tracked set; with --pid/--comm only processes the host source put there. A positive answer
// is cached per thread.
static __always_inline int should_record(struct task_state *t, __u32 tgid) {
  if (t->tracked) return 1;
  __u32 *flags = bpf_map_lookup_elem(&tracked, &tgid);
  if (!flags) {
    if (filter_tracked) return 0;
    __u32 value = GW_CUDA_TRACKED_CALL;
    bpf_map_update_elem(&tracked, &tgid, &value, BPF_NOEXIST);
  } else if (!(*flags & GW_CUDA_TRACKED_CALL)) {
    // Plain read-modify-write: clang 14 cannot emit a 32-bit atomic OR for the default BPF
    // CPU (v1). It runs once per thread, so racing with the host source's own flag update
    // is unlikely, and losing the bit only loses this hint, not events.
    *flags |= GW_CUDA_TRACKED_CALL;
  }
  t->tracked = 1;
  return 1;
}

static __always_inline __u64 stack_arg(struct pt_regs *ctx, int index_from_7) {
  // At function entry (or +4 past endbr64) rsp points at the return address; argument 7 is
  // the next slot.
  __u64 value = 0;
  bpf_probe_read_user(&value, sizeof value,
                      (void *)(PT_REGS_SP(ctx) + 8 + 8 * (__u64)index_from_7));
  return value;
}

static __always_inline __u32 cookie_fn(struct pt_regs *ctx) {
  return (__u32)(bpf_get_attach_cookie(ctx) & GW_CUDA_COOKIE_FN_MASK);
}

// The size of an ncclDataType_t element; 0 for a value this build does not know.
static __always_inline __u64 nccl_type_size(__u64 datatype) {
  switch (datatype) {
    case 0:   // ncclInt8
    case 1:   // ncclUint8
    case 10:  // ncclFloat8e4m3
    case 11:  // ncclFloat8e5m2
      return 1;
    case 6:  // ncclFloat16
    case 9:  // ncclBfloat16
      return 2;
    case 2:  // ncclInt32
    case 3:  // ncclUint32
    case 7:  // ncclFloat32
      return 4;
    case 4:  // ncclInt64
    case 5:  // ncclUint64
    case 8:  // ncclFloat64
      return 8;
    default:
      return 0;
  }
}

// NCCL calls: the arguments normalized into the entry slot, whatever their position
// (args[0] count, args[1] datatype, args[2] comm, args[3] stream, args[4] peer or root), and
// a collective's sequence number in its communicator. Communicator inits: args[0] the out
// pointer, args[1] nranks, args[2] rank, args[3] the hash of the ncclUniqueId (read from the
// stack: a 128-byte struct passed by value).
static __always_inline void nccl_enter(struct pt_regs *ctx, struct entry_slot *s, __u32 fn,
                                       __u32 tgid) {
  __u64 a[6] = {s->args[0], s->args[1], s->args[2], s->args[3], s->args[4], s->args[5]};
  __u64 count = a[2], datatype = a[3], comm = 0, stream = 0, peer = 0;
  int collective = 1;
  switch (fn) {
    case GW_FN_NCCL_ALL_REDUCE:
    case GW_FN_NCCL_REDUCE_SCATTER:
      comm = a[5], stream = stack_arg(ctx, 0);
      break;
    case GW_FN_NCCL_BROADCAST:
      comm = a[5], stream = stack_arg(ctx, 0), peer = a[4];
      break;
    case GW_FN_NCCL_REDUCE:
      comm = stack_arg(ctx, 0), stream = stack_arg(ctx, 1), peer = a[5];
      break;
    case GW_FN_NCCL_ALL_GATHER:
      comm = a[4], stream = a[5];
      break;
    case GW_FN_NCCL_SEND:
    case GW_FN_NCCL_RECV:
      count = a[1], datatype = a[2], peer = a[3], comm = a[4], stream = a[5];
      collective = 0;
      break;
    case GW_FN_NCCL_COMM_INIT_RANK:
    case GW_FN_NCCL_COMM_INIT_RANK_CONFIG: {
      // FNV-1a over the id, 8 bytes at a time (the id is on the caller's stack, present).
      __u64 id[GW_NCCL_UNIQUE_ID_BYTES / 8] = {};
      bpf_probe_read_user(id, sizeof id, (void *)(PT_REGS_SP(ctx) + 8));
      __u64 h = 0xcbf29ce484222325ull;
      for (int i = 0; i < GW_NCCL_UNIQUE_ID_BYTES / 8; ++i) {
        h ^= id[i];
        h *= 0x100000001b3ull;
      }
      s->args[0] = a[0], s->args[1] = a[1], s->args[2] = a[2], s->args[3] = h;
      return;
    }
    case GW_FN_NCCL_COMM_DESTROY:
    case GW_FN_NCCL_COMM_ABORT: {
      struct gw_nccl_seq_key key = {.tgid = tgid, .pad = 0, .comm = a[0]};
      bpf_map_delete_elem(&nccl_seqs, &key);
      return;
    }
    default:  // group start/end: no arguments
      return;
  }
  s->args[0] = count, s->args[1] = datatype, s->args[2] = comm, s->args[3] = stream;
  s->args[4] = peer;
  if (!collective) return;
  struct gw_nccl_seq_key key = {.tgid = tgid, .pad = 0, .comm = comm};
  __u64 *n = bpf_map_lookup_elem(&nccl_seqs, &key);
  __u64 seq = 1;
  if (n) {
    seq = *n + 1;
    *n = seq;  // a communicator is used by one thread at a time (NCCL's own rule)
  } else {
    bpf_map_update_elem(&nccl_seqs, &key, &seq, BPF_ANY);
  }
  s->seq = (__u32)seq;
}

// The size a short copy moved (for its aggregate), from the saved entry arguments; 0 for a
// stream wait. (cudaMemsetAsync is counted entry-only under the budget: it never gets here.)
static __always_inline __u64 copy_bytes(__u32 fn, __u64 *a) {
  switch (fn) {
    case GW_FN_CUDA_MEMCPY_ASYNC:
    case GW_FN_CU_MEMCPY_ASYNC:
    case GW_FN_CU_MEMCPY_HTOD_ASYNC:
    case GW_FN_CU_MEMCPY_DTOH_ASYNC:
    case GW_FN_CU_MEMCPY_DTOD_ASYNC:
      return a[2];
    case GW_FN_CUDA_MEMCPY_2D_ASYNC:
      return a[4] * a[5];
    case GW_FN_CUDA_MEMCPY_PEER_ASYNC:
      return a[4];
    default:
      return 0;
  }
}

SEC("uprobe")
int gw_cuda_enter(struct pt_regs *ctx) {
  __u64 cookie = bpf_get_attach_cookie(ctx);
  __u32 fn = (__u32)(cookie & GW_CUDA_COOKIE_FN_MASK);
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  struct task_state *t = current_state(1);
  if (!t) return 0;
  // Name lookups are kept even for filtered-out processes: a process may join the tracked
  // set later, and its launches need the names it resolved before.
  if (!is_name_fn(fn) && !should_record(t, tgid)) return 0;
  __u32 layer = layer_of(fn);
  __u32 depth = t->depth[layer];
  if (depth >= STACK_DEPTH) return 0;  // deeper nesting is not timed
  // The mask keeps the index provably in bounds for the verifier.
  struct entry_slot *s = &t->slot[layer][depth & (STACK_DEPTH - 1)];
  t->depth[layer] = depth + 1;
  s->fn = fn;
  // The stack is taken at the return, once it is known whether the call is a row and whether
  // it was slow: most calls are aggregated, and fast ones share the thread's stack budget.
  s->ip = PT_REGS_IP(ctx);
  s->args[0] = PT_REGS_PARM1(ctx);
  s->args[1] = PT_REGS_PARM2(ctx);
  s->args[2] = PT_REGS_PARM3(ctx);
  s->args[3] = PT_REGS_PARM4(ctx);
  s->args[4] = PT_REGS_PARM5(ctx);
  s->args[5] = PT_REGS_PARM6(ctx);
  if (fn == GW_FN_CUDA_MEMCPY_2D || fn == GW_FN_CUDA_MEMCPY_2D_ASYNC) {
    s->args[6] = stack_arg(ctx, 0);  // kind
    s->args[7] = fn == GW_FN_CUDA_MEMCPY_2D_ASYNC ? stack_arg(ctx, 1) : 0;  // stream
  }
  s->seq = 0;
  if (is_nccl_fn(fn)) nccl_enter(ctx, s, fn, tgid);
  __u64 now = bpf_ktime_get_ns();
  if (is_sync_fn(fn) || is_alloc_fn(fn)) {
    s->args[7] = last_work(tgid);  // the row's `src` (decode_args)
  } else if (!is_name_fn(fn)) {
    __u64 bytes = copy_bytes(fn, s->args);
    note_work(tgid, now, bytes != 0 ? bytes : ~0ull);
  }
  s->ts_ns = now;
  return 0;
}

static __always_inline int is_capture_begin(__u32 fn) {
  return fn == GW_FN_CUDA_STREAM_BEGIN_CAPTURE || fn == GW_FN_CU_STREAM_BEGIN_CAPTURE;
}

static __always_inline int is_capture_end(__u32 fn) {
  return fn == GW_FN_CUDA_STREAM_END_CAPTURE || fn == GW_FN_CU_STREAM_END_CAPTURE;
}

// Graph calls of the driver that a runtime graph call makes with the same arguments.
static __always_inline int is_graph_fn(__u32 fn) {
  return fn == GW_FN_CU_STREAM_BEGIN_CAPTURE || fn == GW_FN_CU_STREAM_END_CAPTURE ||
         fn == GW_FN_CU_GRAPH_INSTANTIATE || fn == GW_FN_CU_GRAPH_LAUNCH ||
         fn == GW_FN_CU_GRAPH_LAUNCH_PTSZ;
}

// An allocation's row `src`: the process's last work before the call (`before`, saved at entry);
// if another thread gave the GPU work during the call, that later time, after the row's ts, so
// the row proves nothing (since_work_ns NULL).
static __always_inline __u64 alloc_last_work(__u32 tgid, __u64 before) {
  __u64 now_last = last_work(tgid);
  return now_last > before ? now_last : before;
}

// Fills the argument fields of a call record from the saved entry arguments.
static __always_inline void decode_args(struct gw_cuda_call_record *r, __u32 fn, __u64 *a,
                                        __u64 seq) {
  r->kind = -1;
  switch (fn) {
    case GW_FN_CUDA_MALLOC:
    case GW_FN_CUDA_MALLOC_MANAGED:
    case GW_FN_CUDA_MALLOC_HOST:
    case GW_FN_CUDA_HOST_ALLOC:
    case GW_FN_CU_MEM_ALLOC:
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[0]);  // *ptr, set on return
      r->bytes = a[1];
      r->src = alloc_last_work(r->tgid, a[7]);
      break;
    case GW_FN_CUDA_MALLOC_ASYNC:
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[0]);
      r->bytes = a[1];
      r->stream = a[2];
      break;
    case GW_FN_CUDA_FREE:
    case GW_FN_CUDA_FREE_HOST:
    case GW_FN_CUDA_HOST_UNREGISTER:  // its src is not read
    case GW_FN_CU_MEM_FREE:
      r->dst = a[0];
      r->src = alloc_last_work(r->tgid, a[7]);
      break;
    case GW_FN_CUDA_HOST_REGISTER:
      r->dst = a[0], r->bytes = a[1];
      break;
    case GW_FN_CUDA_FREE_ASYNC:
      r->dst = a[0];
      r->stream = a[1];
      break;
    case GW_FN_CUDA_MEMCPY:
      r->dst = a[0], r->src = a[1], r->bytes = a[2], r->kind = (__s64)a[3];
      break;
    case GW_FN_CUDA_MEMCPY_ASYNC:
      r->dst = a[0], r->src = a[1], r->bytes = a[2], r->kind = (__s64)a[3];
      r->stream = a[4];
      break;
    case GW_FN_CUDA_MEMCPY_2D:
    case GW_FN_CUDA_MEMCPY_2D_ASYNC:
      r->dst = a[0], r->src = a[2], r->bytes = a[4] * a[5], r->kind = (__s64)a[6];
      r->stream = a[7];
      break;
    case GW_FN_CUDA_MEMCPY_PEER:
      r->dst = a[0], r->src = a[2], r->bytes = a[4];
      break;
    case GW_FN_CUDA_MEMCPY_PEER_ASYNC:
      r->dst = a[0], r->src = a[2], r->bytes = a[4], r->stream = a[5];
      break;
    case GW_FN_CUDA_MEMSET:
      r->dst = a[0], r->bytes = a[2];
      break;
    case GW_FN_CUDA_MEMSET_ASYNC:
      r->dst = a[0], r->bytes = a[2], r->stream = a[3];
      break;
    case GW_FN_CUDA_STREAM_SYNC:
    case GW_FN_CUDA_EVENT_SYNC:
    case GW_FN_CU_STREAM_SYNC:
    case GW_FN_CU_EVENT_SYNC:
      r->stream = a[0];
      r->src = a[7];  // the thread's last work before the call (gw_cuda_enter)
      break;
    case GW_FN_CUDA_DEVICE_SYNC:
    case GW_FN_CU_CTX_SYNC:
      r->src = a[7];
      break;
    case GW_FN_CUDA_STREAM_WAIT_EVENT:
      r->stream = a[0], r->dst = a[1];
      break;
    case GW_FN_CUDA_GRAPH_INSTANTIATE:
    case GW_FN_CUDA_GRAPH_INSTANTIATE_WITH_FLAGS:
    case GW_FN_CU_GRAPH_INSTANTIATE:
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[0]);  // *pGraphExec
      r->src = a[1];                                               // the graph
      break;
    case GW_FN_CUDA_GRAPH_LAUNCH:
    case GW_FN_CUDA_GRAPH_LAUNCH_PTSZ:
    case GW_FN_CU_GRAPH_LAUNCH:
    case GW_FN_CU_GRAPH_LAUNCH_PTSZ:
      r->dst = a[0], r->stream = a[1];
      break;
    case GW_FN_CUDA_STREAM_BEGIN_CAPTURE:
    case GW_FN_CU_STREAM_BEGIN_CAPTURE:
      r->stream = a[0];
      break;
    case GW_FN_CUDA_STREAM_END_CAPTURE:
    case GW_FN_CU_STREAM_END_CAPTURE:
      r->stream = a[0];
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[1]);  // *pGraph
      break;
    case GW_FN_CU_MEMCPY:
    case GW_FN_CU_MEMCPY_HTOD:
    case GW_FN_CU_MEMCPY_DTOH:
    case GW_FN_CU_MEMCPY_DTOD:
      r->dst = a[0], r->src = a[1], r->bytes = a[2];
      break;
    case GW_FN_CU_MEMCPY_ASYNC:
    case GW_FN_CU_MEMCPY_HTOD_ASYNC:
    case GW_FN_CU_MEMCPY_DTOH_ASYNC:
    case GW_FN_CU_MEMCPY_DTOD_ASYNC:
      r->dst = a[0], r->src = a[1], r->bytes = a[2], r->stream = a[3];
      break;
    case GW_FN_CU_MODULE_GET_FUNCTION:
    case GW_FN_CU_LIBRARY_GET_KERNEL:
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[0]);  // the out handle
      r->src = a[1];                                               // module/library
      break;
    case GW_FN_NCCL_ALL_REDUCE:
    case GW_FN_NCCL_BROADCAST:
    case GW_FN_NCCL_REDUCE:
    case GW_FN_NCCL_ALL_GATHER:
    case GW_FN_NCCL_REDUCE_SCATTER:
      r->dst = a[2], r->src = seq, r->bytes = a[0] * nccl_type_size(a[1]);
      r->kind = (__s64)a[1], r->stream = a[3];
      break;
    case GW_FN_NCCL_SEND:
    case GW_FN_NCCL_RECV:
      r->dst = a[2], r->src = a[4], r->bytes = a[0] * nccl_type_size(a[1]);
      r->kind = (__s64)a[1], r->stream = a[3];
      break;
    case GW_FN_NCCL_COMM_INIT_RANK:
    case GW_FN_NCCL_COMM_INIT_RANK_CONFIG: {
      bpf_probe_read_user(&r->dst, sizeof r->dst, (void *)a[0]);  // the new communicator
      r->src = a[3], r->bytes = a[1], r->kind = (__s64)(__s32)a[2];
      // A new communicator at this handle starts its collectives from 1.
      struct gw_nccl_seq_key key = {.tgid = r->tgid, .pad = 0, .comm = r->dst};
      bpf_map_delete_elem(&nccl_seqs, &key);
      break;
    }
    case GW_FN_NCCL_COMM_DESTROY:
    case GW_FN_NCCL_COMM_ABORT:
      r->dst = a[0];
      break;
    default:
      break;
  }
}

// The direction of a short copy, for its aggregate key: cudaMemcpyKind + 1, 0 for a call that
// is not a copy. The runtime passes the kind; the driver's function names it (cuMemcpyAsync,
// unified addressing, is "default": user space infers the direction of rows only).
static __always_inline __u16 copy_kind_key(__u32 fn, __u64 *a) {
  switch (fn) {
    case GW_FN_CUDA_MEMCPY_ASYNC:
      return a[3] <= 4 ? (__u16)a[3] + 1 : 5;
    case GW_FN_CUDA_MEMCPY_2D_ASYNC:
      return a[6] <= 4 ? (__u16)a[6] + 1 : 5;
    case GW_FN_CU_MEMCPY_HTOD_ASYNC:
      return 1 + 1;
    case GW_FN_CU_MEMCPY_DTOH_ASYNC:
      return 2 + 1;
    case GW_FN_CUDA_MEMCPY_PEER_ASYNC:
    case GW_FN_CU_MEMCPY_DTOD_ASYNC:
      return 3 + 1;
    case GW_FN_CU_MEMCPY_ASYNC:
      return 4 + 1;
    default:
      return 0;
  }
}

static __always_inline __u32 log2_bucket(__u64 v) {
  __u32 r = 0;
  if (v >= (1ull << 32)) { v >>= 32; r += 32; }
  if (v >= (1ull << 16)) { v >>= 16; r += 16; }
  if (v >= (1ull << 8)) { v >>= 8; r += 8; }
  if (v >= (1ull << 4)) { v >>= 4; r += 4; }
  if (v >= (1ull << 2)) { v >>= 2; r += 2; }
  if (v >= (1ull << 1)) r += 1;
  return r < GW_CUDA_HIST_BUCKETS ? r : GW_CUDA_HIST_BUCKETS - 1;
}

// The stack of a row under the stack budget: captured when `always` (a failed or slow call) or
// when the thread's budget allows; otherwise 0, counted as a row without its stack.
static __always_inline __u64 budgeted_stack(struct pt_regs *ctx, __u32 flags, __u64 entry_ip,
                                            int always) {
  if (always || gw_stack_budget_ok(stack_interval_ns, stack_burst)) {
    return gw_capture_stack(ctx, GW_STACK_SLOT_UPROBE, flags, entry_ip);
  }
  gw_stack_stat_add(GW_STAT_OVER_BUDGET);
  return 0;
}

// Takes one token from the thread's bucket. Returns 0 when it is empty.
static __always_inline int take_token(struct task_state *t, __u64 now) {
  __u64 refill = (now - t->tokens_ts) * row_tokens_per_s / 1000000000ull;
  if (refill > 0 || t->tokens_ts == 0) {
    __u64 tokens = t->tokens_ts == 0 ? row_tokens_per_s : t->tokens + refill;
    t->tokens = tokens > row_tokens_per_s ? row_tokens_per_s : (__u32)tokens;
    t->tokens_ts = now;
  }
  if (t->tokens == 0) return 0;
  t->tokens -= 1;
  return 1;
}

// Adds one call to its second's aggregate. Returns 0 when the map is full.
static __always_inline int aggregate_call(__u32 fn, __u64 start, __u64 duration, __u64 bytes,
                                          __u16 copy_kind) {
  __u64 since = start > session_mono_start_ns ? start - session_mono_start_ns : 0;
  struct gw_cuda_agg_key key = {.tgid = bpf_get_current_pid_tgid() >> 32,
                                .fn = (__u16)fn,
                                .copy_kind = copy_kind,
                                .sec = (__u32)(since / 1000000000ull),
                                .pad2 = 0};
  struct gw_cuda_agg_value *v = bpf_map_lookup_elem(&call_aggs, &key);
  if (!v) {
    struct gw_cuda_agg_value zero = {};
    bpf_map_update_elem(&call_aggs, &key, &zero, BPF_NOEXIST);  // may race another thread
    v = bpf_map_lookup_elem(&call_aggs, &key);
    if (!v) return 0;
  }
  __sync_fetch_and_add(&v->count, 1);
  __sync_fetch_and_add(&v->total_ns, duration);
  __sync_fetch_and_add(&v->bytes, bytes);
  __sync_fetch_and_add(&v->hist[log2_bucket(duration) & (GW_CUDA_HIST_BUCKETS - 1)], 1);
  // Not atomic: two threads racing here can lose one maximum, never a count.
  if (duration > v->max_ns) v->max_ns = duration;
  return 1;
}

// The row budget of one short call: 1 = write its row, 0 = it was aggregated.
static __always_inline int budget_row(struct task_state *t, __u32 fn, __u64 start, __u64 now,
                                      __s32 ret, __u64 *args) {
  __u64 duration = now - start;
  __u64 *avg = bpf_map_lookup_elem(&call_avg_ns, &fn);
  __u64 before = avg ? *avg : 0;
  if (avg) *avg = before == 0 ? duration : before - before / 16 + duration / 16;
  if (ret != 0 || duration >= call_row_min_ns) {
    count_budget(GW_CUDA_BUDGET_ROW_SLOW);
    return 1;
  }
  int outlier = before > 0 && duration > OUTLIER_FACTOR * before;
  int sampled = 0;
  if (call_sample_every != 0 && ++t->sample_tick >= call_sample_every) {
    t->sample_tick = 0;
    sampled = 1;
  }
  if (outlier || sampled) {
    if (take_token(t, now)) {
      count_budget(outlier ? GW_CUDA_BUDGET_ROW_OUTLIER : GW_CUDA_BUDGET_ROW_SAMPLED);
      return 1;
    }
    count_budget(GW_CUDA_BUDGET_OVER_BUDGET);
  }
  if (aggregate_call(fn, start, duration, copy_bytes(fn, args), copy_kind_key(fn, args))) {
    count_budget(GW_CUDA_BUDGET_AGGREGATED);
    return 0;
  }
  count_budget(GW_CUDA_BUDGET_AGG_FULL);
  return 1;  // never silently lost: the row is written instead
}

enum emit_policy {
  EMIT_NONE = 0,    // pop the entry only
  EMIT_ROW = 1,     // a full row
  EMIT_BUDGET = 2,  // a short call: a row only as the row budget says (budget_row)
};

// Pops the entry slot of `fn` and emits its call record as `emit` says. Returns the slot (still
// holding the entry arguments) so a caller can emit more, or NULL when there was nothing to
// pair with.
static __always_inline struct entry_slot *finish_call(struct pt_regs *ctx, __u32 fn, int emit) {
  __u64 now = bpf_ktime_get_ns();
  struct task_state *t = current_state(0);
  if (!t) return 0;
  __u32 layer = layer_of(fn);
  __u32 depth = t->depth[layer];
  if (depth == 0) return 0;  // entry not recorded (filtered out, or probe attached mid-call)
  struct entry_slot *s = &t->slot[layer][(depth - 1) & (STACK_DEPTH - 1)];
  if (s->fn != fn) {
    // The top entry lost its return (a longjmp or exception through a CUDA call): if the
    // entry below is ours, discard the stale one; otherwise this return has no entry.
    if (depth < 2) return 0;
    s = &t->slot[layer][(depth - 2) & (STACK_DEPTH - 1)];
    if (s->fn != fn) return 0;
    depth -= 1;
  }
  t->depth[layer] = depth - 1;
  if (emit == EMIT_NONE) return s;
  __u64 start = s->ts_ns;
  if (is_capture_begin(fn) && (__s32)PT_REGS_RC(ctx) == 0) t->capturing = 1;
  if (is_capture_end(fn)) t->capturing = 0;
  if (is_graph_fn(fn) && layer == 1 && t->depth[0] > 0) {
    // The driver half of a runtime graph call in flight on this thread: one graph call, one
    // row (a graph launch counted twice would count its kernels twice).
    count_budget(GW_CUDA_BUDGET_NESTED);
    return s;
  }
  if (skip_nested_rows && layer == 1 && t->depth[0] > 0) {
    // Made by the runtime call still in flight on this thread, whose row stands for both.
    count_budget(GW_CUDA_BUDGET_NESTED);
    return s;
  }
  __s32 ret = (__s32)PT_REGS_RC(ctx);
  if (emit == EMIT_BUDGET && !budget_row(t, fn, start, now, ret, s->args)) return s;
  __u64 stack_id = capture_stacks && !is_name_fn(fn)
                       ? budgeted_stack(ctx, GW_CAPTURE_AT_FUNCTION_RETURN, s->ip,
                                        ret != 0 || now - start >= stack_always_ns)
                       : 0;
  struct gw_cuda_call_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    count_drop(GW_CUDA_DROP_RESERVE);
    return s;
  }
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  r->type = GW_CUDA_RECORD_CALL;
  r->flags = 0;
  r->fn = fn;
  r->tgid = pid_tgid >> 32;
  r->tid = (__u32)pid_tgid;
  r->ret = ret;
  r->ts_ns = start;
  r->duration_ns = now - start;
  r->dst = 0;
  r->src = 0;
  r->bytes = 0;
  r->stream = 0;
  r->stack_id = stack_id;
  decode_args(r, fn, s->args, s->seq);
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  return s;
}

SEC("uretprobe")
int gw_cuda_exit(struct pt_regs *ctx) {
  __u64 cookie = bpf_get_attach_cookie(ctx);
  finish_call(ctx, (__u32)(cookie & GW_CUDA_COOKIE_FN_MASK),
              (cookie & GW_CUDA_COOKIE_AGGREGATE) ? EMIT_BUDGET : EMIT_ROW);
  return 0;
}

SEC("uretprobe")
int gw_cuda_name_exit(struct pt_regs *ctx) {
  __u32 fn = cookie_fn(ctx);
  struct entry_slot *s = finish_call(ctx, fn, EMIT_ROW);
  if (!s || PT_REGS_RC(ctx) != 0) return 0;
  __u64 out_ptr = s->args[0];
  __u64 name_ptr = s->args[2];
  struct gw_cuda_name_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    count_drop(GW_CUDA_DROP_RESERVE);
    return 0;
  }
  r->fn = fn;
  r->pad0 = 0;
  r->tgid = bpf_get_current_pid_tgid() >> 32;
  r->handle = 0;
  bpf_probe_read_user(&r->handle, sizeof r->handle, (void *)out_ptr);
  r->type = GW_CUDA_RECORD_NAME;
  r->alias_of = 0;
  if (bpf_probe_read_user_str(r->name, sizeof r->name, (void *)name_ptr) < 0) r->name[0] = 0;
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  return 0;
}

// __cudaRegisterFunction(void **fatCubinHandle, const char *hostFun, char *deviceFun,
//                        const char *deviceName, ...), entered through gw_cuda_enter. The name
// is read at return: nvcc's static constructors register kernels before anything touched the
// .rodata page holding the names, and a BPF read cannot fault a page in. By the return the
// runtime has read the string, so the page is present.
SEC("uretprobe")
int gw_cuda_register_exit(struct pt_regs *ctx) {
  struct entry_slot *s = finish_call(ctx, GW_FN_CUDA_REGISTER_FUNCTION, EMIT_NONE);
  if (!s) return 0;
  __u64 host_fun = s->args[1];
  __u64 device_name = s->args[3];
  struct gw_cuda_name_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    count_drop(GW_CUDA_DROP_RESERVE);
    return 0;
  }
  r->type = GW_CUDA_RECORD_NAME;
  r->pad0 = 0;
  r->fn = GW_FN_CUDA_REGISTER_FUNCTION;
  r->tgid = bpf_get_current_pid_tgid() >> 32;
  r->handle = host_fun;
  r->alias_of = 0;
  if (bpf_probe_read_user_str(r->name, sizeof r->name, (void *)device_name) < 0) r->name[0] = 0;
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  return 0;
}

static __always_inline int is_config_launch(__u32 fn) {
  return fn == GW_FN_CUDA_LAUNCH_KERNEL_EXC || fn == GW_FN_CUDA_LAUNCH_KERNEL_EXC_PTSZ ||
         fn == GW_FN_CU_LAUNCH_KERNEL_EX || fn == GW_FN_CU_LAUNCH_KERNEL_EX_PTSZ;
}

// Emits one sampled launch row. Returns 1 when the row was written.
static __always_inline int emit_sampled_launch(struct pt_regs *ctx, __u32 fn, __u64 handle,
                                               __u8 flags) {
  struct gw_cuda_call_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    count_drop(GW_CUDA_DROP_RESERVE);
    return 0;
  }
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  r->type = GW_CUDA_RECORD_CALL;
  r->flags = flags;
  r->fn = fn;
  r->tgid = pid_tgid >> 32;
  r->tid = (__u32)pid_tgid;
  r->ret = 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->duration_ns = 0;
  r->dst = handle;
  r->src = 0;
  r->bytes = 0;
  r->kind = -1;
  r->stream = 0;
  r->stack_id = capture_stacks ? budgeted_stack(ctx, GW_CAPTURE_AT_FUNCTION_ENTRY, 0, 0) : 0;
  if (is_config_launch(fn)) {
    // cudaLaunchConfig_t and CUlaunchConfig both hold the stream at offset 32.
    bpf_probe_read_user(&r->stream, sizeof r->stream, (void *)(PT_REGS_PARM1(ctx) + 32));
  } else if (fn >= GW_CUDA_DRIVER_BASE) {
    r->stream = stack_arg(ctx, 2);  // (f, gx, gy, gz, bx, by | bz, shmem, stream)
  } else {
    r->stream = stack_arg(ctx, 1);  // (func, grid{2 regs}, block{2 regs}, args | shmem, stream)
  }
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  return 1;
}

// Whether runtime stub `stub` of process `tgid` is known to launch driver function `function`.
static __always_inline bool paired(__u32 tgid, __u64 stub, __u64 function) {
  struct gw_cuda_pair_key key = {.tgid = tgid, .pad = 0, .stub = stub};
  __u64 *known = bpf_map_lookup_elem(&launch_pairs, &key);
  return known && *known == function;
}

// A runtime launch of host stub `stub` reached driver function `function`: tell user space
// once per stub, which then names the stub after the function.
static __always_inline void note_pair(__u32 fn, __u32 tgid, __u64 stub, __u64 function) {
  if (paired(tgid, stub, function)) return;
  struct gw_cuda_pair_key key = {.tgid = tgid, .pad = 0, .stub = stub};
  struct gw_cuda_name_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    count_drop(GW_CUDA_DROP_RESERVE);
    return;  // not remembered: the next launch of the stub tries again
  }
  bpf_map_update_elem(&launch_pairs, &key, &function, BPF_ANY);
  r->type = GW_CUDA_RECORD_ALIAS;
  r->pad0 = 0;
  r->fn = fn;
  r->tgid = tgid;
  r->handle = stub;
  r->alias_of = function;
  r->name[0] = 0;
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
}

// Adds one to an in-kernel call counter (launch_counts).
static __always_inline void count_call(struct gw_cuda_launch_key *key) {
  struct gw_cuda_launch_count *c = bpf_map_lookup_elem(&launch_counts, key);
  if (c) {
    __sync_fetch_and_add(&c->count, 1);
    return;
  }
  struct gw_cuda_launch_count one = {.count = 1};
  if (bpf_map_update_elem(&launch_counts, key, &one, BPF_NOEXIST) == 0) return;
  // Lost a race with another thread creating the entry, or the map is full.
  c = bpf_map_lookup_elem(&launch_counts, key);
  if (c) {
    __sync_fetch_and_add(&c->count, 1);
  } else {
    count_drop(GW_CUDA_DROP_LAUNCH_MAP);
  }
}

// Entry-only probe of a call whose duration and result nothing needs (cudaMemsetAsync): one
// probe hit, counted in-kernel per (process, function) like launches, every second.
SEC("uprobe")
int gw_cuda_count(struct pt_regs *ctx) {
  __u32 fn = cookie_fn(ctx);
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  struct task_state *t = current_state(1);
  if (!t || !should_record(t, tgid)) return 0;
  // cudaMemsetAsync(ptr, value, count, stream): a small one is not work (note_work).
  note_work(tgid, bpf_ktime_get_ns(), PT_REGS_PARM3(ctx));
  struct gw_cuda_launch_key key = {.tgid = tgid, .fn = (__u16)fn, .pad = 0, .handle = 0};
  count_call(&key);
  return 0;
}

SEC("uprobe")
int gw_cuda_launch(struct pt_regs *ctx) {
  __u32 fn = cookie_fn(ctx);
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  struct task_state *t = current_state(1);
  if (!t || !should_record(t, tgid)) return 0;
  // Both registers are loaded before choosing: written as `cond ? ctx->si : ctx->di` clang
  // computes a ctx pointer with a variable offset, which the verifier rejects.
  __u64 parm1 = PT_REGS_PARM1(ctx);
  __u64 parm2 = PT_REGS_PARM2(ctx);
  asm volatile("" : "+r"(parm1), "+r"(parm2));
  __u64 handle = is_config_launch(fn) ? parm2 : parm1;
  __u32 layer = fn >= GW_CUDA_DRIVER_BASE ? 1 : 0;
  __u64 now = bpf_ktime_get_ns();
  note_work(tgid, now, ~0ull);
  __u32 zero = 0;
  __u64 *last = bpf_map_lookup_elem(&launch_last_ns, &zero);
  if (last) *last = now;
  if (layer == 0) {
    t->rt_launch_handle = handle;
    t->rt_launch_ts = now;
    count_nesting(GW_CUDA_NEST_RUNTIME);
  } else if (t->rt_launch_ts != 0 &&
             (now - t->rt_launch_ts < launch_nest_ns || paired(tgid, t->rt_launch_handle, handle))) {
    // The runtime launch already counted (or sampled) this launch: the driver launch came at
    // once, or later (the thread was preempted in between) of the function that runtime stub is
    // known to launch.
    __u64 stub = t->rt_launch_handle;
    t->rt_launch_ts = 0;
    count_nesting(GW_CUDA_NEST_PAIRED);
    note_pair(fn, tgid, stub, handle);
    return 0;
  }
  if (t->capturing) {
    // A node of the graph being captured: every one is a row (a capture is a one-off), and
    // none is a launch (the graph's launches run it).
    emit_sampled_launch(ctx, fn, handle, GW_CUDA_FLAG_CAPTURED_LAUNCH);
    return 0;
  }
  if (launch_sample_every != 0 && ++t->launch_tick[layer] >= launch_sample_every) {
    t->launch_tick[layer] = 0;
    // A sampled launch is a row; the writer counts rows itself, so it is not counted here.
    if (emit_sampled_launch(ctx, fn, handle, GW_CUDA_FLAG_SAMPLED_LAUNCH)) return 0;
  }
  struct gw_cuda_launch_key key = {.tgid = tgid, .fn = (__u16)fn, .pad = 0, .handle = handle};
  count_call(&key);
  return 0;
}
