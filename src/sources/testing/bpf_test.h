// What the sources' BPF tests share: one root requirement (loud skip), a collecting sink, a
// session context, and a drain loop like the tracer's. Trigger → capture → assert: start a
// source with TestContext(&sink), make the target do the thing, Drain/stop, assert on the sink.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "sources/source.h"
#include "store/event.h"

namespace gw::testing {

// The message every BPF test skips with; "" as root. In CI they run as root and must not skip.
std::string WhyNotRoot();

// Skips the calling test (TEST body or SetUp) without root, saying so on stderr too.
#define GW_REQUIRE_ROOT()                                                  \
  do {                                                                     \
    std::string why_not_root = ::gw::testing::WhyNotRoot();                \
    if (!why_not_root.empty()) {                                           \
      std::fprintf(stderr, "*** SKIPPED: %s ***\n", why_not_root.c_str()); \
      GTEST_SKIP() << why_not_root;                                        \
    }                                                                      \
  } while (0)

// A fixture whose tests need root.
class BpfTest : public ::testing::Test {
 protected:
  void SetUp() override { GW_REQUIRE_ROOT(); }
};

// Keeps everything a source emits. Thread-safe: a drain thread writes while the test reads.
class CollectingSink : public EventSink {
 public:
  void OnEvents(const Event* events, size_t count) override;
  // Merges what it learns of a process (name, comm, exit code; tracked once seen tracked).
  void OnProcess(const ProcessInfo& p) override;
  void OnOpCounts(const std::vector<OpCount>& counts) override;
  // Ids 1, 2, … in order of first appearance.
  int64_t InternString(std::string_view text) override;

  std::vector<Event> Events();
  std::vector<Event> EventsOf(Op op, int32_t pid);
  std::vector<OpCount> Counts();
  ProcessInfo Process(int32_t pid);
  std::string String(int64_t id);  // "" for an unknown id

 private:
  std::mutex mu_;
  std::vector<Event> events_;
  std::map<int32_t, ProcessInfo> processes_;
  std::vector<OpCount> counts_;
  std::map<std::string, int64_t, std::less<>> ids_;
  std::vector<std::string> strings_;  // id - 1 → text
};

int64_t MonotonicNs();

// A context whose session starts now, emitting into `sink`, sharing `tracked_map_fd` (-1: the
// source makes its own tracked set, or has none).
SourceContext TestContext(EventSink* sink, int tracked_map_fd = -1);

// Polls a started source every `poll_ms` on a thread of its own, as the tracer's drain thread
// does; Stop() (or the destructor) joins it, stops the source and drains what is left.
class DrainThread {
 public:
  explicit DrainThread(Source& source, int poll_ms = 1);
  ~DrainThread() { Stop(); }
  DrainThread(const DrainThread&) = delete;
  DrainThread& operator=(const DrainThread&) = delete;
  void Stop();

 private:
  Source& source_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Polls `source` every `poll_ms` on this thread until the child `pid` exits, then stops the
// source and drains what is left. Returns the child's wait status.
int DrainUntilExit(Source& source, pid_t pid, int poll_ms);

}  // namespace gw::testing
