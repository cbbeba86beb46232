#include "discover/cuda_libs.h"

#include <dirent.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <regex>

#include "base/proc_status.h"
#include "elf/elf_file.h"

namespace gw {

namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string Canonical(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) != nullptr) return buf;
  return path;
}

const char* const kStandardDirs[] = {
    "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib",
    "/usr/lib/wsl/lib"};

void ScanDir(const std::string& dir, std::map<std::string, CudaLibrary>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    std::string full = dir + "/" + e->d_name;
    CudaLibKind kind;
    if (!ClassifyCudaLibrary(full, &kind)) continue;
    std::string canon = Canonical(full);
    struct stat st;
    if (stat(canon.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    auto [it, inserted] = out->try_emplace(canon);
    if (inserted) {
      it->second.kind = kind;
      it->second.path = canon;
    }
  }
  closedir(d);
}

// Entries of `dir` (names only, "." and ".." left out), sorted.
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

bool HoldsCudaRuntime(const std::string& dir) {
  for (const std::string& name : ListDir(dir)) {
    if (name.rfind("libcudart.so", 0) == 0 || name.rfind("libnccl.so", 0) == 0) return true;
  }
  return false;
}

bool HoldsCudaLibrary(const std::string& dir) {
  CudaLibKind kind;
  for (const std::string& name : ListDir(dir)) {
    if (ClassifyCudaLibrary(name, &kind)) return true;
  }
  return false;
}

std::string Dirname(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

std::vector<std::string> CudaLibDirsNextTo(const std::string& program, const char* path_env) {
  std::string found;
  if (program.find('/') != std::string::npos) {
    found = program;
  } else {
    std::string path = path_env != nullptr ? path_env : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= path.size()) {
      size_t colon = path.find(':', start);
      std::string dir = path.substr(start, colon == std::string::npos ? std::string::npos
                                                                        : colon - start);
      std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
      if (access(candidate.c_str(), X_OK) == 0) {
        found = candidate;
        break;
      }
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  std::vector<std::string> dirs;
  if (found.empty()) return dirs;
  // A native program's own search path (DT_RUNPATH/DT_RPATH, $ORIGIN = its directory): the
  // CUDA libraries it will map at exec, attached before it runs.
  if (StatusOr<std::unique_ptr<ElfFile>> elf = ElfFile::Open(Canonical(found)); elf.ok()) {
    std::string origin = Dirname(Canonical(found));
    std::string search = (*elf)->LibrarySearchPath();
    size_t start = 0;
    while (start < search.size()) {
      size_t colon = search.find(':', start);
      std::string dir = search.substr(start, colon == std::string::npos ? std::string::npos
                                                                         : colon - start);
      for (const char* token : {"$ORIGIN", "${ORIGIN}"}) {
        if (dir.rfind(token, 0) == 0) dir = origin + dir.substr(std::strlen(token));
      }
      if (!dir.empty() && dir[0] == '/' && HoldsCudaLibrary(dir)) dirs.push_back(dir);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  // A venv's bin/python is a symlink to the system interpreter: the venv is where it was
  // found, the system's site-packages where it points.
  std::set<std::string> prefixes = {Dirname(Dirname(found)), Dirname(Dirname(Canonical(found)))};
  for (const std::string& prefix : prefixes) {
    std::string lib = prefix + "/lib";
    for (const std::string& py : ListDir(lib)) {
      if (py.rfind("python3", 0) != 0) continue;
      std::string nvidia = lib + "/" + py + "/site-packages/nvidia";
      for (const std::string& pkg : ListDir(nvidia)) {
        std::string dir = nvidia + "/" + pkg + "/lib";
        if (HoldsCudaRuntime(dir)) dirs.push_back(dir);
      }
    }
  }
  return dirs;
}

bool ClassifyCudaLibrary(const std::string& path, CudaLibKind* kind) {
  std::string base = Basename(path);
  if (base.rfind("libcudart.so", 0) == 0) {
    *kind = CudaLibKind::kRuntime;
    return true;
  }
  if (base == "libcuda.so" || base.rfind("libcuda.so.", 0) == 0) {
    *kind = CudaLibKind::kDriver;
    return true;
  }
  if (base.rfind("libnccl.so", 0) == 0) {
    *kind = CudaLibKind::kNccl;
    return true;
  }
  return false;
}

std::vector<int32_t> ListPids(const std::string& proc_root) {
  std::vector<int32_t> pids;
  DIR* d = opendir(proc_root.c_str());
  if (d == nullptr) return pids;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    long pid = strtol(e->d_name, &end, 10);
    if (end != e->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<int32_t>(pid));
  }
  closedir(d);
  return pids;
}

std::vector<std::string> MappedFiles(int32_t pid, const std::string& proc_root) {
  std::vector<std::string> files;
  std::ifstream maps(proc_root + "/" + std::to_string(pid) + "/maps");
  std::string line;
  std::string last;
  while (std::getline(maps, line)) {
    size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    const std::string deleted = " (deleted)";
    if (path.size() > deleted.size() &&
        path.compare(path.size() - deleted.size(), deleted.size(), deleted) == 0) {
      continue;
    }
    if (path == last) continue;
    last = path;
    files.push_back(path);
  }
  return files;
}

bool MapsScanFilter::Changed(int32_t pid, const std::string& proc_root) {
  int64_t vm_lib = ReadProcStatusKb(proc_root, pid, "VmLib");
  auto [it, inserted] = vm_lib_kb_.try_emplace(pid, vm_lib);
  if (inserted) return vm_lib >= 0;
  if (it->second == vm_lib) return false;
  it->second = vm_lib;
  return vm_lib >= 0;
}

void MapsScanFilter::Retain(const std::vector<int32_t>& live) {
  std::unordered_map<int32_t, int64_t> kept;
  for (int32_t pid : live) {
    auto it = vm_lib_kb_.find(pid);
    if (it != vm_lib_kb_.end()) kept.emplace(pid, it->second);
  }
  vm_lib_kb_ = std::move(kept);
}

std::vector<CudaLibrary> FindCudaLibraries(const std::vector<std::string>& extra_paths,
                                           const std::string& proc_root, MapsScanFilter* filter) {
  std::map<std::string, CudaLibrary> found;
  std::vector<int32_t> pids = ListPids(proc_root);
  for (int32_t pid : pids) {
    if (filter != nullptr && !filter->Changed(pid, proc_root)) continue;
    for (const std::string& file : MappedFiles(pid, proc_root)) {
      CudaLibKind kind;
      if (!ClassifyCudaLibrary(file, &kind)) continue;
      // Resolve through the process's root so containers' paths are found too.
      std::string via_root = proc_root + "/" + std::to_string(pid) + "/root" + file;
      std::string path = access(file.c_str(), R_OK) == 0 ? Canonical(file) : via_root;
      auto [it, inserted] = found.try_emplace(path);
      if (inserted) {
        it->second.kind = kind;
        it->second.path = path;
      }
      it->second.pids.insert(pid);
    }
  }
  if (filter != nullptr) filter->Retain(pids);
  for (const char* dir : kStandardDirs) ScanDir(dir, &found);
  for (const std::string& extra : extra_paths) {
    struct stat st;
    if (stat(extra.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      ScanDir(extra, &found);
    } else {
      CudaLibKind kind = CudaLibKind::kRuntime;
      if (!ClassifyCudaLibrary(extra, &kind)) {
        // An explicitly named file is taken as given; guess its kind from "cudart".
        kind = Basename(extra).find("cudart") != std::string::npos ? CudaLibKind::kRuntime
               : Basename(extra).find("nccl") != std::string::npos ? CudaLibKind::kNccl
                                                                   : CudaLibKind::kDriver;
      }
      std::string canon = Canonical(extra);
      auto [it, inserted] = found.try_emplace(canon);
      if (inserted) {
        it->second.kind = kind;
        it->second.path = canon;
      }
    }
  }
  std::vector<CudaLibrary> out;
  for (auto& [path, lib] : found) out.push_back(std::move(lib));
  return out;
}

std::string PythonVersionOf(int32_t pid, const std::string& proc_root) {
  static const std::regex kLib(R"(libpython(3\.[0-9]+))");
  static const std::regex kExe(R"(python(3\.[0-9]+))");
  std::smatch m;
  for (const std::string& file : MappedFiles(pid, proc_root)) {
    std::string base = Basename(file);
    if (std::regex_search(base, m, kLib)) return m[1].str();
  }
  char buf[PATH_MAX];
  std::string exe_link = proc_root + "/" + std::to_string(pid) + "/exe";
  ssize_t n = readlink(exe_link.c_str(), buf, sizeof buf - 1);
  if (n > 0) {
    buf[n] = '\0';
    std::string base = Basename(buf);
    if (std::regex_search(base, m, kExe)) return m[1].str();
  }
  return "";
}

}  // namespace gw
