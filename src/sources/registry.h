// Every event source this binary has, built in one place (after Pixie's source_registry.h):
// the capture loop starts and polls the list it is given and knows no source by name.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "sources/cuda/cuda_options.h"
#include "sources/host/host_source.h"
#include "sources/source.h"

namespace gw {

// What the sources are built with, one struct per source, passed through unchanged (the
// CLI fills them inside TracerOptions::sources).
struct SourceSetOptions {
  HostOptions host;
  bool cuda_enabled = true;  // start the CUDA source (uprobes on libcudart/libcuda)
  CudaSourceOptions cuda;
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
