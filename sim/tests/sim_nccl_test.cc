// The simulated libnccl.so.2 across processes: ranks are forked children (the parent never
// touches CUDA, so they may), rendezvous through the communicator's shared segment in a
// private GWSIM_GPU_STATE_DIR, and report back through a pipe.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gwsim/cuda_runtime.h"
#include "gwsim/nccl.h"

namespace {

int64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

class NcclSimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/gwsim_nccl_test.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    setenv("GWSIM_GPU_STATE_DIR", dir_.c_str(), 1);
    setenv("GWSIM_NCCL_TIMEOUT_S", "20", 1);
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  // Runs `body(rank, id)` in `ranks` forked processes; each returns one int64 (or -1 on
  // failure), collected by rank.
  std::vector<int64_t> RunRanks(int ranks,
                                const std::function<int64_t(int, const ncclUniqueId&)>& body) {
    ncclUniqueId id;
    EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
    std::vector<int> fds;
    std::vector<pid_t> pids;
    for (int r = 0; r < ranks; ++r) {
      int p[2];
      EXPECT_EQ(pipe(p), 0);
      pid_t pid = fork();
      if (pid == 0) {
        close(p[0]);
        int64_t v = body(r, id);
        if (write(p[1], &v, sizeof(v)) != sizeof(v)) _exit(1);
        _exit(0);
      }
      close(p[1]);
      fds.push_back(p[0]);
      pids.push_back(pid);
    }
    std::vector<int64_t> out;
    for (int r = 0; r < ranks; ++r) {
      int64_t v = -1;
      if (read(fds[static_cast<size_t>(r)], &v, sizeof(v)) != sizeof(v)) v = -1;
      close(fds[static_cast<size_t>(r)]);
      int status = 0;
      waitpid(pids[static_cast<size_t>(r)], &status, 0);
      out.push_back(v);
    }
    return out;
  }

  std::string dir_;
};

TEST_F(NcclSimTest, AllReduceCompletesOnlyWhenEveryRankHasEnqueuedIt) {
  // Rank 2 enqueues 300 ms after the others: their stream sync waits for it; its own does not.
  std::vector<int64_t> sync_ns = RunRanks(3, [](int rank, const ncclUniqueId& id) -> int64_t {
    void* buf = nullptr;
    if (cudaMalloc(&buf, 1 << 20) != cudaSuccess) return -1;
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 3, id, rank) != ncclSuccess) return -1;
    int count = 0, me = -1;
    if (ncclCommCount(comm, &count) != ncclSuccess || count != 3) return -1;
    if (ncclCommUserRank(comm, &me) != ncclSuccess || me != rank) return -1;
    if (rank == 2) usleep(300'000);
    int64_t t0 = NowNs();
    if (ncclAllReduce(buf, buf, 1 << 18, ncclFloat, ncclSum, comm, nullptr) != ncclSuccess) {
      return -1;
    }
    int64_t enqueued = NowNs() - t0;
    if (enqueued > 50'000'000) return -1;  // the call only enqueues
    if (cudaStreamSynchronize(nullptr) != cudaSuccess) return -1;
    int64_t waited = NowNs() - t0;
    if (ncclCommDestroy(comm) != ncclSuccess) return -1;
    return waited;
  });
  ASSERT_EQ(sync_ns.size(), 3u);
  EXPECT_GE(sync_ns[0], 250'000'000) << "rank 0 did not wait for rank 2";
  EXPECT_GE(sync_ns[1], 250'000'000) << "rank 1 did not wait for rank 2";
  EXPECT_GE(sync_ns[2], 0);
  EXPECT_LT(sync_ns[2], 150'000'000) << "the late rank itself should not wait";
}

TEST_F(NcclSimTest, GroupedSendAndRecvBetweenTwoRanksDoNotDeadlock) {
  std::vector<int64_t> ok = RunRanks(2, [](int rank, const ncclUniqueId& id) -> int64_t {
    void* buf = nullptr;
    if (cudaMalloc(&buf, 4096) != cudaSuccess) return -1;
    ncclComm_t comm = nullptr;
    if (ncclCommInitRank(&comm, 2, id, rank) != ncclSuccess) return -1;
    int peer = 1 - rank;
    for (int i = 0; i < 5; ++i) {
      if (ncclGroupStart() != ncclSuccess) return -1;
      if (ncclSend(buf, 1024, ncclFloat, peer, comm, nullptr) != ncclSuccess) return -1;
      if (ncclRecv(buf, 1024, ncclFloat, peer, comm, nullptr) != ncclSuccess) return -1;
      if (ncclGroupEnd() != ncclSuccess) return -1;
    }
    if (cudaStreamSynchronize(nullptr) != cudaSuccess) return -1;
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async != ncclSuccess) return -1;
    return ncclCommDestroy(comm) == ncclSuccess ? 1 : -1;
  });
  EXPECT_EQ(ok, (std::vector<int64_t>{1, 1}));
}

TEST_F(NcclSimTest, BadArgumentsAreRejected) {
  int version = 0;
  EXPECT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_GE(version, 22000);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 5), ncclInvalidArgument);
  EXPECT_EQ(ncclCommInitRank(nullptr, 2, id, 0), ncclInvalidArgument);
  ncclUniqueId garbage = {};
  EXPECT_EQ(ncclCommInitRank(&comm, 1, garbage, 0), ncclInvalidArgument);
  EXPECT_EQ(ncclAllReduce(nullptr, nullptr, 1, ncclFloat, ncclSum, nullptr, nullptr),
            ncclInvalidArgument);
  EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
  EXPECT_STREQ(ncclGetErrorString(ncclInvalidArgument), "invalid argument");
}

}  // namespace
