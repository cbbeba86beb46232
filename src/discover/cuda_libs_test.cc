#include "discover/cuda_libs.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace gw {
namespace {

// A fake /proc: one process per call, with a status file and a maps file.
class FakeProc {
 public:
  FakeProc() {
    char dir[] = "/tmp/gw_fake_proc_XXXXXX";
    root_ = mkdtemp(dir) != nullptr ? dir : "";
  }
  ~FakeProc() { std::filesystem::remove_all(root_); }
  void Process(int pid, const std::string& status, const std::vector<std::string>& maps) {
    std::string dir = root_ + "/" + std::to_string(pid);
    mkdir(dir.c_str(), 0700);
    std::ofstream(dir + "/status") << "Name:\tpython3\n" << status;
    std::ofstream out(dir + "/maps");
    for (const std::string& path : maps) {
      out << "7f0000000000-7f0000001000 r-xp 00000000 fe:01 7 " << path << "\n";
    }
  }
  const std::string& root() const { return root_; }

 private:
  std::string root_;
};

// The CUDA libraries a scan found under the fake root (standard directories left out).
std::vector<std::string> Found(const FakeProc& proc, MapsScanFilter* filter) {
  std::vector<std::string> out;
  for (const CudaLibrary& lib : FindCudaLibraries({}, proc.root(), filter)) {
    if (lib.path.rfind(proc.root(), 0) == 0) out.push_back(lib.path.substr(proc.root().size()));
  }
  return out;
}

// Rediscovery every second reads the maps only of processes that are new or whose library
// code changed (a dlopen): a process that maps libcudart is found once, and its later dlopen
// of libcuda is found at the next scan; a kernel thread (no VmLib) is never read.
TEST(MapsScanFilterTest, RereadsOnlyNewOrChangedProcesses) {
  FakeProc proc;
  ASSERT_FALSE(proc.root().empty());
  proc.Process(10, "VmLib:\t  1000 kB\n", {"/venv/lib/libcudart.so.13"});
  proc.Process(2, "", {"/venv/lib/libcuda.so.1"});  // no VmLib: a kernel thread's status
  MapsScanFilter filter;
  EXPECT_EQ(Found(proc, &filter), std::vector<std::string>{"/10/root/venv/lib/libcudart.so.13"});
  EXPECT_TRUE(Found(proc, &filter).empty()) << "nothing changed: no maps read";

  proc.Process(10, "VmLib:\t  3000 kB\n",
               {"/venv/lib/libcudart.so.13", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"});
  std::vector<std::string> after = Found(proc, &filter);
  EXPECT_EQ(after.size(), 2u) << "the dlopen changed VmLib: maps read again";
  proc.Process(11, "VmLib:\t  1000 kB\n", {"/venv/lib/libcudart.so.13"});
  EXPECT_EQ(Found(proc, &filter), std::vector<std::string>{"/11/root/venv/lib/libcudart.so.13"});

  // Without a filter every process is read, every time.
  EXPECT_EQ(Found(proc, nullptr).size(), 4u);
  EXPECT_EQ(Found(proc, nullptr).size(), 4u);
}

TEST(ClassifyCudaLibraryTest, NcclIsItsOwnKind) {
  CudaLibKind kind = CudaLibKind::kRuntime;
  ASSERT_TRUE(ClassifyCudaLibrary("/venv/site-packages/nvidia/nccl/lib/libnccl.so.2", &kind));
  EXPECT_EQ(kind, CudaLibKind::kNccl);
  ASSERT_TRUE(ClassifyCudaLibrary("/usr/lib/libcudart.so.13", &kind));
  EXPECT_EQ(kind, CudaLibKind::kRuntime);
  EXPECT_FALSE(ClassifyCudaLibrary("/usr/lib/libncclnet.so", &kind));  // a net plugin
  EXPECT_FALSE(ClassifyCudaLibrary("/usr/lib/libcublas.so.13", &kind));
}

TEST(CudaLibDirsNextToTest, FindsPyTorchsNcclInTheVenvSitePackages) {
  char dir[] = "/tmp/gw_nccl_venv.XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  std::string venv = dir;
  std::string nccl = venv + "/lib/python3.12/site-packages/nvidia/nccl/lib";
  ASSERT_EQ(std::system(("mkdir -p " + venv + "/bin " + nccl + " && touch " + nccl +
                         "/libnccl.so.2 && printf '#!/bin/sh\\n' > " + venv +
                         "/bin/python3 && chmod +x " + venv + "/bin/python3")
                            .c_str()),
            0);
  std::vector<std::string> dirs = CudaLibDirsNextTo(venv + "/bin/python3", nullptr);
  EXPECT_EQ(dirs, std::vector<std::string>{nccl});
  std::system(("rm -rf " + venv).c_str());
}

}  // namespace
}  // namespace gw
