//===- GemmTiming.cpp - Timing cuBLASLt's candidate algorithms ------------===//

#include "GemmTiming.h"

#include "dsc/Support/Error.h"

#include <limits>
#include <memory>

namespace dsc::rt {

namespace {

constexpr int kTimedRuns = 5;

void check(cudaError_t e, const std::string &what) {
  if (e != cudaSuccess)
    throw Error("CUDA: timing " + what + ": " + cudaGetErrorString(e));
}

cublasStatus_t launch(const GemmLaunch &g, const cublasLtMatmulAlgo_t &algo) {
  return cublasLtMatmul(g.lt, g.desc, g.alpha, g.firstData, g.first,
                        g.secondData, g.second, g.beta, g.outData, g.out,
                        g.outData, g.out, &algo, g.workspace, g.workspaceBytes,
                        g.stream);
}

} // namespace

cuda::GemmChoice fastestGemmCandidate(
    const GemmLaunch &gemm,
    const std::vector<cublasLtMatmulHeuristicResult_t> &candidates,
    const std::string &what) {
  cudaEvent_t start = nullptr, end = nullptr;
  check(cudaEventCreate(&start), what);
  std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> startOwner(
      start, cudaEventDestroy);
  check(cudaEventCreate(&end), what);
  std::unique_ptr<CUevent_st, decltype(&cudaEventDestroy)> endOwner(
      end, cudaEventDestroy);
  cuda::GemmChoice best;
  best.candidate = -1;
  best.microseconds = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidates.size(); ++i) {
    const cublasLtMatmulAlgo_t &algo = candidates[i].algo;
    if (launch(gemm, algo) != CUBLAS_STATUS_SUCCESS)
      continue; // this algorithm cannot run these operands; the next may
    check(cudaEventRecord(start, gemm.stream), what);
    bool ran = true;
    for (int r = 0; r < kTimedRuns && ran; ++r)
      ran = launch(gemm, algo) == CUBLAS_STATUS_SUCCESS;
    check(cudaEventRecord(end, gemm.stream), what);
    check(cudaEventSynchronize(end), what);
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, end), what);
    const double us = double(ms) * 1000.0 / kTimedRuns;
    if (ran && us < best.microseconds) {
      best.candidate = int(i);
      best.microseconds = us;
    }
  }
  if (best.candidate < 0)
    throw Error("cuBLASLt: none of the " + std::to_string(candidates.size()) +
                " algorithms proposed for " + what + " ran");
  return best;
}

} // namespace dsc::rt
