//===- GemmTiming.h - Timing cuBLASLt's candidate algorithms ----*- C++ -*-===//
//
// cuBLASLt's heuristic ranks algorithms by a model, not a measurement; on
// Hopper its first choice is often not the fastest for transformer shapes
// (llm.c and PyTorch's TunableOp time candidates for this reason). The
// backend times the first few candidates of each distinct GEMM once, at
// set-up, and keeps the fastest (GemmChoiceCache.h keeps it on disk).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_CUDARUNTIME_GEMMTIMING_H
#define DSC_LIB_CUDARUNTIME_GEMMTIMING_H

#include "dsc/Codegen/GemmChoiceCache.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <vector>

namespace dsc::rt {

/// One GEMM's descriptors and operands as cublasLtMatmul takes them
/// (C is also D).
struct GemmLaunch {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  const float *alpha = nullptr, *beta = nullptr;
  const void *firstData = nullptr, *secondData = nullptr;
  void *outData = nullptr;
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  cudaStream_t stream = nullptr;
};

/// Times each of `candidates` on `gemm`'s operands (one launch to warm up,
/// then the mean of five between CUDA events) and returns the fastest;
/// candidates that fail to launch are skipped. Throws if none ran. The
/// operands are overwritten as the GEMM overwrites them.
cuda::GemmChoice
fastestGemmCandidate(const GemmLaunch &gemm,
                     const std::vector<cublasLtMatmulHeuristicResult_t> &candidates,
                     const std::string &what);

} // namespace dsc::rt

#endif // DSC_LIB_CUDARUNTIME_GEMMTIMING_H
