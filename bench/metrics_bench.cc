// trace --prometheus (issue 18): the capture path's share — TraceMetrics::OnEvents per event,
// in the drain thread's batch sizes, over a mix like a training job's rows (sched_switch of a
// few threads, CUDA syncs, memcpys, sampled launches), with a reader snapshotting and rendering
// the page once a second as a scrape would. `build/bench/gw_metrics_bench [--events N]`.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "metrics/trace_metrics.h"
#include "prometheus/metrics_page.h"

int main(int argc, char** argv) {
  using namespace gw;
  int64_t total = 20'000'000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--events") == 0) total = std::atoll(argv[i + 1]);
  }
  TraceMetrics metrics;
  for (int32_t pid = 1000; pid < 1005; ++pid) {
    ProcessInfo p;
    p.pid = pid;
    p.name = "pt_data_worker:" + std::to_string(pid - 1000);
    p.tracked = true;
    metrics.OnProcess(p);
  }
  const Op ops[] = {Op::kSchedSwitch, Op::kSchedSwitch, Op::kCudaStreamSync,
                    Op::kCudaMemcpyAsync, Op::kCuLaunchKernel, Op::kCuStreamSync};
  std::vector<Event> batch(512);
  for (size_t i = 0; i < batch.size(); ++i) {
    Event& e = batch[i];
    e.pid = 1000 + static_cast<int32_t>((i / 64) % 5);  // runs of one pid, as a ring drains
    e.tid = e.pid;
    e.op = ops[i % 6];
    e.duration_ns = static_cast<int64_t>(1'000 + (i * 7919) % 20'000'000);
    e.runq_ns = e.op == Op::kSchedSwitch ? e.duration_ns / 3 : kNull;
    e.ts_ns = static_cast<int64_t>(i);
  }
  auto t0 = std::chrono::steady_clock::now();
  auto next_scrape = t0;
  int scrapes = 0;
  double render_s = 0;
  size_t page_bytes = 0;
  for (int64_t done = 0; done < total; done += static_cast<int64_t>(batch.size())) {
    metrics.OnEvents(batch.data(), batch.size());
    auto now = std::chrono::steady_clock::now();
    if (now >= next_scrape) {
      next_scrape = now + std::chrono::seconds(1);
      std::string page = RenderMetricsPage(metrics.Snapshot(), {}, {});
      render_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - now).count();
      page_bytes = page.size();
      ++scrapes;
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() -
             render_s;
  std::printf("gw_metrics_bench: events=%lld ns_per_event=%.1f scrapes=%d render_ms=%.2f "
              "page_bytes=%zu\n",
              static_cast<long long>(total), s * 1e9 / static_cast<double>(total), scrapes,
              scrapes ? 1e3 * render_s / scrapes : 0.0, page_bytes);
  return 0;
}
