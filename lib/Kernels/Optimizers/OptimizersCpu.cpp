//===- OptimizersCpu.cpp - Optimizer, schedule and loss-scale CPU kernels -===//
//
// adam, lamb and sgd, 1-bit Adam's ema_update and frozen_adam,
// lr_schedule, global_norm and clip_coefficient, the fp16 loss scaler
// (check_finite, loss_scale, unscale_clip, update_loss_scale), and
// runOptimizers, their dispatch. The loss-scaler
// kernels follow deepspeed/runtime/fp16/loss_scaler.py and
// fused_optimizer.py line by line.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"
#include "Optimizers/DynamicMap.h"

namespace dsc::rt::cpu {

namespace {

float clipCoefficient(float norm, double maxNorm) {
  double n = double(norm) + 1e-6;
  if (maxNorm > 0.0 && n > maxNorm)
    return float(maxNorm / n);
  return 1.0f;
}

struct AdamParams {
  double beta1, beta2, eps, weightDecay;
  bool adamw, biasCorrection;
};

// torch.optim.Adam / AdamW (single-tensor path), fp32.
void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr,
          int64_t step, float gscale, const AdamParams &hp) {
  const float b1 = float(hp.beta1), b2 = float(hp.beta2), eps = float(hp.eps),
              wd = float(hp.weightDecay);
  double bc1 = 1.0, bc2 = 1.0;
  if (hp.biasCorrection) {
    bc1 = 1.0 - std::pow(hp.beta1, double(step));
    bc2 = 1.0 - std::pow(hp.beta2, double(step));
  }
  const float stepSize = float(double(lr) / bc1);
  const float bc2Sqrt = float(std::sqrt(bc2));
  const float decay = float(1.0 - double(lr) * hp.weightDecay);
  // As PyTorch: (1 - beta) is a Python double, applied as an fp32 scalar.
  const float c1 = float(1.0 - hp.beta1), c2 = float(1.0 - hp.beta2);
  const bool adamw = hp.adamw, l2 = !hp.adamw && wd != 0.0f;
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * gscale;
    float pi = p[i];
    if (l2)
      gi += wd * pi;
    if (adamw)
      pi *= decay;
    float mi = b1 * m[i] + c1 * gi;
    float vi = b2 * v[i] + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float denom = std::sqrt(vi) / bc2Sqrt + eps;
    p[i] = pi - stepSize * (mi / denom);
  }
}

struct LambParams {
  double beta1, beta2, eps, weightDecay, maxCoeff, minCoeff;
  bool biasCorrection;
};

// DeepSpeed FusedLamb, read from microsoft/DeepSpeed
// csrc/lamb/fused_lamb_cuda_kernel.cu (lamb_cuda_kernel_part1/part3 and
// fused_lamb_cuda) and deepspeed/ops/lamb/fused_lamb.py (eps_inside_sqrt
// defaults to False -> eps_mode 1, "eps outside sqrt"):
//   g'     = g * gscale           (DeepSpeed: g / grad_scale; dsc passes the
//                                  reciprocal combined scale as gscale)
//   m      = b1 m + (1-b1) g'      v = b2 v + (1-b2) g'^2     (no bias corr.)
//   update = m / (sqrt(v) + eps) + weight_decay * p           (p before step)
//   w_norm = ||p||,  u_norm = ||update||
//   coeff  = (w_norm != 0 && u_norm != 0) ? clamp(w_norm/u_norm, min, max) : 1
//            (applied as `> max -> max` then `< min -> min`)
//   step_size = bias_correction ? lr * sqrt(1-b2^s) / (1-b1^s) : lr
//   p     -= step_size * coeff * update
// Norms accumulate in double here (DeepSpeed: fp32 block reductions).
/// LAMB's trust ratio from the squared norms of the weights and of the
/// update: clamp(||w|| / ||u||) (`> max -> max`, then `< min -> min`), 1
/// when either norm is 0.
float trustRatio(double w2, double u2, double maxCoeff, double minCoeff) {
  const float wn = float(std::sqrt(w2)), un = float(std::sqrt(u2));
  float coeff = 1.0f;
  if (wn != 0.0f && un != 0.0f) {
    coeff = wn / un;
    if (coeff > float(maxCoeff))
      coeff = float(maxCoeff);
    if (coeff < float(minCoeff))
      coeff = float(minCoeff);
  }
  return coeff;
}

/// The elements of one chunk of chunkedRangeSums.
constexpr int64_t kSumChunk = 1 << 14;

/// Two sums over [0, n) in double, in fixed chunks of kSumChunk elements
/// (so the result does not depend on the thread count): chunkFn(i0, i1)
/// returns its chunk's two sums, accumulated in index order.
template <typename ChunkFn>
std::pair<double, double> chunkedRangeSums(int64_t n, ChunkFn chunkFn) {
  const int64_t chunks = std::max<int64_t>(1, ceilDiv(n, kSumChunk));
  std::vector<double> pa(size_t(chunks), 0.0), pb(size_t(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t c = 0; c < chunks; ++c) {
    const auto [a, b] =
        chunkFn(c * kSumChunk, std::min(n, (c + 1) * kSumChunk));
    pa[size_t(c)] = a;
    pb[size_t(c)] = b;
  }
  double a = 0.0, b = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    a += pa[size_t(c)];
    b += pb[size_t(c)];
  }
  return {a, b};
}

/// Sums fn(i) over [0, n) in chunkedRangeSums' chunks; fn returns the two
/// terms to sum.
template <typename Fn>
std::pair<double, double> chunkedSums(int64_t n, Fn fn) {
  return chunkedRangeSums(n, [&](int64_t i0, int64_t i1) {
    double a = 0.0, b = 0.0;
    for (int64_t i = i0; i < i1; ++i) {
      auto [x, y] = fn(i);
      a += x;
      b += y;
    }
    return std::pair<double, double>(a, b);
  });
}

/// Returns the trust ratio (lamb coefficient) that was applied.
float lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr,
           int64_t step, float gscale, const LambParams &hp) {
  const float b1 = float(hp.beta1), b2 = float(hp.beta2), eps = float(hp.eps),
              wd = float(hp.weightDecay);
  // The moments' update and the norms in one pass (lamb_coeff_ema sums the
  // same terms in the same order, so it sees the same ratio).
  auto [w2, u2] = chunkedSums(n, [&](int64_t i) {
    float gi = g[i] * gscale;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float u = mi / (std::sqrt(vi) + eps) + wd * p[i];
    return std::pair<double, double>(double(p[i]) * double(p[i]),
                                     double(u) * double(u));
  });
  const float coeff = trustRatio(w2, u2, hp.maxCoeff, hp.minCoeff);
  float stepSize = lr;
  if (hp.biasCorrection) {
    const float bc1 = float(1.0 - std::pow(hp.beta1, double(step)));
    const float bc2 = float(1.0 - std::pow(hp.beta2, double(step)));
    stepSize = lr * std::sqrt(bc2) / bc1;
  }
  const float k = stepSize * coeff;
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float u = m[i] / (std::sqrt(v[i]) + eps) + wd * p[i];
    p[i] = p[i] - k * u;
  }
  return coeff;
}

struct SgdParams {
  double momentum, dampening, weightDecay;
  bool nesterov;
};

// torch.optim.SGD (single-tensor path).
void sgd(float *p, const float *g, float *buf, int64_t n, float lr,
         int64_t step, float gscale, const SgdParams &hp) {
  const float mom = float(hp.momentum), oneMinusDamp = float(1.0 - hp.dampening),
              wd = float(hp.weightDecay);
  const bool useMom = hp.momentum != 0.0, first = step <= 1,
             nesterov = hp.nesterov;
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * gscale + wd * p[i];
    if (useMom) {
      float b = first ? gi : mom * buf[i] + oneMinusDamp * gi;
      buf[i] = b;
      gi = nesterov ? gi + mom * b : b;
    }
    p[i] = p[i] - lr * gi;
  }
}

struct Adam8bitParams {
  double beta1, beta2, eps, weightDecay;
};

// bitsandbytes' Adam8bit / AdamW8bit (kOptimizerStatic8bit2StateBlockwise,
// read from bitsandbytes csrc/kernels.cu): per block of 256 elements the
// moments are dequantized (code * absmax), updated in float as the kernel
// writes it, the parameter stepped with the unquantized moments, then the
// block's new absmax found and every moment quantized to its nearest code.
// Blocks are independent, so the result does not depend on the threads.
void adam8bit(float *p, const float *g, uint8_t *q1, uint8_t *q2,
              float *absmax1, float *absmax2, int64_t n, float lr,
              int64_t step, float gscale, const Adam8bitParams &hp) {
  using namespace dsc::optim;
  const float b1 = float(hp.beta1), b2 = float(hp.beta2), eps = float(hp.eps),
              wd = float(hp.weightDecay);
  // As the kernel: corrections in float (powf), the step size negative.
  const float c1 = 1.0f - std::pow(b1, float(step));
  const float c2 = std::sqrt(1.0f - std::pow(b2, float(step)));
  const float stepSize = (-lr * c2) / c1;
  const float decay = 1.0f - lr * wd;
  const float c2eps = c2 * eps;
  const float *code1 = signedMap().data(), *code2 = unsignedMap().data();
  const NearestCode &nearest1 = signedNearest(), &nearest2 = unsignedNearest();
  const int64_t blocks = ceilDiv(n, kQuantBlock);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kQuantBlock,
                  i1 = std::min(n, i0 + kQuantBlock);
    float s1[kQuantBlock], s2[kQuantBlock];
    bool finite[kQuantBlock];
    float max1 = 0.0f, max2 = 0.0f;
    const float a1 = absmax1[blk], a2 = absmax2[blk];
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t j = i - i0;
      finite[j] = std::isfinite(g[i]);
      if (finite[j]) {
        const float gv = g[i] * gscale;
        float v = code2[q2[i]] * a2;
        v = (v * b2) + (((1.0f - b2) * gv) * gv);
        float m = code1[q1[i]] * a1;
        m = (m * b1) + ((1.0f - b1) * gv);
        s1[j] = m;
        s2[j] = v;
      } else { // bitsandbytes zeroes the moments of a non-finite gradient
        s1[j] = 0.0f;
        s2[j] = 0.0f;
      }
      max1 = std::max(max1, std::fabs(s1[j]));
      max2 = std::max(max2, std::fabs(s2[j]));
    }
    absmax1[blk] = max1;
    absmax2[blk] = max2;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t j = i - i0;
      if (finite[j]) {
        float pi = p[i] + (stepSize * (s1[j] / (std::sqrt(s2[j]) + c2eps)));
        if (wd > 0.0f)
          pi = pi * decay;
        p[i] = pi;
      }
      // An all-zero block (absmax 0) stores the code of 0.
      q1[i] = max1 > 0.0f ? nearest1(s1[j] / max1, true) : 127;
      q2[i] = max2 > 0.0f ? nearest2(s2[j] / max2, false) : 0;
    }
  }
}

struct AdafactorParams {
  double eps1, eps2, clipThreshold, decayRate, beta1, weightDecay;
  bool firstMoment, scaleParameter, relativeStep, warmupInit;
};

/// Adafactor's learning rate of step t (transformers' _get_lr) for a
/// parameter of RMS `rms`.
double adafactorLr(const AdafactorParams &hp, double lr, int64_t t,
                   double rms) {
  double rel = lr;
  if (hp.relativeStep)
    rel = std::min(hp.warmupInit ? 1e-6 * double(t) : 1e-2,
                   1.0 / std::sqrt(double(t)));
  const double scale = hp.scaleParameter ? std::max(hp.eps2, rms) : 1.0;
  return scale * rel;
}

// transformers.optimization.Adafactor.step for one parameter, float32 as
// torch computes it, the means and norms accumulated in double over a fixed
// order. `row`/`col` are the factors of a [batch, R, C] parameter (null for
// a vector, which uses `v`); `m` the first moment or null.
void adafactor(float *p, const float *g, float *row, float *col, float *v,
               float *m, int64_t batch, int64_t R, int64_t C, float lr,
               int64_t t, float gscale, const AdafactorParams &hp) {
  const int64_t n = batch * R * C;
  const double rmsP = n ? std::sqrt(sumSquares(p, n)) / std::sqrt(double(n)) : 0.0;
  const float lrT = float(adafactorLr(hp, lr, t, double(float(rmsP))));
  const float beta2t = float(1.0 - std::pow(double(t), hp.decayRate));
  const float keep = beta2t, take = float(1.0 - double(beta2t));
  const float eps1 = float(hp.eps1);
  std::vector<float> rowFactor, colFactor;
  if (row) {
    // Means of g'^2 + eps1 over the last dimension (rows) and the one
    // before it (columns); then rsqrt(row / mean(row)) and rsqrt(col).
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (int64_t r = 0; r < batch * R; ++r) {
      double sum = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        const float gv = g[r * C + c] * gscale;
        sum += double(gv * gv + eps1);
      }
      row[r] = row[r] * keep + take * float(sum / double(C));
    }
    // Each column's sum over the rows in row order, kept for a block of
    // columns at a time so the gradient is read along its rows (a column
    // walk touches a cache line per element).
    constexpr int64_t kColumns = 256;
    const int64_t blocksPerMatrix = ceilDiv(C, kColumns);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
    for (int64_t k = 0; k < batch * blocksPerMatrix; ++k) {
      const int64_t b = k / blocksPerMatrix,
                    c0 = (k % blocksPerMatrix) * kColumns,
                    c1 = std::min(C, c0 + kColumns);
      double sums[kColumns] = {};
      for (int64_t r = 0; r < R; ++r) {
        const float *gr = g + (b * R + r) * C;
        for (int64_t c = c0; c < c1; ++c) {
          const float gv = gr[c] * gscale;
          sums[c - c0] += double(gv * gv + eps1);
        }
      }
      for (int64_t c = c0; c < c1; ++c)
        col[b * C + c] =
            col[b * C + c] * keep + take * float(sums[c - c0] / double(R));
    }
    rowFactor.resize(size_t(batch * R));
    colFactor.resize(size_t(batch * C));
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0.0;
      for (int64_t r = 0; r < R; ++r)
        sum += double(row[b * R + r]);
      const float mean = float(sum / double(R));
      for (int64_t r = 0; r < R; ++r)
        rowFactor[size_t(b * R + r)] = 1.0f / std::sqrt(row[b * R + r] / mean);
    }
    for (int64_t bc = 0; bc < batch * C; ++bc)
      colFactor[size_t(bc)] = 1.0f / std::sqrt(col[bc]);
  } else {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
    for (int64_t i = 0; i < n; ++i) {
      const float gv = g[i] * gscale;
      v[i] = v[i] * keep + take * (gv * gv + eps1);
    }
  }
  // The unscaled update of elements [i0, i1), fn(i, u) in index order; a
  // factored parameter's row and column follow i without a division per
  // element.
  auto updates = [&](int64_t i0, int64_t i1, auto fn) {
    if (!row) {
      for (int64_t i = i0; i < i1; ++i)
        fn(i, (1.0f / std::sqrt(v[i])) * (g[i] * gscale));
      return;
    }
    int64_t rowIndex = i0 / C, c = i0 % C; // rowIndex = b * R + r
    for (int64_t i = i0; i < i1; ++rowIndex, c = 0) {
      const float rf = rowFactor[size_t(rowIndex)];
      const float *cf = colFactor.data() + (rowIndex / R) * C;
      for (const int64_t end = std::min(i1, i + (C - c)); i < end; ++i, ++c)
        fn(i, rf * cf[c] * (g[i] * gscale));
    }
  };
  const double u2 = chunkedRangeSums(n, [&](int64_t i0, int64_t i1) {
                      double sum = 0.0;
                      updates(i0, i1, [&](int64_t, float u) {
                        sum += double(u) * double(u);
                      });
                      return std::pair<double, double>(sum, 0.0);
                    }).first;
  const double rmsU = n ? std::sqrt(u2) / std::sqrt(double(n)) : 0.0;
  const float divisor =
      std::max(float(rmsU) / float(hp.clipThreshold), 1.0f);
  const float b1 = float(hp.beta1), oneMinusB1 = float(1.0 - hp.beta1);
  const float decay = float(-hp.weightDecay * double(lrT));
  const bool decayed = hp.weightDecay != 0.0;
  auto step = [&](int64_t i, float u) {
    u = (u / divisor) * lrT;
    if (m) {
      m[i] = m[i] * b1 + oneMinusB1 * u;
      u = m[i];
    }
    float pi = p[i];
    if (decayed)
      pi = pi + pi * decay;
    p[i] = pi - u;
  };
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t k = 0; k < ceilDiv(n, kSumChunk); ++k)
    updates(k * kSumChunk, std::min(n, (k + 1) * kSumChunk), step);
}

// DeepSpeed deepspeed/runtime/lr_schedules.py (WarmupLR, WarmupDecayLR,
// WarmupCosineLR; microsoft/DeepSpeed @38327e07, lines 633-858) driven the way
// deepspeed/runtime/engine.py drives it: the scheduler is constructed with
// last_batch_iteration = -1, and the constructor only *applies* get_lr() at
// -1 (it does not step). DeepSpeedEngine._take_model_step (engine.py lines
// 2216-2271 at the same commit) calls
// optimizer.step() and only afterwards lr_scheduler.step(). So optimizer
// update s (1-based) runs with last_batch_iteration = s - 2:
//   s = 1 -> -1: WarmupLR/WarmupDecayLR give warmup_min_lr, WarmupCosineLR
//                gives 0.0 (get_lr() returns [0.0] before the start);
//   s = 2 ->  0: log warmup gives log(1) = 0 -> warmup_min_lr again, ...
// warmup_num_steps is max(2, warmup_num_steps) as in DeepSpeed.
/// Learning rate of optimizer update number `step` (1-based).
double lrSchedule(const LrScheduleAttrs &p, int64_t step) {
  if (p.kind == LrScheduleAttrs::Constant)
    return p.lr;
  const bool isCos = p.kind == LrScheduleAttrs::WarmupCosineLR;
  const int64_t last = step - 2; // last_batch_iteration
  const int64_t warmup = std::max<int64_t>(2, p.warmupNumSteps);
  const double invLog = 1.0 / std::log(double(warmup));
  auto warmupGamma = [&]() {
    return p.logWarmup ? invLog * std::log(double(last + 1))
                                 : double(last) / double(warmup);
  };
  if (isCos) {
    if (last < 0)
      return 0.0;
    double ratio;
    if (last < warmup) {
      ratio = p.warmupMinRatio + warmupGamma() * (1.0 - p.warmupMinRatio);
    } else {
      const int64_t realLast = last - warmup + 1;
      const int64_t realTotal = p.totalNumSteps - warmup; // != 0: checked
      double c = (1.0 + std::cos(M_PI * double(realLast) / double(realTotal))) /
                 2.0;
      ratio = std::max(0.0, p.cosMinRatio + (1.0 - p.cosMinRatio) * c);
    }
    return p.lr * ratio;
  }
  if (last < 0)
    return p.warmupMinLr;
  double gamma;
  if (last < warmup)
    gamma = warmupGamma();
  else if (p.kind == LrScheduleAttrs::WarmupLR)
    gamma = 1.0;
  else
    gamma = std::max(0.0, double(p.totalNumSteps - last) /
                              std::max(1.0, double(p.totalNumSteps - warmup)));
  return p.warmupMinLr + (p.warmupMaxLr - p.warmupMinLr) * gamma;
}

//===----------------------------------------------------------------------===//
// Loss scaling
//===----------------------------------------------------------------------===//

/// True when any of x[0..n) is inf or NaN.
bool hasNonFinite(const float *x, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if ((bitsOf(x[i]) & 0x7f800000u) == 0x7f800000u)
      return true;
  return false;
}

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
float currentLossScale(const float *state, double initialScale) {
  return state[0] == 0.0f ? float(initialScale) : state[0];
}

/// state -> next state after a step with `overflow`. Returns false (state
/// untouched) when an overflow happens at min_scale, which DeepSpeed
/// reports as an error.
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

/// DeepSpeed's unscale_and_clip_grads: (1 / combined scale, unscaled norm).
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

/// The scalars after an optimizer's tensor operands (Ops.def: param, grad,
/// one state per output after the param, then lr, step, gscale and the
/// optional fp16 skip flag).
struct UpdateScalars {
  float lr = 0, gscale = 0;
  int64_t step = 0;
};

/// Reads them into `u`; false when the skip flag is set (the update is
/// skipped, and the step is not checked).
bool updateScalars(Exec &e, UpdateScalars &u) {
  const size_t k = size_t(opInfo(e.I.op).minOuts) + 1;
  if (e.I.inputs.size() == k + 4 && e.scalarIn(k + 3, "skip") != 0.0f)
    return false;
  u.lr = e.scalarIn(k, "lr");
  u.step = e.stepIn(k + 1);
  u.gscale = e.scalarIn(k + 2, "gscale");
  if (u.step < 1)
    e.fail("step counter must be >= 1, got " + std::to_string(u.step));
  return true;
}

} // namespace

/// DeepSpeed's OnebitAdam and ZeroOneAdam with the variance frozen: update
/// = m / (sqrt(v) + eps) + wd * p, applied as p += -lr * update. Callers
/// zero m where v == 0 (only zero gradients so far), which keeps
/// compression noise out of momenta that must stay zero.
static inline float frozenAdamUpdate(float m, float v, float p, float eps,
                                     float wd) {
  float update = m / (std::sqrt(v) + eps);
  if (wd != 0.0f)
    update += wd * p;
  return update;
}

void runOptimizers(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  switch (asFamily<OptimizersOpcode>(I.op)) {
  case OptimizersOpcode::GlobalNorm: {
    double total = 0.0;
    for (size_t k = 0; k < I.inputs.size(); ++k)
      total += sumSquares(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = float(std::sqrt(total));
    return;
  }
  case OptimizersOpcode::ClipCoefficient: {
    float norm = e.scalarIn(0, "norm");
    e.fout(0, "output")[0] = clipCoefficient(norm, I.getFloat("max_norm"));
    return;
  }
  case OptimizersOpcode::LrSchedule: {
    const int64_t step = e.stepIn(0);
    e.fout(0, "output")[0] = float(lrSchedule(d.schedule, step));
    return;
  }
  case OptimizersOpcode::Adam:
  case OptimizersOpcode::Lamb: {
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *m = e.inPlace(2, 1, "exp_avg");
    float *v = e.inPlace(3, 2, "exp_avg_sq");
    UpdateScalars u;
    if (!updateScalars(e, u))
      return; // fp16 overflow: param and state pass through
    const float lr = u.lr, gscale = u.gscale;
    const int64_t step = u.step;
    if (I.op == Opcode::Adam) {
      AdamParams hp{I.getFloat("beta1"),    I.getFloat("beta2"),
                    I.getFloat("eps"),      I.getFloat("weight_decay"),
                    I.getInt("adamw") != 0, I.getInt("bias_correction") != 0};
      adam(p, g, m, v, d.n, lr, step, gscale, hp);
    } else {
      LambParams hp{I.getFloat("beta1"),
                    I.getFloat("beta2"),
                    I.getFloat("eps"),
                    I.getFloat("weight_decay"),
                    I.getFloat("max_coeff"),
                    I.getFloat("min_coeff"),
                    I.getInt("bias_correction") != 0};
      lamb(p, g, m, v, d.n, lr, step, gscale, hp);
    }
    return;
  }
  case OptimizersOpcode::Sgd: {
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *buf = e.inPlace(2, 1, "momentum_buffer");
    UpdateScalars u;
    if (!updateScalars(e, u))
      return; // fp16 overflow: param and state pass through
    const float lr = u.lr, gscale = u.gscale;
    const int64_t step = u.step;
    SgdParams hp{I.getFloat("momentum"), I.getFloat("dampening"),
                 I.getFloat("weight_decay"), I.getInt("nesterov") != 0};
    sgd(p, g, buf, d.n, lr, step, gscale, hp);
    return;
  }
  case OptimizersOpcode::Adam8bit: {
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    uint8_t *q[2];
    for (size_t k = 0; k < 2; ++k) {
      const uint8_t *src = e.u8in(2 + k, k ? "exp_avg_sq" : "exp_avg");
      q[k] = e.u8out(1 + k, k ? "exp_avg_sq" : "exp_avg");
      if (q[k] != src)
        copyBytes(q[k], src, size_t(d.n));
    }
    float *absmax1 = e.inPlace(4, 3, "exp_avg_absmax");
    float *absmax2 = e.inPlace(5, 4, "exp_avg_sq_absmax");
    UpdateScalars u;
    if (!updateScalars(e, u))
      return; // fp16 overflow: param and state pass through
    Adam8bitParams hp{I.getFloat("beta1"), I.getFloat("beta2"),
                      I.getFloat("eps"), I.getFloat("weight_decay")};
    adam8bit(p, g, q[0], q[1], absmax1, absmax2, d.n, u.lr, u.step, u.gscale,
             hp);
    return;
  }
  case OptimizersOpcode::Adafactor: {
    const size_t states = I.outputs.size() - 1;
    const bool factored = e.in(0).shape.size() >= 2,
               first = I.getInt("first_moment") != 0;
    float *p = e.inPlace(0, 0, "param");
    const float *g = e.fin(1, "grad");
    float *st[3] = {nullptr, nullptr, nullptr};
    for (size_t k = 0; k < states; ++k)
      st[k] = e.inPlace(2 + k, 1 + k, "state");
    const size_t at = 2 + states;
    if (e.I.inputs.size() == at + 4 && e.scalarIn(at + 3, "skip") != 0.0f)
      return; // fp16 overflow: param and state pass through
    const float lr = e.scalarIn(at, "lr"), gscale = e.scalarIn(at + 2, "gscale");
    const int64_t step = e.stepIn(at + 1);
    if (step < 1)
      e.fail("step counter must be >= 1, got " + std::to_string(step));
    AdafactorParams hp{I.getFloat("eps1"),         I.getFloat("eps2"),
                       I.getFloat("clip_threshold"), I.getFloat("decay_rate"),
                       I.getFloat("beta1"),        I.getFloat("weight_decay"),
                       first,
                       I.getInt("scale_parameter") != 0,
                       I.getInt("relative_step") != 0,
                       I.getInt("warmup_init") != 0};
    float *row = factored ? st[0] : nullptr, *col = factored ? st[1] : nullptr,
          *v = factored ? nullptr : st[0];
    float *m = first ? st[states - 1] : nullptr;
    adafactor(p, g, row, col, v, m, d.batch, d.M, d.N, lr, step, gscale, hp);
    return;
  }
  case OptimizersOpcode::EmaUpdate: {
    const float *avg = e.fin(0, "avg");
    const float *g = e.fin(1, "grad");
    const float gscale = e.scalarIn(2, "grad_scale");
    const bool skip = I.inputs.size() == 4 && e.scalarIn(3, "skip") != 0.0f;
    float *out = e.fout(0, "result");
    if (skip) {
      copyBytes(out, avg, size_t(d.n) * sizeof(float));
      return;
    }
    // As Adam's momentum: beta and (1 - beta) applied as fp32 scalars.
    const float b = float(I.getFloat("beta")),
                c = float(1.0 - I.getFloat("beta"));
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i)
      out[i] = b * avg[i] + c * (g[i] * gscale);
    return;
  }
  case OptimizersOpcode::FrozenAdam: {
    const float *p = e.fin(0, "param");
    const float *oldM = e.fin(1, "old_exp_avg");
    const float *m = e.fin(2, "exp_avg");
    const float *v = e.fin(3, "exp_avg_sq");
    const float lr = e.scalarIn(4, "lr");
    const bool skip = I.inputs.size() == 6 && e.scalarIn(5, "skip") != 0.0f;
    float *newP = e.fout(0, "new_param");
    float *newM = e.fout(1, "new_exp_avg");
    if (skip) {
      copyBytes(newP, p, size_t(d.n) * sizeof(float));
      copyBytes(newM, oldM, size_t(d.n) * sizeof(float));
      return;
    }
    const float eps = float(I.getFloat("eps")),
                wd = float(I.getFloat("weight_decay"));
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i) {
      const float mi = v[i] != 0.0f ? m[i] : 0.0f;
      newP[i] = p[i] + -lr * frozenAdamUpdate(mi, v[i], p[i], eps, wd);
      newM[i] = mi;
    }
    return;
  }
  // 1-bit LAMB (DeepSpeed's OnebitLamb).
  case OptimizersOpcode::LambCoeffEma: {
    const float *p = e.fin(0, "param"), *m = e.fin(1, "exp_avg"),
                *v = e.fin(2, "exp_avg_sq");
    const float eps = float(I.getFloat("eps")),
                wd = float(I.getFloat("weight_decay"));
    // The update as lamb() computes it, from the same values.
    auto [w2, u2] = chunkedSums(d.n, [&](int64_t i) {
      const float u = m[i] / (std::sqrt(v[i]) + eps) + wd * p[i];
      return std::pair<double, double>(double(p[i]) * double(p[i]),
                                       double(u) * double(u));
    });
    const float ratio = trustRatio(w2, u2, I.getFloat("max_coeff"),
                                   I.getFloat("min_coeff"));
    const double coeff = e.scalarIn(3, "coeff"),
                 beta = I.getFloat("coeff_beta");
    e.fout(0, "new_coeff")[0] =
        ratio != 1.0f ? float(beta * coeff + (1.0 - beta) * double(ratio))
                      : float(coeff);
    return;
  }
  case OptimizersOpcode::MomentumScales: {
    // r_i = ||m_i|| / sqrt(n_i); scale_i = mean(r) / r_i.
    std::vector<double> r(I.inputs.size());
    double mean = 0.0;
    for (size_t k = 0; k < r.size(); ++k) {
      const float *m = e.fin(k, "momentum");
      const int64_t n = e.in(k).numElements();
      double sq = chunkedSums(n, [&](int64_t i) {
                    return std::pair<double, double>(double(m[i]) * m[i], 0.0);
                  }).first;
      r[k] = std::sqrt(sq) / std::sqrt(double(n));
      mean += r[k] / double(r.size());
    }
    for (size_t k = 0; k < r.size(); ++k)
      e.fout(k, "scale")[0] = r[k] != 0.0 ? float(mean / r[k]) : 1.0f;
    return;
  }
  case OptimizersOpcode::ScaleBy: {
    const float *x = e.fin(0, "input");
    const float s = e.scalarIn(1, "factor");
    float *out = e.fout(0, "result");
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i)
      out[i] = x[i] * s;
    return;
  }
  case OptimizersOpcode::OnebitLambUpdate: {
    const float *p = e.fin(0, "param"), *mc = e.fin(1, "exp_avg"),
                *last = e.fin(2, "last_exp_avg"), *v = e.fin(3, "exp_avg_sq"),
                *fresh = e.fin(4, "exp_avg_sq_fresh");
    const float scaling = e.scalarIn(5, "scaling"),
                coeffFreeze = e.scalarIn(6, "coeff_freeze"),
                lastFactor = e.scalarIn(7, "last_factor"),
                lr = e.scalarIn(8, "lr");
    const float b1 = float(I.getFloat("beta1")), b2 = float(I.getFloat("beta2")),
                eps = float(I.getFloat("eps")),
                wd = float(I.getFloat("weight_decay"));
    float *newP = e.fout(0, "new_param"), *newM = e.fout(1, "new_exp_avg"),
          *newFresh = e.fout(2, "new_exp_avg_sq_fresh");
    // m, the fresh variance, and the factor's maximum in one pass.
    float factor = 0.0f;
#pragma omp parallel for schedule(static) reduction(max : factor) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i) {
      const float m = v[i] != 0.0f ? mc[i] / scaling : 0.0f;
      const float g = (m - last[i] * b1) / (1.0f - b1);
      const float f = b2 * fresh[i] + (1.0f - b2) * g * g;
      newM[i] = m;
      newFresh[i] = f;
      const float denom = std::sqrt(v[i]) + eps;
      factor = std::max(factor, denom / (std::sqrt(f) + eps));
    }
    if (wd > 0.0f) {
      auto [prelim2, update2] = chunkedSums(d.n, [&](int64_t i) {
        const float prelim = newM[i] / (std::sqrt(v[i]) + eps);
        const float update = prelim + wd * p[i];
        return std::pair<double, double>(double(prelim) * prelim,
                                         double(update) * update);
      });
      const double ratio =
          update2 > 0.0 ? std::min(1.0, std::sqrt(prelim2) / std::sqrt(update2))
                        : 1.0;
      factor = float(factor * ratio + (1.0 - ratio));
    }
    factor = std::clamp(factor, float(I.getFloat("factor_min")),
                        float(I.getFloat("factor_max")));
    const float thr = float(I.getFloat("factor_threshold"));
    factor = std::min(factor, lastFactor * (1.0f + thr));
    factor = std::max(factor, lastFactor * (1.0f - thr));
    e.fout(3, "new_last_factor")[0] = factor;
    const float k = lr * coeffFreeze * factor;
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i)
      newP[i] = p[i] - k * frozenAdamUpdate(newM[i], v[i], p[i], eps, wd);
    return;
  }
  // 0/1 Adam (DeepSpeed's ZeroOneAdam): local steps accumulate their
  // updates; a synchronisation undoes them, all-reduces them in momentum
  // units and applies the mean. v == 0 marks elements that have only had
  // zero gradients (the derived exp_avg_mask).
  case OptimizersOpcode::LocalAdam: {
    const float *p = e.fin(0, "param"), *m = e.fin(2, "exp_avg"),
                *v = e.fin(3, "exp_avg_sq"), *u = e.fin(4, "accumulator");
    const float lr = e.scalarIn(5, "lr");
    const float eps = float(I.getFloat("eps")),
                wd = float(I.getFloat("weight_decay"));
    float *newP = e.fout(0, "new_param"), *newM = e.fout(1, "new_exp_avg"),
          *newU = e.fout(2, "new_accumulator");
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i) {
      const float mi = v[i] != 0.0f ? m[i] : 0.0f;
      const float update = frozenAdamUpdate(mi, v[i], p[i], eps, wd);
      newP[i] = p[i] + -lr * update;
      newM[i] = mi;
      newU[i] = u[i] + -lr * update;
    }
    return;
  }
  case OptimizersOpcode::ZeroOneUnwind: {
    const float *p = e.fin(0, "param"), *u = e.fin(1, "accumulator"),
                *v = e.fin(2, "exp_avg_sq");
    const float eps = float(I.getFloat("eps"));
    float *start = e.fout(0, "start_param"), *scaled = e.fout(1, "scaled");
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i) {
      start[i] = p[i] + -1.0f * u[i];
      scaled[i] = u[i] * (std::sqrt(v[i]) + eps);
    }
    return;
  }
  case OptimizersOpcode::ZeroOneSync: {
    const float *p = e.fin(0, "param"), *w = e.fin(1, "reduced"),
                *v = e.fin(2, "exp_avg_sq");
    const float lrSum = e.scalarIn(3, "lr_sum");
    const float eps = float(I.getFloat("eps"));
    if (!(lrSum > 0.0f))
      e.fail("lr_sum must be > 0 (a synchronisation follows at least one "
             "local step with a positive learning rate), got " +
             std::to_string(lrSum));
    float *newP = e.fout(0, "new_param"), *newM = e.fout(1, "new_exp_avg");
#pragma omp parallel for simd schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i) {
      const float wi = v[i] != 0.0f ? w[i] : 0.0f;
      newM[i] = -(wi / lrSum);
      newP[i] = p[i] + wi / (std::sqrt(v[i]) + eps);
    }
    return;
  }
  case OptimizersOpcode::CheckFinite: {
    bool overflow = false;
    for (size_t k = 0; k < I.inputs.size() && !overflow; ++k)
      overflow = hasNonFinite(e.fin(k, "input"), e.in(k).numElements());
    e.fout(0, "output")[0] = overflow ? 1.0f : 0.0f;
    return;
  }
  case OptimizersOpcode::LossScale: {
    const float scale =
        currentLossScale(e.fin(0, "state"), I.getFloat("initial_scale"));
    e.fout(0, "output")[0] = float(double(scale) * I.getFloat("multiplier"));
    return;
  }
  case OptimizersOpcode::UnscaleClip: {
    float gscale, norm;
    unscaleClip(e.scalarIn(0, "scaled_norm"), e.scalarIn(1, "scale"),
                I.getFloat("max_norm"), gscale, norm);
    e.fout(0, "grad_scale")[0] = gscale;
    e.fout(1, "norm")[0] = norm;
    return;
  }
  case OptimizersOpcode::UpdateLossScale: {
    LossScalerParams p;
    p.dynamic = I.getInt("dynamic") != 0;
    p.initialScale = I.getFloat("initial_scale");
    p.scaleWindow = I.getInt("scale_window");
    p.hysteresis = I.getInt("hysteresis");
    p.minScale = I.getFloat("min_scale");
    p.consecutiveHysteresis = I.getInt("consecutive_hysteresis") != 0;
    const bool overflow = e.scalarIn(1, "overflow") != 0.0f;
    float next[3];
    if (!updateLossScale(e.fin(0, "state"), next, overflow, p))
      e.fail("gradient overflow at the minimum loss scale " +
             std::to_string(p.minScale) +
             ": current loss scale already at minimum - cannot decrease "
             "scale anymore (DeepSpeed stops here too; lower "
             "fp16.min_loss_scale)");
    std::copy(next, next + 3, e.fout(0, "new_state"));
    return;
  }
  }
  e.fail("internal: not an optimizer or scalar opcode");
}

} // namespace dsc::rt::cpu
