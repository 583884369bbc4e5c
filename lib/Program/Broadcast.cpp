//===- Broadcast.cpp - numpy broadcasting of dsc.add / dsc.reduce_to -----===//
//
// See include/dsc/Program/Broadcast.h.
//
//===----------------------------------------------------------------------===//

#include "dsc/Program/Broadcast.h"

namespace dsc::rt {

bool broadcastable(const std::vector<int64_t> &aShape,
                   const std::vector<int64_t> &bShape) {
  if (bShape.size() > aShape.size())
    return false;
  size_t off = aShape.size() - bShape.size();
  for (size_t i = 0; i < bShape.size(); ++i)
    if (bShape[i] != aShape[off + i] && bShape[i] != 1)
      return false;
  return true;
}

int64_t MergedDims::rows() const {
  int64_t r = 1;
  for (size_t i = 0; i + 1 < len.size(); ++i)
    r *= len[i];
  return r;
}

MergedDims mergeBroadcastDims(const std::vector<int64_t> &aShape,
                              const std::vector<int64_t> &bShape) {
  MergedDims m;
  size_t off = aShape.size() - bShape.size();
  for (size_t i = 0; i < aShape.size(); ++i) {
    if (aShape[i] == 1)
      continue;
    bool full = i >= off && bShape[i - off] == aShape[i];
    if (!m.len.empty() && m.full.back() == full)
      m.len.back() *= aShape[i];
    else {
      m.len.push_back(aShape[i]);
      m.full.push_back(full);
    }
  }
  if (m.len.empty()) {
    m.len.push_back(1);
    m.full.push_back(true);
  }
  m.bStride.assign(m.len.size(), 0);
  int64_t s = 1;
  for (size_t i = m.len.size(); i-- > 0;)
    if (m.full[i]) {
      m.bStride[i] = s;
      s *= m.len[i];
    }
  return m;
}

ReduceToPlan planReduceTo(const std::vector<int64_t> &xShape,
                          const std::vector<int64_t> &outShape) {
  ReduceToPlan p;
  p.m = mergeBroadcastDims(xShape, outShape);
  const size_t k = p.m.len.size();
  p.L = p.m.len.back();
  p.lastFull = p.m.full.back();
  p.xStride.assign(k, 0);
  int64_t stride = p.L;
  for (size_t i = k - 1; i-- > 0;) {
    p.xStride[i] = stride;
    stride *= p.m.len[i];
  }
  for (size_t i = 0; i + 1 < k; ++i)
    (p.m.full[i] ? p.fullDims : p.bcastDims).push_back(i);
  for (size_t i : p.fullDims)
    p.outRows *= p.m.len[i];
  for (size_t i : p.bcastDims)
    p.sumRows *= p.m.len[i];
  return p;
}

int64_t ReduceToPlan::xRowOffset(int64_t o, int64_t q) const {
  int64_t off = 0;
  for (size_t j = fullDims.size(); j-- > 0;) {
    const size_t d = fullDims[j];
    off += (o % m.len[d]) * xStride[d];
    o /= m.len[d];
  }
  for (size_t j = bcastDims.size(); j-- > 0;) {
    const size_t d = bcastDims[j];
    off += (q % m.len[d]) * xStride[d];
    q /= m.len[d];
  }
  return off;
}

} // namespace dsc::rt
