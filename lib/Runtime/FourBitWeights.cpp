//===- FourBitWeights.cpp - 4-bit parameters to and from f32 --------------===//

#include "FourBitWeights.h"

#include "Quantized/FourBit.h"

namespace dsc::rt {

std::vector<char> quantizeWeight(const FourBitStorage &q, const float *w) {
  const quant::FourBitLayout l = q.layout();
  std::vector<char> blob(size_t(l.bytes));
  quant::quantizeFourBit(q.format, l, w,
                         reinterpret_cast<uint8_t *>(blob.data()));
  return blob;
}

std::vector<float> dequantizeWeight(const FourBitStorage &q,
                                    const char *blob) {
  const quant::FourBitLayout l = q.layout();
  const auto *bytes = reinterpret_cast<const uint8_t *>(blob);
  std::vector<float> absmax(size_t(l.blocks));
  quant::blockAbsmax(l, bytes, absmax.data());
  const std::array<float, 16> code = quant::codebook(q.format);
  std::vector<float> w(size_t(l.n));
  for (int64_t i = 0; i < l.n; ++i)
    w[size_t(i)] = code[quant::codeAt(bytes + l.codesAt, i)] *
                   absmax[size_t(i / l.block)];
  return w;
}

} // namespace dsc::rt
