#include "sources/system/container.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <map>

#include "sources/system/host_info.h"

namespace gw {

namespace {

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
}

bool IsContainerId(std::string_view s) { return s.size() >= 12 && s.size() <= 64 && IsHex(s); }

bool ConsumePrefix(std::string_view* s, std::string_view prefix) {
  if (s->substr(0, prefix.size()) != prefix) return false;
  s->remove_prefix(prefix.size());
  return true;
}

bool ConsumeSuffix(std::string_view* s, std::string_view suffix) {
  if (s->size() < suffix.size() || s->substr(s->size() - suffix.size()) != suffix) return false;
  s->remove_suffix(suffix.size());
  return true;
}

// "0123abcd-…" or "0123abcd_…" (systemd escapes '-' in a unit name as '_') or 32 hex digits, in
// lowercase with '-'; "" when it is neither.
std::string PodUid(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '_') c = '-';
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (out.size() == 32 && IsHex(out)) return out;
  if (out.size() != 36) return "";
  for (size_t i = 0; i < out.size(); ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? out[i] != '-' : !IsHex(std::string_view(&out[i], 1))) return "";
  }
  return out;
}

// A scope or plain cgroup name a runtime gives one container: the runtime, and the id in *id.
std::string RuntimeScope(std::string_view part, std::string* id) {
  static const std::pair<std::string_view, std::string_view> kScopes[] = {
      {"cri-containerd-", "containerd"},
      {"crio-", "cri-o"},
      {"docker-", "docker"},
      {"libpod-", "podman"}};
  std::string_view name = part;
  bool scope = ConsumeSuffix(&name, ".scope");
  for (const auto& [prefix, runtime] : kScopes) {
    std::string_view rest = name;
    if (!ConsumePrefix(&rest, prefix)) continue;
    // crio-conmon-<id>.scope and libpod-conmon-<id>.scope hold the monitor, not the container.
    if (!IsContainerId(rest)) return "";
    // Only podman's cgroupfs driver names a container without ".scope" (libpod_parent/libpod-…).
    if (!scope && runtime != "podman") return "";
    *id = std::string(rest);
    return std::string(runtime);
  }
  return "";
}

std::vector<std::string_view> Parts(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return parts;
}

}  // namespace

bool IsPlainCgroupPath(std::string_view p) {
  if (p.empty() || p[0] != '/' || p.size() > 4096) return false;
  if (p.find('\n') != std::string_view::npos || p.find('\0') != std::string_view::npos) {
    return false;
  }
  for (std::string_view part : Parts(p)) {
    if (part == "." || part == "..") return false;
  }
  return true;
}

ContainerIdentity ParseContainerCgroup(std::string_view path) {
  ContainerIdentity out;
  if (!IsPlainCgroupPath(path)) return out;
  std::vector<std::string_view> parts = Parts(path);
  bool kubepods = false;  // below a kubepods cgroup: pod<uid> and a bare id mean something
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string_view part = parts[i];
    std::string id;
    if (std::string runtime = RuntimeScope(part, &id); !runtime.empty()) {
      out.runtime = runtime;
      out.container_id = id;
      continue;
    }
    std::string_view slice = part;
    if (ConsumePrefix(&slice, "kubepods")) {
      kubepods = true;
      // kubepods-burstable-pod<uid>.slice, kubepods-pod<uid>.slice (systemd driver)
      size_t pod = slice.rfind("-pod");
      if (pod != std::string_view::npos && ConsumeSuffix(&slice, ".slice")) {
        if (std::string uid = PodUid(slice.substr(pod + 4)); !uid.empty()) out.pod_uid = uid;
      }
      continue;
    }
    std::string_view pod = part;
    if (kubepods && ConsumePrefix(&pod, "pod")) {
      if (std::string uid = PodUid(pod); !uid.empty()) {
        out.pod_uid = uid;
        continue;
      }
    }
    // /docker/<id> (docker's cgroupfs driver) and /kubepods/<qos>/pod<uid>/<id>.
    if (IsContainerId(part) && part.size() == 64 && i > 0) {
      if (parts[i - 1] == "docker") {
        out.runtime = "docker";
        out.container_id = std::string(part);
      } else if (kubepods && !out.pod_uid.empty()) {
        out.runtime = "";
        out.container_id = std::string(part);
      }
    }
  }
  return out;
}

ContainerIdentity ParseContainerProcCgroup(const std::string& text) {
  ContainerIdentity pod_only;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + start, end - start);
    start = end + 1;
    // hierarchy-id:controllers:path; the path may itself hold ':'.
    size_t a = line.find(':');
    size_t b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos) continue;
    ContainerIdentity id = ParseContainerCgroup(line.substr(b + 1));
    if (!id.container_id.empty()) return id;
    if (!id.pod_uid.empty() && pod_only.empty()) pod_only = id;
  }
  return pod_only;
}

int32_t ParseNsPid(const std::string& status) {
  size_t at = status.rfind("\nNSpid:", std::string::npos);
  if (at == std::string::npos) {
    if (status.rfind("NSpid:", 0) != 0) return 0;
    at = 0;
  } else {
    ++at;
  }
  size_t end = status.find('\n', at);
  std::string line = status.substr(at + 6, end == std::string::npos ? end : end - at - 6);
  int64_t last = 0;
  size_t i = 0;
  bool any = false;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    int64_t v = 0;
    size_t digits = 0;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9' && digits < 10) {
      v = v * 10 + (line[i] - '0');
      ++i;
      ++digits;
    }
    if (digits == 0 || (i < line.size() && line[i] != ' ' && line[i] != '\t')) return 0;
    last = v;
    any = true;
  }
  if (!any || last <= 0 || last > INT32_MAX) return 0;
  return static_cast<int32_t>(last);
}

PodMetadata ParseDownwardApiEnv(std::string_view environ) {
  PodMetadata out;
  auto valid = [](std::string_view v, size_t max, bool dots) {
    if (v.empty() || v.size() > max) return false;
    for (char c : v) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (dots && c == '.');
      if (!ok) return false;
    }
    return v.front() != '-' && v.front() != '.' && v.back() != '-' && v.back() != '.';
  };
  while (!environ.empty()) {
    size_t end = environ.find('\0');
    std::string_view entry = environ.substr(0, end);
    environ.remove_prefix(end == std::string_view::npos ? environ.size() : end + 1);
    // Only the names below are compared; nothing of any other entry is kept.
    std::string_view value = entry;
    if (ConsumePrefix(&value, "POD_NAME=") || ConsumePrefix(&value, "MY_POD_NAME=")) {
      if (valid(value, 253, true)) out.name = std::string(value);
    } else if (ConsumePrefix(&value, "POD_NAMESPACE=") ||
               ConsumePrefix(&value, "MY_POD_NAMESPACE=")) {
      if (valid(value, 63, false)) out.namespace_name = std::string(value);
    }
  }
  return out;
}

StatusOr<std::string> NormalizeContainerId(std::string_view text) {
  std::string_view s = text;
  if (size_t scheme = s.find("://"); scheme != std::string_view::npos) s.remove_prefix(scheme + 3);
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (out.empty() || out.size() > 64 || !IsHex(out)) {
    return InvalidArgument("--container " + std::string(text.substr(0, 80)) +
                           ": not a container id (1 to 64 hex digits, as docker ps or crictl ps "
                           "print it; a containerd:// or docker:// prefix is allowed)");
  }
  return out;
}

StatusOr<std::string> NormalizePodUid(std::string_view text) {
  std::string uid = PodUid(text.substr(0, 64));
  if (uid.empty() || text.size() > 64) {
    return InvalidArgument("--pod " + std::string(text.substr(0, 80)) +
                           ": not a pod UID (8-4-4-4-12 hex digits, as kubectl get pod NAME -o "
                           "jsonpath='{.metadata.uid}' prints it)");
  }
  return uid;
}

StatusOr<ContainerMatch> FindContainerProcesses(const std::string& proc_root,
                                                const std::vector<std::string>& container_prefixes,
                                                const std::vector<std::string>& pod_uids) {
  ContainerMatch out;
  DIR* dir = opendir(proc_root.c_str());
  if (dir == nullptr) return ErrnoStatus("open " + proc_root, errno);
  std::map<std::string, std::set<std::string>> by_prefix;  // prefix -> container ids it matched
  std::set<std::string> pods_seen;
  std::set<std::string> all_containers;
  while (dirent* d = readdir(dir)) {
    std::string name = d->d_name;
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit) || name.size() > 9) {
      continue;
    }
    ContainerIdentity id =
        ParseContainerProcCgroup(ReadSmallFile(proc_root + "/" + name + "/cgroup"));
    if (id.empty()) continue;
    if (!id.container_id.empty()) all_containers.insert(id.container_id);
    bool match = false;
    for (const std::string& prefix : container_prefixes) {
      if (!id.container_id.empty() && id.container_id.compare(0, prefix.size(), prefix) == 0) {
        by_prefix[prefix].insert(id.container_id);
        out.containers.insert(id.container_id);
        match = true;
      }
    }
    for (const std::string& uid : pod_uids) {
      if (id.pod_uid == uid) {
        pods_seen.insert(uid);
        out.pods.insert(uid);
        match = true;
      }
    }
    if (match) out.pids.push_back(static_cast<int32_t>(std::stol(name)));
  }
  closedir(dir);
  for (const std::string& prefix : container_prefixes) {
    auto it = by_prefix.find(prefix);
    if (it == by_prefix.end()) {
      std::string known;
      size_t n = 0;
      for (const std::string& c : all_containers) {
        if (n++ == 5) {
          known += ", …";
          break;
        }
        known += (known.empty() ? "" : ", ") + c.substr(0, 12);
      }
      return NotFound("--container " + prefix +
                      ": no process runs in a container whose id "
                      "starts with it" +
                      (known.empty() ? std::string(" (no process here runs in a container gpuwhy "
                                                   "recognizes from its cgroup)")
                                     : " (containers seen: " + known + ")") +
                      " — hint: docker ps --no-trunc or crictl ps print the ids");
    }
    if (it->second.size() > 1) {
      std::string ids;
      for (const std::string& c : it->second) ids += (ids.empty() ? "" : ", ") + c.substr(0, 16);
      return InvalidArgument("--container " + prefix + ": matches " +
                             std::to_string(it->second.size()) + " containers (" + ids +
                             ") — hint: give more of the id");
    }
  }
  for (const std::string& uid : pod_uids) {
    if (pods_seen.count(uid) == 0) {
      return NotFound("--pod " + uid +
                      ": no process runs in a pod with this UID (read from the kubepods cgroups) "
                      "— hint: kubectl get pod NAME -o jsonpath='{.metadata.uid}' prints it; on "
                      "the pod's node");
    }
  }
  std::sort(out.pids.begin(), out.pids.end());
  return out;
}

}  // namespace gw
