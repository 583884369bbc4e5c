//===- Half.h - IEEE binary16 and bfloat16 <-> f32 --------------*- C++ -*-===//
//
// The conversions of f16 and bf16 buffers, in software so that results do
// not depend on F16C or the host's rounding mode. Narrowing rounds to the
// nearest value, ties to even, with exact f16 subnormals (multiples of
// 2^-24); f16 values from 65520 (half-way past the largest finite half,
// 65504) become +-inf; NaN stays NaN (quieted). Widening is exact. The CUDA
// side (lib/Kernels/Common/Common.cuh) uses the hardware's conversions,
// which round the same way.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_HALF_H
#define DSC_PROGRAM_HALF_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace dsc::rt {

/// The IEEE binary32 bits of x, and back.
inline uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

/// x as IEEE binary16 bits.
inline uint16_t f16FromFloat(float x) {
  const uint32_t u = bitsOf(x);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) // NaN: keep the top payload bits, set the quiet bit
    return uint16_t(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
  if (a >= 0x477ff000u) // >= 65520 (and inf) -> inf
    return uint16_t(sign | 0x7c00u);
  if (a < 0x38800000u) {
    // Below 2^-14 half is subnormal with spacing 2^-24: round |x| * 2^24 to
    // an integer, ties to even (scaling by a power of two is exact). 1024
    // is the smallest normal half, whose encoding is that same integer.
    return uint16_t(
        sign | uint32_t(std::nearbyint(double(fromBits(a)) * 0x1p24)));
  }
  // Normal: keep 10 of the 23 mantissa bits, ties to even; a carry into the
  // exponent is the correct rounding (65520 and above were handled above).
  const uint32_t r = (a + 0x0fffu + ((a >> 13) & 1u)) & ~0x1fffu;
  return uint16_t(sign | ((((r >> 23) - 127 + 15) << 10) | ((r >> 13) & 0x3ffu)));
}

inline float floatFromF16(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0) // zero or subnormal: mant * 2^-24, exact in f32
    return fromBits(sign | bitsOf(float(mant) * 0x1p-24f));
  if (exp == 31)
    return fromBits(sign | 0x7f800000u | (mant << 13));
  return fromBits(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

/// x as bfloat16 bits; values past the largest bfloat16 round to inf
/// through the carry.
inline uint16_t bf16FromFloat(float x) {
  const uint32_t u = bitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it, quiet
    return uint16_t((u | 0x00400000u) >> 16);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline float floatFromBF16(uint16_t h) {
  return fromBits(uint32_t(h) << 16);
}

} // namespace dsc::rt

#endif // DSC_PROGRAM_HALF_H
