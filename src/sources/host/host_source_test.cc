// BPF tests for the host source: load the real programs, trigger with small child processes,
// capture, assert (harness: src/sources/testing). They need root; without it they skip loudly
// (CI runs them as root).
#include "sources/host/host_source.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sources/host/host_abi.h"
#include "sources/testing/bpf_test.h"

namespace gw {
namespace {

using ::gw::testing::CollectingSink;
using ::gw::testing::MonotonicNs;

// A started host source with a drain thread, like the tracer's.
class Capture {
 public:
  Status Start() {
    HostOptions options;
    options.seed_from_proc = false;
    ASSIGN_OR_RETURN(source_, HostSource::Create(options));
    RETURN_IF_ERROR(source_->Start(::gw::testing::TestContext(&sink_)));
    drain_ = std::make_unique<::gw::testing::DrainThread>(*source_);
    return Status::Ok();
  }
  // Stops the source and drains what is left.
  void Stop() { drain_.reset(); }
  HostSource& source() { return *source_; }
  CollectingSink& sink() { return sink_; }

 private:
  CollectingSink sink_;
  std::unique_ptr<HostSource> source_;
  std::unique_ptr<::gw::testing::DrainThread> drain_;  // declared last: stops first
};

// A child that waits for one byte on `go` before running `body`, then exits with its result.
template <typename Body>
pid_t ForkWaiting(int go_read_fd, Body body) {
  pid_t pid = fork();
  if (pid == 0) {
    char c;
    if (read(go_read_fd, &c, 1) != 1) _exit(100);
    _exit(body());
  }
  return pid;
}

void PinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof set, &set);
}

void BusyFor(int64_t ns) {
  int64_t end = MonotonicNs() + ns;
  while (MonotonicNs() < end) {
  }
}

int WaitExit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

TEST(HostSourceTest, ProcessDisplayNameAddsScriptForInterpreters) {
  EXPECT_EQ(ProcessDisplayName("python3", {"/usr/bin/python3", "-u", "train.py", "--x"}),
            "python3 (train.py)");
  EXPECT_EQ(ProcessDisplayName("python3", {"python3", "-m", "torch.distributed.run"}),
            "python3 (-m torch.distributed.run)");
  EXPECT_EQ(ProcessDisplayName("pt_data_worker:", {"python3", "train.py"}), "pt_data_worker:");
  EXPECT_EQ(ProcessDisplayName("gw_competitor", {"./gw_competitor", "--cpu", "0"}),
            "gw_competitor");
  EXPECT_EQ(ProcessDisplayName("kworker/0:1", {}), "kworker/0:1");
}

TEST(HostSourceTest, ForkedChildrenJoinTrackedSetAndLifecycleRowsAppear) {
  GW_REQUIRE_ROOT();
  Capture cap;
  {
    Status started = cap.Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  int go[2], back[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(back), 0);
  pid_t parent = ForkWaiting(go[0], [&] {
    pid_t child = fork();
    if (child == 0) {
      execl("/bin/sh", "sh", "-c", "sleep 0.3; exit 3", static_cast<char*>(nullptr));
      _exit(127);
    }
    if (write(back[1], &child, sizeof child) != sizeof child) return 1;
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 3 ? 0 : 2;
  });
  ASSERT_GT(parent, 0);
  ASSERT_TRUE(cap.source().Track(parent, GW_TRACKED_FILTER).ok());
  ASSERT_TRUE(cap.source().IsTracked(parent));
  ASSERT_EQ(write(go[1], "g", 1), 1);
  pid_t child = 0;
  ASSERT_EQ(read(back[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  EXPECT_TRUE(cap.source().IsTracked(child)) << "forked child joins the tracked set";
  EXPECT_EQ(WaitExit(parent), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(cap.source().IsTracked(parent)) << "exit removes the process";
  EXPECT_FALSE(cap.source().IsTracked(child));
  cap.Stop();
  EXPECT_EQ(cap.source().RecordsEmitted(), cap.source().RecordsConsumed());

  auto forks = cap.sink().EventsOf(Op::kProcFork, parent);
  ASSERT_FALSE(forks.empty());
  EXPECT_EQ(forks[0].other_pid, child);
  EXPECT_FALSE(cap.sink().EventsOf(Op::kProcExec, child).empty());
  auto child_exit = cap.sink().EventsOf(Op::kProcExit, child);
  ASSERT_EQ(child_exit.size(), 1u);
  EXPECT_EQ(child_exit[0].ret, 3);
  auto parent_exit = cap.sink().EventsOf(Op::kProcExit, parent);
  ASSERT_EQ(parent_exit.size(), 1u);
  EXPECT_EQ(parent_exit[0].ret, 0);
  EXPECT_TRUE(cap.sink().Process(child).tracked);
  EXPECT_EQ(cap.sink().Process(child).exit_code, 3);
  // sh's own child (sleep) is a grandchild: tracked and forked from the child.
  EXPECT_FALSE(cap.sink().EventsOf(Op::kProcFork, child).empty());
  // Sleeping shows as blocked off-CPU time of the tracked processes.
  EXPECT_FALSE(cap.sink().EventsOf(Op::kSchedSwitch, child).empty());
}

TEST(HostSourceTest, PinnedCompetitorShowsAsPreemptorWithRunQueueWait) {
  GW_REQUIRE_ROOT();
  Capture cap;
  {
    Status started = cap.Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  // The tracked task: 5 ms of work (longer than a scheduler slice), 1 ms of sleep, for 2 s,
  // on CPU 0.
  pid_t tracked = ForkWaiting(go[0], [] {
    PinToCpu(0);
    int64_t end = MonotonicNs() + 2'000'000'000;
    while (MonotonicNs() < end) {
      BusyFor(5'000'000);
      usleep(1000);
    }
    return 0;
  });
  // The competitor: spins on the same CPU until killed.
  pid_t competitor = fork();
  if (competitor == 0) {
    PinToCpu(0);
    for (;;) {
    }
  }
  ASSERT_TRUE(cap.source().Track(tracked, GW_TRACKED_FILTER).ok());
  ASSERT_EQ(write(go[1], "gg", 1), 1);
  EXPECT_EQ(WaitExit(tracked), 0);
  std::vector<int32_t> competitors = cap.source().CompetitorPids();
  kill(competitor, SIGKILL);
  WaitExit(competitor);
  cap.Stop();
  EXPECT_NE(std::find(competitors.begin(), competitors.end(), competitor), competitors.end())
      << "the spinning process is in the competitors map";

  int64_t runq_behind_competitor = 0, switches_to_competitor = 0;
  for (const Event& e : cap.sink().EventsOf(Op::kSchedSwitch, tracked)) {
    EXPECT_GE(e.duration_ns, e.runq_ns);
    if (e.other_pid == competitor) {
      ++switches_to_competitor;
      runq_behind_competitor += e.runq_ns;
    }
  }
  EXPECT_GT(switches_to_competitor, 10);
  EXPECT_GT(runq_behind_competitor, 50'000'000) << "tracked task waited on the run queue";
  // The competitor's own off-CPU intervals are recorded (the brief's Step-2 query lists it).
  auto own = cap.sink().EventsOf(Op::kSchedSwitch, competitor);
  EXPECT_GT(own.size(), 10u);
  bool preempted_by_tracked = false;
  for (const Event& e : own) {
    if (e.other_pid == tracked && e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
      preempted_by_tracked = true;
    }
  }
  EXPECT_TRUE(preempted_by_tracked);
  EXPECT_FALSE(cap.sink().Process(competitor).name.empty());
  EXPECT_EQ(cap.source().RecordsEmitted(), cap.source().RecordsConsumed());
}

// Wake-up causality: a blocked task's sched_switch row names who woke it. A tracked reader
// process sleeps on a pipe that a tracked writer process fills every 50 ms, 20 times; then it
// sleeps in usleep, which a timer interrupt ends. (Separate single-threaded processes: a child
// forked from this multi-threaded test may not allocate, so it starts no threads.)
// Two tracked children: the writer writes `n` bytes into a pipe, one every `gap_us`, and the
// reader blocks in read() for each (woken by the writer), then sleeps `timer_sleeps` × 20 ms
// (woken by a timer interrupt). Returns when both have exited.
void PipePingPong(Capture& cap, int n, useconds_t gap_us, int timer_sleeps, pid_t* reader,
                  pid_t* writer) {
  int go[2], data[2];
  ASSERT_EQ(pipe(go), 0);
  ASSERT_EQ(pipe(data), 0);
  *reader = ForkWaiting(go[0], [&] {
    char c;
    for (int i = 0; i < n; ++i) {
      if (read(data[0], &c, 1) != 1) return 1;
    }
    for (int i = 0; i < timer_sleeps; ++i) usleep(20'000);
    return 0;
  });
  *writer = ForkWaiting(go[0], [&] {
    for (int i = 0; i < n; ++i) {
      usleep(gap_us);
      if (write(data[1], "x", 1) != 1) return 1;
    }
    return 0;
  });
  ASSERT_TRUE(cap.source().Track(*reader, GW_TRACKED_FILTER).ok());
  ASSERT_TRUE(cap.source().Track(*writer, GW_TRACKED_FILTER).ok());
  ASSERT_EQ(write(go[1], "gg", 2), 2);
  EXPECT_EQ(WaitExit(*writer), 0);
  EXPECT_EQ(WaitExit(*reader), 0);
}

TEST(HostSourceTest, BlockedRowsNameTheirWaker) {
  GW_REQUIRE_ROOT();
  Capture cap;
  {
    Status started = cap.Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  pid_t reader = 0, writer = 0;
  PipePingPong(cap, 20, 50'000, /*timer_sleeps=*/10, &reader, &writer);
  cap.Stop();
  int pipe_wakes = 0, timer_wakes = 0, preempted_with_waker = 0;
  for (const Event& e : cap.sink().EventsOf(Op::kSchedSwitch, reader)) {
    if (e.kind == static_cast<int64_t>(SwitchKind::kPreempted)) {
      if (e.waker_tid != kNull) ++preempted_with_waker;
      continue;
    }
    if (e.waker_tid == kNull) continue;
    if (e.waker_tid == writer && e.waker_pid == writer && e.duration_ns >= 30'000'000) {
      ++pipe_wakes;
    }
    if (e.waker_tid == 0 && e.waker_pid == 0 && e.duration_ns >= 15'000'000) ++timer_wakes;
  }
  EXPECT_GE(pipe_wakes, 15) << "reads woken by the writer's pipe writes name the writer";
  EXPECT_GE(timer_wakes, 8) << "usleep ends in a timer interrupt: waker 0";
  EXPECT_EQ(preempted_with_waker, 0) << "a preempted task was runnable, nobody woke it";
  EXPECT_EQ(cap.source().RecordsEmitted(), cap.source().RecordsConsumed());
}

// An interrupt entry whose exit was never seen (the entry program attached first, the interrupt
// ended before its exit program was attached) must not make every later wake-up on that CPU
// an interrupt's. Trigger: leave every CPU's depth at 1 with an old entry time, as such a missed
// exit does, then ping-pong through a pipe. Assert: the reads still name the writer.
// A stuck interrupt depth (an exit never seen) goes stale even on CPUs that keep taking
// interrupts: busy CPUs take a timer interrupt every few ms, and each of those entries must not
// keep the stuck level alive (it did: every wake-up on a busy CPU read as an interrupt's).
TEST(HostSourceTest, AMissedInterruptExitDoesNotHideWakers) {
  GW_REQUIRE_ROOT();
  Capture cap;
  {
    Status started = cap.Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  int fd = cap.source().irq_state_fd();
  ASSERT_GE(fd, 0);
  struct IrqState {
    int32_t depth;
    uint32_t pad;
    uint64_t since_ns;
  };
  int cpus = libbpf_num_possible_cpus();
  ASSERT_GT(cpus, 0);
  // Keep every CPU busy (so its timer interrupt keeps firing) while the ping-pong runs.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < cpus; ++i) {
    spinners.emplace_back([&stop] {
      (void)nice(19);
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);  // bpf_ktime_get_ns's clock
  uint64_t now_ns = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  std::vector<IrqState> stuck(static_cast<size_t>(cpus), IrqState{1, 0, now_ns});
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(fd, &zero, stuck.data(), BPF_ANY), 0);
  pid_t reader = 0, writer = 0;
  PipePingPong(cap, 10, 40'000, /*timer_sleeps=*/0, &reader, &writer);
  stop = true;
  for (std::thread& t : spinners) t.join();
  cap.Stop();
  int pipe_wakes = 0;
  for (const Event& e : cap.sink().EventsOf(Op::kSchedSwitch, reader)) {
    if (e.waker_tid == writer && e.duration_ns >= 20'000'000) ++pipe_wakes;
  }
  EXPECT_GE(pipe_wakes, 8) << "reads woken by the writer's writes name the writer";
}

std::string MakeColdFile(size_t bytes) {
  // On the real disk (not tmpfs) so reads reach the block layer.
  char path[] = "/var/tmp/gw_host_test_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return "";
  std::vector<char> data(bytes, 'x');
  for (size_t i = 0; i < bytes; i += 4096) data[i] = static_cast<char>(i / 4096);
  if (write(fd, data.data(), data.size()) != static_cast<ssize_t>(data.size())) return "";
  fsync(fd);
  posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  close(fd);
  return path;
}

TEST(HostSourceTest, DirectReadShowsBlockIoAndFileMappingShowsFaults) {
  GW_REQUIRE_ROOT();
  const size_t kBytes = 8 << 20;
  std::string path = MakeColdFile(kBytes);
  ASSERT_FALSE(path.empty());
  Capture cap;
  {
    Status started = cap.Start();
    ASSERT_TRUE(started.ok()) << started.message();
  }
  int go[2];
  ASSERT_EQ(pipe(go), 0);
  pid_t reader = ForkWaiting(go[0], [&] {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECT);
    if (fd < 0) return 1;
    void* buf = nullptr;
    if (posix_memalign(&buf, 4096, 1 << 20) != 0) return 2;
    for (size_t off = 0; off < kBytes; off += 1 << 20) {
      if (pread(fd, buf, 1 << 20, static_cast<off_t>(off)) <= 0) return 3;
    }
    free(buf);
    // Fresh anonymous memory: one minor fault per page.
    const size_t kAnon = 32 << 20;
    char* anon = static_cast<char*>(
        mmap(nullptr, kAnon, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (size_t i = 0; i < kAnon; i += 4096) anon[i] = 1;
    // A file mapping read page by page: file-backed faults.
    char* map = static_cast<char*>(mmap(nullptr, kBytes, PROT_READ, MAP_PRIVATE, fd, 0));
    if (map == MAP_FAILED) return 4;
    volatile char sum = 0;
    for (size_t i = 0; i < kBytes; i += 4096) sum = static_cast<char>(sum + map[i]);
    close(fd);
    return 0;
  });
  ASSERT_TRUE(cap.source().Track(reader, GW_TRACKED_FILTER).ok());
  ASSERT_EQ(write(go[1], "g", 1), 1);
  EXPECT_EQ(WaitExit(reader), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // one fault-count drain
  cap.source().Rediscover();
  cap.Stop();
  unlink(path.c_str());

  auto ios = cap.sink().EventsOf(Op::kBlockIo, reader);
  ASSERT_FALSE(ios.empty()) << "O_DIRECT reads reach the block layer";
  int64_t read_bytes = 0;
  for (const Event& e : ios) {
    EXPECT_GT(e.duration_ns, 0);
    if (e.kind == 0) read_bytes += e.bytes;
  }
  EXPECT_GE(read_bytes, static_cast<int64_t>(kBytes));
  EXPECT_EQ(cap.sink().String(ios[0].name_id), "vda");

  int64_t faults = 0;
  for (const OpCount& c : cap.sink().Counts()) {
    if (c.pid == reader && c.op == Op::kPageFault) faults += c.count;
  }
  EXPECT_GE(faults, (32 << 20) / 4096) << "every fresh page faulted once";
  auto file_faults = cap.sink().EventsOf(Op::kFileFault, reader);
  ASSERT_FALSE(file_faults.empty());
  bool named = false;
  for (const Event& e : file_faults) named = named || cap.sink().String(e.name_id) == path;
  EXPECT_TRUE(named) << "file faults are named by the mapped file";
}

TEST(HostSourceTest, UnprivilegedStartFailsWithHint) {
  GW_REQUIRE_ROOT();
  pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(10);
    auto source = HostSource::Create({});
    if (!source.ok()) _exit(11);
    CollectingSink sink;
    SourceContext context;
    context.sink = &sink;
    Status st = (*source)->Start(context);
    if (st.ok()) _exit(12);
    std::fprintf(stderr, "unprivileged start: %s\n", st.message().c_str());
    bool clear = st.code() == StatusCode::kPermissionDenied &&
                 st.message().find("hint: run as root") != std::string::npos &&
                 st.message().find("CAP_BPF") != std::string::npos;
    _exit(clear ? 0 : 13);
  }
  EXPECT_EQ(WaitExit(child), 0);
}

}  // namespace
}  // namespace gw
