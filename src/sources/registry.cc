#include "sources/registry.h"

#include <algorithm>

#include "sources/cuda/cuda_source.h"

namespace gw {

StatusOr<std::vector<RegisteredSource>> CreateSources(const SourceSetOptions& options) {
  std::vector<RegisteredSource> sources;
  ASSIGN_OR_RETURN(std::unique_ptr<HostSource> host, HostSource::Create(options.host));
  sources.push_back({std::move(host), /*required=*/true, ""});
  if (options.cuda) {
    CudaSourceOptions cuda;
    cuda.libraries = options.cuda_libs;
    cuda.launch_duty = options.launch_duty;
    cuda.row_budget = options.cuda_row_budget;
    cuda.call_row_min_ns = static_cast<uint64_t>(std::max<int64_t>(0, options.cuda_row_min_ns));
    ASSIGN_OR_RETURN(std::unique_ptr<CudaSource> source, CudaSource::Create(cuda));
    // Without CUDA probes the host side still explains a lot; the note says what is missing.
    sources.push_back({std::move(source), /*required=*/false, "CUDA probes not attached"});
  }
  return sources;
}

}  // namespace gw
