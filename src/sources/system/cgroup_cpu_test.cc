#include "sources/system/cgroup_cpu.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace gw {
namespace {

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string TempDir() {
  char tmpl[] = "/tmp/gw_cgroup_test.XXXXXX";
  return mkdtemp(tmpl);
}

TEST(CgroupCpu, ProcCgroupPicksTheCpuHierarchy) {
  CgroupMounts v1;
  v1.v1_cpu = "/sys/fs/cgroup/cpu";
  auto cg = ParseProcCgroup(
      "12:pids:/user.slice\n4:cpu,cpuacct:/kubepods/burstable/pod1234/abcd\n0::/user.slice\n", v1);
  ASSERT_TRUE(cg.has_value());
  EXPECT_EQ(cg->version, 1);
  EXPECT_EQ(cg->path, "/kubepods/burstable/pod1234/abcd");

  CgroupMounts v2;
  v2.v2 = "/sys/fs/cgroup";
  cg = ParseProcCgroup("0::/system.slice/job.scope\n", v2);
  ASSERT_TRUE(cg.has_value());
  EXPECT_EQ(cg->version, 2);
  EXPECT_EQ(cg->path, "/system.slice/job.scope");

  // No cpu controller mounted anywhere, or a path that climbs out of the mount: nothing.
  EXPECT_FALSE(ParseProcCgroup("0::/a\n", CgroupMounts{}).has_value());
  EXPECT_FALSE(ParseProcCgroup("0::/a/../../etc\n", v2).has_value());
  EXPECT_FALSE(ParseProcCgroup("garbage\n", v2).has_value());
}

TEST(CgroupCpu, MountsFromMountinfo) {
  std::string dir = TempDir();
  Write(dir + "/cgroup.controllers", "cpuset cpu io memory pids\n");
  CgroupMounts m = ParseCgroupMounts(
      "30 25 0:26 / " + dir + " rw,nosuid - cgroup2 cgroup2 rw\n"
      "31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n"
      "32 25 0:28 /sub /mnt/bind rw - cgroup cgroup rw,cpu\n");
  EXPECT_EQ(m.v2, dir);
  EXPECT_EQ(m.v1_cpu, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(m.v1_cpuacct, "/sys/fs/cgroup/cpu,cpuacct");
}

TEST(CgroupCpu, ReadsQuotaAndThrottlingV2AndAncestorsWithAQuota) {
  std::string root = TempDir();
  std::string proc = TempDir();
  mkdir((root + "/pod").c_str(), 0755);
  mkdir((root + "/pod/ctr").c_str(), 0755);
  Write(root + "/cgroup.controllers", "cpu\n");
  Write(root + "/pod/cpu.max", "50000 100000\n");
  Write(root + "/pod/cpu.stat",
        "usage_usec 9000000\nnr_periods 200\nnr_throttled 150\nthrottled_usec 7000000\n");
  Write(root + "/pod/ctr/cpu.max", "max 100000\n");
  Write(root + "/pod/ctr/cpu.stat", "usage_usec 8000000\nnr_periods 0\nnr_throttled 0\n"
                                    "throttled_usec 0\n");
  mkdir((proc + "/42").c_str(), 0755);
  Write(proc + "/42/cgroup", "0::/pod/ctr\n");
  CgroupCpuReader reader(proc, "30 25 0:26 / " + root + " rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(reader.available());
  std::vector<ProcessCgroup> moved;
  std::vector<CgroupCpuSample> s = reader.Read({42, 43}, 5, &moved);  // 43 has no /proc entry
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].cgroup, "/pod/ctr");  // the leaf always, though it sets no quota
  EXPECT_EQ(s[0].quota_us, kNull);
  EXPECT_EQ(s[1].cgroup, "/pod");
  EXPECT_EQ(s[1].quota_us, 50000);
  EXPECT_EQ(s[1].period_us, 100000);
  EXPECT_EQ(s[1].nr_throttled, 150);
  EXPECT_EQ(s[1].throttled_ns, 7'000'000'000);
  EXPECT_EQ(s[1].usage_ns, 9'000'000'000);
  EXPECT_EQ(s[1].ts_ns, 5);
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0].pid, 42);
  EXPECT_EQ(moved[0].cgroup, "/pod/ctr");
  moved.clear();
  reader.Read({42}, 6, &moved);
  EXPECT_TRUE(moved.empty());  // reported once, until it moves
}

TEST(CgroupCpu, ReadsV1QuotaFiles) {
  std::string cpu = TempDir();
  mkdir((cpu + "/job").c_str(), 0755);
  Write(cpu + "/job/cpu.cfs_quota_us", "30000\n");
  Write(cpu + "/job/cpu.cfs_period_us", "100000\n");
  Write(cpu + "/job/cpu.stat", "nr_periods 80\nnr_throttled 79\nthrottled_time 9100000000\n");
  CgroupCpuReader reader("/proc", "31 25 0:27 / " + cpu + " rw - cgroup cgroup rw,cpu\n");
  std::optional<CgroupCpuSample> s = reader.ReadOne({1, "/job"});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->quota_us, 30000);
  EXPECT_EQ(s->nr_periods, 80);
  EXPECT_EQ(s->throttled_ns, 9'100'000'000);
  EXPECT_EQ(s->usage_ns, kNull);  // cpuacct not mounted
  Write(cpu + "/job/cpu.cfs_quota_us", "-1\n");
  EXPECT_EQ(reader.ReadOne({1, "/job"})->quota_us, kNull);  // no limit
  EXPECT_FALSE(reader.ReadOne({1, "/missing"}).has_value());
}

}  // namespace
}  // namespace gw
