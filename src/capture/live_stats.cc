#include "capture/live_stats.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "base/table.h"
#include "base/text.h"

namespace gw {

namespace {
constexpr int64_t kWindowSec = 5;
constexpr int64_t kNsPerSec = 1'000'000'000;
}  // namespace

int LatencyHistogram::Bucket(int64_t ns) {
  if (ns < 16) return ns < 0 ? 0 : static_cast<int>(ns);
  int e = 63 - __builtin_clzll(static_cast<uint64_t>(ns));  // ≥ 4
  int sub = static_cast<int>((static_cast<uint64_t>(ns) >> (e - 3)) & 7);
  return std::min(511, 16 + (e - 4) * 8 + sub);
}

int64_t LatencyHistogram::BucketUpper(int index) {
  if (index < 16) return index;
  int e = (index - 16) / 8 + 4;
  int sub = (index - 16) % 8;
  // Bucket covers [(8+sub) << (e-3), (9+sub) << (e-3)).
  return (static_cast<int64_t>(9 + sub) << (e - 3)) - 1;
}

void LatencyHistogram::Add(int64_t ns) {
  ++buckets_[static_cast<size_t>(Bucket(ns))];
  ++count_;
}

int64_t LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  int64_t rank = static_cast<int64_t>(q * static_cast<double>(count_ - 1)) + 1;
  int64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return BucketUpper(static_cast<int>(i));
  }
  return BucketUpper(511);
}

void LiveStats::AddEvents(const Event* events, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  events_ += static_cast<int64_t>(count);
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    OpState& s = ops_[static_cast<uint16_t>(e.op)];
    ++s.count;
    if (e.duration_ns > 0) s.hist.Add(e.duration_ns);
    Layer layer = OpLayer(e.op);
    if (layer == Layer::kCudaRuntime || layer == Layer::kCudaDriver) cuda_pids_.insert(e.pid);
    if (e.op != Op::kSchedSwitch || !tracked_.count(e.pid)) continue;
    int64_t sec = e.ts_ns / kNsPerSec;
    newest_sec_ = std::max(newest_sec_, sec);
    Second& second = seconds_[sec];
    int64_t runq = e.runq_ns == kNull ? 0 : e.runq_ns;
    second.runq_by_thread[{e.pid, e.tid}] += runq;
    if (e.other_pid != kNull && e.other_pid != 0 && !tracked_.count(static_cast<int32_t>(e.other_pid))) {
      int32_t other = static_cast<int32_t>(e.other_pid);
      if (e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) ++second.preemptions_by[other];
      second.runq_caused_by[other] += runq;
    }
  }
  while (!seconds_.empty() && seconds_.begin()->first < newest_sec_ - kWindowSec) {
    seconds_.erase(seconds_.begin());
  }
}

void LiveStats::AddOpCounts(const std::vector<OpCount>& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OpCount& c : counts) {
    ops_[static_cast<uint16_t>(c.op)].count += c.count;
    Layer layer = OpLayer(c.op);
    if (layer == Layer::kCudaRuntime || layer == Layer::kCudaDriver) cuda_pids_.insert(c.pid);
  }
}

void LiveStats::AddProcess(const ProcessInfo& process) {
  std::lock_guard<std::mutex> lock(mu_);
  // Names reach the live view (top preemptor, training process): escapes become '?'.
  if (!process.name.empty()) {
    names_[process.pid] = TerminalSafe(process.name);
  } else if (!process.comm.empty() && !names_.count(process.pid)) {
    names_[process.pid] = TerminalSafe(process.comm);
  }
  if (process.tracked) {
    tracked_.insert(process.pid);
    ever_tracked_.insert(process.pid);
  }
  if (process.exit_ts_ns != kNull) tracked_.erase(process.pid);
}

void LiveStats::SetSystem(const SystemSnapshot& snapshot) {
  std::lock_guard<std::mutex> lock(mu_);
  system_ = snapshot;
  have_system_ = true;
}

void LiveStats::SetDrops(int64_t drops) {
  std::lock_guard<std::mutex> lock(mu_);
  drops_ = drops;
}

std::string LiveStats::NameOfLocked(int32_t pid) const {
  auto it = names_.find(pid);
  return it == names_.end() ? "pid " + std::to_string(pid) : it->second;
}

std::string LiveStats::NameOf(int32_t pid) const {
  std::lock_guard<std::mutex> lock(mu_);
  return NameOfLocked(pid);
}

// The heuristic: over the last 5 s, the tracked thread with the most run-queue wait (threads
// of CUDA processes first); its share of wall time; and the non-tracked process that most
// often preempted tracked tasks (or, failing that, ran while they waited).
std::string LiveStats::Correlation() const {
  if (seconds_.empty()) return "no off-CPU activity of tracked tasks yet";
  std::map<std::pair<int32_t, int32_t>, int64_t> runq;
  std::map<int32_t, int64_t> preempt, caused;
  for (const auto& [sec, s] : seconds_) {
    if (sec < newest_sec_ - kWindowSec + 1) continue;
    for (const auto& [k, v] : s.runq_by_thread) runq[k] += v;
    for (const auto& [k, v] : s.preemptions_by) preempt[k] += v;
    for (const auto& [k, v] : s.runq_caused_by) caused[k] += v;
  }
  std::pair<int32_t, int32_t> worst{0, 0};
  int64_t worst_ns = -1;
  bool worst_cuda = false;
  for (const auto& [k, v] : runq) {
    bool cuda = cuda_pids_.count(k.first) > 0;
    if ((cuda && !worst_cuda) || (cuda == worst_cuda && v > worst_ns)) {
      worst = k;
      worst_ns = v;
      worst_cuda = cuda;
    }
  }
  if (worst_ns < 0) return "no off-CPU activity of tracked tasks yet";
  double pct = 100.0 * static_cast<double>(worst_ns) / static_cast<double>(kWindowSec * kNsPerSec);
  char head[256];
  std::snprintf(head, sizeof head, "%s pid %d (tid %d): %.0f%% of the last %llds runnable-but-waiting",
                worst_cuda ? "training" : "tracked", worst.first, worst.second, pct,
                static_cast<long long>(kWindowSec));
  std::string line = head;
  int32_t top = -1;
  int64_t top_count = 0;
  const int32_t self = static_cast<int32_t>(getpid());  // the tracer is never the culprit
  for (const auto& [pid, n] : preempt) {
    if (pid != self && pid > 0 && n > top_count) {
      top = pid;
      top_count = n;
    }
  }
  if (top >= 0) {
    line += "; top preemptor: " + NameOfLocked(top) + " (" + WithThousands(top_count) + "×)";
  } else {
    int64_t top_ns = 0;
    for (const auto& [pid, ns] : caused) {
      if (pid != self && pid > 0 && ns > top_ns) {
        top = pid;
        top_ns = ns;
      }
    }
    if (top >= 0) line += "; ran while they waited: " + NameOfLocked(top);
  }
  return line;
}

LiveSnapshot LiveStats::Snapshot(int64_t elapsed_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  LiveSnapshot s;
  s.elapsed_ns = elapsed_ns;
  s.system = system_;
  s.have_system = have_system_;
  s.events = events_;
  s.drops = drops_;
  s.tracked_processes = static_cast<int64_t>(tracked_.size());
  s.processes_ever_tracked = static_cast<int64_t>(ever_tracked_.size());
  // Tracked ones only: registration probes also see untracked CUDA processes.
  s.cuda_processes = 0;
  for (int32_t pid : cuda_pids_) s.cuda_processes += ever_tracked_.count(pid) ? 1 : 0;
  for (const auto& [id, st] : ops_) {
    std::optional<Op> op = OpFromId(id);
    if (!op) continue;
    OpRow row;
    row.op = *op;
    row.count = st.count;
    row.timed = st.hist.count();
    row.p50_ns = st.hist.Quantile(0.50);
    row.p95_ns = st.hist.Quantile(0.95);
    row.p99_ns = st.hist.Quantile(0.99);
    if (row.timed >= 20 && row.p50_ns > 0 && row.p99_ns > 10 * row.p50_ns) {
      row.flags = "tail " + std::to_string(row.p99_ns / row.p50_ns) + "x";
    }
    switch (OpLayer(*op)) {
      case Layer::kCudaRuntime:
        s.runtime.push_back(row);
        break;
      case Layer::kCudaDriver:
        s.driver.push_back(row);
        break;
      case Layer::kHost:
        s.host.push_back(row);
        break;
    }
  }
  s.correlation = Correlation();
  return s;
}

std::string FormatDurationNs(int64_t ns) {
  char buf[32];
  if (ns <= 0) return "-";
  if (ns < 1000) {
    std::snprintf(buf, sizeof buf, "%lldns", static_cast<long long>(ns));
  } else if (ns < 1'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fµs", static_cast<double>(ns) / 1e3);
  } else if (ns < 1'000'000'000) {
    std::snprintf(buf, sizeof buf, "%.1fms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2fs", static_cast<double>(ns) / 1e9);
  }
  return buf;
}

namespace {

std::string Bar(double pct, int width) {
  int filled = static_cast<int>(pct / 100.0 * width + 0.5);
  filled = std::clamp(filled, 0, width);
  std::string bar = "[";
  for (int i = 0; i < width; ++i) bar += i < filled ? "█" : "░";
  return bar + "]";
}

// At most `max_rows` rows (0: all), busiest first as the snapshot orders them; the rest are
// counted on one line.
void RenderTable(std::string& out, const char* title, const std::vector<OpRow>& rows,
                 size_t max_rows) {
  out += title;
  out += "\n";
  if (rows.empty()) {
    out += "  (no events)\n";
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line, "  %-22s %12s %10s %10s %10s  %s\n", "op", "count", "p50", "p95",
                "p99", "flags");
  out += line;
  size_t shown = max_rows == 0 || rows.size() <= max_rows ? rows.size() : max_rows - 1;
  for (size_t i = 0; i < shown; ++i) {
    const OpRow& r = rows[i];
    std::string name(OpName(r.op));
    std::snprintf(line, sizeof line, "  %-22s %12s %10s %10s %10s  %s\n", name.c_str(),
                  WithThousands(r.count).c_str(), FormatDurationNs(r.p50_ns).c_str(),
                  FormatDurationNs(r.p95_ns).c_str(), FormatDurationNs(r.p99_ns).c_str(),
                  r.flags.c_str());
    out += line;
  }
  if (shown < rows.size()) out += "  … " + std::to_string(rows.size() - shown) + " more ops\n";
}

}  // namespace

std::string RenderLiveView(const LiveSnapshot& s, int width, int height) {
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "gpuwhy trace — %llds · %s events · %lld drops · %lld tracked processes\n",
                static_cast<long long>(s.elapsed_ns / kNsPerSec), WithThousands(s.events).c_str(),
                static_cast<long long>(s.drops), static_cast<long long>(s.tracked_processes));
  out += line;
  if (s.have_system && width < 96) {  // no room for the bars
    const SystemSnapshot& x = s.system;
    std::snprintf(line, sizeof line,
                  "System: CPU %.1f%% | Memory %.1f%% | Load %.1f (%lld cores) | Swap %lld MB\n",
                  x.cpu_pct, x.mem_pct, x.load1, static_cast<long long>(x.cores),
                  static_cast<long long>(x.swap_used_bytes >> 20));
    out += line;
  } else if (s.have_system) {
    const SystemSnapshot& x = s.system;
    std::snprintf(line, sizeof line,
                  "System: CPU %s %5.1f%% | Memory %s %5.1f%% | Load: %.1f (%lld cores) | Swap: "
                  "%lld MB\n",
                  Bar(x.cpu_pct, 10).c_str(), x.cpu_pct, Bar(x.mem_pct, 10).c_str(), x.mem_pct,
                  x.load1, static_cast<long long>(x.cores),
                  static_cast<long long>(x.swap_used_bytes >> 20));
    out += line;
  } else {
    out += "System: (first sample in a second)\n";
  }
  out += "\n";
  // The three tables share what the screen has left: header, system, blanks, 3 titles, 3
  // column headings and the correlation line take 10, the caller's notes up to 4.
  size_t max_rows = 0;
  if (height > 0) max_rows = static_cast<size_t>(std::max(2, (height - 14) / 3));
  RenderTable(out, "CUDA Runtime", s.runtime, max_rows);
  RenderTable(out, "CUDA Driver", s.driver, max_rows);
  RenderTable(out, "Host", s.host, max_rows);
  out += "\n→ " + s.correlation + "\n";
  return out;
}

std::string RenderStatusLine(const LiveSnapshot& s) {
  char line[512];
  int64_t cuda = 0, host = 0;
  for (const OpRow& r : s.runtime) cuda += r.count;
  for (const OpRow& r : s.driver) cuda += r.count;
  for (const OpRow& r : s.host) host += r.count;
  std::snprintf(line, sizeof line,
                "[%llds] events=%lld cuda_calls=%lld host=%lld drops=%lld tracked=%lld cpu=%.1f%% | %s",
                static_cast<long long>(s.elapsed_ns / kNsPerSec), static_cast<long long>(s.events),
                static_cast<long long>(cuda), static_cast<long long>(host),
                static_cast<long long>(s.drops), static_cast<long long>(s.tracked_processes),
                s.system.cpu_pct, s.correlation.c_str());
  return line;
}

}  // namespace gw
