// The NVML sampler against the simulated libnvidia-ml.so.1 (sim/nvml): our struct layouts and
// call sequences agree with a library built from the documented ones, and its numbers follow
// the simulated device's real busy time (published by the sim driver in gwsim-gpu.<pid>).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "sources/nvml/gpu_sampler.h"
#include "sources/nvml/nvml_library.h"

namespace gw {
namespace {

const std::string kSimNvml = std::string(GW_SIM_LIB_DIR) + "/libnvidia-ml.so.1";
const std::string kSimCudart = std::string(GW_SIM_LIB_DIR) + "/libcudart.so.13";

int64_t MonoNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Dim3 {  // the runtime's dim3: 12 bytes by value
  unsigned int x = 1, y = 1, z = 1;
};

// The sim runtime, loaded into this process: its driver publishes this process's busy time.
struct SimCuda {
  void* lib = nullptr;
  int (*launch)(const void*, Dim3, Dim3, void**, size_t, void*) = nullptr;
  int (*sync)() = nullptr;
  void** (*reg_fatbin)(void*) = nullptr;
  void (*reg_fn)(void**, const char*, char*, const char*, int, void*, void*, void*, void*,
                 int*) = nullptr;
  void (*reg_end)(void**) = nullptr;
};

class NvmlSamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gw_nvml_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
    setenv("GWSIM_GPU_STATE_DIR", dir_.c_str(), 1);
  }
  void TearDown() override { (void)system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(NvmlSamplerTest, MissingLibraryIsNotFoundWithHint) {
  auto lib = NvmlLibrary::Load("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(lib.ok());
  EXPECT_NE(lib.status().message().find("/nonexistent/libnvidia-ml.so.1"), std::string::npos);
  NvmlProbe probe = ProbeNvml("/nonexistent/libnvidia-ml.so.1");
  EXPECT_FALSE(probe.present);
  EXPECT_FALSE(probe.error.empty());
}

TEST_F(NvmlSamplerTest, ProbeFindsSimGpuWithGpm) {
  NvmlProbe probe = ProbeNvml(kSimNvml);
  ASSERT_TRUE(probe.present) << probe.error;
  EXPECT_TRUE(probe.gpm_api);
  ASSERT_EQ(probe.devices.size(), 1u);
  EXPECT_EQ(probe.devices[0].name, "gwsim simulated GPU");
  EXPECT_TRUE(probe.devices[0].gpm_supported);
}

TEST_F(NvmlSamplerTest, IdleDeviceSamplesZeroActivity) {
  auto made = GpuSampler::Create({kSimNvml, 100'000'000}, [] { return MonoNs(); });
  ASSERT_TRUE(made.ok()) << made.status().message();
  std::vector<GpuSample> samples;
  std::vector<GpuProcessSample> procs;
  (*made)->SampleOnce(1, &samples, &procs);
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  (*made)->SampleOnce(2, &samples, &procs);
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_LT(samples[0].sm_active_pct, 0) << "no GPM value without a previous sample";
  const GpuSample& s = samples[1];
  EXPECT_EQ(s.gpu, 0);
  EXPECT_EQ(s.util_pct, 0);
  EXPECT_NEAR(s.sm_active_pct, 0, 0.01);
  EXPECT_NEAR(s.sm_occupancy_pct, 0, 0.01);
  EXPECT_EQ(s.sm_clock_mhz, 1980);
  EXPECT_EQ(s.power_mw, 100000);
  EXPECT_EQ(s.throttle_reasons, 1);  // GpuIdle
  EXPECT_EQ(s.mem_used_bytes, 0);
}

TEST_F(NvmlSamplerTest, BusyDeviceAndItsProcessShowUp) {
  // Kernels keep the simulated device busy about half of the time for ~600 ms.
  void* rt = dlopen(kSimCudart.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(rt, nullptr) << dlerror();
  SimCuda c;
  c.launch = reinterpret_cast<decltype(c.launch)>(dlsym(rt, "cudaLaunchKernel"));
  c.sync = reinterpret_cast<decltype(c.sync)>(dlsym(rt, "cudaDeviceSynchronize"));
  c.reg_fatbin = reinterpret_cast<decltype(c.reg_fatbin)>(dlsym(rt, "__cudaRegisterFatBinary"));
  c.reg_fn = reinterpret_cast<decltype(c.reg_fn)>(dlsym(rt, "__cudaRegisterFunction"));
  c.reg_end = reinterpret_cast<decltype(c.reg_end)>(dlsym(rt, "__cudaRegisterFatBinaryEnd"));
  ASSERT_TRUE(c.launch && c.sync && c.reg_fatbin && c.reg_fn && c.reg_end);
  struct {
    uint32_t magic, version;
    const void* data;
    void* unused;
  } wrapper{0x466243b1, 1, "not a sim payload: every name resolves", nullptr};
  static char stub;
  void** handle = c.reg_fatbin(&wrapper);
  c.reg_fn(handle, &stub, const_cast<char*>("busy_kernel"), "busy_kernel", -1, nullptr, nullptr,
           nullptr, nullptr, nullptr);
  c.reg_end(handle);

  // The first driver call creates this process's busy-time file; NVML counts a process from
  // the first time it sees that file.
  ASSERT_EQ(c.sync(), 0);
  auto made = GpuSampler::Create({kSimNvml, 100'000'000}, [] { return MonoNs(); });
  ASSERT_TRUE(made.ok()) << made.status().message();
  GpuSampler& sampler = **made;
  std::vector<GpuSample> samples;
  std::vector<GpuProcessSample> procs;
  sampler.SampleOnce(0, &samples, &procs);
  int64_t end = MonoNs() + 600'000'000;
  while (MonoNs() < end) {
    uint64_t ns = 2'000'000;  // 2 ms kernel, then 2 ms of host time
    void* args[] = {&ns};
    ASSERT_EQ(c.launch(&stub, Dim3{}, Dim3{}, args, 0, nullptr), 0);
    ASSERT_EQ(c.sync(), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  sampler.SampleOnce(1, &samples, &procs);
  ASSERT_EQ(samples.size(), 2u);
  const GpuSample& s = samples[1];
  // Busy ≈ 2/(2+2+overheads): between 15% and 60% whatever the host's load.
  EXPECT_GT(s.sm_active_pct, 10.0);
  EXPECT_LT(s.sm_active_pct, 60.0);
  EXPECT_NEAR(s.sm_occupancy_pct, s.sm_active_pct * 0.25, 0.5);
  EXPECT_GT(s.util_pct, 10);
  EXPECT_GT(s.power_mw, 100000);
  EXPECT_EQ(s.throttle_reasons, 0);
  bool mine = false;
  for (const GpuProcessSample& p : procs) mine = mine || p.pid == getpid();
  EXPECT_TRUE(mine) << "per-process utilization names this process";
}

TEST_F(NvmlSamplerTest, WithoutGpmOnlyNvmlColumns) {
  setenv("GWSIM_NVML_GPM", "0", 1);
  // The sim library reads its environment at nvmlInit: a fresh load sees the change.
  auto made = GpuSampler::Create({kSimNvml, 100'000'000}, [] { return MonoNs(); });
  unsetenv("GWSIM_NVML_GPM");
  ASSERT_TRUE(made.ok()) << made.status().message();
  EXPECT_FALSE((*made)->devices()[0].gpm_supported);
  std::vector<GpuSample> samples;
  std::vector<GpuProcessSample> procs;
  (*made)->SampleOnce(1, &samples, &procs);
  std::this_thread::sleep_for(std::chrono::milliseconds(110));
  (*made)->SampleOnce(2, &samples, &procs);
  EXPECT_LT(samples[1].sm_active_pct, 0);
  EXPECT_NE(samples[1].util_pct, kNull);
}

TEST_F(NvmlSamplerTest, ThreadSamplesAtItsInterval) {
  auto made = GpuSampler::Create({kSimNvml, 20'000'000}, [] { return MonoNs(); });
  ASSERT_TRUE(made.ok()) << made.status().message();
  std::mutex mu;
  int rounds = 0;
  (*made)->Start([&](const std::vector<GpuSample>& s, const std::vector<GpuProcessSample>&) {
    std::lock_guard<std::mutex> lock(mu);
    rounds += static_cast<int>(s.size());
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  (*made)->Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_GE(rounds, 5);    // ~15 at 50 Hz; a loaded 2-CPU host may be late
  EXPECT_LE(rounds, 17);
}

}  // namespace
}  // namespace gw
