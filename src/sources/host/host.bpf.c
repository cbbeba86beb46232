// Host kernel events for gpuwhy: off-CPU intervals of tracked tasks split into run-queue wait
// and blocked time, competitors, page faults, direct reclaim, block I/O, slow reads, process
// lifecycle and OOM kills. Owns the tracked set (tgid → flags) that the CUDA source reuses.
//
// Every program is tp_btf (BTF raw tracepoints): no tracefs needed, direct pointer access to
// the tracepoint's arguments. Records go to one ring buffer, submitted without wake-up; the
// loader drains it every few ms. Every failed reserve is counted in `drops`.
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "sources/host/host_abi.h"
#include "sources/stacks/stacks.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// ---- Tunables (set before load) ---------------------------------------------------------------
// A blocked-in-I/O-wait switch this soon after a user page fault of the same task (with no
// syscall in between) is classified as a fault wait (GW_SWITCH_BLOCKED_FAULT).
const volatile __u64 fault_io_window_ns = 5000000;
// Rule 2 of the competitor rule (see add_competitor): minimum run-queue wait of the tracked
// task before the task that ran ahead of it counts as a competitor.
const volatile __u64 competitor_min_runq_ns = 100000;
// Reads of tracked tasks are reported from this duration up; 0 disables the syscall probes'
// work (they still run, and return after one lookup).
const volatile __u64 read_threshold_ns = 1000000;
// The tracer's own process: never a competitor (its drain thread wakes every millisecond).
const volatile __u32 self_tgid = 0;
// trace --stack: a tracked task leaving the CPU records its stack, at most once per thread
// per stack_sample_ns (1 s / trace --stack-rate; a capture costs a few µs, 6-10 on a PyTorch
// thread; sched_switch can fire thousands of times a second).
const volatile __u32 capture_stacks = 0;
const volatile __u64 stack_sample_ns = 20000000;
// With the stack maps shared (the on-CPU profile or --stack): a blocked tracked task woken by
// a thread of its own process that has just released CPython's GIL is GW_SWITCH_BLOCKED_GIL.
const volatile __u32 detect_gil = 0;

// ---- Maps ------------------------------------------------------------------------------------
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GW_TRACKED_MAX_ENTRIES);
  __type(key, __u32);    // tgid
  __type(value, __u32);  // GW_TRACKED_* flags
} tracked SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, GW_COMPETITORS_MAX_ENTRIES);
  __type(key, __u32);    // tgid
  __type(value, __u64);  // first seen, CLOCK_MONOTONIC ns
} competitors SEC(".maps");

// Per-task bookkeeping. Task storage instead of a hash keyed by tid: cheaper on the hot
// sched_switch path (docs/facts.md: +291 ns vs +675 ns per switch) and freed with the task.
struct task_state {
  __u64 off_ts;      // when the task left the CPU; 0 = not being timed
  __u64 wake_ts;     // when a blocked task became runnable again; 0 = not yet
  __u64 fault_ts;    // last user page fault; cleared by a syscall entry
  __u64 fault_addr;  // its address
  __u64 reclaim_ts;  // direct reclaim began
  __u64 read_ts;     // a read-family syscall began; 0 = none in flight
  __u64 read_fd;
  __u8 read_kind;    // GW_SYSCALL_* of the syscall in flight
  __u32 other_tgid;  // who took the CPU when it left
  __u32 switch_fault;  // the pending interval is a fault wait: fault_ts/addr below apply
  __u64 switch_fault_ts;
  __u64 switch_fault_addr;
  __u64 stack_id;    // capture_stacks: where the task left the CPU (0 = not sampled)
  __u32 waker_tgid;  // who woke the blocked task (sched_waking), valid when woken
  __u32 waker_tid;   // 0 with woken set: woken from interrupt/softirq context
  __u8 woken;        // sched_waking was seen for the pending interval
  __u16 cpu;
  __u8 kind;         // GW_SWITCH_*
  __u8 competitor;   // the interval belongs to a competitor, not a tracked task
  __u8 gil;          // woken by a GIL hand-off (detect_gil): the record's kind becomes GIL
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);  // required for local storage maps
  __type(key, int);
  __type(value, struct task_state);
} task_states SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_RINGBUF);
  __uint(max_entries, 16 << 20);  // resized by the loader before load
} events SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_DROP_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} drops SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, GW_EMIT_SLOTS);
  __type(key, __u32);
  __type(value, __u64);
} emitted SEC(".maps");

// Block requests in flight, issued by tracked tasks: request address → who and when.
struct inflight_io {
  __u64 issue_ts;
  __u64 bytes;
  __u32 tgid;
  __u32 tid;
  __u16 cpu;
  __u16 pad[3];
};

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 8192);
  __type(key, __u64);
  __type(value, struct inflight_io);
} inflight SEC(".maps");

// User page faults per tracked process (cumulative); the loader turns them into per-second
// counts.
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, GW_TRACKED_MAX_ENTRIES);
  __type(key, __u32);
  __type(value, __u64);
} fault_counts SEC(".maps");

// ---- Helpers ---------------------------------------------------------------------------------
static __always_inline void count_slot(void *map, __u32 slot) {
  __u64 *v = bpf_map_lookup_elem(map, &slot);
  if (v) *v += 1;  // per-CPU slot: no atomics needed
}

static __always_inline bool is_tracked(__u32 tgid) {
  return bpf_map_lookup_elem(&tracked, &tgid) != NULL;
}

static __always_inline struct gw_host_record *reserve_record(__u32 family, __u8 type) {
  struct gw_host_record *r = bpf_ringbuf_reserve(&events, sizeof(*r), 0);
  if (!r) {
    count_slot(&drops, family);
    return NULL;
  }
  __builtin_memset(r, 0, sizeof(*r));
  r->type = type;
  r->cpu = (__u16)bpf_get_smp_processor_id();
  return r;
}

static __always_inline void submit_record(struct gw_host_record *r, __u32 family) {
  bpf_ringbuf_submit(r, BPF_RB_NO_WAKEUP);  // the loader polls every few ms
  count_slot(&emitted, family);
}

static __always_inline void leader_comm(struct task_struct *t, char *comm) {
  struct task_struct *leader = BPF_CORE_READ(t, group_leader);
  bpf_probe_read_kernel_str(comm, 16, &leader->comm);
}

// The competitor rule. A task that is not tracked becomes a competitor when
//   1. it takes the CPU from a tracked task that was preempted (still runnable), or
//   2. it was the task running on the CPU right before a tracked task that had waited at least
//      competitor_min_runq_ns on the run queue got that CPU (it ran while the tracked task
//      waited).
// The idle task and gpuwhy itself never compete. Competitors live in an LRU map; from then on
// their own preempted off-CPU intervals are recorded too (flagged; see gw_sched_switch), so
// the brief's "who is stealing CPU" query lists them by name with their counts. The first
// sight emits a NAME record so even a short-lived competitor gets a name.
static __always_inline void add_competitor(struct task_struct *t, __u64 now) {
  __u32 tgid = BPF_CORE_READ(t, tgid);
  if (tgid == 0 || tgid == self_tgid || is_tracked(tgid)) return;
  if (bpf_map_lookup_elem(&competitors, &tgid)) return;
  if (bpf_map_update_elem(&competitors, &tgid, &now, BPF_NOEXIST) != 0) return;
  struct gw_host_record *r = reserve_record(GW_DROP_PROC, GW_HOST_NAME);
  if (!r) return;
  r->ts_ns = now;
  r->tgid = tgid;
  r->tid = BPF_CORE_READ(t, pid);
  leader_comm(t, r->comm);
  submit_record(r, GW_DROP_PROC);
}

// ---- Scheduler -------------------------------------------------------------------------------
SEC("tp_btf/sched_switch")
int BPF_PROG(gw_sched_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
             unsigned int prev_state) {
  __u64 now = bpf_ktime_get_ns();
  __u32 cpu = bpf_get_smp_processor_id();
  __u32 prev_tgid = prev->tgid;
  __u32 next_tgid = next->tgid;

  // prev leaves the CPU: start an off-CPU interval if it is tracked or a competitor.
  if (prev->pid != 0) {
    bool prev_tracked = is_tracked(prev_tgid);
    bool prev_competitor = !prev_tracked && bpf_map_lookup_elem(&competitors, &prev_tgid);
    // TASK_RUNNING is 0: a task switched out while still runnable was preempted.
    bool preempted = preempt || prev_state == 0;
    // A competitor's voluntary sleep says nothing about CPU contention (a kworker idling for
    // seconds, a shell waiting for its child): only its preempted intervals are recorded, so
    // its rows measure how much it was itself fighting for a CPU.
    if (prev_tracked || (prev_competitor && preempted)) {
      struct task_state *st =
          bpf_task_storage_get(&task_states, prev, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
      if (st) {
        __u8 kind = GW_SWITCH_PREEMPTED;
        st->switch_fault = 0;
        if (!preempted) {
          kind = GW_SWITCH_BLOCKED;
          if (BPF_CORE_READ_BITFIELD(prev, in_iowait)) {
            kind = GW_SWITCH_BLOCKED_IO;
            if (st->fault_ts && now - st->fault_ts < fault_io_window_ns) {
              kind = GW_SWITCH_BLOCKED_FAULT;
              st->switch_fault = 1;
              st->switch_fault_ts = st->fault_ts;
              st->switch_fault_addr = st->fault_addr;
              st->fault_ts = 0;  // one fault, one fault wait
            }
          }
        }
        st->off_ts = now;
        st->wake_ts = 0;
        st->woken = 0;
        st->gil = 0;
        st->other_tgid = next_tgid;
        st->cpu = (__u16)cpu;
        st->kind = kind;
        st->competitor = prev_competitor;
        // current == prev here: the user stack is the task's own, where it stopped.
        st->stack_id = 0;
        if (capture_stacks && prev_tracked && gw_stack_budget_ok(stack_sample_ns, 1)) {
          st->stack_id = gw_capture_stack(ctx, GW_STACK_SLOT_SCHED, 0, 0);
        }
        if (prev_tracked && preempted && next->pid != 0) add_competitor(next, now);
      }
    }
  }

  // next gets the CPU: close its interval, one record per interval.
  struct task_state *st = bpf_task_storage_get(&task_states, next, 0, 0);
  if (st && st->off_ts) {
    __u64 duration = now - st->off_ts;
    __u64 runq = 0;
    if (st->kind == GW_SWITCH_PREEMPTED) {
      runq = duration;
    } else if (st->wake_ts) {
      runq = now - st->wake_ts;
    }
    struct gw_host_record *r = reserve_record(GW_DROP_SCHED, GW_HOST_OFF_CPU);
    if (r) {
      r->ts_ns = st->off_ts;
      r->duration_ns = duration;
      r->aux0 = runq;
      r->tgid = next_tgid;
      r->tid = next->pid;
      r->other_tgid = st->other_tgid;
      r->cpu = st->cpu;
      r->kind = st->gil && st->kind == GW_SWITCH_BLOCKED ? GW_SWITCH_BLOCKED_GIL : st->kind;
      r->flags = st->competitor;
      if (st->woken) {
        r->flags |= GW_OFF_CPU_WOKEN;
        r->waker_tgid = st->waker_tgid;
        r->waker_tid = st->waker_tid;
      }
      r->stack_id = st->stack_id;
      if (st->switch_fault) {
        r->aux1 = st->switch_fault_addr;
        r->value = (__s64)st->switch_fault_ts;
      }
      submit_record(r, GW_DROP_SCHED);
    }
    if (!st->competitor && runq >= competitor_min_runq_ns && prev->pid != 0) {
      add_competitor(prev, now);
    }
    st->off_ts = 0;
    st->wake_ts = 0;
    st->woken = 0;
  }
  return 0;
}

// Interrupt context: a per-CPU nesting depth kept by the interrupt tracepoints below. In an
// interrupt `current` is whichever task was interrupted, so a wake-up there is attributed to
// "interrupt" (waker 0), not to that task. Per-CPU variables such as __preempt_count are not
// reachable from BPF without CONFIG_KALLSYMS_ALL, which these kernels lack.
//
// An entry whose exit is never seen leaves the depth up for good: the programs attach one by one,
// so an interrupt that starts between an entry program's attach and its exit program's is
// counted in and never out, and from then on every wake-up on that CPU would read as an
// interrupt's (seen on the H200: 70% of a job's wake-ups). So the depth carries the time it last
// rose from 0 — when the outermost interrupt began — and is stale once that is GW_IRQ_STALE_NS
// old: no interrupt handler, softirq round or hrtimer callback runs that long (softirq
// processing yields to ksoftirqd after 2 ms). Not the time of the latest entry: on a busy CPU
// the timer interrupt comes every few ms, and each of its entries would keep a stuck level
// fresh forever.
#define GW_IRQ_STALE_NS 20000000ULL
struct irq_state {
  __s32 depth;
  __u32 pad;
  __u64 since_ns;  // when depth last rose from 0
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct irq_state);
} irq_depth SEC(".maps");

static __always_inline void irq_enter(int delta) {
  __u32 zero = 0;
  struct irq_state *s = bpf_map_lookup_elem(&irq_depth, &zero);
  if (!s) return;
  __u64 now = bpf_ktime_get_ns();
  __s32 depth = s->depth;
  if (depth > 0 && now - s->since_ns > GW_IRQ_STALE_NS) depth = 0;  // an exit never seen
  if (delta > 0 && depth == 0) s->since_ns = now;
  depth += delta;
  s->depth = depth < 0 ? 0 : depth;  // an exit seen without its entry (attached mid-interrupt)
}

// Whether this CPU is inside an interrupt now (a stale depth is not).
static __always_inline bool in_interrupt_now(void) {
  __u32 zero = 0;
  struct irq_state *s = bpf_map_lookup_elem(&irq_depth, &zero);
  return s && s->depth > 0 && bpf_ktime_get_ns() - s->since_ns <= GW_IRQ_STALE_NS;
}

SEC("tp_btf/irq_handler_entry")
int BPF_PROG(gw_irq_entry) { irq_enter(1); return 0; }
SEC("tp_btf/irq_handler_exit")
int BPF_PROG(gw_irq_exit) { irq_enter(-1); return 0; }
SEC("tp_btf/softirq_entry")
int BPF_PROG(gw_softirq_entry) { irq_enter(1); return 0; }
SEC("tp_btf/softirq_exit")
int BPF_PROG(gw_softirq_exit) { irq_enter(-1); return 0; }
// hrtimer callbacks run in the timer interrupt, which has no irq_handler_* events: sleeps with
// a timeout (nanosleep, futex, poll) end here.
SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(gw_hrtimer_entry) { irq_enter(1); return 0; }
SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(gw_hrtimer_exit) { irq_enter(-1); return 0; }

// sched_waking runs in the waker's context (sched_wakeup may run later on the wakee's CPU):
// it gives both the moment the task became runnable and who made it so.
SEC("tp_btf/sched_waking")
int BPF_PROG(gw_sched_waking, struct task_struct *p) {
  struct task_state *st = bpf_task_storage_get(&task_states, p, 0, 0);
  if (!st || !st->off_ts || st->woken) return 0;
  // Only blocked intervals have a waker; a preempted task is runnable already.
  if (st->kind == GW_SWITCH_PREEMPTED) return 0;
  st->wake_ts = bpf_ktime_get_ns();
  st->woken = 1;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tid = (__u32)id;
  // The idle task only wakes others from interrupts it serves.
  if (in_interrupt_now() || tid == 0) {
    st->waker_tgid = 0;
    st->waker_tid = 0;
  } else {
    st->waker_tgid = (__u32)(id >> 32);
    st->waker_tid = tid;
    st->gil = detect_gil && st->waker_tgid == p->tgid && !st->competitor &&
              gw_py_gil_released_by_current(st->waker_tgid);
  }
  return 0;
}

// ---- On-CPU profile -----------------------------------------------------------------------------
// A CPU-clock perf event on every CPU fires at the profile rate (trace --profile-hz); when a
// tracked thread is the one running, its stack (native and Python, as --stack takes them) is
// recorded with the time and thread. The rate bounds every thread's samples: a thread is on one
// CPU at a time. A cpu-clock event fires from the timer interrupt, which may land inside a
// uprobe's capture on this CPU: the profile uses its own scratch slot.
SEC("perf_event")
int gw_cpu_sample(struct bpf_perf_event_data *ctx) {
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = (__u32)(id >> 32);
  __u32 tid = (__u32)id;
  if (tid == 0 || !is_tracked(tgid)) return 0;
  __u64 stack = gw_capture_stack(ctx, GW_STACK_SLOT_PROFILE, 0, 0);
  struct gw_host_record *r = reserve_record(GW_DROP_SCHED, GW_HOST_CPU_SAMPLE);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = tgid;
  r->tid = tid;
  // The context allows only whole-register reads: no narrowing of cs to its low bits.
  __u64 cs = *(volatile __u64 *)&ctx->regs.cs;
  r->kind = (cs & 3) == 3 ? GW_SAMPLE_USER : GW_SAMPLE_KERNEL;
  r->stack_id = stack;
  submit_record(r, GW_DROP_SCHED);
  return 0;
}

// A new task of a tracked process is runnable from here until it first runs: time it as an
// off-CPU interval of kind preempted (all run-queue wait) so slow worker start-up under
// contention shows.
SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(gw_sched_wakeup_new, struct task_struct *p) {
  __u32 tgid = p->tgid;
  if (!is_tracked(tgid)) return 0;
  struct task_state *st = bpf_task_storage_get(&task_states, p, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!st) return 0;
  st->off_ts = bpf_ktime_get_ns();
  st->wake_ts = 0;
  st->other_tgid = 0;
  st->cpu = (__u16)bpf_get_smp_processor_id();
  st->kind = GW_SWITCH_PREEMPTED;
  st->competitor = 0;
  st->switch_fault = 0;
  st->woken = 0;
  return 0;
}

// ---- Process lifecycle -------------------------------------------------------------------------
SEC("tp_btf/sched_process_fork")
int BPF_PROG(gw_sched_process_fork, struct task_struct *parent, struct task_struct *child) {
  __u32 parent_tgid = parent->tgid;
  __u32 child_tgid = child->tgid;
  // A new thread shares its tgid: already tracked through the process.
  if (child_tgid == parent_tgid || !is_tracked(parent_tgid)) return 0;
  __u32 flags = GW_TRACKED_CHILD;
  if (bpf_map_update_elem(&tracked, &child_tgid, &flags, BPF_NOEXIST) != 0 &&
      !is_tracked(child_tgid)) {
    count_slot(&drops, GW_DROP_TRACKED_FULL);
  }
  struct gw_host_record *r = reserve_record(GW_DROP_PROC, GW_HOST_FORK);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = parent_tgid;
  r->tid = parent->pid;
  r->other_tgid = child_tgid;
  bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), &child->comm);
  submit_record(r, GW_DROP_PROC);
  return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(gw_sched_process_exec, struct task_struct *p, pid_t old_pid,
             struct linux_binprm *bprm) {
  __u32 tgid = p->tgid;
  if (!is_tracked(tgid)) return 0;
  struct gw_host_record *r = reserve_record(GW_DROP_PROC, GW_HOST_EXEC);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = tgid;
  r->tid = p->pid;
  r->aux0 = (__u64)old_pid;
  bpf_probe_read_kernel_str(r->comm, sizeof(r->comm), &p->comm);
  submit_record(r, GW_DROP_PROC);
  return 0;
}

// Only the first argument is used: kernels before 6.16 pass no group_dead flag, so the group's
// end is read from signal->live (already decremented when the tracepoint fires).
SEC("tp_btf/sched_process_exit")
int BPF_PROG(gw_sched_process_exit, struct task_struct *p) {
  __u32 tgid = p->tgid;
  if (BPF_CORE_READ(p, signal, live.counter) != 0) return 0;  // other threads still live
  bool was_tracked = is_tracked(tgid);
  bool was_competitor = !was_tracked && bpf_map_lookup_elem(&competitors, &tgid);
  if (!was_tracked && !was_competitor) return 0;
  bpf_map_delete_elem(&tracked, &tgid);
  bpf_map_delete_elem(&competitors, &tgid);
  struct gw_host_record *r = reserve_record(GW_DROP_PROC, GW_HOST_EXIT);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = tgid;
  r->tid = p->pid;
  r->value = BPF_CORE_READ(p, exit_code);
  r->other_tgid = BPF_CORE_READ(p, real_parent, tgid);
  r->flags = was_competitor;
  leader_comm(p, r->comm);
  submit_record(r, GW_DROP_PROC);
  return 0;
}

SEC("tp_btf/mark_victim")
int BPF_PROG(gw_mark_victim, struct task_struct *task) {
  struct gw_host_record *r = reserve_record(GW_DROP_MEM, GW_HOST_OOM);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = task->tgid;
  r->tid = task->pid;
  leader_comm(task, r->comm);
  submit_record(r, GW_DROP_MEM);
  return 0;
}

// ---- Memory ----------------------------------------------------------------------------------
SEC("tp_btf/page_fault_user")
int BPF_PROG(gw_page_fault_user, unsigned long address, struct pt_regs *regs,
             unsigned long error_code) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!is_tracked(tgid)) return 0;
  __u64 *count = bpf_map_lookup_elem(&fault_counts, &tgid);
  if (count) {
    __sync_fetch_and_add(count, 1);
  } else {
    __u64 one = 1;
    if (bpf_map_update_elem(&fault_counts, &tgid, &one, BPF_NOEXIST) != 0) {
      count = bpf_map_lookup_elem(&fault_counts, &tgid);  // lost a race with another thread
      if (count) {
        __sync_fetch_and_add(count, 1);
      } else {
        count_slot(&drops, GW_DROP_FAULT_COUNT);
      }
    }
  }
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
                                               BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (st) {
    st->fault_ts = bpf_ktime_get_ns();
    st->fault_addr = address;
  }
  return 0;
}

// filemap_fault runs for faults on file-backed mappings (page cache lookup, reading the file
// when the page is missing). It fires in the faulting task's context, right after
// page_fault_user recorded the address.
SEC("tp_btf/mm_filemap_fault")
int BPF_PROG(gw_mm_filemap_fault, struct address_space *mapping, unsigned long index) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!is_tracked(tgid)) return 0;
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0, 0);
  struct gw_host_record *r = reserve_record(GW_DROP_MEM, GW_HOST_FILE_FAULT);
  if (!r) return 0;
  r->ts_ns = bpf_ktime_get_ns();
  r->tgid = tgid;
  r->tid = (__u32)bpf_get_current_pid_tgid();
  r->aux0 = st ? st->fault_addr : 0;
  r->aux1 = index;
  r->value = (__s64)BPF_CORE_READ(mapping, host, i_ino);
  submit_record(r, GW_DROP_MEM);
  return 0;
}

// Direct reclaim stalls the allocating task: recorded for every task (rare, and a sign of
// memory pressure on the whole node).
SEC("tp_btf/mm_vmscan_direct_reclaim_begin")
int BPF_PROG(gw_direct_reclaim_begin, int order, gfp_t gfp_flags) {
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
                                               BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (st) st->reclaim_ts = bpf_ktime_get_ns();
  return 0;
}

SEC("tp_btf/mm_vmscan_direct_reclaim_end")
int BPF_PROG(gw_direct_reclaim_end, unsigned long nr_reclaimed) {
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0, 0);
  if (!st || !st->reclaim_ts) return 0;
  __u64 now = bpf_ktime_get_ns();
  struct gw_host_record *r = reserve_record(GW_DROP_MEM, GW_HOST_RECLAIM);
  if (r) {
    __u64 id = bpf_get_current_pid_tgid();
    r->ts_ns = st->reclaim_ts;
    r->duration_ns = now - st->reclaim_ts;
    r->aux0 = nr_reclaimed;
    r->tgid = id >> 32;
    r->tid = (__u32)id;
    submit_record(r, GW_DROP_MEM);
  }
  st->reclaim_ts = 0;
  return 0;
}

// ---- Block I/O -------------------------------------------------------------------------------
// block_io_start fires when a bio becomes a request, in the context of the task that submits
// it (O_DIRECT, reads that miss the page cache, readahead): that task owns the request.
// block_rq_issue, when the request goes to the device, can run in kblockd instead (a busy
// queue, a plug flushed late), so it only stamps the issue time of a request already owned;
// on kernels without block_io_start (before 6.5) the issuing context owns it. Buffered
// writeback is submitted by kworker flusher threads: not tracked, so not recorded (see README).
static __always_inline void own_request(struct request *rq, __u64 issue_ts) {
  __u64 key = (__u64)rq;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!is_tracked(tgid)) {
    // A request an untracked task now owns may reuse the slot of a tracked one merged away.
    if (issue_ts == 0) bpf_map_delete_elem(&inflight, &key);
    return;
  }
  struct inflight_io io = {};
  io.issue_ts = issue_ts;
  io.bytes = BPF_CORE_READ(rq, __data_len);
  io.tgid = tgid;
  io.tid = (__u32)id;
  io.cpu = (__u16)bpf_get_smp_processor_id();
  if (bpf_map_update_elem(&inflight, &key, &io, BPF_ANY) != 0) {
    count_slot(&drops, GW_DROP_INFLIGHT_FULL);
  }
}

SEC("tp_btf/block_io_start")
int BPF_PROG(gw_block_io_start, struct request *rq) {
  own_request(rq, 0);
  return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(gw_block_rq_issue, struct request *rq) {
  __u64 key = (__u64)rq;
  struct inflight_io *io = bpf_map_lookup_elem(&inflight, &key);
  if (io) {
    // Owned at block_io_start; merges since then grew it. A requeued request is issued again.
    io->issue_ts = bpf_ktime_get_ns();
    io->bytes = BPF_CORE_READ(rq, __data_len);
    return 0;
  }
  own_request(rq, bpf_ktime_get_ns());
  return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(gw_block_rq_complete, struct request *rq, blk_status_t error,
             unsigned int nr_bytes) {
  __u64 key = (__u64)rq;
  struct inflight_io *io = bpf_map_lookup_elem(&inflight, &key);
  if (!io) return 0;
  struct gw_host_record *r =
      io->issue_ts != 0 ? reserve_record(GW_DROP_IO, GW_HOST_BLOCK_IO) : NULL;
  if (r) {
    r->ts_ns = io->issue_ts;
    r->duration_ns = bpf_ktime_get_ns() - io->issue_ts;
    r->aux0 = BPF_CORE_READ(rq, __sector);
    struct gendisk *disk = BPF_CORE_READ(rq, q, disk);
    if (disk) {
      __u32 major = BPF_CORE_READ(disk, major);
      __u32 minor = BPF_CORE_READ(disk, first_minor);
      r->aux1 = ((__u64)major << 20) | minor;
    }
    r->value = (__s64)io->bytes;
    r->tgid = io->tgid;
    r->tid = io->tid;
    r->cpu = io->cpu;
    r->error = error;
    // REQ_OP_READ = 0, REQ_OP_WRITE = 1 (low 8 bits of cmd_flags, stable ABI of the block
    // layer since 4.10).
    __u32 op = BPF_CORE_READ(rq, cmd_flags) & 0xff;
    r->kind = op == 0 ? GW_BIO_READ : op == 1 ? GW_BIO_WRITE : GW_BIO_OTHER;
    submit_record(r, GW_DROP_IO);
  }
  bpf_map_delete_elem(&inflight, &key);
  return 0;
}

// ---- Slow reads, writes and syncs -----------------------------------------------------------
// x86-64 syscall numbers of the families recorded when slow (read_threshold_ns): what a thread
// spends inside them is file I/O, its CPU part (copying into the page cache) included.
#define GW_NR_READ 0
#define GW_NR_WRITE 1
#define GW_NR_PREAD64 17
#define GW_NR_PWRITE64 18
#define GW_NR_READV 19
#define GW_NR_WRITEV 20
#define GW_NR_FSYNC 74
#define GW_NR_FDATASYNC 75
#define GW_NR_PREADV 295
#define GW_NR_PWRITEV 296
#define GW_NR_PREADV2 327
#define GW_NR_PWRITEV2 328

// GW_SYSCALL_* of a syscall number, or -1 for every other syscall.
static __always_inline int syscall_kind(long id) {
  if (id == GW_NR_READ || id == GW_NR_PREAD64 || id == GW_NR_READV || id == GW_NR_PREADV ||
      id == GW_NR_PREADV2) {
    return GW_SYSCALL_READ;
  }
  if (id == GW_NR_WRITE || id == GW_NR_PWRITE64 || id == GW_NR_WRITEV || id == GW_NR_PWRITEV ||
      id == GW_NR_PWRITEV2) {
    return GW_SYSCALL_WRITE;
  }
  if (id == GW_NR_FSYNC || id == GW_NR_FDATASYNC) return GW_SYSCALL_SYNC;
  return -1;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(gw_sys_enter, struct pt_regs *regs, long id) {
  __u32 tgid = bpf_get_current_pid_tgid() >> 32;
  if (!is_tracked(tgid)) return 0;
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0, 0);
  int kind = syscall_kind(id);
  if (!st) {
    if (kind < 0 || read_threshold_ns == 0) return 0;
    st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0,
                              BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (!st) return 0;
  }
  st->fault_ts = 0;  // a sleep after this is the syscall's, not a page fault's
  if (kind >= 0 && read_threshold_ns) {
    st->read_ts = bpf_ktime_get_ns();
    st->read_fd = BPF_CORE_READ(regs, di);
    st->read_kind = (__u8)kind;
  } else {
    st->read_ts = 0;
  }
  return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(gw_sys_exit, struct pt_regs *regs, long ret) {
  if (read_threshold_ns == 0) return 0;
  __u64 id = bpf_get_current_pid_tgid();
  __u32 tgid = id >> 32;
  if (!is_tracked(tgid)) return 0;
  struct task_state *st = bpf_task_storage_get(&task_states, bpf_get_current_task_btf(), 0, 0);
  if (!st || !st->read_ts) return 0;
  __u64 now = bpf_ktime_get_ns();
  __u64 duration = now - st->read_ts;
  if (duration >= read_threshold_ns) {
    struct gw_host_record *r = reserve_record(GW_DROP_IO, GW_HOST_READ);
    if (r) {
      r->ts_ns = st->read_ts;
      r->duration_ns = duration;
      r->aux0 = st->read_fd;
      r->value = ret;
      r->tgid = tgid;
      r->tid = (__u32)id;
      r->kind = st->read_kind;
      submit_record(r, GW_DROP_IO);
    }
  }
  st->read_ts = 0;
  return 0;
}
