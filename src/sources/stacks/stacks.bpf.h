// Stack capture for any uprobe or tracepoint program: include this file, call
// gw_capture_stack(ctx, slot) at the moment of the event, store the returned 64-bit key in the
// event record (0 = no stack). The stack itself — native return addresses plus, for watched
// CPython processes, the interpreter's frames — is deduplicated into the `gw_stacks` hash map
// under that key; user space (gw::StackRegistry) drains and symbolizes it.
//
// Include after vmlinux.h, bpf_helpers.h, bpf_core_read.h and bpf_tracing.h. Maps are defined here
// (one copy per BPF object); several objects share them by bpf_map__reuse_fd with the fds held by
// the StackRegistry (see README.md).
//
// Python frames are walked here, at the moment of the event, not later from user space: the
// running thread would have moved on. The current thread's PyThreadState is found by walking
// _PyRuntime.interpreters → threads and matching PyThreadState.thread_id (pthread_self(),
// which on x86-64 glibc is the thread's fsbase) against task->thread.fsbase; the match is
// cached per tid in an LRU map and re-validated on every use.
#ifndef GPUWHY_SOURCES_STACKS_STACKS_BPF_H_
#define GPUWHY_SOURCES_STACKS_STACKS_BPF_H_

#include "sources/stacks/stacks_abi.h"

#ifndef GW_STACKS_MAX_ENTRIES
#define GW_STACKS_MAX_ENTRIES 16384
#endif

// Scratch slots: a capture in a uprobe may be preempted by a sched_switch program on the same
// CPU (uprobe programs run with migration, not preemption, disabled), so the two contexts use
// different per-CPU slots. A busy flag detects the rarer same-slot nesting and skips.
// The on-CPU profile's perf-event program may interrupt either of them: a slot of its own.
#define GW_STACK_SLOT_UPROBE 0
#define GW_STACK_SLOT_SCHED 1
#define GW_STACK_SLOT_PROFILE 2
#define GW_STACK_SLOTS 3

struct gw_stack_scratch {
  struct gw_stack stack;
  __u8 frame[GW_PY_FRAME_READ_MAX + 8];  // one interpreter frame, read at once
  __u32 busy;
};

// Deduplicated stacks: key = hash of (tgid, native frames, Python frames).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GW_STACKS_MAX_ENTRIES);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, __u64);
  __type(value, struct gw_stack);
} gw_stacks SEC(".maps");

// The stack under construction; too large for the 512-byte BPF stack.
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_STACK_SLOTS);
  __type(key, __u32);
  __type(value, struct gw_stack_scratch);
} gw_stack_scr SEC(".maps");

// Watched CPython processes: tgid → offsets of that interpreter (filled by StackRegistry).
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096);
  __type(key, __u32);
  __type(value, struct gw_py_offsets);
} gw_py_procs SEC(".maps");

// tid → PyThreadState* of that thread (validated on use).
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} gw_py_tstate SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_STAT_COUNT);
  __type(key, __u32);
  __type(value, __u64);
} gw_stack_stats SEC(".maps");

// tid → when its stack budget is full again, for gw_stack_budget_ok(). Per BPF object (not
// shared): each object keeps its own budget.
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, __u64);
} gw_stack_last SEC(".maps");

static __always_inline void gw_stack_stat_add(__u32 which) {
  __u64 *v = bpf_map_lookup_elem(&gw_stack_stats, &which);
  if (v) *v += 1;  // per-CPU: no atomic needed
}

static __always_inline __u64 gw_read_user_u64(__u64 addr) {
  __u64 v = 0;
  if (bpf_probe_read_user(&v, sizeof v, (const void *)addr) != 0) return 0;
  return v;
}

// Finds the PyThreadState of the current thread, or 0.
static __always_inline __u64 gw_py_find_tstate(const struct gw_py_offsets *o, __u32 tid,
                                               __u64 fsbase) {
  __u64 *cached = bpf_map_lookup_elem(&gw_py_tstate, &tid);
  if (cached) {
    __u64 t = *cached;
    if (t && gw_read_user_u64(t + o->tstate_thread_id) == fsbase) {
      gw_stack_stat_add(GW_STAT_TSTATE_CACHED);
      return t;
    }
    bpf_map_delete_elem(&gw_py_tstate, &tid);  // tstate freed or tid reused
  }
  __u64 interp = gw_read_user_u64(o->runtime_addr + o->runtime_interpreters_head);
  // Constant bounds: the verifier unrolls/proves both loops; 4 × 64 tstates at most.
  for (int i = 0; i < GW_PY_MAX_INTERPRETERS && interp; i++) {
    __u64 t = gw_read_user_u64(interp + o->interp_threads_head);
    for (int j = 0; j < GW_PY_MAX_THREADS && t; j++) {
      if (gw_read_user_u64(t + o->tstate_thread_id) == fsbase) {
        bpf_map_update_elem(&gw_py_tstate, &tid, &t, BPF_ANY);
        return t;
      }
      t = gw_read_user_u64(t + o->tstate_next);
    }
    interp = gw_read_user_u64(interp + o->interp_next);
  }
  return 0;
}

// Whether the current thread has just released the GIL of its process (a watched CPython):
// the lock is free and its last holder is this thread. CPython's drop_gil() sets both, under
// the GIL's mutex, right before it signals the waiting thread, and a thread taking the GIL
// sets `locked` under the same mutex; so a wake-up the current thread makes while this holds
// is the GIL changing hands. A thread that signals anything while holding the GIL (a Python
// lock's release, queue.put) reads `locked` = 1 and is not counted.
static __always_inline int gw_py_gil_released_by_current(__u32 tgid) {
  const struct gw_py_offsets *o = bpf_map_lookup_elem(&gw_py_procs, &tgid);
  if (!o || o->gil_mode == GW_PY_GIL_UNKNOWN) return 0;
  __u64 gil = 0;
  if (o->gil_mode == GW_PY_GIL_IN_RUNTIME) {
    gil = o->runtime_addr + o->gil_offset;
  } else {
    __u64 interp = gw_read_user_u64(o->runtime_addr + o->runtime_interpreters_head);
    if (interp) gil = gw_read_user_u64(interp + o->gil_offset);
  }
  if (!gil) return 0;
  __s32 locked = 1;
  if (bpf_probe_read_user(&locked, sizeof locked, (const void *)(gil + o->gil_locked)) != 0 ||
      locked != 0) {
    return 0;
  }
  __u64 holder = gw_read_user_u64(gil + o->gil_last_holder);
  if (!holder) return 0;
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
  return fsbase != 0 && gw_read_user_u64(holder + o->tstate_thread_id) == fsbase;
}

// Reads a field of the frame buffer at a runtime offset. The mask bounds the offset for the
// verifier (the buffer has 8 spare bytes past GW_PY_FRAME_READ_MAX).
static __always_inline __u64 gw_frame_u64(const __u8 *buf, __u16 off) {
  return *(const __u64 *)(buf + (off & (GW_PY_FRAME_READ_MAX - 1)));
}
static __always_inline __u32 gw_frame_u32(const __u8 *buf, __u16 off) {
  return *(const __u32 *)(buf + (off & (GW_PY_FRAME_READ_MAX - 1)));
}
static __always_inline __u8 gw_frame_u8(const __u8 *buf, __u16 off) {
  return buf[off & (GW_PY_FRAME_READ_MAX - 1)];
}

static __always_inline void gw_py_walk(struct gw_stack_scratch *s, __u32 tgid, __u32 tid) {
  const struct gw_py_offsets *o = bpf_map_lookup_elem(&gw_py_procs, &tgid);
  if (!o) return;
  struct gw_stack *st = &s->stack;
  st->flags |= GW_STACK_PY_WALKED;
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 fsbase = BPF_CORE_READ(task, thread.fsbase);
  __u64 tstate = gw_py_find_tstate(o, tid, fsbase);
  if (!tstate) {
    st->flags |= GW_STACK_PY_NO_THREAD;
    gw_stack_stat_add(GW_STAT_PY_NO_THREAD);
    return;
  }
  __u64 frame = gw_read_user_u64(tstate + o->tstate_frame);
  if (o->cframe_current_frame != GW_PY_OFFSET_NONE && frame) {
    frame = gw_read_user_u64(frame + o->cframe_current_frame);  // 3.11/3.12: via cframe
  }
  // The frame count lives in map memory (st->py_count, read through a volatile pointer), not in
  // a register: the verifier would otherwise track every (iteration, count) pair and exceed its
  // one-million-instruction budget. Map memory reads are unknown scalars, so states converge.
  volatile __u16 *count = &st->py_count;
  *count = 0;
  for (int i = 0; i < GW_PY_MAX_WALK; i++) {
    if (!frame) break;
    __u32 size = o->frame_read_size;
    if (size == 0 || size > GW_PY_FRAME_READ_MAX) break;
    if (bpf_probe_read_user(s->frame, size, (const void *)frame) != 0) {
      st->flags |= GW_STACK_PY_READ_ERROR;
      gw_stack_stat_add(GW_STAT_PY_READ_ERROR);
      break;
    }
    __u64 code = gw_frame_u64(s->frame, o->frame_code);
    __u64 previous = gw_frame_u64(s->frame, o->frame_previous);
    __u32 n = *count;
    __u8 entry = 0;
    if (o->entry_mode == GW_PY_ENTRY_CSTACK_OWNER) {
      if (gw_frame_u8(s->frame, o->frame_entry) == GW_PY_OWNED_BY_CSTACK) {
        // Shim frame pushed by _PyEval_EvalFrameDefault: the frame above it was the entry.
        if (n > 0) st->py_entry_mask |= 1u << ((n - 1) & 31);
        frame = previous;
        continue;
      }
    } else if (o->entry_mode == GW_PY_ENTRY_IS_ENTRY) {
      entry = gw_frame_u8(s->frame, o->frame_entry);
    } else {
      entry = 1;
    }
    if (n >= GW_STACK_MAX_PY) {
      st->flags |= GW_STACK_PY_TRUNCATED;
      gw_stack_stat_add(GW_STAT_PY_TRUNCATED);
      break;
    }
    __u64 instr = o->instr_is_index ? (__u64)(__s64)(__s32)gw_frame_u32(s->frame, o->frame_instr)
                                    : gw_frame_u64(s->frame, o->frame_instr);
    // `n & (MAX-1)` keeps the index provably in bounds (n < GW_STACK_MAX_PY was checked).
    st->py[n & (GW_STACK_MAX_PY - 1)].code = code;
    st->py[n & (GW_STACK_MAX_PY - 1)].instr = instr;
    if (entry) st->py_entry_mask |= 1u << (n & 31);
    *count = n + 1;
    frame = previous;
  }
}

static __always_inline __u64 gw_mix(__u64 h, __u64 v) {
  h ^= v;
  h *= 0x100000001b3ULL;
  h ^= h >> 29;
  return h;
}

// gw_capture_stack flags.
// The program is an entry uprobe on a function (at its first instruction, or just after its
// endbr64): the frame-pointer walk would skip the immediate caller there, because the callee
// has not pushed %rbp yet; the return address at [%rsp] is taken as frame 1 instead.
#define GW_CAPTURE_AT_FUNCTION_ENTRY 1u
// The program is the return probe of a function whose entry address is `entry_ip`: the walk
// starts at the return address in the caller, and entry_ip is put in front of it, so the stack
// is the one an entry capture would have taken (the probed function innermost, then its
// caller). A return probe knows whether the call was slow or failed, so it can decide first
// whether the stack is worth its cost (gw_stack_budget_ok).
#define GW_CAPTURE_AT_FUNCTION_RETURN 2u

// Captures the current thread's stack. `ctx` is the program's context (pt_regs for uprobes,
// the tracepoint context for tp_btf/raw tracepoints); `slot` is GW_STACK_SLOT_UPROBE or
// GW_STACK_SLOT_SCHED; `flags` is 0, GW_CAPTURE_AT_FUNCTION_ENTRY or
// GW_CAPTURE_AT_FUNCTION_RETURN (uprobes only; `entry_ip` is used by the latter only).
// Returns the stack key, 0 when nothing could be captured.
static __always_inline __u64 gw_capture_stack(void *ctx, __u32 slot, __u32 flags,
                                              __u64 entry_ip) {
  struct gw_stack_scratch *s = bpf_map_lookup_elem(&gw_stack_scr, &slot);
  if (!s) return 0;
  if (s->busy) {
    gw_stack_stat_add(GW_STAT_BUSY);
    return 0;
  }
  s->busy = 1;
  struct gw_stack *st = &s->stack;
  __u64 pid_tgid = bpf_get_current_pid_tgid();
  __u32 tgid = pid_tgid >> 32;
  st->tgid = tgid;
  st->flags = 0;
  st->py_count = 0;
  st->py_entry_mask = 0;
  long bytes;
  __u32 native_count = 0;
  if (flags & GW_CAPTURE_AT_FUNCTION_ENTRY) {
    // native[1] gets the IP, native[2..] the frame-pointer walk. Kernels since ~6.12 add the
    // return address at [%rsp] themselves when a uprobe sits on a function's first
    // instruction; then native[2] is that address and user space skips native[0]. Older
    // kernels miss it: native[0] = IP and native[1] = [%rsp] put it back.
    bytes =
        bpf_get_stack(ctx, &st->native[1], sizeof(st->native) - sizeof(__u64), BPF_F_USER_STACK);
    if (bytes > 0) {
      __u64 ret = gw_read_user_u64(PT_REGS_SP((struct pt_regs *)ctx));
      if (bytes >= 2 * sizeof(__u64) && st->native[2] == ret) {
        st->flags |= GW_STACK_NATIVE_SKIP_FIRST;
      } else {
        st->native[0] = st->native[1];
        st->native[1] = ret;
      }
      bytes += sizeof(__u64);
    }
  } else if (flags & GW_CAPTURE_AT_FUNCTION_RETURN) {
    st->native[0] = entry_ip;
    bytes =
        bpf_get_stack(ctx, &st->native[1], sizeof(st->native) - sizeof(__u64), BPF_F_USER_STACK);
    if (bytes > 0) bytes += sizeof(__u64);
  } else {
    bytes = bpf_get_stack(ctx, st->native, sizeof(st->native), BPF_F_USER_STACK);
  }
  if (bytes < 0) {
    st->flags |= GW_STACK_NATIVE_ERROR;
    gw_stack_stat_add(GW_STAT_NATIVE_ERROR);
  } else {
    native_count = (__u32)bytes / sizeof(__u64);
    if (native_count > GW_STACK_MAX_NATIVE) native_count = GW_STACK_MAX_NATIVE;
  }
  st->native_count = native_count;
  gw_py_walk(s, tgid, (__u32)pid_tgid);

  __u64 h = gw_mix(0xcbf29ce484222325ULL, tgid);
  for (int i = 0; i < GW_STACK_MAX_NATIVE; i++) {
    if (i >= st->native_count) break;
    h = gw_mix(h, st->native[i]);
  }
  for (int i = 0; i < GW_STACK_MAX_PY; i++) {
    if (i >= st->py_count) break;
    h = gw_mix(h, st->py[i].code);
    h = gw_mix(h, st->py[i].instr);
  }
  h = gw_mix(h, ((__u64)st->py_entry_mask << 32) | ((__u64)st->py_count << 16) | native_count);
  if (h == 0) h = 1;  // 0 means "no stack"

  long err = bpf_map_update_elem(&gw_stacks, &h, st, BPF_NOEXIST);
  s->busy = 0;
  if (err == 0) {
    gw_stack_stat_add(GW_STAT_NEW_STACKS);
  } else if (err != -17 /* -EEXIST: seen before, deduplicated */) {
    gw_stack_stat_add(GW_STAT_MAP_FULL);
    return 0;
  }
  gw_stack_stat_add(GW_STAT_CAPTURES);
  return h;
}

// The per-thread stack budget: true when the current thread may capture now. A token bucket
// that allows `burst` captures at once and one per `interval_ns` on average, kept as one
// timestamp per thread (the generic cell rate algorithm: `tat` is when the bucket is full
// again) in this BPF object's gw_stack_last. burst 1 is plain sampling: at most one capture per
// interval. The caller counts refusals that leave a row without its stack (GW_STAT_OVER_BUDGET).
static __always_inline int gw_stack_budget_ok(__u64 interval_ns, __u32 burst) {
  __u32 tid = (__u32)bpf_get_current_pid_tgid();
  __u64 now = bpf_ktime_get_ns();
  __u64 *tat = bpf_map_lookup_elem(&gw_stack_last, &tid);
  __u64 start = tat && *tat > now ? *tat : now;
  __u64 tolerance = burst > 1 ? (__u64)(burst - 1) * interval_ns : 0;
  if (start - now > tolerance) return 0;
  __u64 next = start + interval_ns;
  if (tat) {
    *tat = next;  // this thread's entry: no other thread writes it
  } else {
    bpf_map_update_elem(&gw_stack_last, &tid, &next, BPF_ANY);
  }
  return 1;
}

#endif  // GPUWHY_SOURCES_STACKS_STACKS_BPF_H_
