// ABI shared by stacks.bpf.h (BPF side) and the C++ StackRegistry/symbolizer: what a captured
// stack looks like in the `gw_stacks` map, and the per-process CPython offsets user space fills
// into `gw_py_procs`. Fixed-width types only; both sides compile this file.
#ifndef GPUWHY_SOURCES_STACKS_STACKS_ABI_H_
#define GPUWHY_SOURCES_STACKS_STACKS_ABI_H_

#ifdef __cplusplus
#include <linux/types.h>  // __u8 … __u64, the same types vmlinux.h gives the BPF side
#endif

// Bounded depths. The verifier needs compile-time bounds for every loop that walks them.
#define GW_STACK_MAX_NATIVE 32  // native frames from bpf_get_stack(BPF_F_USER_STACK)
#define GW_STACK_MAX_PY 32      // Python frames recorded per stack
#define GW_PY_MAX_WALK 40       // raw interpreter frames visited (shim frames are skipped)
#define GW_PY_MAX_INTERPRETERS 4
#define GW_PY_MAX_THREADS 64      // PyThreadStates scanned per interpreter to find this thread
#define GW_PY_FRAME_READ_MAX 128  // bytes of one interpreter frame read in a single probe read

// How the interpreter marks the outermost Python frame of one C-level eval call, which is
// where the Python frames splice into the native stack (_PyEval_EvalFrameDefault).
enum gw_py_entry_mode {
  GW_PY_ENTRY_EVERY_FRAME = 0,   // 3.10: one _PyEval_EvalFrameDefault per PyFrameObject
  GW_PY_ENTRY_IS_ENTRY = 1,      // 3.11: _PyInterpreterFrame.is_entry (a bool at frame_entry)
  GW_PY_ENTRY_CSTACK_OWNER = 2,  // 3.12+: a shim frame with owner == FRAME_OWNED_BY_CSTACK (3)
                                 // below the entry frame; the shim itself is skipped
};

#define GW_PY_OFFSET_NONE 0xffff
#define GW_PY_OWNED_BY_CSTACK 3

// Where the interpreter keeps its GIL (struct _gil_runtime_state), for telling a GIL hand-off
// apart from other wake-ups (host.bpf.c, sched_waking).
enum gw_py_gil_mode {
  GW_PY_GIL_UNKNOWN = 0,      // not known for this interpreter: no GIL evidence
  GW_PY_GIL_IN_RUNTIME = 1,   // 3.10/3.11: at _PyRuntime + gil_offset
  GW_PY_GIL_INTERP_PTR = 2,   // 3.12+: a pointer at (main interpreter) + gil_offset
};

// Value of gw_py_procs (key: tgid). One program walks every CPython version with these.
struct gw_py_offsets {
  __u64 runtime_addr;               // absolute address of _PyRuntime in the process
  __u32 version;                    // 310, 311, 312, 313 (informational)
  __u16 runtime_interpreters_head;  // _PyRuntimeState.interpreters.head
  __u16 interp_next;                // PyInterpreterState.next
  __u16 interp_threads_head;        // PyInterpreterState.threads.head (3.10: tstate_head)
  __u16 tstate_next;                // PyThreadState.next
  __u16 tstate_thread_id;      // PyThreadState.thread_id (pthread_self() == the thread's fsbase)
  __u16 tstate_frame;          // 3.10 frame, 3.11/3.12 cframe, 3.13 current_frame
  __u16 cframe_current_frame;  // 3.11/3.12 _PyCFrame.current_frame, else GW_PY_OFFSET_NONE
  __u16 frame_code;            // f_code / f_executable
  __u16 frame_previous;        // f_back / previous
  __u16 frame_instr;           // 3.10 f_lasti (int) / prev_instr / instr_ptr (pointer)
  __u16 frame_entry;           // 3.11 is_entry, 3.12+ owner, else GW_PY_OFFSET_NONE
  __u16 frame_read_size;       // bytes to read per frame (max field end, <= 128)
  __u8 entry_mode;             // enum gw_py_entry_mode
  __u8 instr_is_index;         // 1: frame_instr is a 32-bit instruction index (3.10)
  __u8 gil_mode;               // enum gw_py_gil_mode
  __u8 pad;
  __u16 gil_offset;            // see gw_py_gil_mode
  __u16 gil_last_holder;       // _gil_runtime_state.last_holder (PyThreadState*)
  __u16 gil_locked;            // _gil_runtime_state.locked (int)
};

// One Python frame as captured: which code object and where in it. `instr` is the raw value
// of frame_instr: an instruction index (3.10) or a pointer into the code object's bytecode
// (3.11+); user space turns it into a byte offset and then into a line.
struct gw_py_frame {
  __u64 code;
  __u64 instr;
};

// Flags on a captured stack.
#define GW_STACK_NATIVE_ERROR (1u << 0)       // bpf_get_stack failed: no native frames
#define GW_STACK_PY_NO_THREAD (1u << 1)       // Python process, but this thread's tstate not found
#define GW_STACK_PY_TRUNCATED (1u << 2)       // more Python frames than GW_STACK_MAX_PY
#define GW_STACK_PY_READ_ERROR (1u << 3)      // a frame could not be read (walk stopped there)
#define GW_STACK_PY_WALKED (1u << 4)          // the process is a watched Python process
#define GW_STACK_NATIVE_SKIP_FIRST (1u << 5)  // native[0] is unused: frames start at native[1]

// Value of gw_stacks (key: the 64-bit stack key returned by gw_capture_stack).
struct gw_stack {
  __u32 tgid;
  __u16 native_count;                      // valid entries in native[]
  __u16 py_count;                          // valid entries in py[]
  __u32 py_entry_mask;                     // bit i: py[i] is the outermost frame of its eval call
  __u32 flags;                             // GW_STACK_*
  __u64 native[GW_STACK_MAX_NATIVE];       // return addresses, innermost first (native[0] = IP)
  struct gw_py_frame py[GW_STACK_MAX_PY];  // innermost first
};

// Index into the per-CPU gw_stack_stats array.
enum gw_stack_stat {
  GW_STAT_CAPTURES = 0,       // gw_capture_stack calls that produced a key
  GW_STAT_NEW_STACKS = 1,     // keys inserted into gw_stacks (first sighting)
  GW_STAT_MAP_FULL = 2,       // insert failed (map full): the event gets no stack
  GW_STAT_NATIVE_ERROR = 3,   // bpf_get_stack returned an error
  GW_STAT_PY_NO_THREAD = 4,   // tstate of the current thread not found
  GW_STAT_PY_TRUNCATED = 5,   // Python stack deeper than GW_STACK_MAX_PY
  GW_STAT_PY_READ_ERROR = 6,  // a user-memory read failed mid-walk
  GW_STAT_BUSY = 7,           // scratch slot in use (preempted capture on this CPU): skipped
  GW_STAT_TSTATE_CACHED = 8,  // tstate found in the tid cache
  GW_STAT_OVER_BUDGET = 9,    // a call row left without a stack: over the thread's budget
  GW_STAT_COUNT = 10,
};

#endif  // GPUWHY_SOURCES_STACKS_STACKS_ABI_H_
