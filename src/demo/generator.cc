#include "demo/generator.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "demo/scenarios.h"

namespace gw {

namespace {

constexpr int64_t kUs = 1'000;
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kCores = 8;

// Process ids of the simulated machine (fixed so outputs are reproducible).
constexpr int32_t kTrainPid = 3821;
constexpr int32_t kFirstWorkerPid = 3822;
constexpr int32_t kPrometheusPid = 1187;
constexpr int32_t kFluentBitPid = 1243;
constexpr int32_t kFfmpegPid = 4410;
constexpr int32_t kJavaPid = 5120;
constexpr int32_t kEvalPid = 6011;

// Distributions built on mt19937_64's raw output only (whose sequence the standard fixes), so a
// seed gives the same recording with any standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  double U() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  double Exp(double mean) { return -mean * std::log(1.0 - U()); }
  double Normal() {
    double u1 = std::max(U(), 1e-300);
    double u2 = U();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  double LogNormal(double median, double sigma) { return median * std::exp(sigma * Normal()); }
  bool Chance(double p) { return U() < p; }
  int Poisson(double mean) {
    if (mean <= 0) return 0;
    double l = std::exp(-std::min(mean, 500.0));
    int k = 0;
    double p = 1.0;
    do {
      ++k;
      p *= U();
    } while (p > l && k < 10000);
    return k - 1;
  }
  int64_t Pick(int64_t n) { return static_cast<int64_t>(U() * static_cast<double>(n)) % n; }

 private:
  std::mt19937_64 gen_;
};

struct Knobs {
  int workers = 4;
  double contention = 0;       // CPU competitors (ffmpeg + busy agents)
  double decode_ms = 14;       // worker CPU per batch, baseline
  double decode_peak_ms = 14;  // at the incident's peak
  double io = 0;               // page-cache misses on a slow disk
  double memory = 0;           // major faults, reclaim, swap
  bool pageable = false;
  double copy_mb = 4;
  double copy_peak_mb = 4;
  bool periodic_alloc = false;
  bool cold_start = false;
  bool gpu_peer = false;
};

Knobs KnobsFor(const std::string& scenario) {
  Knobs k;
  if (scenario == "cpu-contention") k.contention = 1;
  if (scenario == "memcpy-bottleneck") {
    k.pageable = true;
    k.copy_mb = 6;
    k.copy_peak_mb = 72;
  }
  if (scenario == "dataloader-starvation") {
    k.workers = 2;
    k.decode_ms = 7;
    k.decode_peak_ms = 36;
  }
  if (scenario == "io-bottleneck") k.io = 1;
  if (scenario == "memory-pressure") k.memory = 1;
  if (scenario == "periodic-spike") k.periodic_alloc = true;
  if (scenario == "cold-start") k.cold_start = true;
  if (scenario == "gpu-contention") k.gpu_peer = true;
  return k;
}

// Incident intensity at session time t: baseline (0), ramp, peak (1), partial recovery.
double Intensity(int64_t t, int64_t duration) {
  double x = static_cast<double>(t) / static_cast<double>(duration);
  if (x < 0.17) return 0;
  if (x < 0.25) return (x - 0.17) / 0.08;
  if (x < 0.625) return 1;
  if (x < 0.75) return 1 - 0.75 * (x - 0.625) / 0.125;
  return 0.25 - 0.15 * (x - 0.75) / 0.25;
}

struct Holder {
  int32_t pid;
  double weight;
};

// How a stretch of CPU work gets interrupted.
struct CpuEnv {
  double preempt_per_ms = 0.01;
  double runq_mean_ns = 60 * kUs;
  std::vector<Holder> holders;
  double faults_per_ms = 0;  // major faults (sleep in I/O wait after the fault)
  double fault_sleep_ns = 3 * kMs;
  double reclaims_per_ms = 0;  // direct reclaim, on CPU
};

class Simulation {
 public:
  Simulation(const Knobs& knobs, Rng& rng, int64_t duration, StoreWriter& writer)
      : k_(knobs), rng_(rng), duration_(duration), writer_(writer) {
    worker_free_.assign(static_cast<size_t>(k_.workers), 900 * kMs);
    static const char* const kKernels[] = {
        "ampere_sgemm_128x64_tn", "vectorized_elementwise_kernel",
        "reduce_kernel",          "softmax_warp_forward",
        "layer_norm_kernel",      "cudnn::winograd_fprop"};
    for (const char* name : kKernels) kernel_names_.push_back(writer_.InternString(name));
    dataset_name_ = writer_.InternString("/data/imagenet/train/shard-00042.tar");
  }

  void Run();
  void Write();
  int64_t events() const { return static_cast<int64_t>(events_.size()); }

 private:
  int32_t WorkerPid(int w) const { return kFirstWorkerPid + w; }
  double I(int64_t t) const { return Intensity(t, duration_); }
  int64_t Ns(double v) const { return std::max<int64_t>(0, std::llround(v)); }

  void Emit(Event e) {
    if (e.ts_ns < 0 || e.ts_ns >= duration_) return;
    if (e.op == Op::kSchedSwitch) ++switches_per_sec_[e.ts_ns / kSec];
    if (e.op == Op::kMajorFault) ++faults_per_sec_[e.ts_ns / kSec];
    events_.push_back(e);
  }
  // `waker`: who ends a sleep, as capture records it (sched_waking): a thread (its pid and tid),
  // 0 for an interrupt (disk, GPU, timer), kNull for none (preempted).
  void Switch(int32_t pid, int32_t tid, int64_t ts, int64_t sleep, SwitchKind kind, int64_t runq,
              int32_t other, int64_t waker = kNull) {
    Event e;
    e.ts_ns = ts;
    e.pid = pid;
    e.tid = tid;
    e.op = Op::kSchedSwitch;
    e.duration_ns = sleep + runq;
    e.kind = static_cast<int64_t>(kind);
    e.runq_ns = runq;
    e.other_pid = other;
    e.cpu = rng_.Pick(kCores);
    if (kind != SwitchKind::kPreempted) {
      e.waker_pid = waker == kNull ? 0 : waker;  // unnamed sleeps end in a timer/interrupt
      e.waker_tid = e.waker_pid;                 // the simulated processes are single-threaded
    }
    Emit(e);
  }
  void Call(int32_t pid, int32_t tid, Op op, int64_t ts, int64_t dur, int64_t bytes = kNull,
            int64_t kind = kNull, int64_t name = kNull) {
    Event e;
    e.ts_ns = ts;
    e.pid = pid;
    e.tid = tid;
    e.op = op;
    e.duration_ns = dur;
    e.bytes = bytes;
    e.kind = kind;
    e.name_id = name;
    if (OpLayer(op) != Layer::kHost) e.ret = 0;
    Emit(e);
  }
  int32_t PickHolder(const std::vector<Holder>& holders) {
    double total = 0;
    for (const Holder& h : holders) total += h.weight;
    double x = rng_.U() * total;
    for (const Holder& h : holders) {
      if (x < h.weight) return h.pid;
      x -= h.weight;
    }
    return holders.empty() ? 0 : holders.back().pid;
  }
  // Wake-up latency after a sleep: run-queue wait before running again.
  int64_t WakeDelay(int64_t t) {
    double c = k_.contention * I(t);
    if (c > 0 && rng_.Chance(0.75 * c)) return Ns(rng_.Exp((0.6 + 3.4 * c) * kMs));
    return Ns(rng_.Exp(12 * kUs)) + 2 * kUs;
  }
  int32_t SleepHolder(int64_t t) {
    double c = k_.contention * I(t);
    if (c > 0 && rng_.Chance(0.8 * c)) return PickHolder(Competitors());
    return 0;  // idle
  }
  std::vector<Holder> Competitors() const {
    std::vector<Holder> h = {{kFfmpegPid, 6}, {kPrometheusPid, 1.5}, {kFluentBitPid, 1.2}};
    for (int w = 0; w < k_.workers; ++w) h.push_back({WorkerPid(w), 0.3});
    return h;
  }
  CpuEnv EnvAt(int64_t t) const {
    CpuEnv env;
    double c = k_.contention * I(t);
    env.preempt_per_ms = 0.01 + 0.55 * c;
    env.runq_mean_ns = c > 0.05 ? (1.2 + 2.8 * c) * kMs : 60 * kUs;
    env.holders =
        c > 0.05 ? Competitors() : std::vector<Holder>{{kPrometheusPid, 1}, {kFluentBitPid, 1}};
    double m = k_.memory * I(t);
    env.faults_per_ms = 0.35 * m;
    env.fault_sleep_ns = (1.5 + 4 * m) * kMs;
    env.reclaims_per_ms = 0.08 * m;
    return env;
  }
  // Runs `cpu` ns of CPU work from `start`, interrupted per `env`. Returns the wall end and the
  // running chunks (to place call rows on CPU).
  int64_t OnCpu(int32_t pid, int32_t tid, int64_t start, int64_t cpu, const CpuEnv& env,
                std::vector<std::pair<int64_t, int64_t>>* chunks);
  int64_t WallAt(const std::vector<std::pair<int64_t, int64_t>>& chunks, int64_t cpu_offset);
  int64_t ProduceBatch(int64_t step);
  void TrainingLoop();
  void ColdStartPrologue(int64_t* now);
  void AllocatorStorm(int64_t* now);
  void Background(int32_t pid, int32_t threads, bool busy_scales);
  void EvalJob();
  void Snapshots();
  void Processes();

  const Knobs& k_;
  Rng& rng_;
  int64_t duration_;
  StoreWriter& writer_;
  std::vector<Event> events_;
  std::vector<int64_t> worker_free_;
  std::vector<int64_t> consumed_;
  std::vector<int64_t> kernel_names_;
  int64_t dataset_name_ = 0;
  int64_t launch_counter_ = 0;
  // Launches counted but not recorded as rows: (second, pid, kernel name id) → launches.
  std::map<std::tuple<int64_t, int32_t, int64_t>, int64_t> unrecorded_launches_;
  std::map<int64_t, int64_t> switches_per_sec_;
  std::map<int64_t, int64_t> faults_per_sec_;
  int64_t gpu_free_ = 0;
  double gpu_factor_ = 1;
};

int64_t Simulation::OnCpu(int32_t pid, int32_t tid, int64_t start, int64_t cpu, const CpuEnv& env,
                          std::vector<std::pair<int64_t, int64_t>>* chunks) {
  double ms = static_cast<double>(cpu) / kMs;
  struct Cut {
    int64_t at;
    int type;  // 0 preempt, 1 fault, 2 reclaim
  };
  std::vector<Cut> cuts;
  for (int i = rng_.Poisson(env.preempt_per_ms * ms); i > 0; --i) {
    cuts.push_back({Ns(rng_.U() * static_cast<double>(cpu)), 0});
  }
  for (int i = rng_.Poisson(env.faults_per_ms * ms); i > 0; --i) {
    cuts.push_back({Ns(rng_.U() * static_cast<double>(cpu)), 1});
  }
  for (int i = rng_.Poisson(env.reclaims_per_ms * ms); i > 0; --i) {
    cuts.push_back({Ns(rng_.U() * static_cast<double>(cpu)), 2});
  }
  std::sort(cuts.begin(), cuts.end(), [](const Cut& a, const Cut& b) { return a.at < b.at; });
  int64_t wall = start;
  int64_t done = 0;
  for (const Cut& c : cuts) {
    int64_t run = c.at - done;
    if (chunks && run > 0) chunks->push_back({wall, wall + run});
    wall += run;
    done = c.at;
    if (c.type == 0) {
      int64_t runq = Ns(rng_.Exp(env.runq_mean_ns)) + 5 * kUs;
      Switch(pid, tid, wall, 0, SwitchKind::kPreempted, runq, PickHolder(env.holders));
      wall += runq;
    } else if (c.type == 1) {
      Call(pid, tid, Op::kMajorFault, wall, 0);
      int64_t sleep = Ns(rng_.LogNormal(static_cast<double>(env.fault_sleep_ns), 0.5));
      int64_t runq = WakeDelay(wall);
      Switch(pid, tid, wall + 2 * kUs, sleep, SwitchKind::kBlockedFault, runq, 0);
      wall += 2 * kUs + sleep + runq;
    } else {
      int64_t d = Ns(rng_.LogNormal(2.0 * kMs, 0.5));
      Call(pid, tid, Op::kDirectReclaim, wall, d);
      wall += d;
    }
  }
  int64_t rest = cpu - done;
  if (chunks && rest > 0) chunks->push_back({wall, wall + rest});
  return wall + rest;
}

int64_t Simulation::WallAt(const std::vector<std::pair<int64_t, int64_t>>& chunks,
                           int64_t cpu_offset) {
  for (const auto& [a, b] : chunks) {
    if (cpu_offset < b - a) return a + cpu_offset;
    cpu_offset -= b - a;
  }
  return chunks.empty() ? 0 : chunks.back().second;
}

int64_t Simulation::ProduceBatch(int64_t step) {
  int w = static_cast<int>(step % k_.workers);
  int32_t pid = WorkerPid(w);
  constexpr int64_t kPrefetch = 2;  // DataLoader prefetch_factor
  int64_t gate = step >= kPrefetch * k_.workers
                     ? consumed_[static_cast<size_t>(step - kPrefetch * k_.workers)]
                     : 0;
  int64_t t = worker_free_[static_cast<size_t>(w)];
  if (gate > t + 20 * kUs) {
    // Waiting for the main process to ask for another batch (index queue).
    int64_t runq = WakeDelay(gate);
    Switch(pid, pid, t, gate - t, SwitchKind::kBlocked, runq, SleepHolder(t), kTrainPid);
    t = gate + runq;
  }
  // Read the samples: page-cache hits cost CPU only; misses go to the disk.
  double io = k_.io * I(t);
  double miss = k_.io > 0 ? 0.05 + 0.9 * io : 0.02;
  for (int r = 0; r < 3; ++r) {
    if (!rng_.Chance(miss)) {
      t += 40 * kUs;
      continue;
    }
    int64_t lat = Ns(rng_.LogNormal((0.4 + 22 * io) * kMs, 0.6));
    int64_t bytes = (256 + rng_.Pick(768)) * 1024;
    int64_t runq = WakeDelay(t);
    Call(pid, pid, Op::kRead, t, 15 * kUs + lat + runq + 10 * kUs, bytes, kNull, dataset_name_);
    Event b;
    b.ts_ns = t + 10 * kUs;
    b.pid = pid;
    b.tid = pid;
    b.op = Op::kBlockIo;
    b.duration_ns = lat;
    b.bytes = bytes;
    b.kind = 0;
    b.addr = 1'000'000 + rng_.Pick(100'000'000);
    Emit(b);
    Switch(pid, pid, t + 15 * kUs, lat, SwitchKind::kBlockedIo, runq, 0);
    t += 15 * kUs + lat + runq + 10 * kUs;
  }
  double x = I(t);
  double decode = k_.decode_ms + (k_.decode_peak_ms - k_.decode_ms) * x;
  int64_t cpu = Ns(rng_.LogNormal(decode * kMs, 0.15));
  t = OnCpu(pid, pid, t, cpu, EnvAt(t), nullptr);
  worker_free_[static_cast<size_t>(w)] = t;
  return t;
}

void Simulation::ColdStartPrologue(int64_t* now) {
  // Context creation on the first runtime call, then weights allocated and uploaded.
  int64_t t = *now;
  Call(kTrainPid, kTrainPid, Op::kCudaMalloc, t, 1'450 * kMs, 512ll << 20);
  t += 1'450 * kMs + 50 * kUs;
  for (int i = 0; i < 180; ++i) {
    int64_t d = Ns(rng_.LogNormal(300 * kUs, 0.4));
    Call(kTrainPid, kTrainPid, Op::kCudaMalloc, t, d, (4 + rng_.Pick(60)) << 20);
    t += d + 30 * kUs;
  }
  int64_t d = 140 * kMs;
  Call(kTrainPid, kTrainPid, Op::kCudaMemcpy, t, d, 420ll << 20, 1);
  t += d;
  *now = t;
}

void Simulation::AllocatorStorm(int64_t* now) {
  // torch.cuda.empty_cache(): cached blocks freed, then re-allocated by the next step.
  int64_t t = *now;
  for (int i = 0; i < 28; ++i) {
    int64_t d = Ns(rng_.LogNormal(3 * kMs, 0.3));
    Call(kTrainPid, kTrainPid, Op::kCudaFree, t, d, 256ll << 20);
    t += d + 20 * kUs;
  }
  for (int i = 0; i < 28; ++i) {
    int64_t d = Ns(rng_.LogNormal(8 * kMs, 0.3));
    Call(kTrainPid, kTrainPid, Op::kCudaMalloc, t, d, 256ll << 20);
    t += d + 20 * kUs;
  }
  *now = t;
}

void Simulation::TrainingLoop() {
  int64_t now = 300 * kMs;
  if (k_.cold_start) {
    now = 1'200 * kMs;
    ColdStartPrologue(&now);
  }
  int64_t next_storm = 5 * kSec;
  int64_t jit_until = k_.cold_start ? 15 * kSec : 0;
  for (int64_t step = 0; now < duration_; ++step) {
    // 1) Next batch from the workers.
    int64_t ready = ProduceBatch(step);
    if (ready > now) {
      int64_t runq = WakeDelay(ready);
      Switch(kTrainPid, kTrainPid, now, ready - now, SwitchKind::kBlocked, runq, SleepHolder(now),
             WorkerPid(static_cast<int>(step % k_.workers)));
      now = ready + runq;
    }
    consumed_.push_back(now);
    double x = I(now);
    // 2) Host-to-device copy of the batch.
    double mb = k_.copy_mb + (k_.copy_peak_mb - k_.copy_mb) * (k_.pageable ? x : 0);
    int64_t bytes = static_cast<int64_t>(mb * 1048576.0 * rng_.LogNormal(1.0, 0.05));
    int64_t copy_ns;
    if (k_.pageable) {
      // Pageable: the driver stages through a bounce buffer; the call returns after the copy.
      copy_ns = Ns(static_cast<double>(bytes) / rng_.LogNormal(3.1, 0.08)) + 25 * kUs;
      Call(kTrainPid, kTrainPid, Op::kCudaMemcpyAsync, now, copy_ns, bytes,
           static_cast<int64_t>(CopyKind::kHostToDevice));
    } else {
      copy_ns = Ns(rng_.LogNormal(9 * kUs, 0.2));
      Call(kTrainPid, kTrainPid, Op::kCudaMemcpyAsync, now, copy_ns, bytes,
           static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost);
    }
    now += copy_ns + 5 * kUs;
    // 3) Python + launches (forward, backward, optimizer).
    if (k_.periodic_alloc && now >= next_storm) {
      AllocatorStorm(&now);
      next_storm += 10 * kSec;
    }
    if (now < jit_until) {
      int n = 1 + static_cast<int>(rng_.Pick(3));
      for (int i = 0; i < n; ++i) {
        int64_t d = Ns(rng_.LogNormal(22 * kMs, 0.5));
        Call(kTrainPid, kTrainPid, i % 2 ? Op::kCuLibraryGetKernel : Op::kCuModuleGetFunction, now,
             d, kNull, kNull, kernel_names_[static_cast<size_t>(rng_.Pick(6))]);
        now += d + 10 * kUs;
      }
    }
    constexpr int kLaunches = 60;
    int64_t cpu = Ns(rng_.LogNormal(3.0 * kMs, 0.12));
    std::vector<std::pair<int64_t, int64_t>> chunks;
    int64_t phase_start = now;
    now = OnCpu(kTrainPid, kTrainPid, now, cpu, EnvAt(now), &chunks);
    for (int i = 0; i < kLaunches; ++i) {
      int64_t at = WallAt(chunks, cpu * i / kLaunches);
      if (launch_counter_++ % 32 == 0) {
        Call(kTrainPid, kTrainPid, Op::kCudaLaunchKernel, at, Ns(rng_.LogNormal(4.5 * kUs, 0.3)),
             kNull, kNull, kernel_names_[static_cast<size_t>(i % 6)]);
      } else if (at >= 0 && at < duration_) {
        ++unrecorded_launches_[{at / kSec, kTrainPid, kernel_names_[static_cast<size_t>(i % 6)]}];
      }
    }
    // 4) The GPU runs the step; the loop synchronizes at the end (loss.item()).
    double gpu_ms = 3.4 * (1 + (k_.gpu_peer ? 1.6 * x : 0));
    int64_t gpu_start = std::max(gpu_free_, phase_start + 200 * kUs);
    gpu_free_ =
        gpu_start + Ns(rng_.LogNormal(gpu_ms * kMs, 0.08)) + Ns(static_cast<double>(bytes) / 12.0);
    if (gpu_free_ > now + 20 * kUs) {
      int64_t runq = WakeDelay(gpu_free_);
      int64_t sleep = gpu_free_ - now - 4 * kUs;
      Switch(kTrainPid, kTrainPid, now + 4 * kUs, sleep, SwitchKind::kBlocked, runq,
             SleepHolder(now));
      int64_t d = 4 * kUs + sleep + runq + 3 * kUs;
      Call(kTrainPid, kTrainPid, Op::kCudaStreamSync, now, d);
      now += d;
    } else if (double c = k_.contention * I(now); c > 0 && rng_.Chance(0.6 * c)) {
      // The GPU is done, but the sync's ioctl gives competitors a chance to take the CPU.
      int64_t runq = Ns(rng_.Exp((1.0 + 3.0 * c) * kMs)) + 5 * kUs;
      Switch(kTrainPid, kTrainPid, now + 3 * kUs, 0, SwitchKind::kPreempted, runq,
             PickHolder(Competitors()));
      int64_t d = 3 * kUs + runq + 4 * kUs;
      Call(kTrainPid, kTrainPid, Op::kCudaStreamSync, now, d);
      now += d;
    } else {
      int64_t d = Ns(rng_.LogNormal(7 * kUs, 0.25));
      Call(kTrainPid, kTrainPid, Op::kCudaStreamSync, now, d);
      now += d;
    }
    now += Ns(rng_.Exp(40 * kUs));
  }
}

// A process's own scheduling: periods on CPU and off (sleeping, or preempted when busy).
void Simulation::Background(int32_t pid, int32_t threads, bool busy_scales) {
  for (int32_t th = 0; th < threads; ++th) {
    int32_t tid = pid + th;
    int64_t t = Ns(rng_.U() * 20 * kMs);
    while (t < duration_) {
      double x = busy_scales ? I(t) : 0;
      bool busy = busy_scales && x > 0.05;
      int64_t run = Ns(rng_.LogNormal(busy ? 4 * kMs : 0.4 * kMs, 0.5));
      t += run;
      if (busy && rng_.Chance(0.65)) {
        int64_t runq = Ns(rng_.Exp(2 * kMs)) + 10 * kUs;
        int32_t other =
            rng_.Chance(0.5) ? kTrainPid : WorkerPid(static_cast<int>(rng_.Pick(k_.workers)));
        Switch(pid, tid, t, 0, SwitchKind::kPreempted, runq, other);
        t += runq;
      } else {
        int64_t sleep = Ns(rng_.Exp(busy ? 1.5 * kMs : (pid == kFfmpegPid ? 400 * kMs : 14 * kMs)));
        int64_t runq = Ns(rng_.Exp(20 * kUs));
        Switch(pid, tid, t, sleep, SwitchKind::kBlocked, runq, 0);
        t += sleep + runq;
      }
    }
  }
}

void Simulation::EvalJob() {
  // Another CUDA process on the same GPU, active during the incident.
  int64_t t = 0;
  while (t < duration_) {
    double x = I(t);
    if (x < 0.05) {
      t += 200 * kMs;
      continue;
    }
    for (int i = 0; i < 40; ++i) {
      ++unrecorded_launches_[{t / kSec, kEvalPid, kernel_names_[static_cast<size_t>(i % 6)]}];
    }
    t += Ns(rng_.LogNormal(2 * kMs, 0.2));
    int64_t d = Ns(rng_.LogNormal(11 * kMs, 0.2));
    Call(kEvalPid, kEvalPid, Op::kCudaDeviceSync, t, d);
    Switch(kEvalPid, kEvalPid, t + 4 * kUs, d - 10 * kUs, SwitchKind::kBlocked, 6 * kUs, 0);
    t += d + Ns(rng_.Exp(3 * kMs));
  }
}

void Simulation::Snapshots() {
  int64_t swap = 0;
  double load = 2.4;
  for (int64_t s = 0; s * kSec < duration_; ++s) {
    int64_t t = s * kSec;
    double x = I(t);
    SystemSnapshot snap;
    snap.ts_ns = t;
    snap.wall_ns = 1'767'225'600'000'000'000 + t;  // 2026-01-01T00:00:00Z + t
    double cpu = 31 + 3 * rng_.Normal() + k_.contention * x * 63 + k_.io * x * 4 +
                 (k_.decode_peak_ms > k_.decode_ms ? 8 * x : 0) + k_.memory * x * 12;
    snap.cpu_pct = std::clamp(cpu, 1.0, 99.5);
    double mem = 58 + rng_.Normal() * 0.4 + k_.memory * x * 39;
    snap.mem_pct = std::clamp(mem, 1.0, 99.5);
    double target = 2.6 + k_.contention * x * 10 + k_.io * x * 4 + k_.memory * x * 3;
    load += (target - load) * 0.25;
    snap.load1 = load;
    snap.cores = kCores;
    if (k_.memory > 0 && x > 0.5) swap += 60ll << 20;
    snap.swap_used_bytes = swap;
    snap.mem_available_bytes =
        static_cast<int64_t>((100 - snap.mem_pct) / 100 * 64.0 * (1ll << 30));
    snap.major_faults_per_s = faults_per_sec_[s] + rng_.Pick(4);
    snap.ctx_switches_per_s = switches_per_sec_[s] + 2'800 + rng_.Pick(400);
    snap.procs_running = 2 + static_cast<int64_t>(k_.contention * x * 9) + rng_.Pick(2);
    snap.procs_blocked = static_cast<int64_t>(k_.io * x * 4 + k_.memory * x * 2);
    snap.iowait_pct = std::max(0.0, 0.4 + k_.io * x * 26 + k_.memory * x * 9 + rng_.Normal() * 0.2);
    writer_.AppendSnapshot(snap);
  }
}

void Simulation::Processes() {
  auto add = [&](int32_t pid, int32_t ppid, const char* name, const char* comm, const char* cmdline,
                 int64_t first, bool tracked) {
    ProcessInfo p;
    p.pid = pid;
    p.ppid = ppid;
    p.name = name;
    p.comm = comm;
    p.cmdline = cmdline;
    p.first_ts_ns = first;
    p.tracked = tracked;
    writer_.UpsertProcess(p);
  };
  add(kTrainPid, 2990, "python3 (train.py)", "python3", "python3 train.py --epochs 90", 0, true);
  Call(kTrainPid, kTrainPid, Op::kProcExec, 0, 0);
  for (int w = 0; w < k_.workers; ++w) {
    std::string name = "pt_data_worker:" + std::to_string(w);
    add(WorkerPid(w), kTrainPid, name.c_str(), "pt_data_worker", "python3 train.py --epochs 90",
        800 * kMs, true);
    Event fork;
    fork.ts_ns = 800 * kMs;
    fork.pid = WorkerPid(w);
    fork.tid = WorkerPid(w);
    fork.op = Op::kProcFork;
    fork.other_pid = kTrainPid;
    Emit(fork);
  }
  add(kPrometheusPid, 1, "prometheus-node-exp", "node_exporter",
      "/usr/bin/prometheus-node-exporter", kNull, false);
  add(kFluentBitPid, 1, "fluent-bit", "fluent-bit",
      "/opt/fluent-bit/bin/fluent-bit -c "
      "/etc/fluent-bit/fluent-bit.conf",
      kNull, false);
  if (k_.contention > 0) {
    add(kFfmpegPid, 4001, "ffmpeg", "ffmpeg",
        "ffmpeg -i /srv/media/raw.mov -c:v libx264 -preset slow out.mp4", kNull, false);
  }
  if (k_.memory > 0) {
    add(kJavaPid, 1, "java (elasticsearch)", "java",
        "/usr/share/elasticsearch/jdk/bin/java -Xms24g -Xmx24g org.elasticsearch.bootstrap."
        "Elasticsearch",
        kNull, false);
  }
  if (k_.gpu_peer) {
    add(kEvalPid, 5990, "python3 (eval.py)", "python3", "python3 eval.py --ckpt last.pt", 0, true);
  }
}

void Simulation::Run() {
  Processes();
  TrainingLoop();
  Background(kPrometheusPid, 1, k_.contention > 0);
  Background(kFluentBitPid, 1, k_.contention > 0);
  if (k_.contention > 0) Background(kFfmpegPid, 4, true);
  if (k_.memory > 0) Background(kJavaPid, 2, false);
  if (k_.gpu_peer) EvalJob();
  Snapshots();
}

void Simulation::Write() {
  std::stable_sort(events_.begin(), events_.end(),
                   [](const Event& a, const Event& b) { return a.ts_ns < b.ts_ns; });
  constexpr size_t kChunk = 50'000;
  for (size_t i = 0; i < events_.size(); i += kChunk) {
    writer_.AppendEvents(events_.data() + i, std::min(kChunk, events_.size() - i));
  }
  std::vector<OpCount> counts;
  for (const auto& [key, n] : unrecorded_launches_) {
    OpCount c;
    c.sec = std::get<0>(key);
    c.pid = std::get<1>(key);
    c.op = Op::kCudaLaunchKernel;
    c.name_id = std::get<2>(key);
    c.count = n;
    counts.push_back(c);
  }
  writer_.AppendOpCounts(counts);
}

}  // namespace

StatusOr<DemoStats> RecordScenario(const std::string& scenario, StoreWriter& writer,
                                   const DemoOptions& options) {
  if (FindScenario(scenario) == nullptr) {
    return InvalidArgument("unknown demo scenario '" + scenario +
                           "' — hint: `gpuwhy demo` lists them");
  }
  if (options.duration_s < 30 || options.duration_s > 3600) {
    return InvalidArgument("--duration must be between 30s and 1h for a synthetic demo (with "
                           "--live: at least 5s)");
  }
  SessionInfo info;
  info.wall_start_ns = 1'767'225'600'000'000'000;
  info.mono_start_ns = 1'000'000'000'000;
  info.kind = "demo";
  info.host = "demo-host";
  info.kernel = "6.8.0-demo";
  info.cpu_model = "Simulated x86-64 CPU";
  info.cores = kCores;
  info.mem_bytes = 64ll << 30;
  info.gpu_model = "Simulated GPU (no device)";
  info.gpu_driver = "none";
  info.command_line = "gpuwhy demo " + scenario;
  ASSIGN_OR_RETURN(int64_t session, writer.BeginSession(info));
  uint64_t h = 1469598103934665603ull;  // FNV-1a of the name: a stable per-scenario stream
  for (char c : scenario) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  Rng rng(options.seed * 0x9E3779B97F4A7C15ull ^ h);
  Knobs knobs = KnobsFor(scenario);
  Simulation sim(knobs, rng, options.duration_s * kSec, writer);
  sim.Run();
  sim.Write();
  RETURN_IF_ERROR(writer.Flush());
  SessionTotals totals;
  totals.wall_stop_ns = info.wall_start_ns + options.duration_s * kSec;
  totals.events = sim.events();
  totals.drops_detail = "{}";
  RETURN_IF_ERROR(writer.EndSession(totals));
  return DemoStats{sim.events(), session};
}

StatusOr<DemoStats> WriteDemoDatabase(const std::string& scenario, const std::string& path,
                                      const DemoOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<StoreWriter> writer, StoreWriter::Create(path, WriterOptions{}));
  StatusOr<DemoStats> stats = RecordScenario(scenario, *writer, options);
  Status closed = writer->Close();
  if (!stats.ok()) return stats.status();
  RETURN_IF_ERROR(closed);
  return stats;
}

}  // namespace gw
