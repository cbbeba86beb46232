#include "driver/device.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "gwsim/gpu_state.h"

namespace gwsim {
namespace {

// The published busy time (gwsim/gpu_state.h); null when the file could not be made.
GwsimGpuState* g_gpu_state = nullptr;
std::string* g_gpu_state_path = nullptr;

void RemoveGpuState() {
  // Forked children inherit the mapping and the atexit handler: only the maker removes it.
  if (g_gpu_state != nullptr && g_gpu_state_path != nullptr && g_gpu_state->pid == getpid()) {
    unlink(g_gpu_state_path->c_str());
  }
}

std::string StateDir() {
  const char* dir = getenv("GWSIM_GPU_STATE_DIR");
  return dir != nullptr && *dir != '\0' ? dir : "/dev/shm";
}

void CreateGpuState(int device_count) {
  std::string path = StateDir() + "/" + GWSIM_GPU_STATE_PREFIX + std::to_string(getpid());
  int fd = -1;
  for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0 && errno == EEXIST) unlink(path.c_str());  // a dead process's file, same pid
  }
  if (fd < 0) return;
  fchmod(fd, 0644);  // readable by the (root) tracer whatever the umask
  void* p = MAP_FAILED;
  if (ftruncate(fd, sizeof(GwsimGpuState)) == 0) {
    p = mmap(nullptr, sizeof(GwsimGpuState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  }
  close(fd);
  if (p == MAP_FAILED) {
    unlink(path.c_str());
    return;
  }
  auto* st = static_cast<GwsimGpuState*>(p);
  st->version = GWSIM_GPU_STATE_VERSION;
  st->device_count = static_cast<uint32_t>(std::min(device_count, GWSIM_GPU_STATE_MAX_DEVICES));
  st->pid = getpid();
  __atomic_store_n(&st->magic, GWSIM_GPU_STATE_MAGIC, __ATOMIC_RELEASE);
  g_gpu_state = st;
  g_gpu_state_path = new std::string(path);
  atexit(RemoveGpuState);
}

// A kernel occupied [start, end) of `device`'s time. Called with Sim::mu held, so intervals
// are merged without races: only time after the newest counted end is added.
// `kernels`: 1 for a kernel's last interval, 0 for the earlier slices of a shared-device kernel.
void PublishKernel(int device, int64_t start, int64_t end, size_t used_bytes,
                   uint64_t kernels = 1) {
  if (g_gpu_state == nullptr || device < 0 ||
      device >= static_cast<int>(g_gpu_state->device_count) || end <= start) {
    return;
  }
  GwsimGpuDeviceState& d = g_gpu_state->dev[device];
  uint64_t s = static_cast<uint64_t>(start);
  uint64_t e = static_cast<uint64_t>(end);
  uint64_t covered = __atomic_load_n(&d.covered_until_ns, __ATOMIC_RELAXED);
  if (e > covered) {
    uint64_t add = e - std::max(s, covered);
    __atomic_store_n(&d.busy_ns, __atomic_load_n(&d.busy_ns, __ATOMIC_RELAXED) + add,
                     __ATOMIC_RELEASE);
    __atomic_store_n(&d.covered_until_ns, e, __ATOMIC_RELAXED);
  }
  __atomic_store_n(&d.used_bytes, static_cast<uint64_t>(used_bytes), __ATOMIC_RELAXED);
  __atomic_store_n(&d.kernels, __atomic_load_n(&d.kernels, __ATOMIC_RELAXED) + kernels,
                   __ATOMIC_RELAXED);
}

// --- GWSIM_SHARED_DEVICE=1: one simulated GPU per device index, shared by every process ---
//
// Without it each process has a device of its own. With it, kernels of different processes
// never overlap on a device index, as on a real GPU without MPS (contexts are time-sliced):
// a kernel runs in time slices of at most GWSIM_SHARED_DEVICE_SLICE_US (0: whole kernels), and
// each slice reserves the device's next free interval in <dir>/gwsim-device<N>.lock (<dir> =
// GWSIM_GPU_STATE_DIR), then runs then. The file holds one SharedDeviceRecord, updated under
// flock(LOCK_EX) for the few instructions of a reservation only: the device clock stays exact
// (2 processes × K kernels of D take 2·K·D), turns alternate between processes (an executor
// reserves its next slice only when its previous one has ended, after any slice another
// process reserved meanwhile), and a process killed at any point leaves nothing held. Kernels
// of one process on concurrent streams still overlap each other, as in one context. Only the
// reserved slices are published as busy time: waiting for another process is not.
struct SharedDeviceRecord {
  uint64_t magic;
  uint64_t until_ns;         // end of the latest reservation (CLOCK_MONOTONIC ns)
  int64_t owner_pid;         // the process that made it
  uint64_t others_until_ns;  // end of the latest reservation by a process other than owner
};
constexpr uint64_t kSharedDeviceMagic = 0x3156454444575347ull;  // "GSWDDEV1"
// A reservation further ahead than this is not from a live process (a file from before a
// reboot on a persistent GWSIM_GPU_STATE_DIR, or garbage): the record is reset.
constexpr int64_t kSharedDeviceMaxAheadNs = 3600LL * 1'000'000'000;

struct SharedDevice {
  int fd = -1;  // -1: not opened yet; -2: failed, run unshared
  SharedDeviceRecord* rec = nullptr;
};

std::mutex g_shared_mu;  // threads of this process (flock does not exclude them: one fd)
std::vector<SharedDevice>* g_shared = nullptr;

SharedDevice* OpenSharedDevice(int device) {
  if (g_shared == nullptr) g_shared = new std::vector<SharedDevice>();  // leaked, like Sim
  if (g_shared->size() <= static_cast<size_t>(device)) {
    g_shared->resize(static_cast<size_t>(device) + 1);
  }
  SharedDevice& sd = (*g_shared)[static_cast<size_t>(device)];
  if (sd.fd != -1) return sd.fd >= 0 ? &sd : nullptr;
  sd.fd = -2;
  std::string path = StateDir() + "/gwsim-device" + std::to_string(device) + ".lock";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  struct stat st {};
  if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
    close(fd);
    fd = -1;
  }
  if (fd >= 0 && st.st_uid == geteuid()) fchmod(fd, 0666);  // processes of other users share it
  void* p = MAP_FAILED;
  if (fd >= 0 && flock(fd, LOCK_EX) == 0) {
    if (st.st_size >= static_cast<off_t>(sizeof(SharedDeviceRecord)) ||
        ftruncate(fd, sizeof(SharedDeviceRecord)) == 0) {  // zero-filled: a valid idle record
      p = mmap(nullptr, sizeof(SharedDeviceRecord), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    }
    flock(fd, LOCK_UN);
  }
  if (p == MAP_FAILED) {
    fprintf(stderr, "gwsim: GWSIM_SHARED_DEVICE: cannot use %s (%s); device %d is not shared\n",
            path.c_str(), strerror(errno), device);
    if (fd >= 0) close(fd);
    return nullptr;
  }
  sd.fd = fd;
  sd.rec = static_cast<SharedDeviceRecord*>(p);
  return &sd;
}

// A kernel of `duration` ns that could start at `start` on `device`: returns when it does start,
// after every other process's reserved kernel, and reserves [that, that + duration).
int64_t ReserveSharedDevice(int device, int64_t start, uint64_t duration) {
  std::lock_guard<std::mutex> guard(g_shared_mu);
  SharedDevice* sd = OpenSharedDevice(device);
  if (sd == nullptr) return start;
  while (flock(sd->fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  SharedDeviceRecord* r = sd->rec;
  int64_t now = NowNs();
  if (r->magic != kSharedDeviceMagic ||
      static_cast<int64_t>(r->until_ns) > now + kSharedDeviceMaxAheadNs ||
      static_cast<int64_t>(r->others_until_ns) > now + kSharedDeviceMaxAheadNs) {
    *r = SharedDeviceRecord{kSharedDeviceMagic, 0, 0, 0};
  }
  int64_t pid = getpid();
  int64_t end;
  if (r->owner_pid == pid) {  // overlaps only this process's own kernels
    start = std::max(start, static_cast<int64_t>(r->others_until_ns));
    end = start + static_cast<int64_t>(duration);
    r->until_ns = std::max<uint64_t>(r->until_ns, static_cast<uint64_t>(end));
  } else {
    start = std::max(start, static_cast<int64_t>(r->until_ns));
    end = start + static_cast<int64_t>(duration);
    r->others_until_ns = r->until_ns;
    r->owner_pid = pid;
    r->until_ns = static_cast<uint64_t>(end);
  }
  flock(sd->fd, LOCK_UN);
  return start;
}

constexpr size_t kStagingChunkBytes = 2u << 20;

uint64_t EnvU64(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  unsigned long long parsed = strtoull(v, &end, 10);
  if (end == v) return fallback;
  return parsed;
}

double EnvDouble(const char* name, double fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  double parsed = strtod(v, &end);
  if (end == v || parsed < 0) return fallback;
  return parsed;
}

// Per-thread staging buffer for pageable copies: mapped and populated once, like the driver's
// pinned staging pool, so staging itself causes no page faults.
struct StagingBuffer {
  void* data = nullptr;
  StagingBuffer() {
    void* p = mmap(nullptr, kStagingChunkBytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    data = p == MAP_FAILED ? nullptr : p;
  }
  ~StagingBuffer() {
    if (data != nullptr) munmap(data, kStagingChunkBytes);
  }
  StagingBuffer(const StagingBuffer&) = delete;
  StagingBuffer& operator=(const StagingBuffer&) = delete;
};

void ExecuteMemset(const WorkItem& item) {
  if (item.memset_elem_size == 1) {
    memset(item.memset_dst, static_cast<int>(item.memset_value & 0xff), item.memset_count);
    return;
  }
  auto* words = static_cast<uint32_t*>(item.memset_dst);
  for (size_t i = 0; i < item.memset_count; ++i) words[i] = item.memset_value;
}

// The executor of one stream: runs its queue in order until the stream is destroyed.
//
// It keeps a simulated device clock: an item starts at max(end of the previous item, its
// enqueue time) and a kernel ends exactly `duration` later. The thread sleeps until that end;
// when it wakes late (a loaded host), the next items start from the simulated end, not from the
// late wake-up, so back-to-back work keeps its exact total duration and events record device
// time.
void StreamLoop(CUstream_st* s) {
  pthread_setname_np(pthread_self(), "gwsim-stream");
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);  // kernel durations need µs precision
  // A real GPU is not slowed by the job's CPU limit: GWSIM_EXECUTOR_TASKS_FILE (a cgroup v1
  // `tasks` file, e.g. the cpu hierarchy's root) moves this executor thread out of the job's
  // cgroup, so that a CPU quota throttles the job's threads and not the simulated device.
  if (const char* tasks = std::getenv("GWSIM_EXECUTOR_TASKS_FILE"); tasks && *tasks) {
    if (FILE* f = std::fopen(tasks, "w")) {
      std::fprintf(f, "%ld\n", static_cast<long>(syscall(SYS_gettid)));
      std::fclose(f);
    }
  }
  // A real GPU finishes work and raises its interrupt whatever the host's CPUs are doing; this
  // thread needs a CPU to publish the end and wake the waiters. GWSIM_EXECUTOR_RT=1 runs it
  // SCHED_FIFO (it sleeps between items), so that a crowded host delays the job's threads but
  // not the simulated device's completions (needs CAP_SYS_NICE; silently normal without).
  if (const char* rt = std::getenv("GWSIM_EXECUTOR_RT"); rt && std::strcmp(rt, "1") == 0) {
    sched_param p{};
    p.sched_priority = 1;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &p);
  }
  Sim& sim = Sim::Get();
  int64_t cursor_ns = 0;  // simulated end of the previous item on this stream
  std::unique_lock<std::mutex> lock(sim.mu);
  for (;;) {
    s->cv.wait(lock, [s] { return !s->queue.empty() || s->destroying; });
    if (s->queue.empty()) {
      CUctx_st* ctx = s->ctx;
      ctx->streams.erase(std::remove(ctx->streams.begin(), ctx->streams.end(), s),
                         ctx->streams.end());
      sim.handles.erase(s);
      s->dead = true;  // the struct is kept: waiters may still hold it
      sim.progress.notify_all();
      return;
    }
    WorkItem item = s->queue.front();
    int64_t start = std::max(cursor_ns, item.enqueue_ns);
    switch (item.kind) {
      case WorkKind::kWaitEvent:
        if (item.event->completed < item.generation) {
          sim.progress.wait(lock, [&item] { return item.event->completed >= item.generation; });
        }
        cursor_ns = std::max(cursor_ns, item.event->timestamp_ns);
        break;
      case WorkKind::kWaitStream:
        if (item.other->completed < item.count) {
          sim.WaitTicket(lock, item.other, item.count);
          cursor_ns = std::max(cursor_ns, NowNs());
        }
        break;
      case WorkKind::kEventRecord:
        item.event->completed = std::max(item.event->completed, item.generation);
        item.event->timestamp_ns = start;
        cursor_ns = start;
        break;
      case WorkKind::kFree: {
        auto it = sim.allocations.find(item.free_base);
        if (it != sim.allocations.end()) {
          sim.devices[it->second.device].used_bytes -= it->second.size;
          munmap(reinterpret_cast<void*>(it->second.base), it->second.mapped_size);
          sim.allocations.erase(it);
        }
        break;
      }
      case WorkKind::kKernel:
        lock.unlock();
        if (sim.config.shared_device && item.duration_ns > 0) {
          // Slice by slice, each after other processes' reserved slices: the waits are not
          // busy time (only the reserved slices are published).
          uint64_t left = item.duration_ns;
          uint64_t quantum = sim.config.shared_slice_ns > 0 ? sim.config.shared_slice_ns : left;
          cursor_ns = start;
          while (left > 0) {
            uint64_t slice = std::min(left, quantum);
            int64_t s0 = ReserveSharedDevice(s->ctx->device, cursor_ns, slice);
            cursor_ns = s0 + static_cast<int64_t>(slice);
            left -= slice;
            SleepUntilNs(cursor_ns);
            lock.lock();
            PublishKernel(s->ctx->device, s0, cursor_ns,
                          sim.devices[static_cast<size_t>(s->ctx->device)].used_bytes,
                          left == 0 ? 1 : 0);
            if (left > 0) lock.unlock();
          }
          break;
        }
        cursor_ns = start + static_cast<int64_t>(item.duration_ns);
        SleepUntilNs(cursor_ns);
        lock.lock();
        PublishKernel(s->ctx->device, start, cursor_ns,
                      sim.devices[static_cast<size_t>(s->ctx->device)].used_bytes);
        break;
      case WorkKind::kCopy: {
        double rate = sim.config.pcie_bytes_per_ns;
        lock.unlock();
        int64_t t0 = NowNs();
        DirectCopy(item.copy);
        int64_t busy = NowNs() - t0;
        if (item.over_pcie && rate > 0) {
          busy =
              std::max(busy, static_cast<int64_t>(static_cast<double>(item.copy.Bytes()) / rate));
        }
        cursor_ns = start + busy;
        SleepUntilNs(cursor_ns);
        lock.lock();
        break;
      }
      case WorkKind::kMemset: {
        lock.unlock();
        int64_t t0 = NowNs();
        ExecuteMemset(item);
        cursor_ns = start + (NowNs() - t0);
        lock.lock();
        break;
      }
      case WorkKind::kHostFunc: {
        lock.unlock();
        SleepUntilNs(start);
        int64_t t0 = NowNs();
        item.host_fn(item.user_data);
        cursor_ns = start + (NowNs() - t0);
        lock.lock();
        break;
      }
    }
    s->queue.pop_front();
    ++s->completed;
    if (s->completed >= s->wake_at || item.kind == WorkKind::kEventRecord) {
      s->wake_at = UINT64_MAX;
      sim.progress.notify_all();
    }
  }
}

}  // namespace

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

void SleepUntilNs(int64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = deadline_ns / 1'000'000'000;
  ts.tv_nsec = deadline_ns % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void DirectCopy(const CopyDesc& copy) {
  auto* dst = static_cast<char*>(copy.dst);
  auto* src = static_cast<const char*>(copy.src);
  if (copy.height == 1) {
    memmove(dst, src, copy.width);
    return;
  }
  for (size_t row = 0; row < copy.height; ++row) {
    memmove(dst + row * copy.dst_pitch, src + row * copy.src_pitch, copy.width);
  }
}

void StagedCopy(const CopyDesc& copy, bool over_pcie, double bytes_per_ns) {
  thread_local StagingBuffer staging;
  int64_t start = NowNs();
  auto* dst = static_cast<char*>(copy.dst);
  auto* src = static_cast<const char*>(copy.src);
  for (size_t row = 0; row < copy.height; ++row) {
    char* drow = dst + row * copy.dst_pitch;
    const char* srow = src + row * copy.src_pitch;
    for (size_t off = 0; off < copy.width; off += kStagingChunkBytes) {
      size_t n = std::min(kStagingChunkBytes, copy.width - off);
      if (staging.data == nullptr) {
        memmove(drow + off, srow + off, n);
        continue;
      }
      memcpy(staging.data, srow + off, n);  // pageable → pinned staging (host CPU)
      memcpy(drow + off, staging.data, n);  // staging → destination ("DMA")
    }
  }
  if (over_pcie && bytes_per_ns > 0) {
    SleepUntilNs(start + static_cast<int64_t>(static_cast<double>(copy.Bytes()) / bytes_per_ns));
  }
}

CUctx_st*& CurrentContext() {
  thread_local CUctx_st* current = nullptr;
  return current;
}

Sim::Sim() {
  config.device_mem_bytes = EnvU64("GWSIM_DEVICE_MEM_MB", 16384) << 20;
  config.device_count =
      static_cast<int>(std::clamp<uint64_t>(EnvU64("GWSIM_DEVICE_COUNT", 1), 0, 64));
  config.pcie_bytes_per_ns = EnvDouble("GWSIM_PCIE_GBPS", 25.0);
  config.pageable_bytes_per_ns = EnvDouble("GWSIM_PAGEABLE_GBPS", 10.0);
  config.max_kernel_ns = EnvU64("GWSIM_MAX_KERNEL_NS", 10'000'000'000ull);
  config.populate_max_bytes = EnvU64("GWSIM_POPULATE_MAX_MB", 256) << 20;
  config.shared_device = EnvU64("GWSIM_SHARED_DEVICE", 0) != 0;
  config.shared_slice_ns = EnvU64("GWSIM_SHARED_DEVICE_SLICE_US", 2000) * 1000;
  devices.resize(static_cast<size_t>(config.device_count));
  CreateGpuState(config.device_count);
}

Sim& Sim::Get() {
  static Sim* sim = new Sim();  // intentionally leaked, see class comment
  return *sim;
}

bool Sim::IsHandle(const void* p, HandleKind kind) const {
  auto it = handles.find(p);
  return it != handles.end() && it->second == kind;
}

CUctx_st* Sim::NewContext(int device, bool primary) {
  auto* ctx = new CUctx_st();
  ctx->device = device;
  ctx->primary = primary;
  handles[ctx] = HandleKind::kContext;
  ctx->legacy = NewStream(ctx, CU_STREAM_DEFAULT, /*legacy=*/true);
  return ctx;
}

CUstream_st* Sim::NewStream(CUctx_st* ctx, unsigned flags, bool legacy) {
  auto* s = new CUstream_st();
  s->ctx = ctx;
  s->flags = flags;
  s->legacy = legacy;
  ctx->streams.push_back(s);
  if (!legacy) handles[s] = HandleKind::kStream;
  std::thread(StreamLoop, s).detach();
  return s;
}

CUstream_st* Sim::ResolveStream(CUstream handle, CUctx_st* ctx) {
  if (ctx == nullptr) return nullptr;
  if (handle == nullptr || handle == CU_STREAM_LEGACY) return ctx->legacy;
  if (handle == CU_STREAM_PER_THREAD) {
    thread_local std::vector<std::pair<CUctx_st*, CUstream_st*>> per_thread;
    for (auto& [c, s] : per_thread) {
      if (c == ctx && !s->dead) return s;
    }
    CUstream_st* s = NewStream(ctx, CU_STREAM_DEFAULT, /*legacy=*/false);
    handles.erase(s);  // not a user-visible handle
    per_thread.emplace_back(ctx, s);
    return s;
  }
  if (!IsHandle(handle, HandleKind::kStream) || handle->destroying) return nullptr;
  return handle;
}

uint64_t Sim::Enqueue(CUstream_st* s, const WorkItem& item) {
  if (s->capture != nullptr) {
    s->capture->items.push_back(item);
    return 0;
  }
  int64_t now = NowNs();
  auto push = [s, now](const WorkItem& w) {
    s->queue.push_back(w);
    s->queue.back().enqueue_ns = now;
    ++s->enqueued;
  };
  // Legacy default stream semantics: it waits for all blocking streams, and they wait for it.
  if (s->legacy) {
    for (CUstream_st* other : s->ctx->streams) {
      if (other == s || (other->flags & CU_STREAM_NON_BLOCKING) != 0) continue;
      if (other->completed < other->enqueued) {
        WorkItem wait;
        wait.kind = WorkKind::kWaitStream;
        wait.other = other;
        wait.count = other->enqueued;
        push(wait);
      }
    }
  } else if ((s->flags & CU_STREAM_NON_BLOCKING) == 0) {
    CUstream_st* legacy = s->ctx->legacy;
    if (legacy->completed < legacy->enqueued) {
      WorkItem wait;
      wait.kind = WorkKind::kWaitStream;
      wait.other = legacy;
      wait.count = legacy->enqueued;
      push(wait);
    }
  }
  push(item);
  s->cv.notify_one();
  return s->enqueued;
}

void Sim::WaitTicket(std::unique_lock<std::mutex>& lock, CUstream_st* s, uint64_t ticket) {
  while (s->completed < ticket && !s->dead) {
    s->wake_at = std::min(s->wake_at, ticket);
    progress.wait(lock);
  }
}

void Sim::DrainStream(std::unique_lock<std::mutex>& lock, CUstream_st* s) {
  WaitTicket(lock, s, s->enqueued);
}

void Sim::DrainContext(std::unique_lock<std::mutex>& lock, CUctx_st* ctx) {
  std::vector<std::pair<CUstream_st*, uint64_t>> tickets;
  for (CUstream_st* s : ctx->streams) tickets.emplace_back(s, s->enqueued);
  for (auto& [s, ticket] : tickets) WaitTicket(lock, s, ticket);
}

Allocation* Sim::Find(const void* p, size_t len) {
  auto addr = reinterpret_cast<uintptr_t>(p);
  auto it = allocations.upper_bound(addr);
  if (it == allocations.begin()) return nullptr;
  --it;
  Allocation& a = it->second;
  if (addr < a.base || addr - a.base > a.size) return nullptr;
  if (len > a.size - (addr - a.base)) return nullptr;
  return &a;
}

}  // namespace gwsim
