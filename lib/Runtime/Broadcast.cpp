//===- Broadcast.cpp - numpy broadcasting of dsc.add / dsc.reduce_to -----===//
//
// See include/dsc/Runtime/Broadcast.h.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Broadcast.h"

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

} // namespace dsc::rt
