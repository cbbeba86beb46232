// The findings, one function per rule, in families: CPU scheduling and the input pipeline
// (rules_cpu.cc), storage and memory (rules_memory_io.cc), the CUDA API and the GPU
// (rules_cuda.cc). Each rule reads Facts (facts.cc) and appends findings with numbers, evidence
// SQL and concrete fixes; RunRules (facts.h, rules.cc) runs them all. Thresholds live in
// thresholds.h; docs/detections.md documents both. Internal to src/analysis.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "analysis/facts.h"
#include "analysis/thresholds.h"
#include "store/ops.h"

namespace gw {

// One rule of the causal engine: its finding's id, the function that emits it, and what the
// rest of the engine needs to know about it. The table in rules.cc lists every rule once, in the
// order RunRules runs them: adding a finding is one entry there, one function here, one section
// in docs/detections.md and one test.
struct RuleSpec {
  const char* id;  // the finding's rule id (some functions emit a second id; see rules.cc)
  void (*run)(const Facts& f, std::vector<Finding>* out);
  // A host-side cause: the main thread's feed cause the finding blames (GPU truth, intervals).
  bool blames;
  FeedCause cause;
  const char* phrase;  // "while the main thread waited for a CPU"
  // Whether the cause also counts in the other feeding threads (the training process's CUDA
  // callers and the workers): a worker waiting for a CPU or for I/O holds the main thread up
  // through the batch it owes, while a worker blocked otherwise is just idle.
  bool in_feeders;
  // One story per report: a LOW finding of this family is dropped when a MEDIUM/HIGH one of the
  // family explains at least 1/kFoldLowShare times its lost time.
  bool host_story;
};
const RuleSpec* RulesBegin();
const RuleSpec* RulesEnd();
const RuleSpec* RuleById(const std::string& id);  // nullptr for an id no rule emits

}  // namespace gw

namespace gw::rules {

namespace th = ::gw::thresholds;

inline double Sec(double ns) { return ns / 1e9; }
inline double Sec(int64_t ns) { return static_cast<double>(ns) / 1e9; }
inline double Share(double part, double whole) { return whole > 0 ? part / whole : 0.0; }
inline Severity Max(Severity a, Severity b) {
  return static_cast<int>(a) > static_cast<int>(b) ? a : b;
}

// Where threads' CPU time went by mode: the share of their working samples (outside CUDA syncs)
// taken in the kernel, and their processes' page faults a second over the loop (op_seconds'
// page_fault counts). Computing that is mostly the kernel's is faulting in fresh memory or
// system calls, and neither more workers nor faster Python removes it.
struct KernelTime {
  int32_t pid = 0;  // the first of the processes (the strace fix names it)
  int64_t samples = 0;
  double kernel_share = 0;
  double faults_per_s = 0;
};
KernelTime KernelTimeOf(const Facts& f, const std::vector<int32_t>& tids,
                        const std::vector<int32_t>& pids);
// A Root line for threads ("The workers'", "the workers spend their time") whose CPU time was at
// least kKernelHeavyShare in the kernel, naming page faults when their processes took
// kFaultHeavyPerS or more, with its fix appended to `fixes`; nullopt below the share or without
// kProfileMinSamples samples.
std::optional<std::string> KernelTimeLine(const KernelTime& k, const char* whose, const char* who,
                                          std::vector<std::string>* fixes);

// The severity a value earns against three rising thresholds; nullopt below the lowest.
std::optional<Severity> Ladder(double value, double high, double medium, double low);
// The severity of a share of the window's GPU feed lost (th::k*LostShare).
std::optional<Severity> Ladder(double lost_share);

// Evidence SQL (rules.cc says what each substitutes and selects).
std::string OpNames(std::initializer_list<Op> ops);
std::string OpNamesWhere(bool (*pred)(Op));
std::string CudaOpCondition(const std::string& column);
std::string Sql(const Facts& f, const std::string& tmpl);
std::string CudaCalls(const Facts& f);
std::string SyncRows(const Facts& f);
std::string NearestRank(int p);
EvidenceQuery SyncBuckets(const Facts& f);
EvidenceQuery Throughput(const Facts& f);
EvidenceQuery SwitchKinds(const Facts& f);

bool IsFeeder(const Facts& f, int32_t pid);  // the main process or one of its workers
std::string Plural(int64_t n, const char* one, const char* many);

void SetEvidence(Finding* x, std::vector<EvidenceQuery> base);
// The sync-latency and throughput effect lines (and their evidence) several findings share.
void AddSyncEffect(const Facts& f, Finding* out);
void AddThroughputEffect(const Facts& f, Finding* out);

// The GPU idle seconds of batch waits a DataLoader finding claims: batch_compute + batch_io +
// batch_wait (the workers computing, reading, or asleep on the network while the trainer waited)
// to the one of them that held the delivering workers longest over their whole batch cycles
// (Facts::batch_cycles; by the path's waits where no cycle was seen), 0 to the others. A
// starved pipeline is one cause:
// the worker's dominant cost sets its pace, and removing it ends the wait, the other part with
// it (slow reads expose the batch's decode time that prefetching hid when healthy).
double BatchLostS(const Facts& f, BudgetCause c);
// The delivering workers' batch cycles by cause (Facts::batch_cycles), as a Root line; "" where
// no worker's delivery was seen.
std::string BatchCycleLine(const Facts& f);

// rules_cpu.cc
// Other processes held at least thresholds::kOthersRunqStoryShare of the CPU time the feeders
// waited for: the run-queue story is cpu-contention; else cpu-oversubscription (the job alone).
bool OthersCrowdTheJob(const Facts& f);
// Run-queue waits on a mostly idle host whose CPUs the feeders all used: wake-up latency among
// the job's own threads, which neither pinning nor fewer threads removes (graded LOW).
bool WakeupLatencyOnly(const Facts& f);
std::string WakeupLatencyLine(const Facts& f);
void CpuContention(const Facts& f, std::vector<Finding>* out);
void DataLoaderStarvation(const Facts& f, std::vector<Finding>* out);
// The budget line every host finding quotes: "N s of GPU idle time in W s (P% of the window),
// M s on the critical path".
std::string IdleLine(const Facts& f, BudgetCause c);
// "GPU busy for this job 11.4 s of 16.1 s (71.1%)", `note` after the share when given.
std::string GpuBusyLine(const Facts& f, const std::string& note = "");
// The main thread's off-CPU time by reason and waker, and the GPU's samples (budget findings).
EvidenceQuery MainThreadSwitches(const Facts& f);
EvidenceQuery GpuSamples(const Facts& f);
void AddBudgetEvidence(const Facts& f, Finding* x);

// rules_host.cc (from the GPU-time budget)
void HostCompute(const Facts& f, std::vector<Finding>* out);
void LockContention(const Facts& f, std::vector<Finding>* out);
void GilContention(const Facts& f, std::vector<Finding>* out);
void CpuOversubscription(const Facts& f, std::vector<Finding>* out);
// The job's cgroup quota throttled it enough to cost GPU time (what cpu-quota reports): then
// pinning or renicing cannot help, whatever else held the CPUs.
bool QuotaThrottles(const Facts& f);
void CpuQuota(const Facts& f, std::vector<Finding>* out);
void ProcessIo(const Facts& f, std::vector<Finding>* out);
// rules_waits.cc (from the GPU-time budget)
void HostSleep(const Facts& f, std::vector<Finding>* out);
void OtherProgram(const Facts& f, std::vector<Finding>* out);
void LoaderWaits(const Facts& f, std::vector<Finding>* out);
// rules_memory_io.cc
void IoBottleneck(const Facts& f, std::vector<Finding>* out);
void MemoryPressure(const Facts& f, std::vector<Finding>* out);
void OomKills(const Facts& f, std::vector<Finding>* out);
// The job's cgroup memory limit acted but cost too little for memory-pressure (LOW).
void MemoryLimitHit(const Facts& f, std::vector<Finding>* out);
// rules_cuda.cc
void MemcpyBottleneck(const Facts& f, std::vector<Finding>* out);
void SyncHeavy(const Facts& f, std::vector<Finding>* out);
// Frequent syncs with few launches each, and a host that keeps up between them: the GPU idles
// because each sync empties its queue (sync-heavy takes the budget's computing seconds).
bool SyncDrainsThePipeline(const Facts& f);
// The main thread's seconds inside cudaMalloc/cudaFree in the window, and the GPU idle seconds
// they explain when they are churn (the budget's allocator line; malloc-churn's lost time).
double AllocatorSeconds(const Facts& f);
double AllocatorLostS(const Facts& f);
// The main thread's computing in the budget: host_compute, and the allocator line unless
// malloc-churn claims it (lost seconds; path seconds).
double MainComputeLostS(const Facts& f);
double MainComputePathS(const Facts& f);
void LaunchBound(const Facts& f, std::vector<Finding>* out);
// The main process's CUDA Graph captures (begin to end on one thread) and instantiations after
// warm-up (the first tenth of the session is start-up), and the GPU idle seconds they explain:
// their share of host_compute's lost seconds (graph-recapture's lost time).
struct GraphCaptureTotals {
  int64_t captures = 0;
  int64_t instantiations = 0;
  int64_t capture_ns = 0;
  int64_t instantiate_ns = 0;
};
GraphCaptureTotals GraphCaptures(const Facts& f);
double GraphCaptureLostS(const Facts& f);
void GraphRecapture(const Facts& f, std::vector<Finding>* out);
void AllocatorSpikes(const Facts& f, std::vector<Finding>* out);
void ColdStart(const Facts& f, std::vector<Finding>* out);
void GpuSharing(const Facts& f, std::vector<Finding>* out);
void AllocFailures(const Facts& f, std::vector<Finding>* out);
// rules_nccl.cc
void CollectiveStraggler(const Facts& f, std::vector<Finding>* out);

}  // namespace gw::rules
