#include "sources/cuda/cuda_graphs.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace gw {

void GraphTracker::CaptureBegin(int32_t pid, int32_t tid, int64_t ts_ns) {
  Of(pid).open[tid] = {ts_ns, Graph{}};
}

void GraphTracker::CapturedLaunch(int32_t pid, int32_t tid, uint64_t handle, bool host_stub) {
  Process& p = Of(pid);
  auto it = p.open.find(tid);
  // A captured launch without its begin (the begin's record was lost): a capture of unknown
  // start; its graph is not complete.
  if (it == p.open.end()) it = p.open.emplace(tid, std::make_pair(int64_t{-1}, Graph{})).first;
  ++it->second.second.kernels[{handle, host_stub}];
}

void GraphTracker::CaptureEnd(int32_t pid, int32_t tid, uint64_t graph, bool complete) {
  Process& p = Of(pid);
  auto it = p.open.find(tid);
  Graph g;
  if (it != p.open.end()) {
    g = std::move(it->second.second);
    g.complete = complete && it->second.first >= 0;
    p.open.erase(it);
  }
  if (graph != 0) p.graphs[graph] = std::move(g);
}

int64_t GraphTracker::OpenCaptureSince(int32_t pid, int32_t tid) const {
  auto p = processes_.find(pid);
  if (p == processes_.end()) return -1;
  auto it = p->second.open.find(tid);
  return it == p->second.open.end() ? -1 : std::max<int64_t>(0, it->second.first);
}

bool GraphTracker::AnyCaptureOpen() const {
  for (const auto& [pid, p] : processes_) {
    if (!p.open.empty()) return true;
  }
  return false;
}

std::string GraphTracker::Label(int64_t number, const std::map<std::string, int64_t>& kernels,
                                bool complete) {
  int64_t n = 0;
  for (const auto& [name, count] : kernels) n += count;
  std::string label = "graph " + std::to_string(number);
  if (!complete || n == 0) {
    return label + " (kernels unknown: its capture was not seen whole; each launch counted once)";
  }
  std::vector<std::pair<int64_t, std::string>> top;
  for (const auto& [name, count] : kernels) top.push_back({count, name});
  std::sort(top.begin(), top.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  label += " (" + std::to_string(n) + (n == 1 ? " kernel: " : " kernels: ");
  for (size_t i = 0; i < top.size() && i < 3; ++i) {
    if (i > 0) label += ", ";
    std::string name = top[i].second;
    // The plain function name: no argument list, no template arguments.
    if (size_t paren = name.find('('); paren != std::string::npos && paren > 0) {
      name.resize(paren);
    }
    if (name.size() > 48) name = name.substr(0, 47) + "…";
    label += name;
    if (top[i].first > 1) label += " x" + std::to_string(top[i].first);
  }
  if (top.size() > 3) label += ", …";
  return label + ")";
}

void GraphTracker::Instantiate(int32_t pid, uint64_t graph, uint64_t exec) {
  if (exec == 0) return;
  Process& p = Of(pid);
  Exec e;
  int64_t number = p.next_number++;
  auto g = p.graphs.find(graph);
  if (g != p.graphs.end() && g->second.complete && !g->second.kernels.empty()) {
    std::map<std::string, int64_t> by_name;
    int64_t n = 0;
    for (const auto& [kernel, count] : g->second.kernels) {
      std::string name = name_(pid, kernel.first, kernel.second);
      if (name.empty()) {
        char hex[32];
        std::snprintf(hex, sizeof hex, "fn@0x%" PRIx64, kernel.first);
        name = hex;
      }
      by_name[name] += count;
      n += count;
    }
    e.kernels = n;
    e.name_id = intern_(Label(number, by_name, true));
  } else {
    e.name_id = intern_(Label(number, {}, false));
  }
  p.execs[exec] = e;
}

int64_t GraphTracker::Launch(int32_t pid, uint64_t exec, int64_t sec) {
  Process& p = Of(pid);
  auto it = p.execs.find(exec);
  if (it == p.execs.end()) {
    // Instantiated before the attach: an exec of unknown kernels, numbered on first sight.
    char hex[24];
    std::snprintf(hex, sizeof hex, "0x%" PRIx64, exec);
    Exec e;
    e.name_id = intern_(std::string("graph exec ") + hex +
                        " (kernels unknown: instantiated before gpuwhy attached; each launch "
                        "counted once)");
    it = p.execs.emplace(exec, e).first;
  }
  counts_[{sec, pid, it->second.name_id}] += it->second.kernels;
  return it->second.name_id;
}

std::vector<OpCount> GraphTracker::TakeCounts() {
  std::vector<OpCount> out;
  out.reserve(counts_.size());
  for (const auto& [key, n] : counts_) {
    OpCount c;
    c.sec = std::get<0>(key);
    c.pid = std::get<1>(key);
    c.op = Op::kGraphKernels;
    c.name_id = std::get<2>(key);
    c.count = n;
    out.push_back(c);
  }
  counts_.clear();
  return out;
}

void GraphTracker::Forget(int32_t pid) { processes_.erase(pid); }

}  // namespace gw
