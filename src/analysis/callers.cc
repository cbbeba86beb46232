#include "analysis/callers.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "analysis/facts.h"
#include "analysis/format.h"
#include "base/text.h"
#include "store/db_location.h"

namespace gw {

namespace {

constexpr size_t kMaxOps = 3;    // caller sections
constexpr size_t kMaxSites = 5;  // sites per section
constexpr size_t kMaxSourceChars = 120;
// Source files are read up to this size for their lines (a script is far smaller).
constexpr size_t kMaxSourceFileBytes = 64 << 20;

// Library code: installed packages and the interpreter's standard library
// (".../lib/python3.12/..."), plus pseudo-files such as "<frozen runpy>".
bool IsLibraryFile(const std::string& file) {
  if (file.empty() || file[0] == '<') return true;
  return file.find("/site-packages/") != std::string::npos ||
         file.find("/dist-packages/") != std::string::npos ||
         file.find("/lib/python") != std::string::npos;
}

std::string BaseName(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The CUDA libraries themselves: the probed function and what it calls are never the caller.
bool IsCudaLibrary(const std::string& module) {
  std::string base = BaseName(module);
  return base.rfind("libcudart.so", 0) == 0 || base.rfind("libcuda.so", 0) == 0;
}

// "torch/cuda/__init__.py" for a file inside a package directory, else the base name.
std::string LibraryPath(const std::string& path) {
  for (const char* marker : {"/site-packages/", "/dist-packages/"}) {
    size_t at = path.find(marker);
    if (at != std::string::npos) return path.substr(at + std::string(marker).size());
  }
  return BaseName(path);
}

std::string NativeName(const StackFrameRow& f) {
  if (!f.function.empty()) return f.function;
  return f.module.empty() ? std::string("?") : BaseName(f.module);
}

// A demangled C++ name without template arguments, parameters, return type and clone suffix:
// "void at::native::gpu_reduce_kernel<float, …>(at::TensorIterator&, …) [clone .isra.0]" →
// "at::native::gpu_reduce_kernel". Names without brackets come back unchanged.
std::string ShortFunctionName(const std::string& name) {
  std::string out;
  int depth = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    char c = name[i];
    if (depth == 0 && out.size() >= 8 && out.compare(out.size() - 8, 8, "operator") == 0) {
      // The operator's own symbol: "operator()", "operator[]", "operator<<", "operator==".
      if (name.compare(i, 2, "()") == 0) {
        out += "()";
        ++i;
        continue;
      }
      size_t end = name.find_first_not_of("[]<>=!+-*/%^&|~,", i);
      if (end == std::string::npos) end = name.size();
      if (end > i) {
        out += name.substr(i, end - i);
        i = end - 1;
        continue;
      }
    }
    if (c == '[' && depth == 0) break;  // " [clone .constprop.0]"
    if (c == '<' || c == '(') {
      ++depth;
    } else if ((c == '>' || c == ')') && depth > 0) {
      --depth;
    } else if (depth == 0) {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  size_t space = out.rfind(' ');  // drop a return type: "void ns::f" -> "ns::f"
  if (space != std::string::npos) out = out.substr(space + 1);
  return out.empty() ? name : out;
}

struct SiteTotals {
  CallSite site;
  std::map<std::string, int> process_counts;  // name → processes
  std::set<int32_t> pids;
};

std::string ProcessesLabel(const WindowData& w, const std::set<int32_t>& pids) {
  std::map<std::string, int> names;
  for (int32_t pid : pids) names[ProcessName(w, pid)]++;
  std::string out;
  for (const auto& [name, n] : names) {
    if (!out.empty()) out += ", ";
    out += n > 1 ? name + " ×" + std::to_string(n) : name;
  }
  return out;
}

// Callers rank by time in the call. Victims rank by preemptions first (the lines that lose the
// CPU to contention), then by off-CPU time (where threads wait).
void Finish(const WindowData& w, std::map<std::string, SiteTotals>& sites, bool victims,
            CallerSection* out) {
  std::vector<SiteTotals*> order;
  for (auto& [key, s] : sites) order.push_back(&s);
  std::sort(order.begin(), order.end(), [victims](const SiteTotals* a, const SiteTotals* b) {
    if (victims && a->site.preempted != b->site.preempted) {
      return a->site.preempted > b->site.preempted;
    }
    if (a->site.total_ms != b->site.total_ms) return a->site.total_ms > b->site.total_ms;
    if (a->site.count != b->site.count) return a->site.count > b->site.count;
    return a->site.location < b->site.location;
  });
  for (SiteTotals* s : order) {
    if (out->sites.size() >= kMaxSites) break;
    CallSite site = s->site;
    site.avg_ms = site.count > 0 ? site.total_ms / static_cast<double>(site.count) : 0;
    site.processes = ProcessesLabel(w, s->pids);
    out->sites.push_back(std::move(site));
  }
}

}  // namespace

StackSite PickStackSite(const std::vector<StackFrameRow>& frames) {
  int site = -1;
  int innermost_py = -1;
  for (size_t i = 0; i < frames.size(); ++i) {
    if (!frames[i].python) continue;
    if (innermost_py < 0) innermost_py = static_cast<int>(i);
    if (!IsLibraryFile(frames[i].file)) {
      site = static_cast<int>(i);
      break;
    }
  }
  if (site < 0) site = innermost_py;
  for (size_t i = 0; site < 0 && i < frames.size(); ++i) {
    if (!frames[i].file.empty() && frames[i].line > 0 && !IsCudaLibrary(frames[i].module)) {
      site = static_cast<int>(i);
    }
  }
  for (size_t i = 0; site < 0 && i < frames.size(); ++i) {
    if (!frames[i].function.empty() && !IsCudaLibrary(frames[i].module)) {
      site = static_cast<int>(i);
    }
  }
  StackSite out;
  if (frames.empty()) {
    out.key = out.display.location = "(no frames)";
    return out;
  }
  if (site < 0) site = 0;
  const StackFrameRow& f = frames[static_cast<size_t>(site)];
  CallSite& d = out.display;
  d.function = f.python ? f.function : NativeName(f);
  if (!f.file.empty() && f.line > 0) {
    d.file = f.file;
    d.line = f.line;
    d.location = BaseName(f.file) + ":" + std::to_string(f.line);
    out.key = f.file + ":" + std::to_string(f.line);
  } else {
    d.location = f.python ? f.function : ShortFunctionName(NativeName(f));
    out.key = f.python ? f.function : NativeName(f) + "@" + f.module;
  }
  if (innermost_py >= 0 && innermost_py < site) {
    const StackFrameRow& lib = frames[static_cast<size_t>(innermost_py)];
    d.via = lib.function + " (" + LibraryPath(lib.file) + ":" + std::to_string(lib.line) + ")";
    // The same user line reached through different library code (the training loop waiting
    // in DataLoader.__next__, a worker forked from that line waiting in its own loop) is two
    // sites, not one.
    out.key += " via " + lib.function + " " + lib.file;
  }
  return out;
}

std::string SiteName(const CallSite& s) {
  // A native site without line info is named by its function already (shortened; JSON keeps
  // the whole name).
  if (s.function.empty() || s.function == s.location || s.file.empty()) return s.location;
  // Demangled C++ names can run to hundreds of characters; JSON keeps the whole name.
  constexpr size_t kMaxFunction = 60;
  std::string function = s.function;
  if (function.size() > kMaxFunction) function = function.substr(0, kMaxFunction - 3) + "...";
  return s.location + " in " + function;
}

void AddCallerSections(const WindowData& w, const std::set<int32_t>& pids, Report* report) {
  if (w.stack_uses.empty() || pids.empty()) return;
  std::unordered_map<int64_t, StackSite> site_of;  // stack id → site
  auto site_for = [&](int64_t stack_id) -> const StackSite& {
    auto it = site_of.find(stack_id);
    if (it != site_of.end()) return it->second;
    auto frames = w.stack_frames.find(stack_id);
    StackSite s = frames != w.stack_frames.end() ? PickStackSite(frames->second) : StackSite{};
    if (frames == w.stack_frames.end()) s.key = s.display.location = "(stack not stored)";
    return site_of.emplace(stack_id, std::move(s)).first->second;
  };

  struct OpTotals {
    int64_t count = 0;
    int64_t total_ns = 0;
    std::map<std::string, SiteTotals> sites;
  };
  std::map<Op, OpTotals> by_op;
  for (const StackUse& u : w.stack_uses) {
    if (!pids.count(u.pid)) continue;
    OpTotals& t = by_op[u.op];
    t.count += u.count;
    t.total_ns += u.total_ns;
    const StackSite& s = site_for(u.stack_id);
    SiteTotals& st = t.sites[s.key];
    if (st.site.count == 0) st.site = s.display;
    st.site.count += u.count;
    st.site.total_ms += static_cast<double>(u.total_ns) / 1e6;
    st.site.max_ms = std::max(st.site.max_ms, static_cast<double>(u.max_ns) / 1e6);
    st.site.preempted += u.preempted;
    if (u.op == Op::kSchedSwitch) st.site.blocked += u.count - u.preempted;
    st.pids.insert(u.pid);
  }

  // CUDA ops by time; a driver call nested in a runtime call has the runtime call's stack, so
  // driver ops are shown only when no runtime op has stacks (driver-only applications).
  bool any_runtime = false;
  for (const auto& [op, t] : by_op) any_runtime |= OpLayer(op) == Layer::kCudaRuntime;
  std::vector<std::pair<Op, OpTotals*>> ops;
  for (auto& [op, t] : by_op) {
    Layer layer = OpLayer(op);
    if (layer == Layer::kHost) continue;
    if (any_runtime && layer == Layer::kCudaDriver) continue;
    ops.push_back({op, &t});
  }
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
    if (a.second->total_ns != b.second->total_ns) return a.second->total_ns > b.second->total_ns;
    return a.second->count > b.second->count;
  });
  for (auto& [op, t] : ops) {
    if (report->callers.size() >= kMaxOps) break;
    CallerSection section;
    section.op = std::string(OpName(op));
    section.with_stacks = t->count;
    Finish(w, t->sites, false, &section);
    report->callers.push_back(std::move(section));
  }
  if (auto it = by_op.find(Op::kSchedSwitch); it != by_op.end()) {
    report->sched_victims.op = std::string(OpName(Op::kSchedSwitch));
    report->sched_victims.with_stacks = it->second.count;
    Finish(w, it->second.sites, true, &report->sched_victims);
  }
}

namespace {

// The lines of a traced job's source file, empty when it cannot be read. The path is the job's
// to choose (a code object may claim to come from /etc/shadow), and explain runs as root: under
// sudo the file is read with the invoking user's identity, so the report shows only what that
// user could read anyway, and only a regular file is read (a FIFO or a device would block or
// never end).
std::vector<std::string> ReadSourceLines(const std::string& path) {
  std::vector<std::string> lines;
  StatusOr<std::string> read = ReadFileAsInvokingUser(path, kMaxSourceFileBytes, path);
  if (!read.ok()) return lines;
  const std::string& text = *read;
  for (size_t begin = 0; begin < text.size();) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(begin, end - begin));
    begin = end + 1;
  }
  return lines;
}

}  // namespace

void FillSourceLines(Report* report) {
  std::map<std::string, std::vector<std::string>> files;  // path → lines (empty: unreadable)
  auto fill = [&](CallSite& site) {
    if (site.file.empty() || site.line <= 0) return;
    auto it = files.find(site.file);
    if (it == files.end()) it = files.emplace(site.file, ReadSourceLines(site.file)).first;
    if (static_cast<size_t>(site.line) > it->second.size()) return;
    std::string text = it->second[static_cast<size_t>(site.line) - 1];
    size_t begin = text.find_first_not_of(" \t");
    size_t end = text.find_last_not_of(" \t\r");
    if (begin == std::string::npos) return;
    text = text.substr(begin, end - begin + 1);
    if (text.size() > kMaxSourceChars) text = text.substr(0, kMaxSourceChars - 3) + "...";
    site.source_line = TerminalSafe(text);  // the file's text is the job's: one line, no escapes
  };
  for (CallerSection& section : report->callers) {
    for (CallSite& site : section.sites) fill(site);
  }
  for (CallSite& site : report->sched_victims.sites) fill(site);
  for (CpuProfileSection& section : report->cpu_profiles) {
    for (CallSite& site : section.sites) fill(site);
  }
}

}  // namespace gw
