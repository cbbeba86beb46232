// Discovery: which CUDA libraries exist on this machine and which processes map them.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace gw {

// kNccl: libnccl.so* (NCCL, the collectives library PyTorch ships under
// site-packages/nvidia/nccl/lib).
enum class CudaLibKind { kRuntime, kDriver, kNccl };

struct CudaLibrary {
  CudaLibKind kind = CudaLibKind::kRuntime;
  std::string path;          // as mapped / found (canonical, symlinks resolved)
  std::set<int32_t> pids;    // processes that map it (empty for a library only found on disk)
};

// Classifies a path by file name: libcudart.so* → runtime, libcuda.so* → driver,
// libnccl.so* → NCCL.
bool ClassifyCudaLibrary(const std::string& path, CudaLibKind* kind);

// Mapped libraries of one process from /proc/<pid>/maps (file-backed, deduplicated).
std::vector<std::string> MappedFiles(int32_t pid, const std::string& proc_root = "/proc");

// For scans repeated every second (a tracer's rediscovery): which processes' maps to read
// again. A process's maps are read when it is first seen or when its shared-library code
// (VmLib in /proc/<pid>/status: an exec, a dlopen) changed since; otherwise the libraries it
// maps were found by an earlier scan. Reading maps costs in proportion to the mappings (a
// PyTorch process has thousands); reading status does not.
class MapsScanFilter {
 public:
  // True when `pid`'s maps should be read now; remembers what it saw. Processes not listed in
  // the latest scan are forgotten by Retain.
  bool Changed(int32_t pid, const std::string& proc_root);
  void Retain(const std::vector<int32_t>& live);

 private:
  std::unordered_map<int32_t, int64_t> vm_lib_kb_;  // -1: no VmLib line (kernel thread)
};

// Every CUDA library mapped by a running process, plus copies in standard paths and in
// `extra_paths` (files or directories, e.g. from --cuda-lib). One entry per distinct file.
// With `filter`, only processes it says changed are read: the others' libraries and pids are
// not in the result (a repeated scan wants only what is new).
std::vector<CudaLibrary> FindCudaLibraries(const std::vector<std::string>& extra_paths = {},
                                           const std::string& proc_root = "/proc",
                                           MapsScanFilter* filter = nullptr);

// The CPython version a process runs ("3.12"), from its mapped libpython or its executable
// name; "" when it is not a Python process.
std::string PythonVersionOf(int32_t pid, const std::string& proc_root = "/proc");

// Folders of pip-installed CUDA runtimes in the Python environment `program` belongs to:
// `program` looked up in `path_env` (like execvp), then <its bin folder>/../lib/python3*/
// site-packages/nvidia/*/lib (as found and with symlinks resolved) that hold a libcudart or a
// libnccl, and
// the folders of the program's own DT_RUNPATH/DT_RPATH ($ORIGIN expanded) that hold a CUDA
// runtime or driver. How `trace -- python3 train.py` in a venv, or `trace -- ./app` linked
// against its own libcudart, attaches before the job's first CUDA call.
std::vector<std::string> CudaLibDirsNextTo(const std::string& program, const char* path_env);

std::vector<int32_t> ListPids(const std::string& proc_root = "/proc");

}  // namespace gw
