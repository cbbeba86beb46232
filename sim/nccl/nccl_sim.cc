// The simulated libnccl.so.2: NCCL's C API with its real names, signatures and cross-process
// semantics on one host (sim/README.md, "Simulated NCCL").
//
// A communicator is a shared-memory segment named after the ncclUniqueId
// (<GWSIM_GPU_STATE_DIR>/gwsim-nccl.<key>). ncclCommInitRank blocks until every rank has
// joined. A collective returns once it is queued on its stream (cuLaunchHostFunc on the sim
// driver); when the stream reaches it, the rank marks its arrival in the segment and the stream
// waits until every rank's stream has arrived at the same collective sequence number, then
// takes the transfer time. So a rank that enqueues late makes the others wait in their next
// stream or device sync, as with real NCCL, whose kernels spin on the GPU until their peers
// arrive. Collectives move no data (sim kernels do not either).
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/api_counter.h"
#include "gwsim/cuda_driver.h"
#include "gwsim/nccl.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

struct ncclComm;

namespace {

constexpr int kMaxRanks = 64;
constexpr char kIdMagic[8] = {'G', 'W', 'N', 'C', 'C', 'L', 'I', 'D'};
constexpr uint64_t kSegmentMagic = 0x67776e63636c3031ull;  // "gwnccl01"

// The shared segment of one communicator. Zero-filled when created (ftruncate).
struct Segment {
  std::atomic<uint64_t> magic;
  std::atomic<int32_t> nranks;
  std::atomic<int32_t> joined;     // ranks that called ncclCommInitRank
  std::atomic<int32_t> destroyed;  // ranks that called ncclCommDestroy
  std::atomic<uint32_t> epoch;     // bumped on every arrival (futex word)
  // Per rank: the collective sequence number its stream has reached.
  std::atomic<uint64_t> arrived[kMaxRanks];
  // Point-to-point: sends from → to issued (reached on the sender's stream), receives posted.
  std::atomic<uint64_t> sent[kMaxRanks][kMaxRanks];
  std::atomic<uint64_t> received[kMaxRanks][kMaxRanks];
};

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void SleepNs(int64_t ns) {
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
  }
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, int64_t timeout_ns) {
  timespec ts{static_cast<time_t>(timeout_ns / 1'000'000'000),
              static_cast<long>(timeout_ns % 1'000'000'000)};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, seen, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

double EnvDouble(const char* name, double fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  double d = strtod(v, &end);
  return end != v ? d : fallback;
}

std::string StateDir() {
  const char* dir = getenv("GWSIM_GPU_STATE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/dev/shm";
}

size_t TypeSize(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
      return 1;
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
      return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64:
      return 8;
  }
  return 0;
}

// Ground truth written at exit (GWSIM_CALL_COUNTS_DIR): per communicator of this process.
struct CommStats {
  int rank = 0;
  int nranks = 0;
  uint64_t key = 0;
  std::atomic<uint64_t> collectives{0};  // completed on the stream
  std::atomic<uint64_t> wait_ns{0};      // stream time spent waiting for other ranks to arrive
  std::atomic<uint64_t> timeouts{0};
};

std::mutex g_stats_mu;
std::vector<CommStats*>* g_stats = nullptr;  // never freed: executor threads may still use them

void DumpStats() {
  const char* dir = getenv("GWSIM_CALL_COUNTS_DIR");
  if (dir == nullptr || *dir == '\0') return;
  std::string path = std::string(dir) + "/libnccl." + std::to_string(getpid()) + ".comms";
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) return;
  std::lock_guard<std::mutex> lock(g_stats_mu);
  if (g_stats != nullptr) {
    for (CommStats* s : *g_stats) {
      fprintf(f, "comm %016llx rank %d nranks %d collectives %llu wait_ns %llu timeouts %llu\n",
              static_cast<unsigned long long>(s->key), s->rank, s->nranks,
              static_cast<unsigned long long>(s->collectives.load()),
              static_cast<unsigned long long>(s->wait_ns.load()),
              static_cast<unsigned long long>(s->timeouts.load()));
    }
  }
  fclose(f);
}

void InitLibrary() {
  static std::once_flag once;
  std::call_once(once, [] {
    gwsim::DumpCountsAtExit("libnccl");
    atexit(DumpStats);
  });
}

enum class TaskKind { kCollective, kSend, kRecv };

// One queued operation, run on the stream's executor thread when the stream reaches it.
struct Task {
  ncclComm* comm = nullptr;
  TaskKind kind = TaskKind::kCollective;
  uint64_t seq = 0;  // collective sequence number, or the p2p message number with `peer`
  int peer = -1;
  size_t bytes = 0;
};

// An operation deferred between ncclGroupStart and ncclGroupEnd, queued at the group's end.
struct Pending {
  Task* task = nullptr;
  cudaStream_t stream = nullptr;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Pending> t_pending;

}  // namespace

struct ncclComm {
  int rank = 0;
  int nranks = 0;
  int device = 0;
  uint64_t key = 0;
  Segment* seg = nullptr;
  std::string path;
  uint64_t next_seq = 0;  // host side: collectives issued
  std::vector<uint64_t> sends_issued;
  std::vector<uint64_t> recvs_issued;
  std::atomic<int> async_error{ncclSuccess};
  CommStats* stats = nullptr;
};

namespace {

int64_t TimeoutNs() { return static_cast<int64_t>(EnvDouble("GWSIM_NCCL_TIMEOUT_S", 60) * 1e9); }

// Waits until `ready()` holds, sleeping on the segment's epoch. False after the timeout.
template <typename Ready>
bool WaitFor(Segment* seg, Ready ready) {
  int64_t deadline = NowNs() + TimeoutNs();
  for (;;) {
    uint32_t seen = seg->epoch.load(std::memory_order_acquire);
    if (ready()) return true;
    int64_t left = deadline - NowNs();
    if (left <= 0) return false;
    FutexWait(&seg->epoch, seen, std::min<int64_t>(left, 100'000'000));
  }
}

void Announce(Segment* seg) {
  seg->epoch.fetch_add(1, std::memory_order_acq_rel);
  FutexWakeAll(&seg->epoch);
}

// Transfer time of a ring collective of `bytes` per rank: 2 (n-1)/n × bytes over the link.
int64_t TransferNs(size_t bytes, int nranks, TaskKind kind) {
  double gbps = EnvDouble("GWSIM_NCCL_GBPS", 100);
  if (gbps <= 0) return 0;
  double factor = kind == TaskKind::kCollective && nranks > 1
                      ? 2.0 * (nranks - 1) / static_cast<double>(nranks)
                      : 1.0;
  return static_cast<int64_t>(static_cast<double>(bytes) * factor / gbps);
}

// Marks a task's arrival in the segment (its stream reached it).
void Mark(const Task& task) {
  ncclComm* comm = task.comm;
  Segment* seg = comm->seg;
  switch (task.kind) {
    case TaskKind::kCollective:
      seg->arrived[comm->rank].store(task.seq, std::memory_order_release);
      break;
    case TaskKind::kSend:
      seg->sent[comm->rank][task.peer].store(task.seq, std::memory_order_release);
      break;
    case TaskKind::kRecv:
      seg->received[comm->rank][task.peer].store(task.seq, std::memory_order_release);
      break;
  }
}

// Whether the peers a task needs have arrived.
bool Ready(const Task& task) {
  ncclComm* comm = task.comm;
  Segment* seg = comm->seg;
  switch (task.kind) {
    case TaskKind::kCollective:
      for (int r = 0; r < comm->nranks; ++r) {
        if (seg->arrived[r].load(std::memory_order_acquire) < task.seq) return false;
      }
      return true;
    case TaskKind::kSend:
      return seg->received[task.peer][comm->rank].load(std::memory_order_acquire) >= task.seq;
    case TaskKind::kRecv:
      return seg->sent[task.peer][comm->rank].load(std::memory_order_acquire) >= task.seq;
  }
  return true;
}

// The operations of one launch: a single call, or the calls of a group on one stream, which
// real NCCL fuses into one kernel (so a send and a receive between two ranks in one group do
// not wait for each other in turn).
struct Launch {
  std::vector<Task*> tasks;
};

// Runs on the stream's executor thread (cuLaunchHostFunc): the stream is blocked meanwhile.
void RunLaunch(void* p) {
  Launch* launch = static_cast<Launch*>(p);
  int64_t arrived = NowNs();
  for (Task* t : launch->tasks) Mark(*t);
  for (Task* t : launch->tasks) Announce(t->comm->seg);
  bool ok = true;
  for (Task* t : launch->tasks) {
    if (!WaitFor(t->comm->seg, [t] { return Ready(*t); })) ok = false;
  }
  int64_t all_there = NowNs();
  int64_t transfer = 0;
  for (Task* t : launch->tasks) {
    ncclComm* comm = t->comm;
    comm->stats->wait_ns.fetch_add(static_cast<uint64_t>(all_there - arrived),
                                   std::memory_order_relaxed);
    if (!ok) {
      comm->stats->timeouts.fetch_add(1, std::memory_order_relaxed);
      comm->async_error.store(ncclRemoteError);
    }
    if (t->kind == TaskKind::kCollective) {
      comm->stats->collectives.fetch_add(1, std::memory_order_relaxed);
    }
    transfer += TransferNs(t->bytes, comm->nranks, t->kind);
  }
  if (ok) SleepNs(transfer);
  for (Task* t : launch->tasks) delete t;
  delete launch;
}

ncclResult_t Submit(Launch* launch, cudaStream_t stream) {
  if (cuLaunchHostFunc(reinterpret_cast<CUstream>(stream), RunLaunch, launch) != CUDA_SUCCESS) {
    for (Task* t : launch->tasks) delete t;
    delete launch;
    return ncclUnhandledCudaError;
  }
  return ncclSuccess;
}

ncclResult_t Queue(Task* task, cudaStream_t stream) {
  if (t_group_depth > 0) {
    t_pending.push_back({task, stream});
    return ncclSuccess;
  }
  auto* launch = new Launch;
  launch->tasks.push_back(task);
  return Submit(launch, stream);
}

ncclResult_t Collective(size_t count, ncclDataType_t datatype, ncclComm_t comm,
                        cudaStream_t stream) {
  if (comm == nullptr || comm->seg == nullptr) return ncclInvalidArgument;
  size_t size = TypeSize(datatype);
  if (size == 0) return ncclInvalidArgument;
  if (comm->async_error.load() != ncclSuccess)
    return static_cast<ncclResult_t>(comm->async_error.load());
  auto* task = new Task;
  task->comm = comm;
  task->kind = TaskKind::kCollective;
  task->seq = ++comm->next_seq;
  task->bytes = count * size;
  return Queue(task, stream);
}

ncclResult_t PointToPoint(TaskKind kind, size_t count, ncclDataType_t datatype, int peer,
                          ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr || comm->seg == nullptr) return ncclInvalidArgument;
  if (peer < 0 || peer >= comm->nranks) return ncclInvalidArgument;
  size_t size = TypeSize(datatype);
  if (size == 0) return ncclInvalidArgument;
  auto* task = new Task;
  task->comm = comm;
  task->kind = kind;
  task->peer = peer;
  auto& issued = kind == TaskKind::kSend ? comm->sends_issued : comm->recvs_issued;
  task->seq = ++issued[static_cast<size_t>(peer)];
  task->bytes = count * size;
  return Queue(task, stream);
}

ncclResult_t InitRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank) {
  InitLibrary();
  if (out == nullptr || nranks < 1 || nranks > kMaxRanks || rank < 0 || rank >= nranks) {
    return ncclInvalidArgument;
  }
  if (memcmp(id.internal, kIdMagic, sizeof(kIdMagic)) != 0) return ncclInvalidArgument;
  uint64_t key = 0;
  memcpy(&key, id.internal + sizeof(kIdMagic), sizeof(key));
  char name[64];
  snprintf(name, sizeof(name), "/gwsim-nccl.%016llx", static_cast<unsigned long long>(key));
  std::string path = StateDir() + name;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return ncclSystemError;
  if (ftruncate(fd, sizeof(Segment)) != 0) {
    close(fd);
    return ncclSystemError;
  }
  void* mem = mmap(nullptr, sizeof(Segment), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mem == MAP_FAILED) return ncclSystemError;
  auto* seg = static_cast<Segment*>(mem);
  int32_t expected = 0;
  if (!seg->nranks.compare_exchange_strong(expected, nranks) && expected != nranks) {
    munmap(mem, sizeof(Segment));
    return ncclInvalidUsage;  // ranks disagree on the communicator's size
  }
  seg->magic.store(kSegmentMagic);
  seg->joined.fetch_add(1);
  Announce(seg);
  // Like the real bootstrap: every rank waits for all the others.
  if (!WaitFor(seg, [&] { return seg->joined.load() >= nranks; })) {
    munmap(mem, sizeof(Segment));
    return ncclSystemError;
  }
  auto* comm = new ncclComm;
  comm->rank = rank;
  comm->nranks = nranks;
  comm->key = key;
  comm->seg = seg;
  comm->path = path;
  comm->sends_issued.assign(static_cast<size_t>(nranks), 0);
  comm->recvs_issued.assign(static_cast<size_t>(nranks), 0);
  CUdevice device = 0;
  if (cuCtxGetDevice(&device) == CUDA_SUCCESS) comm->device = device;
  comm->stats = new CommStats;
  comm->stats->rank = rank;
  comm->stats->nranks = nranks;
  comm->stats->key = key;
  {
    std::lock_guard<std::mutex> lock(g_stats_mu);
    if (g_stats == nullptr) g_stats = new std::vector<CommStats*>;
    g_stats->push_back(comm->stats);
  }
  *out = comm;
  return ncclSuccess;
}

}  // namespace

GWSIM_EXPORT ncclResult_t ncclGetVersion(int* version) {
  GWSIM_API_ENTRY("ncclGetVersion");
  if (version == nullptr) return ncclInvalidArgument;
  *version = 22105;  // 2.21.5
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  GWSIM_API_ENTRY("ncclGetUniqueId");
  InitLibrary();
  if (unique_id == nullptr) return ncclInvalidArgument;
  memset(unique_id->internal, 0, sizeof(unique_id->internal));
  memcpy(unique_id->internal, kIdMagic, sizeof(kIdMagic));
  uint64_t key = 0;
  if (getrandom(&key, sizeof(key), 0) != sizeof(key)) {
    key = static_cast<uint64_t>(NowNs()) ^ (static_cast<uint64_t>(getpid()) << 32);
  }
  memcpy(unique_id->internal + sizeof(kIdMagic), &key, sizeof(key));
  // The rest stands for the bootstrap address the real id carries.
  uint64_t pid = static_cast<uint64_t>(getpid());
  memcpy(unique_id->internal + 16, &pid, sizeof(pid));
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                           int rank) {
  GWSIM_API_ENTRY("ncclCommInitRank");
  return InitRank(comm, nranks, comm_id, rank);
}

GWSIM_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id,
                                                 int rank, ncclConfig_t* config) {
  GWSIM_API_ENTRY("ncclCommInitRankConfig");
  (void)config;
  return InitRank(comm, nranks, comm_id, rank);
}

GWSIM_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  GWSIM_API_ENTRY("ncclCommDestroy");
  if (comm == nullptr) return ncclInvalidArgument;
  // Like the real one, destroy waits for the communicator's queued work: drain the context.
  cuCtxSynchronize();
  Segment* seg = comm->seg;
  if (seg->destroyed.fetch_add(1) + 1 >= seg->nranks.load()) unlink(comm->path.c_str());
  munmap(seg, sizeof(Segment));
  comm->seg = nullptr;  // the struct stays: its stats are dumped at exit
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  GWSIM_API_ENTRY("ncclCommAbort");
  if (comm == nullptr) return ncclInvalidArgument;
  Segment* seg = comm->seg;
  if (seg != nullptr) {
    if (seg->destroyed.fetch_add(1) + 1 >= seg->nranks.load()) unlink(comm->path.c_str());
    munmap(seg, sizeof(Segment));
    comm->seg = nullptr;
  }
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  GWSIM_API_ENTRY("ncclCommCount");
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) {
  GWSIM_API_ENTRY("ncclCommCuDevice");
  if (comm == nullptr || device == nullptr) return ncclInvalidArgument;
  *device = comm->device;
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  GWSIM_API_ENTRY("ncclCommUserRank");
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  GWSIM_API_ENTRY("ncclCommGetAsyncError");
  if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
  *async_error = static_cast<ncclResult_t>(comm->async_error.load());
  return ncclSuccess;
}

GWSIM_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  GWSIM_API_ENTRY("ncclGetErrorString");
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error";
    case ncclSystemError:
      return "unhandled system error";
    case ncclInternalError:
      return "internal error";
    case ncclInvalidArgument:
      return "invalid argument";
    case ncclInvalidUsage:
      return "invalid usage";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}

GWSIM_EXPORT ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                                        cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclAllReduce");
  (void)sendbuff, (void)recvbuff, (void)op;
  return Collective(count, datatype, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                                        ncclDataType_t datatype, int root, ncclComm_t comm,
                                        cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclBroadcast");
  (void)sendbuff, (void)recvbuff;
  if (comm != nullptr && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Collective(count, datatype, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count,
                                     ncclDataType_t datatype, ncclRedOp_t op, int root,
                                     ncclComm_t comm, cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclReduce");
  (void)sendbuff, (void)recvbuff, (void)op;
  if (comm != nullptr && (root < 0 || root >= comm->nranks)) return ncclInvalidArgument;
  return Collective(count, datatype, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                                        ncclDataType_t datatype, ncclComm_t comm,
                                        cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclAllGather");
  (void)sendbuff, (void)recvbuff;
  return Collective(sendcount, datatype, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                            ncclDataType_t datatype, ncclRedOp_t op,
                                            ncclComm_t comm, cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclReduceScatter");
  (void)sendbuff, (void)recvbuff, (void)op;
  return Collective(recvcount, datatype, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype,
                                   int peer, ncclComm_t comm, cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclSend");
  (void)sendbuff;
  return PointToPoint(TaskKind::kSend, count, datatype, peer, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer,
                                   ncclComm_t comm, cudaStream_t stream) {
  GWSIM_API_ENTRY("ncclRecv");
  (void)recvbuff;
  return PointToPoint(TaskKind::kRecv, count, datatype, peer, comm, stream);
}

GWSIM_EXPORT ncclResult_t ncclGroupStart(void) {
  GWSIM_API_ENTRY("ncclGroupStart");
  ++t_group_depth;
  return ncclSuccess;
}

GWSIM_EXPORT ncclResult_t ncclGroupEnd(void) {
  GWSIM_API_ENTRY("ncclGroupEnd");
  if (t_group_depth == 0) return ncclInvalidUsage;
  if (--t_group_depth > 0) return ncclSuccess;
  std::vector<Pending> pending;
  pending.swap(t_pending);
  // One launch per stream, in the order the streams were first used.
  std::vector<std::pair<cudaStream_t, Launch*>> launches;
  for (const Pending& p : pending) {
    Launch* launch = nullptr;
    for (auto& [stream, l] : launches) {
      if (stream == p.stream) launch = l;
    }
    if (launch == nullptr) {
      launch = new Launch;
      launches.push_back({p.stream, launch});
    }
    launch->tasks.push_back(p.task);
  }
  ncclResult_t result = ncclSuccess;
  for (auto& [stream, launch] : launches) {
    if (result != ncclSuccess) {
      for (Task* t : launch->tasks) delete t;
      delete launch;
      continue;
    }
    result = Submit(launch, stream);
  }
  return result;
}
