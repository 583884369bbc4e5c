//===- TensorSlice.h - Where a tensor-parallel slice sits in its tensor ---===//
//
// -dsc-tensor-parallel slices a parameter (and its gradient and optimizer
// state) over the T ranks of the tensor axis (Buffer::sliceDim). The runtime
// initializes, loads and saves whole tensors, so it maps between a slice
// and the whole tensor with this.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_PROGRAM_TENSORSLICE_H
#define DSC_PROGRAM_TENSORSLICE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace dsc::rt {

struct Buffer;

/// A slice viewed as [outer, groups, s, inner] inside the whole tensor
/// [outer, groups, parts, s, inner]: part p holds index p of `parts` in
/// every group, and dimension `dim` of the whole tensor has `size` =
/// groups * parts * s elements. With one group `size` may be smaller (a
/// vocabulary padded to a multiple of the parts): the last parts' rows past
/// it are padding, zero in the slice and absent from the whole tensor.
class SliceMap {
public:
  SliceMap(const std::vector<int64_t> &sliceShape, int64_t dim,
           int64_t groups, int64_t parts, int64_t size);
  /// The map of a sliced buffer (Buffer::sliceDim >= 0) on a tensor axis of
  /// `parts` ranks; `sliceShape` is the slice's (before any ZeRO sharding).
  static SliceMap of(const Buffer &buffer,
                     const std::vector<int64_t> &sliceShape, int64_t parts);

  const std::vector<int64_t> &wholeShape() const { return whole; }
  int64_t sliceElements() const { return outer * groups * s * inner; }
  int64_t wholeElements() const { return outer * size * inner; }
  int64_t parts() const { return numParts; }

  /// Calls fn(sliceOffset, wholeOffset, count) for each run of elements
  /// that is contiguous in both the slice of part `part` and the whole
  /// (none for a part that is all padding).
  template <typename Fn> void forEachRun(int64_t part, Fn fn) const {
    const int64_t rows = std::clamp(size - part * s, int64_t(0), s);
    if (groups == 1 && rows == 0)
      return;
    const int64_t count = (groups == 1 ? rows : s) * inner;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g = 0; g < groups; ++g)
        fn((o * groups + g) * s * inner,
           (o * size + (g * numParts + part) * s) * inner, count);
  }

  /// The whole tensor from every part's slice (`slices`: the parts in
  /// order, each sliceElements() elements of `elementBytes`).
  std::vector<char> assemble(const std::vector<char> &slices,
                             size_t elementBytes) const;
  /// Part `part`'s slice of the whole tensor `whole`.
  std::vector<char> extract(const std::vector<char> &whole, int64_t part,
                            size_t elementBytes) const;

private:
  std::vector<int64_t> whole;
  int64_t outer = 1, groups = 1, s = 1, inner = 1, numParts = 1, size = 1;
};

} // namespace dsc::rt

#endif // DSC_PROGRAM_TENSORSLICE_H
