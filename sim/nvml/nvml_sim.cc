// The simulated NVML: libnvidia-ml.so.1 with the entry points gpuwhy calls, backed by the
// simulated device's real busy time (gwsim/gpu_state.h), so SM activity falls when the host
// starves the GPU. See sim/README.md, "Simulated NVML", for the model.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "gwsim/gpu_state.h"
#include "gwsim/nvml.h"

#define GWSIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

unsigned long long WallUs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL +
         static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
}

double EnvDouble(const char* name, double fallback) {
  const char* v = getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  double d = strtod(v, &end);
  return end == v || d < 0 ? fallback : d;
}

struct Snapshot {
  int64_t t = 0;
  std::vector<uint64_t> busy;  // per device, monotonic
};

struct ProcPeriod {
  int64_t start = 0, end = 0;  // CLOCK_MONOTONIC ns
  unsigned long long end_wall_us = 0;
  std::map<int32_t, uint64_t> start_busy, end_busy;
};

struct DeviceHandle {
  int index = 0;
};

struct GpmSample {
  int device = -1;
  int64_t t = 0;
  uint64_t busy = 0;
};

// Everything the library knows, refreshed from the state files on every call.
struct State {
  std::mutex mu;
  int init_refs = 0;
  int device_count = 1;
  bool gpm = true;
  double sm_share = 0.85;         // SM active = busy × this (kernels do not fill every SM)
  double occupancy_share = 0.25;  // occupancy = SM active × this
  std::string dir = "/dev/shm";
  std::vector<DeviceHandle> handles;
  std::vector<uint64_t> total_busy;                 // per device: sum of every process's delta
  std::vector<uint64_t> used_bytes;                 // per device: live processes' allocations
  std::map<std::pair<int32_t, int>, uint64_t> last;  // (pid, device) → busy_ns last read
  std::map<std::pair<int32_t, int>, uint64_t> pid_busy;  // accumulated since first seen
  std::deque<Snapshot> history;
  std::vector<ProcPeriod> periods;  // per device
};

State& S() {
  static State* s = new State();
  return *s;
}

bool Alive(int32_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Reads every live process's state file; accumulates busy deltas. Requires S().mu.
void Refresh(State& s) {
  std::fill(s.used_bytes.begin(), s.used_bytes.end(), 0);
  std::map<std::pair<int32_t, int>, uint64_t> seen;
  if (DIR* d = opendir(s.dir.c_str())) {
    const size_t prefix = strlen(GWSIM_GPU_STATE_PREFIX);
    while (dirent* e = readdir(d)) {
      if (strncmp(e->d_name, GWSIM_GPU_STATE_PREFIX, prefix) != 0) continue;
      char* end = nullptr;
      long pid = strtol(e->d_name + prefix, &end, 10);
      if (end == e->d_name + prefix || *end != '\0' || pid <= 0 || !Alive(static_cast<int32_t>(pid))) {
        continue;
      }
      int fd = openat(dirfd(d), e->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) continue;
      GwsimGpuState st;
      struct stat sb;
      bool ok = fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) &&
                sb.st_size >= static_cast<off_t>(sizeof(st)) &&
                pread(fd, &st, sizeof(st), 0) == static_cast<ssize_t>(sizeof(st));
      close(fd);
      if (!ok || st.magic != GWSIM_GPU_STATE_MAGIC || st.version != GWSIM_GPU_STATE_VERSION ||
          st.pid != pid) {
        continue;
      }
      int n = std::min<int>(static_cast<int>(std::min<uint32_t>(st.device_count,
                                                                 GWSIM_GPU_STATE_MAX_DEVICES)),
                            s.device_count);
      for (int i = 0; i < n; ++i) {
        auto key = std::make_pair(static_cast<int32_t>(pid), i);
        uint64_t busy = st.dev[i].busy_ns;
        auto it = s.last.find(key);
        if (it != s.last.end() && busy >= it->second) {
          uint64_t delta = busy - it->second;
          s.total_busy[i] += delta;
          s.pid_busy[key] += delta;
        } else {
          s.pid_busy.emplace(key, 0);  // first seen: its earlier time is not in any window
        }
        seen[key] = busy;
        s.used_bytes[i] += st.dev[i].used_bytes;
      }
    }
    closedir(d);
  }
  s.last.swap(seen);
  for (auto it = s.pid_busy.begin(); it != s.pid_busy.end();) {
    it = s.last.count(it->first) ? std::next(it) : s.pid_busy.erase(it);
  }
  int64_t now = MonoNs();
  if (s.history.empty() || now - s.history.back().t >= 10'000'000) {
    s.history.push_back({now, s.total_busy});
    while (s.history.size() > 2 && now - s.history[1].t > 2'000'000'000) s.history.pop_front();
  }
}

// Busy share of `device` over about the last `window_ns` (0–100).
double BusyPct(State& s, int device, int64_t window_ns) {
  int64_t now = MonoNs();
  const Snapshot* from = &s.history.front();
  for (const Snapshot& x : s.history) {
    if (now - x.t >= window_ns) from = &x; else break;
  }
  int64_t dt = now - from->t;
  if (dt <= 0) return 0;
  double pct = 100.0 * static_cast<double>(s.total_busy[device] - from->busy[device]) /
               static_cast<double>(dt);
  return std::clamp(pct, 0.0, 100.0);
}

DeviceHandle* Handle(nvmlDevice_t device) {
  State& s = S();
  for (DeviceHandle& h : s.handles) {
    if (reinterpret_cast<nvmlDevice_t>(&h) == device) return &h;
  }
  return nullptr;
}

}  // namespace

GWSIM_EXPORT nvmlReturn_t nvmlInit_v2(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_refs++ > 0) return NVML_SUCCESS;
  s.device_count = std::clamp(static_cast<int>(EnvDouble("GWSIM_DEVICE_COUNT", 1)), 1,
                              GWSIM_GPU_STATE_MAX_DEVICES);
  s.gpm = EnvDouble("GWSIM_NVML_GPM", 1) != 0;
  s.sm_share = std::min(1.0, EnvDouble("GWSIM_NVML_SM_SHARE", 0.85));
  s.occupancy_share = std::min(1.0, EnvDouble("GWSIM_NVML_OCCUPANCY_SHARE", 0.25));
  if (const char* d = getenv("GWSIM_GPU_STATE_DIR"); d != nullptr && *d != '\0') s.dir = d;
  s.handles.assign(static_cast<size_t>(s.device_count), {});
  for (int i = 0; i < s.device_count; ++i) s.handles[static_cast<size_t>(i)].index = i;
  s.total_busy.assign(static_cast<size_t>(s.device_count), 0);
  s.used_bytes.assign(static_cast<size_t>(s.device_count), 0);
  s.periods.assign(static_cast<size_t>(s.device_count), {});
  s.history.clear();
  s.last.clear();
  s.pid_busy.clear();
  Refresh(s);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_refs == 0) return NVML_ERROR_UNINITIALIZED;
  --s.init_refs;
  return NVML_SUCCESS;
}

GWSIM_EXPORT const char* nvmlErrorString(nvmlReturn_t rc) {
  switch (rc) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    default: return "Unknown Error";
  }
}

#define GWSIM_NVML_DEVICE(device)                                        \
  State& s = S();                                                        \
  std::lock_guard<std::mutex> lock(s.mu);                                \
  if (s.init_refs == 0) return NVML_ERROR_UNINITIALIZED;                 \
  DeviceHandle* h = Handle(device);                                      \
  if (h == nullptr) return NVML_ERROR_INVALID_ARGUMENT;

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned int>(s.device_count);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (device == nullptr || index >= s.handles.size()) return NVML_ERROR_INVALID_ARGUMENT;
  *device = reinterpret_cast<nvmlDevice_t>(&s.handles[index]);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  GWSIM_NVML_DEVICE(device);
  const char* text = "gwsim simulated GPU";
  if (name == nullptr || length < strlen(text) + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
  memcpy(name, text, strlen(text) + 1);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                       nvmlUtilization_t* util) {
  GWSIM_NVML_DEVICE(device);
  if (util == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  double pct = BusyPct(s, h->index, 166'000'000);  // the real sample period: 1/6 s
  util->gpu = static_cast<unsigned int>(pct + 0.5);
  util->memory = static_cast<unsigned int>(pct * 0.4 + 0.5);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type,
                                                unsigned int* clock) {
  GWSIM_NVML_DEVICE(device);
  if (clock == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *clock = type == NVML_CLOCK_MEM ? 2619 : 1980;
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  GWSIM_NVML_DEVICE(device);
  if (power == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  *power = static_cast<unsigned int>(100000 + 6000 * BusyPct(s, h->index, 166'000'000));
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                                   unsigned long long* reasons) {
  GWSIM_NVML_DEVICE(device);
  if (reasons == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  *reasons = BusyPct(s, h->index, 166'000'000) < 1 ? 0x1ULL : 0;  // GpuIdle
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  GWSIM_NVML_DEVICE(device);
  if (memory == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  memory->total = static_cast<unsigned long long>(EnvDouble("GWSIM_DEVICE_MEM_MB", 16384)) << 20;
  memory->used = std::min<unsigned long long>(s.used_bytes[static_cast<size_t>(h->index)],
                                              memory->total);
  memory->free = memory->total - memory->used;
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization, unsigned int* count,
    unsigned long long last_seen) {
  GWSIM_NVML_DEVICE(device);
  if (count == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  // Periods of at least 100 ms; the newest complete one is what a caller gets.
  ProcPeriod& p = s.periods[static_cast<size_t>(h->index)];
  int64_t now = MonoNs();
  if (p.end == 0 || now - p.end >= 100'000'000) {
    p.start = p.end == 0 ? now : p.end;
    p.start_busy.swap(p.end_busy);
    p.end_busy.clear();
    for (const auto& [key, busy] : s.pid_busy) {
      if (key.second == h->index) p.end_busy[key.first] = busy;
    }
    p.end = now;
    p.end_wall_us = WallUs();
  }
  std::vector<nvmlProcessUtilizationSample_t> out;
  if (p.end > p.start && p.end_wall_us > last_seen) {
    double dt = static_cast<double>(p.end - p.start);
    for (const auto& [pid, busy] : p.end_busy) {
      auto it = p.start_busy.find(pid);
      if (it == p.start_busy.end()) continue;  // new in this period
      nvmlProcessUtilizationSample_t x{};
      x.pid = static_cast<unsigned int>(pid);
      x.timeStamp = p.end_wall_us;
      double pct = std::clamp(100.0 * static_cast<double>(busy - it->second) / dt, 0.0, 100.0);
      x.smUtil = static_cast<unsigned int>(pct + 0.5);
      x.memUtil = static_cast<unsigned int>(pct * 0.4 + 0.5);
      out.push_back(x);
    }
  }
  if (out.empty()) {
    *count = 0;
    return NVML_ERROR_NOT_FOUND;
  }
  if (utilization == nullptr || *count < out.size()) {
    *count = static_cast<unsigned int>(out.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  std::copy(out.begin(), out.end(), utilization);
  *count = static_cast<unsigned int>(out.size());
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device,
                                                   nvmlGpmSupport_t* support) {
  GWSIM_NVML_DEVICE(device);
  if (support == nullptr || support->version != NVML_GPM_SUPPORT_VERSION) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  support->isSupportedDevice = s.gpm ? 1 : 0;
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  *sample = reinterpret_cast<nvmlGpmSample_t>(new GpmSample());
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  delete reinterpret_cast<GpmSample*>(sample);
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  GWSIM_NVML_DEVICE(device);
  if (!s.gpm) return NVML_ERROR_NOT_SUPPORTED;
  if (sample == nullptr) return NVML_ERROR_INVALID_ARGUMENT;
  Refresh(s);
  auto* g = reinterpret_cast<GpmSample*>(sample);
  g->device = h->index;
  g->t = MonoNs();
  g->busy = s.total_busy[static_cast<size_t>(h->index)];
  return NVML_SUCCESS;
}

GWSIM_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* get) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.init_refs == 0) return NVML_ERROR_UNINITIALIZED;
  if (get == nullptr || get->version != NVML_GPM_METRICS_GET_VERSION || get->sample1 == nullptr ||
      get->sample2 == nullptr) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  auto* a = reinterpret_cast<GpmSample*>(get->sample1);
  auto* b = reinterpret_cast<GpmSample*>(get->sample2);
  if (a->device < 0 || a->device != b->device || b->t <= a->t || b->busy < a->busy) {
    return NVML_ERROR_INVALID_ARGUMENT;
  }
  double busy = std::clamp(100.0 * static_cast<double>(b->busy - a->busy) /
                               static_cast<double>(b->t - a->t),
                           0.0, 100.0);
  double sm = busy * s.sm_share;
  for (unsigned int i = 0; i < get->numMetrics; ++i) {
    nvmlGpmMetric_t& m = get->metrics[i];
    m.nvmlReturn = NVML_SUCCESS;
    m.metricInfo = {nullptr, nullptr, nullptr};
    switch (m.metricId) {
      case NVML_GPM_METRIC_SM_UTIL: m.value = sm; break;
      case NVML_GPM_METRIC_SM_OCCUPANCY: m.value = sm * s.occupancy_share; break;
      case NVML_GPM_METRIC_ANY_TENSOR_UTIL: m.value = sm * 0.5; break;
      case NVML_GPM_METRIC_DRAM_BW_UTIL: m.value = busy * 0.3; break;
      default: m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED; m.value = 0; break;
    }
  }
  return NVML_SUCCESS;
}
