#include "store/ops.h"

namespace gw {

namespace {
constexpr OpInfo kOps[] = {
#define GW_OP_INFO(e, id, name, layer) {Op::e, name, Layer::layer},
    GW_OPS(GW_OP_INFO)
#undef GW_OP_INFO
};
}  // namespace

const OpInfo* AllOps(size_t* count) {
  *count = sizeof(kOps) / sizeof(kOps[0]);
  return kOps;
}

std::string_view OpName(Op op) {
  for (const OpInfo& info : kOps) {
    if (info.op == op) return info.name;
  }
  return "unknown";
}

Layer OpLayer(Op op) {
  for (const OpInfo& info : kOps) {
    if (info.op == op) return info.layer;
  }
  return Layer::kHost;
}

std::string_view LayerName(Layer layer) {
  switch (layer) {
    case Layer::kCudaRuntime:
      return "cuda_runtime";
    case Layer::kCudaDriver:
      return "cuda_driver";
    case Layer::kHost:
      return "host";
  }
  return "host";
}

std::optional<Op> OpFromName(std::string_view name) {
  for (const OpInfo& info : kOps) {
    if (info.name == name) return info.op;
  }
  return std::nullopt;
}

std::optional<Op> OpFromId(int64_t id) {
  for (const OpInfo& info : kOps) {
    if (static_cast<int64_t>(info.op) == id) return info.op;
  }
  return std::nullopt;
}

bool IsLaunch(Op op) {
  return op == Op::kCudaLaunchKernel || op == Op::kCudaLaunchKernelExC ||
         op == Op::kCuLaunchKernel || op == Op::kCuLaunchKernelEx;
}

bool IsGraphKernels(Op op) { return op == Op::kGraphKernels; }

bool IsKernelRun(Op op) { return IsLaunch(op) || IsGraphKernels(op); }

bool IsSync(Op op) {
  return op == Op::kCudaStreamSync || op == Op::kCudaDeviceSync || op == Op::kCudaEventSync ||
         op == Op::kCuStreamSync || op == Op::kCuCtxSync || op == Op::kCuEventSync;
}

bool IsNcclCollective(Op op) {
  return op == Op::kNcclAllReduce || op == Op::kNcclBroadcast || op == Op::kNcclReduce ||
         op == Op::kNcclAllGather || op == Op::kNcclReduceScatter;
}

bool IsNccl(Op op) {
  return static_cast<int>(op) >= static_cast<int>(Op::kNcclAllReduce) &&
         static_cast<int>(op) <= static_cast<int>(Op::kNcclCommDestroy);
}

bool IsMemcpy(Op op) {
  switch (op) {
    case Op::kCudaMemcpy: case Op::kCudaMemcpyAsync: case Op::kCudaMemcpy2D:
    case Op::kCudaMemcpy2DAsync: case Op::kCudaMemcpyPeer: case Op::kCudaMemcpyPeerAsync:
    case Op::kCuMemcpy: case Op::kCuMemcpyAsync: case Op::kCuMemcpyHtoD: case Op::kCuMemcpyDtoH:
    case Op::kCuMemcpyDtoD: case Op::kCuMemcpyHtoDAsync: case Op::kCuMemcpyDtoHAsync:
    case Op::kCuMemcpyDtoDAsync:
      return true;
    default:
      return false;
  }
}

bool IsAlloc(Op op) {
  return op == Op::kCudaMalloc || op == Op::kCudaMallocAsync || op == Op::kCudaMallocManaged ||
         op == Op::kCudaMallocHost || op == Op::kCudaHostAlloc || op == Op::kCuMemAlloc;
}

bool IsFree(Op op) {
  return op == Op::kCudaFree || op == Op::kCudaFreeAsync || op == Op::kCuMemFree;
}

bool IsDeviceAllocation(Op op) {
  return (IsAlloc(op) || IsFree(op)) && op != Op::kCudaMallocHost && op != Op::kCudaHostAlloc;
}

bool DrainsDevice(Op op) {
  return op == Op::kCudaDeviceSync || op == Op::kCuCtxSync || op == Op::kCudaFree ||
         op == Op::kCuMemFree;
}

std::string OpSqlList(bool (*pred)(Op), OpListForm form) {
  std::string out;
  for (const OpInfo& info : kOps) {
    if (!pred(info.op)) continue;
    if (!out.empty()) out += ", ";
    out += form == OpListForm::kNames ? "'" + std::string(info.name) + "'"
                                      : std::to_string(static_cast<int>(info.op));
  }
  return out;
}

std::string_view CopyKindName(int64_t kind) {
  switch (kind) {
    case 0: return "HtoH";
    case 1: return "HtoD";
    case 2: return "DtoH";
    case 3: return "DtoD";
    case 4: return "default";
    default: return "unknown";
  }
}

}  // namespace gw
