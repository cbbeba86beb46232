#include "prometheus/metrics_page.h"

#include "prometheus/exposition.h"

namespace gw {

namespace {

using Type = ExpositionWriter::Type;

MetricLabels ProcessLabels(const ProcessMetrics& m) {
  switch (m.kind) {
    case SeriesKind::kProcess: {
      MetricLabels labels = {{"pid", std::to_string(m.pid)},
                             {"name", m.name.empty() ? "unknown" : m.name}};
      // In a container or pod: the same series, two more labels (never more series).
      if (!m.container.empty()) labels.push_back({"container", m.container});
      if (!m.pod_uid.empty()) labels.push_back({"pod_uid", m.pod_uid});
      if (!m.namespace_name.empty()) labels.push_back({"namespace", m.namespace_name});
      if (!m.pod.empty()) labels.push_back({"pod", m.pod});
      return labels;
    }
    case SeriesKind::kOther:
      return {{"pid", "other"}, {"name", "other"}};
    case SeriesKind::kCompetitors:
      return {{"pid", "competitors"}, {"name", "competitors"}};
  }
  return {};
}

// Folded series only once they count something; processes always (counters start at 0).
bool Shown(const ProcessMetrics& m) { return m.kind == SeriesKind::kProcess || !m.Empty(); }

bool HasCuda(const ProcessMetrics& m) {
  for (int64_t c : m.calls) {
    if (c != 0) return true;
  }
  return false;
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

void LatencyFamily(ExpositionWriter& w, const MetricsSnapshot& s, const char* name,
                   const char* help, bool (*pick)(Op)) {
  static const std::vector<double> bounds = [] {
    std::vector<double> b;
    for (int64_t ns : kLatencyBucketsNs) b.push_back(Seconds(ns));
    return b;
  }();
  w.Family(name, Type::kHistogram, help);
  for (const ProcessMetrics& m : s.processes) {
    for (size_t i = 0; i < m.latency.size(); ++i) {
      const LatencyBuckets& h = m.latency[i];
      Op op = LatencyOpAt(i);
      if (h.count == 0 || !pick(op)) continue;
      MetricLabels labels = ProcessLabels(m);
      labels.push_back({"op", std::string(OpName(op))});
      w.Histogram(name, labels, bounds, std::vector<int64_t>(h.counts.begin(), h.counts.end()),
                  Seconds(h.sum_ns));
    }
  }
}

}  // namespace

std::string RenderMetricsPage(const MetricsSnapshot& s, const AnalysisState& a,
                              const TraceState& t) {
  ExpositionWriter w;
  w.Family("gpuwhy_build_info", Type::kGauge,
           "Always 1; the gpuwhy version serving these metrics.");
  w.Sample("gpuwhy_build_info", {{"version", t.version}}, 1);
  w.Family("gpuwhy_trace_running", Type::kGauge,
           "1 while the trace captures; 0 once it stopped (the values are final).");
  w.Sample("gpuwhy_trace_running", {}, t.running ? 1 : 0);
  w.Family("gpuwhy_trace_session", Type::kGauge,
           "The session id being recorded (sessions.id in the database; 0 without recording).");
  w.Sample("gpuwhy_trace_session", {}, static_cast<double>(t.session));
  w.Family("gpuwhy_trace_start_time_seconds", Type::kGauge,
           "Unix time the trace started (its endpoint began serving).");
  w.Sample("gpuwhy_trace_start_time_seconds", {}, t.start_time_s);
  w.Family("gpuwhy_events_total", Type::kCounter,
           "Events decoded from every source, all processes.");
  w.Sample("gpuwhy_events_total", {}, static_cast<double>(s.events));
  w.Family("gpuwhy_dropped_events_total", Type::kCounter,
           "Events lost, by where they were lost (the trace summary's drop counters).");
  for (const auto& [where, n] : s.drops) {
    w.Sample("gpuwhy_dropped_events_total", {{"where", where}}, static_cast<double>(n));
  }
  w.Family(
      "gpuwhy_process_series_limit", Type::kGauge,
      "Traced processes with series of their own; further ones are folded into pid=\"other\".");
  w.Sample("gpuwhy_process_series_limit", {}, s.max_processes);
  w.Family("gpuwhy_folded_processes_total", Type::kCounter,
           "Traced processes counted in the pid=\"other\" series because the limit was reached.");
  w.Sample("gpuwhy_folded_processes_total", {}, static_cast<double>(s.folded_processes));

  w.Family("gpuwhy_context_switches_total", Type::kCounter,
           "Times the process's threads left a CPU (sched_switch rows: one per off-CPU interval).");
  for (const ProcessMetrics& m : s.processes) {
    if (Shown(m))
      w.Sample("gpuwhy_context_switches_total", ProcessLabels(m),
               static_cast<double>(m.context_switches));
  }
  w.Family("gpuwhy_off_cpu_seconds_total", Type::kCounter,
           "Seconds the process's threads spent off a CPU (run-queue wait plus blocked), summed "
           "over threads.");
  for (const ProcessMetrics& m : s.processes) {
    if (Shown(m)) w.Sample("gpuwhy_off_cpu_seconds_total", ProcessLabels(m), Seconds(m.off_cpu_ns));
  }
  w.Family(
      "gpuwhy_runqueue_seconds_total", Type::kCounter,
      "Seconds the process's threads were runnable but waiting for a CPU, summed over threads.");
  for (const ProcessMetrics& m : s.processes) {
    if (Shown(m)) w.Sample("gpuwhy_runqueue_seconds_total", ProcessLabels(m), Seconds(m.runq_ns));
  }
  w.Family("gpuwhy_cuda_calls_total", Type::kCounter,
           "CUDA runtime and driver calls by op (a driver call made inside a runtime call counts "
           "under its own op too, except launches, which count once).");
  for (const ProcessMetrics& m : s.processes) {
    for (size_t i = 0; i < m.calls.size(); ++i) {
      if (m.calls[i] == 0) continue;
      MetricLabels labels = ProcessLabels(m);
      labels.push_back({"op", std::string(OpName(CudaOpAt(i)))});
      w.Sample("gpuwhy_cuda_calls_total", labels, static_cast<double>(m.calls[i]));
    }
  }
  w.Family("gpuwhy_kernel_launches_total", Type::kCounter,
           "Kernel launches, a live estimate (every launch op, each launch once, and the kernels "
           "of CUDA Graph launches, N per launch of a graph of N captured kernels): N x the count "
           "when trace --launch-duty N counts one second in N, the count itself with N = 1. "
           "`gpuwhy explain` gives the recording's estimate with its error.");
  for (const ProcessMetrics& m : s.processes) {
    if (!HasCuda(m)) continue;
    int64_t launches = 0;
    for (size_t i = 0; i < m.calls.size(); ++i) {
      if (IsKernelRun(CudaOpAt(i))) launches += m.calls[i];
    }
    w.Sample("gpuwhy_kernel_launches_total", ProcessLabels(m), static_cast<double>(launches));
  }
  w.Family("gpuwhy_kernel_launches_counted_total", Type::kCounter,
           "Kernel launches the probes saw (not scaled): with trace --launch-duty N > 1 only "
           "the counting seconds' launches; graph launches' kernels always.");
  for (const ProcessMetrics& m : s.processes) {
    if (!HasCuda(m)) continue;
    w.Sample("gpuwhy_kernel_launches_counted_total", ProcessLabels(m),
             static_cast<double>(m.launches_counted));
  }
  // NCCL ranks (issue 35): one series each per process that made collectives or joined a
  // communicator, labelled with its rank.
  auto nccl_family = [&](const char* name, const char* help, auto value) {
    w.Family(name, Type::kCounter, help);
    for (const ProcessMetrics& m : s.processes) {
      if (m.kind != SeriesKind::kProcess || (m.nccl_rank < 0 && m.nccl_collectives == 0)) continue;
      MetricLabels labels = ProcessLabels(m);
      labels.push_back({"rank", m.nccl_rank >= 0 ? std::to_string(m.nccl_rank) : "unknown"});
      w.Sample(name, labels, value(m));
    }
  };
  nccl_family("gpuwhy_nccl_collectives_total",
              "NCCL collectives the rank enqueued (all-reduce, broadcast, reduce, all-gather, "
              "reduce-scatter).",
              [](const ProcessMetrics& m) { return static_cast<double>(m.nccl_collectives); });
  nccl_family("gpuwhy_nccl_bytes_total", "Bytes of the rank's NCCL collectives (count x datatype size).",
              [](const ProcessMetrics& m) { return static_cast<double>(m.nccl_bytes); });
  nccl_family("gpuwhy_nccl_lined_up_collectives_total",
              "The rank's collectives whose call every rank of the communicator was seen to make "
              "(in this trace, on this node).",
              [](const ProcessMetrics& m) { return static_cast<double>(m.nccl_lined_up); });
  nccl_family("gpuwhy_nccl_enqueue_lateness_seconds_total",
              "Over those collectives, how long after the earliest rank this rank made its call, "
              "summed: divided by gpuwhy_nccl_lined_up_collectives_total, the rank's mean lateness "
              "(a straggler's stands out; `gpuwhy explain` names its cause).",
              [](const ProcessMetrics& m) { return Seconds(m.nccl_lateness_ns); });
  LatencyFamily(w, s, "gpuwhy_cuda_sync_duration_seconds",
                "Time blocked in CUDA synchronize calls, by op.", IsSync);
  LatencyFamily(w, s, "gpuwhy_cuda_memcpy_duration_seconds",
                "Duration of CUDA memcpy calls, by op.", IsMemcpy);

  auto gpu_gauge = [&](const char* name, const char* help, auto value) {
    w.Family(name, Type::kGauge, help);
    for (const GpuSample& g : s.gpus) {
      double v = value(g);
      if (v >= 0) w.Sample(name, {{"gpu", std::to_string(g.gpu)}}, v);
    }
  };
  gpu_gauge(
      "gpuwhy_gpu_utilization_ratio",
      "NVML utilization (what nvidia-smi shows): share of the last sample period any kernel ran.",
      [](const GpuSample& g) {
        return g.util_pct == kNull ? -1.0 : static_cast<double>(g.util_pct) / 100;
      });
  gpu_gauge(
      "gpuwhy_gpu_sm_active_ratio",
      "GPM SM activity over the last sample interval: share of SMs busy (GPUs with GPM only).",
      [](const GpuSample& g) { return g.sm_active_pct < 0 ? -1.0 : g.sm_active_pct / 100; });
  gpu_gauge(
      "gpuwhy_gpu_sm_occupancy_ratio",
      "GPM SM occupancy: resident warps against the maximum (GPUs with GPM only).",
      [](const GpuSample& g) { return g.sm_occupancy_pct < 0 ? -1.0 : g.sm_occupancy_pct / 100; });
  gpu_gauge("gpuwhy_gpu_memory_used_bytes", "Device memory in use, all processes.",
            [](const GpuSample& g) {
              return g.mem_used_bytes == kNull ? -1.0 : static_cast<double>(g.mem_used_bytes);
            });

  w.Family("gpuwhy_analysis_runs_total", Type::kCounter,
           "Runs of the analysis (explain) over the recent window of the live database.");
  w.Sample("gpuwhy_analysis_runs_total", {}, static_cast<double>(a.runs));
  w.Family("gpuwhy_analysis_errors_total", Type::kCounter,
           "Runs of the analysis that failed (no events in the window yet, database busy).");
  w.Sample("gpuwhy_analysis_errors_total", {}, static_cast<double>(a.errors));
  w.Family(
      "gpuwhy_analysis_skipped_total", Type::kCounter,
      "Analysis rounds skipped: at the event rate, the row budget allowed a window under 2 s.");
  w.Sample("gpuwhy_analysis_skipped_total", {}, static_cast<double>(a.skipped));
  if (a.have_report) {
    w.Family("gpuwhy_analysis_duration_seconds", Type::kGauge,
             "How long the newest analysis run took.");
    w.Sample("gpuwhy_analysis_duration_seconds", {}, a.duration_s);
    w.Family(
        "gpuwhy_analysis_window_start_seconds", Type::kGauge,
        "Start of the newest analysis window, seconds since the session started (explain --from).");
    w.Sample("gpuwhy_analysis_window_start_seconds", {}, a.window_from_s);
    w.Family(
        "gpuwhy_analysis_window_end_seconds", Type::kGauge,
        "End of the newest analysis window, seconds since the session started (explain --to).");
    w.Sample("gpuwhy_analysis_window_end_seconds", {}, a.window_to_s);
  }
  w.Family("gpuwhy_finding_severity", Type::kGauge,
           "Findings of the newest analysis by rule: 3 HIGH, 2 MEDIUM, 1 LOW, 0 not reported now.");
  for (const FindingGauge& f : a.findings) {
    w.Sample("gpuwhy_finding_severity", {{"rule", f.rule}}, f.severity);
  }
  w.Family("gpuwhy_finding_lost_seconds", Type::kGauge,
           "GPU-feed seconds the rule's finding explains in the newest analysis window.");
  for (const FindingGauge& f : a.findings) {
    w.Sample("gpuwhy_finding_lost_seconds", {{"rule", f.rule}}, f.lost_s);
  }
  if (a.budget.present) {
    const GpuBudget& b = a.budget;
    w.Family("gpuwhy_gpu_time_seconds", Type::kGauge,
             "The job's GPU time in the newest analysis window (explain's budget): busy for the "
             "job, busy for other processes, idle.");
    w.Sample("gpuwhy_gpu_time_seconds", {{"state", "busy_job"}}, b.gpu_busy_job_s);
    w.Sample("gpuwhy_gpu_time_seconds", {{"state", "busy_other"}}, b.gpu_busy_other_s);
    w.Sample("gpuwhy_gpu_time_seconds", {{"state", "idle"}}, b.gpu_idle_s);
    w.Family("gpuwhy_gpu_lost_seconds", Type::kGauge,
             "GPU idle seconds of the newest analysis window by the cause that held the main "
             "thread's critical path (sync_wait: waiting on a GPU busy with other processes); "
             "the findings' lost seconds are these.");
    for (const BudgetLine& line : b.lines) {
      w.Sample("gpuwhy_gpu_lost_seconds", {{"cause", BudgetCauseKey(line.cause)}}, line.lost_s);
    }
  }
  w.Family("gpuwhy_feed_time_seconds", Type::kGauge,
           "Where the GPU-feeding threads' time went in the newest analysis window, by group and "
           "cause.");
  for (const FeedTimeGauge& f : a.feed_time) {
    w.Sample("gpuwhy_feed_time_seconds", {{"group", f.group}, {"cause", f.cause}}, f.seconds);
  }
  w.Family("gpuwhy_feed_time_ratio", Type::kGauge,
           "Share of the group's thread-seconds by cause in the newest analysis window.");
  for (const FeedTimeGauge& f : a.feed_time) {
    w.Sample("gpuwhy_feed_time_ratio", {{"group", f.group}, {"cause", f.cause}}, f.ratio);
  }
  return w.Take();
}

}  // namespace gw
