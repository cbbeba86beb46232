// The CUDA source's decoder: a call record → the row stored for it. No BPF, no /proc and no
// name lookup of its own: what it remembers of a process (allocations, pinned host ranges) is
// passed in, and kernel names come through a callback. So it is unit-tested on synthetic
// records without root (cuda_decode_test.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "sources/cuda/cuda_abi.h"
#include "sources/source.h"
#include "store/event.h"

namespace gw {

// What decoding remembers of one process.
struct CudaProcessMemory {
  std::map<uint64_t, uint64_t> runtime_allocs;  // device pointer → size (cudaMalloc*)
  std::map<uint64_t, uint64_t> driver_allocs;   // device pointer → size (cuMemAlloc)
  std::map<uint64_t, uint64_t> pinned;          // host pointer → size (cudaMallocHost/HostAlloc)
  std::pair<uint64_t, uint64_t> last_free{0, 0};  // pointer, size of the last free
  // NCCL communicator handle → the interned name of its communicator ("nccl <id hash>", the
  // same on every rank), from its init row.
  std::map<uint64_t, int64_t> nccl_comms;
};

// Interns a string (the sink's InternString); NCCL rows name their communicator with it.
using InternFn = std::function<int64_t(const std::string& text)>;

// The name of an NCCL communicator: from the hash of its ncclUniqueId, shared by all ranks;
// a communicator whose init was not seen (trace attached later) is named by its handle, which
// only its own process knows.
std::string NcclCommName(uint64_t id_hash);
std::string NcclCommHandleName(uint64_t handle);

// The interned name id of the kernel a launch handle names; `host_stub` for a runtime
// launch's handle (CudaSource::KernelNameId).
using KernelNameIdFn = std::function<int64_t(uint32_t tgid, uint64_t handle, bool host_stub)>;

// The row for `record`, or nullopt when it makes none: a function that only updates
// `memory` (cudaFreeHost, cudaHostRegister/Unregister), one without a row, or one this build
// does not know.
std::optional<Event> DecodeCudaCall(const gw_cuda_call_record& record, const SessionClock& clock,
                                    CudaProcessMemory& memory, const KernelNameIdFn& kernel_name_id,
                                    const InternFn& intern = {});

}  // namespace gw
