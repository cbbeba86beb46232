// Which container and Kubernetes pod a process runs in, read from its cgroup path, and its pid
// inside its own PID namespace: what a user of `docker exec`/`kubectl exec` sees and can act on.
// Pure parsing plus one /proc scan (FindContainerProcesses, for trace --container/--pod).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace gw {

// A cgroup path as the kernel prints it: absolute, at most 4096 bytes, no "." or ".." parts, no
// newline or NUL. Anything else (a damaged or hostile file under a test root) is not followed.
bool IsPlainCgroupPath(std::string_view path);

struct ContainerIdentity {
  // "docker", "containerd", "cri-o", "podman", or "" where the path names no runtime (the
  // cgroupfs driver's /kubepods/<qos>/pod<uid>/<id>).
  std::string runtime;
  std::string container_id;  // lowercase hex, 12-64 digits; "" = not in a container we know
  std::string pod_uid;       // "8-4-4-4-12" (systemd's '_' escaping undone) or 32 hex (static
                             // pods); "" = not in a Kubernetes pod
  bool empty() const { return container_id.empty() && pod_uid.empty(); }
  bool operator==(const ContainerIdentity&) const = default;
};

// The container and pod one cgroup path names: the runtimes' scope names
// (cri-containerd-<id>.scope, crio-<id>.scope, docker-<id>.scope, libpod-<id>.scope), the plain
// cgroupfs forms (/docker/<id>, /libpod_parent/libpod-<id>, /kubepods/…/pod<uid>/<id>) and the
// pod's slice (kubepods-<qos>-pod<uid>.slice). The innermost container wins (docker in docker).
// A path that is not plain (IsPlainCgroupPath) names nothing.
ContainerIdentity ParseContainerCgroup(std::string_view cgroup_path);

// The same for a /proc/PID/cgroup file: the first line whose path names a container (else a
// pod); every hierarchy of one process names the same container.
ContainerIdentity ParseContainerProcCgroup(const std::string& proc_pid_cgroup);

// The innermost pid of the "NSpid:" line of /proc/PID/status (the pid inside the process's own
// PID namespace); 0 when the line is missing or damaged.
int32_t ParseNsPid(const std::string& proc_pid_status);

// The pod's name and namespace a Kubernetes pod spec may hand its containers through the
// downward API (env: POD_NAME / POD_NAMESPACE, or MY_POD_NAME / MY_POD_NAMESPACE as the
// Kubernetes documentation's example names them), from a /proc/PID/environ image. Only those
// variables are looked at, and only values that are valid Kubernetes names are kept (a pod
// name: lowercase letters, digits, '-' and '.', at most 253; a namespace: lowercase letters,
// digits and '-', at most 63); every other variable of the environment is skipped unread (it may
// hold secrets) and nothing else is returned.
struct PodMetadata {
  std::string name;
  std::string namespace_name;
};
PodMetadata ParseDownwardApiEnv(std::string_view proc_pid_environ);

// A user's container id as `docker ps`/`crictl ps`/`kubectl get pod -o yaml` print it, made
// comparable: "containerd://ABC…" and "docker://…" lose the scheme, letters become lowercase.
// Error when what is left is not 1-64 hex digits.
StatusOr<std::string> NormalizeContainerId(std::string_view text);
// A pod UID with '-' or systemd's '_' between its groups, in lowercase with '-'. Error when it
// is not 8-4-4-4-12 hex digits or 32 hex digits.
StatusOr<std::string> NormalizePodUid(std::string_view text);

// The processes under `proc_root` in a container whose id starts with one of
// `container_prefixes` (normalized) or in one of the pods `pod_uids` (normalized).
struct ContainerMatch {
  std::vector<int32_t> pids;
  std::set<std::string> containers;  // full ids matched
  std::set<std::string> pods;        // pod UIDs matched
};
// Fails, saying what was looked for, when a selector matches no process, and when a container
// prefix matches more than one container (as `docker` does for an ambiguous short id).
StatusOr<ContainerMatch> FindContainerProcesses(const std::string& proc_root,
                                                const std::vector<std::string>& container_prefixes,
                                                const std::vector<std::string>& pod_uids);

}  // namespace gw
