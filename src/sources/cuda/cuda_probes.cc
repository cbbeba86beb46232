#include "sources/cuda/cuda_probes.h"

#include <vector>

namespace gw::cuda_internal {

namespace {

constexpr CudaLibKind kRt = CudaLibKind::kRuntime;
constexpr CudaLibKind kDrv = CudaLibKind::kDriver;
constexpr CudaLibKind kNccl = CudaLibKind::kNccl;

const ProbeSpec kProbes[] = {
    {GW_FN_CUDA_LAUNCH_KERNEL, "cudaLaunchKernel", kRt, ProbeClass::kLaunch, Op::kCudaLaunchKernel},
    {GW_FN_CUDA_LAUNCH_KERNEL_PTSZ, "cudaLaunchKernel_ptsz", kRt, ProbeClass::kLaunch,
     Op::kCudaLaunchKernel},
    {GW_FN_CUDA_LAUNCH_KERNEL_EXC, "cudaLaunchKernelExC", kRt, ProbeClass::kLaunch,
     Op::kCudaLaunchKernelExC},
    {GW_FN_CUDA_LAUNCH_KERNEL_EXC_PTSZ, "cudaLaunchKernelExC_ptsz", kRt, ProbeClass::kLaunch,
     Op::kCudaLaunchKernelExC},
    {GW_FN_CUDA_MALLOC, "cudaMalloc", kRt, ProbeClass::kCall, Op::kCudaMalloc},
    {GW_FN_CUDA_MALLOC_ASYNC, "cudaMallocAsync", kRt, ProbeClass::kCall, Op::kCudaMallocAsync},
    {GW_FN_CUDA_MALLOC_MANAGED, "cudaMallocManaged", kRt, ProbeClass::kCall,
     Op::kCudaMallocManaged},
    {GW_FN_CUDA_MALLOC_HOST, "cudaMallocHost", kRt, ProbeClass::kCall, Op::kCudaMallocHost},
    {GW_FN_CUDA_HOST_ALLOC, "cudaHostAlloc", kRt, ProbeClass::kCall, Op::kCudaHostAlloc},
    {GW_FN_CUDA_FREE, "cudaFree", kRt, ProbeClass::kCall, Op::kCudaFree},
    {GW_FN_CUDA_FREE_ASYNC, "cudaFreeAsync", kRt, ProbeClass::kCall, Op::kCudaFreeAsync},
    {GW_FN_CUDA_FREE_HOST, "cudaFreeHost", kRt, ProbeClass::kCall, std::nullopt},
    {GW_FN_CUDA_HOST_REGISTER, "cudaHostRegister", kRt, ProbeClass::kCall, std::nullopt},
    {GW_FN_CUDA_HOST_UNREGISTER, "cudaHostUnregister", kRt, ProbeClass::kCall, std::nullopt},
    {GW_FN_CUDA_MEMCPY, "cudaMemcpy", kRt, ProbeClass::kCall, Op::kCudaMemcpy},
    {GW_FN_CUDA_MEMCPY_ASYNC, "cudaMemcpyAsync", kRt, ProbeClass::kShortCall, Op::kCudaMemcpyAsync},
    {GW_FN_CUDA_MEMCPY_2D, "cudaMemcpy2D", kRt, ProbeClass::kCall, Op::kCudaMemcpy2D},
    {GW_FN_CUDA_MEMCPY_2D_ASYNC, "cudaMemcpy2DAsync", kRt, ProbeClass::kShortCall,
     Op::kCudaMemcpy2DAsync},
    {GW_FN_CUDA_MEMCPY_PEER, "cudaMemcpyPeer", kRt, ProbeClass::kCall, Op::kCudaMemcpyPeer},
    {GW_FN_CUDA_MEMCPY_PEER_ASYNC, "cudaMemcpyPeerAsync", kRt, ProbeClass::kShortCall,
     Op::kCudaMemcpyPeerAsync},
    {GW_FN_CUDA_MEMSET, "cudaMemset", kRt, ProbeClass::kCall, Op::kCudaMemset},
    {GW_FN_CUDA_MEMSET_ASYNC, "cudaMemsetAsync", kRt, ProbeClass::kCount, Op::kCudaMemsetAsync},
    {GW_FN_CUDA_STREAM_SYNC, "cudaStreamSynchronize", kRt, ProbeClass::kCall, Op::kCudaStreamSync},
    {GW_FN_CUDA_DEVICE_SYNC, "cudaDeviceSynchronize", kRt, ProbeClass::kCall, Op::kCudaDeviceSync},
    {GW_FN_CUDA_EVENT_SYNC, "cudaEventSynchronize", kRt, ProbeClass::kCall, Op::kCudaEventSync},
    {GW_FN_CUDA_STREAM_WAIT_EVENT, "cudaStreamWaitEvent", kRt, ProbeClass::kShortCall,
     Op::kCudaStreamWaitEvent},
    {GW_FN_CUDA_GRAPH_INSTANTIATE, "cudaGraphInstantiate", kRt, ProbeClass::kCall,
     Op::kCudaGraphInstantiate},
    {GW_FN_CUDA_GRAPH_INSTANTIATE_WITH_FLAGS, "cudaGraphInstantiateWithFlags", kRt,
     ProbeClass::kCall, Op::kCudaGraphInstantiate},
    {GW_FN_CUDA_GRAPH_LAUNCH, "cudaGraphLaunch", kRt, ProbeClass::kCall, Op::kCudaGraphLaunch},
    {GW_FN_CUDA_GRAPH_LAUNCH_PTSZ, "cudaGraphLaunch_ptsz", kRt, ProbeClass::kCall,
     Op::kCudaGraphLaunch},
    {GW_FN_CUDA_STREAM_BEGIN_CAPTURE, "cudaStreamBeginCapture", kRt, ProbeClass::kCall,
     Op::kCudaStreamBeginCapture},
    {GW_FN_CUDA_STREAM_END_CAPTURE, "cudaStreamEndCapture", kRt, ProbeClass::kCall,
     Op::kCudaStreamEndCapture},
    {GW_FN_CUDA_REGISTER_FUNCTION, "__cudaRegisterFunction", kRt, ProbeClass::kRegister,
     std::nullopt},
    {GW_FN_CU_LAUNCH_KERNEL, "cuLaunchKernel", kDrv, ProbeClass::kLaunch, Op::kCuLaunchKernel},
    {GW_FN_CU_LAUNCH_KERNEL_PTSZ, "cuLaunchKernel_ptsz", kDrv, ProbeClass::kLaunch,
     Op::kCuLaunchKernel},
    {GW_FN_CU_LAUNCH_KERNEL_EX, "cuLaunchKernelEx", kDrv, ProbeClass::kLaunch,
     Op::kCuLaunchKernelEx},
    {GW_FN_CU_LAUNCH_KERNEL_EX_PTSZ, "cuLaunchKernelEx_ptsz", kDrv, ProbeClass::kLaunch,
     Op::kCuLaunchKernelEx},
    {GW_FN_CU_MEM_ALLOC, "cuMemAlloc_v2", kDrv, ProbeClass::kCall, Op::kCuMemAlloc},
    {GW_FN_CU_MEM_FREE, "cuMemFree_v2", kDrv, ProbeClass::kCall, Op::kCuMemFree},
    {GW_FN_CU_MEMCPY, "cuMemcpy", kDrv, ProbeClass::kCall, Op::kCuMemcpy},
    {GW_FN_CU_MEMCPY_ASYNC, "cuMemcpyAsync", kDrv, ProbeClass::kShortCall, Op::kCuMemcpyAsync},
    {GW_FN_CU_MEMCPY_HTOD, "cuMemcpyHtoD_v2", kDrv, ProbeClass::kCall, Op::kCuMemcpyHtoD},
    {GW_FN_CU_MEMCPY_DTOH, "cuMemcpyDtoH_v2", kDrv, ProbeClass::kCall, Op::kCuMemcpyDtoH},
    {GW_FN_CU_MEMCPY_DTOD, "cuMemcpyDtoD_v2", kDrv, ProbeClass::kCall, Op::kCuMemcpyDtoD},
    {GW_FN_CU_MEMCPY_HTOD_ASYNC, "cuMemcpyHtoDAsync_v2", kDrv, ProbeClass::kShortCall,
     Op::kCuMemcpyHtoDAsync},
    {GW_FN_CU_MEMCPY_DTOH_ASYNC, "cuMemcpyDtoHAsync_v2", kDrv, ProbeClass::kShortCall,
     Op::kCuMemcpyDtoHAsync},
    {GW_FN_CU_MEMCPY_DTOD_ASYNC, "cuMemcpyDtoDAsync_v2", kDrv, ProbeClass::kShortCall,
     Op::kCuMemcpyDtoDAsync},
    {GW_FN_CU_STREAM_SYNC, "cuStreamSynchronize", kDrv, ProbeClass::kCall, Op::kCuStreamSync},
    {GW_FN_CU_CTX_SYNC, "cuCtxSynchronize", kDrv, ProbeClass::kCall, Op::kCuCtxSync},
    {GW_FN_CU_EVENT_SYNC, "cuEventSynchronize", kDrv, ProbeClass::kCall, Op::kCuEventSync},
    // Graph calls made to the driver directly; those a runtime graph call makes are not rows
    // of their own (cuda.bpf.c is_graph_fn). Recorded under the runtime's op names (ops.h).
    {GW_FN_CU_STREAM_BEGIN_CAPTURE, "cuStreamBeginCapture_v2", kDrv, ProbeClass::kCall,
     Op::kCudaStreamBeginCapture},
    {GW_FN_CU_STREAM_END_CAPTURE, "cuStreamEndCapture", kDrv, ProbeClass::kCall,
     Op::kCudaStreamEndCapture},
    {GW_FN_CU_GRAPH_INSTANTIATE, "cuGraphInstantiateWithFlags", kDrv, ProbeClass::kCall,
     Op::kCudaGraphInstantiate},
    {GW_FN_CU_GRAPH_LAUNCH, "cuGraphLaunch", kDrv, ProbeClass::kCall, Op::kCudaGraphLaunch},
    {GW_FN_CU_GRAPH_LAUNCH_PTSZ, "cuGraphLaunch_ptsz", kDrv, ProbeClass::kCall,
     Op::kCudaGraphLaunch},
    {GW_FN_CU_MODULE_GET_FUNCTION, "cuModuleGetFunction", kDrv, ProbeClass::kNameLookup,
     Op::kCuModuleGetFunction},
    {GW_FN_CU_LIBRARY_GET_KERNEL, "cuLibraryGetKernel", kDrv, ProbeClass::kNameLookup,
     Op::kCuLibraryGetKernel},
    // NCCL. Collectives and point-to-point calls are full rows, like syncs: each one's enqueue
    // time is the evidence of a rank's lateness (docs/nccl.md); a DDP step makes a few to a few
    // hundred. Group brackets are short and carry nothing: aggregated under the row budget.
    {GW_FN_NCCL_ALL_REDUCE, "ncclAllReduce", kNccl, ProbeClass::kCall, Op::kNcclAllReduce},
    {GW_FN_NCCL_BROADCAST, "ncclBroadcast", kNccl, ProbeClass::kCall, Op::kNcclBroadcast},
    {GW_FN_NCCL_REDUCE, "ncclReduce", kNccl, ProbeClass::kCall, Op::kNcclReduce},
    {GW_FN_NCCL_ALL_GATHER, "ncclAllGather", kNccl, ProbeClass::kCall, Op::kNcclAllGather},
    {GW_FN_NCCL_REDUCE_SCATTER, "ncclReduceScatter", kNccl, ProbeClass::kCall,
     Op::kNcclReduceScatter},
    {GW_FN_NCCL_SEND, "ncclSend", kNccl, ProbeClass::kCall, Op::kNcclSend},
    {GW_FN_NCCL_RECV, "ncclRecv", kNccl, ProbeClass::kCall, Op::kNcclRecv},
    {GW_FN_NCCL_GROUP_START, "ncclGroupStart", kNccl, ProbeClass::kShortCall, Op::kNcclGroupStart},
    {GW_FN_NCCL_GROUP_END, "ncclGroupEnd", kNccl, ProbeClass::kShortCall, Op::kNcclGroupEnd},
    {GW_FN_NCCL_COMM_INIT_RANK, "ncclCommInitRank", kNccl, ProbeClass::kCall, Op::kNcclCommInit},
    {GW_FN_NCCL_COMM_INIT_RANK_CONFIG, "ncclCommInitRankConfig", kNccl, ProbeClass::kCall,
     Op::kNcclCommInit},
    {GW_FN_NCCL_COMM_DESTROY, "ncclCommDestroy", kNccl, ProbeClass::kCall, Op::kNcclCommDestroy},
    {GW_FN_NCCL_COMM_ABORT, "ncclCommAbort", kNccl, ProbeClass::kCall, Op::kNcclCommDestroy},
};

}  // namespace

std::span<const ProbeSpec> Probes() { return kProbes; }

const ProbeSpec* SpecOf(uint32_t fn) {
  static const auto* table = [] {
    auto* t = new std::vector<const ProbeSpec*>(GW_FN_MAX, nullptr);
    for (const ProbeSpec& spec : kProbes) (*t)[spec.fn] = &spec;
    return t;
  }();
  return fn < table->size() ? (*table)[fn] : nullptr;
}

}  // namespace gw::cuda_internal
