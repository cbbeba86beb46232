// The CUDA event source: uprobes on the CUDA runtime (libcudart) and driver (libcuda) of every
// process, decoded into Events (calls with durations and arguments) and OpCounts (launches
// counted in the kernel). See README.md in this folder for the probe design and its costs.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/scoped.h"
#include "base/status.h"
#include "discover/cuda_libs.h"
#include "sources/cuda/cuda_graphs.h"
#include "sources/cuda/cuda_options.h"
#include "sources/cuda/driver_names.h"
#include "sources/source.h"
#include "store/event.h"

struct bpf_link;
struct ring_buffer;
struct cuda_bpf;
struct gw_cuda_call_record;
struct gw_cuda_name_record;

namespace gw {

class Symbolizer;  // symbolize/symbolizer.h

namespace cuda_internal {
void DestroySkeleton(cuda_bpf* skel);
void FreeRing(ring_buffer* ring);
using ScopedSkeleton = ScopedResource<cuda_bpf*, DestroySkeleton, nullptr>;
using ScopedRing = ScopedResource<ring_buffer*, FreeRing, nullptr>;
}  // namespace cuda_internal

// A launch entry point a CUDA library may export that gpuwhy does not probe: launches made
// through it are not seen (runtime entry points not listed reach a probed driver launch).
struct UnseenLaunchPath {
  const char* symbol;
  const char* what;  // "CUDA graphs launched through the driver"
};
// The unprobed launch entry points the library at `path` exports; empty when it cannot be read.
std::vector<UnseenLaunchPath> UnseenLaunchPaths(const std::string& path, CudaLibKind kind);
// The launch entry points gpuwhy probes in a library of this kind.
std::vector<std::string> ProbedLaunchSymbols(CudaLibKind kind);
// Every symbol probed in libraries of `kind` (check lists NCCL's).
std::vector<std::string> ProbedSymbols(CudaLibKind kind);

class CudaSource : public Source {
 public:
  static StatusOr<std::unique_ptr<CudaSource>> Create(CudaSourceOptions options = {});
  ~CudaSource() override;

  std::string name() const override { return "cuda"; }
  Status Start(const SourceContext& context) override;
  int64_t Poll() override;
  void Rediscover() override;
  std::vector<std::string> TakeNotes() override;
  DropCounts Drops() const override;
  void Stop() override;

  // Paths of the libraries attached so far.
  std::vector<std::string> AttachedLibraries() const;
  // Function entry and return points currently probed.
  size_t LinkCount() const;
  // Whether probes are attached through multi-uprobe links.
  bool UsesMultiUprobeLinks() const { return multi_links_; }
  // Whether the runtime launch probes were detached (every runtime launch nests a driver one).
  bool RuntimeLaunchesDetached() const { return runtime_launches_detached_.load(); }
  // Windows of runtime launches in which too few were seen to nest (the proof failed).
  int64_t NestingProofsFailed() const { return nesting_proofs_failed_.load(); }

 private:
  struct ProcessState;
  struct AttachedLibrary;

  explicit CudaSource(CudaSourceOptions options);

  // Sets rodata tunables, the ring size and the shared tracked map on the opened skeleton.
  Status Configure(const SourceContext& context);
  // Attaches every probe of `library` that its ELF has. Skips copies already attached.
  Status AttachLibrary(const CudaLibrary& library);
  // The libraries to attach to now: discovered ones (in processes new or changed since the
  // last call, see MapsScanFilter) plus the named ones.
  std::vector<CudaLibrary> Libraries();  // drivers first
  std::vector<CudaLibrary> FindLibraries();
  void AttachDiscovered();
  void AddNote(std::string note);

  static int OnRecord(void* self, void* data, size_t size);
  void HandleCall(const ::gw_cuda_call_record& record);
  // Graph calls and captured launches into graphs_; a graph launch's row gets its label.
  void TrackGraphs(const ::gw_cuda_call_record& record, Event* e);
  // Whether the launch probes stayed attached over [from_ns, to_ns] (session ns): a capture
  // then saw every launch it put into its graph. attach_mu_ not held.
  bool LaunchProbesOnThroughout(int64_t from_ns, int64_t to_ns) const;
  void HandleName(const ::gw_cuda_name_record& record);
  void FlushEvents();
  // Sends the in-kernel counts since the last flush: launches filed under `launch_sec` (the
  // duty cycle's counting second), entry-only counted calls (cudaMemsetAsync) under
  // `call_sec`, the second that just ended. Returns the launches flushed.
  int64_t FlushCounts(int64_t launch_sec, int64_t call_sec);
  // Sends the aggregates of short calls of seconds before `before_sec` (all: every second)
  // and deletes them in the kernel.
  void FlushCallAggregates(int64_t before_sec, bool all);
  std::string BudgetSummary() const;  // what the row budget did, for the closing note
  ProcessState& Process(uint32_t tgid);
  // Interned name of a launch handle, else "fn@0x…". A runtime launch's handle (`host_stub`)
  // is named by its registration record, else after the driver function its launches reached
  // (the pairing alias), else by the stub's ELF symbol; a driver handle by its lookup record,
  // else by the name its driver object points to (driver_names.h).
  int64_t KernelNameId(uint32_t tgid, uint64_t handle, bool host_stub);
  std::string KernelName(uint32_t tgid, uint64_t handle, bool host_stub);
  std::string HostStubName(uint32_t tgid, uint64_t handle);
  void ForgetExitedProcesses();
  void DetachNestedRuntimeLaunches();
  Status AttachLaunchProbes(AttachedLibrary& library, std::vector<std::string>* notes);
  static void DetachLaunchProbes(AttachedLibrary& library);
  bool LaunchSecond(int64_t sec) const;
  int64_t CountingSecondOf(int64_t sec) const;  // the counting second a flush belongs to
  void SetLaunchProbes(bool on);  // attach_mu_ not held
  // Launch coverage: the session time the launch probes were attached (op launch_coverage,
  // pid 0, total_ns, by second). attach_mu_ held.
  void CoverageOn(int64_t now_ns);
  void CoverageOff(int64_t now_ns);
  // Covered ns by session second since the last take.
  std::map<int64_t, int64_t> TakeCoverage(int64_t now_ns);
  int64_t SessionNs() const;
  static constexpr uint64_t kNestingProofLaunches = 2000;

  CudaSourceOptions options_;
  SourceContext context_;
  // Declaration order is teardown order reversed: links go first, then the ring, then the
  // skeleton that owns the maps.
  cuda_internal::ScopedSkeleton skel_;
  cuda_internal::ScopedRing ring_;
  bool started_ = false;
  std::atomic<bool> stopped_{false};  // Stop() ran: Rediscover attaches nothing more
  bool multi_links_ = false;

  // Used by Libraries(), on Start's thread and then only on the thread that calls Rediscover.
  MapsScanFilter maps_filter_;
  mutable std::mutex attach_mu_;  // guards libraries_, seen_files_, notes_
  std::vector<std::unique_ptr<AttachedLibrary>> libraries_;
  std::set<std::pair<dev_t, ino_t>> seen_files_;
  std::vector<std::string> notes_;

  // Decoder state: touched only from Poll().
  std::vector<Event> batch_;
  std::unordered_map<uint32_t, std::unique_ptr<ProcessState>> processes_;
  std::map<std::tuple<uint32_t, uint16_t, uint64_t>, uint64_t> last_launch_counts_;
  int64_t current_sec_ = 0;
  bool stop_flush_pending_ = false;
  int64_t polls_since_gc_ = 0;
  std::unique_ptr<Symbolizer> stub_symbols_;  // host stub → symbol, created on first need
  DriverObjectNames driver_names_;            // CUfunction / CUkernel → the driver's name
  uint64_t nesting_seen_[2] = {0, 0};         // launch_nesting totals already judged
  uint64_t last_failed_window_[2] = {0, 0};   // the last window whose proof failed
  std::atomic<bool> runtime_launches_detached_{false};
  std::atomic<int64_t> nesting_proofs_failed_{0};
  std::atomic<bool> nesting_rebase_{false};  // a driver attached late: restart the proof window
  std::atomic<bool> launches_on_{true};  // launch probes attached in this second
  int64_t launch_phase_ = -1;  // the duty cycle's first counting second with launches; -1: none yet
  int64_t launch_seconds_in_a_row_ = 0;  // seconds in a row with launches, until the phase
  int64_t covered_on_since_ns_ = -1;     // launch probes attached since (session ns); -1: off
  std::map<int64_t, int64_t> covered_ns_;  // covered time not yet filed, by second
  int64_t covered_off_ns_ = -1;           // when coverage last ended (session ns)
  // The latest times the launch probes were detached: [off, on) in session ns (on = INT64_MAX
  // while off), the last 256. attach_mu_.
  std::deque<std::pair<int64_t, int64_t>> launch_gaps_;
  GraphTracker graphs_;  // decoder state, Poll() only
};

}  // namespace gw
