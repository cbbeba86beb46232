// The CUDA decoder on synthetic records: no BPF, no root. The BPF tests (cuda_source_test.cc)
// check the same rows end to end from the fake CUDA libraries.
#include "sources/cuda/cuda_decode.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "store/ops.h"

namespace gw {
namespace {

constexpr uint32_t kPid = 4242;
constexpr uint64_t kStart = 1'000'000'000;  // CLOCK_MONOTONIC at session start

gw_cuda_call_record Call(gw_cuda_fn fn) {
  gw_cuda_call_record r{};
  r.type = GW_CUDA_RECORD_CALL;
  r.fn = fn;
  r.tgid = kPid;
  r.tid = kPid + 1;
  r.ts_ns = kStart + 5'000;
  r.duration_ns = 700;
  r.kind = -1;
  return r;
}

class CudaDecodeTest : public ::testing::Test {
 protected:
  std::optional<Event> Decode(const gw_cuda_call_record& r) {
    return DecodeCudaCall(r, clock_, memory_, [this](uint32_t tgid, uint64_t handle, bool stub) {
      names_asked_.emplace_back(tgid, handle, stub);
      return static_cast<int64_t>(handle & 0xff);
    });
  }
  SessionClock clock_{static_cast<int64_t>(kStart), 0};
  CudaProcessMemory memory_;
  std::vector<std::tuple<uint32_t, uint64_t, bool>> names_asked_;
};

TEST_F(CudaDecodeTest, CallRowCarriesSessionTimeThreadAndReturn) {
  gw_cuda_call_record r = Call(GW_FN_CUDA_STREAM_SYNC);
  r.stream = 0x77;
  r.ret = 2;
  r.stack_id = 9;
  std::optional<Event> e = Decode(r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->op, Op::kCudaStreamSync);
  EXPECT_EQ(e->ts_ns, 5'000);
  EXPECT_EQ(e->pid, static_cast<int32_t>(kPid));
  EXPECT_EQ(e->tid, static_cast<int32_t>(kPid + 1));
  EXPECT_EQ(e->duration_ns, 700);
  EXPECT_EQ(e->ret, 2);
  EXPECT_EQ(e->addr, 0x77);
  EXPECT_EQ(e->stack_id, 9);
}

TEST_F(CudaDecodeTest, RuntimeLaunchIsNamedByItsHostStub) {
  gw_cuda_call_record r = Call(GW_FN_CUDA_LAUNCH_KERNEL);
  r.flags = GW_CUDA_FLAG_SAMPLED_LAUNCH;
  r.dst = 0x4012;
  r.stream = 0x5;
  std::optional<Event> e = Decode(r);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->op, Op::kCudaLaunchKernel);
  EXPECT_EQ(e->name_id, 0x12);
  EXPECT_EQ(e->addr, 0x5);
  EXPECT_EQ(e->ret, kNull) << "a sampled launch has no return";
  ASSERT_EQ(names_asked_.size(), 1u);
  EXPECT_EQ(names_asked_[0], std::make_tuple(kPid, uint64_t{0x4012}, true));

  gw_cuda_call_record d = Call(GW_FN_CU_LAUNCH_KERNEL);
  d.dst = 0x9933;
  ASSERT_TRUE(Decode(d).has_value());
  EXPECT_EQ(names_asked_.back(), std::make_tuple(kPid, uint64_t{0x9933}, false));
}

TEST_F(CudaDecodeTest, FreeGetsTheSizeOfItsAllocation) {
  gw_cuda_call_record m = Call(GW_FN_CUDA_MALLOC);
  m.dst = 0x7000'0000;
  m.bytes = 4096;
  std::optional<Event> alloc = Decode(m);
  ASSERT_TRUE(alloc.has_value());
  EXPECT_EQ(alloc->bytes, 4096);
  EXPECT_EQ(alloc->addr, 0x7000'0000);

  gw_cuda_call_record f = Call(GW_FN_CUDA_FREE);
  f.dst = 0x7000'0000;
  std::optional<Event> free = Decode(f);
  ASSERT_TRUE(free.has_value());
  EXPECT_EQ(free->op, Op::kCudaFree);
  EXPECT_EQ(free->bytes, 4096);
  EXPECT_TRUE(memory_.runtime_allocs.empty());
  // The driver free nested in it (same pointer, decoded after) still gets the size.
  gw_cuda_call_record inner = Call(GW_FN_CU_MEM_FREE);
  inner.dst = 0x7000'0000;
  std::optional<Event> nested = Decode(inner);
  ASSERT_TRUE(nested.has_value());
  EXPECT_EQ(nested->bytes, 4096);
}

TEST_F(CudaDecodeTest, FailedMallocRemembersNothing) {
  gw_cuda_call_record m = Call(GW_FN_CUDA_MALLOC);
  m.dst = 0x7000'0000;
  m.bytes = 64;
  m.ret = 2;  // cudaErrorMemoryAllocation
  std::optional<Event> e = Decode(m);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->bytes, 64);
  EXPECT_EQ(e->addr, kNull);
  EXPECT_TRUE(memory_.runtime_allocs.empty());
}

TEST_F(CudaDecodeTest, DefaultCopyDirectionAndPinnedHostFromWhatWasAllocated) {
  gw_cuda_call_record dev = Call(GW_FN_CUDA_MALLOC);
  dev.dst = 0x7000'0000;
  dev.bytes = 1 << 20;
  ASSERT_TRUE(Decode(dev).has_value());
  gw_cuda_call_record host = Call(GW_FN_CUDA_MALLOC_HOST);
  host.dst = 0x1000'0000;
  host.bytes = 1 << 20;
  ASSERT_TRUE(Decode(host).has_value());

  gw_cuda_call_record copy = Call(GW_FN_CUDA_MEMCPY_ASYNC);
  copy.kind = static_cast<int64_t>(CopyKind::kDefault);
  copy.dst = 0x7000'0100;
  copy.src = 0x1000'0100;
  copy.bytes = 256;
  std::optional<Event> h2d = Decode(copy);
  ASSERT_TRUE(h2d.has_value());
  EXPECT_EQ(h2d->kind, static_cast<int64_t>(CopyKind::kHostToDevice) | kCopyPinnedHost);
  EXPECT_EQ(h2d->addr, 0x7000'0100) << "the device side";
  EXPECT_EQ(h2d->bytes, 256);

  copy.src = 0x7000'0100;
  copy.dst = 0x2000'0000;  // pageable
  std::optional<Event> d2h = Decode(copy);
  ASSERT_TRUE(d2h.has_value());
  EXPECT_EQ(d2h->kind, static_cast<int64_t>(CopyKind::kDeviceToHost));
  EXPECT_EQ(d2h->addr, 0x7000'0100);
}

TEST_F(CudaDecodeTest, DriverCopiesTakeTheirDirectionFromTheFunction) {
  gw_cuda_call_record c = Call(GW_FN_CU_MEMCPY_DTOH_ASYNC);
  c.dst = 0x2000'0000;
  c.src = 0x7000'0000;
  std::optional<Event> e = Decode(c);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->kind, static_cast<int64_t>(CopyKind::kDeviceToHost));
  EXPECT_EQ(e->addr, 0x7000'0000);
}

TEST_F(CudaDecodeTest, HostRegistrationOnlyFeedsThePinnedRanges) {
  gw_cuda_call_record reg = Call(GW_FN_CUDA_HOST_REGISTER);
  reg.dst = 0x3000'0000;
  reg.bytes = 4096;
  EXPECT_FALSE(Decode(reg).has_value());
  EXPECT_EQ(memory_.pinned.count(0x3000'0000), 1u);
  gw_cuda_call_record unreg = Call(GW_FN_CUDA_HOST_UNREGISTER);
  unreg.dst = 0x3000'0000;
  EXPECT_FALSE(Decode(unreg).has_value());
  EXPECT_TRUE(memory_.pinned.empty());
}

TEST_F(CudaDecodeTest, UnknownAndRowlessFunctionsMakeNoRow) {
  EXPECT_FALSE(Decode(Call(GW_FN_NONE)).has_value());
  EXPECT_FALSE(Decode(Call(GW_FN_CUDA_REGISTER_FUNCTION)).has_value());
  gw_cuda_call_record future = Call(GW_FN_NONE);
  future.fn = GW_FN_MAX + 7;  // a newer BPF side
  EXPECT_FALSE(Decode(future).has_value());
  EXPECT_TRUE(names_asked_.empty());
}

TEST_F(CudaDecodeTest, NcclRowsNameTheirCommunicatorByItsUniqueIdFromTheInit) {
  std::vector<std::string> interned;
  auto intern = [&](const std::string& text) {
    interned.push_back(text);
    return static_cast<int64_t>(interned.size());
  };
  auto decode = [&](const gw_cuda_call_record& r) {
    return DecodeCudaCall(
        r, clock_, memory_, [](uint32_t, uint64_t, bool) { return 0; }, intern);
  };
  gw_cuda_call_record init = Call(GW_FN_NCCL_COMM_INIT_RANK);
  init.dst = 0xc0ffee;               // the new communicator
  init.src = 0x1234abcd5678ef00ull;  // hash of the ncclUniqueId
  init.bytes = 4;                    // nranks
  init.kind = 3;                     // rank
  std::optional<Event> e = decode(init);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->op, Op::kNcclCommInit);
  EXPECT_EQ(e->bytes, 4);
  EXPECT_EQ(e->kind, 3);
  EXPECT_EQ(e->addr, 0xc0ffee);
  ASSERT_EQ(interned.size(), 1u);
  EXPECT_EQ(interned[0], "nccl 1234abcd5678ef00");
  EXPECT_EQ(e->name_id, 1);

  gw_cuda_call_record ar = Call(GW_FN_NCCL_ALL_REDUCE);
  ar.dst = 0xc0ffee;
  ar.src = 17;  // sequence number
  ar.bytes = 4000;
  ar.kind = 7;  // ncclFloat32
  ar.stream = 0x99;
  e = decode(ar);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->op, Op::kNcclAllReduce);
  EXPECT_EQ(e->other_pid, 17);
  EXPECT_EQ(e->bytes, 4000);
  EXPECT_EQ(e->kind, 7);
  EXPECT_EQ(e->addr, 0x99);
  EXPECT_EQ(e->name_id, 1) << "the communicator named at its init";
  EXPECT_EQ(interned.size(), 1u);

  // A communicator whose init was not seen is named by its handle.
  ar.dst = 0xbad;
  e = decode(ar);
  ASSERT_TRUE(e.has_value());
  ASSERT_EQ(interned.size(), 2u);
  EXPECT_EQ(interned[1], "nccl handle 0xbad");
  EXPECT_EQ(e->name_id, 2);

  gw_cuda_call_record destroy = Call(GW_FN_NCCL_COMM_DESTROY);
  destroy.dst = 0xc0ffee;
  e = decode(destroy);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->op, Op::kNcclCommDestroy);
  EXPECT_EQ(e->name_id, 1);
  EXPECT_EQ(memory_.nccl_comms.count(0xc0ffee), 0u) << "forgotten once destroyed";
}

}  // namespace
}  // namespace gw
