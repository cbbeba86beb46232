// HostSource: Linux kernel events around the traced job (scheduler, memory, block I/O, process
// lifecycle), and the owner of the tracked set the CUDA source shares.
//
// Start() loads and attaches host.bpf.c, then seeds the tracked set from user space: every
// process that maps libcudart/libcuda (or, with --pid/--comm, the named ones) and their
// existing descendants. From then on the BPF side grows the set on fork and shrinks it on exit;
// Rediscover() (≈1 Hz) adds CUDA processes started after the trace began.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/scoped.h"
#include "base/status.h"
#include "sources/host/host_decode.h"
#include "sources/source.h"

struct host_bpf;
struct ring_buffer;
struct bpf_link;

namespace gw {

struct HostOptions {
  int64_t ring_bytes = 8 << 20;              // ring buffer size (power of two; in RSS twice)
  int64_t read_threshold_ns = 1'000'000;     // slow-read rows from this duration; 0 = off
  int64_t fault_io_window_ns = 5'000'000;    // I/O sleep this soon after a fault = fault wait
  int64_t competitor_min_runq_ns = 100'000;  // competitor rule 2 threshold
  // Seed the tracked set from /proc at Start (CUDA processes or --pid/--comm). Tests turn it
  // off and call Track() themselves.
  bool seed_from_proc = true;
  std::string proc_root = "/proc";
};

// Display name for process_names: the comm, plus the script for interpreters
// ("python3 (train.py)", "python3 (-m torch.distributed.run)"). `argv` is the NUL-split
// cmdline.
std::string ProcessDisplayName(const std::string& comm, const std::vector<std::string>& argv);

class HostSource : public Source, private HostRecordContext {
 public:
  static StatusOr<std::unique_ptr<HostSource>> Create(HostOptions options = {});
  ~HostSource() override;
  HostSource(const HostSource&) = delete;
  HostSource& operator=(const HostSource&) = delete;

  std::string name() const override { return "host"; }
  Status Start(const SourceContext& context) override;
  int64_t Poll() override;
  void Rediscover() override;
  std::vector<std::string> TakeNotes() override;
  DropCounts Drops() const override;
  void Stop() override;

  // The tracked-set map (valid after Start); see host_abi.h for its layout.
  int tracked_map_fd() const;
  int TrackedSetFd() const override { return tracked_map_fd(); }
  // Adds a process and its existing descendants to the tracked set (flags GW_TRACKED_*).
  Status Track(int32_t pid, uint32_t flags);
  bool IsTracked(int32_t pid) const;
  std::vector<int32_t> TrackedPids() const override;
  // Competitors currently in the LRU map.
  std::vector<int32_t> CompetitorPids() const;
  // The per-CPU interrupt nesting state (host.bpf.c irq_depth), valid after Start; tests set it
  // to reproduce an interrupt exit the programs never saw.
  int irq_state_fd() const;

  // Records the BPF side submitted to the ring buffer, and records this source decoded. After
  // Stop() and a final Poll() they are equal when nothing was lost.
  int64_t RecordsEmitted() const;
  int64_t RecordsConsumed() const { return consumed_; }
  std::optional<RecordBalance> Records() const override {
    return RecordBalance{RecordsEmitted(), RecordsConsumed()};
  }

 private:
  explicit HostSource(HostOptions options);
  static int OnRecord(void* ctx, void* data, size_t size);
  void Decode(const gw_host_record& r);
  // HostRecordContext: what the decoder (host_decode.h) asks of the source.
  int64_t FilePathId(int32_t pid, uint64_t addr, uint64_t inode) override;
  int64_t DeviceNameId(uint64_t dev) override;
  void SawProcess(int32_t pid, const std::string& comm, bool tracked, int32_t ppid) override;
  void ProcessExec(int32_t pid, const std::string& comm) override;
  void ProcessFork(int32_t parent, int32_t child, const std::string& comm, int64_t ts_ns) override;
  void ProcessExit(int32_t pid, const std::string& comm, bool tracked, int32_t ppid, int64_t ts_ns,
                   int64_t status) override;
  // Makes sure the sink has a ProcessInfo for `pid` (read from /proc at first sight).
  void NameProcess(int32_t pid, const std::string& fallback_comm, bool tracked, int32_t ppid);
  void RefreshNames();
  void DrainFaultCounts(bool final_drain);
  void SeedFromProc();
  std::map<int32_t, int32_t> ParentMap() const;
  uint64_t SumPerCpu(int map_fd, uint32_t slot) const;

  HostOptions options_;
  SourceContext context_;
  bool started_ = false;
  bool stopped_ = false;

  static void DestroySkel(host_bpf* skel);
  static void FreeRing(ring_buffer* rb);
  static void DestroyLink(bpf_link* link);
  using ScopedSkel = ScopedResource<host_bpf*, DestroySkel, nullptr>;
  using ScopedRing = ScopedResource<ring_buffer*, FreeRing, nullptr>;
  using ScopedLink = ScopedResource<bpf_link*, DestroyLink, nullptr>;
  ScopedSkel skel_;
  ScopedRing ring_;
  // The on-CPU profile's perf events (trace --profile-hz), one per CPU, as links_.
  Status AttachProfile(uint32_t hz);
  int profile_cpus_ = 0;
  std::vector<ScopedLink> links_;
  int tracked_fd_ = -1;
  int competitors_fd_ = -1;
  int drops_fd_ = -1;
  int emitted_fd_ = -1;
  int fault_counts_fd_ = -1;

  // Drain-thread state.
  std::vector<Event> batch_;
  int64_t consumed_ = 0;
  struct KnownProcess {
    std::string comm;
    bool tracked = false;
    bool exited = false;
    std::vector<std::string> argv;  // for the display name when comm changes
  };
  std::unordered_map<int32_t, KnownProcess> known_;
  std::unordered_map<int32_t, uint64_t> fault_totals_;  // last cumulative count read
  std::set<int32_t> exited_fault_pids_;                  // delete after the next read
  int64_t last_fault_drain_ns_ = 0;
  // Untracked pids already checked: when to look at their maps again. The interval doubles
  // per miss (1 s … 32 s) so a process that imports torch late is still found, while the
  // steady-state cost stays far below reading every process's maps each second. Kernel
  // threads (no maps) are never rechecked. (Without filters the CUDA source also adds a
  // process on its first CUDA call, in BPF, so this is the fallback path.)
  struct RecheckState {
    int64_t next_ns = 0;
    int64_t interval_ns = 0;
  };
  std::unordered_map<int32_t, RecheckState> recheck_;
  struct Mapping {
    uint64_t start, end, inode;
    std::string path;
  };
  std::unordered_map<int32_t, std::vector<Mapping>> maps_cache_;
  std::unordered_map<int32_t, int64_t> maps_read_ns_;
  std::unordered_map<uint64_t, int64_t> device_ids_;

  mutable std::mutex notes_mu_;
  std::vector<std::string> notes_;
};

}  // namespace gw
