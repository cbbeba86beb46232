// CUDA Graphs as the tracer sees them: which kernels a stream capture put into a graph, which
// graph an instantiation made each exec from, and, per launch of an exec, the kernels it ran.
//
// The BPF side marks launches made while their thread captured a stream (captured launches, one
// row each) and records capture begin/end (the graph at the end), instantiation (exec ← graph)
// and graph launches (the exec). GraphTracker joins them in record order, per process:
//   begin(tid) → captured launches(tid) → end(tid, graph) → instantiate(graph → exec)
// and turns every graph launch into `graph_kernels` counts: N per launch of a graph of N
// captured kernels, named "graph G (N kernels: top names)". A graph whose capture the tracer did
// not see whole (captured before the attach, or while the launch probes were detached by the
// duty cycle) has no known kernel count: each of its launches counts once, and its name says so.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <unordered_map>
#include <vector>

#include "store/event.h"

namespace gw {

class GraphTracker {
 public:
  // Interns a name for op_seconds.name_id.
  using InternFn = std::function<int64_t(const std::string&)>;
  // A kernel handle's name ("" when unknown): resolved at instantiation, when the names of
  // every captured launch have arrived (a runtime launch's alias follows its row).
  using NameFn = std::function<std::string(int32_t pid, uint64_t handle, bool host_stub)>;
  GraphTracker(InternFn intern, NameFn name)
      : intern_(std::move(intern)), name_(std::move(name)) {}

  // A capture began on thread `tid` at `ts_ns` (session ns).
  void CaptureBegin(int32_t pid, int32_t tid, int64_t ts_ns);
  // A launch made during a capture on `tid` of kernel `handle` (a runtime launch's host stub).
  void CapturedLaunch(int32_t pid, int32_t tid, uint64_t handle, bool host_stub);
  // The capture on `tid` ended with `graph` (0: it failed). `complete`: the launch probes were
  // attached from its begin to its end, so every captured launch was seen.
  void CaptureEnd(int32_t pid, int32_t tid, uint64_t graph, bool complete);
  // The capture begun on `tid` (session ns), or -1 when none is open.
  int64_t OpenCaptureSince(int32_t pid, int32_t tid) const;
  // Whether any capture is open (the duty cycle keeps the launch probes on meanwhile).
  bool AnyCaptureOpen() const;
  void Instantiate(int32_t pid, uint64_t graph, uint64_t exec);
  // A launch of `exec` at session second `sec`: counts its kernels, returns its label's id.
  int64_t Launch(int32_t pid, uint64_t exec, int64_t sec);
  // The graph_kernels counts since the last take.
  std::vector<OpCount> TakeCounts();
  void Forget(int32_t pid);

  // The label of a graph of `kernels` (name → captured launches), ordinal `number`.
  static std::string Label(int64_t number, const std::map<std::string, int64_t>& kernels,
                           bool complete);

 private:
  struct Graph {
    std::map<std::pair<uint64_t, bool>, int64_t> kernels;  // captured launches by handle
    bool complete = false;
  };
  struct Exec {
    int64_t kernels = 1;      // counted per launch (1 when unknown)
    int64_t name_id = kNull;  // interned label
  };
  struct Process {
    std::map<int32_t, std::pair<int64_t, Graph>> open;  // by tid: begin ts, nodes so far
    std::unordered_map<uint64_t, Graph> graphs;          // captured, by CUgraph
    std::unordered_map<uint64_t, Exec> execs;            // instantiated, by CUgraphExec
    int64_t next_number = 1;
  };

  Process& Of(int32_t pid) { return processes_[pid]; }

  InternFn intern_;
  NameFn name_;
  std::unordered_map<int32_t, Process> processes_;
  std::map<std::tuple<int64_t, int32_t, int64_t>, int64_t> counts_;  // (sec, pid, name) → n
};

}  // namespace gw
