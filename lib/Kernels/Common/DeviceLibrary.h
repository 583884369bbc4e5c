//===- DeviceLibrary.h - The CUDA device library's text ---------*- C++ -*-===//
//
// The kernel families' CUDA templates (lib/Kernels/*/*.cuh, in the order of
// lib/Kernels/CMakeLists.txt), which the emitter pastes into every
// translation unit it writes.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_COMMON_DEVICELIBRARY_H
#define DSC_LIB_KERNELS_COMMON_DEVICELIBRARY_H

namespace dsc::cuda {

/// The device library, one NUL-terminated text.
const char *deviceLibrary();

} // namespace dsc::cuda

#endif // DSC_LIB_KERNELS_COMMON_DEVICELIBRARY_H
