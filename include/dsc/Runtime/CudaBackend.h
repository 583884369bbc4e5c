//===- CudaBackend.h - Running a Program on an NVIDIA GPU ------*- C++ -*-===//
//
// The CUDA backend compiles the program's kernels (lib/Codegen/CudaEmitter)
// with NVRTC for the device it finds, caches the CUBIN on disk, places every
// buffer in one device arena at the memory plan's offsets, runs GEMMs on
// cuBLASLt and replays each function as a CUDA graph. Buffers live on the
// device: the driver moves them with Backend::upload/download.
//
// Built only when CMake finds the CUDA toolkit (DSC_HAVE_CUDA_BACKEND);
// links the CUDA runtime statically, so a binary built with it still starts
// (and runs on the CPU) on a machine without a driver or GPU.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_CUDABACKEND_H
#define DSC_RUNTIME_CUDABACKEND_H

#include "dsc/Runtime/Runtime.h"

#include <memory>
#include <string>
#include <vector>

namespace dsc::rt {

struct CudaOptions {
  int device = 0;
  /// Where compiled kernels are cached; "" compiles every time.
  std::string kernelCacheDir;
  /// Replay each function as a CUDA graph (off: launch kernel by kernel,
  /// and synchronise after each to name the one that failed).
  bool graphs = true;
  /// Print what the backend set up (device, compile or cache hit, arena,
  /// each fused attention's implementation).
  bool verbose = false;
  /// Dropout draws the CPU backend's masks (check-cuda's exact comparison):
  /// no cuDNN attention where it has dropout.
  bool cpuDropoutMasks = false;
};

/// Whether this build has the CUDA backend.
bool cudaBackendBuilt();

/// "" when the CUDA backend can run here; otherwise why not, one line
/// ("this dsc was built without CUDA", "no CUDA device: ...").
std::string cudaUnavailableReason();

/// One line per visible GPU: "<index>: <name> (sm_XY), <memory> MiB".
std::vector<std::string> cudaDevices();

/// The libcudnn cuDNN attention would use, loading it: "cuDNN <version>
/// from <path>", else "not loaded: <why>" (no GPU needed).
std::string cudnnStatus();

/// The libcublasLt the backend's GEMMs would use, loading it: "cuBLASLt
/// <version> from <path>", else "not loaded: <why>" (no GPU needed).
std::string cublasLtStatus();

/// Compiles and sets up `program` for the GPU. The backend runs this
/// program only. Throws Error with one line for any failure: no device,
/// NVRTC (with the kernel and source line), cuBLASLt, out of memory.
std::unique_ptr<Backend> createCudaBackend(const Program &program,
                                           Communicator &comm,
                                           const CudaOptions &options);

} // namespace dsc::rt

#endif // DSC_RUNTIME_CUDABACKEND_H
