#include "sources/nvml/gpu_sampler.h"

#include <time.h>

#include <chrono>
#include <cstring>
#include <unordered_map>

namespace gw {

namespace {

unsigned long long WallMicros() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL +
         static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
}

struct Enumerated {
  std::vector<std::pair<nvmlDevice_t, GpuDevice>> devices;
};

StatusOr<Enumerated> Enumerate(NvmlLibrary& nvml) {
  unsigned int count = 0;
  if (nvmlReturn_t rc = nvml.device_get_count(&count); rc != NVML_SUCCESS) {
    return FailedPrecondition("NVML in " + nvml.path() + ": " +
                              nvml.Error("nvmlDeviceGetCount_v2", rc));
  }
  Enumerated out;
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t handle = nullptr;
    if (nvml.device_get_handle_by_index(i, &handle) != NVML_SUCCESS) continue;  // e.g. no permission
    GpuDevice d;
    d.gpu = static_cast<int32_t>(i);
    if (nvml.device_get_name) {
      char name[GW_NVML_DEVICE_NAME_BUFFER_SIZE] = {};
      if (nvml.device_get_name(handle, name, sizeof(name)) == NVML_SUCCESS) {
        name[sizeof(name) - 1] = '\0';
        d.name = name;
      }
    }
    if (nvml.HasGpm()) {
      nvmlGpmSupport_t support{};
      support.version = GW_NVML_GPM_SUPPORT_VERSION;
      d.gpm_supported = nvml.gpm_query_device_support(handle, &support) == NVML_SUCCESS &&
                        support.isSupportedDevice != 0;
    }
    out.devices.emplace_back(handle, d);
  }
  if (out.devices.empty()) {
    return FailedPrecondition("NVML in " + nvml.path() + " reports no usable GPU");
  }
  return out;
}

}  // namespace

NvmlProbe ProbeNvml(const std::string& library) {
  NvmlProbe probe;
  StatusOr<std::unique_ptr<NvmlLibrary>> nvml = NvmlLibrary::Load(library);
  if (!nvml.ok()) {
    probe.error = nvml.status().message();
    return probe;
  }
  probe.library = (*nvml)->path();
  probe.gpm_api = (*nvml)->HasGpm();
  StatusOr<Enumerated> e = Enumerate(**nvml);
  if (!e.ok()) {
    probe.error = e.status().message();
    return probe;
  }
  probe.present = true;
  for (auto& [handle, d] : e->devices) probe.devices.push_back(d);
  return probe;
}

StatusOr<std::unique_ptr<GpuSampler>> GpuSampler::Create(const GpuSamplerOptions& options,
                                                         std::function<int64_t()> clock_ns) {
  ASSIGN_OR_RETURN(std::unique_ptr<NvmlLibrary> nvml, NvmlLibrary::Load(options.library));
  ASSIGN_OR_RETURN(Enumerated e, Enumerate(*nvml));
  std::unique_ptr<GpuSampler> s(new GpuSampler(std::move(nvml), options, std::move(clock_ns)));
  unsigned long long now_us = WallMicros();
  for (auto& [handle, info] : e.devices) {
    Device d;
    d.index = info.gpu;
    d.handle = handle;
    d.last_seen_us = now_us;  // only samples taken during the session
    if (info.gpm_supported) {
      bool ok = s->nvml_->gpm_sample_alloc(&d.gpm_prev) == NVML_SUCCESS &&
                s->nvml_->gpm_sample_alloc(&d.gpm_cur) == NVML_SUCCESS;
      if (!ok) {
        if (d.gpm_prev) s->nvml_->gpm_sample_free(d.gpm_prev);
        if (d.gpm_cur) s->nvml_->gpm_sample_free(d.gpm_cur);
        d.gpm_prev = d.gpm_cur = nullptr;
        info.gpm_supported = false;
      }
      d.gpm = info.gpm_supported;
    }
    s->dev_.push_back(d);
    s->devices_.push_back(info);
  }
  return s;
}

GpuSampler::GpuSampler(std::unique_ptr<NvmlLibrary> nvml, GpuSamplerOptions options,
                       std::function<int64_t()> clock_ns)
    : nvml_(std::move(nvml)), options_(std::move(options)), clock_ns_(std::move(clock_ns)) {}

GpuSampler::~GpuSampler() {
  Stop();
  for (Device& d : dev_) {
    if (d.gpm_prev) nvml_->gpm_sample_free(d.gpm_prev);
    if (d.gpm_cur) nvml_->gpm_sample_free(d.gpm_cur);
  }
}

void GpuSampler::SampleDevice(Device& d, int64_t ts_ns, GpuSample* out,
                              std::vector<GpuProcessSample>* processes) {
  NvmlLibrary& n = *nvml_;
  out->ts_ns = ts_ns;
  out->gpu = d.index;
  if (n.device_get_utilization_rates) {
    nvmlUtilization_t u{};
    if (n.device_get_utilization_rates(d.handle, &u) == NVML_SUCCESS) {
      out->util_pct = u.gpu;
      out->mem_util_pct = u.memory;
    }
  }
  if (n.device_get_clock_info) {
    unsigned int mhz = 0;
    if (n.device_get_clock_info(d.handle, NVML_CLOCK_SM, &mhz) == NVML_SUCCESS) {
      out->sm_clock_mhz = mhz;
    }
  }
  if (n.device_get_power_usage) {
    unsigned int mw = 0;
    if (n.device_get_power_usage(d.handle, &mw) == NVML_SUCCESS) out->power_mw = mw;
  }
  if (n.device_get_throttle_reasons) {
    unsigned long long reasons = 0;
    if (n.device_get_throttle_reasons(d.handle, &reasons) == NVML_SUCCESS) {
      out->throttle_reasons = static_cast<int64_t>(reasons);
    }
  }
  if (n.device_get_memory_info) {
    nvmlMemory_t m{};
    if (n.device_get_memory_info(d.handle, &m) == NVML_SUCCESS) {
      out->mem_used_bytes = static_cast<int64_t>(m.used);
    }
  }
  if (d.gpm && n.gpm_sample_get(d.handle, d.gpm_cur) == NVML_SUCCESS) {
    if (d.have_prev) {
      // ~13 KiB: on the heap of this thread's frame would do too, but keep the stack small.
      static thread_local nvmlGpmMetricsGet_t get;
      std::memset(&get, 0, offsetof(nvmlGpmMetricsGet_t, metrics) + 4 * sizeof(nvmlGpmMetric_t));
      get.version = GW_NVML_GPM_METRICS_GET_VERSION;
      get.numMetrics = 4;
      get.sample1 = d.gpm_prev;
      get.sample2 = d.gpm_cur;
      get.metrics[0].metricId = NVML_GPM_METRIC_SM_UTIL;
      get.metrics[1].metricId = NVML_GPM_METRIC_SM_OCCUPANCY;
      get.metrics[2].metricId = NVML_GPM_METRIC_ANY_TENSOR_UTIL;
      get.metrics[3].metricId = NVML_GPM_METRIC_DRAM_BW_UTIL;
      if (n.gpm_metrics_get(&get) == NVML_SUCCESS) {
        double* dst[4] = {&out->sm_active_pct, &out->sm_occupancy_pct, &out->tensor_active_pct,
                          &out->dram_bw_pct};
        for (int i = 0; i < 4; ++i) {
          if (get.metrics[i].nvmlReturn == NVML_SUCCESS && get.metrics[i].value >= 0) {
            *dst[i] = get.metrics[i].value;
          }
        }
      }
    }
    std::swap(d.gpm_prev, d.gpm_cur);
    d.have_prev = true;
  }
  if (n.device_get_process_utilization) {
    unsigned int count = 0;
    nvmlReturn_t rc = n.device_get_process_utilization(d.handle, nullptr, &count, d.last_seen_us);
    if ((rc == NVML_ERROR_INSUFFICIENT_SIZE || rc == NVML_SUCCESS) && count > 0) {
      d.proc_buf.resize(count);
      rc = n.device_get_process_utilization(d.handle, d.proc_buf.data(), &count, d.last_seen_us);
      if (rc == NVML_SUCCESS) {
        // Several samples of one process may come back: keep each pid's newest.
        std::unordered_map<unsigned int, const nvmlProcessUtilizationSample_t*> newest;
        for (unsigned int i = 0; i < count && i < d.proc_buf.size(); ++i) {
          const auto& p = d.proc_buf[i];
          auto [it, inserted] = newest.emplace(p.pid, &p);
          if (!inserted && p.timeStamp > it->second->timeStamp) it->second = &p;
          if (p.timeStamp > d.last_seen_us) d.last_seen_us = p.timeStamp;
        }
        for (const auto& [pid, p] : newest) {
          GpuProcessSample ps;
          ps.ts_ns = ts_ns;
          ps.gpu = d.index;
          ps.pid = static_cast<int32_t>(pid);
          ps.sm_util_pct = p->smUtil;
          ps.mem_util_pct = p->memUtil;
          processes->push_back(ps);
        }
      }
    }
  }
}

void GpuSampler::SampleOnce(int64_t ts_ns, std::vector<GpuSample>* samples,
                            std::vector<GpuProcessSample>* processes) {
  for (Device& d : dev_) {
    GpuSample s;
    SampleDevice(d, ts_ns, &s, processes);
    samples->push_back(s);
  }
}

void GpuSampler::Start(Sink sink) {
  sink_ = std::move(sink);
  thread_ = std::thread([this] { Run(); });
}

void GpuSampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::Run() {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::now();
  std::vector<GpuSample> samples;
  std::vector<GpuProcessSample> processes;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    samples.clear();
    processes.clear();
    SampleOnce(clock_ns_(), &samples, &processes);
    if (sink_) sink_(samples, processes);
    ++rounds_;
    timespec cpu;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) == 0) {
      thread_cpu_ns_ = static_cast<int64_t>(cpu.tv_sec) * 1'000'000'000 + cpu.tv_nsec;
    }
    lock.lock();
    next += std::chrono::nanoseconds(options_.interval_ns);
    auto now = Clock::now();
    if (next < now) next = now;  // a late round (loaded host) does not cause a burst
    cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

}  // namespace gw
