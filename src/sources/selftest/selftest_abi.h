// ABI shared by selftest.bpf.c and its C++ loader: the smallest program that proves BPF
// programs load, attach and fire on this kernel (used by `gpuwhy check`).
#ifndef GPUWHY_SOURCES_SELFTEST_SELFTEST_ABI_H_
#define GPUWHY_SOURCES_SELFTEST_SELFTEST_ABI_H_

#ifdef __cplusplus
#include <cstdint>
#endif

// Value of the single `hits` array slot: how often the target process entered a syscall.
struct gw_selftest_hits {
  unsigned long long count;  // syscalls entered by target_tgid since attach
};

#endif  // GPUWHY_SOURCES_SELFTEST_SELFTEST_ABI_H_
