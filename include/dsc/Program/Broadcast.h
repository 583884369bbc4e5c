//===- Broadcast.h - numpy broadcasting of dsc.add / dsc.reduce_to -*- C++ -*-===//
//
// The shape analysis shared by the CPU kernels and the CUDA emit logic of
// the two ops (lib/Kernels/Elementwise/ElementwiseCpu.cpp and
// ElementwiseEmit.cpp): which b broadcasts to a, a's dims merged into runs
// that b has or broadcasts, and how reduce_to walks them.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_BROADCAST_H
#define DSC_PROGRAM_BROADCAST_H

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

/// How dsc.reduce_to sums x into out (out broadcasts to x): x's merged
/// dims, its row strides (elements per step of each merged dim but the
/// last), the merged dims out keeps (full) and those it sums (bcast). Out
/// is [outRows, L] when the last merged dim is full, else [outRows]; each
/// out row sums sumRows rows of x, the q-th at xRowOffset(o, q).
struct ReduceToPlan {
  MergedDims m;
  std::vector<int64_t> xStride;
  std::vector<size_t> fullDims, bcastDims;
  int64_t outRows = 1, sumRows = 1, L = 1;
  bool lastFull = false;
  /// Offset in x of the q-th summed row of out row o.
  int64_t xRowOffset(int64_t o, int64_t q) const;
};

/// Requires broadcastable(xShape, outShape).
ReduceToPlan planReduceTo(const std::vector<int64_t> &xShape,
                          const std::vector<int64_t> &outShape);

} // namespace dsc::rt

#endif // DSC_PROGRAM_BROADCAST_H
