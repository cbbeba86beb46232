// The functions the CUDA source probes: symbol, library, how each is probed and the op its
// row gets. Shared by the attach code (cuda_source.cc) and the decoder (cuda_decode.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "discover/cuda_libs.h"
#include "sources/cuda/cuda_abi.h"
#include "store/ops.h"

namespace gw::cuda_internal {

// How a function is probed.
enum class ProbeClass {
  kCall,        // uprobe + uretprobe: full row with duration
  kShortCall,   // uprobe + uretprobe: a row when slow, failed or sampled, else aggregated in
                // the kernel (the row budget; with --all-rows a kCall)
  kCount,       // entry-only: counted in the kernel every second (--all-rows: a kCall)
  kLaunch,      // entry-only: counted in the kernel, sampled rows
  kRegister,    // uprobe + uretprobe: __cudaRegisterFunction name record, no row
  kNameLookup,  // uprobe + uretprobe: row + handle → name record
};

struct ProbeSpec {
  gw_cuda_fn fn;
  const char* symbol;
  CudaLibKind library;
  ProbeClass probe;
  std::optional<Op> op;  // the row's op; none for probes that only feed the decoder
};

// Every probed function, in attach order.
std::span<const ProbeSpec> Probes();
// The probe of `fn` (gw_cuda_fn); nullptr for one this build does not know.
const ProbeSpec* SpecOf(uint32_t fn);

}  // namespace gw::cuda_internal
