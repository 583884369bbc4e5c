//===- TensorSlice.cpp - Where a tensor-parallel slice sits ---------------===//

#include "dsc/Program/TensorSlice.h"

#include "dsc/Program/Program.h"

#include <cstring>

namespace dsc::rt {

SliceMap::SliceMap(const std::vector<int64_t> &sliceShape, int64_t dim,
                   int64_t groups, int64_t parts, int64_t size)
    : whole(sliceShape), groups(groups), numParts(parts), size(size) {
  if (dim < 0 || dim >= int64_t(sliceShape.size()) || groups < 1 ||
      parts < 1 || sliceShape[size_t(dim)] % groups != 0)
    throw Error("tensor slice: dimension " + std::to_string(dim) +
                " of a rank-" + std::to_string(sliceShape.size()) +
                " tensor cannot hold " + std::to_string(groups) +
                " equal sections");
  s = sliceShape[size_t(dim)] / groups;
  const int64_t full = s * groups * parts;
  if (size < 1 || size > full || (groups > 1 && size != full) ||
      size <= full - s)
    throw Error("tensor slice: " + std::to_string(parts) + " parts of " +
                std::to_string(sliceShape[size_t(dim)]) +
                " cannot hold a whole dimension of " + std::to_string(size));
  for (int64_t d = 0; d < dim; ++d)
    outer *= sliceShape[size_t(d)];
  for (size_t d = size_t(dim) + 1; d < sliceShape.size(); ++d)
    inner *= sliceShape[d];
  whole[size_t(dim)] = size;
}

SliceMap SliceMap::of(const Buffer &buffer,
                      const std::vector<int64_t> &sliceShape, int64_t parts) {
  return SliceMap(sliceShape, buffer.sliceDim, buffer.sliceGroups, parts,
                  buffer.sliceSize);
}

std::vector<char> SliceMap::assemble(const std::vector<char> &slices,
                                     size_t elementBytes) const {
  const size_t sliceBytes = size_t(sliceElements()) * elementBytes;
  std::vector<char> out(size_t(wholeElements()) * elementBytes);
  for (int64_t p = 0; p < numParts; ++p)
    forEachRun(p, [&](int64_t from, int64_t to, int64_t count) {
      std::memcpy(out.data() + size_t(to) * elementBytes,
                  slices.data() + sliceBytes * size_t(p) +
                      size_t(from) * elementBytes,
                  size_t(count) * elementBytes);
    });
  return out;
}

std::vector<char> SliceMap::extract(const std::vector<char> &wholeBytes,
                                    int64_t part, size_t elementBytes) const {
  std::vector<char> out(size_t(sliceElements()) * elementBytes);
  forEachRun(part, [&](int64_t to, int64_t from, int64_t count) {
    std::memcpy(out.data() + size_t(to) * elementBytes,
                wholeBytes.data() + size_t(from) * elementBytes,
                size_t(count) * elementBytes);
  });
  return out;
}

} // namespace dsc::rt
