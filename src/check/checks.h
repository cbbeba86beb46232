// The checks behind `gpuwhy check`: can this machine trace? Kernel, BTF, tracefs, uprobes,
// tracepoints, privileges, a real BPF program load, ptrace scope, CUDA libraries and the
// processes that map them, the NVIDIA driver and GPUs, NVML and GPM, CPython versions.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "check/check_report.h"

namespace gw {

struct CheckOptions {
  std::vector<std::string> cuda_libs;  // more library files or directories to look at
  std::string nvml_lib;                // "" = libnvidia-ml.so.1
};

// Runs every check in this process (as root it may mount tracefs, and it loads a BPF program).
CheckReport RunChecks(const CheckOptions& options);

// RunChecks in a forked child that can print nothing on this process's stdout and cannot take
// it down; the report comes back over a pipe. For the MCP server, whose stdout is the protocol
// channel. An error when the child does not finish within timeout_ms.
StatusOr<CheckReport> RunChecksInChild(const CheckOptions& options, int timeout_ms);

}  // namespace gw
