// gw_nccl_train: data-parallel training on the simulated NCCL (sim/README.md, "gw_nccl_train").
//
// Launcher (no --rank): gets an ncclUniqueId and starts one process per rank with fork+exec of
// this program (like torchrun), then waits for them. Rank (--rank R --id HEX): forks one
// DataLoader-style worker process (comm pt_data_worker) before touching CUDA, then per step
// takes the next batch from it (pipe), launches the step's kernels on the legacy stream,
// all-reduces the gradient buckets (ncclAllReduce) and synchronizes the stream (the optimizer's
// loss.item()). One rank can be made slow by a real host-side cause: its worker computes
// longer per batch (--slow-cause loader) or its main thread computes before each step
// (--slow-cause main); every other rank then waits for it in its stream sync.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "gwsim/cuda_runtime.h"
#include "gwsim/fatbin.h"
#include "gwsim/nccl.h"

namespace {

// ----------------------------------------------------------------------------- kernels
constexpr char kFatbinPayload[] =
    "GWSIMFB1"
    "_Z11gemm_kernelPKfS0_Pfiii\0"
    "_Z13relu_backwardPfPKfi\0";
GwsimFatbinWrapper fatbin_wrapper = {GWSIM_FATBIN_WRAPPER_MAGIC, 1, kFatbinPayload, nullptr};
void** fatbin_handle = nullptr;
void gemm_kernel() {}
void relu_backward() {}

void UnregisterKernels() { __cudaUnregisterFatBinary(fatbin_handle); }

__attribute__((constructor)) void RegisterKernels() {
  fatbin_handle = __cudaRegisterFatBinary(&fatbin_wrapper);
  __cudaRegisterFunction(fatbin_handle, reinterpret_cast<const char*>(gemm_kernel),
                         const_cast<char*>("_Z11gemm_kernelPKfS0_Pfiii"),
                         "_Z11gemm_kernelPKfS0_Pfiii", -1, nullptr, nullptr, nullptr, nullptr,
                         nullptr);
  __cudaRegisterFunction(fatbin_handle, reinterpret_cast<const char*>(relu_backward),
                         const_cast<char*>("_Z13relu_backwardPfPKfi"), "_Z13relu_backwardPfPKfi",
                         -1, nullptr, nullptr, nullptr, nullptr, nullptr);
  __cudaRegisterFatBinaryEnd(fatbin_handle);
  atexit(UnregisterKernels);
}

// ----------------------------------------------------------------------------- options
struct Options {
  int ranks = 2;       // launcher: processes to start
  int rank = -1;       // rank mode when >= 0
  std::string id_hex;  // rank mode: the ncclUniqueId, hex
  int steps = 200;
  int kernels_per_step = 4;
  int kernel_us = 2000;
  int buckets = 2;
  double bucket_mb = 4;
  double batch_cpu_ms = 2;
  int prefetch = 2;
  int slow_rank = -1;
  std::string slow_cause = "loader";  // loader | main
  double slow_ms = 30;
  int init_delay_ms = 0;  // a rank waits this long before ncclCommInitRank (loading a model)
  bool report = false;
};

void Usage() {
  fprintf(stderr,
          "usage: gw_nccl_train [--ranks N] [--steps S] [--kernels-per-step K] [--kernel-us U]\n"
          "         [--buckets B] [--bucket-mb MB] [--batch-cpu-ms MS] [--prefetch P]\n"
          "         [--slow-rank R [--slow-cause loader|main] [--slow-ms MS]]\n"
          "         [--init-delay-ms MS] [--report]\n");
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--report") {
      o->report = true;
      continue;
    }
    if (a == "--help" || a == "-h") return false;
    v = next();
    if (v == nullptr) return false;
    if (a == "--ranks")
      o->ranks = atoi(v);
    else if (a == "--rank")
      o->rank = atoi(v);
    else if (a == "--id")
      o->id_hex = v;
    else if (a == "--steps")
      o->steps = atoi(v);
    else if (a == "--kernels-per-step")
      o->kernels_per_step = atoi(v);
    else if (a == "--kernel-us")
      o->kernel_us = atoi(v);
    else if (a == "--buckets")
      o->buckets = atoi(v);
    else if (a == "--bucket-mb")
      o->bucket_mb = atof(v);
    else if (a == "--batch-cpu-ms")
      o->batch_cpu_ms = atof(v);
    else if (a == "--prefetch")
      o->prefetch = atoi(v);
    else if (a == "--slow-rank")
      o->slow_rank = atoi(v);
    else if (a == "--slow-cause")
      o->slow_cause = v;
    else if (a == "--slow-ms")
      o->slow_ms = atof(v);
    else if (a == "--init-delay-ms")
      o->init_delay_ms = atoi(v);
    else
      return false;
  }
  if (o->ranks < 1 || o->ranks > 64 || o->steps < 1 || o->prefetch < 1 || o->buckets < 0) {
    return false;
  }
  return o->slow_cause == "loader" || o->slow_cause == "main";
}

// ----------------------------------------------------------------------------- helpers
int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double WallS() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Real arithmetic for `ms` of this thread's CPU time (contention stretches its wall time).
volatile uint64_t g_sink = 0;
void BurnCpuMs(double ms) {
  int64_t until = ThreadCpuNs() + static_cast<int64_t>(ms * 1e6);
  uint64_t x = 88172645463325252ull;
  while (ThreadCpuNs() < until) {
    for (int i = 0; i < 4096; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
    }
  }
  g_sink = x;
}

bool ReadByte(int fd) {
  char c;
  for (;;) {
    ssize_t n = read(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

bool WriteByte(int fd) {
  char c = 1;
  for (;;) {
    ssize_t n = write(fd, &c, 1);
    if (n == 1) return true;
    if (n < 0 && errno == EINTR) continue;
    return false;
  }
}

std::string ToHex(const ncclUniqueId& id) {
  std::string out;
  char buf[3];
  for (char c : id.internal) {
    snprintf(buf, sizeof(buf), "%02x", static_cast<unsigned char>(c));
    out += buf;
  }
  return out;
}

bool FromHex(const std::string& hex, ncclUniqueId* id) {
  if (hex.size() != 2 * sizeof(id->internal)) return false;
  for (size_t i = 0; i < sizeof(id->internal); ++i) {
    id->internal[i] = static_cast<char>(strtoul(hex.substr(2 * i, 2).c_str(), nullptr, 16));
  }
  return true;
}

// ----------------------------------------------------------------------------- launcher
volatile sig_atomic_t g_stop = 0;
std::vector<pid_t> g_children;

void ForwardSignal(int sig) {
  g_stop = 1;
  for (pid_t p : g_children) kill(p, sig);
}

int Launch(const Options& o, char** argv) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    fprintf(stderr, "gw_nccl_train: ncclGetUniqueId failed\n");
    return 1;
  }
  std::string hex = ToHex(id);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return 1;
  self[n] = '\0';
  std::string device_count = std::to_string(o.ranks);
  signal(SIGTERM, ForwardSignal);
  signal(SIGINT, ForwardSignal);
  for (int r = 0; r < o.ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      setenv("GWSIM_DEVICE_COUNT", device_count.c_str(), 0);
      std::vector<std::string> args;
      for (int i = 0; argv[i] != nullptr; ++i) args.push_back(argv[i]);
      args.push_back("--rank");
      args.push_back(std::to_string(r));
      args.push_back("--id");
      args.push_back(hex);
      std::vector<char*> cargs;
      for (std::string& a : args) cargs.push_back(a.data());
      cargs.push_back(nullptr);
      execv(self, cargs.data());
      _exit(127);
    }
    g_children.push_back(pid);
  }
  int rc = 0;
  for (pid_t p : g_children) {
    int status = 0;
    while (waitpid(p, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  return rc;
}

// ----------------------------------------------------------------------------- rank
[[noreturn]] void WorkerMain(const Options& o, int credits_fd, int batches_fd) {
  prctl(PR_SET_NAME, "pt_data_worker");
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  double ms = o.batch_cpu_ms;
  if (o.rank == o.slow_rank && o.slow_cause == "loader") ms += o.slow_ms;
  while (ReadByte(credits_fd)) {
    BurnCpuMs(ms);
    if (!WriteByte(batches_fd)) break;
  }
  _exit(0);
}

#define CHECK_CUDA(call)                                                            \
  do {                                                                              \
    cudaError_t e_ = (call);                                                        \
    if (e_ != cudaSuccess) {                                                        \
      fprintf(stderr, "gw_nccl_train rank %d: %s failed: %d\n", o.rank, #call, e_); \
      return 1;                                                                     \
    }                                                                               \
  } while (0)

#define CHECK_NCCL(call)                                                       \
  do {                                                                         \
    ncclResult_t r_ = (call);                                                  \
    if (r_ != ncclSuccess) {                                                   \
      fprintf(stderr, "gw_nccl_train rank %d: %s failed: %s\n", o.rank, #call, \
              ncclGetErrorString(r_));                                         \
      return 1;                                                                \
    }                                                                          \
  } while (0)

int RankMain(const Options& o) {
  ncclUniqueId id;
  if (!FromHex(o.id_hex, &id)) {
    fprintf(stderr, "gw_nccl_train: bad --id\n");
    return 2;
  }
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The DataLoader worker, forked before CUDA is touched (as PyTorch's are).
  int credits[2], batches[2];
  if (pipe2(credits, O_CLOEXEC) != 0 || pipe2(batches, O_CLOEXEC) != 0) return 1;
  pid_t worker = fork();
  if (worker < 0) return 1;
  if (worker == 0) {
    close(credits[1]);
    close(batches[0]);
    WorkerMain(o, credits[0], batches[1]);
  }
  close(credits[0]);
  close(batches[1]);
  for (int i = 0; i < o.prefetch; ++i) WriteByte(credits[1]);

  if (o.report) {
    printf("gw_nccl_train: rank=%d pid=%d started\n", o.rank, static_cast<int>(getpid()));
    fflush(stdout);
  }
  if (o.init_delay_ms > 0) usleep(static_cast<useconds_t>(o.init_delay_ms) * 1000);
  CHECK_CUDA(cudaSetDevice(o.rank));
  size_t count = static_cast<size_t>(o.bucket_mb * 1048576.0 / 4.0);
  void* grads = nullptr;
  CHECK_CUDA(cudaMalloc(&grads, count * 4 > 0 ? count * 4 : 4));
  ncclComm_t comm = nullptr;
  CHECK_NCCL(ncclCommInitRank(&comm, o.ranks, id, o.rank));

  uint64_t kernel_ns = static_cast<uint64_t>(o.kernel_us) * 1000;
  double t0 = WallS();
  int steps = 0;
  for (; steps < o.steps && !g_stop; ++steps) {
    if (!ReadByte(batches[0])) break;  // the next batch
    WriteByte(credits[1]);             // its slot back to the worker
    if (o.rank == o.slow_rank && o.slow_cause == "main") BurnCpuMs(o.slow_ms);
    for (int k = 0; k < o.kernels_per_step; ++k) {
      void* args[] = {&kernel_ns, &grads};
      const void* stub = reinterpret_cast<const void*>(k % 2 == 0 ? gemm_kernel : relu_backward);
      CHECK_CUDA(cudaLaunchKernel(stub, dim3(256), dim3(256), args, 0, nullptr));
    }
    for (int b = 0; b < o.buckets; ++b) {
      CHECK_NCCL(ncclAllReduce(grads, grads, count, ncclFloat, ncclSum, comm, nullptr));
    }
    CHECK_CUDA(cudaStreamSynchronize(nullptr));
  }
  double seconds = WallS() - t0;
  CHECK_NCCL(ncclCommDestroy(comm));
  cudaFree(grads);
  close(credits[1]);
  close(batches[0]);
  kill(worker, SIGTERM);
  waitpid(worker, nullptr, 0);
  if (o.report) {
    printf("gw_nccl_train: rank=%d pid=%d steps=%d seconds=%.3f steps_per_s=%.2f\n", o.rank,
           static_cast<int>(getpid()), steps, seconds, seconds > 0 ? steps / seconds : 0.0);
    fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) {
    Usage();
    return 2;
  }
  if (o.rank >= 0) return RankMain(o);
  return Launch(o, argv);
}
