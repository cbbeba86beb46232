// The bare mechanism gpuwhy is measured against: a do-nothing uprobe and uretprobe.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int gw_bare_entry(struct pt_regs *ctx) { return 0; }

SEC("uretprobe")
int gw_bare_return(struct pt_regs *ctx) { return 0; }

// --count: an independent tally of calls, one slot per symbol (the attach cookie), for checking
// gpuwhy's launch counts against (no pairing, no ring buffer: entries only).
struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 64);
  __type(key, __u32);
  __type(value, __u64);
} call_counts SEC(".maps");

SEC("uprobe")
int gw_count_entry(struct pt_regs *ctx) {
  __u32 slot = (__u32)bpf_get_attach_cookie(ctx);
  __u64 *n = bpf_map_lookup_elem(&call_counts, &slot);
  if (n) __sync_fetch_and_add(n, 1);
  return 0;
}

// --sched: the same hooks as gpuwhy's host source for wake-up causality, doing nothing.
SEC("tp_btf/sched_switch")
int BPF_PROG(gw_bare_switch) { return 0; }

SEC("tp_btf/sched_waking")
int BPF_PROG(gw_bare_waking) { return 0; }

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(gw_bare_irq_entry) { return 0; }

SEC("tp_btf/irq_handler_exit")
int BPF_PROG(gw_bare_irq_exit) { return 0; }

SEC("tp_btf/softirq_entry")
int BPF_PROG(gw_bare_softirq_entry) { return 0; }

SEC("tp_btf/softirq_exit")
int BPF_PROG(gw_bare_softirq_exit) { return 0; }

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(gw_bare_hrtimer_entry) { return 0; }

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(gw_bare_hrtimer_exit) { return 0; }
