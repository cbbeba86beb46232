// StackRegistry: the user-space half of stacks.bpf.h. Owns the shared BPF maps (created here,
// handed to every BPF object that captures stacks through bpf_map__reuse_fd), tells the BPF
// walker which processes run CPython and with which offsets, and drains captured stacks into
// symbolized frames.
//
//   ASSIGN_OR_RETURN(auto stacks, StackRegistry::Create({}));
//   RETURN_IF_ERROR(stacks->ShareMaps(skel->obj));   // after open, before load
//   stacks->Watch(pid);                               // when a process is first tracked
//   for (SymbolizedStack& s : stacks->Drain()) writer->AppendStack(s.id, s.pid, …);
//
// Event::stack_id is the key gw_capture_stack() returned, bit-cast to int64; it equals
// SymbolizedStack::id.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/scoped.h"
#include "base/status.h"
#include "sources/stacks/python_offsets.h"
#include "symbolize/symbolizer.h"

struct bpf_object;

namespace gw {

struct StackRegistryOptions {
  uint32_t max_stacks = 16384;  // gw_stacks entries between drains
  std::string proc_root = "/proc";
};

struct WatchResult {
  bool python = false;
  std::string python_version;  // "3.12.3"
  std::string offsets_source;  // "table 3.12", "_Py_DebugOffsets 3.13.0"
  std::string note;            // why Python frames are unavailable, when they are
};

struct SymbolizedStack {
  int64_t id = 0;  // the BPF stack key, as stored in Event::stack_id and stacks.id
  int32_t pid = 0;
  uint32_t flags = 0;         // GW_STACK_* from stacks_abi.h
  std::vector<Frame> frames;  // innermost first, Python frames spliced in
  std::string frames_json;    // Symbolizer::ToJson(frames)
  std::string location;       // Symbolizer::Location(frames)
  RawStack raw;               // what BPF captured (addresses, code objects, entry flags)
};

// Counters summed over CPUs (see enum gw_stack_stat).
struct StackStats {
  int64_t captures = 0;
  int64_t new_stacks = 0;
  int64_t map_full = 0;
  int64_t native_errors = 0;
  int64_t python_no_thread = 0;
  int64_t python_truncated = 0;
  int64_t python_read_errors = 0;
  int64_t busy = 0;
  int64_t tstate_cached = 0;
  int64_t over_budget = 0;  // CUDA rows left without a stack: over a thread's budget
};

class StackRegistry {
 public:
  static StatusOr<std::unique_ptr<StackRegistry>> Create(const StackRegistryOptions& options);

  // Points the stack maps of `object` (opened, not yet loaded, including stacks.bpf.h) at this
  // registry's maps, so all programs share one set of stacks and one Python process table.
  Status ShareMaps(bpf_object* object) const;

  // Starts watching a process: snapshots its maps for native symbolization and, when it runs
  // CPython 3.10–3.13, enables the BPF Python walk for it. Errors only when the process is
  // gone; a Python process that cannot be walked is OK with `note` set.
  StatusOr<WatchResult> Watch(int32_t pid);
  // Stops the Python walk for a process (keeps its symbolization caches).
  void Unwatch(int32_t pid);

  // Takes every stack captured since the last call out of the BPF map, symbolizes those not
  // returned before and returns them. Call often (the Python code objects of a process can
  // only be read while it lives).
  std::vector<SymbolizedStack> Drain();

  StackStats Stats() const;
  Symbolizer& symbolizer() { return symbolizer_; }

  int stacks_map_fd() const { return stacks_fd_.get(); }
  int python_map_fd() const { return python_fd_.get(); }

 private:
  explicit StackRegistry(const StackRegistryOptions& options)
      : options_(options), symbolizer_(options.proc_root) {}

  StackRegistryOptions options_;
  ScopedFd stacks_fd_, python_fd_, tstate_fd_, stats_fd_;
  Symbolizer symbolizer_;
  std::unordered_set<uint64_t> emitted_;
};

}  // namespace gw
