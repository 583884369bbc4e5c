//===- MixedPrecisionKernels.h - Half rounding and loss scaling -*- C++ -*-===//
//
// CPU kernels of dsc.round_to_half, dsc.check_finite, dsc.loss_scale,
// dsc.unscale_clip and dsc.update_loss_scale (semantics in DscOps.td).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_MIXEDPRECISIONKERNELS_H
#define DSC_LIB_RUNTIME_MIXEDPRECISIONKERNELS_H

#include <cstdint>

namespace dsc::rt::cpu {

/// The nearest IEEE binary16 value to x, ties to even, as a float: exact
/// subnormals (multiples of 2^-24), |x| >= 65520 -> inf, NaN stays NaN.
float roundToF16(float x);
/// The nearest bfloat16 value to x, ties to even, as a float; NaN stays NaN.
float roundToBF16(float x);
/// y[i] = round(x[i]) to f16 (bf16 = false) or bf16; y may alias x.
void roundToHalf(const float *x, float *y, int64_t n, bool bf16);

/// True when any of x[0..n) is inf or NaN.
bool hasNonFinite(const float *x, int64_t n);

/// DeepSpeed's DynamicLossScaler; the state is [scale (0: not started),
/// hysteresis used, iterations since the last overflow minus one].
struct LossScalerParams {
  bool dynamic = true;
  double initialScale = 65536.0;
  int64_t scaleWindow = 1000;
  int64_t hysteresis = 2;
  double minScale = 1.0;
  bool consecutiveHysteresis = false;
};
float currentLossScale(const float *state, double initialScale);
/// state -> next state after a step with `overflow`. Returns false (state
/// untouched) when an overflow happens at min_scale, which DeepSpeed
/// reports as an error.
bool updateLossScale(const float *state, float *next, bool overflow,
                     const LossScalerParams &p);
/// DeepSpeed's unscale_and_clip_grads: (1 / combined scale, unscaled norm).
void unscaleClip(float scaledNorm, float scale, double maxNorm,
                 float &gradScale, float &norm);

} // namespace dsc::rt::cpu

#endif // DSC_LIB_RUNTIME_MIXEDPRECISIONKERNELS_H
