#include "export/perfetto_export.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <queue>
#include <set>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/explain.h"
#include "base/saturating.h"
#include "export/output_file.h"
#include "export/perfetto_trace.h"
#include "export/process_tree.h"
#include "store/export_rows.h"

namespace gw {

namespace {

using perfetto::Arg;
using perfetto::EventType;

// Track uuids: a kind in the top byte, the pid / tid / cpu / index below.
constexpr uint64_t kProcessTrack = 1ULL << 56;
constexpr uint64_t kThreadTrack = 2ULL << 56;
constexpr uint64_t kStateTrack = 3ULL << 56;
constexpr uint64_t kCpuTrack = 4ULL << 56;
constexpr uint64_t kCpuGroupTrack = (4ULL << 56) | 0xffffffffULL;
constexpr uint64_t kLaunchCounterTrack = 5ULL << 56;
constexpr uint64_t kFindingsTrack = 6ULL << 56;
constexpr uint64_t kNotesTrack = 7ULL << 56;
constexpr uint64_t kGpuGroupTrack = 8ULL << 56;  // | gpu << 8 | metric (0: the GPU's group)

uint64_t Id32(int64_t v) { return static_cast<uint64_t>(v) & 0xffffffffULL; }

const char* SwitchStateName(int64_t kind) {
  switch (kind) {
    case 0:
      return "preempted";
    case 1:
      return "blocked";
    case 2:
      return "blocked in I/O";
    case 3:
      return "page fault (major)";
    default:
      return "off CPU";
  }
}

constexpr const char* kRunnableName = "runnable (waiting for CPU)";
constexpr const char* kRunningName = "running";

std::string Hex(int64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string Join(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

class Exporter {
 public:
  Exporter(const ExportSession& session, const SessionWindow& window, OutputFile* out,
           PerfettoExportSummary* summary)
      : session_(session), window_(window), out_(out), sum_(summary) {}

  void SetRoles(std::map<int32_t, std::string> roles) { roles_ = std::move(roles); }
  void SetPidFilter(std::set<int32_t> pids) { pids_ = std::move(pids); }

  void Begin(int32_t training_pid) {
    Emit(perfetto::ClockSnapshotPacket(Wall(window_.begin_ns), true));
    if (training_pid != 0) EnsureProcess(training_pid);
    BuildCounterSamples();
    for (const auto& [pid, p] : session_.processes) {
      if (p.exit_ts != kNull && p.exit_ts >= window_.begin_ns)
        exits_.push_back({Wall(p.exit_ts), pid});
    }
    std::sort(exits_.begin(), exits_.end());
  }

  void AddNotes(const std::vector<std::string>& notes) {
    EmitTrack(perfetto::TrackPacket(kNotesTrack, 0, "gpuwhy notes"));
    std::vector<Arg> args = {
        Arg::Int("session", session_.session),
        Arg::Str("host", session_.host),
        Arg::Str("window", window_.label),
        Arg::Int("events_dropped", session_.drops),
        Arg::Str("drops_detail", session_.drops_detail.empty() ? "{}" : session_.drops_detail),
        Arg::Int("rows_in_window", session_.rows_in_window),
        Arg::Str("launches",
                 session_.launch_duty > 1
                     ? "launch rows are sampled (about 1 in 32 calls carries a row); launches "
                       "were counted in 1 s of every " +
                           std::to_string(session_.launch_duty) +
                           " (trace --launch-duty): each CUDA launches/s value is a counted "
                           "second, held until the next"
                     : std::string("launch rows are sampled (about 1 in 32 calls carries a "
                                   "row); the CUDA launches/s counters count every call "
                                   "(op_seconds)")),
        Arg::Str("recorded_by", session_.gpuwhy_version),
    };
    if (!notes.empty()) args.push_back(Arg::Str("explain_notes", Join(notes)));
    std::string name = session_.drops == 0
                           ? "no events dropped"
                           : std::to_string(session_.drops) + " events dropped (see args)";
    Schedule(Wall(window_.begin_ns), 1,
             perfetto::EventPacket(Wall(window_.begin_ns), EventType::kInstant, kNotesTrack, name,
                                   "gpuwhy", args));
    ++sum_->instants;
  }

  void AddFindings(const Report& report) {
    if (report.findings.empty()) return;
    EmitTrack(perfetto::TrackPacket(kFindingsTrack, 0, "gpuwhy findings"));
    uint64_t begin = Wall(report.window.from_ns);
    uint64_t end = std::max(Wall(report.window.to_ns), begin + 1);
    for (size_t i = 0; i < report.findings.size(); ++i) {
      const Finding& f = report.findings[i];
      uint64_t track = kFindingsTrack | (i + 1);
      std::string title = std::string("[") + SeverityName(f.severity) + "] " + f.cause;
      EmitTrack(perfetto::TrackPacket(track, kFindingsTrack, std::to_string(i + 1) + ". " + title));
      std::vector<Arg> args = {Arg::Str("rule", f.rule),
                               Arg::Str("severity", SeverityName(f.severity)),
                               Arg::Str("cause", f.cause),
                               Arg::Str("effect", f.effect),
                               Arg::Str("root", Join(f.root)),
                               Arg::Str("effects", Join(f.effects)),
                               Arg::Str("fix", Join(f.fix)),
                               Arg::Double("lost_s", f.lost_s),
                               Arg::Str("evidence_window", report.window.label)};
      if (!f.contributing.empty()) args.push_back(Arg::Str("contributing", Join(f.contributing)));
      for (const Metric& m : f.metrics) {
        args.push_back(
            Arg::Double("metric." + m.name + (m.unit.empty() ? "" : "_" + m.unit), m.value));
      }
      // A host-side finding is drawn over the seconds its cause held the job; the others span the
      // window their evidence covers.
      std::vector<std::pair<uint64_t, uint64_t>> spans;
      for (const TimeInterval& t : f.intervals) {
        uint64_t a = Wall(t.begin_ns);
        spans.push_back({a, std::max(Wall(t.end_ns), a + 1)});
      }
      if (spans.empty()) spans.push_back({begin, end});
      for (const auto& [a, b] : spans) {
        Schedule(a, 1,
                 perfetto::EventPacket(a, EventType::kSliceBegin, track, title + " → " + f.effect,
                                       "finding", args));
        Schedule(b, 0, perfetto::SliceEndPacket(b, track));
        ++sum_->slices;
      }
      ++sum_->findings;
    }
  }

  void Row(const ExportEvent& e) {
    ++sum_->rows;
    EmitCountersBefore(Wall(e.ts_ns));
    CloseRunningAtExitsBefore(Wall(e.ts_ns));
    FlushBefore(Wall(e.ts_ns));
    if (!pids_.empty() && pids_.count(e.pid) == 0) return;
    if (e.op == Op::kSchedSwitch) {
      OffCpu(e);
      return;
    }
    if (OpLayer(e.op) != Layer::kHost) {
      CudaCall(e);
      return;
    }
    HostEvent(e);
  }

  void Finish() {
    EmitCountersBefore(UINT64_MAX);
    CloseRunningAtExitsBefore(Wall(window_.end_ns));
    // Close every "running" interval still open at the window's end (exits inside the window
    // closed theirs already).
    for (auto& [tid, t] : threads_) {
      if (!t.running_since) continue;
      uint64_t w = std::max(Wall(window_.end_ns), *t.running_since + 1);
      Schedule(w, 0, perfetto::SliceEndPacket(w, kStateTrack | Id32(tid)));
      t.running_since.reset();
    }
    FlushBefore(UINT64_MAX);
  }

 private:
  struct ThreadState {
    int32_t pid = 0;
    bool state_track = false;
    std::vector<uint64_t> open_ends;  // the thread track's open slices (nesting)
    uint64_t state_busy_until = 0;    // the state track's last scheduled end
    std::optional<uint64_t> running_since;
  };

  struct Pending {
    uint64_t ts;
    int prio;       // 0 = slice end (first at equal ts), 1 = everything else
    int64_t order;  // insertion order; reversed for ends so inner slices end first
    std::string packet;
    bool operator>(const Pending& o) const {
      if (ts != o.ts) return ts > o.ts;
      if (prio != o.prio) return prio > o.prio;
      return order > o.order;
    }
  };

  uint64_t Wall(int64_t ts) const {
    int64_t w = SaturatingAdd(session_.wall_start_ns, ts);
    return w < 0 ? 0 : static_cast<uint64_t>(w);
  }

  void Emit(const std::string& packet) {
    frame_.clear();
    perfetto::AppendFramedPacket(packet, &frame_);
    out_->Write(frame_);
    ++sum_->packets;
  }
  void EmitTrack(const std::string& packet) {
    Emit(packet);
    ++sum_->tracks;
  }

  void Schedule(uint64_t ts, int prio, std::string packet) {
    ++order_;
    pending_.push(Pending{ts, prio, prio == 0 ? -order_ : order_, std::move(packet)});
  }

  void FlushBefore(uint64_t ts) {
    while (!pending_.empty() && pending_.top().ts < ts) {
      Emit(pending_.top().packet);
      pending_.pop();
    }
    if (ts == UINT64_MAX) {
      while (!pending_.empty()) {
        Emit(pending_.top().packet);
        pending_.pop();
      }
    }
  }

  std::string ProcessName(int32_t pid) const {
    auto p = session_.processes.find(pid);
    return p == session_.processes.end() || p->second.name.empty() ? "pid " + std::to_string(pid)
                                                                   : p->second.name;
  }

  void EnsureProcess(int32_t pid) {
    if (!processes_.insert(pid).second) return;
    std::string name = ProcessName(pid);
    auto r = roles_.find(pid);
    if (r != roles_.end() && r->second != "other") name += " [" + r->second + "]";
    auto p = session_.processes.find(pid);
    // In a container: which one, and the pid it has there (what docker exec / kubectl exec see).
    if (p != session_.processes.end()) {
      const ProcessRecord& pr = p->second;
      std::string where = !pr.container_id.empty() ? "container " + pr.container_id.substr(0, 12)
                          : !pr.pod_uid.empty()    ? "pod " + pr.pod_uid
                                                   : "";
      if (pr.ns_pid > 0 && pr.ns_pid != pid) {
        where += (where.empty() ? "" : ", ") + ("pid " + std::to_string(pr.ns_pid) + " there");
      }
      if (!where.empty()) name += " (" + where + ")";
    }
    EmitTrack(perfetto::ProcessTrackPacket(
        kProcessTrack | Id32(pid), pid, name,
        p == session_.processes.end() ? std::string() : p->second.cmdline));
  }

  ThreadState& EnsureThread(int32_t pid, int32_t tid) {
    auto it = threads_.find(tid);
    if (it != threads_.end()) return it->second;
    EnsureProcess(pid);
    std::string name = ProcessName(pid);
    if (tid != pid) name += " tid " + std::to_string(tid);
    EmitTrack(perfetto::ThreadTrackPacket(kThreadTrack | Id32(tid), pid, tid, name));
    ThreadState& t = threads_[tid];
    t.pid = pid;
    return t;
  }

  // A slice on a thread's own track, kept nested: a slice that would outlast the slice it
  // starts inside is shortened to end with it.
  void NestedSlice(ThreadState& t, uint64_t track, uint64_t begin, uint64_t end,
                   const std::string& name, const char* category, const std::vector<Arg>& args) {
    while (!t.open_ends.empty() && t.open_ends.back() <= begin) t.open_ends.pop_back();
    if (!t.open_ends.empty() && end > t.open_ends.back()) {
      end = t.open_ends.back();
      ++sum_->clipped;
    }
    if (end <= begin) {
      ++sum_->clipped;
      return;
    }
    t.open_ends.push_back(end);
    Schedule(begin, 1,
             perfetto::EventPacket(begin, EventType::kSliceBegin, track, name, category, args));
    Schedule(end, 0, perfetto::SliceEndPacket(end, track));
    ++sum_->slices;
  }

  void CudaCall(const ExportEvent& e) {
    ThreadState& t = EnsureThread(e.pid, e.tid);
    std::vector<Arg> args;
    if (!e.name.empty()) args.push_back(Arg::Str(IsLaunch(e.op) ? "kernel" : "name", e.name));
    if (e.bytes != kNull) args.push_back(Arg::Int("bytes", e.bytes));
    if (IsMemcpy(e.op) && e.kind != kNull) {
      std::string dir(CopyKindName(e.kind & ~kCopyPinnedHost));
      args.push_back(Arg::Str("direction", dir + ((e.kind & kCopyPinnedHost) ? " (pinned)" : "")));
    }
    if (e.ret != kNull) args.push_back(Arg::Int("ret", e.ret));
    if (e.addr != kNull)
      args.push_back(Arg::Str(IsSync(e.op) || IsMemcpy(e.op) || IsLaunch(e.op) ? "stream" : "addr",
                              Hex(e.addr)));
    if (e.stack_id != kNull) args.push_back(Arg::Str("stack_id", Hex(e.stack_id)));
    args.push_back(Arg::Int("duration_ns", e.duration_ns));
    uint64_t begin = Wall(e.ts_ns);
    int64_t before = sum_->slices;
    NestedSlice(t, kThreadTrack | Id32(e.tid), begin, begin + std::max<int64_t>(e.duration_ns, 1),
                std::string(OpName(e.op)), "cuda", args);
    sum_->cuda_slices += sum_->slices - before;
  }

  void HostEvent(const ExportEvent& e) {
    switch (e.op) {
      case Op::kProcExec:
      case Op::kProcFork:
      case Op::kProcExit:
      case Op::kOomKill: {
        EnsureProcess(e.pid);
        std::vector<Arg> args = {Arg::Int("tid", e.tid)};
        if (e.other_pid != kNull) args.push_back(Arg::Int("other_pid", e.other_pid));
        if (e.ret != kNull) args.push_back(Arg::Int("ret", e.ret));
        if (!e.name.empty()) args.push_back(Arg::Str("name", e.name));
        Schedule(
            Wall(e.ts_ns), 1,
            perfetto::EventPacket(Wall(e.ts_ns), EventType::kInstant, kProcessTrack | Id32(e.pid),
                                  std::string(OpName(e.op)), "process", args));
        ++sum_->instants;
        return;
      }
      case Op::kPageFault:
      case Op::kMajorFault:
      case Op::kFileFault: {
        EnsureThread(e.pid, e.tid);
        std::vector<Arg> args;
        if (e.addr != kNull) args.push_back(Arg::Str("addr", Hex(e.addr)));
        if (!e.name.empty()) args.push_back(Arg::Str("file", e.name));
        Schedule(
            Wall(e.ts_ns), 1,
            perfetto::EventPacket(Wall(e.ts_ns), EventType::kInstant, kThreadTrack | Id32(e.tid),
                                  std::string(OpName(e.op)), "fault", args));
        ++sum_->instants;
        return;
      }
      default: {  // block_io, read, direct_reclaim: intervals on the thread's track
        ThreadState& t = EnsureThread(e.pid, e.tid);
        std::vector<Arg> args;
        if (e.bytes != kNull) args.push_back(Arg::Int("bytes", e.bytes));
        if (e.kind != kNull && e.op == Op::kBlockIo) {
          args.push_back(Arg::Str("direction", e.kind == 0   ? "read"
                                               : e.kind == 1 ? "write"
                                                             : "other"));
        }
        if (!e.name.empty()) args.push_back(Arg::Str("file", e.name));
        args.push_back(Arg::Int("duration_ns", e.duration_ns));
        uint64_t begin = Wall(e.ts_ns);
        NestedSlice(t, kThreadTrack | Id32(e.tid), begin,
                    begin + std::max<int64_t>(e.duration_ns, 1), std::string(OpName(e.op)), "host",
                    args);
        return;
      }
    }
  }

  // A process that exited stops running then: its threads' open "running" intervals end at the
  // exit, in timestamp order with everything else.
  void CloseRunningAtExitsBefore(uint64_t ts) {
    for (; next_exit_ < exits_.size() && exits_[next_exit_].first < ts; ++next_exit_) {
      const auto& [at, pid] = exits_[next_exit_];
      for (auto& [tid, t] : threads_) {
        if (t.pid != pid || !t.running_since) continue;
        uint64_t end = std::max(at, *t.running_since + 1);
        Schedule(end, 0, perfetto::SliceEndPacket(end, kStateTrack | Id32(tid)));
        t.state_busy_until = std::max(t.state_busy_until, end);
        t.running_since.reset();
      }
    }
  }

  void StatePiece(uint64_t track, uint64_t begin, uint64_t end, const std::string& name,
                  const std::vector<Arg>& args) {
    Schedule(begin, 1,
             perfetto::EventPacket(begin, EventType::kSliceBegin, track, name, "sched", args));
    Schedule(end, 0, perfetto::SliceEndPacket(end, track));
    ++sum_->slices;
    ++sum_->state_slices;
  }

  void OffCpu(const ExportEvent& e) {
    ThreadState& t = EnsureThread(e.pid, e.tid);
    const uint64_t track = kStateTrack | Id32(e.tid);
    if (!t.state_track) {
      EmitTrack(perfetto::TrackPacket(track, kThreadTrack | Id32(e.tid), "state"));
      t.state_track = true;
    }
    uint64_t begin = Wall(e.ts_ns);
    uint64_t end = begin + static_cast<uint64_t>(std::max<int64_t>(e.duration_ns, 1));
    if (t.running_since) {  // the thread ran from its last wake-up until now
      if (begin > *t.running_since) {
        Schedule(begin, 0, perfetto::SliceEndPacket(begin, track));
      } else {
        // Cannot happen with ordered, non-overlapping rows; end it 1 ns after it began.
        Schedule(*t.running_since + 1, 0, perfetto::SliceEndPacket(*t.running_since + 1, track));
        t.state_busy_until = std::max(t.state_busy_until, *t.running_since + 1);
      }
      t.running_since.reset();
    }
    if (begin < t.state_busy_until) {  // overlaps the previous interval: keep the track flat
      ++sum_->clipped;
      begin = t.state_busy_until;
      if (begin >= end) return;
    }
    int64_t runq = e.runq_ns == kNull ? 0 : std::clamp<int64_t>(e.runq_ns, 0, e.duration_ns);
    uint64_t runnable_at = std::max(begin, end - static_cast<uint64_t>(runq));
    std::vector<Arg> args;
    if (e.kind != kNull) args.push_back(Arg::Int("kind", e.kind));
    if (e.cpu != kNull) args.push_back(Arg::Int("cpu", e.cpu));
    if (e.other_pid != kNull) {
      args.push_back(Arg::Int("cpu_taken_by_pid", e.other_pid));
      // The name only where it matters, preemptions: it is most of a state slice's bytes.
      if (e.kind == 0) {
        args.push_back(Arg::Str("cpu_taken_by", ProcessName(static_cast<int32_t>(e.other_pid))));
      }
    }
    if (e.waker_pid != kNull) {
      args.push_back(Arg::Int("woken_by_pid", e.waker_pid));
      args.push_back(Arg::Int("woken_by_tid", e.waker_tid == kNull ? 0 : e.waker_tid));
    }
    args.push_back(Arg::Int("off_cpu_ns", e.duration_ns));
    args.push_back(Arg::Int("runq_ns", runq));
    if (e.stack_id != kNull) args.push_back(Arg::Str("stack_id", Hex(e.stack_id)));
    if (runnable_at > begin) StatePiece(track, begin, runnable_at, SwitchStateName(e.kind), args);
    if (end > runnable_at) {
      // The runnable part after a sleep repeats only what differs; after a preemption it is the
      // whole interval and carries everything.
      StatePiece(track, runnable_at, end, kRunnableName,
                 runnable_at > begin ? std::vector<Arg>{Arg::Int("runq_ns", runq)} : args);
    }
    t.state_busy_until = end;
    auto p = session_.processes.find(e.pid);
    // A row after the recorded exit (threads outliving the exit event) starts no running
    // interval: its end would be before packets already written.
    if (p != session_.processes.end() && p->second.tracked &&
        (p->second.exit_ts == kNull || Wall(p->second.exit_ts) > end)) {
      // Tracked tasks have a row for every off-CPU interval: between two, the task ran.
      Schedule(
          end, 1,
          perfetto::EventPacket(end, EventType::kSliceBegin, track, kRunningName, "sched", {}));
      t.running_since = end;
      ++sum_->slices;
      ++sum_->state_slices;
    }
    if (e.kind == 0 && e.other_pid != kNull && e.other_pid > 0 && e.other_pid != e.pid &&
        e.cpu != kNull) {
      Preemption(e, Wall(e.ts_ns), end);
    }
  }

  // The process that took a CPU from a traced thread, on that CPU's track, for as long as the
  // thread waited.
  void Preemption(const ExportEvent& e, uint64_t begin, uint64_t end) {
    if (!cpu_group_) {
      EmitTrack(perfetto::TrackPacket(kCpuGroupTrack, 0, "CPUs: who preempted traced threads"));
      cpu_group_ = true;
    }
    uint64_t track = kCpuTrack | Id32(e.cpu);
    auto [it, fresh] = cpu_busy_until_.try_emplace(e.cpu, 0);
    if (fresh) {
      EmitTrack(perfetto::TrackPacket(track, kCpuGroupTrack, "CPU " + std::to_string(e.cpu)));
    }
    if (begin < it->second) {
      ++sum_->clipped;
      begin = it->second;
      if (begin >= end) return;
    }
    it->second = end;
    int32_t other = static_cast<int32_t>(e.other_pid);
    std::vector<Arg> args = {Arg::Int("pid", other), Arg::Int("preempted_pid", e.pid),
                             Arg::Int("preempted_tid", e.tid),
                             Arg::Str("preempted", ProcessName(e.pid))};
    Schedule(begin, 1,
             perfetto::EventPacket(begin, EventType::kSliceBegin, track,
                                   ProcessName(other) + " (" + std::to_string(other) + ")",
                                   "preemption", args));
    Schedule(end, 0, perfetto::SliceEndPacket(end, track));
    ++sum_->slices;
  }

  void BuildCounterSamples() {
    std::map<int32_t, std::map<int64_t, int64_t>> by_pid;
    for (const OpSecondRow& r : session_.launch_seconds) {
      if (!pids_.empty() && pids_.count(r.pid) == 0) continue;
      by_pid[r.pid][r.sec] += r.count;
    }
    const int64_t first = window_.begin_ns / 1'000'000'000;
    const int64_t last = (window_.end_ns - 1) / 1'000'000'000;
    const int64_t duty = std::max<int64_t>(1, session_.launch_duty);
    // A counter holds its value until the next sample. Launches counted one second in N: only
    // the counting seconds have a value. Every second counted: a value where there were
    // launches and a 0 where they stop, so the samples follow the data, not the window's length.
    auto sample = [&](int32_t pid, int64_t sec, int64_t value) {
      int64_t ts = std::max(SaturatingMul(sec, 1'000'000'000), window_.begin_ns);
      counter_samples_.push_back({Wall(ts), pid, -1, 0, value});
    };
    for (const auto& [pid, secs] : by_pid) {
      if (duty == 1 && secs.count(first) == 0) sample(pid, first, 0);
      for (auto it = secs.lower_bound(first); it != secs.end() && it->first <= last; ++it) {
        sample(pid, it->first, it->second);
        if (duty == 1 && it->first < last && secs.count(it->first + 1) == 0) {
          sample(pid, it->first + 1, 0);
        }
      }
    }
    // NVML: per GPU, utilization (what nvidia-smi shows) and, with GPM, SM activity and
    // occupancy, in whole percent.
    for (const GpuSample& g : session_.gpu_samples) {
      uint64_t ts = Wall(g.ts_ns);
      if (g.util_pct != kNull) counter_samples_.push_back({ts, 0, g.gpu, 1, g.util_pct});
      if (g.sm_active_pct >= 0) {
        counter_samples_.push_back({ts, 0, g.gpu, 2, std::llround(g.sm_active_pct)});
      }
      if (g.sm_occupancy_pct >= 0) {
        counter_samples_.push_back({ts, 0, g.gpu, 3, std::llround(g.sm_occupancy_pct)});
      }
    }
    std::stable_sort(counter_samples_.begin(), counter_samples_.end(),
                     [](const CounterSample& a, const CounterSample& b) { return a.ts < b.ts; });
  }

  void EmitCountersBefore(uint64_t ts) {
    while (next_counter_ < counter_samples_.size() && counter_samples_[next_counter_].ts < ts) {
      const CounterSample& c = counter_samples_[next_counter_++];
      uint64_t track = 0;
      if (c.gpu < 0) {
        EnsureProcess(c.pid);
        track = kLaunchCounterTrack | Id32(c.pid);
        if (counter_tracks_.insert(track).second) {
          EmitTrack(perfetto::CounterTrackPacket(track, kProcessTrack | Id32(c.pid),
                                                 "CUDA launches/s"));
        }
      } else {
        uint64_t group = kGpuGroupTrack | (static_cast<uint64_t>(Id32(c.gpu)) << 8);
        if (counter_tracks_.insert(group).second) {
          EmitTrack(perfetto::TrackPacket(group, 0, GpuName(c.gpu)));
        }
        static constexpr const char* kNames[] = {"", "NVML utilization % (nvidia-smi)",
                                                 "SM active % (GPM)", "SM occupancy % (GPM)"};
        track = group | static_cast<uint64_t>(c.metric);
        if (counter_tracks_.insert(track).second) {
          EmitTrack(perfetto::CounterTrackPacket(track, group, kNames[c.metric]));
        }
      }
      Schedule(c.ts, 1, perfetto::CounterPacket(c.ts, track, c.value));
      ++sum_->counter_values;
    }
  }

  std::string GpuName(int32_t gpu) const {
    for (const GpuDevice& d : session_.gpu_devices) {
      if (d.gpu == gpu && !d.name.empty()) return "GPU " + std::to_string(gpu) + " (" + d.name + ")";
    }
    return "GPU " + std::to_string(gpu);
  }

  struct CounterSample {
    uint64_t ts;
    int32_t pid;     // launches/s of this process (gpu < 0)
    int32_t gpu;     // else an NVML counter of this GPU
    int metric;      // 1 utilization, 2 SM active, 3 SM occupancy
    int64_t value;
  };

  const ExportSession& session_;
  const SessionWindow& window_;
  OutputFile* out_;
  PerfettoExportSummary* sum_;
  std::map<int32_t, std::string> roles_;
  std::set<int32_t> pids_;  // empty = every process
  std::set<int32_t> processes_;
  std::unordered_map<int32_t, ThreadState> threads_;
  std::map<int64_t, uint64_t> cpu_busy_until_;
  bool cpu_group_ = false;
  std::set<uint64_t> counter_tracks_;
  std::vector<CounterSample> counter_samples_;
  size_t next_counter_ = 0;
  std::vector<std::pair<uint64_t, int32_t>> exits_;  // (wall ns, pid), by time
  size_t next_exit_ = 0;
  std::priority_queue<Pending, std::vector<Pending>, std::greater<Pending>> pending_;
  int64_t order_ = 0;
  std::string frame_;
};

}  // namespace

StatusOr<PerfettoExportSummary> ExportPerfetto(StoreReader& reader,
                                               const PerfettoExportOptions& options,
                                               OutputFile* out) {
  PerfettoExportSummary sum;
  ASSIGN_OR_RETURN(sum.window, ResolveWindow(reader, options.window));
  ASSIGN_OR_RETURN(ExportSession session, ReadExportSession(reader, sum.window));
  sum.drops = session.drops;
  if (options.pid != 0 && session.processes.count(options.pid) == 0) {
    return NotFound("--pid " + std::to_string(options.pid) + " is not a process of session " +
                    std::to_string(sum.window.session));
  }

  std::optional<Report> report;
  if (options.findings) {
    ExplainOptions eo;
    eo.window = options.window;
    eo.pid = options.pid;
    StatusOr<Report> r = Explain(reader, eo);
    if (r.ok()) {
      report = std::move(*r);
    } else {
      sum.explain_error = r.status().message();
    }
  }

  Exporter x(session, sum.window, out, &sum);
  std::map<int32_t, std::string> roles;
  int32_t training = 0;
  if (report) {
    for (const ProcessStat& p : report->top_processes) roles[p.pid] = p.role;
    for (const ProcessStat& p : report->top_processes) {
      if (p.role == "training") training = p.pid;
    }
  }
  if (training == 0) {  // the tracked process with the most CUDA calls
    int64_t most = 0;
    for (const auto& [pid, calls] : session.cuda_calls) {
      auto p = session.processes.find(pid);
      if (p != session.processes.end() && p->second.tracked && calls > most) {
        most = calls;
        training = pid;
      }
    }
    if (training != 0) roles.emplace(training, "training");
  }
  std::set<int32_t> filter;
  if (options.pid != 0) {
    filter = ProcessAndDescendants(session.processes, options.pid);
    if (!filter.count(training)) training = options.pid;
  }
  x.SetRoles(std::move(roles));
  x.SetPidFilter(filter);
  x.Begin(training);
  std::vector<std::string> notes;
  if (report) {
    notes = report->notes;
    x.AddFindings(*report);
  } else if (!sum.explain_error.empty()) {
    notes.push_back("no findings: explain failed: " + sum.explain_error);
  }
  x.AddNotes(notes);

  int64_t done = 0;
  RETURN_IF_ERROR(ForEachWindowEvent(reader, sum.window, [&](const ExportEvent& e) {
    x.Row(e);
    if ((++done & 0xffff) == 0 && options.progress) options.progress(done, session.rows_in_window);
    return true;
  }));
  x.Finish();
  if (options.progress) options.progress(done, session.rows_in_window);
  return sum;
}

}  // namespace gw
