// Every event source this binary has, built in one place (after Pixie's source_registry.h):
// the capture loop starts and polls the list it is given and knows no source by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "sources/host/host_source.h"
#include "sources/source.h"

namespace gw {

struct SourceSetOptions {
  HostOptions host;
  bool cuda = true;                    // the CUDA source (uprobes on libcudart/libcuda)
  std::vector<std::string> cuda_libs;  // extra library files or directories (--cuda-lib)
  uint32_t launch_duty = 1;            // CudaSourceOptions::launch_duty
  bool cuda_row_budget = true;         // CudaSourceOptions::row_budget
  int64_t cuda_row_min_ns = 20'000;    // CudaSourceOptions::call_row_min_ns
};

struct RegisteredSource {
  std::unique_ptr<Source> source;
  // A required source that cannot start ends the trace; another is one note,
  // "<unavailable>: <why>", and the trace goes on without it.
  bool required = false;
  std::string unavailable;
};

// In start order: the host source first, since it owns the tracked set the others share
// (Source::TrackedSetFd).
StatusOr<std::vector<RegisteredSource>> CreateSources(const SourceSetOptions& options);

}  // namespace gw
