#include "sources/cuda/cuda_decode.h"

#include <cstdio>

#include "sources/cuda/cuda_probes.h"

namespace gw {

namespace {

// Whether [addr, addr+1) lies in one of the [start, start+size) ranges.
bool InRanges(const std::map<uint64_t, uint64_t>& ranges, uint64_t addr) {
  auto it = ranges.upper_bound(addr);
  if (it == ranges.begin()) return false;
  --it;
  return addr < it->first + it->second;
}

}  // namespace

std::string NcclCommName(uint64_t id_hash) {
  char buf[40];
  snprintf(buf, sizeof(buf), "nccl %016llx", static_cast<unsigned long long>(id_hash));
  return buf;
}

std::string NcclCommHandleName(uint64_t handle) {
  char buf[48];
  snprintf(buf, sizeof(buf), "nccl handle 0x%llx", static_cast<unsigned long long>(handle));
  return buf;
}

namespace {

// A sync's time since its process last gave the GPU work (src: that work's bpf_ktime), NULL when
// the process gave none since the probes attached.
int64_t SinceWork(const gw_cuda_call_record& r) {
  if (r.src == 0 || r.src > r.ts_ns) return kNull;
  return static_cast<int64_t>(r.ts_ns - r.src);
}

}  // namespace

std::optional<Event> DecodeCudaCall(const gw_cuda_call_record& r, const SessionClock& clock,
                                    CudaProcessMemory& memory, const KernelNameIdFn& kernel_name_id,
                                    const InternFn& intern) {
  const cuda_internal::ProbeSpec* spec = cuda_internal::SpecOf(r.fn);
  if (spec == nullptr) return std::nullopt;
  bool ok = r.ret == 0;
  // Pinned host ranges (pin_memory=True page-locks with cudaHostAlloc or cudaHostRegister).
  if (r.fn == GW_FN_CUDA_FREE_HOST || r.fn == GW_FN_CUDA_HOST_UNREGISTER) {
    if (ok) memory.pinned.erase(r.dst);
    return std::nullopt;
  }
  if (r.fn == GW_FN_CUDA_HOST_REGISTER) {
    if (ok) memory.pinned[r.dst] = r.bytes;
    return std::nullopt;
  }
  if (!spec->op.has_value()) return std::nullopt;
  Event e;
  e.ts_ns = clock.ToSession(r.ts_ns);
  e.pid = static_cast<int32_t>(r.tgid);
  e.tid = static_cast<int32_t>(r.tid);
  e.op = *spec->op;
  e.duration_ns = static_cast<int64_t>(r.duration_ns);
  if ((r.flags & GW_CUDA_FLAG_SAMPLED_LAUNCH) == 0) e.ret = r.ret;
  if (r.stack_id != 0) e.stack_id = static_cast<int64_t>(r.stack_id);
  auto u64 = [](uint64_t v) { return static_cast<int64_t>(v); };

  switch (static_cast<gw_cuda_fn>(r.fn)) {
    case GW_FN_CUDA_LAUNCH_KERNEL:
    case GW_FN_CUDA_LAUNCH_KERNEL_PTSZ:
    case GW_FN_CUDA_LAUNCH_KERNEL_EXC:
    case GW_FN_CUDA_LAUNCH_KERNEL_EXC_PTSZ:
    case GW_FN_CU_LAUNCH_KERNEL:
    case GW_FN_CU_LAUNCH_KERNEL_PTSZ:
    case GW_FN_CU_LAUNCH_KERNEL_EX:
    case GW_FN_CU_LAUNCH_KERNEL_EX_PTSZ:
      e.addr = u64(r.stream);
      e.name_id = kernel_name_id(r.tgid, r.dst, r.fn < GW_CUDA_DRIVER_BASE);
      if (r.flags & GW_CUDA_FLAG_CAPTURED_LAUNCH) e.op = Op::kGraphNode;
      break;
    case GW_FN_CUDA_MALLOC:
    case GW_FN_CUDA_MALLOC_ASYNC:
    case GW_FN_CUDA_MALLOC_MANAGED:
    case GW_FN_CU_MEM_ALLOC:
      e.bytes = u64(r.bytes);
      if (r.fn != GW_FN_CUDA_MALLOC_ASYNC) e.since_work_ns = SinceWork(r);
      if (ok) {
        e.addr = u64(r.dst);
        auto& allocs = r.fn == GW_FN_CU_MEM_ALLOC ? memory.driver_allocs : memory.runtime_allocs;
        allocs[r.dst] = r.bytes;
      }
      break;
    case GW_FN_CUDA_MALLOC_HOST:
    case GW_FN_CUDA_HOST_ALLOC:
      e.bytes = u64(r.bytes);
      e.since_work_ns = SinceWork(r);
      if (ok) {
        e.addr = u64(r.dst);
        memory.pinned[r.dst] = r.bytes;
      }
      break;
    case GW_FN_CUDA_FREE:
    case GW_FN_CUDA_FREE_ASYNC:
    case GW_FN_CU_MEM_FREE: {
      e.addr = u64(r.dst);
      if (r.fn != GW_FN_CUDA_FREE_ASYNC) e.since_work_ns = SinceWork(r);
      auto& allocs = r.fn == GW_FN_CU_MEM_FREE ? memory.driver_allocs : memory.runtime_allocs;
      if (auto it = allocs.find(r.dst); it != allocs.end()) {
        e.bytes = u64(it->second);
        if (ok) {
          memory.last_free = {r.dst, it->second};
          allocs.erase(it);
        }
      } else if (memory.last_free.first == r.dst && r.dst != 0) {
        // An outer free whose nested free (same pointer) was decoded first.
        e.bytes = u64(memory.last_free.second);
      }
      break;
    }
    case GW_FN_CUDA_MEMCPY:
    case GW_FN_CUDA_MEMCPY_ASYNC:
    case GW_FN_CUDA_MEMCPY_2D:
    case GW_FN_CUDA_MEMCPY_2D_ASYNC:
    case GW_FN_CUDA_MEMCPY_PEER:
    case GW_FN_CUDA_MEMCPY_PEER_ASYNC:
    case GW_FN_CU_MEMCPY:
    case GW_FN_CU_MEMCPY_ASYNC:
    case GW_FN_CU_MEMCPY_HTOD:
    case GW_FN_CU_MEMCPY_DTOH:
    case GW_FN_CU_MEMCPY_DTOD:
    case GW_FN_CU_MEMCPY_HTOD_ASYNC:
    case GW_FN_CU_MEMCPY_DTOH_ASYNC:
    case GW_FN_CU_MEMCPY_DTOD_ASYNC: {
      int64_t kind = static_cast<int64_t>(CopyKind::kDefault);
      switch (r.fn) {
        case GW_FN_CUDA_MEMCPY:
        case GW_FN_CUDA_MEMCPY_ASYNC:
        case GW_FN_CUDA_MEMCPY_2D:
        case GW_FN_CUDA_MEMCPY_2D_ASYNC:
          kind = (r.kind >= 0 && r.kind <= 4) ? r.kind : static_cast<int64_t>(CopyKind::kDefault);
          break;
        case GW_FN_CUDA_MEMCPY_PEER:
        case GW_FN_CUDA_MEMCPY_PEER_ASYNC:
        case GW_FN_CU_MEMCPY_DTOD:
        case GW_FN_CU_MEMCPY_DTOD_ASYNC:
          kind = static_cast<int64_t>(CopyKind::kDeviceToDevice);
          break;
        case GW_FN_CU_MEMCPY_HTOD:
        case GW_FN_CU_MEMCPY_HTOD_ASYNC:
          kind = static_cast<int64_t>(CopyKind::kHostToDevice);
          break;
        case GW_FN_CU_MEMCPY_DTOH:
        case GW_FN_CU_MEMCPY_DTOH_ASYNC:
          kind = static_cast<int64_t>(CopyKind::kDeviceToHost);
          break;
        default:
          break;
      }
      if (kind == static_cast<int64_t>(CopyKind::kDefault)) {
        // Unified addressing: infer the direction from the allocations seen.
        auto on_device = [&](uint64_t p) {
          return InRanges(memory.runtime_allocs, p) || InRanges(memory.driver_allocs, p);
        };
        bool dst_dev = on_device(r.dst);
        bool src_dev = on_device(r.src);
        if (dst_dev || src_dev) {
          kind = static_cast<int64_t>(dst_dev && src_dev ? CopyKind::kDeviceToDevice
                                      : dst_dev          ? CopyKind::kHostToDevice
                                                         : CopyKind::kDeviceToHost);
        }
      }
      uint64_t device_side = r.dst;
      bool pinned = false;
      switch (static_cast<CopyKind>(kind)) {
        case CopyKind::kHostToDevice:
          pinned = InRanges(memory.pinned, r.src);
          break;
        case CopyKind::kDeviceToHost:
          pinned = InRanges(memory.pinned, r.dst);
          device_side = r.src;
          break;
        case CopyKind::kHostToHost:
        case CopyKind::kDefault:
          pinned = InRanges(memory.pinned, r.src) || InRanges(memory.pinned, r.dst);
          break;
        case CopyKind::kDeviceToDevice:
          break;
      }
      e.bytes = u64(r.bytes);
      e.kind = kind | (pinned ? kCopyPinnedHost : 0);
      e.addr = u64(device_side);
      break;
    }
    case GW_FN_CUDA_MEMSET:
    case GW_FN_CUDA_MEMSET_ASYNC:
      e.addr = u64(r.dst);
      e.bytes = u64(r.bytes);
      break;
    case GW_FN_CUDA_STREAM_SYNC:
    case GW_FN_CUDA_EVENT_SYNC:
    case GW_FN_CU_STREAM_SYNC:
    case GW_FN_CU_EVENT_SYNC:
      e.addr = u64(r.stream);
      e.since_work_ns = SinceWork(r);
      break;
    case GW_FN_CUDA_DEVICE_SYNC:
    case GW_FN_CU_CTX_SYNC:
      e.since_work_ns = SinceWork(r);
      break;
    case GW_FN_CUDA_STREAM_WAIT_EVENT:
    case GW_FN_CUDA_GRAPH_LAUNCH:
    case GW_FN_CUDA_GRAPH_LAUNCH_PTSZ:
    case GW_FN_CU_GRAPH_LAUNCH:
    case GW_FN_CU_GRAPH_LAUNCH_PTSZ:
    case GW_FN_CUDA_STREAM_BEGIN_CAPTURE:
    case GW_FN_CU_STREAM_BEGIN_CAPTURE:
    case GW_FN_CUDA_STREAM_END_CAPTURE:
    case GW_FN_CU_STREAM_END_CAPTURE:
      e.addr = u64(r.stream);
      break;
    case GW_FN_CUDA_GRAPH_INSTANTIATE:
    case GW_FN_CUDA_GRAPH_INSTANTIATE_WITH_FLAGS:
    case GW_FN_CU_GRAPH_INSTANTIATE:
      if (ok) e.addr = u64(r.dst);
      break;
    case GW_FN_CU_MODULE_GET_FUNCTION:
    case GW_FN_CU_LIBRARY_GET_KERNEL:
      // The name record follows this one in the ring; it is resolved when the handle is
      // launched. Here the row carries the handle.
      if (ok) e.addr = u64(r.dst);
      break;
    case GW_FN_NCCL_ALL_REDUCE:
    case GW_FN_NCCL_BROADCAST:
    case GW_FN_NCCL_REDUCE:
    case GW_FN_NCCL_ALL_GATHER:
    case GW_FN_NCCL_REDUCE_SCATTER:
    case GW_FN_NCCL_SEND:
    case GW_FN_NCCL_RECV: {
      e.addr = u64(r.stream);
      e.bytes = u64(r.bytes);
      e.kind = r.kind;
      e.other_pid = u64(r.src);  // sequence number (collectives) or peer rank (send/recv)
      if (intern) {
        auto it = memory.nccl_comms.find(r.dst);
        if (it == memory.nccl_comms.end()) {
          it = memory.nccl_comms.emplace(r.dst, intern(NcclCommHandleName(r.dst))).first;
        }
        e.name_id = it->second;
      }
      break;
    }
    case GW_FN_NCCL_COMM_INIT_RANK:
    case GW_FN_NCCL_COMM_INIT_RANK_CONFIG:
      e.bytes = u64(r.bytes);  // nranks
      e.kind = r.kind;         // rank
      if (ok) {
        e.addr = u64(r.dst);
        if (intern) {
          int64_t id = intern(NcclCommName(r.src));
          memory.nccl_comms[r.dst] = id;
          e.name_id = id;
        }
      }
      break;
    case GW_FN_NCCL_COMM_DESTROY:
    case GW_FN_NCCL_COMM_ABORT:
      e.addr = u64(r.dst);
      if (auto it = memory.nccl_comms.find(r.dst); it != memory.nccl_comms.end()) {
        e.name_id = it->second;
        if (ok) memory.nccl_comms.erase(it);
      }
      break;
    case GW_FN_NCCL_GROUP_START:
    case GW_FN_NCCL_GROUP_END:
    case GW_FN_CUDA_FREE_HOST:
    case GW_FN_CUDA_HOST_REGISTER:
    case GW_FN_CUDA_HOST_UNREGISTER:
    case GW_FN_CUDA_REGISTER_FUNCTION:
    case GW_FN_CU_KERNEL_GET_FUNCTION:  // not probed
    case GW_FN_NONE:
    case GW_FN_MAX:
      break;
  }
  return e;
}

}  // namespace gw
