#include "metrics/trace_metrics.h"

#include <algorithm>

namespace gw {

namespace {

// Op id → dense slot, over every id GW_OPS declares (store/ops.h; NCCL's are above 300).
struct OpTables {
  std::vector<int16_t> cuda_slot;
  std::vector<int16_t> latency_slot;
  std::vector<Op> cuda_ops;
  std::vector<Op> latency_ops;
  OpTables() {
    size_t n = 0;
    const OpInfo* ops = AllOps(&n);
    size_t ids = 0;
    for (size_t i = 0; i < n; ++i) ids = std::max(ids, static_cast<size_t>(ops[i].op) + 1);
    cuda_slot.assign(ids, -1);
    latency_slot.assign(ids, -1);
    for (size_t i = 0; i < n; ++i) {
      Op op = ops[i].op;
      auto id = static_cast<size_t>(op);
      if (ops[i].layer == Layer::kHost) continue;
      cuda_slot[id] = static_cast<int16_t>(cuda_ops.size());
      cuda_ops.push_back(op);
      if (IsSync(op) || IsMemcpy(op)) {
        latency_slot[id] = static_cast<int16_t>(latency_ops.size());
        latency_ops.push_back(op);
      }
    }
  }
};

const OpTables& Tables() {
  static const OpTables tables;
  return tables;
}

ProcessMetrics EmptySeries(SeriesKind kind) {
  ProcessMetrics m;
  m.kind = kind;
  m.calls.assign(CudaOpSlots(), 0);
  m.latency.assign(LatencyOpSlots(), LatencyBuckets{});
  return m;
}

}  // namespace

void LatencyBuckets::Add(int64_t ns) {
  size_t i = 0;
  while (i < kLatencyBucketsNs.size() && ns > kLatencyBucketsNs[i]) ++i;
  ++counts[i];
  ++count;
  sum_ns += ns;
}

size_t CudaOpSlots() { return Tables().cuda_ops.size(); }
size_t LatencyOpSlots() { return Tables().latency_ops.size(); }
int CudaOpSlot(Op op) {
  auto id = static_cast<size_t>(op);
  return id < Tables().cuda_slot.size() ? Tables().cuda_slot[id] : -1;
}
int LatencyOpSlot(Op op) {
  auto id = static_cast<size_t>(op);
  return id < Tables().latency_slot.size() ? Tables().latency_slot[id] : -1;
}
Op CudaOpAt(size_t slot) { return Tables().cuda_ops[slot]; }
Op LatencyOpAt(size_t slot) { return Tables().latency_ops[slot]; }

std::string SafeProcessName(std::string_view name) {
  std::string out;
  out.reserve(std::min(name.size(), kMaxProcessNameBytes));
  for (char c : name) {
    if (out.size() >= kMaxProcessNameBytes) break;
    auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
  }
  return out;
}

bool ProcessMetrics::Empty() const {
  if (context_switches != 0) return false;
  for (int64_t c : calls) {
    if (c != 0) return false;
  }
  return true;
}

TraceMetrics::TraceMetrics(int max_processes)
    : max_processes_(std::max(0, max_processes)),
      other_(EmptySeries(SeriesKind::kOther)),
      competitors_(EmptySeries(SeriesKind::kCompetitors)) {
  slots_.reserve(static_cast<size_t>(max_processes_));
  pid_slot_.reserve(1024);
}

ProcessMetrics* TraceMetrics::Series(int32_t code) {
  if (code >= 0) return &slots_[static_cast<size_t>(code)];
  return code == kCompetitorSlot ? &competitors_ : &other_;
}

int32_t TraceMetrics::AssignSlot(int32_t pid) {
  if (slots_.size() < static_cast<size_t>(max_processes_)) {
    slots_.push_back(EmptySeries(SeriesKind::kProcess));
    slots_.back().pid = pid;
    return static_cast<int32_t>(slots_.size() - 1);
  }
  // Full: reuse the slot of a process that exited long enough ago for its final values to
  // have been scraped (its series then ends).
  for (size_t i = 0; i < slots_.size(); ++i) {
    ProcessMetrics& m = slots_[i];
    if (m.exit_ts_ns == kNull || newest_ts_ns_ - m.exit_ts_ns < kExitedRetentionNs) continue;
    auto it = pid_slot_.find(m.pid);
    if (it != pid_slot_.end() && it->second == static_cast<int32_t>(i)) pid_slot_.erase(it);
    m = EmptySeries(SeriesKind::kProcess);
    m.pid = pid;
    return static_cast<int32_t>(i);
  }
  ++folded_;
  return kOtherSlot;
}

ProcessMetrics* TraceMetrics::SeriesFor(int32_t pid) {
  auto it = pid_slot_.find(pid);
  if (it != pid_slot_.end()) return Series(it->second);
  // Not named yet: the host source names processes before their first events, so this is a
  // traced process whose first record came from another source.
  int32_t code = AssignSlot(pid);
  if (pid_slot_.size() < kMaxPidEntries) pid_slot_.emplace(pid, code);
  return Series(code);
}

void TraceMetrics::Count(ProcessMetrics* m, const Event& e) {
  if (e.op == Op::kSchedSwitch) {
    ++m->context_switches;
    m->off_cpu_ns += std::max<int64_t>(0, e.duration_ns);
    if (e.runq_ns != kNull) m->runq_ns += std::max<int64_t>(0, e.runq_ns);
    return;
  }
  int slot = CudaOpSlot(e.op);
  if (slot < 0) return;
  if (e.op == Op::kNcclCommInit && e.ret == 0 && e.kind != kNull && e.bytes != kNull &&
      e.bytes >= m->nccl_nranks) {
    m->nccl_rank = e.kind;
    m->nccl_nranks = e.bytes;
    if (e.name_id != kNull) comm_ranks_[e.name_id] = e.bytes;
  }
  if (IsNcclCollective(e.op)) {
    ++m->nccl_collectives;
    if (e.bytes != kNull) m->nccl_bytes += std::max<int64_t>(0, e.bytes);
    LineUp(e);
  }
  m->calls[static_cast<size_t>(slot)] += IsLaunch(e.op) ? launch_duty_ : 1;
  if (IsLaunch(e.op)) ++m->launches_counted;
  int lat = LatencyOpSlot(e.op);
  if (lat >= 0) m->latency[static_cast<size_t>(lat)].Add(std::max<int64_t>(0, e.duration_ns));
}

void TraceMetrics::LineUp(const Event& e) {
  if (e.name_id == kNull || e.other_pid == kNull || (e.ret != kNull && e.ret != 0)) return;
  auto ranks = comm_ranks_.find(e.name_id);
  if (ranks == comm_ranks_.end() || ranks->second < 2) return;
  auto& calls = pending_[{e.name_id, e.other_pid}];
  for (const auto& [pid, ts] : calls) {
    if (pid == e.pid) return;  // a rank's call counts once
  }
  calls.push_back({e.pid, e.ts_ns});
  if (static_cast<int64_t>(calls.size()) >= ranks->second) {
    int64_t earliest = calls.front().second;
    for (const auto& c : calls) earliest = std::min(earliest, c.second);
    for (const auto& [pid, ts] : calls) {
      ProcessMetrics* m = SeriesFor(pid);
      m->nccl_lateness_ns += ts - earliest;
      ++m->nccl_lined_up;
    }
    pending_.erase({e.name_id, e.other_pid});
  }
  while (pending_.size() > kMaxPendingCollectives) pending_.erase(pending_.begin());
}

void TraceMetrics::OnEvents(const Event* events, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  events_ += static_cast<int64_t>(count);
  int32_t last_pid = 0;
  ProcessMetrics* series = nullptr;
  for (size_t i = 0; i < count; ++i) {
    const Event& e = events[i];
    newest_ts_ns_ = std::max(newest_ts_ns_, e.ts_ns);
    if (series == nullptr || e.pid != last_pid) {
      last_pid = e.pid;
      series = SeriesFor(e.pid);
    }
    Count(series, e);
  }
}

void TraceMetrics::OnOpCounts(const std::vector<OpCount>& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OpCount& c : counts) {
    int slot = CudaOpSlot(c.op);
    if (slot < 0) continue;
    ProcessMetrics* m = SeriesFor(c.pid);
    m->calls[static_cast<size_t>(slot)] += IsLaunch(c.op) ? c.count * launch_duty_ : c.count;
    if (IsKernelRun(c.op)) m->launches_counted += c.count;
  }
}

void TraceMetrics::OnLaunchDuty(uint32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  launch_duty_ = std::max<int64_t>(1, n);
}

void TraceMetrics::OnProcessCgroups(const std::vector<ProcessCgroup>& processes) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const ProcessCgroup& pc : processes) {
    auto it = pid_slot_.find(pc.pid);
    if (it == pid_slot_.end() || it->second < 0) continue;  // folded series carry no container
    ProcessMetrics& m = slots_[static_cast<size_t>(it->second)];
    // Ids are hex and UIDs hex with '-' (container.h); SafeProcessName keeps a label printable
    // whatever a test feeds in.
    m.container = SafeProcessName(pc.container_id.substr(0, 12));
    m.pod_uid = SafeProcessName(pc.pod_uid);
    m.pod = SafeProcessName(pc.pod_name);
    m.namespace_name = SafeProcessName(pc.pod_namespace);
  }
}

void TraceMetrics::OnProcess(const ProcessInfo& p) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = pid_slot_.find(p.pid);
  if (p.exit_ts_ns != kNull) {
    if (it == pid_slot_.end()) return;
    if (it->second >= 0) {
      ProcessMetrics& m = slots_[static_cast<size_t>(it->second)];
      m.exit_ts_ns = p.exit_ts_ns;
      if (!p.name.empty()) m.name = SafeProcessName(p.name);
    } else {
      pid_slot_.erase(it);  // nothing more will come from it
    }
    return;
  }
  if (!p.tracked) {
    // A competitor or a process that took the CPU from a traced one: its events (if any) go
    // to the competitors series. A traced process is never demoted.
    if (it == pid_slot_.end() && pid_slot_.size() < kMaxPidEntries) {
      pid_slot_.emplace(p.pid, kCompetitorSlot);
    }
    return;
  }
  int32_t code;
  if (it == pid_slot_.end()) {
    code = AssignSlot(p.pid);
    if (pid_slot_.size() < kMaxPidEntries) pid_slot_.emplace(p.pid, code);
  } else if (it->second == kCompetitorSlot) {
    code = AssignSlot(p.pid);  // became traced (e.g. started calling CUDA)
    it->second = code;
  } else {
    code = it->second;
  }
  if (code >= 0 && !p.name.empty())
    slots_[static_cast<size_t>(code)].name = SafeProcessName(p.name);
}

void TraceMetrics::OnGpuSamples(const std::vector<GpuSample>& samples) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const GpuSample& s : samples) gpus_[s.gpu] = s;
}

void TraceMetrics::OnDrops(const DropCounts& drops) {
  std::lock_guard<std::mutex> lock(mu_);
  drops_ = drops;
}

int64_t TraceMetrics::events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

MetricsSnapshot TraceMetrics::Snapshot() const {
  MetricsSnapshot s;
  std::lock_guard<std::mutex> lock(mu_);
  s.processes.reserve(slots_.size() + 2);
  for (const ProcessMetrics& m : slots_) s.processes.push_back(m);
  s.processes.push_back(other_);
  s.processes.push_back(competitors_);
  for (const auto& [gpu, sample] : gpus_) s.gpus.push_back(sample);
  s.drops = drops_;
  s.events = events_;
  s.folded_processes = folded_;
  s.max_processes = max_processes_;
  return s;
}

}  // namespace gw
