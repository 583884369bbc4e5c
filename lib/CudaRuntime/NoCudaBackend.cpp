//===- NoCudaBackend.cpp - The CUDA backend of a build without CUDA -------===//
//
// Compiled instead of CudaBackend.cpp when CMake found no CUDA toolkit: the
// tools still link, and `--backend cuda` says why it cannot run.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/CudaBackend.h"

namespace dsc::rt {

bool cudaBackendBuilt() { return false; }

std::string cudaUnavailableReason() {
  return "this dsc was built without the CUDA toolkit (no CUDA backend)";
}

std::vector<std::string> cudaDevices() { return {}; }

std::string cudnnStatus() { return "not loaded: " + cudaUnavailableReason(); }
std::string cublasLtStatus() {
  return "not loaded: " + cudaUnavailableReason();
}

std::unique_ptr<Backend> createCudaBackend(const Program &, Communicator &,
                                           const CudaOptions &) {
  throw Error(cudaUnavailableReason());
}

} // namespace dsc::rt
