// gw_train_loop: a training loop on the simulated CUDA runtime, shaped like a PyTorch job.
//
// N forked DataLoader-style workers (named --worker-comm) produce batches into shared-memory
// slots and announce them through pipes; each batch costs real CPU time, and optionally a file
// read (O_DIRECT if asked) and fresh-memory page faults. The main loop per step takes the next
// batch in order, copies it to the device (pinned: the slots are page-locked with
// cudaHostRegister, like pin_memory=True, and copied asynchronously; pageable: the driver stages
// the copy on the main thread), launches K kernels, synchronizes every
// --sync-every steps and reads a "loss" back every --dtoh-every steps. That is --shape simple;
// --shape pytorch (below, RunPytorchSteps) splits the step across a main, an autograd and a
// pin-memory thread and gives the workers idle pool threads, like a real PyTorch job.
// --exec-helpers adds CPU-burning child programs started with fork+exec.
//
// Kernel convention of the simulator: the first kernel argument is a uint64_t duration in ns.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gwsim/cuda_runtime.h"
#include "gwsim/fatbin.h"

namespace {

// ----------------------------------------------------------------------------- kernels
// What nvcc would emit for this translation unit: a fat binary and one host stub per kernel,
// registered from a static constructor.
constexpr char kFatbinPayload[] =
    "GWSIMFB1"
    "_Z11gemm_kernelPKfS0_Pfiii\0"
    "_Z13relu_backwardPfPKfi\0"
    "ampere_sgemm_128x64_tn\0"
    "_Z17layernorm_forwardPKfPfi\0"
    "_Z12adamw_updatePfS_S_PKffffi\0";
GwsimFatbinWrapper fatbin_wrapper = {GWSIM_FATBIN_WRAPPER_MAGIC, 1, kFatbinPayload, nullptr};
void** fatbin_handle = nullptr;

// Host stubs: their addresses identify the kernels to cudaLaunchKernel.
void gemm_kernel() {}
void relu_backward() {}
void ampere_sgemm_128x64_tn() {}
void layernorm_forward() {}
void adamw_update() {}

struct KernelEntry {
  void (*stub)();
  const char* device_name;
  unsigned grid;
  unsigned block;
};

const KernelEntry kKernels[] = {
    {gemm_kernel, "_Z11gemm_kernelPKfS0_Pfiii", 256, 256},
    {layernorm_forward, "_Z17layernorm_forwardPKfPfi", 128, 512},
    {ampere_sgemm_128x64_tn, "ampere_sgemm_128x64_tn", 512, 128},
    {relu_backward, "_Z13relu_backwardPfPKfi", 128, 256},
    {adamw_update, "_Z12adamw_updatePfS_S_PKffffi", 64, 1024},
};

void UnregisterKernels() { __cudaUnregisterFatBinary(fatbin_handle); }

__attribute__((constructor)) void RegisterKernels() {
  fatbin_handle = __cudaRegisterFatBinary(&fatbin_wrapper);
  for (const KernelEntry& k : kKernels) {
    __cudaRegisterFunction(fatbin_handle, reinterpret_cast<const char*>(k.stub),
                           const_cast<char*>(k.device_name), k.device_name, -1, nullptr, nullptr,
                           nullptr, nullptr, nullptr);
  }
  __cudaRegisterFatBinaryEnd(fatbin_handle);
  atexit(UnregisterKernels);
}

// ----------------------------------------------------------------------------- options

// How the job is laid out in threads and processes (see RunPytorchSteps for the second).
enum class Shape {
  kSimple,   // one trainer thread does everything; single-threaded workers
  kPytorch,  // main + autograd + pin-memory threads; multi-threaded workers
};

struct Options {
  Shape shape = Shape::kSimple;
  long steps = 0;            // 0: until --duration
  double duration_s = 10.0;  // 0: until --steps
  int workers = 2;
  double batch_cpu_ms = 5.0;
  size_t batch_bytes = 4u << 20;
  int batch_size = 32;  // samples per batch (for samples/s)
  int kernels_per_step = 8;
  double kernel_us = 1000.0;
  bool pinned = true;
  std::string io_file;
  bool odirect = false;
  double touch_mb = 0;
  int sync_every = 1;
  int dtoh_every = 10;
  bool malloc_per_step = false;
  int failed_launches = 0;  // launches per step of an unregistered function (they fail)
  std::string worker_comm = "pt_data_worker";
  int prefetch = 2;           // batches in flight per worker (DataLoader prefetch_factor)
  double slow_worker_ms = 0;  // extra CPU ms per batch for worker 0 only
  int exec_helpers = 0;       // helper programs started with fork+exec
  int helper_cpu = -1;        // CPU the helpers are pinned to; -1: not pinned
  std::string helper_comm = "gw_helper";
  bool report = false;
  bool graph = false;       // the step's kernels captured once into a CUDA graph, then replayed
  long graph_recapture = 0;  // capture and instantiate the graph again every N steps (0: never)
  double capture_cpu_ms = 0;  // CPU time the main thread spends inside each capture
};

void Usage(FILE* out) {
  fprintf(out,
          "usage: gw_train_loop [options]\n"
          "A training loop on the simulated CUDA runtime (libcudart.so.13 from sim/lib).\n"
          "\n"
          "  --steps N             stop after N steps (default 0: run for --duration)\n"
          "  --duration SEC        stop after SEC seconds (default 10; 0: run for --steps)\n"
          "  --workers N           DataLoader worker processes (default 2; 0: main loads)\n"
          "  --batch-cpu-ms MS     CPU time each batch costs a worker (default 5)\n"
          "  --batch-bytes SIZE    bytes per batch, suffix K/M/G allowed (default 4M)\n"
          "  --batch-size N        samples per batch, for samples/s (default 32)\n"
          "  --kernels-per-step K  kernel launches per step (default 8)\n"
          "  --kernel-us US        simulated duration of each kernel (default 1000)\n"
          "  --pinned              batches live in page-locked memory (default)\n"
          "  --pageable            batches live in pageable memory (staged, synchronous copies)\n"
          "  --io-file PATH        each batch also reads --batch-bytes from PATH (wrapping)\n"
          "  --odirect             open --io-file with O_DIRECT (no page cache)\n"
          "  --touch-mb MB         each batch touches MB of fresh memory (page faults)\n"
          "  --sync-every N        cudaStreamSynchronize every N steps (default 1; 0: never)\n"
          "  --dtoh-every N        read the loss back (DtoH + sync) every N steps (default 10)\n"
          "  --malloc-per-step     cudaMalloc/cudaFree a batch-sized buffer every step\n"
          "  --failed-launches-per-step N  N more cudaLaunchKernel calls a step on a host\n"
          "                        function never registered: each fails in the runtime\n"
          "                        (invalid device function) without reaching the driver\n"
          "                        (default 0; --shape simple only)\n"
          "  --worker-comm NAME    worker process name (default pt_data_worker)\n"
          "  --prefetch N          batches in flight per worker (default 2)\n"
          "  --shape simple|pytorch  thread/process layout (default simple: one trainer\n"
          "                        thread; pytorch: main thread + pt_autograd_0 (backward) +\n"
          "                        pt_pin_memory threads, workers with 2 idle pool threads)\n"
          "  --slow-worker-ms MS   worker 0 spends MS more CPU ms per batch (default 0)\n"
          "  --exec-helpers N      start N CPU-burning helper programs with fork+exec\n"
          "                        (gw_competitor next to this binary, else /bin/sh loop)\n"
          "  --helper-cpu C        pin the helpers to CPU C (default: not pinned)\n"
          "  --helper-comm NAME    helper process name (default gw_helper)\n"
          "  --graph               capture the step's kernels into a CUDA graph once and launch\n"
          "                        the graph each step (--shape simple only)\n"
          "  --graph-recapture N   capture and instantiate the graph again every N steps\n"
          "  --capture-cpu-ms MS   the main thread computes MS ms of CPU time inside each\n"
          "                        capture (a framework running the step's code to record it)\n"
          "                        (dynamic shapes under torch.compile's reduce-overhead)\n"
          "  --report              print throughput at exit:\n"
          "                        gw_train_loop: steps=N seconds=S steps_per_s=X "
          "samples_per_s=Y\n"
          "  --help                this text\n");
}

bool ParseSize(const char* text, size_t* out) {
  char* end = nullptr;
  double v = strtod(text, &end);
  if (end == text || v < 0) return false;
  double mult = 1;
  if (*end == 'k' || *end == 'K')
    mult = 1024.0, ++end;
  else if (*end == 'm' || *end == 'M')
    mult = 1024.0 * 1024, ++end;
  else if (*end == 'g' || *end == 'G')
    mult = 1024.0 * 1024 * 1024, ++end;
  if (*end == 'B' || *end == 'b') ++end;
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v * mult);
  return true;
}

bool ParseDouble(const char* text, double* out) {
  char* end = nullptr;
  *out = strtod(text, &end);
  return end != text && *end == '\0' && *out >= 0;
}

bool ParseInt(const char* text, long* out) {
  char* end = nullptr;
  *out = strtol(text, &end, 10);
  return end != text && *end == '\0' && *out >= 0;
}

enum OptionId {
  kOptSteps = 256,
  kOptDuration,
  kOptWorkers,
  kOptBatchCpuMs,
  kOptBatchBytes,
  kOptBatchSize,
  kOptKernelsPerStep,
  kOptKernelUs,
  kOptPinned,
  kOptPageable,
  kOptIoFile,
  kOptODirect,
  kOptTouchMb,
  kOptSyncEvery,
  kOptDtohEvery,
  kOptMallocPerStep,
  kOptFailedLaunches,
  kOptWorkerComm,
  kOptPrefetch,
  kOptShape,
  kOptSlowWorkerMs,
  kOptExecHelpers,
  kOptHelperCpu,
  kOptHelperComm,
  kOptReport,
  kOptGraph,
  kOptGraphRecapture,
  kOptCaptureCpuMs,
  kOptHelp,
};

// Returns 0 to run, or an exit code (1 on bad usage, 0 after --help).
int ParseOptions(int argc, char** argv, Options* o) {
  static const option kLong[] = {
      {"steps", required_argument, nullptr, kOptSteps},
      {"duration", required_argument, nullptr, kOptDuration},
      {"workers", required_argument, nullptr, kOptWorkers},
      {"batch-cpu-ms", required_argument, nullptr, kOptBatchCpuMs},
      {"batch-bytes", required_argument, nullptr, kOptBatchBytes},
      {"batch-size", required_argument, nullptr, kOptBatchSize},
      {"kernels-per-step", required_argument, nullptr, kOptKernelsPerStep},
      {"kernel-us", required_argument, nullptr, kOptKernelUs},
      {"pinned", no_argument, nullptr, kOptPinned},
      {"pageable", no_argument, nullptr, kOptPageable},
      {"io-file", required_argument, nullptr, kOptIoFile},
      {"odirect", no_argument, nullptr, kOptODirect},
      {"touch-mb", required_argument, nullptr, kOptTouchMb},
      {"sync-every", required_argument, nullptr, kOptSyncEvery},
      {"dtoh-every", required_argument, nullptr, kOptDtohEvery},
      {"malloc-per-step", no_argument, nullptr, kOptMallocPerStep},
      {"failed-launches-per-step", required_argument, nullptr, kOptFailedLaunches},
      {"worker-comm", required_argument, nullptr, kOptWorkerComm},
      {"prefetch", required_argument, nullptr, kOptPrefetch},
      {"shape", required_argument, nullptr, kOptShape},
      {"slow-worker-ms", required_argument, nullptr, kOptSlowWorkerMs},
      {"exec-helpers", required_argument, nullptr, kOptExecHelpers},
      {"helper-cpu", required_argument, nullptr, kOptHelperCpu},
      {"helper-comm", required_argument, nullptr, kOptHelperComm},
      {"report", no_argument, nullptr, kOptReport},
      {"graph", no_argument, nullptr, kOptGraph},
      {"graph-recapture", required_argument, nullptr, kOptGraphRecapture},
      {"capture-cpu-ms", required_argument, nullptr, kOptCaptureCpuMs},
      {"help", no_argument, nullptr, kOptHelp},
      {nullptr, 0, nullptr, 0},
  };
  for (;;) {
    int c = getopt_long(argc, argv, "h", kLong, nullptr);
    if (c == -1) break;
    long n = 0;
    bool ok = true;
    switch (c) {
      case kOptSteps:
        ok = ParseInt(optarg, &o->steps);
        break;
      case kOptDuration:
        ok = ParseDouble(optarg, &o->duration_s);
        break;
      case kOptWorkers:
        ok = ParseInt(optarg, &n) && n <= 256;
        o->workers = static_cast<int>(n);
        break;
      case kOptBatchCpuMs:
        ok = ParseDouble(optarg, &o->batch_cpu_ms);
        break;
      case kOptBatchBytes:
        ok = ParseSize(optarg, &o->batch_bytes) && o->batch_bytes > 0;
        break;
      case kOptBatchSize:
        ok = ParseInt(optarg, &n) && n > 0;
        o->batch_size = static_cast<int>(n);
        break;
      case kOptKernelsPerStep:
        ok = ParseInt(optarg, &n);
        o->kernels_per_step = static_cast<int>(n);
        break;
      case kOptKernelUs:
        ok = ParseDouble(optarg, &o->kernel_us);
        break;
      case kOptPinned:
        o->pinned = true;
        break;
      case kOptPageable:
        o->pinned = false;
        break;
      case kOptIoFile:
        o->io_file = optarg;
        break;
      case kOptODirect:
        o->odirect = true;
        break;
      case kOptTouchMb:
        ok = ParseDouble(optarg, &o->touch_mb);
        break;
      case kOptSyncEvery:
        ok = ParseInt(optarg, &n);
        o->sync_every = static_cast<int>(n);
        break;
      case kOptDtohEvery:
        ok = ParseInt(optarg, &n);
        o->dtoh_every = static_cast<int>(n);
        break;
      case kOptFailedLaunches:
        ok = ParseInt(optarg, &n) && n >= 0;
        o->failed_launches = static_cast<int>(n);
        break;
      case kOptMallocPerStep:
        o->malloc_per_step = true;
        break;
      case kOptWorkerComm:
        o->worker_comm = optarg;
        break;
      case kOptPrefetch:
        ok = ParseInt(optarg, &n) && n > 0 && n <= 64;
        o->prefetch = static_cast<int>(n);
        break;
      case kOptShape:
        ok = strcmp(optarg, "simple") == 0 || strcmp(optarg, "pytorch") == 0;
        o->shape = strcmp(optarg, "pytorch") == 0 ? Shape::kPytorch : Shape::kSimple;
        break;
      case kOptSlowWorkerMs:
        ok = ParseDouble(optarg, &o->slow_worker_ms);
        break;
      case kOptExecHelpers:
        ok = ParseInt(optarg, &n) && n <= 64;
        o->exec_helpers = static_cast<int>(n);
        break;
      case kOptHelperCpu:
        ok = ParseInt(optarg, &n) && n < CPU_SETSIZE;
        o->helper_cpu = static_cast<int>(n);
        break;
      case kOptHelperComm:
        o->helper_comm = optarg;
        break;
      case kOptReport:
        o->report = true;
        break;
      case kOptGraph:
        o->graph = true;
        break;
      case kOptGraphRecapture:
        ok = ParseInt(optarg, &n) && n > 0;
        o->graph_recapture = n;
        o->graph = true;
        break;
      case kOptCaptureCpuMs:
        ok = ParseDouble(optarg, &o->capture_cpu_ms) && o->capture_cpu_ms >= 0;
        break;
      case kOptHelp:
      case 'h':
        Usage(stdout);
        return -1;
      default:
        Usage(stderr);
        return 1;
    }
    if (!ok) {
      fprintf(stderr, "gw_train_loop: bad value '%s' for --%s\n", optarg,
              kLong[c - kOptSteps].name);
      return 1;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "gw_train_loop: unexpected argument '%s'\n", argv[optind]);
    return 1;
  }
  if (o->steps == 0 && o->duration_s == 0) {
    fprintf(stderr, "gw_train_loop: one of --steps or --duration must be non-zero\n");
    return 1;
  }
  if (o->failed_launches > 0 && o->shape == Shape::kPytorch) {
    fprintf(stderr, "gw_train_loop: --failed-launches-per-step needs --shape simple\n");
    return 1;
  }
  if (o->graph && o->shape == Shape::kPytorch) {
    fprintf(stderr, "gw_train_loop: --graph needs --shape simple\n");
    return 1;
  }
  if (o->odirect && o->io_file.empty()) {
    fprintf(stderr, "gw_train_loop: --odirect needs --io-file\n");
    return 1;
  }
  return 0;
}

// ----------------------------------------------------------------------------- utilities

volatile sig_atomic_t g_stop = 0;

void OnStopSignal(int) { g_stop = 1; }

void InstallStopHandlers() {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: blocking reads return EINTR so the loop sees g_stop
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

double NowS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

bool WriteAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) {
      if (g_stop) return false;
      continue;
    }
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads exactly n bytes; false on EOF, error, or a stop signal.
bool ReadAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) {
      if (g_stop) return false;
      continue;
    }
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool Check(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  fprintf(stderr, "gw_train_loop: %s failed: %s (%d)\n", what, cudaGetErrorString(e),
          static_cast<int>(e));
  return false;
}

// ----------------------------------------------------------------------------- per-thread calls

// Which thread made which CUDA runtime call. The sim libraries count calls per process
// (GWSIM_CALL_COUNTS_DIR); with --shape pytorch the trainer adds the per-thread split, written
// at exit to <dir>/gw_train_loop.<pid>.threads as "tid comm api count" lines (runtime calls
// only; each nests its driver calls on the same thread). Each tally is written by its own
// thread only and read after that thread is joined.
struct ThreadCalls {
  pid_t tid = 0;
  char comm[17] = {};
  std::vector<std::pair<const char*, uint64_t>> counts;
};

std::mutex g_thread_calls_mu;
std::vector<std::unique_ptr<ThreadCalls>> g_thread_calls;
thread_local ThreadCalls* t_calls = nullptr;

// Names the calling thread (nullptr: keeps its name) and starts its tally.
void RegisterThread(const char* name) {
  if (name != nullptr) pthread_setname_np(pthread_self(), name);
  auto calls = std::make_unique<ThreadCalls>();
  calls->tid = static_cast<pid_t>(syscall(SYS_gettid));
  prctl(PR_GET_NAME, calls->comm, 0, 0, 0);
  t_calls = calls.get();
  std::lock_guard<std::mutex> lock(g_thread_calls_mu);
  g_thread_calls.push_back(std::move(calls));
}

// Counts a runtime call of the calling thread and checks its result.
bool Call(const char* api, cudaError_t e) {
  if (t_calls != nullptr) {
    auto it = t_calls->counts.begin();
    while (it != t_calls->counts.end() && strcmp(it->first, api) != 0) ++it;
    if (it == t_calls->counts.end()) {
      t_calls->counts.emplace_back(api, 1);
    } else {
      ++it->second;
    }
  }
  return Check(e, api);
}

void WriteThreadCalls() {
  const char* dir = getenv("GWSIM_CALL_COUNTS_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::string path = std::string(dir) + "/gw_train_loop." + std::to_string(getpid()) + ".threads";
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  std::lock_guard<std::mutex> lock(g_thread_calls_mu);
  for (const auto& t : g_thread_calls) {
    for (const auto& [api, count] : t->counts) {
      fprintf(f, "%d %s %s %" PRIu64 "\n", static_cast<int>(t->tid), t->comm, api, count);
    }
  }
  fclose(f);
}

// ----------------------------------------------------------------------------- workers

// Announces that a slot holds batch `seq`.
struct BatchMessage {
  uint32_t slot;
  uint32_t pad;
  uint64_t seq;
  uint64_t checksum;
};

struct Worker {
  pid_t pid = -1;
  int data_fd = -1;       // worker → main: BatchMessage
  int free_fd = -1;       // main → worker: uint32_t slot given back
  char* slots = nullptr;  // prefetch × batch_bytes, shared
};

// The work of one batch: optional file read, optional page faults, then CPU work that fills
// the slot; returns a checksum of the slot.
uint64_t ProduceBatch(const Options& o, double cpu_ms, int io_fd, char* io_buffer, size_t io_chunk,
                      off_t* io_offset, off_t io_size, char* slot, uint64_t seed) {
  double cpu_start = ThreadCpuMs();
  if (io_fd >= 0 && io_size > 0) {
    size_t remaining = o.batch_bytes;
    while (remaining > 0 && !g_stop) {
      size_t want = io_chunk;
      if (*io_offset + static_cast<off_t>(want) > io_size) *io_offset = 0;
      ssize_t r = pread(io_fd, io_buffer, want, *io_offset);
      if (r <= 0) {
        *io_offset = 0;
        if (r < 0 && errno != EINTR) break;
        continue;
      }
      size_t got = static_cast<size_t>(r) < remaining ? static_cast<size_t>(r) : remaining;
      remaining -= got;
      *io_offset += r;
    }
  }
  if (o.touch_mb > 0) {
    size_t bytes = static_cast<size_t>(o.touch_mb * 1024 * 1024);
    void* fresh = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (fresh != MAP_FAILED) {
      auto* p = static_cast<volatile char*>(fresh);
      for (size_t i = 0; i < bytes; i += 4096) p[i] = static_cast<char>(i);
      munmap(fresh, bytes);
    }
  }
  // "Decode and augment": fill the batch with generated data, then keep transforming it until
  // the batch has cost cpu_ms of CPU time.
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  auto* words = reinterpret_cast<uint64_t*>(slot);
  size_t nwords = o.batch_bytes / sizeof(uint64_t);
  for (size_t i = 0; i < nwords; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    words[i] = x;
  }
  size_t i = 0;
  while (ThreadCpuMs() - cpu_start < cpu_ms && !g_stop) {
    for (int k = 0; k < 4096 && nwords > 0; ++k) {
      words[i] = (words[i] * 6364136223846793005ull + 1442695040888963407ull) ^ (words[i] >> 29);
      if (++i == nwords) i = 0;
    }
  }
  uint64_t sum = 0;
  for (size_t j = 0; j < nwords; j += 512) sum += words[j];
  return sum;
}

// PyTorch's workers also run intra-op pool threads that sleep almost all the time: a worker
// process has one busy thread among several.
constexpr int kWorkerPoolThreads = 2;

void* IdlePoolThread(void*) {
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  static pthread_cond_t never = PTHREAD_COND_INITIALIZER;
  pthread_mutex_lock(&mu);
  for (;;) pthread_cond_wait(&never, &mu);  // never signalled; _exit ends the process
  return nullptr;
}

// Started with every signal blocked, so SIGTERM always reaches the computing thread.
void StartIdlePoolThreads(int n) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    if (pthread_create(&t, nullptr, IdlePoolThread, nullptr) == 0) pthread_detach(t);
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

[[noreturn]] void WorkerMain(const Options& o, int index, const Worker& w) {
  prctl(PR_SET_NAME, o.worker_comm.c_str(), 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);  // never outlive the trainer
  if (getppid() == 1) _exit(0);
  if (o.shape == Shape::kPytorch) StartIdlePoolThreads(kWorkerPoolThreads);
  // --slow-worker-ms: worker 0 is the slow one (a bad shard, a slow decoder).
  double cpu_ms = o.batch_cpu_ms + (index == 0 ? o.slow_worker_ms : 0);
  int io_fd = -1;
  off_t io_size = 0;
  char* io_buffer = nullptr;
  size_t io_chunk = 1u << 20;
  off_t io_offset = 0;
  if (!o.io_file.empty()) {
    io_fd = open(o.io_file.c_str(), O_RDONLY | (o.odirect ? O_DIRECT : 0));
    struct stat st;
    if (io_fd >= 0 && fstat(io_fd, &st) == 0) io_size = st.st_size;
    if (o.odirect) io_size &= ~static_cast<off_t>(4095);  // O_DIRECT needs aligned reads
    if (io_size < static_cast<off_t>(io_chunk)) io_chunk = static_cast<size_t>(io_size);
    void* buf = nullptr;
    if (io_chunk == 0 || posix_memalign(&buf, 4096, io_chunk) != 0) {
      io_fd = -1;
    } else {
      io_buffer = static_cast<char*>(buf);
    }
    io_offset = (static_cast<off_t>(index) * 7919 * 4096) % (io_size > 0 ? io_size : 1);
    io_offset &= ~static_cast<off_t>(4095);
  }
  uint64_t seq = static_cast<uint64_t>(index);
  std::vector<uint32_t> free_slots;
  for (int s = 0; s < o.prefetch; ++s) free_slots.push_back(static_cast<uint32_t>(s));
  while (!g_stop) {
    if (free_slots.empty()) {
      uint32_t slot = 0;
      if (!ReadAll(w.free_fd, &slot, sizeof(slot))) break;  // main closed the pipe: done
      free_slots.push_back(slot);
    }
    uint32_t slot = free_slots.back();
    free_slots.pop_back();
    char* data = w.slots + static_cast<size_t>(slot) * o.batch_bytes;
    BatchMessage m{slot, 0, seq, 0};
    m.checksum =
        ProduceBatch(o, cpu_ms, io_fd, io_buffer, io_chunk, &io_offset, io_size, data, seq);
    if (!WriteAll(w.data_fd, &m, sizeof(m))) break;
    seq += static_cast<uint64_t>(o.workers);
  }
  _exit(0);
}

bool StartWorkers(const Options& o, std::vector<Worker>* workers) {
  for (int i = 0; i < o.workers; ++i) {
    Worker w;
    int data_pipe[2];
    int free_pipe[2];
    if (pipe2(data_pipe, O_CLOEXEC) != 0 || pipe2(free_pipe, O_CLOEXEC) != 0) {
      perror("gw_train_loop: pipe");
      return false;
    }
    size_t bytes = static_cast<size_t>(o.prefetch) * o.batch_bytes;
    void* slots = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (slots == MAP_FAILED) {
      perror("gw_train_loop: mmap batch slots");
      return false;
    }
    w.slots = static_cast<char*>(slots);
    w.data_fd = data_pipe[1];
    w.free_fd = free_pipe[0];
    pid_t pid = fork();
    if (pid < 0) {
      perror("gw_train_loop: fork");
      return false;
    }
    if (pid == 0) {
      close(data_pipe[0]);
      close(free_pipe[1]);
      for (const Worker& other : *workers) {  // earlier workers' main-side ends
        close(other.data_fd);
        close(other.free_fd);
      }
      WorkerMain(o, i, w);
    }
    close(data_pipe[1]);
    close(free_pipe[0]);
    w.pid = pid;
    w.data_fd = data_pipe[0];
    w.free_fd = free_pipe[1];
    workers->push_back(w);
  }
  return true;
}

void StopWorkers(std::vector<Worker>* workers) {
  for (Worker& w : *workers) {
    close(w.free_fd);  // a worker waiting for a slot sees EOF
    close(w.data_fd);  // a worker writing sees EPIPE
    if (w.pid > 0) kill(w.pid, SIGTERM);
  }
  for (Worker& w : *workers) {
    if (w.pid <= 0) continue;
    while (waitpid(w.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.pid = -1;
  }
}

// ----------------------------------------------------------------------------- helper programs

// --exec-helpers: programs the training script starts itself, like subprocess.Popen: children
// of the trainer started with fork+exec (their /proc/PID/exe is not the trainer's), burning CPU,
// but not DataLoader workers. gw_competitor from this binary's folder when it is there (named
// --helper-comm), else a /bin/sh busy loop. They die with the trainer (PR_SET_PDEATHSIG).
std::vector<pid_t> StartHelpers(const Options& o) {
  std::vector<pid_t> pids;
  if (o.exec_helpers == 0) return pids;
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string();
  dir = dir.substr(0, dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
  std::string competitor = dir + "/gw_competitor";
  std::vector<std::string> args;
  if (!dir.empty() && access(competitor.c_str(), X_OK) == 0) {
    args = {competitor, "--duration", "0", "--comm", o.helper_comm};
  } else {
    args = {"/bin/sh", "-c", "while :; do :; done"};
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (o.helper_cpu >= 0) CPU_SET(o.helper_cpu, &cpus);
  int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);  // keep the report alone on stdout
  pid_t trainer = getpid();
  for (int i = 0; i < o.exec_helpers; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      perror("gw_train_loop: fork helper");
      break;
    }
    if (pid == 0) {                               // only async-signal-safe calls until exec
      prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);  // kept across exec
      if (getppid() != trainer) _exit(0);
      if (o.helper_cpu >= 0) sched_setaffinity(0, sizeof(cpus), &cpus);
      if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    pids.push_back(pid);
  }
  if (devnull >= 0) close(devnull);
  return pids;
}

void StopHelpers(std::vector<pid_t>* pids) {
  for (pid_t pid : *pids) kill(pid, SIGTERM);
  for (pid_t pid : *pids) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pids->clear();
}

// ----------------------------------------------------------------------------- training

struct Trainer {
  explicit Trainer(const Options& options) : o(options) {}
  const Options& o;
  void* d_batch = nullptr;
  void* d_loss = nullptr;
  // --workers 0: the main thread produces batches itself, into pinned or pageable memory.
  void* h_local_pinned = nullptr;
  std::vector<char> local_batch;
  float loss = 0;
};

// A pinned worker slot the device may still be reading: given back to its worker once the
// copy out of it is known to be complete.
struct PendingSlot {
  Worker* worker;
  uint32_t slot;
  cudaEvent_t copied;  // recorded after the copy; null when a sync follows in the same step
};

bool GiveBack(const PendingSlot& p) { return WriteAll(p.worker->free_fd, &p.slot, sizeof(p.slot)); }

// --capture-cpu-ms: the main thread's CPU time inside a capture (always true: a step goes on).
bool CaptureWork(const Options& o) {
  double start = ThreadCpuMs();
  volatile uint64_t x = 88172645463325252ull;
  while (ThreadCpuMs() - start < o.capture_cpu_ms && !g_stop) {
    for (int k = 0; k < 4096; ++k) x = x * 6364136223846793005ull + 1442695040888963407ull;
  }
  return true;
}

// The step's K kernels, launched on `stream` (or put into a graph while it captures).
bool LaunchStepKernels(const Options& o, Trainer& t, uint64_t* kernel_ns, cudaStream_t stream) {
  for (int k = 0; k < o.kernels_per_step; ++k) {
    const KernelEntry& kernel = kKernels[static_cast<size_t>(k) % std::size(kKernels)];
    void* args[] = {kernel_ns, &t.d_batch, &t.d_loss};
    if (!Check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel.stub), dim3(kernel.grid),
                                dim3(kernel.block), args, 0, stream),
               "cudaLaunchKernel")) {
      return false;
    }
  }
  return true;
}

bool RunSteps(Trainer& t, std::vector<Worker>& workers, long* steps_done, double* seconds) {
  const Options& o = t.o;
  cudaStream_t stream = nullptr;  // the legacy default stream, as PyTorch uses by default
  cudaStream_t capture_stream = nullptr;  // --graph: where the step's kernels are captured
  cudaGraphExec_t graph_exec = nullptr;
  uint64_t kernel_ns = static_cast<uint64_t>(o.kernel_us * 1000.0);
  double start = NowS();
  long step = 0;
  off_t no_offset = 0;
  std::deque<PendingSlot> pending;
  // One event per (worker, slot), created up front.
  std::vector<std::vector<cudaEvent_t>> slot_events(workers.size());
  if (o.pinned) {
    for (auto& events : slot_events) {
      events.resize(static_cast<size_t>(o.prefetch));
      for (cudaEvent_t& e : events) {
        if (!Check(cudaEventCreate(&e), "cudaEventCreate")) return false;
      }
    }
  }
  bool ok = true;
  while (!g_stop && ok) {
    if (o.steps > 0 && step >= o.steps) break;
    if (o.duration_s > 0 && NowS() - start >= o.duration_s) break;
    bool syncs_this_step = (o.sync_every > 0 && (step + 1) % o.sync_every == 0) ||
                           (o.dtoh_every > 0 && (step + 1) % o.dtoh_every == 0);
    // 1. Next batch, in order, like a DataLoader iterator.
    const char* batch = nullptr;
    Worker* from = nullptr;
    BatchMessage m{};
    if (workers.empty()) {
      char* local = o.pinned ? static_cast<char*>(t.h_local_pinned) : t.local_batch.data();
      ProduceBatch(o, o.batch_cpu_ms, -1, nullptr, 0, &no_offset, 0, local,
                   static_cast<uint64_t>(step));
      batch = local;
    } else {
      from = &workers[static_cast<size_t>(step) % workers.size()];
      // A worker whose slots are all still being copied from cannot produce: wait for the
      // oldest of its copies.
      long held = 0;
      for (const PendingSlot& p : pending) held += p.worker == from ? 1 : 0;
      while (held >= o.prefetch) {
        auto it = pending.begin();
        while (it->worker != from) ++it;
        if (!Check(cudaEventSynchronize(it->copied), "cudaEventSynchronize") || !GiveBack(*it)) {
          return false;
        }
        pending.erase(it);
        --held;
      }
      if (!ReadAll(from->data_fd, &m, sizeof(m))) {
        if (!g_stop) fprintf(stderr, "gw_train_loop: a data worker exited\n");
        break;
      }
      batch = from->slots + static_cast<size_t>(m.slot) * o.batch_bytes;
    }
    // 2. Host to device: pinned slots (registered with cudaHostRegister, as pin_memory would
    // provide) are copied asynchronously; pageable ones are staged by the driver on this thread.
    void* scratch = nullptr;
    if (o.malloc_per_step && !Check(cudaMalloc(&scratch, o.batch_bytes), "cudaMalloc")) {
      return false;
    }
    if (!Check(cudaMemcpyAsync(t.d_batch, batch, o.batch_bytes, cudaMemcpyHostToDevice, stream),
               "cudaMemcpyAsync HtoD")) {
      return false;
    }
    if (from != nullptr) {
      if (!o.pinned) {
        ok = WriteAll(from->free_fd, &m.slot, sizeof(m.slot));  // already copied
      } else {
        PendingSlot p{from, m.slot, nullptr};
        if (!syncs_this_step) {
          p.copied = slot_events[static_cast<size_t>(from - workers.data())][m.slot];
          if (!Check(cudaEventRecord(p.copied, stream), "cudaEventRecord")) return false;
        }
        pending.push_back(p);
      }
    }
    // 3. Forward, backward, optimizer: K kernels, launched one by one or replayed as a graph
    // captured on a stream of its own (the legacy stream cannot capture).
    if (o.graph) {
      bool again = graph_exec != nullptr && o.graph_recapture > 0 && step % o.graph_recapture == 0;
      if (again) {
        if (!Check(cudaGraphExecDestroy(graph_exec), "cudaGraphExecDestroy")) return false;
        graph_exec = nullptr;
      }
      if (graph_exec == nullptr) {
        if (capture_stream == nullptr &&
            !Check(cudaStreamCreateWithFlags(&capture_stream, cudaStreamNonBlocking),
                   "cudaStreamCreateWithFlags")) {
          return false;
        }
        cudaGraph_t graph = nullptr;
        if (!Check(cudaStreamBeginCapture(capture_stream, cudaStreamCaptureModeThreadLocal),
                   "cudaStreamBeginCapture") ||
            !LaunchStepKernels(o, t, &kernel_ns, capture_stream) ||
            !CaptureWork(o) ||
            !Check(cudaStreamEndCapture(capture_stream, &graph), "cudaStreamEndCapture") ||
            !Check(cudaGraphInstantiateWithFlags(&graph_exec, graph, 0),
                   "cudaGraphInstantiateWithFlags") ||
            !Check(cudaGraphDestroy(graph), "cudaGraphDestroy")) {
          return false;
        }
      }
      if (!Check(cudaGraphLaunch(graph_exec, stream), "cudaGraphLaunch")) return false;
    } else if (!LaunchStepKernels(o, t, &kernel_ns, stream)) {
      return false;
    }
    for (int k = 0; k < o.failed_launches; ++k) {
      void* no_args[] = {nullptr};
      cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void*>(&Usage), dim3(1), dim3(1),
                                       no_args, 0, stream);
      if (e != cudaErrorInvalidDeviceFunction) {
        fprintf(stderr, "gw_train_loop: a launch of an unregistered function returned %d\n", e);
        return false;
      }
    }
    if (scratch != nullptr && !Check(cudaFree(scratch), "cudaFree")) return false;
    ++step;
    // 4. Synchronize, and read the loss back now and then (loss.item()).
    bool synced = false;
    if (o.sync_every > 0 && step % o.sync_every == 0) {
      if (!Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) return false;
      synced = true;
    }
    if (o.dtoh_every > 0 && step % o.dtoh_every == 0) {
      if (!Check(cudaMemcpyAsync(&t.loss, t.d_loss, sizeof(t.loss), cudaMemcpyDeviceToHost, stream),
                 "cudaMemcpyAsync DtoH") ||
          !Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize")) {
        return false;
      }
      synced = true;
    }
    if (synced) {  // every copy so far is complete
      for (const PendingSlot& p : pending) ok = ok && GiveBack(p);
      pending.clear();
    }
  }
  if (!Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize")) return false;
  for (auto& events : slot_events) {
    for (cudaEvent_t e : events) cudaEventDestroy(e);
  }
  *steps_done = step;
  *seconds = NowS() - start;
  return true;
}

// ----------------------------------------------------------------------------- pytorch shape
//
// --shape pytorch lays the job out in threads and processes the way a PyTorch DataLoader job
// is (docs/facts.md), so a tracer sees the same structure and the same wake-ups:
//
//   worker process (forked, --worker-comm; 1 computing thread + 2 idle pool threads)
//     --pipe write--> pt_pin_memory thread: copies the batch into a pinned block
//                     (cudaHostAlloc, reused after cudaEventQuery)
//     --condvar-->    main thread (tid == pid): gives the worker its slot back (a pipe write
//                     that wakes a waiting worker), cudaMemcpyAsync H->D, cudaEventRecord,
//                     forward kernels, then asks for backward and sleeps on a condvar
//     --condvar-->    pt_autograd_0 thread: cudaMemsetAsync + cudaLaunchKernel per backward
//                     kernel (the most CUDA calls of any thread), then wakes the main thread
//     --condvar-->    main thread: optimizer kernel, cudaDeviceSynchronize every
//                     --sync-every steps, loss read-back every --dtoh-every steps.
//
// Waits for a batch or a pinned block are timed (200 ms slices, to notice a stop signal): a
// longer wait is several sleeps, all but the last ended by the timer, the last by the waker.
//
// With --pageable (pin_memory=False) there is no pin-memory thread: the main thread reads the
// worker pipes itself and copies with a synchronous cudaMemcpy of the pageable slot.

// The --kernels-per-step split: backward has about twice forward's kernels, one optimizer
// kernel (a fused AdamW).
struct KernelSplit {
  int forward = 0;
  int backward = 0;
  int optimizer = 0;
};

KernelSplit SplitKernels(int k) {
  KernelSplit s;
  s.optimizer = k >= 3 ? 1 : 0;
  s.forward = k >= 2 ? std::max(1, (k - s.optimizer) / 3) : k;
  s.backward = k - s.forward - s.optimizer;
  return s;
}

constexpr size_t kGradBytes = 64u << 10;  // one gradient buffer the backward pass zeroes
constexpr int kGradBuffers = 8;
constexpr auto kWaitSlice = std::chrono::milliseconds(200);  // re-check g_stop this often

// A pinned block of the pin-memory thread's pool, like PyTorch's CachingHostAllocator:
// allocated with cudaHostAlloc when first needed, reused once the event recorded after its
// last copy has completed.
struct HostBlock {
  void* data = nullptr;
  cudaEvent_t released = nullptr;
};

// A batch the pin-memory thread has copied out of a worker's slot. The slot goes back to its
// worker only when the main thread takes the batch, as a DataLoader sends a worker its next
// index from the main thread: at most --prefetch batches per worker are in flight.
struct PinnedBatch {
  int block;
  Worker* worker;
  uint32_t slot;
};

struct PytorchJob {
  PytorchJob(Trainer& trainer, std::vector<Worker>& w)
      : o(trainer.o), t(trainer), workers(w), split(SplitKernels(trainer.o.kernels_per_step)) {}
  const Options& o;
  Trainer& t;
  std::vector<Worker>& workers;
  const KernelSplit split;
  const cudaStream_t stream = nullptr;  // the legacy default stream, shared by all threads
  uint64_t kernel_ns = 0;
  char* d_grad = nullptr;
  std::atomic<bool> failed{false};
  std::atomic<bool> stopping{false};

  // pin-memory thread -> main thread
  std::mutex pin_mu;
  std::condition_variable batch_ready;  // the main thread waits; the pin-memory thread wakes it
  std::condition_variable block_free;   // the pin-memory thread waits for a block
  std::deque<PinnedBatch> ready;        // the next batches, in order
  std::deque<int> free_blocks;          // oldest released first
  std::vector<HostBlock> blocks;        // sized once; blocks[0, allocated) exist
  size_t allocated = 0;
  bool pin_finished = false;

  // main thread <-> autograd thread
  std::mutex grad_mu;
  std::condition_variable backward_asked;  // the autograd thread waits; the main thread wakes it
  std::condition_variable backward_done;   // the main thread waits; the autograd thread wakes it
  long backward_requested = 0;
  long backward_finished = 0;
  bool autograd_stop = false;
};

bool Launch(PytorchJob& j, const KernelEntry& kernel) {
  void* args[] = {&j.kernel_ns, &j.t.d_batch, &j.t.d_loss};
  return Call("cudaLaunchKernel",
              cudaLaunchKernel(reinterpret_cast<const void*>(kernel.stub), dim3(kernel.grid),
                               dim3(kernel.block), args, 0, j.stream));
}

void AutogradThread(PytorchJob* job) {
  PytorchJob& j = *job;
  RegisterThread("pt_autograd_0");
  std::unique_lock<std::mutex> lock(j.grad_mu);
  for (;;) {
    j.backward_asked.wait(
        lock, [&j] { return j.autograd_stop || j.backward_requested > j.backward_finished; });
    if (j.autograd_stop) return;
    long step = j.backward_requested;
    lock.unlock();
    bool ok = true;
    for (int k = 0; k < j.split.backward && ok; ++k) {
      char* grad = j.d_grad + static_cast<size_t>(k % kGradBuffers) * kGradBytes;
      ok = Call("cudaMemsetAsync", cudaMemsetAsync(grad, 0, kGradBytes, j.stream)) &&
           Launch(j, kKernels[k % 2 == 0 ? 3 : 2]);  // relu_backward, ampere_sgemm
    }
    lock.lock();
    if (!ok) j.failed = true;
    j.backward_finished = step;
    j.backward_done.notify_one();
  }
}

// A pinned block for the next batch, or -1 when stopping. As the caching host allocator does:
// the oldest released block if its copy has completed (cudaEventQuery), else a new block while
// the pool may grow, else wait for the oldest one (cudaEventSynchronize).
int AcquireBlock(PytorchJob& j) {
  std::unique_lock<std::mutex> lock(j.pin_mu);
  for (;;) {
    if (j.stopping || j.failed) return -1;
    bool can_grow = j.allocated < j.blocks.size();
    if (!j.free_blocks.empty()) {
      int b = j.free_blocks.front();
      j.free_blocks.pop_front();
      lock.unlock();
      cudaEvent_t e = j.blocks[static_cast<size_t>(b)].released;
      cudaError_t q = cudaEventQuery(e);
      if (q != cudaErrorNotReady) return Call("cudaEventQuery", q) ? b : -1;
      Call("cudaEventQuery", cudaSuccess);  // counted; not ready is not an error
      if (!can_grow) return Call("cudaEventSynchronize", cudaEventSynchronize(e)) ? b : -1;
      lock.lock();
      j.free_blocks.push_front(b);  // still being copied from: leave it for later
    }
    if (j.allocated < j.blocks.size()) {
      int b = static_cast<int>(j.allocated++);
      lock.unlock();
      HostBlock& block = j.blocks[static_cast<size_t>(b)];
      bool ok = Call("cudaHostAlloc",
                     cudaHostAlloc(&block.data, j.o.batch_bytes, cudaHostAllocDefault)) &&
                Call("cudaEventCreateWithFlags",
                     cudaEventCreateWithFlags(&block.released, cudaEventDefault));
      return ok ? b : -1;
    }
    j.block_free.wait_for(lock, kWaitSlice);
  }
}

void PinMemoryThread(PytorchJob* job) {
  PytorchJob& j = *job;
  RegisterThread("pt_pin_memory");
  for (uint64_t seq = 0;; ++seq) {
    Worker& w = j.workers[seq % j.workers.size()];
    BatchMessage m{};
    if (!ReadAll(w.data_fd, &m, sizeof(m))) {  // the pipe blocks until the worker writes
      if (!j.stopping && !g_stop) fprintf(stderr, "gw_train_loop: a data worker exited\n");
      break;
    }
    int b = AcquireBlock(j);
    if (b < 0) break;
    memcpy(j.blocks[static_cast<size_t>(b)].data,
           w.slots + static_cast<size_t>(m.slot) * j.o.batch_bytes, j.o.batch_bytes);
    std::lock_guard<std::mutex> lock(j.pin_mu);
    j.ready.push_back(PinnedBatch{b, &w, m.slot});
    j.batch_ready.notify_one();
  }
  std::lock_guard<std::mutex> lock(j.pin_mu);
  j.pin_finished = true;
  j.batch_ready.notify_all();
}

// The next pinned batch from the pin-memory thread; false when there is none.
bool NextPinnedBatch(PytorchJob& j, PinnedBatch* out) {
  std::unique_lock<std::mutex> lock(j.pin_mu);
  while (j.ready.empty()) {
    if (j.pin_finished || g_stop) return false;
    j.batch_ready.wait_for(lock, kWaitSlice);
  }
  *out = j.ready.front();
  j.ready.pop_front();
  return true;
}

// One step's host-to-device copy of the next batch; false to stop.
bool CopyNextBatch(PytorchJob& j, long step) {
  const Options& o = j.o;
  if (j.workers.empty()) {  // num_workers=0: the main thread loads (and pins) itself
    char* local = o.pinned ? static_cast<char*>(j.t.h_local_pinned) : j.t.local_batch.data();
    ProduceBatch(o, o.batch_cpu_ms, -1, nullptr, 0, nullptr, 0, local, static_cast<uint64_t>(step));
    return o.pinned ? Call("cudaMemcpyAsync", cudaMemcpyAsync(j.t.d_batch, local, o.batch_bytes,
                                                              cudaMemcpyHostToDevice, j.stream))
                    : Call("cudaMemcpy",
                           cudaMemcpy(j.t.d_batch, local, o.batch_bytes, cudaMemcpyHostToDevice));
  }
  if (!o.pinned) {  // pin_memory=False: read the worker's pipe, copy the pageable slot
    Worker& w = j.workers[static_cast<size_t>(step) % j.workers.size()];
    BatchMessage m{};
    if (!ReadAll(w.data_fd, &m, sizeof(m))) {
      if (!g_stop) fprintf(stderr, "gw_train_loop: a data worker exited\n");
      return false;
    }
    const char* slot = w.slots + static_cast<size_t>(m.slot) * o.batch_bytes;
    return Call("cudaMemcpy",
                cudaMemcpy(j.t.d_batch, slot, o.batch_bytes, cudaMemcpyHostToDevice)) &&
           WriteAll(w.free_fd, &m.slot, sizeof(m.slot));
  }
  PinnedBatch batch{};
  if (!NextPinnedBatch(j, &batch)) return false;
  // The worker may produce into that slot again (the pipe write wakes it).
  if (!WriteAll(batch.worker->free_fd, &batch.slot, sizeof(batch.slot))) return false;
  int b = batch.block;
  HostBlock& block = j.blocks[static_cast<size_t>(b)];
  bool ok = Call("cudaMemcpyAsync", cudaMemcpyAsync(j.t.d_batch, block.data, o.batch_bytes,
                                                    cudaMemcpyHostToDevice, j.stream)) &&
            Call("cudaEventRecord", cudaEventRecord(block.released, j.stream));
  std::lock_guard<std::mutex> lock(j.pin_mu);  // the block goes back to the pool
  j.free_blocks.push_back(b);
  j.block_free.notify_one();
  return ok;
}

// Hands backward to the autograd thread and sleeps until it is done.
bool RunBackward(PytorchJob& j, long step) {
  std::unique_lock<std::mutex> lock(j.grad_mu);
  j.backward_requested = step;
  j.backward_asked.notify_one();
  j.backward_done.wait(lock, [&j, step] { return j.backward_finished >= step; });
  return !j.failed;
}

bool RunPytorchSteps(Trainer& t, std::vector<Worker>& workers, long* steps_done, double* seconds) {
  const Options& o = t.o;
  PytorchJob j(t, workers);
  j.kernel_ns = static_cast<uint64_t>(o.kernel_us * 1000.0);
  RegisterThread(nullptr);  // the main thread keeps the process name, like python's
  void* grad = nullptr;
  if (!Call("cudaMalloc", cudaMalloc(&grad, kGradBytes * kGradBuffers))) return false;
  j.d_grad = static_cast<char*>(grad);
  bool pin_thread = o.pinned && !workers.empty();
  if (pin_thread) j.blocks.resize(workers.size() * static_cast<size_t>(o.prefetch) + 2);

  // The helper threads block SIGTERM/SIGINT, so a stop signal interrupts the main thread.
  sigset_t stop_signals, old_mask;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &old_mask);
  std::thread autograd(AutogradThread, &j);
  std::thread pin_memory;
  if (pin_thread) pin_memory = std::thread(PinMemoryThread, &j);
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);

  double start = NowS();
  long step = 0;
  bool ok = true;
  while (!g_stop && ok && !j.failed) {
    if (o.steps > 0 && step >= o.steps) break;
    if (o.duration_s > 0 && NowS() - start >= o.duration_s) break;
    void* scratch = nullptr;
    if (o.malloc_per_step && !Call("cudaMalloc", cudaMalloc(&scratch, o.batch_bytes))) {
      ok = false;
      break;
    }
    if (!CopyNextBatch(j, step)) {
      ok = g_stop || j.stopping;  // a worker that exited is an error, a stop signal is not
      if (scratch != nullptr) cudaFree(scratch);
      break;
    }
    for (int k = 0; k < j.split.forward && ok; ++k) ok = Launch(j, kKernels[k % 2]);
    ok = ok && RunBackward(j, step + 1);
    for (int k = 0; k < j.split.optimizer && ok; ++k) ok = Launch(j, kKernels[4]);
    if (scratch != nullptr) ok = Call("cudaFree", cudaFree(scratch)) && ok;
    if (!ok) break;
    ++step;
    if (o.sync_every > 0 && step % o.sync_every == 0) {
      ok = Call("cudaDeviceSynchronize", cudaDeviceSynchronize());
    }
    if (ok && o.dtoh_every > 0 && step % o.dtoh_every == 0) {  // loss.item()
      ok = Call("cudaMemcpyAsync", cudaMemcpyAsync(&t.loss, t.d_loss, sizeof(t.loss),
                                                   cudaMemcpyDeviceToHost, j.stream)) &&
           Call("cudaStreamSynchronize", cudaStreamSynchronize(j.stream));
    }
  }
  *steps_done = step;
  *seconds = NowS() - start;
  ok = Call("cudaDeviceSynchronize", cudaDeviceSynchronize()) && ok && !j.failed;

  {
    std::lock_guard<std::mutex> lock(j.grad_mu);
    j.autograd_stop = true;
    j.backward_asked.notify_one();
  }
  autograd.join();
  if (pin_memory.joinable()) {
    {
      std::lock_guard<std::mutex> lock(j.pin_mu);
      j.stopping = true;
      j.block_free.notify_all();
    }
    // A pin-memory thread blocked on a worker's pipe sees EOF once the worker has exited.
    for (const Worker& w : workers) {
      if (w.pid > 0) kill(w.pid, SIGTERM);
    }
    pin_memory.join();
  }
  for (size_t b = 0; b < j.allocated; ++b) {
    if (j.blocks[b].data != nullptr) cudaFreeHost(j.blocks[b].data);
    if (j.blocks[b].released != nullptr) cudaEventDestroy(j.blocks[b].released);
  }
  cudaFree(j.d_grad);
  return ok;
}

int Run(const Options& o) {
  int count = 0;
  if (!Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount") ||
      !Check(cudaSetDevice(0), "cudaSetDevice")) {
    return 1;
  }
  if (!o.io_file.empty()) {
    int fd = open(o.io_file.c_str(), O_RDONLY | (o.odirect ? O_DIRECT : 0));
    if (fd < 0) {
      fprintf(stderr, "gw_train_loop: open --io-file %s: %s\n", o.io_file.c_str(), strerror(errno));
      return 1;
    }
    close(fd);
  }
  Trainer t{o};
  if (!Check(cudaMalloc(&t.d_batch, o.batch_bytes), "cudaMalloc batch") ||
      !Check(cudaMalloc(&t.d_loss, 256), "cudaMalloc loss") ||
      !Check(cudaMemset(t.d_loss, 0, 256), "cudaMemset")) {
    return 1;
  }
  if (o.workers == 0) {
    if (o.pinned) {
      if (!Check(cudaMallocHost(&t.h_local_pinned, o.batch_bytes), "cudaMallocHost")) return 1;
    } else {
      t.local_batch.resize(o.batch_bytes);
    }
  }

  std::vector<Worker> workers;
  bool started = StartWorkers(o, &workers);
  bool simple = o.shape == Shape::kSimple;
  if (started && o.pinned && simple) {
    // Page-lock the shared batch slots, so the copies out of them are asynchronous DMA. (The
    // pytorch shape's pin-memory thread copies them into pinned blocks instead.)
    for (const Worker& w : workers) {
      size_t bytes = static_cast<size_t>(o.prefetch) * o.batch_bytes;
      started = started && Check(cudaHostRegister(w.slots, bytes, 0), "cudaHostRegister");
    }
  }
  long steps = 0;
  double seconds = 0;
  std::vector<pid_t> helpers = StartHelpers(o);
  bool ok = started && (simple ? RunSteps(t, workers, &steps, &seconds)
                               : RunPytorchSteps(t, workers, &steps, &seconds));
  StopWorkers(&workers);
  StopHelpers(&helpers);
  if (o.pinned && simple) {
    for (const Worker& w : workers) cudaHostUnregister(w.slots);
  }
  if (t.h_local_pinned != nullptr) cudaFreeHost(t.h_local_pinned);
  cudaFree(t.d_batch);
  cudaFree(t.d_loss);
  WriteThreadCalls();
  if (o.report) {
    double sps = seconds > 0 ? static_cast<double>(steps) / seconds : 0;
    printf("gw_train_loop: steps=%ld seconds=%.3f steps_per_s=%.2f samples_per_s=%.1f\n", steps,
           seconds, sps, sps * o.batch_size);
    fflush(stdout);
  }
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int rc = ParseOptions(argc, argv, &o);
  if (rc != 0) return rc < 0 ? 0 : rc;
  InstallStopHandlers();
  return Run(o);
}
