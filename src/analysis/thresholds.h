// Every threshold gpuwhy's findings use, in one place. docs/detections.md explains each; change
// both together.
#pragma once

#include <cstdint>

namespace gw::thresholds {

// ---- Shared severity ladder: lost GPU-feed time as a share of the window's wall clock ----
// "Lost" is critical-path time of the main CUDA thread attributed to a cause (see
// docs/detections.md, "Feed-time attribution").
inline constexpr double kHighLostShare = 0.15;
inline constexpr double kMediumLostShare = 0.05;
inline constexpr double kLowLostShare = 0.01;

// Baselines: the window is cut in buckets; the quietest bucket (least run-queue wait on the
// feeding threads, earliest on ties) is the baseline. Buckets with fewer syncs are skipped.
inline constexpr int64_t kBucketNs = 10'000'000'000;
inline constexpr int64_t kMinSyncsPerBucket = 20;

// A sync is "slow" beyond this multiple of the baseline p50 (and at least kSlowSyncFloorNs).
inline constexpr double kSlowSyncFactor = 5.0;
inline constexpr int64_t kSlowSyncFloorNs = 200'000;  // 200 µs

// Main thread off-CPU outside CUDA calls for at least this long = waiting for a batch.
inline constexpr int64_t kBatchWaitMinNs = 1'000'000;  // 1 ms

// CPU contention needs run-queue wait as a share of the feeders' thread time too, so a single
// long preemption on an idle box stays LOW.
inline constexpr double kContentionRunqShareMin = 0.02;

// Run-queue waits with no competitor outside the job, on a host whose CPUs were mostly idle
// (system busy share below this, over the window) and not pinned to fewer CPUs than it has:
// wake-up latency among the job's own threads, not a shortage of CPUs; cpu-contention stays LOW.
inline constexpr double kSelfContentionHostBusyMax = 0.50;

// A descendant feeds the training process (a DataLoader worker, whatever its command line) when
// its threads woke the training process's threads at least this often in the window.
inline constexpr int64_t kFeederMinWakes = 3;

// Competitors: a process is named only when it took at least this much CPU from the feeders,
// and this share of all CPU time taken from them.
inline constexpr int64_t kCompetitorMinNs = 50'000'000;  // 50 ms
inline constexpr double kCompetitorMinShare = 0.02;

// DataLoader starvation: worker state while the main thread waited for a batch. Workers
// "busy" (running) for at least this share of that time means they are too slow or too few.
inline constexpr double kStarvationWorkerBusyShare = 0.5;

// I/O: block request latency p99 above this multiple of the baseline p50 is called out.
inline constexpr double kIoLatencyFactor = 5.0;

// Memory pressure: swap in use, or major faults per second on the feeders.
inline constexpr int64_t kSwapUsedBytesMin = 64ll << 20;  // 64 MiB
inline constexpr double kMajorFaultsPerSecMin = 50.0;
// Host memory counts as short (major faults are pressure, not a cold page cache) from this share
// of it in use, in percent.
inline constexpr double kMemoryShortUsedPct = 90.0;

// Memcpy: share of the main thread's wall clock inside cudaMemcpy*; pageable share of bytes.
inline constexpr double kMemcpyHighShare = 0.30;
inline constexpr double kMemcpyMediumShare = 0.15;
inline constexpr double kMemcpyLowShare = 0.05;
inline constexpr double kPageableBytesShareMin = 0.5;
// A copy that lasted at least kCopyWaitMinNs and moved less than kCopyWaitMaxBytesPerNs (bytes
// per ns = GB/s; 0.1 GB/s is far below any PCIe or NVLink transfer, pageable included) spent its
// time waiting for the work queued before it on the stream, not moving data: `loss.item()`'s
// device-to-host copy. Its time counts as a sync.
inline constexpr int64_t kCopyWaitMinNs = 50'000;
// A cudaFree/cuMemFree of device memory that lasted at least this long waited for the device
// (it drains it before freeing): the wait for the step's kernels, a sync on the critical path.
// The driver's own unmapping takes microseconds a block (1–4 µs apart on the H100, 2026-12-07).
inline constexpr int64_t kFreeWaitMinNs = 250'000;
inline constexpr double kCopyWaitMaxBytesPerNs = 0.1;

// Sync-heavy loop: syncs per second with few launches per sync.
inline constexpr double kSyncHeavyPerSec = 200.0;
inline constexpr double kSyncHeavyLaunchesPerSync = 20.0;
inline constexpr double kSyncHeavyMediumPerSec = 500.0;

// Launch-bound: main thread's share of wall clock inside launch calls, with little sync wait
// (the GPU finishes before the CPU launches more).
inline constexpr double kLaunchHighShare = 0.70;
inline constexpr double kLaunchMediumShare = 0.50;
inline constexpr double kLaunchLowShare = 0.30;
inline constexpr double kLaunchMaxSyncShare = 0.10;

// cudaMalloc churn (steady-state allocator calls per second) and periodic spikes.
inline constexpr double kMallocChurnPerSec = 50.0;
// torch.cuda.empty_cache()'s signature: a free that drained the device followed by at least
// kFreeBurstMinFrees - 1 more frees, each within kFreeBurstGapNs of the previous one's end (the
// cached blocks handed back at once: 26 frees 1–4 µs apart on the H100, 2026-12-07).
inline constexpr int kFreeBurstMinFrees = 4;
inline constexpr int64_t kFreeBurstGapNs = 1'000'000;
inline constexpr double kMallocSpikeFactor = 10.0;        // a second's allocator time vs the median
inline constexpr int64_t kMallocSpikeMinNs = 20'000'000;  // and at least 20 ms in that second
inline constexpr int kMallocSpikeMinCount = 3;
inline constexpr double kPeriodJitterShare = 0.2;  // gaps within ±20% of the median gap

// A Python function is a file writer (its CPU time is the writes': main-thread-io) when at least
// this share of its on-CPU samples are in the kernel under write calls.
inline constexpr double kWriterMinWriteShare = 0.10;
// ... and when it is under less than this share of the thread's samples, those spinning in its
// CUDA syncs included: a function under nearly all of them is the thread's loop (a training loop
// that os.write()s a pipe or logs a line each step), whose computing is not its writes'. Its
// write calls still count.
inline constexpr double kWriterMaxEnclosingShare = 0.9;

// CUDA Graphs recorded again and again: at least this many captures + instantiations after
// warm-up (and lost time on the finding ladder).
inline constexpr int64_t kGraphRecaptureMinCount = 4;

// Cold start: time from the first CUDA call until the per-second CUDA op rate first reaches
// this share of the steady-state median.
inline constexpr double kColdStartSteadyShare = 0.5;
inline constexpr int64_t kColdStartMinNs = 2'000'000'000;  // 2 s
inline constexpr double kColdStartMediumShare = 0.05;      // of the window
inline constexpr double kColdStartHighShare = 0.15;

// GPU shared by several processes: overlap of their CUDA activity (seconds with calls from
// both) as a share of the main process's active seconds, and sync p50 inflation while shared.
inline constexpr double kGpuShareOverlapMin = 0.2;
inline constexpr double kGpuShareHighInflation = 2.0;

// A LOW host-side finding is dropped when a MEDIUM/HIGH one of the same family (contention,
// starvation, I/O, memory) explains at least 1/kFoldLowShare times its lost time.
inline constexpr double kFoldLowShare = 0.5;

// diff: a change counts as better/worse beyond this relative change (noise band).
inline constexpr double kDiffNoiseShare = 0.10;

// NVML truth (src/analysis/gpu.cc).
// A GPU sample is blamed on a finding when the main thread spent at least this share of the
// sample's interval in the finding's cause.
inline constexpr double kGpuBlameShare = 0.2;
// At least this many blamed samples before a finding's Effect quotes SM activity.
inline constexpr int64_t kGpuMinBlamedSamples = 3;
// The job's GPU is "the bottleneck" when its median SM activity (utilization without GPM) is at
// least this, the findings' lost time is under kGpuBoundHostShare of the window, and none of them
// is MEDIUM or more.
inline constexpr double kGpuBusyPct = 60.0;
inline constexpr double kGpuBoundHostShare = 0.10;

// ---- The GPU-time budget (src/analysis/budget.cc) ----
// Without GPU samples, a sync that returned within this long found the GPU already done (an idle
// stream's cudaStreamSynchronize costs a few µs); a longer one may have found it working.
inline constexpr int64_t kStreamSyncIdleNs = 20'000;  // 20 µs
// A sync that waited at least this long found work the job queued no later than its
// since_work_ns says (at most GW_SMALL_COPIES_MAX small copies of under 64 KiB came after it,
// which take tens of µs): the GPU worked from then to the sync (WorkedSpans in budget.cc).
inline constexpr int64_t kWorkedSyncNs = 250'000;  // 250 µs
// A drained stretch (budget.cc, DrainedSpans) runs on through the main thread's calls that give
// the GPU no work only while each starts within this of the previous one's end: too little time
// to launch a kernel between them (a C++ cudaLaunchKernel takes a few µs of host time; PyTorch's
// empty_cache() frees its blocks 1-4 µs apart on the H100).
inline constexpr int64_t kDrainGapNs = 10'000;
// A process first seen within this of the window's start started with it, and one first seen
// within this of the session clock's start started with the session (`trace -- CMD` forks the
// job a few ms before its clock starts): its start-up before its first CUDA call is outside the
// job's loop (Facts::loop_begin).
inline constexpr int64_t kLoopStartSlackNs = 1'000'000'000;
// Run-queue waits are told as contention (others crowd the job) once other processes held at
// least this share of the CPU time the feeding threads waited for; below it, as the job's own
// threads outnumbering its CPUs.
inline constexpr double kOthersRunqStoryShare = 0.25;
// cpu-quota's refill grid (facts.cc FindRefillGrid): the job's run-queue waits of at least
// kQuotaGridMinWaitNs, binned by their end modulo the quota's period; the kQuotaRefillSlackNs
// arc of the period holding the most of their time is the refill when it holds at least
// kQuotaGridMinShare of it (ends spread evenly would put slack/period there: 2% of a 100 ms
// period) and the period is at least kQuotaGridMinSlacks slacks long. The slack covers the
// timer's expiry and the woken thread's getting onto a CPU.
inline constexpr int64_t kQuotaRefillSlackNs = 2'000'000;
inline constexpr int64_t kQuotaGridMinWaitNs = 1'000'000;
inline constexpr double kQuotaGridMinShare = 0.3;
inline constexpr int64_t kQuotaGridMinSlacks = 10;
// GPU samples are pooled into stretches of at least this long before idle time is attributed.
inline constexpr int64_t kBudgetPoolNs = 1'000'000'000;
// "Nothing stands out" needs the job to have kept its GPU busy at least this share of the window
// (the verdict then says it is GPU-bound).
inline constexpr double kGpuBoundBusyShare = 0.85;
// Every loop spends some host time per step; the host-compute finding is graded on a higher
// ladder (GPU idle time explained, as a share of the window) than the waits are.
inline constexpr double kHostComputeHighShare = 0.35;
inline constexpr double kHostComputeMediumShare = 0.20;
inline constexpr double kHostComputeLowShare = 0.10;
// host-sleep and waits-for-program start at a higher LOW than the other waits: a healthy loop
// has timer and cross-program wake-ups of its own (DataLoader status checks, logging, the
// tracer), worth no finding below this share of the window's GPU idle time.
inline constexpr double kWaitLowShare = 0.03;
// Host-compute reads as kernel dispatch (CUDA Graphs, larger kernels) rather than other CPU work
// from this many launches a second (or helper threads doing half the computing).
inline constexpr double kHostDispatchLaunchesPerSec = 20000.0;
// A main-thread sleep that a timer ended is a hold by a sibling thread (the GIL's timed waits)
// when one sibling ran at least this share of it.
inline constexpr double kThreadHoldBusyShare = 0.5;
// A sibling thread holding the main thread (lock-contention) must explain at least this much.
inline constexpr double kThreadHoldLowShare = 0.01;

// The on-CPU profile's sections in explain: a group of threads is shown when its CPU time (its
// samples / profile_hz) is at least this share of the window, per thread of the group — the
// point where "what was it doing on the CPU?" is a question worth a section. Fewer than
// kProfileMinSamples samples say too little to rank lines by.
inline constexpr double kProfileShowShare = 0.2;
inline constexpr int64_t kProfileMinSamples = 20;
// Threads whose working CPU samples were at least this share in the kernel compute in the
// kernel, not in Python (rules.cc KernelTimeLine): their Root says so. It names page faults when
// their processes took at least kFaultHeavyPerS a second: 20,000 first touches of 4 KiB pages
// are 80 MB/s of fresh memory, ~30× what a healthy simulated loop takes with its workers, and at
// ~1-2 µs each (zeroing the page, mapping it; measured: 368,000 a second cost the simulated
// loop's main thread 84% of a CPU with the unmapping) a few percent of a CPU at least.
inline constexpr double kKernelHeavyShare = 0.5;
inline constexpr double kFaultHeavyPerS = 20000.0;
// Another process's GPU work (gpu-sharing from the budget): share of the window the job waited
// on a GPU busy with others.
inline constexpr double kNeighbourLowShare = 0.02;
// gpu-sharing names the range of its cost (lost seconds to the whole wait) where the job waited
// on the shared GPU this much longer than the neighbour's work explains.
inline constexpr double kNeighbourWaitBeyondLost = 1.2;
// The GPU verdict says the GPU is shared (not "faster kernels") from this share of the window
// busy with other processes' work.
inline constexpr double kSharedGpuVerdictShare = 0.10;
// host-compute reads as dispatch when the helper threads' computing explains at least this
// share of the main thread's.
inline constexpr double kHostDispatchHelperShare = 0.5;
// collective-straggler (rules_nccl.cc, docs/nccl.md): a rank is a straggler when its median
// lateness exceeds the other ranks' pooled median lateness by more than the larger of
// kNcclLateFloorNs and kNcclMadK robust standard deviations (1.4826 × their MAD), it enqueued
// at least kNcclLastShare of the complete collectives last, and the window has at least
// kNcclMinCollectives of them. The floor keeps scheduling jitter of a loaded host (a wake-up
// late by a few hundred µs) from naming a rank.
inline constexpr int64_t kNcclLateFloorNs = 2'000'000;
inline constexpr double kNcclMadK = 3.0;
inline constexpr double kNcclLastShare = 0.5;
inline constexpr int64_t kNcclMinCollectives = 10;
// Severity: the other ranks' measured wait as a share of their time in the window.
inline constexpr double kNcclWaitHighShare = 0.20;
inline constexpr double kNcclWaitMediumShare = 0.05;

}  // namespace gw::thresholds
