#include "sources/testing/bpf_test.h"

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

namespace gw::testing {

std::string WhyNotRoot() {
  if (geteuid() == 0) return "";
  return "BPF test needs root (CAP_BPF, CAP_PERFMON, CAP_SYS_PTRACE; running as uid " +
         std::to_string(geteuid()) + "); CI must run it as root";
}

void CollectingSink::OnEvents(const Event* events, size_t count) {
  std::lock_guard<std::mutex> lock(mu_);
  events_.insert(events_.end(), events, events + count);
}

void CollectingSink::OnProcess(const ProcessInfo& p) {
  std::lock_guard<std::mutex> lock(mu_);
  ProcessInfo& known = processes_[p.pid];
  known.pid = p.pid;
  if (!p.name.empty()) known.name = p.name;
  if (!p.comm.empty()) known.comm = p.comm;
  if (p.exit_code != kNull) known.exit_code = p.exit_code;
  known.tracked = known.tracked || p.tracked;
}

void CollectingSink::OnOpCounts(const std::vector<OpCount>& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_.insert(counts_.end(), counts.begin(), counts.end());
}

int64_t CollectingSink::InternString(std::string_view text) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = ids_.find(text); it != ids_.end()) return it->second;
  strings_.emplace_back(text);
  int64_t id = static_cast<int64_t>(strings_.size());
  ids_.emplace(std::string(text), id);
  return id;
}

std::vector<Event> CollectingSink::Events() {
  std::lock_guard<std::mutex> lock(mu_);
  return events_;
}

std::vector<Event> CollectingSink::EventsOf(Op op, int32_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Event> out;
  for (const Event& e : events_) {
    if (e.op == op && e.pid == pid) out.push_back(e);
  }
  return out;
}

std::vector<OpCount> CollectingSink::Counts() {
  std::lock_guard<std::mutex> lock(mu_);
  return counts_;
}

ProcessInfo CollectingSink::Process(int32_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  return processes_[pid];
}

std::string CollectingSink::String(int64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (id <= 0 || id > static_cast<int64_t>(strings_.size())) return "";
  return strings_[static_cast<size_t>(id - 1)];
}

int64_t MonotonicNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

SourceContext TestContext(EventSink* sink, int tracked_map_fd) {
  SourceContext context;
  context.clock.mono_start_ns = MonotonicNs();
  context.sink = sink;
  context.tracked_map_fd = tracked_map_fd;
  return context;
}

DrainThread::DrainThread(Source& source, int poll_ms)
    : source_(source), thread_([this, poll_ms] {
        while (!stop_) {
          source_.Poll();
          std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
        }
      }) {}

void DrainThread::Stop() {
  if (!thread_.joinable()) return;
  stop_ = true;
  thread_.join();
  source_.Stop();
  while (source_.Poll() > 0) {
  }
}

int DrainUntilExit(Source& source, pid_t pid, int poll_ms) {
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    source.Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(poll_ms));
  }
  source.Poll();
  source.Stop();
  source.Poll();
  return status;
}

}  // namespace gw::testing
