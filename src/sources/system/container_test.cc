#include "sources/system/container.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace gw {
namespace {

const std::string kId = "3f4a9c1e2b7d8a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f";
const std::string kUid = "1b2c3d4e-5f60-4a7b-8c9d-0e1f2a3b4c5d";
const std::string kUidEscaped = "1b2c3d4e_5f60_4a7b_8c9d_0e1f2a3b4c5d";

ContainerIdentity Id(std::string runtime, std::string id, std::string pod) {
  return {std::move(runtime), std::move(id), std::move(pod)};
}

TEST(ContainerCgroup, KubernetesSystemdDriver) {
  // containerd, cgroup v2, systemd driver: the pod's slice carries the UID with '_'.
  EXPECT_EQ(ParseContainerCgroup("/kubepods.slice/kubepods-burstable.slice/"
                                 "kubepods-burstable-pod" +
                                 kUidEscaped +
                                 ".slice/"
                                 "cri-containerd-" +
                                 kId + ".scope"),
            Id("containerd", kId, kUid));
  EXPECT_EQ(ParseContainerCgroup("/kubepods.slice/kubepods-besteffort.slice/"
                                 "kubepods-besteffort-pod" +
                                 kUidEscaped + ".slice/crio-" + kId + ".scope"),
            Id("cri-o", kId, kUid));
  // Guaranteed pods have no QoS slice.
  EXPECT_EQ(ParseContainerCgroup("/kubepods.slice/kubepods-pod" + kUidEscaped +
                                 ".slice/"
                                 "docker-" +
                                 kId + ".scope"),
            Id("docker", kId, kUid));
  // The pod's slice alone (the pause container's parent, a process in the pod's cgroup).
  EXPECT_EQ(ParseContainerCgroup("/kubepods.slice/kubepods-burstable.slice/"
                                 "kubepods-burstable-pod" +
                                 kUidEscaped + ".slice"),
            Id("", "", kUid));
}

TEST(ContainerCgroup, KubernetesCgroupfsDriver) {
  EXPECT_EQ(ParseContainerCgroup("/kubepods/burstable/pod" + kUid + "/" + kId), Id("", kId, kUid));
  EXPECT_EQ(ParseContainerCgroup("/kubepods/pod" + kUid + "/" + kId), Id("", kId, kUid));
  EXPECT_EQ(ParseContainerCgroup("/kubepods/besteffort/pod" + kUid), Id("", "", kUid));
  // Static pods' UIDs are a 32-digit hash.
  EXPECT_EQ(ParseContainerCgroup("/kubepods/burstable/pod0123456789abcdef0123456789abcdef/" + kId),
            Id("", kId, "0123456789abcdef0123456789abcdef"));
}

TEST(ContainerCgroup, DockerAndPodman) {
  EXPECT_EQ(ParseContainerCgroup("/system.slice/docker-" + kId + ".scope"), Id("docker", kId, ""));
  EXPECT_EQ(ParseContainerCgroup("/docker/" + kId), Id("docker", kId, ""));
  EXPECT_EQ(ParseContainerCgroup("/machine.slice/libpod-" + kId + ".scope"), Id("podman", kId, ""));
  EXPECT_EQ(ParseContainerCgroup("/user.slice/user-1000.slice/user@1000.service/user.slice/"
                                 "libpod-" +
                                 kId + ".scope/container"),
            Id("podman", kId, ""));
  EXPECT_EQ(ParseContainerCgroup("/libpod_parent/libpod-" + kId), Id("podman", kId, ""));
  // Docker in docker: the innermost container is the process's own.
  std::string inner(64, 'b');
  EXPECT_EQ(ParseContainerCgroup("/docker/" + kId + "/docker/" + inner), Id("docker", inner, ""));
}

TEST(ContainerCgroup, NotContainers) {
  EXPECT_TRUE(ParseContainerCgroup("/").empty());
  EXPECT_TRUE(ParseContainerCgroup("/user.slice/user-1000.slice/session-2.scope").empty());
  EXPECT_TRUE(ParseContainerCgroup("/system.slice/docker.service").empty());
  // conmon's scope is the monitor, not the container.
  EXPECT_TRUE(ParseContainerCgroup("/machine.slice/libpod-conmon-" + kId + ".scope").empty());
  EXPECT_TRUE(ParseContainerCgroup("/system.slice/crio-conmon-" + kId + ".scope").empty());
  // A 32-hex leaf below something that is not docker or kubepods (this machine's own memory
  // cgroup is /process_api/<32 hex>) names no container.
  EXPECT_TRUE(ParseContainerCgroup("/process_api/a34d7b2c62a3445d517590f47787211e").empty());
  EXPECT_TRUE(ParseContainerCgroup("/docker/notanid").empty());
  // pod<uid> only means a pod below kubepods.
  EXPECT_TRUE(ParseContainerCgroup("/mypods/pod" + kUid).empty());
  // Not hex, wrong lengths, uppercase.
  EXPECT_TRUE(
      ParseContainerCgroup("/system.slice/docker-" + std::string(64, 'g') + ".scope").empty());
  EXPECT_TRUE(ParseContainerCgroup("/system.slice/docker-abc.scope").empty());
  EXPECT_TRUE(
      ParseContainerCgroup("/system.slice/docker-" + std::string(65, 'a') + ".scope").empty());
  EXPECT_TRUE(ParseContainerCgroup("/docker/" + std::string(64, 'A')).empty());
  EXPECT_EQ(ParseContainerCgroup("/kubepods/burstable/pod1b2c3d4e-5f60-4a7b-8c9d").pod_uid, "");
}

TEST(ContainerCgroup, HostilePaths) {
  EXPECT_TRUE(ParseContainerCgroup("").empty());
  EXPECT_TRUE(ParseContainerCgroup("docker/" + kId).empty());  // not absolute
  EXPECT_TRUE(ParseContainerCgroup("/docker/../docker/" + kId).empty());
  EXPECT_TRUE(ParseContainerCgroup("/docker/./" + kId).empty());
  EXPECT_TRUE(ParseContainerCgroup("/docker/" + kId + "\n0::/docker/" + kId).empty());
  EXPECT_TRUE(ParseContainerCgroup(std::string("/docker/\0", 9) + kId).empty());
  std::string longer = "/kubepods";
  while (longer.size() <= 4096) longer += "/aaaaaaaa";
  EXPECT_TRUE(ParseContainerCgroup(longer + "/pod" + kUid + "/" + kId).empty());
  // Many components, each checked, none matching: no crash, nothing found.
  std::string many;
  for (int i = 0; i < 1000; ++i) many += "/-pod.slice";
  EXPECT_TRUE(ParseContainerCgroup(many).empty());
  EXPECT_TRUE(ParseContainerCgroup("/kubepods-pod.slice/kubepods-pod_.slice").empty());
  EXPECT_TRUE(ParseContainerCgroup("/docker-.scope/cri-containerd-.scope/crio-").empty());
  EXPECT_TRUE(ParseContainerCgroup("//////").empty());
  EXPECT_TRUE(IsPlainCgroupPath("/a/b.."));
  EXPECT_FALSE(IsPlainCgroupPath("/a/.."));
}

TEST(ContainerCgroup, ProcCgroupFile) {
  // cgroup v1: every hierarchy holds the same container; a damaged line is skipped.
  std::string v1 = "12:pids:/docker/" + kId +
                   "\n"
                   "bad line\n"
                   "4:cpu,cpuacct:/docker/" +
                   kId +
                   "\n"
                   "1:name=systemd:/docker/" +
                   kId + "\n";
  EXPECT_EQ(ParseContainerProcCgroup(v1), Id("docker", kId, ""));
  // cgroup v2: one line.
  EXPECT_EQ(ParseContainerProcCgroup("0::/kubepods.slice/kubepods-burstable.slice/"
                                     "kubepods-burstable-pod" +
                                     kUidEscaped +
                                     ".slice/"
                                     "cri-containerd-" +
                                     kId + ".scope\n"),
            Id("containerd", kId, kUid));
  // A pod line first, the container on a later line: the container's line wins.
  EXPECT_EQ(ParseContainerProcCgroup("5:memory:/kubepods/burstable/pod" + kUid +
                                     "\n"
                                     "4:cpu:/kubepods/burstable/pod" +
                                     kUid + "/" + kId + "\n"),
            Id("", kId, kUid));
  // A path with ':' in it is one path.
  EXPECT_TRUE(ParseContainerProcCgroup("0::/a:b/docker/x\n").empty());
  EXPECT_TRUE(ParseContainerProcCgroup("").empty());
  EXPECT_TRUE(
      ParseContainerProcCgroup("9:memory:/process_api/a34d7b2c62a3445d517590f47787211e\n").empty());
}

TEST(ContainerCgroup, NsPid) {
  EXPECT_EQ(ParseNsPid("Name:\tpython3\nTgid:\t4242\nNSpid:\t4242\t17\t1\nNSpgid:\t4242\n"), 1);
  EXPECT_EQ(ParseNsPid("Name:\tpython3\nNSpid:\t4242\n"), 4242);
  EXPECT_EQ(ParseNsPid("NSpid:\t4242\t7"), 7);
  EXPECT_EQ(ParseNsPid("Name:\tx\n"), 0);
  EXPECT_EQ(ParseNsPid("NSpid:\t\n"), 0);
  EXPECT_EQ(ParseNsPid("NSpid:\t12x\n"), 0);
  EXPECT_EQ(ParseNsPid("NSpid:\t99999999999999\n"), 0);
  EXPECT_EQ(ParseNsPid(""), 0);
}

TEST(ContainerCgroup, DownwardApiEnvironmentKeepsOnlyThePodsNames) {
  using namespace std::string_literals;
  PodMetadata m = ParseDownwardApiEnv(
      "PATH=/usr/bin\0AWS_SECRET_ACCESS_KEY=hunter2\0"
      "POD_NAME=train-0\0POD_NAMESPACE=ml-team\0"s);
  EXPECT_EQ(m.name, "train-0");
  EXPECT_EQ(m.namespace_name, "ml-team");
  m = ParseDownwardApiEnv("MY_POD_NAME=web-7d9f.x\0MY_POD_NAMESPACE=default"s);  // no final NUL
  EXPECT_EQ(m.name, "web-7d9f.x");
  EXPECT_EQ(m.namespace_name, "default");
  // Values that are not Kubernetes names are dropped, not cleaned: no secret rides in one.
  m = ParseDownwardApiEnv("POD_NAME=Train 0;rm -rf /\0POD_NAMESPACE=a.b\0"s);
  EXPECT_EQ(m.name, "");
  EXPECT_EQ(m.namespace_name, "");
  m = ParseDownwardApiEnv("POD_NAME=\0POD_NAMESPACE=-x\0POD_NAMEX=y\0XPOD_NAME=z\0"s);
  EXPECT_EQ(m.name, "");
  EXPECT_EQ(m.namespace_name, "");
  EXPECT_EQ(ParseDownwardApiEnv("POD_NAME=" + std::string(254, 'a')).name, "");
  EXPECT_EQ(ParseDownwardApiEnv("POD_NAME=" + std::string(253, 'a')).name, std::string(253, 'a'));
  EXPECT_EQ(ParseDownwardApiEnv("").name, "");
  EXPECT_EQ(ParseDownwardApiEnv("\0\0\0"s).name, "");
}

TEST(ContainerCgroup, NormalizeUserIds) {
  EXPECT_EQ(*NormalizeContainerId("3F4A9C"), "3f4a9c");
  EXPECT_EQ(*NormalizeContainerId("containerd://" + kId), kId);
  EXPECT_EQ(*NormalizeContainerId("docker://3f4a"), "3f4a");
  EXPECT_FALSE(NormalizeContainerId("").ok());
  EXPECT_FALSE(NormalizeContainerId("xyz").ok());
  EXPECT_FALSE(NormalizeContainerId(kId + "0").ok());
  EXPECT_EQ(*NormalizePodUid(kUidEscaped), kUid);
  EXPECT_EQ(*NormalizePodUid("1B2C3D4E-5F60-4A7B-8C9D-0E1F2A3B4C5D"), kUid);
  EXPECT_FALSE(NormalizePodUid("1b2c3d4e").ok());
  EXPECT_FALSE(NormalizePodUid("../../etc").ok());
}

TEST(ContainerCgroup, FindProcessesUnderAProcRoot) {
  char tmpl[] = "/tmp/gw_container_test.XXXXXX";
  std::string root = mkdtemp(tmpl);
  auto proc = [&](int pid, const std::string& cgroup) {
    std::string dir = root + "/" + std::to_string(pid);
    mkdir(dir.c_str(), 0755);
    std::ofstream(dir + "/cgroup") << cgroup;
  };
  std::string other = "3f4a" + std::string(60, 'c');
  proc(10, "0::/docker/" + kId + "\n");
  proc(11, "0::/docker/" + kId + "\n");
  proc(12, "0::/kubepods/burstable/pod" + kUid + "/" + std::string(64, 'e') + "\n");
  proc(13, "0::/docker/" + other + "\n");
  proc(14, "0::/user.slice\n");
  mkdir((root + "/self").c_str(), 0755);

  StatusOr<ContainerMatch> m = FindContainerProcesses(root, {kId.substr(0, 12)}, {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->pids, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(m->containers, std::set<std::string>{kId});

  m = FindContainerProcesses(root, {}, {kUid});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->pids, (std::vector<int32_t>{12}));

  // "3f4a" is the start of two containers: ambiguous, like docker's short ids.
  m = FindContainerProcesses(root, {"3f4a"}, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("matches 2 containers"), std::string::npos);

  m = FindContainerProcesses(root, {"0000"}, {});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("no process runs in a container"), std::string::npos);
  EXPECT_NE(m.status().message().find("3f4a9c1e2b7d"), std::string::npos);  // what was seen

  m = FindContainerProcesses(root, {}, {"00000000-0000-0000-0000-000000000000"});
  ASSERT_FALSE(m.ok());
  std::string cmd = "rm -rf " + root;
  EXPECT_EQ(std::system(cmd.c_str()), 0);
}

}  // namespace
}  // namespace gw
