//===- VersionedLibrary.h - dlopen a library and read its version -*- C++ -*-===//
//
// What CublasLtLibrary.cpp and CudnnAttention.cpp both do before checking
// that a candidate file is the library they need.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_CUDARUNTIME_VERSIONEDLIBRARY_H
#define DSC_CUDARUNTIME_VERSIONEDLIBRARY_H

#include <cstddef>
#include <string>

namespace dsc::rt {

/// dlopen's `name` (RTLD_NOW | RTLD_LOCAL) and calls its `versionSymbol`,
/// a `size_t (void)` function. Returns the handle, with the file the loader
/// picked in `path` and the version in `version`; else null (the library
/// closed again) with the reason in `why`: dlopen's, or "<path> has no
/// <versionSymbol>: not <what>".
void *openVersionedLibrary(const std::string &name, const char *versionSymbol,
                           const std::string &what, std::string &path,
                           size_t &version, std::string &why);

/// "major.minor.patch" of a version counted major * 10000 + minor * 100 +
/// patch, as cuBLASLt and cuDNN 9 count theirs.
inline std::string dottedVersion(size_t version) {
  return std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

} // namespace dsc::rt

#endif // DSC_CUDARUNTIME_VERSIONEDLIBRARY_H
