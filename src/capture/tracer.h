// Tracer: the capture loop behind `gpuwhy trace`.
//
// Start():  session clock (CLOCK_MONOTONIC + CLOCK_REALTIME at one instant), StoreWriter and
//           session row (unless record=false), the sources src/sources/registry.h lists, in
//           its order (the host source owns the tracked set, the CUDA source shares its fd;
//           the tracer knows neither by name), the 1 Hz SystemSampler, the NVML
//           GpuSampler (5 Hz by default; a note when there is no NVML), the drain thread.
//           With `stacks` (trace --stack) first a StackRegistry whose maps every source shares.
// Stacks:   a second thread watches newly tracked processes (maps snapshot, CPython offsets)
//           and every 50 ms drains captured stacks, symbolizes them and appends them to the
//           store: symbolizing a big library the first time takes about a second, which the
//           ring-buffer drain thread must not wait for.
// Drain:    one thread polls every source every poll_interval_ns (default 5 ms; ring buffers
//           are written without wake-ups) and calls Rediscover() about once a second.
// Stop():   the drain thread detaches every source, drains until the rings are empty, then
//           the writer is flushed and the session closed with event and drop counts.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "capture/event_observer.h"
#include "capture/live_stats.h"
#include "sources/nvml/gpu_sampler.h"
#include "sources/registry.h"
#include "sources/source.h"
#include "sources/stacks/stack_registry.h"
#include "sources/system/sampler.h"
#include "store/db_location.h"
#include "store/writer.h"

namespace gw {

struct TraceSummary;

struct TracerOptions {
  std::string session_kind = "trace";  // sessions.kind: "job" for `trace -- CMD`
  int64_t duration_ns = 0;  // 0: until Ctrl-C / SIGTERM
  std::vector<int32_t> pids;
  std::vector<std::string> comms;
  // trace --container/--pod: what ran there at start; one gone by then is skipped (SourceContext).
  std::vector<int32_t> pids_if_alive;
  std::string db_path;
  bool record = true;          // false: no database, live view / JSON only
  int64_t max_db_bytes = 0;
  // The sources' own options (host; CUDA: libraries, launch duty, row budget), handed to
  // CreateSources as they are.
  SourceSetOptions sources;
  bool json = false;           // stream every event as a JSON line on `json_out`
  bool stacks = false;         // trace --stack: caller stacks on CUDA calls and off-CPU switches
  // trace --profile-hz: on-CPU samples a second of each CPU running a tracked thread, with the
  // thread's stack (cpu_sample rows); 0 = off.
  uint32_t profile_hz = kDefaultProfileHz;
  // --stack-rate: stacks a second per thread for CUDA calls under 1 ms and for off-CPU switches.
  uint32_t stack_rate = kDefaultStackRate;
  // How often the drain thread empties the ring buffers. Each poll costs a few syscalls per
  // source whether or not records are waiting; the rings (16-32 MiB) hold seconds of events.
  int64_t poll_interval_ns = 5'000'000;
  // NVML GPU sampling (gpu_samples): every this often, 0 = off; the library (tests, unusual
  // installs; "" = libnvidia-ml.so.1 from the loader's path).
  int64_t gpu_interval_ns = kDefaultGpuIntervalNs;
  std::string nvml_lib;
  FILE* json_out = nullptr;
  // A follower of the recording (trace --sink): the writer also spools every committed row in
  // its outbox; `on_session` runs once the session row exists, `on_closing` after the session
  // is closed and before the writer closes (so the follower can send the last rows).
  bool outbox = false;
  int64_t outbox_max_bytes = 0;  // 0 = the writer's default
  std::function<Status(StoreWriter*)> on_session;
  std::function<void(TraceSummary*)> on_closing;
  std::string version;
  std::string command_line;
  // Told how the migration of an older --db file is going (StoreWriter's migration_progress).
  MigrationProgress on_migration;
  // Also sees every decoded event, process, count, GPU round and the drops (trace --prometheus);
  // not owned, must outlive the tracer's Stop().
  EventObserver* observer = nullptr;
};

struct TraceSummary {
  int64_t session_id = 0;
  int64_t elapsed_ns = 0;
  int64_t events = 0;           // events handed to the store (or the JSON stream)
  int64_t events_written = 0;   // rows the writer committed
  int64_t drops = 0;
  DropCounts drops_detail;
  // Records submitted by the BPF side and decoded, summed over the sources that count both
  // (Source::Records: the host source).
  int64_t host_records_emitted = 0;
  int64_t host_records_consumed = 0;
  int64_t stacks = 0;                 // distinct stacks stored (trace --stack)
  std::vector<std::string> notes;
  std::string db_path;
  std::vector<std::string> sources;
  // A write that failed (disk full): the recording stopped there, the session was closed with
  // the lost events among its drops, and the command should say so and exit non-zero.
  Status store_error;
};

class Tracer : public EventSink {
 public:
  static StatusOr<std::unique_ptr<Tracer>> Create(TracerOptions options);
  ~Tracer() override;
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;

  // Loads, attaches, seeds the tracked set and starts the drain thread.
  Status Start();
  // Blocks until the duration has passed or *stop becomes true, calling `each_second` about
  // once a second from the calling thread.
  void Wait(const std::atomic<bool>* stop, const std::function<void()>& each_second);
  // Clean stop: detach, final drain, flush, EndSession. Idempotent.
  StatusOr<TraceSummary> Stop();

  LiveSnapshot Live() const;
  // Notes from sources (libraries attached, skipped tracepoints), taken once.
  std::vector<std::string> TakeNotes();
  int64_t ElapsedNs() const;
  // The session being recorded (0 with record=false), valid after Start().
  int64_t session_id() const;
  // The recording's file (StoreWriter::file()), once Start has opened it; none when not
  // recording.
  std::optional<DatabaseFile> database_file() const;

  // EventSink (called from the drain thread).
  void OnEvents(const Event* events, size_t count) override;
  void OnProcess(const ProcessInfo& process) override;
  void OnOpCounts(const std::vector<OpCount>& counts) override;
  int64_t InternString(std::string_view text) override;

  static std::string DropsJson(const DropCounts& drops);

 private:
  explicit Tracer(TracerOptions options);
  void DrainLoop();
  void StartGpuSampler();
  DropCounts CollectDrops() const;
  void WriteJson(const Event& e);
  // --stack: queue a process for StackRegistry::Watch (Start, then the drain thread only);
  // the stack thread's loop and one round of it (watch queued processes, drain, store).
  void WatchStacksOf(int32_t pid);
  // A watched process exec'd (`trace -- env python3 …`, a shell shim): its image, maps and
  // interpreter are new, so it is watched again (from the drain thread).
  void RewatchStacksAfterExec(int32_t pid);
  void StackLoop();
  void DrainStacks();

  TracerOptions options_;
  SessionClock clock_;
  std::unique_ptr<StoreWriter> writer_;
  std::vector<std::unique_ptr<Source>> sources_;  // started, in start order
  std::unique_ptr<SystemSampler> sampler_;
  std::unique_ptr<GpuSampler> gpu_sampler_;  // null without NVML or with --gpu-interval 0
  LiveStats live_;

  std::thread drain_;
  std::atomic<bool> stop_drain_{false};
  std::atomic<bool> drained_{false};
  bool started_ = false;
  bool stopped_ = false;
  std::atomic<int64_t> events_{0};

  // --stack. stacks_ is used by the stack thread only (and by Stop() after joining it).
  std::unique_ptr<StackRegistry> stacks_;
  std::thread stack_thread_;
  std::atomic<bool> stop_stacks_{false};
  std::mutex stop_stacks_mu_;
  std::condition_variable stop_stacks_cv_;  // wakes StackLoop at stop
  std::mutex watch_mu_;
  std::vector<int32_t> watch_queue_;          // guarded by watch_mu_
  std::vector<int32_t> exec_queue_;           // guarded by watch_mu_: exec'd since watched
  // Exec'd processes not (yet) seen as CPython: the loader maps libpython after the exec, so
  // Watch is retried a few times (stack thread only).
  struct PendingWatch {
    int32_t pid = 0;
    int attempts = 0;
    std::chrono::steady_clock::time_point due;
  };
  std::vector<PendingWatch> rewatch_;
  std::unordered_set<int32_t> watch_seen_;    // Start, then the drain thread only
  int64_t stacks_stored_ = 0;                 // stack thread

  mutable std::mutex notes_mu_;
  std::vector<std::string> notes_;

  // String ids when not recording (the writer interns otherwise).
  std::mutex strings_mu_;
  std::unordered_map<std::string, int64_t> strings_;
  std::unordered_map<int64_t, std::string> string_text_;
};

}  // namespace gw
