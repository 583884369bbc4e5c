//===- FourBit.h - bitsandbytes' 4-bit block quantization -------*- C++ -*-===//
//
// QLoRA's storage of frozen weights: NF4 (4-bit NormalFloat) or FP4 codes,
// two per byte, with one absmax per block of `block` elements of the
// row-major tensor, as bitsandbytes' quantize_4bit stores them; with double
// quantization the absmaxes are themselves stored as 8-bit codes of the
// signed dynamic map (8-bit Adam's, DynamicMap.h) in blocks of 256, after
// subtracting their mean.
//
// Header-only: the runtime quantizes weights with it when it loads them
// (lib/Runtime), the CPU kernels dequantize tiles with it
// (QuantizedCpu.cpp), and the CUDA emitter writes the same code book into
// the generated source (QuantizedEmit.cpp).
//
// The blob's layout is FourBitLayout's (include/dsc/Program). Element i is
// the high nibble of codes[i / 2] when i is even, the low one when odd
// (bitsandbytes' packing), and dequantizes to codebook[code] *
// absmax[i / block] in f32.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_QUANTIZED_FOURBIT_H
#define DSC_LIB_KERNELS_QUANTIZED_FOURBIT_H

#include "Optimizers/DynamicMap.h"
#include "dsc/Program/FourBitLayout.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace dsc::quant {

/// The format's 16 values by code. NF4: bitsandbytes' NormalFloat code book
/// (the QLoRA paper's quantiles of N(0, 1), normalized to [-1, 1]), in
/// ascending order. FP4: bitsandbytes' 1-sign, 2-exponent, 1-mantissa code,
/// bit 3 the sign.
inline const std::array<double, 16> &codebookDouble(FourBitFormat f) {
  static const std::array<double, 16> nf4 = {
      -1.0,
      -0.6961928009986877,
      -0.5250730514526367,
      -0.39491748809814453,
      -0.28444138169288635,
      -0.18477343022823334,
      -0.09105003625154495,
      0.0,
      0.07958029955625534,
      0.16093020141124725,
      0.24611230194568634,
      0.33791524171829224,
      0.44070982933044434,
      0.5626170039176941,
      0.7229568362236023,
      1.0};
  static const std::array<double, 16> fp4 = {
      0.0,          0.0625 / 12.0, 8.0 / 12.0,  1.0,
      4.0 / 12.0,   6.0 / 12.0,    2.0 / 12.0,  3.0 / 12.0,
      -0.0,         -0.0625 / 12.0, -8.0 / 12.0, -1.0,
      -4.0 / 12.0,  -6.0 / 12.0,   -2.0 / 12.0, -3.0 / 12.0};
  return f == FourBitFormat::NF4 ? nf4 : fp4;
}

/// The code book as the kernels multiply it: f32.
inline std::array<float, 16> codebook(FourBitFormat f) {
  std::array<float, 16> c{};
  for (size_t i = 0; i < 16; ++i)
    c[i] = float(codebookDouble(f)[i]);
  return c;
}

/// The code of the value nearest to x (x normalized by its block's absmax,
/// |x| <= 1); halfway takes the smaller magnitude for FP4 and the lower
/// value for NF4. The decision points are the midpoints of adjacent code
/// values rounded to f32, as bitsandbytes' decision trees compare them.
inline uint8_t quantize4(FourBitFormat f, float x) {
  const std::array<double, 16> &c = codebookDouble(f);
  if (f == FourBitFormat::NF4) {
    uint8_t code = 0;
    for (int i = 0; i < 15; ++i)
      if (x > float((c[size_t(i)] + c[size_t(i) + 1]) / 2.0))
        code = uint8_t(i + 1);
    return code;
  }
  // FP4: the magnitude's code among the positive half, then the sign.
  static const uint8_t byMagnitude[8] = {0, 1, 6, 7, 4, 5, 2, 3};
  const float a = std::fabs(x);
  uint8_t code = 0;
  for (int i = 0; i < 7; ++i)
    if (a > float((c[byMagnitude[i]] + c[byMagnitude[i + 1]]) / 2.0))
      code = byMagnitude[i + 1];
  return uint8_t(code | (x < 0.0f ? 8 : 0));
}

/// Quantizes w[0..n) into `blob` (layout.bytes bytes).
inline void quantizeFourBit(FourBitFormat f, const FourBitLayout &l,
                            const float *w, uint8_t *blob) {
  std::vector<float> absmax(size_t(l.blocks), 0.0f);
  uint8_t *codes = blob + l.codesAt;
  std::memset(codes, 0, size_t((l.n + 1) / 2));
  for (int64_t b = 0; b < l.blocks; ++b) {
    const int64_t lo = b * l.block, hi = std::min(l.n, lo + l.block);
    float m = 0.0f;
    for (int64_t i = lo; i < hi; ++i)
      m = std::max(m, std::fabs(w[i]));
    absmax[size_t(b)] = m;
    // bitsandbytes multiplies by the reciprocal; a zero block has no
    // scale and every element is the code of 0.
    const float inv = 1.0f / m;
    for (int64_t i = lo; i < hi; ++i) {
      const uint8_t q = m > 0.0f ? quantize4(f, w[i] * inv)
                                 : quantize4(f, 0.0f);
      codes[i / 2] |= uint8_t(i % 2 == 0 ? q << 4 : q);
    }
  }
  if (!l.doubleQuant) {
    std::memcpy(blob + l.absmaxAt, absmax.data(), size_t(l.blocks) * 4);
    return;
  }
  // Double quantization: the absmaxes less their mean, as 8-bit codes of
  // the signed dynamic map in blocks of 256, each with its own absmax.
  double sum = 0.0;
  for (float a : absmax)
    sum += a;
  const float offset = float(sum / double(l.blocks));
  std::memcpy(blob, &offset, 4);
  const std::array<float, 256> &map = optim::signedMap();
  for (int64_t s = 0; s < l.scales2; ++s) {
    const int64_t lo = s * kNestedBlock,
                  hi = std::min(l.blocks, lo + kNestedBlock);
    float m = 0.0f;
    for (int64_t b = lo; b < hi; ++b)
      m = std::max(m, std::fabs(absmax[size_t(b)] - offset));
    std::memcpy(blob + 4 + 4 * s, &m, 4);
    const float inv = 1.0f / m;
    for (int64_t b = lo; b < hi; ++b)
      blob[l.absmaxAt + b] = optim::quantizeNearest(
          map.data(), m > 0.0f ? (absmax[size_t(b)] - offset) * inv : 0.0f,
          /*keepSign=*/false);
  }
}

/// The f32 absmax of every block (decoded from the 8-bit codes under
/// double quantization: code * scale2 + offset, as bitsandbytes
/// dequantizes them).
inline void blockAbsmax(const FourBitLayout &l, const uint8_t *blob,
                        float *absmax) {
  if (!l.doubleQuant) {
    std::memcpy(absmax, blob + l.absmaxAt, size_t(l.blocks) * 4);
    return;
  }
  float offset;
  std::memcpy(&offset, blob, 4);
  const std::array<float, 256> &map = optim::signedMap();
  for (int64_t b = 0; b < l.blocks; ++b) {
    float scale;
    std::memcpy(&scale, blob + 4 + 4 * (b / kNestedBlock), 4);
    absmax[b] = map[blob[l.absmaxAt + b]] * scale + offset;
  }
}

/// Element i's code.
inline uint8_t codeAt(const uint8_t *codes, int64_t i) {
  const uint8_t byte = codes[i / 2];
  return i % 2 == 0 ? uint8_t(byte >> 4) : uint8_t(byte & 15);
}

/// Element i in f32: its code's value times its block's absmax (`codes`
/// and `absmax` as blockAbsmax decodes them), as bitsandbytes dequantizes.
inline float dequantizedAt(const std::array<float, 16> &code,
                           const uint8_t *codes, const float *absmax,
                           int64_t block, int64_t i) {
  return code[codeAt(codes, i)] * absmax[i / block];
}

} // namespace dsc::quant

#endif // DSC_LIB_KERNELS_QUANTIZED_FOURBIT_H
