//===- MixedPrecisionKernels.cpp - Half rounding and loss scaling ---------===//
//
// The CPU backend keeps every buffer in f32; half-precision storage is
// emulated by rounding each stored value to the nearest f16/bf16 value with
// bit manipulation (no hardware conversion, so results do not depend on
// F16C or the rounding mode). The loss-scaler kernels follow
// deepspeed/runtime/fp16/loss_scaler.py and fused_optimizer.py line by line.
//
//===----------------------------------------------------------------------===//

#include "MixedPrecisionKernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace dsc::rt::cpu {

namespace {
uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float fromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
} // namespace

float roundToF16(float x) {
  const uint32_t u = bitsOf(x);
  const uint32_t sign = u & 0x80000000u;
  const uint32_t a = u ^ sign;
  if (a >= 0x7f800000u) // inf, NaN
    return x;
  if (a >= 0x477ff000u) // >= 65520: half-way to 2^16 and beyond -> inf
    return fromBits(sign | 0x7f800000u);
  if (a < 0x38800000u) {
    // Below 2^-14 half is subnormal with spacing 2^-24: round |x| * 2^24 to
    // an integer, ties to even. Scaling by a power of two is exact here.
    const uint32_t k = uint32_t(std::nearbyint(double(fromBits(a)) * 0x1p24));
    return fromBits(sign | bitsOf(float(double(k) * 0x1p-24)));
  }
  // Normal: keep 10 of the 23 mantissa bits, ties to even. A carry into the
  // exponent is the correct rounding; 65520 was handled above.
  const uint32_t lsb = (a >> 13) & 1u;
  return fromBits(sign | ((a + 0x0fffu + lsb) & ~0x1fffu));
}

float roundToBF16(float x) {
  const uint32_t u = bitsOf(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it (and quiet)
    return fromBits(u | 0x00400000u);
  // Values past the largest bfloat16 round to inf through the carry.
  const uint32_t lsb = (u >> 16) & 1u;
  return fromBits((u + 0x7fffu + lsb) & 0xffff0000u);
}

void roundToHalf(const float *x, float *y, int64_t n, bool bf16) {
  if (bf16) {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      y[i] = roundToBF16(x[i]);
  } else {
#pragma omp parallel for schedule(static) if (n > 65536)
    for (int64_t i = 0; i < n; ++i)
      y[i] = roundToF16(x[i]);
  }
}

bool hasNonFinite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if ((bitsOf(x[i]) & 0x7f800000u) == 0x7f800000u)
      return true;
  return false;
}

float currentLossScale(const float *state, double initialScale) {
  return state[0] == 0.0f ? float(initialScale) : state[0];
}

bool updateLossScale(const float *state, float *next, bool overflow,
                     const LossScalerParams &p) {
  if (!p.dynamic) {
    std::copy(state, state + 3, next);
    return true;
  }
  // DynamicLossScaler.update_scale with scale_factor 2, in terms of
  // cur_hysteresis = hysteresis - used and since = cur_iter -
  // last_overflow_iter - 1 (0 at the start: cur_iter 0, last -1).
  double scale = currentLossScale(state, p.initialScale);
  int64_t curHysteresis = p.hysteresis - int64_t(state[1]);
  int64_t since = int64_t(state[2]);
  if (overflow) {
    if (p.hysteresis == 1 || curHysteresis == 1) {
      if (float(scale) == float(p.minScale))
        return false; // "Current loss scale already at minimum"
      scale = std::max(scale / 2.0, p.minScale);
    } else {
      curHysteresis -= 1;
    }
    since = 0; // last_overflow_iter = cur_iter; cur_iter += 1
  } else {
    if (p.consecutiveHysteresis)
      curHysteresis = p.hysteresis;
    if ((since + 1) % p.scaleWindow == 0) {
      if (!p.consecutiveHysteresis)
        curHysteresis = p.hysteresis;
      scale *= 2.0;
    }
    since += 1;
  }
  next[0] = float(scale);
  next[1] = float(p.hysteresis - curHysteresis);
  next[2] = float(since);
  return true;
}

void unscaleClip(float scaledNorm, float scale, double maxNorm,
                 float &gradScale, float &norm) {
  // Python floats in DeepSpeed: double here.
  const double total = double(scaledNorm), s = double(scale);
  double combined = s;
  if (maxNorm > 0.0) {
    const double clip = ((total / s) + 1e-6) / maxNorm;
    if (clip > 1.0)
      combined = clip * s;
  }
  gradScale = float(1.0 / combined);
  norm = float(total / s);
}

} // namespace dsc::rt::cpu
