// ABI shared by host.bpf.c and its C++ loader (host_source.cc): the tracked-set map layout,
// the ring-buffer record and the counter slots. Nothing else crosses the BPF/C++ line.
//
// Fixed-width types only; the C++ side static_asserts the record size.
#ifndef GPUWHY_SOURCES_HOST_HOST_ABI_H_
#define GPUWHY_SOURCES_HOST_HOST_ABI_H_

#ifdef __cplusplus
#include <linux/types.h>  // __u32 & co., as in vmlinux.h on the BPF side
#endif

// ---- Tracked set --------------------------------------------------------------------------
// BPF_MAP_TYPE_HASH, key __u32 tgid, value __u32 flags (GW_TRACKED_*). Shared with the CUDA
// source through bpf_map__reuse_fd: any program that declares a map with this key and value
// may read it and insert into it.
//
// Size: one entry per tracked *process* (threads share their tgid). A training job is one
// process plus its DataLoader workers (typically 2-32) plus helpers (compile workers, pin
// memory threads are threads). 16384 entries (~1.5 MiB of kernel memory) leaves room for a
// node running many jobs and for workers respawned every epoch (entries are removed when the
// process exits). When it is full, inserts fail and are counted (GW_DROP_TRACKED_FULL).
#define GW_TRACKED_MAX_ENTRIES 16384
#define GW_TRACKED_CUDA 0x1u       // maps libcudart/libcuda (seeded or found while tracing)
#define GW_TRACKED_FILTER 0x2u     // named by --pid / --comm
#define GW_TRACKED_CHILD 0x4u      // forked by a tracked process (DataLoader worker)
#define GW_TRACKED_CUDA_CALL 0x8u  // the CUDA source saw it call the CUDA API

// Competitors: BPF_MAP_TYPE_LRU_HASH tgid → first-seen ns. See host.bpf.c for the rule.
#define GW_COMPETITORS_MAX_ENTRIES 4096

// ---- Ring-buffer record -------------------------------------------------------------------
enum gw_host_record_type {
  GW_HOST_OFF_CPU = 1,     // one off-CPU interval of a tracked task or competitor
  GW_HOST_FILE_FAULT = 2,  // a user page fault of a tracked task served by filemap_fault
  GW_HOST_RECLAIM = 3,     // one direct-reclaim episode (begin → end)
  GW_HOST_BLOCK_IO = 4,    // one block request issue → complete, issued by a tracked task
  GW_HOST_EXEC = 5,        // a tracked process exec'd
  GW_HOST_FORK = 6,        // a tracked process forked a child process (not a thread)
  GW_HOST_EXIT = 7,        // the last thread of a tracked process or competitor exited
  GW_HOST_OOM = 8,         // the OOM killer picked a victim
  GW_HOST_READ = 9,        // a slow read-, write- or fsync-family syscall of a tracked task
                           // (kind: GW_SYSCALL_*)
  GW_HOST_NAME = 10,       // first sight of a competitor: its tgid and leader comm
  GW_HOST_CPU_SAMPLE = 11, // on-CPU profile: a tracked thread was running when the CPU's
                           // sampling clock fired (kind: GW_SAMPLE_*; stack_id where it was)
};

// Off-CPU `kind` (same numbering as gw::SwitchKind in store/ops.h).
#define GW_SWITCH_PREEMPTED 0
#define GW_SWITCH_BLOCKED 1
#define GW_SWITCH_BLOCKED_IO 2
#define GW_SWITCH_BLOCKED_FAULT 3
// Slept and was woken by a thread of its own process handing over CPython's GIL: the waker
// had just released it (the lock free, its last holder the waker) when it woke this task.
#define GW_SWITCH_BLOCKED_GIL 4

// CPU_SAMPLE `kind`: where the sampled thread was running.
#define GW_SAMPLE_USER 0    // in user space
#define GW_SAMPLE_KERNEL 1  // in the kernel (a system call, a page fault)

// Block I/O `kind` (same numbering as the block_io row's kind).
#define GW_BIO_READ 0
#define GW_BIO_WRITE 1
#define GW_BIO_OTHER 2

// Slow-syscall (GW_HOST_READ) `kind`.
#define GW_SYSCALL_READ 0   // read, pread64, readv, preadv, preadv2
#define GW_SYSCALL_WRITE 1  // write, pwrite64, writev, pwritev, pwritev2
#define GW_SYSCALL_SYNC 2   // fsync, fdatasync

// One record, fixed size. Field meaning per type is listed on each field.
struct gw_host_record {
  __u64 ts_ns;        // CLOCK_MONOTONIC: OFF_CPU left CPU; BLOCK_IO issue; RECLAIM/READ begin;
                      // others: when it happened
  __u64 duration_ns;  // OFF_CPU until back on CPU; BLOCK_IO issue→complete; RECLAIM; READ
  __u64 aux0;         // OFF_CPU: runq ns; BLOCK_IO: sector; FILE_FAULT: fault address;
                      // RECLAIM: pages reclaimed; READ: fd; EXEC: old pid
  __u64 aux1;         // OFF_CPU (blocked_fault): faulting address; OFF_CPU otherwise 0;
                      // BLOCK_IO: dev_t (major << 20 | minor); FILE_FAULT: page index
  __s64 value;        // BLOCK_IO: bytes; READ: return value; EXIT: exit_code (wait status);
                      // FILE_FAULT: inode number; OFF_CPU (blocked_fault): fault ns
  __u32 tgid;         // process the record is about (OOM: victim; FORK: parent)
  __u32 tid;          // thread
  __u32 other_tgid;   // OFF_CPU: who took the CPU (0 = idle); FORK: child pid; EXIT: ppid
  __s32 error;        // BLOCK_IO: blk_status_t (0 ok); others 0
  __u16 cpu;          // OFF_CPU: CPU it left; others: CPU it happened on
  __u8 type;          // enum gw_host_record_type
  __u8 kind;          // OFF_CPU: GW_SWITCH_*; BLOCK_IO: GW_BIO_*; READ: GW_SYSCALL_*
  __u32 flags;        // OFF_CPU: GW_OFF_CPU_* bits
  char comm[16];      // EXEC/FORK(child)/EXIT/NAME/OOM: comm of the process's leader
  __u64 stack_id;     // OFF_CPU with trace --stack: where the task was when it left the CPU
                      // (key into gw_stacks, sources/stacks/stacks.bpf.h); 0 = not sampled
  __u32 waker_tgid;   // OFF_CPU with GW_OFF_CPU_WOKEN: process of the task that woke it
                      // (sched_waking, in the waker's context); 0 = interrupt/softirq
  __u32 waker_tid;    // OFF_CPU with GW_OFF_CPU_WOKEN: that task's thread id; 0 = interrupt
};

// OFF_CPU flags.
#define GW_OFF_CPU_COMPETITOR 0x1u  // the task is a competitor, not tracked
#define GW_OFF_CPU_WOKEN 0x2u       // a blocked task whose wake-up was seen: waker_* are set

// ---- Counters (per-CPU arrays) -------------------------------------------------------------
// Failed ring-buffer reserves and other losses, by probe family.
enum gw_host_drop_slot {
  GW_DROP_SCHED = 0,          // off-CPU records
  GW_DROP_MEM = 1,            // file faults, reclaim, OOM
  GW_DROP_IO = 2,             // block I/O and slow reads
  GW_DROP_PROC = 3,           // exec / fork / exit / names
  GW_DROP_TRACKED_FULL = 4,   // tracked set full: a child could not be tracked
  GW_DROP_INFLIGHT_FULL = 5,  // block requests in flight map full: a request not timed
  GW_DROP_FAULT_COUNT = 6,    // per-process fault counter map full
  GW_DROP_SLOTS = 7,
};

// Records successfully submitted, same family slots as drops 0-3: lets the loader prove that a
// clean stop lost nothing (submitted == consumed).
#define GW_EMIT_SLOTS 4

#endif  // GPUWHY_SOURCES_HOST_HOST_ABI_H_
