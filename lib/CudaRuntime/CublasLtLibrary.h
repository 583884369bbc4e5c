//===- CublasLtLibrary.h - cuBLASLt, loaded when the CUDA backend starts --===//
//
// The CUDA backend's GEMMs call cuBLASLt, which is not linked: loading
// libcublasLt costs every process about 0.1 s of page faults (25,000 of
// them) whether or not it uses a GPU, and most dsc processes (CPU ranks,
// compiles, estimates, the test suite's thousand runs) never do.
// CublasLtLibrary.cpp defines the cublasLt* entry points the backend calls,
// each forwarding to the library loaded here on first use.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CUDARUNTIME_CUBLASLTLIBRARY_H
#define DSC_CUDARUNTIME_CUBLASLTLIBRARY_H

#include <cstddef>
#include <string>

namespace dsc::rt {

struct CublasLtLibraryInfo {
  std::string path; ///< the file the loader picked
  size_t version = 0; ///< cublasLtGetVersion(): major * 10000 + ...
};

/// Loads cuBLASLt once: $DSC_CUBLASLT_LIBRARY if set, else
/// libcublasLt.so.<major of the headers> through the dynamic loader, else
/// the same file in the toolkit dsc was built with. Throws a one-line Error
/// saying what was tried when none can be used.
const CublasLtLibraryInfo &loadCublasLt();

/// Opens one candidate and checks it is cuBLASLt of the headers' major
/// version; on failure returns null with the reason in `why`.
void *openCublasLt(const std::string &name, CublasLtLibraryInfo &info,
                   std::string &why);

} // namespace dsc::rt

#endif // DSC_CUDARUNTIME_CUBLASLTLIBRARY_H
