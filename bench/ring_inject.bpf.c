// Synthetic CUDA call records written into a running gpuwhy's own CUDA ring buffer, to measure
// what the user-space half of capture (ring buffer → decoder → store) sustains without the
// per-call cost of uprobes in front of it. User space swaps in gpuwhy's `events` ring and
// `drops` array (bpf_map__reuse_fd) before load, so a failed reserve is counted in gpuwhy's own
// `cuda_bpf_reserve` drop counter, exactly like one in the real probes.
//
// Triggered through BPF_PROG_TEST_RUN (a raw_tp program need not be attached to run): each run
// emits `batch` records with bpf_loop.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "sources/cuda/cuda_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 target_tgid = 0;  // the records' process (the injector itself)
const volatile __u32 target_tid = 0;

__u32 batch = 0;          // records per run, set by user space before each run
__u64 emitted = 0;        // records submitted
__u64 reserve_failed = 0;  // records lost (also counted in gpuwhy's drops map)

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 4096);  // replaced by gpuwhy's ring before load
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_CUDA_DROP_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} drops SEC(".maps");

static long emit_one(__u32 index, void *ctx) {
  struct gw_cuda_call_record *r = bpf_ringbuf_reserve(&events, sizeof *r, 0);
  if (!r) {
    __u32 slot = GW_CUDA_DROP_RESERVE;
    __u64 *n = bpf_map_lookup_elem(&drops, &slot);
    if (n) *n += 1;
    __sync_fetch_and_add(&reserve_failed, 1);
    return 0;
  }
  // A driver stream sync as the real exit probe writes it: a full row with duration and
  // return code.
  r->type = GW_CUDA_RECORD_CALL;
  r->flags = 0;
  r->fn = GW_FN_CU_STREAM_SYNC;
  r->tgid = target_tgid;
  r->tid = target_tid;
  r->ret = 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->duration_ns = 1000 + (index & 1023);
  r->dst = 0;
  r->src = 0;
  r->bytes = 0;
  r->kind = -1;
  r->stream = 0;
  r->stack_id = 0;
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);
  __sync_fetch_and_add(&emitted, 1);
  return 0;
}

SEC("raw_tp")
int gw_ring_inject(void *ctx) {
  bpf_loop(batch, emit_one, (void *)0, 0);
  return 0;
}
