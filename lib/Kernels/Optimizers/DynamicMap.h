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
#include <vector>

namespace dsc::optim {

/// Elements per absmax of 8-bit Adam's state (bitsandbytes' blocksize for
/// optimizer states).
inline constexpr int64_t kQuantBlock = 256;
/// bitsandbytes' min_8bit_size: smaller tensors keep 32-bit state.
inline constexpr int64_t kMin8bitSize = 4096;

/// torch.linspace(start, end, steps) in float32 (its CPU kernel: the first
/// half from start, the second from end).
inline std::vector<float> linspaceF32(float start, float end, int64_t steps) {
  std::vector<float> v(static_cast<size_t>(steps));
  const float step = float((double(end) - double(start)) / double(steps - 1));
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    v[size_t(i)] =
        i < halfway
            ? float(double(start) + double(float(double(step) * double(i))))
            : float(double(end) -
                    double(float(double(step) * double(steps - i - 1))));
  return v;
}

/// bitsandbytes' create_dynamic_map(signed), 256 ascending values in
/// [-1, 1] (signed) or [0, 1].
inline std::array<float, 256> dynamicMap(bool isSigned) {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int64_t items = isSigned ? (int64_t(1) << i) + 1
                                   : (int64_t(1) << (i + 1)) + 1;
    const std::vector<float> b = linspaceF32(0.1f, 1.0f, items);
    // 10 ** (i - 6): a Python float (or the int 1), applied to the float32
    // tensor as a float32 scalar.
    double scale = 1.0;
    for (int k = i; k < 6; ++k)
      scale /= 10.0;
    const float s = float(scale);
    for (int64_t k = 0; k + 1 < items; ++k) {
      const float mean = float((double(b[size_t(k)]) + double(b[size_t(k + 1)])) / 2.0);
      const float v = float(double(s) * double(mean));
      data.push_back(v);
      if (isSigned)
        data.push_back(float(double(-s) * double(mean)));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> code{};
  std::copy(data.begin(), data.end(), code.begin());
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

/// The code of the nearest value to x (|x| <= 1) in an ascending map; a
/// value halfway between two codes takes the lower. With `keepSign` (the
/// signed momentum), a code whose sign bit differs from x's moves one step
/// towards x, as bitsandbytes' kernel does after quantize_2D.
inline uint8_t quantizeNearest(const float *code, float x, bool keepSign) {
  // The first code >= x, then the nearer of it and its predecessor.
  int lo = 0, hi = 255;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (code[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  int c = lo;
  if (c > 0 && x - code[c - 1] <= code[c] - x)
    c = c - 1;
  if (keepSign && std::signbit(code[c]) != std::signbit(x))
    c += x > 0.0f ? 1 : -1;
  return uint8_t(c);
}

} // namespace dsc::optim

#endif // DSC_LIB_KERNELS_OPTIMIZERS_DYNAMICMAP_H
