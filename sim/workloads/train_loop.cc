// gw_train_loop: a training loop on the simulated CUDA runtime, shaped like a PyTorch job.
//
// N forked DataLoader-style workers (named --worker-comm) produce batches into shared-memory
// slots and announce them through pipes; each batch costs real CPU time, and optionally a file
// read (O_DIRECT if asked) and fresh-memory page faults. The main loop per step takes the next
// batch in order, copies it to the device (pinned: the slots are page-locked with
// cudaHostRegister, like pin_memory=True, and copied asynchronously; pageable: the driver stages
// the copy on the main thread), launches K kernels, synchronizes every
// --sync-every steps and reads a "loss" back every --dtoh-every steps.
//
// Kernel convention of the simulator: the first kernel argument is a uint64_t duration in ns.
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
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

struct Options {
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
  std::string worker_comm = "pt_data_worker";
  int prefetch = 2;  // batches in flight per worker (DataLoader prefetch_factor)
  bool report = false;
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
          "  --worker-comm NAME    worker process name (default pt_data_worker)\n"
          "  --prefetch N          batches in flight per worker (default 2)\n"
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
  kOptWorkerComm,
  kOptPrefetch,
  kOptReport,
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
      {"worker-comm", required_argument, nullptr, kOptWorkerComm},
      {"prefetch", required_argument, nullptr, kOptPrefetch},
      {"report", no_argument, nullptr, kOptReport},
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
      case kOptReport:
        o->report = true;
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
uint64_t ProduceBatch(const Options& o, int io_fd, char* io_buffer, size_t io_chunk,
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
  // the batch has cost batch_cpu_ms of CPU time.
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
  while (ThreadCpuMs() - cpu_start < o.batch_cpu_ms && !g_stop) {
    for (int k = 0; k < 4096 && nwords > 0; ++k) {
      words[i] = (words[i] * 6364136223846793005ull + 1442695040888963407ull) ^ (words[i] >> 29);
      if (++i == nwords) i = 0;
    }
  }
  uint64_t sum = 0;
  for (size_t j = 0; j < nwords; j += 512) sum += words[j];
  return sum;
}

[[noreturn]] void WorkerMain(const Options& o, int index, const Worker& w) {
  prctl(PR_SET_NAME, o.worker_comm.c_str(), 0, 0, 0);
  prctl(PR_SET_PDEATHSIG, SIGTERM, 0, 0, 0);  // never outlive the trainer
  if (getppid() == 1) _exit(0);
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
    m.checksum = ProduceBatch(o, io_fd, io_buffer, io_chunk, &io_offset, io_size, data, seq);
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

bool RunSteps(Trainer& t, std::vector<Worker>& workers, long* steps_done, double* seconds) {
  const Options& o = t.o;
  cudaStream_t stream = nullptr;  // the legacy default stream, as PyTorch uses by default
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
      ProduceBatch(o, -1, nullptr, 0, &no_offset, 0, local, static_cast<uint64_t>(step));
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
    // 3. Forward, backward, optimizer: K kernels.
    for (int k = 0; k < o.kernels_per_step; ++k) {
      const KernelEntry& kernel = kKernels[static_cast<size_t>(k) % std::size(kKernels)];
      void* args[] = {&kernel_ns, &t.d_batch, &t.d_loss};
      if (!Check(cudaLaunchKernel(reinterpret_cast<const void*>(kernel.stub), dim3(kernel.grid),
                                  dim3(kernel.block), args, 0, stream),
                 "cudaLaunchKernel")) {
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
  if (started && o.pinned) {
    // Page-lock the shared batch slots, so the copies out of them are asynchronous DMA.
    for (const Worker& w : workers) {
      size_t bytes = static_cast<size_t>(o.prefetch) * o.batch_bytes;
      started = started && Check(cudaHostRegister(w.slots, bytes, 0), "cudaHostRegister");
    }
  }
  long steps = 0;
  double seconds = 0;
  bool ok = started && RunSteps(t, workers, &steps, &seconds);
  StopWorkers(&workers);
  if (o.pinned) {
    for (const Worker& w : workers) cudaHostUnregister(w.slots);
  }
  if (t.h_local_pinned != nullptr) cudaFreeHost(t.h_local_pinned);
  cudaFree(t.d_batch);
  cudaFree(t.d_loss);
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
