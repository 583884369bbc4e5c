//===- DynamicMap.h - bitsandbytes' 8-bit dynamic quantization maps -*- C++ -*-===//
//
// The two code books of 8-bit Adam (bitsandbytes' create_dynamic_map:
// signed for exp_avg, unsigned for exp_avg_sq) and the rounding of a
// normalized value to its code. Header-only: the CPU kernel
// (OptimizersCpu.cpp) quantizes with it and the CUDA emitter
// (OptimizersEmit.cpp) writes the same 256 floats into the generated source,
// so both backends use one table.
//
// create_dynamic_map(signed, max_exponent_bits = 7, total_bits = 8): for
// exponent i = 0..6 the midpoints of torch.linspace(0.1, 1, F) (float32, F =
// 2^i + 1 signed, 2^(i+1) + 1 unsigned) times 10^(i-6), negated too when
// signed; then 0 and 1; sorted. The arithmetic below is torch's float32
// arithmetic (linspace from both ends, as its CPU kernel), written with
// doubles rounded to float after each exact double operation, so the
// compiler's FMA contraction cannot change a value.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_KERNELS_OPTIMIZERS_DYNAMICMAP_H
#define DSC_LIB_KERNELS_OPTIMIZERS_DYNAMICMAP_H

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace dsc::optim {

/// Elements per absmax of 8-bit Adam's state (bitsandbytes' blocksize for
/// optimizer states).
inline constexpr int64_t kQuantBlock = 256;
/// bitsandbytes' min_8bit_size: smaller tensors keep 32-bit state.
inline constexpr int64_t kMin8bitSize = 4096;

/// Point `idx` of torch.linspace(0.1, 1, steps) in float32, as its scalar
/// CPU kernel computes it: step = (1 - 0.1) / (steps - 1), the first half
/// from the start, the second from the end. (Its vectorized path rounds a
/// few points differently, by the CPU's vector width, so bitsandbytes' own
/// map varies by 1 ulp in some entries between machines.)
inline float linspacePoint(int64_t idx, int64_t steps) {
  const float start = 0.1f, end = 1.0f;
  const float range = float(double(end) - double(start));
  const float step = float(double(range) / double(steps - 1));
  return idx < steps / 2
             ? float(double(start) + double(float(double(step) * double(idx))))
             : float(double(end) -
                     double(float(double(step) * double(steps - idx - 1))));
}

/// Entry j (0..255) of bitsandbytes' create_dynamic_map(signed) in
/// ascending order, in closed form: signed, 127 negatives, 0, 127
/// positives, 1; unsigned, 0, 254 positives, 1. Exponent level i = 0..6
/// holds 2^i (signed) or 2^(i+1) (unsigned) positives, the midpoints of
/// linspace(0.1, 1, count + 1) times 10^(i-6); the levels do not overlap.
/// Optimizers.cuh's dynamicMapValue is the same arithmetic on the device.
inline float dynamicMapValue(int j, bool isSigned) {
  if (j == 255)
    return 1.0f;
  int k;
  bool negative = false;
  if (isSigned) {
    if (j == 127)
      return 0.0f;
    negative = j < 127;
    k = negative ? 126 - j : j - 128;
  } else {
    if (j == 0)
      return 0.0f;
    k = j - 1;
  }
  int level = 0, first = 0;
  for (;;) {
    const int count = isSigned ? 1 << level : 2 << level;
    if (k < first + count)
      break;
    first += count;
    ++level;
  }
  const int64_t points = (isSigned ? 1 << level : 2 << level) + 1;
  const int m = k - first;
  const float mean = float((double(linspacePoint(m, points)) +
                            double(linspacePoint(m + 1, points))) /
                           2.0);
  // 10 ** (i - 6), a Python float applied as a float32 scalar.
  static const double kScale[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  const float v = float(double(float(kScale[level])) * double(mean));
  return negative ? -v : v;
}

/// The whole map, ascending.
inline std::array<float, 256> dynamicMap(bool isSigned) {
  std::array<float, 256> code{};
  for (int j = 0; j < 256; ++j)
    code[size_t(j)] = dynamicMapValue(j, isSigned);
  return code;
}

inline const std::array<float, 256> &signedMap() {
  static const std::array<float, 256> map = dynamicMap(true);
  return map;
}
inline const std::array<float, 256> &unsignedMap() {
  static const std::array<float, 256> map = dynamicMap(false);
  return map;
}

/// quantizeNearest's rule from `c`, the first code >= x among the first
/// 255 (255 if none): the nearer of it and its predecessor, then the sign.
inline uint8_t nearestFromAbove(const float *code, float x, bool keepSign,
                                int c) {
  if (c > 0 && x - code[c - 1] <= code[c] - x)
    c = c - 1;
  if (keepSign && std::signbit(code[c]) != std::signbit(x))
    c += x > 0.0f ? 1 : -1;
  return uint8_t(c);
}

/// The code of the nearest value to x (|x| <= 1) in an ascending map; a
/// value halfway between two codes takes the lower. With `keepSign` (the
/// signed momentum), a code whose sign bit differs from x's moves one step
/// towards x, as bitsandbytes' kernel does after quantize_2D.
inline uint8_t quantizeNearest(const float *code, float x, bool keepSign) {
  int lo = 0, hi = 255;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (code[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  return nearestFromAbove(code, x, keepSign, lo);
}

/// quantizeNearest's code for many values of one map, fast: a table over
/// the top 16 bits of a float (sign, exponent, 7 mantissa bits; 64 KiB)
/// gives how many codes lie below the lowest value with those bits, and the
/// search steps up from there (rarely more than one code per bucket)
/// instead of halving all 256 (a chain of 8 dependent loads that made the search most of
/// 8-bit Adam's CPU update). The same code as quantizeNearest for every x.
class NearestCode {
public:
  explicit NearestCode(const std::array<float, 256> &map) : code(map) {
    for (uint32_t k = 0; k < kBuckets; ++k) {
      // The bucket's lowest value: its first bit pattern when positive,
      // its last when negative.
      const uint32_t bits =
          k << kShift | (k & (kBuckets / 2) ? (1u << kShift) - 1 : 0);
      float lowest;
      std::memcpy(&lowest, &bits, sizeof lowest);
      int below = 0;
      while (below < 255 && code[size_t(below)] < lowest)
        ++below;
      start[k] = uint8_t(below);
    }
  }

  uint8_t operator()(float x, bool keepSign) const {
    uint32_t bits;
    std::memcpy(&bits, &x, sizeof bits);
    // (A NaN lands on 0, as in quantizeNearest; +inf's bucket holds NaNs.)
    int c = x == x ? start[bits >> kShift] : 0;
    while (c < 255 && code[size_t(c)] < x)
      ++c;
    return nearestFromAbove(code.data(), x, keepSign, c);
  }

private:
  static constexpr uint32_t kShift = 16, kBuckets = 1u << (32 - kShift);
  std::array<float, 256> code;
  std::array<uint8_t, kBuckets> start;
};

inline const NearestCode &signedNearest() {
  static const NearestCode nearest(signedMap());
  return nearest;
}
inline const NearestCode &unsignedNearest() {
  static const NearestCode nearest(unsignedMap());
  return nearest;
}

} // namespace dsc::optim

#endif // DSC_LIB_KERNELS_OPTIMIZERS_DYNAMICMAP_H
