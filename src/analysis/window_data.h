// What analysis reads from a recording: one window of one session, already decoded. The loader
// (loader.cc) fills it from a database through StoreReader; unit tests build it by hand.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "store/event.h"
#include "store/ops.h"

namespace gw {

// Arithmetic on values read from a file that anyone may have edited: clamp, never overflow.
inline int64_t SaturatingAdd(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
  return r;
}
inline int64_t SaturatingSub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? INT64_MAX : INT64_MIN;
  return r;
}

// One raw row of event_rows (launch rows are not loaded: op_seconds counts them).
struct RawEvent {
  int64_t ts = 0;  // session ns
  int64_t duration = 0;
  int32_t pid = 0;
  int32_t tid = 0;
  Op op = Op::kSchedSwitch;
  int64_t ret = kNull;
  int64_t bytes = kNull;
  int64_t kind = kNull;
  int64_t other_pid = kNull;
  int64_t runq = kNull;
  int64_t waker_pid = kNull;  // sched_switch of a blocked task: who woke it (0 = interrupt)
  int64_t waker_tid = kNull;
  int64_t End() const { return SaturatingAdd(ts, duration); }
};

struct ProcessRecord {
  int32_t pid = 0;
  int32_t ppid = 0;
  std::string name;
  std::string cmdline;
  bool tracked = false;
  int64_t first_ts = kNull;
  int64_t exit_ts = kNull;
  int64_t exit_code = kNull;
};

// One row of op_seconds summed over name_id.
struct OpSecondRow {
  int64_t sec = 0;
  int32_t pid = 0;
  Op op = Op::kCudaLaunchKernel;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
};

// sched_switch totals of one process over the window (all processes, from SQL aggregates).
struct SwitchTotals {
  int32_t pid = 0;
  int64_t count = 0;
  int64_t off_ns = 0;
  int64_t runq_ns = 0;
  int64_t max_ns = 0;
};

// trace --stack: the rows of one (op, process, stack) in the window, aggregated in SQL.
struct StackUse {
  Op op = Op::kSchedSwitch;
  int32_t pid = 0;
  int64_t stack_id = 0;
  int64_t count = 0;
  int64_t total_ns = 0;
  int64_t max_ns = 0;
  int64_t preempted = 0;  // sched_switch rows with kind = preempted
};

// One frame of a stored stack (stack_frames), innermost first.
struct StackFrameRow {
  bool python = false;
  std::string function;  // "" when unresolved
  std::string file;      // "" when unknown
  int64_t line = 0;
  std::string module;    // native: the mapped file
};

struct WindowData {
  int64_t session = 0;
  int64_t from = 0;              // session ns, inclusive
  int64_t to = 0;                // session ns, exclusive
  int64_t session_first_ts = 0;  // first event of the whole session
  int64_t session_last_ts = 0;
  int64_t cores = 0;  // sessions.cores (snapshots override when present)
  int64_t drops = 0;
  std::string label;                           // "last 2 min"
  std::map<int32_t, ProcessRecord> processes;  // every process of the session
  std::vector<RawEvent> events;          // tracked processes' non-launch rows in the window, by ts
  // Rows of tracked processes that began before the window but end inside it (off-CPU
  // intervals, syncs, copies): for timelines only, never counted.
  std::vector<RawEvent> carry_in;
  int32_t tracer_pid = 0;  // the recording gpuwhy (sessions.tracer_pid), 0 = unknown
  std::vector<RawEvent> launch_samples;  // a bounded sample of launch rows (durations)
  std::vector<OpSecondRow> op_seconds;   // window seconds, every pid
  std::vector<SwitchTotals> switch_totals;  // every pid with sched_switch rows in the window
  std::vector<SystemSnapshot> snapshots;    // window
  int64_t events_in_window = 0;
  std::vector<StackUse> stack_uses;                             // every pid, window rows
  std::map<int64_t, std::vector<StackFrameRow>> stack_frames;  // stacks those rows use
  int64_t malformed_stacks = 0;  // stacks of those rows whose frames could not be read
};

}  // namespace gw
