//===- Broadcast.h - numpy broadcasting of dsc.add / dsc.reduce_to -*- C++ -*-===//
//
// The shape analysis shared by the CPU kernels and the CUDA emit logic of
// the two ops (lib/Kernels/Elementwise/ElementwiseCpu.cpp and
// ElementwiseEmit.cpp): which b broadcasts to a, and a's dims merged into
// runs that b has or broadcasts.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BROADCAST_H
#define DSC_RUNTIME_BROADCAST_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::rt {

/// True when bShape broadcasts to aShape (numpy rules, b aligned right).
bool broadcastable(const std::vector<int64_t> &aShape,
                   const std::vector<int64_t> &bShape);

/// a's dims with size-1 dims dropped and runs of "b has it" (full) or "b
/// broadcasts it" merged. Always at least one dim.
struct MergedDims {
  std::vector<int64_t> len;
  std::vector<bool> full;
  std::vector<int64_t> bStride; ///< stride in b (0 for broadcast dims)
  /// Product of all merged dims but the last.
  int64_t rows() const;
};

/// Requires broadcastable(aShape, bShape).
MergedDims mergeBroadcastDims(const std::vector<int64_t> &aShape,
                              const std::vector<int64_t> &bShape);

} // namespace dsc::rt

#endif // DSC_RUNTIME_BROADCAST_H
