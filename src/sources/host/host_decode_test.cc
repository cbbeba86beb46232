// The host decoder on synthetic records: no BPF, no root. The BPF tests (host_source_test.cc)
// check the same rows end to end from real child processes.
#include "sources/host/host_decode.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "store/ops.h"

namespace gw {
namespace {

constexpr uint64_t kStart = 2'000'000'000;  // CLOCK_MONOTONIC at session start

// Records what the decoder asks of the source.
class RecordingContext : public HostRecordContext {
 public:
  int64_t FilePathId(int32_t pid, uint64_t addr, uint64_t inode) override {
    calls.push_back("file " + std::to_string(pid) + " " + std::to_string(addr) + " " +
                    std::to_string(inode));
    return 70;
  }
  int64_t DeviceNameId(uint64_t dev) override {
    calls.push_back("device " + std::to_string(dev));
    return 80;
  }
  void SawProcess(int32_t pid, const std::string& comm, bool tracked, int32_t ppid) override {
    calls.push_back("saw " + std::to_string(pid) + " '" + comm + "' " + (tracked ? "1" : "0") +
                    " " + std::to_string(ppid));
  }
  void ProcessExec(int32_t pid, const std::string& comm) override {
    calls.push_back("exec " + std::to_string(pid) + " '" + comm + "'");
  }
  void ProcessFork(int32_t parent, int32_t child, const std::string& comm, int64_t ts_ns) override {
    calls.push_back("fork " + std::to_string(parent) + " " + std::to_string(child) + " '" + comm +
                    "' " + std::to_string(ts_ns));
  }
  void ProcessExit(int32_t pid, const std::string& comm, bool tracked, int32_t ppid, int64_t ts_ns,
                   int64_t status) override {
    calls.push_back("exit " + std::to_string(pid) + " '" + comm + "' " + (tracked ? "1" : "0") +
                    " " + std::to_string(ppid) + " " + std::to_string(ts_ns) + " " +
                    std::to_string(status));
  }
  std::vector<std::string> calls;
};

gw_host_record Record(gw_host_record_type type) {
  gw_host_record r{};
  r.type = type;
  r.tgid = 100;
  r.tid = 101;
  r.cpu = 3;
  r.ts_ns = kStart + 1'000;
  return r;
}

class HostDecodeTest : public ::testing::Test {
 protected:
  std::vector<Event> Decode(const gw_host_record& r) {
    std::vector<Event> out;
    DecodeHostRecord(r, clock_, context_, &out);
    return out;
  }
  SessionClock clock_{static_cast<int64_t>(kStart), 0};
  RecordingContext context_;
};

TEST_F(HostDecodeTest, OffCpuIntervalNamesBothProcesses) {
  gw_host_record r = Record(GW_HOST_OFF_CPU);
  r.duration_ns = 9'000;
  r.aux0 = 4'000;  // run-queue wait
  r.kind = GW_SWITCH_PREEMPTED;
  r.other_tgid = 555;
  r.flags = GW_OFF_CPU_WOKEN;
  r.waker_tgid = 600;
  r.waker_tid = 601;
  r.stack_id = 12;
  std::vector<Event> rows = Decode(r);
  ASSERT_EQ(rows.size(), 1u);
  const Event& e = rows[0];
  EXPECT_EQ(e.op, Op::kSchedSwitch);
  EXPECT_EQ(e.ts_ns, 1'000);
  EXPECT_EQ(e.pid, 100);
  EXPECT_EQ(e.tid, 101);
  EXPECT_EQ(e.cpu, 3);
  EXPECT_EQ(e.duration_ns, 9'000);
  EXPECT_EQ(e.runq_ns, 4'000);
  EXPECT_EQ(e.kind, GW_SWITCH_PREEMPTED);
  EXPECT_EQ(e.other_pid, 555);
  EXPECT_EQ(e.waker_pid, 600);
  EXPECT_EQ(e.waker_tid, 601);
  EXPECT_EQ(e.stack_id, 12);
  EXPECT_EQ(context_.calls, (std::vector<std::string>{"saw 100 '' 1 0", "saw 555 '' 0 0"}));
}

TEST_F(HostDecodeTest, CompetitorIsNotTrackedAndUnwokenHasNoWaker) {
  gw_host_record r = Record(GW_HOST_OFF_CPU);
  r.flags = GW_OFF_CPU_COMPETITOR;
  r.waker_tgid = 600;  // ignored without GW_OFF_CPU_WOKEN
  std::vector<Event> rows = Decode(r);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].waker_pid, kNull);
  EXPECT_EQ(rows[0].stack_id, kNull);
  EXPECT_EQ(context_.calls[0], "saw 100 '' 0 0");
}

TEST_F(HostDecodeTest, FaultSleepAlsoGivesTheMajorFault) {
  gw_host_record r = Record(GW_HOST_OFF_CPU);
  r.kind = GW_SWITCH_BLOCKED_FAULT;
  r.duration_ns = 5'000;
  r.value = static_cast<int64_t>(kStart + 500);  // when the fault began
  r.aux1 = 0x7f00'0000;                          // faulting address
  std::vector<Event> rows = Decode(r);
  ASSERT_EQ(rows.size(), 2u);
  const Event& f = rows[1];
  EXPECT_EQ(f.op, Op::kMajorFault);
  EXPECT_EQ(f.ts_ns, 500);
  EXPECT_EQ(f.duration_ns, 1'000 + 5'000 - 500) << "until back on the CPU";
  EXPECT_EQ(f.addr, 0x7f00'0000);
  EXPECT_EQ(f.name_id, 70);
  EXPECT_EQ(context_.calls.back(), "file 100 " + std::to_string(0x7f00'0000) + " 0");
}

TEST_F(HostDecodeTest, BlockIoAndReclaimAndRead) {
  gw_host_record io = Record(GW_HOST_BLOCK_IO);
  io.duration_ns = 3'000;
  io.aux0 = 2048;  // sector
  io.aux1 = (8u << 20) | 1;
  io.value = 131072;
  io.kind = 0;
  io.error = 10;
  std::vector<Event> rows = Decode(io);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, Op::kBlockIo);
  EXPECT_EQ(rows[0].addr, 2048);
  EXPECT_EQ(rows[0].bytes, 131072);
  EXPECT_EQ(rows[0].ret, 10);
  EXPECT_EQ(rows[0].name_id, 80);

  gw_host_record reclaim = Record(GW_HOST_RECLAIM);
  reclaim.aux0 = 3;  // pages
  rows = Decode(reclaim);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, Op::kDirectReclaim);
  EXPECT_EQ(rows[0].bytes, 3 * sysconf(_SC_PAGESIZE));

  gw_host_record read = Record(GW_HOST_READ);
  read.value = -11;  // -EAGAIN
  read.aux0 = 7;     // fd
  rows = Decode(read);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, Op::kRead);
  EXPECT_EQ(rows[0].ret, -11);
  EXPECT_EQ(rows[0].bytes, kNull) << "a failed read moved no bytes";
  EXPECT_EQ(rows[0].addr, 7);
}

TEST_F(HostDecodeTest, LifecycleGoesToTheContext) {
  gw_host_record fork = Record(GW_HOST_FORK);
  fork.other_tgid = 200;
  std::strcpy(fork.comm, "pt_data_worker");
  std::vector<Event> rows = Decode(fork);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, Op::kProcFork);
  EXPECT_EQ(rows[0].other_pid, 200);
  EXPECT_EQ(context_.calls.back(), "fork 100 200 'pt_data_worker' 1000");

  gw_host_record exit = Record(GW_HOST_EXIT);
  exit.value = 9;  // killed by SIGKILL
  exit.other_tgid = 1;
  std::strcpy(exit.comm, "python3");
  rows = Decode(exit);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].ret, 128 + 9);
  EXPECT_EQ(context_.calls.back(), "exit 100 'python3' 1 1 1000 137");
  exit.value = 3 << 8;  // exit(3)
  exit.flags = 1;       // a competitor
  Decode(exit);
  EXPECT_EQ(context_.calls.back(), "exit 100 'python3' 0 1 1000 3");

  gw_host_record exec = Record(GW_HOST_EXEC);
  std::strcpy(exec.comm, "train");
  rows = Decode(exec);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].op, Op::kProcExec);
  EXPECT_EQ(context_.calls.back(), "exec 100 'train'");
}

TEST_F(HostDecodeTest, NameRecordMakesNoRow) {
  gw_host_record name = Record(GW_HOST_NAME);
  std::memcpy(name.comm, "ffmpeg-sixteen-c", 16);  // a full comm without a NUL
  EXPECT_TRUE(Decode(name).empty());
  EXPECT_EQ(context_.calls, (std::vector<std::string>{"saw 100 'ffmpeg-sixteen-c' 0 0"}));
}

}  // namespace
}  // namespace gw
