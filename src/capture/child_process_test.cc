#include "capture/child_process.h"

#include <gtest/gtest.h>

namespace gw {
namespace {

TEST(JobEnvKeptTest, KeepsWhatConfiguresAGpuJob) {
  for (const char* name : {"PATH", "TERM", "LANG", "LC_ALL", "CUDA_VISIBLE_DEVICES", "NCCL_DEBUG",
                           "TORCH_LOGS", "PYTORCH_CUDA_ALLOC_CONF", "PYTHONPATH", "OMP_NUM_THREADS",
                           "HF_HOME", "MASTER_PORT", "VIRTUAL_ENV"}) {
    EXPECT_TRUE(JobEnvKept(name, {})) << name;
  }
}

TEST(JobEnvKeptTest, DropsTheLoaderTheCallerAndSudo) {
  for (const char* name :
       {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "SUDO_UID", "SUDO_COMMAND", "MAIL", "HOME",
        "USER", "LOGNAME", "SHELL", "AWS_SECRET_ACCESS_KEY", "SSH_AUTH_SOCK", "", "PATHX"}) {
    EXPECT_FALSE(JobEnvKept(name, {})) << name;
  }
}

TEST(JobEnvKeptTest, NamedOnesAreKeptExactlyOrByPrefix) {
  EXPECT_TRUE(JobEnvKept("MY_SETTING", {"MY_SETTING"}));
  EXPECT_FALSE(JobEnvKept("MY_SETTING2", {"MY_SETTING"}));
  EXPECT_TRUE(JobEnvKept("APP_A", {"APP_*"}));
  EXPECT_FALSE(JobEnvKept("AP", {"APP_*"}));
  EXPECT_TRUE(JobEnvKept("LD_LIBRARY_PATH", {"LD_LIBRARY_PATH"}));  // named: the user's choice
  EXPECT_FALSE(JobEnvKept("LD_PRELOAD", {"LD_LIBRARY_PATH"}));
}

}  // namespace
}  // namespace gw
