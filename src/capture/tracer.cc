#include "capture/tracer.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "base/table.h"
#include "sources/registry.h"
#include "sources/system/host_info.h"

namespace gw {

namespace {

int64_t ClockNs(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Reads CLOCK_MONOTONIC and CLOCK_REALTIME as close together as possible: the pair with the
// smallest gap between two monotonic reads wins (a preemption between the reads would skew
// the wall anchor).
SessionClock NewSessionClock() {
  SessionClock best;
  int64_t best_gap = INT64_MAX;
  for (int i = 0; i < 5; ++i) {
    int64_t m1 = ClockNs(CLOCK_MONOTONIC);
    int64_t w = ClockNs(CLOCK_REALTIME);
    int64_t m2 = ClockNs(CLOCK_MONOTONIC);
    if (m2 - m1 < best_gap) {
      best_gap = m2 - m1;
      best.mono_start_ns = m1 + (m2 - m1) / 2;
      best.wall_start_ns = w;
    }
  }
  return best;
}

}  // namespace

Tracer::Tracer(TracerOptions options) : options_(std::move(options)) {}

Tracer::~Tracer() {
  if (started_ && !stopped_) (void)Stop();
}

StatusOr<std::unique_ptr<Tracer>> Tracer::Create(TracerOptions options) {
  if (options.json && options.json_out == nullptr) options.json_out = stdout;
  return std::unique_ptr<Tracer>(new Tracer(std::move(options)));
}

int64_t Tracer::ElapsedNs() const { return ClockNs(CLOCK_MONOTONIC) - clock_.mono_start_ns; }

int64_t Tracer::session_id() const { return writer_ ? writer_->session_id() : 0; }

std::optional<DatabaseFile> Tracer::database_file() const {
  if (!writer_) return std::nullopt;
  return writer_->file();
}

Status Tracer::Start() {
  if (started_) return FailedPrecondition("tracer started twice");
  const SourceSetOptions& set = options_.sources;
  if (options_.observer && set.cuda_enabled) options_.observer->OnLaunchDuty(set.cuda.launch_duty);
  ASSIGN_OR_RETURN(std::vector<RegisteredSource> sources, CreateSources(set));

  // Before the session row exists: a failure here leaves nothing behind in the database.
  if (options_.stacks || options_.profile_hz > 0) {
    ASSIGN_OR_RETURN(stacks_, StackRegistry::Create({}));
  }

  clock_ = NewSessionClock();
  if (options_.record) {
    WriterOptions wo;
    wo.max_db_bytes = options_.max_db_bytes;
    wo.outbox = options_.outbox;
    wo.migration_progress = options_.on_migration;
    if (options_.outbox_max_bytes > 0) wo.outbox_max_bytes = options_.outbox_max_bytes;
    ASSIGN_OR_RETURN(writer_, StoreWriter::Create(options_.db_path, wo));
    HostInfo hi = ReadHostInfo();
    SessionInfo info;
    info.kind = options_.session_kind;
    info.wall_start_ns = clock_.wall_start_ns;
    info.mono_start_ns = clock_.mono_start_ns;
    info.host = hi.host;
    info.kernel = hi.kernel;
    info.cpu_model = hi.cpu_model;
    info.cores = hi.cores;
    info.mem_bytes = hi.mem_bytes;
    info.gpu_driver = hi.gpu_driver;
    if (!hi.gpus.empty()) info.gpu_model = hi.gpus.front().model;
    info.version = options_.version;
    info.command_line = options_.command_line;
    info.tracer_pid = static_cast<int32_t>(getpid());
    info.launch_duty =
        set.cuda_enabled ? static_cast<int32_t>(std::max(1u, set.cuda.launch_duty)) : 1;
    info.profile_hz = static_cast<int32_t>(options_.profile_hz);
    ASSIGN_OR_RETURN(int64_t session, writer_->BeginSession(info));
    (void)session;
    if (options_.on_session) RETURN_IF_ERROR(options_.on_session(writer_.get()));
  }

  SourceContext context;
  context.stack_registry = stacks_.get();
  context.stacks = options_.stacks;
  context.profile_hz = options_.profile_hz;
  context.stack_rate = options_.stack_rate;
  context.clock = clock_;
  context.sink = this;
  context.pids = options_.pids;
  context.comms = options_.comms;
  context.pids_if_alive = options_.pids_if_alive;
  // In the registry's order: a source that owns the tracked set shares it with the ones after.
  for (RegisteredSource& r : sources) {
    if (Status st = r.source->Start(context); !st.ok()) {
      if (r.required) return st;
      std::lock_guard<std::mutex> lock(notes_mu_);
      notes_.push_back(r.unavailable + ": " + st.message());
      continue;
    }
    if (int fd = r.source->TrackedSetFd(); fd >= 0) context.tracked_map_fd = fd;
    if (stacks_) {
      for (int32_t pid : r.source->TrackedPids()) WatchStacksOf(pid);
    }
    sources_.push_back(std::move(r.source));
  }

  sampler_ = std::make_unique<SystemSampler>(
      [this](const SystemSnapshot& snapshot) {
        live_.SetSystem(snapshot);
        if (writer_) writer_->AppendSnapshot(snapshot);
      },
      [this] { return ElapsedNs(); });
  sampler_->SampleCgroups(
      [this] {
        for (const auto& source : sources_) {
          if (source->TrackedSetFd() >= 0) return source->TrackedPids();
        }
        return std::vector<int32_t>{};
      },
      [this](std::vector<CgroupCpuSample> samples, std::vector<ProcessCgroup> moved,
             std::vector<CgroupMemorySample> memory) {
        if (options_.observer && !moved.empty()) options_.observer->OnProcessCgroups(moved);
        if (writer_) {
          writer_->AppendCgroupSamples(std::move(samples), std::move(moved), std::move(memory));
        }
      });
  sampler_->Start();
  StartGpuSampler();
  started_ = true;
  drain_ = std::thread([this] { DrainLoop(); });
  if (stacks_) stack_thread_ = std::thread([this] { StackLoop(); });
  return Status::Ok();
}

void Tracer::StartGpuSampler() {
  if (options_.gpu_interval_ns <= 0) return;
  GpuSamplerOptions go;
  go.library = options_.nvml_lib;
  go.interval_ns = options_.gpu_interval_ns;
  StatusOr<std::unique_ptr<GpuSampler>> made = GpuSampler::Create(go, [this] { return ElapsedNs(); });
  std::lock_guard<std::mutex> lock(notes_mu_);
  if (!made.ok()) {
    notes_.push_back("no GPU samples (NVML): " + made.status().message());
    return;
  }
  gpu_sampler_ = std::move(*made);
  std::string gpus;
  bool gpm = false;
  for (const GpuDevice& d : gpu_sampler_->devices()) {
    gpus += (gpus.empty() ? "" : ", ") + std::to_string(d.gpu) + " " + d.name;
    gpm = gpm || d.gpm_supported;
  }
  notes_.push_back("NVML " + gpu_sampler_->library_path() + ": GPU " + gpus + " every " +
                   std::to_string(options_.gpu_interval_ns / 1'000'000) + " ms" +
                   (gpm ? " (GPM: SM activity, occupancy)" : " (no GPM: utilization only)"));
  if (writer_) writer_->AppendGpuDevices(gpu_sampler_->devices());
  gpu_sampler_->Start([this](const std::vector<GpuSample>& samples,
                             const std::vector<GpuProcessSample>& processes) {
    if (writer_) writer_->AppendGpuSamples(samples, processes);
    if (options_.observer) options_.observer->OnGpuSamples(samples);
  });
}

void Tracer::WatchStacksOf(int32_t pid) {
  if (!watch_seen_.insert(pid).second) return;  // the common case: no lock per event
  std::lock_guard<std::mutex> lock(watch_mu_);
  watch_queue_.push_back(pid);
}

void Tracer::RewatchStacksAfterExec(int32_t pid) {
  watch_seen_.insert(pid);
  std::lock_guard<std::mutex> lock(watch_mu_);
  exec_queue_.push_back(pid);
}

void Tracer::StackLoop() {
  std::unique_lock<std::mutex> lock(stop_stacks_mu_);
  while (!stop_stacks_.load(std::memory_order_relaxed)) {
    lock.unlock();
    DrainStacks();
    lock.lock();
    // Python code objects can only be read while their process lives: drain often (20 times a
    // second), and wake only for that or for the stop.
    stop_stacks_cv_.wait_for(lock, std::chrono::milliseconds(50),
                             [this] { return stop_stacks_.load(std::memory_order_relaxed); });
  }
}

void Tracer::DrainStacks() {
  std::vector<int32_t> pids, execs;
  {
    std::lock_guard<std::mutex> lock(watch_mu_);
    pids.swap(watch_queue_);
    execs.swap(exec_queue_);
  }
  auto now = std::chrono::steady_clock::now();
  for (int32_t pid : execs) rewatch_.push_back({pid, 0, now});
  for (int32_t pid : pids) {
    StatusOr<WatchResult> watched = stacks_->Watch(pid);
    // A process gone before it was watched keeps native frames resolved from later maps
    // snapshots where possible; nothing to tell the user.
    if (watched.ok() && !watched->note.empty()) {
      std::lock_guard<std::mutex> lock(notes_mu_);
      notes_.push_back("stacks of pid " + std::to_string(pid) + ": " + watched->note);
    }
  }
  // Exec'd processes: a new maps snapshot, and Python frames when the new image is CPython (its
  // libpython may be mapped a moment after the exec: retried at 50 ms, 100 ms, 200 ms … ~3 s).
  constexpr int kRewatchAttempts = 7;
  for (size_t i = 0; i < rewatch_.size();) {
    PendingWatch& p = rewatch_[i];
    if (p.due > now) {
      ++i;
      continue;
    }
    StatusOr<WatchResult> watched = stacks_->Watch(p.pid);
    bool done = !watched.ok() || watched->python || ++p.attempts >= kRewatchAttempts;
    if (watched.ok() && !watched->python) {
      stacks_->Unwatch(p.pid);  // the old image's interpreter is gone: no Python walk
    }
    if (done) {
      rewatch_[i] = rewatch_.back();
      rewatch_.pop_back();
      continue;
    }
    p.due = now + std::chrono::milliseconds(50 << p.attempts);
    ++i;
  }
  for (SymbolizedStack& s : stacks_->Drain()) {
    ++stacks_stored_;
    if (writer_) writer_->AppendStack(s.id, s.pid, s.location, s.frames_json);
    if (options_.json && options_.json_out) {
      std::string line = "{\"type\":\"stack\",\"id\":" + std::to_string(s.id) +
                         ",\"pid\":" + std::to_string(s.pid) + ",\"location\":\"" +
                         JsonEscape(s.location) + "\",\"frames\":" + s.frames_json + "}\n";
      std::fwrite(line.data(), 1, line.size(), options_.json_out);
    }
  }
}

void Tracer::DrainLoop() {
  auto last_rediscover = std::chrono::steady_clock::now();
  while (!stop_drain_.load(std::memory_order_relaxed)) {
    for (auto& s : sources_) s->Poll();
    auto now = std::chrono::steady_clock::now();
    if (now - last_rediscover >= std::chrono::seconds(1)) {
      last_rediscover = now;
      for (auto& s : sources_) s->Rediscover();
      int64_t drops = 0;
      DropCounts detail = CollectDrops();
      for (const auto& [where, n] : detail) drops += n;
      live_.SetDrops(drops);
      if (options_.observer) options_.observer->OnDrops(detail);
    }
    if (options_.json && options_.json_out) std::fflush(options_.json_out);
    std::this_thread::sleep_for(std::chrono::nanoseconds(options_.poll_interval_ns));
  }
  // Clean stop, on this thread so sources never see two threads: detach (in reverse start
  // order), then drain until every ring is empty twice in a row.
  for (auto it = sources_.rbegin(); it != sources_.rend(); ++it) (*it)->Stop();
  int empty_rounds = 0;
  while (empty_rounds < 2) {
    int64_t n = 0;
    for (auto& s : sources_) n += s->Poll();
    empty_rounds = n == 0 ? empty_rounds + 1 : 0;
  }
  if (options_.json && options_.json_out) std::fflush(options_.json_out);
  drained_ = true;
}

void Tracer::Wait(const std::atomic<bool>* stop, const std::function<void()>& each_second) {
  // --duration counts from here: probes are attached and the tracked set is seeded.
  auto start = std::chrono::steady_clock::now();
  auto next_tick = start + std::chrono::seconds(1);
  while (!(stop && stop->load())) {
    // A failed write ends the recording at once (the writer counts what it could not store).
    if (writer_ && !writer_->error().ok()) break;
    if (options_.duration_ns > 0 &&
        std::chrono::steady_clock::now() - start >= std::chrono::nanoseconds(options_.duration_ns)) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (std::chrono::steady_clock::now() >= next_tick) {
      next_tick += std::chrono::seconds(1);
      if (each_second) each_second();
    }
  }
}

DropCounts Tracer::CollectDrops() const {
  DropCounts all;
  for (const auto& s : sources_) {
    for (const auto& [k, v] : s->Drops()) all[k] += v;
  }
  // The writer's queue blocks producers instead of dropping; its count is reported as such.
  all["user_queue"] += 0;
  // Events the store could not write (disk full) are lost as surely as ring-buffer drops.
  if (writer_) {
    int64_t lost = writer_->stats().events_lost;
    if (lost > 0) all["store_write_failed"] += lost;
  }
  return all;
}

std::string Tracer::DropsJson(const DropCounts& drops) {
  std::string json = "{";
  bool first = true;
  for (const auto& [k, v] : drops) {
    if (!first) json += ",";
    first = false;
    json += "\"" + JsonEscape(k) + "\":" + std::to_string(v);
  }
  return json + "}";
}

StatusOr<TraceSummary> Tracer::Stop() {
  if (!started_) return FailedPrecondition("tracer not started");
  if (stopped_) return FailedPrecondition("tracer already stopped");
  stopped_ = true;
  TraceSummary summary;
  summary.elapsed_ns = ElapsedNs();
  if (sampler_) sampler_->Stop();
  if (gpu_sampler_) {
    gpu_sampler_->Stop();
    if (int64_t n = gpu_sampler_->rounds(); n > 0) {
      double per = static_cast<double>(gpu_sampler_->thread_cpu_ns()) / static_cast<double>(n);
      double share = summary.elapsed_ns > 0 ? 100.0 * static_cast<double>(gpu_sampler_->thread_cpu_ns()) /
                                                  static_cast<double>(summary.elapsed_ns)
                                            : 0;
      char line[160];
      std::snprintf(line, sizeof line,
                    "NVML sampler: %lld rounds, %.0f us of CPU each (%.2f%% of a core)",
                    static_cast<long long>(n), per / 1e3, share);
      std::lock_guard<std::mutex> lock(notes_mu_);
      notes_.push_back(line);
    }
  }
  stop_drain_ = true;
  if (drain_.joinable()) drain_.join();
  if (stacks_) {
    {
      std::lock_guard<std::mutex> lock(stop_stacks_mu_);
      stop_stacks_ = true;
    }
    stop_stacks_cv_.notify_all();
    if (stack_thread_.joinable()) stack_thread_.join();
    DrainStacks();  // stacks of the final drain's events
    summary.stacks = stacks_stored_;
    StackStats st = stacks_->Stats();
    std::lock_guard<std::mutex> lock(notes_mu_);
    notes_.push_back(std::string(options_.stacks ? "stacks" : "on-CPU profile stacks") + ": " +
                     WithThousands(st.captures) + " captured, " +
                     WithThousands(stacks_stored_) + " distinct (process maps read " +
                     WithThousands(stacks_->symbolizer().maps_reads()) + " times)" +
                     (st.over_budget > 0 ? ", " + WithThousands(st.over_budget) +
                                               " CUDA call rows without one (over --stack-rate " +
                                               std::to_string(options_.stack_rate) +
                                               " a second per thread)"
                                         : std::string()) +
                     (st.map_full + st.busy > 0
                          ? ", " + WithThousands(st.map_full + st.busy) +
                                " events without a stack (stack map full or capture busy)"
                          : std::string()));
  }
  // Everything appended is committed (or counted lost) before the drops are summed.
  Status flushed = writer_ ? writer_->Flush() : Status::Ok();
  summary.drops_detail = CollectDrops();
  for (const auto& [k, v] : summary.drops_detail) summary.drops += v;
  live_.SetDrops(summary.drops);  // the final frame shows them too
  if (options_.observer) options_.observer->OnDrops(summary.drops_detail);
  summary.events = events_.load();
  for (const auto& s : sources_) {
    summary.sources.push_back(s->name());
    if (std::optional<Source::RecordBalance> records = s->Records()) {
      summary.host_records_emitted += records->emitted;
      summary.host_records_consumed += records->consumed;
    }
  }
  summary.notes = TakeNotes();
  Status result = Status::Ok();
  if (writer_) {
    summary.db_path = writer_->path();
    summary.session_id = writer_->session_id();
    SessionTotals totals;
    totals.wall_stop_ns = ClockNs(CLOCK_REALTIME);
    totals.events = summary.events;
    totals.drops = summary.drops;
    totals.drops_detail = DropsJson(summary.drops_detail);
    Status end = writer_->EndSession(totals);
    summary.events_written = writer_->stats().events_written;
    if (options_.on_closing) options_.on_closing(&summary);
    Status closed = writer_->Close();
    // A failed write with the session closed behind it is reported with the summary; a
    // session that could not be closed either is an error of its own.
    summary.store_error = flushed;
    if (!end.ok()) result = end;
    else if (flushed.ok() && !closed.ok()) result = closed;
  }
  sources_.clear();
  if (!result.ok()) {
    if (!summary.store_error.ok()) {
      return Status(summary.store_error.code(), summary.store_error.message() +
                                                    "; closing the session failed too: " +
                                                    result.message());
    }
    return result.WithContext("finish recording " + options_.db_path);
  }
  return summary;
}

LiveSnapshot Tracer::Live() const { return live_.Snapshot(ElapsedNs()); }

std::vector<std::string> Tracer::TakeNotes() {
  std::vector<std::string> out;
  {
    std::lock_guard<std::mutex> lock(notes_mu_);
    out.swap(notes_);
  }
  // Sources' notes are taken on the caller's thread; TakeNotes is safe to call concurrently
  // with Poll for every source (they guard their notes).
  for (auto& s : sources_) {
    for (std::string& n : s->TakeNotes()) out.push_back(std::move(n));
  }
  return out;
}

void Tracer::OnEvents(const Event* events, size_t count) {
  if (count == 0) return;
  events_ += static_cast<int64_t>(count);
  live_.AddEvents(events, count);
  if (options_.observer) options_.observer->OnEvents(events, count);
  if (stacks_) {
    for (size_t i = 0; i < count; ++i) {
      // A process that only ever shows up with stacks (no process record yet) still needs
      // its maps snapshot and Python offsets.
      if (events[i].stack_id != kNull) WatchStacksOf(events[i].pid);
      if (events[i].op == Op::kProcExec) RewatchStacksAfterExec(events[i].pid);
    }
  }
  if (writer_) writer_->AppendEvents(events, count);
  if (options_.json) {
    for (size_t i = 0; i < count; ++i) WriteJson(events[i]);
  }
}

void Tracer::OnProcess(const ProcessInfo& process) {
  live_.AddProcess(process);
  if (options_.observer) options_.observer->OnProcess(process);
  if (stacks_ && process.tracked) WatchStacksOf(process.pid);
  if (writer_) writer_->UpsertProcess(process);
  if (options_.json && options_.json_out && !process.name.empty()) {
    std::fprintf(options_.json_out,
                 "{\"type\":\"process\",\"pid\":%d,\"ppid\":%d,\"name\":\"%s\",\"tracked\":%s}\n",
                 process.pid, process.ppid, JsonEscape(process.name).c_str(),
                 process.tracked ? "true" : "false");
  }
}

void Tracer::OnOpCounts(const std::vector<OpCount>& counts) {
  // Launches counted one second in N: the live view gets the estimate, N × the count (the
  // database keeps what was counted; sessions.launch_duty says how to scale it; the observer
  // scales its own, told by OnLaunchDuty).
  const uint32_t duty = options_.sources.cuda.launch_duty;
  std::vector<OpCount> estimated;
  if (duty > 1) {
    estimated = counts;
    for (OpCount& c : estimated) {
      if (IsLaunch(c.op)) c.count *= static_cast<int64_t>(duty);
    }
  }
  live_.AddOpCounts(duty > 1 ? estimated : counts);
  if (options_.observer) options_.observer->OnOpCounts(counts);  // it scales (OnLaunchDuty)
  if (writer_) writer_->AppendOpCounts(counts);
  if (options_.json && options_.json_out) {
    for (const OpCount& c : counts) {
      std::fprintf(options_.json_out,
                   "{\"type\":\"count\",\"sec\":%" PRId64 ",\"pid\":%d,\"op\":\"%s\",\"count\":%" PRId64
                   "}\n",
                   c.sec, c.pid, std::string(OpName(c.op)).c_str(), c.count);
    }
  }
}

int64_t Tracer::InternString(std::string_view text) {
  std::lock_guard<std::mutex> lock(strings_mu_);
  auto it = strings_.find(std::string(text));
  if (it != strings_.end()) return it->second;
  int64_t id = writer_ ? writer_->InternString(text) : static_cast<int64_t>(strings_.size()) + 1;
  strings_.emplace(std::string(text), id);
  if (options_.json) string_text_.emplace(id, std::string(text));
  return id;
}

void Tracer::WriteJson(const Event& e) {
  FILE* out = options_.json_out;
  if (!out) return;
  std::string line = "{\"type\":\"event\",\"ts\":" + std::to_string(e.ts_ns) +
                     ",\"pid\":" + std::to_string(e.pid) + ",\"tid\":" + std::to_string(e.tid) +
                     ",\"op\":\"" + std::string(OpName(e.op)) +
                     "\",\"duration_ns\":" + std::to_string(e.duration_ns);
  auto field = [&](const char* name, int64_t v) {
    if (v != kNull) line += std::string(",\"") + name + "\":" + std::to_string(v);
  };
  field("ret", e.ret);
  field("bytes", e.bytes);
  field("kind", e.kind);
  field("cpu", e.cpu);
  field("other_pid", e.other_pid);
  field("runq_ns", e.runq_ns);
  field("addr", e.addr);
  field("stack_id", e.stack_id);
  if (e.name_id != kNull) {
    std::lock_guard<std::mutex> lock(strings_mu_);
    auto it = string_text_.find(e.name_id);
    if (it != string_text_.end()) line += ",\"name\":\"" + JsonEscape(it->second) + "\"";
  }
  line += "}\n";
  std::fwrite(line.data(), 1, line.size(), out);
}

}  // namespace gw
