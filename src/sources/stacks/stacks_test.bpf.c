// Test and benchmark programs for stacks.bpf.h: an entry uprobe that captures the stack of the
// calling thread, and a sched_switch program that captures where a process's thread stopped
// (stacks_test.cc, bench/stacks_bench.cc, tools/stacks_try.cc).
// vmlinux.h must come first: the libbpf headers use its types.
// clang-format off
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
// clang-format on

#include "sources/stacks/stacks.bpf.h"

char LICENSE[] SEC("license") = "GPL";

const volatile __u32 target_tgid = 0;  // 0: any process
const volatile __u32 capture = 1;      // 0: count only (the probe's own cost)
// Non-zero: a uprobe hit captures only when gw_stack_budget_ok(budget_interval_ns, budget_burst)
// allows it, and counts the allowed ones in [5].
const volatile __u64 budget_interval_ns = 0;
const volatile __u32 budget_burst = 0;

// [0] uprobe hits, [1] key of the last uprobe capture, [2] sched_switch hits of the process in
// [4], [3] key of its last sched_switch capture, [4] tgid to watch (set by user space), [5]
// uprobe hits the stack budget allowed.
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 6);
  __type(key, __u32);
  __type(value, __u64);
} gw_test_result SEC(".maps");

SEC("uprobe")
int gw_stacks_test_probe(struct pt_regs *ctx) {
  if (target_tgid && (bpf_get_current_pid_tgid() >> 32) != target_tgid) return 0;
  __u32 k = 0;
  __u64 *hits = bpf_map_lookup_elem(&gw_test_result, &k);
  if (hits) __sync_fetch_and_add(hits, 1);
  if (!capture) return 0;
  if (budget_interval_ns) {
    if (!gw_stack_budget_ok(budget_interval_ns, budget_burst)) return 0;
    k = 5;
    __u64 *allowed = bpf_map_lookup_elem(&gw_test_result, &k);
    if (allowed) __sync_fetch_and_add(allowed, 1);
  }
  __u64 key = gw_capture_stack(ctx, GW_STACK_SLOT_UPROBE, GW_CAPTURE_AT_FUNCTION_ENTRY, 0);
  k = 1;
  __u64 *last = bpf_map_lookup_elem(&gw_test_result, &k);
  if (last) *last = key;
  return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(gw_stacks_test_switch, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  __u32 k = 4;
  __u64 *tgid = bpf_map_lookup_elem(&gw_test_result, &k);
  // current == prev here: the user stack and the Python frames are those of the thread that
  // is leaving the CPU.
  if (!tgid || *tgid == 0 || BPF_CORE_READ(prev, tgid) != *tgid) return 0;
  k = 2;
  __u64 *hits = bpf_map_lookup_elem(&gw_test_result, &k);
  if (hits) __sync_fetch_and_add(hits, 1);
  __u64 key = gw_capture_stack(ctx, GW_STACK_SLOT_SCHED, 0, 0);
  k = 3;
  __u64 *last = bpf_map_lookup_elem(&gw_test_result, &k);
  if (last && key) *last = key;
  return 0;
}
