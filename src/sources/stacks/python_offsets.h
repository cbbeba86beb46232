// Which CPython a process runs, where its _PyRuntime is, and the struct offsets the BPF frame
// walker (stacks.bpf.h) and the code-object reader (src/symbolize) need for that version.
//
// Sources of offsets, in order: 3.13+ `_Py_DebugOffsets` read from the start of _PyRuntime in
// the live process (checked against its "xdebugpy" cookie and version); else the frozen table
// below, verified with tools/py_offsets_probe.sh against the real 3.10.13, 3.11.7, 3.12.1 and
// 3.13.0 headers. Patch releases of one minor version keep these layouts (CPython keeps
// internal struct layouts stable within a minor release for debuggers; the GPU machine runs
// 3.12.3 with the 3.12 table).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sources/stacks/stacks_abi.h"
#include "symbolize/python_code.h"

namespace gw {

struct PythonOffsets {
  int minor = 0;          // 10 → CPython 3.10
  gw_py_offsets bpf{};    // runtime_addr left 0: per process
  PythonCodeLayout code;  // for the symbolizer
  std::string source;     // "table 3.12" or "_Py_DebugOffsets 3.13.0"
};

// Verified table for 3.10–3.13; NotFound for other versions.
StatusOr<PythonOffsets> PythonOffsetsForVersion(int minor);

// Parses a 3.13 _Py_DebugOffsets block (the first bytes of _PyRuntime). Fails on a wrong
// cookie or a version whose layout this build does not know.
StatusOr<PythonOffsets> PythonOffsetsFromDebugOffsets(const std::string& block);
inline constexpr size_t kDebugOffsetsReadSize = 8 + 8 * 72;  // cookie + 72 fields (3.13)

struct PythonProcess {
  int32_t pid = 0;
  int minor = 0;
  std::string version;      // "3.12.3" when known (Py_Version), else "3.12"
  std::string interpreter;  // file defining _PyRuntime: libpython3.X.so… or the executable
  uint64_t runtime_address = 0;
  PythonOffsets offsets;  // offsets.bpf.runtime_addr = runtime_address
};

// Finds the CPython interpreter in a process: the executable or a mapped libpython defining
// _PyRuntime (.dynsym or .symtab), its load address from /proc/<pid>/maps, the version from
// the file name or Py_Version, and the offsets. NotFound when the process is not CPython.
StatusOr<PythonProcess> DiscoverPythonProcess(int32_t pid, const std::string& proc_root = "/proc");

// For `gpuwhy check`: one line per running process whose executable is named python*, saying
// whether `trace --stack` can walk its Python frames, e.g.
//   "pid 4242 python3.12: Python frames walkable (CPython 3.12.3, table 3.12)"
//   "pid 4243 python3.14: Python frames not walkable: _Py_DebugOffsets of CPython 3.14: …"
std::vector<std::string> DescribePythonProcesses(const std::string& proc_root = "/proc");

}  // namespace gw
