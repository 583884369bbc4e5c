//===- Nvrtc.h - Compile CUDA C++ with NVRTC --------------------*- C++ -*-===//
//
// A thin wrapper over NVRTC (libnvrtc only: no driver, no GPU needed) that
// compiles one translation unit for one architecture to a CUBIN, as the
// runtime will and as the no-GPU CI check does. Built when CMake finds the
// CUDA toolkit (DSC_HAVE_NVRTC); otherwise every call reports that.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_NVRTC_H
#define DSC_CODEGEN_NVRTC_H

#include <string>
#include <vector>

namespace dsc::cuda {

struct NvrtcOptions {
  std::string arch = "sm_80";   ///< sm_XX (CUBIN) or compute_XX (PTX)
  bool fastMath = false;        ///< --use_fast_math (off: IEEE div/sqrt)
  bool warningsAreErrors = true; ///< check mode: any log output fails
  std::vector<std::string> extraFlags;
};

struct NvrtcResult {
  bool ok = false;
  /// One line: "<name>:<line>: <diagnostic> (in kernel <k>)" for the first
  /// error or warning, or why NVRTC could not run.
  std::string message;
  std::string log;          ///< NVRTC's full log
  std::string binary;       ///< CUBIN (sm_XX) or PTX (compute_XX)
};

/// Whether this build has NVRTC.
bool haveNvrtc();

/// The NVRTC version ("13.0"), or "" without NVRTC.
std::string nvrtcVersion();

/// Where NVRTC looks for the CUDA headers the kernels include (cuda_bf16.h,
/// cuda_fp16.h, mma.h): $DSC_CUDA_INCLUDE_DIR if set; else include/cuda
/// beside the executable's bin/ when it holds them (the GPU bundle,
/// scripts/gpu-bundle.sh); else the toolkit's, found at build time.
std::string cudaIncludeDir();

/// Compiles `source` (named `name` in diagnostics) with -std=c++17,
/// -default-device and cudaIncludeDir().
NvrtcResult compileWithNvrtc(const std::string &source,
                             const std::string &name,
                             const NvrtcOptions &options);

} // namespace dsc::cuda

#endif // DSC_CODEGEN_NVRTC_H
