#include "sources/system/sampler.h"

#include <unistd.h>

#include <chrono>
#include <optional>
#include <sstream>

#include "sources/system/cgroup_cpu.h"
#include "sources/system/cgroup_memory.h"
#include "sources/system/host_info.h"

namespace gw {

ProcCounters ReadProcCounters(const std::string& proc_root) {
  ProcCounters c;
  std::istringstream stat(ReadSmallFile(proc_root + "/stat"));
  std::string line;
  while (std::getline(stat, line)) {
    std::istringstream f(line);
    std::string key;
    f >> key;
    if (key == "cpu") {
      uint64_t v[10] = {};
      for (uint64_t& x : v) f >> x;
      // user nice system idle iowait irq softirq steal guest guest_nice
      uint64_t total = v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
      c.cpu_total = total;
      c.cpu_iowait = v[4];
      c.cpu_busy = total - v[3] - v[4];
    } else if (key == "ctxt") {
      f >> c.ctx_switches;
    } else if (key == "procs_running") {
      f >> c.procs_running;
    } else if (key == "procs_blocked") {
      f >> c.procs_blocked;
    }
  }
  std::istringstream vmstat(ReadSmallFile(proc_root + "/vmstat"));
  while (std::getline(vmstat, line)) {
    if (line.rfind("pgmajfault ", 0) == 0) c.major_faults = std::stoull(line.substr(11));
  }
  std::istringstream meminfo(ReadSmallFile(proc_root + "/meminfo"));
  while (std::getline(meminfo, line)) {
    std::istringstream f(line);
    std::string key;
    int64_t kb = 0;
    f >> key >> kb;
    if (key == "MemTotal:") c.mem_total = kb * 1024;
    else if (key == "MemAvailable:") c.mem_available = kb * 1024;
    else if (key == "SwapTotal:") c.swap_total = kb * 1024;
    else if (key == "SwapFree:") c.swap_free = kb * 1024;
  }
  std::istringstream load(ReadSmallFile(proc_root + "/loadavg"));
  load >> c.load1;
  return c;
}

SystemSnapshot SnapshotFromCounters(const ProcCounters& before, const ProcCounters& after,
                                    int64_t elapsed_ns, int64_t cores) {
  SystemSnapshot s;
  double total = static_cast<double>(after.cpu_total - before.cpu_total);
  if (total > 0) {
    s.cpu_pct = 100.0 * static_cast<double>(after.cpu_busy - before.cpu_busy) / total;
    s.iowait_pct = 100.0 * static_cast<double>(after.cpu_iowait - before.cpu_iowait) / total;
  }
  if (after.mem_total > 0) {
    s.mem_pct = 100.0 * static_cast<double>(after.mem_total - after.mem_available) /
                static_cast<double>(after.mem_total);
  }
  s.load1 = after.load1;
  s.cores = cores;
  s.swap_used_bytes = after.swap_total - after.swap_free;
  s.mem_available_bytes = after.mem_available;
  double secs = elapsed_ns > 0 ? static_cast<double>(elapsed_ns) / 1e9 : 1.0;
  s.major_faults_per_s =
      static_cast<int64_t>(static_cast<double>(after.major_faults - before.major_faults) / secs);
  s.ctx_switches_per_s =
      static_cast<int64_t>(static_cast<double>(after.ctx_switches - before.ctx_switches) / secs);
  s.procs_running = after.procs_running;
  s.procs_blocked = after.procs_blocked;
  return s;
}

SystemSampler::SystemSampler(Sink sink, std::function<int64_t()> clock_ns, int64_t interval_ms)
    : sink_(std::move(sink)), clock_ns_(std::move(clock_ns)), interval_ms_(interval_ms) {}

SystemSampler::~SystemSampler() { Stop(); }

void SystemSampler::SampleCgroups(std::function<std::vector<int32_t>()> pids, CgroupSink sink) {
  cgroup_pids_ = std::move(pids);
  cgroup_sink_ = std::move(sink);
}

void SystemSampler::Start() {
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void SystemSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void SystemSampler::Run() {
  int64_t cores = sysconf(_SC_NPROCESSORS_ONLN);
  ProcCounters prev = ReadProcCounters();
  std::optional<CgroupCpuReader> cgroups;
  std::optional<CgroupMemoryReader> memory;
  if (cgroup_sink_) {
    cgroups.emplace();
    memory.emplace();
  }
  auto prev_time = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [&] { return stop_; })) {
    ProcCounters now = ReadProcCounters();
    auto now_time = std::chrono::steady_clock::now();
    int64_t elapsed =
        std::chrono::duration_cast<std::chrono::nanoseconds>(now_time - prev_time).count();
    SystemSnapshot s = SnapshotFromCounters(prev, now, elapsed, cores);
    s.ts_ns = clock_ns_();
    s.wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
    prev = now;
    prev_time = now_time;
    lock.unlock();
    sink_(s);
    if (cgroups && (cgroups->available() || memory->available())) {
      std::vector<int32_t> pids = cgroup_pids_();
      std::vector<ProcessCgroup> moved;
      std::vector<CgroupCpuSample> samples = cgroups->Read(pids, s.ts_ns, &moved);
      std::vector<CgroupMemorySample> mem = memory->Read(pids, s.ts_ns);
      if (!samples.empty() || !moved.empty() || !mem.empty()) {
        cgroup_sink_(std::move(samples), std::move(moved), std::move(mem));
      }
    }
    lock.lock();
  }
}

}  // namespace gw
