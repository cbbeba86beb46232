// Counts syscall entries of one process: loaded, attached and triggered by `gpuwhy check`.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "sources/selftest/selftest_abi.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

const volatile __u32 target_tgid = 0;  // set before load

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct gw_selftest_hits);
} hits SEC(".maps");

SEC("raw_tracepoint/sys_enter")
int gw_selftest_sys_enter(void *ctx) {
  if ((bpf_get_current_pid_tgid() >> 32) != target_tgid) return 0;
  __u32 key = 0;
  struct gw_selftest_hits *h = bpf_map_lookup_elem(&hits, &key);
  if (h) __sync_fetch_and_add(&h->count, 1);
  return 0;
}
