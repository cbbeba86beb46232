#include "sources/registry.h"

#include "sources/cuda/cuda_source.h"

namespace gw {

StatusOr<std::vector<RegisteredSource>> CreateSources(const SourceSetOptions& options) {
  std::vector<RegisteredSource> sources;
  ASSIGN_OR_RETURN(std::unique_ptr<HostSource> host, HostSource::Create(options.host));
  sources.push_back({std::move(host), /*required=*/true, ""});
  if (options.cuda_enabled) {
    ASSIGN_OR_RETURN(std::unique_ptr<CudaSource> source, CudaSource::Create(options.cuda));
    // Without CUDA probes the host side still explains a lot; the note says what is missing.
    sources.push_back({std::move(source), /*required=*/false, "CUDA probes not attached"});
  }
  return sources;
}

}  // namespace gw
