#include "export/folded_export.h"

#include <map>
#include <set>

#include "export/output_file.h"
#include "export/process_tree.h"
#include "store/export_rows.h"

namespace gw {

namespace {

// A frame as folded-stack tools read it: no ';' (the separator) and no line breaks.
std::string Clean(std::string s) {
  for (char& c : s) {
    if (c == ';') c = ':';
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string FrameText(const StackFrameRow& f) {
  std::string fn = f.function.empty() ? "[unknown]" : f.function;
  if (f.python) {
    return Clean(fn + " (" + Basename(f.file) + ":" + std::to_string(f.line) + ")");
  }
  if (f.function.empty() && !f.module.empty()) {
    std::string m = Basename(f.module);
    return Clean(m.front() == '[' ? m : "[" + m + "]");  // "[stack]", "[vdso]" as they are
  }
  return Clean(fn);
}

}  // namespace

std::optional<Op> FoldedOpFromName(const std::string& name) {
  static const std::map<std::string, Op> kAliases = {
      {"off-cpu", Op::kSchedSwitch},
      {"on-cpu", Op::kCpuSample},
      {"cudaStreamSynchronize", Op::kCudaStreamSync},
      {"cudaDeviceSynchronize", Op::kCudaDeviceSync},
      {"cudaEventSynchronize", Op::kCudaEventSync},
      {"cuStreamSynchronize", Op::kCuStreamSync},
      {"cuCtxSynchronize", Op::kCuCtxSync},
      {"cuEventSynchronize", Op::kCuEventSync},
  };
  auto it = kAliases.find(name);
  if (it != kAliases.end()) return it->second;
  return OpFromName(name);
}

StatusOr<FoldedExportSummary> ExportFolded(StoreReader& reader, const FoldedExportOptions& options,
                                           OutputFile* out) {
  FoldedExportSummary sum;
  ASSIGN_OR_RETURN(sum.window, ResolveWindow(reader, options.window));
  std::vector<Op> ops = options.ops;
  if (ops.empty()) ops.push_back(Op::kSchedSwitch);
  ASSIGN_OR_RETURN(std::vector<StackCount> counts, ReadStackCounts(reader, sum.window, ops));
  ASSIGN_OR_RETURN(ExportSession session, ReadExportSession(reader, sum.window));
  std::set<int32_t> pids;
  if (options.pid != 0) {
    if (!session.processes.count(options.pid)) {
      return NotFound("--pid " + std::to_string(options.pid) + " is not a process of session " +
                      std::to_string(sum.window.session));
    }
    pids = ProcessAndDescendants(session.processes, options.pid);
  }
  // On-CPU samples are instants: their time is one sampling period each (sessions.profile_hz).
  int64_t sample_us = 0;
  if (ops.size() == 1 && ops[0] == Op::kCpuSample && options.weight == FoldedWeight::kTimeUs) {
    ASSIGN_OR_RETURN(int64_t hz, ReadProfileHz(reader, sum.window.session));
    if (hz <= 0) {
      return FailedPrecondition("session " + std::to_string(sum.window.session) +
                                " has no on-CPU profile — hint: gpuwhy trace records it unless "
                                "--profile-hz 0");
    }
    sample_us = 1'000'000 / hz;
  }
  // stack id → (pid, weight); a stack id belongs to one pid (its hash includes it).
  std::map<int64_t, std::pair<int32_t, int64_t>> weight;
  for (const StackCount& c : counts) {
    if (!pids.empty() && !pids.count(c.pid)) continue;
    int64_t w = options.weight == FoldedWeight::kCount ? c.count
                : sample_us > 0                          ? c.count * sample_us
                                                         : c.total_ns / 1000;
    auto& slot = weight[c.stack_id];
    slot.first = c.pid;
    slot.second += w;
    sum.rows += c.count;
  }
  std::vector<int64_t> ids;
  for (const auto& [id, pw] : weight) ids.push_back(id);
  std::map<std::string, int64_t> lines;  // folded stack → weight (distinct stacks, not rows)
  RETURN_IF_ERROR(ForEachStackFrames(
      reader, sum.window.session, ids,
      [&](int64_t id, const std::vector<StackFrameRow>& frames) {
        ++sum.stacks;
        const auto& [pid, w] = weight[id];
        auto p = session.processes.find(pid);
        std::string line = Clean(p == session.processes.end() || p->second.name.empty()
                                     ? "pid " + std::to_string(pid)
                                     : p->second.name);
        for (auto f = frames.rbegin(); f != frames.rend(); ++f) line += ";" + FrameText(*f);
        lines[line] += w;
      },
      &sum.malformed));
  for (const auto& [line, w] : lines) {
    if (w <= 0) continue;
    out->Write(line + " " + std::to_string(w) + "\n");
    ++sum.lines;
  }
  return sum;
}

}  // namespace gw
