// The bare mechanism gpuwhy is measured against: a do-nothing uprobe and uretprobe.
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("uprobe")
int gw_bare_entry(struct pt_regs *ctx) { return 0; }

SEC("uretprobe")
int gw_bare_return(struct pt_regs *ctx) { return 0; }
