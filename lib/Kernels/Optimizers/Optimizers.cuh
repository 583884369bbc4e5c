//===- Optimizers.cuh - Optimizer device templates -------------*- CUDA -*-===//
//
// Multi-tensor adam, lamb and sgd, global_norm and check_finite over chunk
// tables, and the one-thread scalar kernels (clip_coefficient, lr_schedule
// and the fp16 loss scaler): the CUDA side of OptimizersCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

//===----------------------------------------------------------------------===//
// Multi-tensor kernels: K f32 tensors in one launch, described by a table of
// device pointers (passed by value) and, baked in by the emitter, the first
// chunk of each tensor (CHUNK elements per chunk, one block per chunk).
//===----------------------------------------------------------------------===//

template <int K> struct Ptrs {
  float *p[K];
};

/// Tensor of chunk `c`: the last t with first[t] <= c.
template <int K>
__device__ __forceinline__ int tensorOf(const dsc_i64 (&first)[K + 1],
                                        dsc_i64 c) {
  int t = 0;
  while (t + 1 < K && first[t + 1] <= c)
    ++t;
  return t;
}

/// dsc.global_norm, phase 1: partial sums of squares per chunk (double).
template <int K, dsc_i64 CHUNK, int BLOCK>
__device__ void sumSquaresChunks(Ptrs<K> x, const dsc_i64 (&n)[K],
                                 const dsc_i64 (&first)[K + 1],
                                 double *part) {
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  double s = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const double v = x.p[t][i];
    s += v * v;
  }
  s = blockSumDouble<BLOCK>(s);
  if (threadIdx.x == 0)
    part[c] = s;
}

/// dsc.global_norm, phase 2: out = sqrt(sum of the chunk partials).
template <typename TO, dsc_i64 CHUNKS, int BLOCK>
__device__ void sqrtOfSum(const double *part, TO *out) {
  const double s = sumOfParts<CHUNKS, BLOCK>(part);
  if (threadIdx.x == 0)
    st(out, 0, float(sqrt(s)));
}

/// dsc.check_finite (cpu::hasNonFinite): out was zeroed; any inf/NaN
/// element writes 1.
template <int K, dsc_i64 CHUNK, int BLOCK>
__device__ void checkFiniteChunks(Ptrs<K> x, const dsc_i64 (&n)[K],
                                  const dsc_i64 (&first)[K + 1], float *out) {
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  bool bad = false;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK)
    bad |= nonFinite(x.p[t][i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    *out = 1.0f;
}

/// The optimizer's per-step scalars, read on the device.
struct StepScalars {
  float lr, gscale;
  dsc_i64 step;
  bool skip;
};

template <typename TS>
__device__ __forceinline__ StepScalars readStep(const float *lr,
                                                const TS *step,
                                                const float *gscale,
                                                const float *skip) {
  StepScalars s;
  s.lr = *lr;
  s.step = dsc_i64(*step);
  s.gscale = *gscale;
  s.skip = skip && *skip != 0.0f;
  return s;
}

/// Copies in to out (when they differ): an optimizer's skipped update.
__device__ __forceinline__ void passThrough(const float *in, float *out,
                                            dsc_i64 i) {
  if (in != out)
    out[i] = in[i];
}

/// dsc.adam (cpu::adam): torch.optim.Adam / AdamW, single-tensor path.
/// Tables: p, g, m, v (inputs), p', m', v' (outputs; may equal the inputs).
template <int K, dsc_i64 CHUNK, int BLOCK, bool ADAMW, bool BIAS_CORRECTION,
          typename TS>
__device__ void adamChunks(Ptrs<K> p, Ptrs<K> g, Ptrs<K> m, Ptrs<K> v,
                           Ptrs<K> po, Ptrs<K> mo, Ptrs<K> vo,
                           const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                           const float *lrIn, const TS *stepIn,
                           const float *gscaleIn, const float *skipIn,
                           double beta1, double beta2, float eps, double wdD,
                           dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(m.p[t], mo.p[t], i);
      passThrough(v.p[t], vo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  const float b1 = float(beta1), b2 = float(beta2), wd = float(wdD);
  double bc1 = 1.0, bc2 = 1.0;
  if (BIAS_CORRECTION) {
    bc1 = 1.0 - pow(beta1, double(s.step));
    bc2 = 1.0 - pow(beta2, double(s.step));
  }
  const float stepSize = float(double(s.lr) / bc1);
  const float bc2Sqrt = float(sqrt(bc2));
  const float decay = float(1.0 - double(s.lr) * wdD);
  const float c1 = float(1.0 - beta1), c2 = float(1.0 - beta2);
  const bool l2 = !ADAMW && wd != 0.0f;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    float gi = g.p[t][i] * s.gscale;
    float pi = p.p[t][i];
    if (l2)
      gi += wd * pi;
    if (ADAMW)
      pi *= decay;
    const float mi = b1 * m.p[t][i] + c1 * gi;
    const float vi = b2 * v.p[t][i] + c2 * gi * gi;
    mo.p[t][i] = mi;
    vo.p[t][i] = vi;
    const float denom = sqrtf(vi) / bc2Sqrt + eps;
    po.p[t][i] = pi - stepSize * (mi / denom);
  }
}

/// dsc.sgd (cpu::sgd): torch.optim.SGD, single-tensor path. Tables: p, g,
/// buf, p', buf'.
template <int K, dsc_i64 CHUNK, int BLOCK, bool NESTEROV, typename TS>
__device__ void sgdChunks(Ptrs<K> p, Ptrs<K> g, Ptrs<K> buf, Ptrs<K> po,
                          Ptrs<K> bufo, const dsc_i64 (&n)[K],
                          const dsc_i64 (&first)[K + 1], const float *lrIn,
                          const TS *stepIn, const float *gscaleIn,
                          const float *skipIn, double momentum,
                          double dampening, float wd, dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(buf.p[t], bufo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  const float mom = float(momentum), oneMinusDamp = float(1.0 - dampening);
  const bool useMom = momentum != 0.0, firstStep = s.step <= 1;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    float gi = g.p[t][i] * s.gscale + wd * p.p[t][i];
    if (useMom) {
      const float b = firstStep ? gi : mom * buf.p[t][i] + oneMinusDamp * gi;
      bufo.p[t][i] = b;
      gi = NESTEROV ? gi + mom * b : b;
    } else if (buf.p[t] != bufo.p[t]) {
      bufo.p[t][i] = buf.p[t][i];
    }
    po.p[t][i] = p.p[t][i] - s.lr * gi;
  }
}

/// Ends phase 1 of a trust ratio: the block's sums of p^2 and update^2
/// into part[2c], part[2c+1].
template <int BLOCK>
__device__ void storeNormPartials(double sw, double su, dsc_i64 c,
                                  double *part) {
  sw = blockSumDouble<BLOCK>(sw);
  su = blockSumDouble<BLOCK>(su);
  if (threadIdx.x == 0) {
    part[2 * c] = sw;
    part[2 * c + 1] = su;
  }
}

/// dsc.lamb (cpu::lamb, DeepSpeed FusedLamb), phase 1: m, v updated, and per
/// chunk the partial sums of p^2 and update^2 (double) into part[2c], part[2c+1].
template <int K, dsc_i64 CHUNK, int BLOCK, typename TS>
__device__ void lambMoments(Ptrs<K> p, Ptrs<K> g, Ptrs<K> m, Ptrs<K> v,
                            Ptrs<K> po, Ptrs<K> mo, Ptrs<K> vo,
                            const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                            const float *lrIn, const TS *stepIn,
                            const float *gscaleIn, const float *skipIn,
                            float b1, float b2, float eps, float wd,
                            double *part, dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(m.p[t], mo.p[t], i);
      passThrough(v.p[t], vo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  double sw = 0.0, su = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float gi = g.p[t][i] * s.gscale;
    const float mi = b1 * m.p[t][i] + (1.0f - b1) * gi;
    const float vi = b2 * v.p[t][i] + (1.0f - b2) * gi * gi;
    mo.p[t][i] = mi;
    vo.p[t][i] = vi;
    const float pi = p.p[t][i];
    const float u = mi / (sqrtf(vi) + eps) + wd * pi;
    sw += double(pi) * double(pi);
    su += double(u) * double(u);
  }
  storeNormPartials<BLOCK>(sw, su, c, part);
}

/// LAMB's trust ratio ||p|| / ||update|| from the squared norms, clamped to
/// [minCoeff, maxCoeff]; 1 when either norm is 0 (cpu::trustRatio).
__device__ __forceinline__ float trustRatio(double w2, double u2,
                                            float maxCoeff, float minCoeff) {
  const float wn = float(sqrt(w2)), un = float(sqrt(u2));
  float k = 1.0f;
  if (wn != 0.0f && un != 0.0f) {
    k = wn / un;
    if (k > maxCoeff)
      k = maxCoeff;
    if (k < minCoeff)
      k = minCoeff;
  }
  return k;
}

/// The trust ratio from chunks [begin, end) of LAMB's per-chunk partial
/// sums (p^2 at part[2c], update^2 at part[2c+1]), by one block in a fixed
/// order; valid in thread 0.
template <int BLOCK>
__device__ float blockTrustRatio(const double *part, dsc_i64 begin,
                                 dsc_i64 end, float maxCoeff, float minCoeff) {
  double w2 = 0.0, u2 = 0.0;
  for (dsc_i64 c = begin + threadIdx.x; c < end; c += BLOCK) {
    w2 += part[2 * c];
    u2 += part[2 * c + 1];
  }
  w2 = blockSumDouble<BLOCK>(w2);
  u2 = blockSumDouble<BLOCK>(u2);
  return trustRatio(w2, u2, maxCoeff, minCoeff);
}

/// Phase 2, one block per tensor: the trust ratio, clamped as DeepSpeed
/// does, times the step size, into coeff[t].
template <int K, int BLOCK, bool BIAS_CORRECTION, typename TS>
__device__ void lambCoefficients(const dsc_i64 (&first)[K + 1],
                                 const double *part, const float *lrIn,
                                 const TS *stepIn, const float *skipIn,
                                 double beta1, double beta2, float maxCoeff,
                                 float minCoeff, float *coeff) {
  const int t = blockIdx.x;
  const float k = blockTrustRatio<BLOCK>(part, first[t], first[t + 1],
                                         maxCoeff, minCoeff);
  if (threadIdx.x != 0)
    return;
  const float lr = *lrIn;
  float stepSize = lr;
  if (BIAS_CORRECTION) {
    const dsc_i64 step = dsc_i64(*stepIn);
    const float bc1 = float(1.0 - pow(beta1, double(step)));
    const float bc2 = float(1.0 - pow(beta2, double(step)));
    stepSize = lr * sqrtf(bc2) / bc1;
  }
  coeff[t] = stepSize * k;
}

/// Phase 3: p' = p - coeff[t] * (m' / (sqrt(v') + eps) + wd * p).
template <int K, dsc_i64 CHUNK, int BLOCK, typename TS>
__device__ void lambApply(Ptrs<K> p, Ptrs<K> mo, Ptrs<K> vo, Ptrs<K> po,
                          const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                          const TS *stepIn, const float *skipIn, float eps,
                          float wd, const float *coeff) {
  if ((skipIn && *skipIn != 0.0f) || dsc_i64(*stepIn) < 1)
    return;
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  const float k = coeff[t];
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float pi = p.p[t][i];
    const float u = mo.p[t][i] / (sqrtf(vo.p[t][i]) + eps) + wd * pi;
    po.p[t][i] = pi - k * u;
  }
}

//===----------------------------------------------------------------------===//
// Scalar bookkeeping, one thread (cpu::clipCoefficient, lrSchedule,
// currentLossScale, unscaleClip, updateLossScale).
//===----------------------------------------------------------------------===//

template <typename TI, typename TO>
__device__ void clipCoefficient(const TI *norm, TO *out, double maxNorm) {
  const double n = double(ld(norm, 0)) + 1e-6;
  st(out, 0, maxNorm > 0.0 && n > maxNorm ? float(maxNorm / n) : 1.0f);
}

/// DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR as the engine
/// drives them (update s runs with last_batch_iteration s - 2); KIND 0
/// constant, 1 WarmupLR, 2 WarmupDecayLR, 3 WarmupCosineLR.
template <int KIND, bool LOG_WARMUP, typename TS, typename TO>
__device__ void lrSchedule(const TS *stepIn, TO *out, double lr,
                           double warmupMinLr, double warmupMaxLr,
                           dsc_i64 warmupNumSteps, dsc_i64 totalNumSteps,
                           double warmupMinRatio, double cosMinRatio) {
  double result;
  const dsc_i64 last = dsc_i64(*stepIn) - 2;
  const dsc_i64 warmup = warmupNumSteps > 2 ? warmupNumSteps : 2;
  const double invLog = 1.0 / log(double(warmup));
  const double gammaWarm = LOG_WARMUP ? invLog * log(double(last + 1))
                                      : double(last) / double(warmup);
  if (KIND == 0) {
    result = lr;
  } else if (KIND == 3) {
    if (last < 0) {
      result = 0.0;
    } else {
      double ratio;
      if (last < warmup) {
        ratio = warmupMinRatio + gammaWarm * (1.0 - warmupMinRatio);
      } else {
        const dsc_i64 realLast = last - warmup + 1;
        const dsc_i64 realTotal = totalNumSteps - warmup;
        const double c =
            (1.0 + cos(3.14159265358979323846 * double(realLast) /
                       double(realTotal))) /
            2.0;
        ratio = cosMinRatio + (1.0 - cosMinRatio) * c;
        ratio = ratio > 0.0 ? ratio : 0.0;
      }
      result = lr * ratio;
    }
  } else if (last < 0) {
    result = warmupMinLr;
  } else {
    double gamma;
    if (last < warmup) {
      gamma = gammaWarm;
    } else if (KIND == 1) {
      gamma = 1.0;
    } else {
      const double den = double(totalNumSteps - warmup) > 1.0
                             ? double(totalNumSteps - warmup)
                             : 1.0;
      gamma = double(totalNumSteps - last) / den;
      gamma = gamma > 0.0 ? gamma : 0.0;
    }
    result = warmupMinLr + (warmupMaxLr - warmupMinLr) * gamma;
  }
  st(out, 0, float(result));
}

template <typename TO>
__device__ void lossScale(const float *state, TO *out, double initialScale,
                          double multiplier) {
  const float scale = state[0] == 0.0f ? float(initialScale) : state[0];
  st(out, 0, float(double(scale) * multiplier));
}

template <typename TN, typename TS>
__device__ void unscaleClip(const TN *scaledNorm, const TS *scaleIn,
                            float *gradScale, float *norm, double maxNorm) {
  const double total = double(ld(scaledNorm, 0)), s = double(ld(scaleIn, 0));
  double combined = s;
  if (maxNorm > 0.0) {
    const double clip = ((total / s) + 1e-6) / maxNorm;
    if (clip > 1.0)
      combined = clip * s;
  }
  *gradScale = float(1.0 / combined);
  *norm = float(total / s);
}

/// DynamicLossScaler.update_scale (scale factor 2) over the state
/// [scale, hysteresis used, iterations since the last overflow].
template <bool DYNAMIC, bool CONSECUTIVE, typename TF>
__device__ void updateLossScale(const float *state, const TF *overflowIn,
                                float *next, double initialScale,
                                dsc_i64 scaleWindow, dsc_i64 hysteresis,
                                double minScale, dsc_u32 code) {
  const float s0 = state[0], s1 = state[1], s2 = state[2];
  if (!DYNAMIC) {
    next[0] = s0;
    next[1] = s1;
    next[2] = s2;
    return;
  }
  const bool overflow = ld(overflowIn, 0) != 0.0f;
  double scale = s0 == 0.0f ? double(float(initialScale)) : double(s0);
  dsc_i64 curHysteresis = hysteresis - dsc_i64(s1);
  dsc_i64 since = dsc_i64(s2);
  if (overflow) {
    if (hysteresis == 1 || curHysteresis == 1) {
      if (float(scale) == float(minScale)) {
        fail(code);
        next[0] = s0;
        next[1] = s1;
        next[2] = s2;
        return;
      }
      scale = scale / 2.0 > minScale ? scale / 2.0 : minScale;
    } else {
      curHysteresis -= 1;
    }
    since = 0;
  } else {
    if (CONSECUTIVE)
      curHysteresis = hysteresis;
    if ((since + 1) % scaleWindow == 0) {
      if (!CONSECUTIVE)
        curHysteresis = hysteresis;
      scale *= 2.0;
    }
    since += 1;
  }
  next[0] = float(scale);
  next[1] = float(hysteresis - curHysteresis);
  next[2] = float(since);
}

//===----------------------------------------------------------------------===//
// 1-bit Adam's compression stage (cpu: EmaUpdate, FrozenAdam)
//===----------------------------------------------------------------------===//

/// dsc.ema_update: out = beta * avg + (1 - beta) * (g * gscale), each
/// product rounded as the CPU rounds it; a skipped step keeps avg.
template <dsc_i64 N, bool SKIP>
__device__ void emaUpdate(const float *avg, const float *g,
                          const float *gscale, const float *skip, float beta,
                          float oneMinusBeta, float *out) {
  const bool skipped = SKIP && *skip != 0.0f;
  const float k = *gscale;
  DSC_GRID_LOOP(i, N) {
    out[i] = skipped ? avg[i]
                     : __fadd_rn(__fmul_rn(beta, avg[i]),
                                 __fmul_rn(oneMinusBeta, __fmul_rn(g[i], k)));
  }
}

/// The frozen-variance update m / (sqrt(v) + eps) + wd * p, rounded as
/// cpu::frozenAdamUpdate rounds it.
__device__ __forceinline__ float frozenAdamUpdate(float m, float v, float p,
                                                  float eps, float wd) {
  float update = __fdiv_rn(m, __fadd_rn(__fsqrt_rn(v), eps));
  if (wd != 0.0f)
    update = __fadd_rn(update, __fmul_rn(wd, p));
  return update;
}

/// dsc.frozen_adam: m is zeroed where the frozen variance is 0 (the derived
/// exp_avg_mask), then p += -lr * (m / (sqrt(v) + eps) + wd * p); a
/// skipped step keeps p and the old momentum.
template <dsc_i64 N, bool SKIP>
__device__ void frozenAdam(const float *p, const float *oldM, const float *m,
                           const float *v, const float *lr, const float *skip,
                           float eps, float wd, float *newP, float *newM) {
  const bool skipped = SKIP && *skip != 0.0f;
  const float step = -*lr;
  DSC_GRID_LOOP(i, N) {
    if (skipped) {
      newP[i] = p[i];
      newM[i] = oldM[i];
      continue;
    }
    const float mi = v[i] != 0.0f ? m[i] : 0.0f;
    newP[i] = __fadd_rn(
        p[i], __fmul_rn(step, frozenAdamUpdate(mi, v[i], p[i], eps, wd)));
    newM[i] = mi;
  }
}

//===----------------------------------------------------------------------===//
// 0/1 Adam (cpu: LocalAdam, ZeroOneUnwind, ZeroOneSync)
//===----------------------------------------------------------------------===//

/// dsc.local_adam: a local step of the frozen-variance update, also added
/// to the accumulator of the local steps' updates.
template <dsc_i64 N>
__device__ void localAdam(const float *p, const float *m, const float *v,
                          const float *u, const float *lr, float eps, float wd,
                          float *newP, float *newM, float *newU) {
  const float step = -*lr;
  DSC_GRID_LOOP(i, N) {
    const float mi = v[i] != 0.0f ? m[i] : 0.0f;
    const float update = frozenAdamUpdate(mi, v[i], p[i], eps, wd);
    newP[i] = __fadd_rn(p[i], __fmul_rn(step, update));
    newM[i] = mi;
    newU[i] = __fadd_rn(u[i], __fmul_rn(step, update));
  }
}

/// dsc.zero_one_unwind: the parameter before the local steps, and their
/// accumulated update in momentum units (times sqrt(v) + eps).
template <dsc_i64 N>
__device__ void zeroOneUnwind(const float *p, const float *u, const float *v,
                              float eps, float *start, float *scaled) {
  DSC_GRID_LOOP(i, N) {
    start[i] = __fadd_rn(p[i], __fmul_rn(-1.0f, u[i]));
    scaled[i] = __fmul_rn(u[i], __fadd_rn(__fsqrt_rn(v[i]), eps));
  }
}

/// dsc.zero_one_sync: the mean of the ranks' accumulated updates applied
/// to the unwound parameter, and the momentum it implies; `code` when the
/// learning rates of the local steps do not sum to a positive number.
template <dsc_i64 N>
__device__ void zeroOneSync(const float *p, const float *w, const float *v,
                            const float *lrSum, float eps, dsc_u32 code,
                            float *newP, float *newM) {
  const float sum = *lrSum;
  if (!(sum > 0.0f)) {
    fail(code);
    return;
  }
  DSC_GRID_LOOP(i, N) {
    const float wi = v[i] != 0.0f ? w[i] : 0.0f;
    newM[i] = -__fdiv_rn(wi, sum);
    newP[i] = __fadd_rn(p[i], __fdiv_rn(wi, __fadd_rn(__fsqrt_rn(v[i]), eps)));
  }
}

//===----------------------------------------------------------------------===//
// 1-bit LAMB (cpu: LambCoeffEma, MomentumScales, ScaleBy, OnebitLambUpdate)
//===----------------------------------------------------------------------===//

/// dsc.lamb_coeff_ema, phase 1: per CHUNK elements the sums of p^2 and of
/// update^2, update = m / (sqrt(v) + eps) + wd * p, into part[2c], part[2c+1].
template <dsc_i64 N, dsc_i64 CHUNK, int BLOCK>
__device__ void lambCoeffSums(const float *p, const float *m, const float *v,
                              float eps, float wd, double *part) {
  const dsc_i64 c = blockIdx.x, i0 = c * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < N ? i0 + CHUNK : N;
  double sw = 0.0, su = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float u = __fadd_rn(__fdiv_rn(m[i], __fadd_rn(__fsqrt_rn(v[i]), eps)),
                              __fmul_rn(wd, p[i]));
    sw += double(p[i]) * double(p[i]);
    su += double(u) * double(u);
  }
  storeNormPartials<BLOCK>(sw, su, c, part);
}

/// Phase 2 (one block): the warm-up's trust ratio joins its moving average
/// unless it is exactly 1 (DeepSpeed's rule).
template <dsc_i64 CHUNKS, int BLOCK>
__device__ void lambCoeffEma(const double *part, const float *coeff,
                             float maxCoeff, float minCoeff, double beta,
                             float *newCoeff) {
  const float ratio =
      blockTrustRatio<BLOCK>(part, 0, CHUNKS, maxCoeff, minCoeff);
  if (threadIdx.x != 0)
    return;
  const double old = *coeff;
  *newCoeff = ratio != 1.0f ? float(beta * old + (1.0 - beta) * double(ratio))
                            : float(old);
}

/// dsc.momentum_scales, phase 2 (one block; phase 1 is global_norm's
/// sumSquaresChunks): r_k = ||m_k|| / sqrt(n_k), scale_k = mean(r) / r_k
/// (1 where r_k is 0).
template <int K>
__device__ void momentumScales(const double *part, const dsc_i64 (&n)[K],
                               const dsc_i64 (&first)[K + 1],
                               float *const *scale) {
  if (threadIdx.x != 0)
    return;
  double r[K];
  double mean = 0.0;
  for (int k = 0; k < K; ++k) {
    double sq = 0.0;
    for (dsc_i64 c = first[k]; c < first[k + 1]; ++c)
      sq += part[c];
    r[k] = sqrt(sq) / sqrt(double(n[k]));
    mean += r[k] / double(K);
  }
  for (int k = 0; k < K; ++k)
    *scale[k] = r[k] != 0.0 ? float(mean / r[k]) : 1.0f;
}

/// dsc.scale_by: x times a scalar on the device.
template <dsc_i64 N>
__device__ void scaleBy(const float *x, const float *factor, float *out) {
  const float s = *factor;
  DSC_GRID_LOOP(i, N) { out[i] = __fmul_rn(x[i], s); }
}

/// dsc.onebit_lamb_update, phase 1: the exchanged momentum unscaled and
/// masked, the fresh variance from the reconstructed gradient, and per
/// CHUNK elements the largest denom / (sqrt(fresh) + eps) and (with weight
/// decay) the sums of prelim^2 and update^2, into part[3c .. 3c+2].
template <dsc_i64 N, dsc_i64 CHUNK, int BLOCK, bool DECAY>
__device__ void onebitLambMoments(const float *p, const float *mc,
                                  const float *last, const float *v,
                                  const float *fresh, const float *scaling,
                                  float b1, float b2, float eps, float wd,
                                  float *newM, float *newFresh, double *part) {
  const dsc_i64 c = blockIdx.x, i0 = c * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < N ? i0 + CHUNK : N;
  const float sc = *scaling, oneMinusB1 = 1.0f - b1, oneMinusB2 = 1.0f - b2;
  float factor = 0.0f;
  double sp = 0.0, su = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float m = v[i] != 0.0f ? __fdiv_rn(mc[i], sc) : 0.0f;
    const float g =
        __fdiv_rn(__fsub_rn(m, __fmul_rn(last[i], b1)), oneMinusB1);
    const float f = __fadd_rn(__fmul_rn(b2, fresh[i]),
                              __fmul_rn(__fmul_rn(oneMinusB2, g), g));
    newM[i] = m;
    newFresh[i] = f;
    const float denom = __fadd_rn(__fsqrt_rn(v[i]), eps);
    factor = fmaxf(factor, __fdiv_rn(denom, __fadd_rn(__fsqrt_rn(f), eps)));
    if (DECAY) {
      const float prelim = __fdiv_rn(m, denom);
      const float update = __fadd_rn(prelim, __fmul_rn(wd, p[i]));
      sp += double(prelim) * double(prelim);
      su += double(update) * double(update);
    }
  }
  const float most = blockMaxFloat<BLOCK>(factor);
  sp = blockSumDouble<BLOCK>(sp);
  su = blockSumDouble<BLOCK>(su);
  if (threadIdx.x == 0) {
    part[3 * c] = most;
    part[3 * c + 1] = sp;
    part[3 * c + 2] = su;
  }
}

/// Phase 2 (one block): the factor, blended by ||prelim|| / ||update||
/// with weight decay, clamped to [factorMin, factorMax] and within thr of
/// the last factor.
template <dsc_i64 CHUNKS, int BLOCK, bool DECAY>
__device__ void onebitLambFactor(const double *part, const float *lastFactor,
                                 float factorMin, float factorMax, float thr,
                                 float *newLastFactor) {
  double sp = 0.0, su = 0.0;
  float most = 0.0f;
  for (dsc_i64 c = threadIdx.x; c < CHUNKS; c += BLOCK) {
    most = fmaxf(most, float(part[3 * c]));
    sp += part[3 * c + 1];
    su += part[3 * c + 2];
  }
  const float best = blockMaxFloat<BLOCK>(most);
  sp = blockSumDouble<BLOCK>(sp);
  su = blockSumDouble<BLOCK>(su);
  if (threadIdx.x != 0)
    return;
  float factor = best;
  if (DECAY) {
    const double ratio = su > 0.0 ? fmin(1.0, sqrt(sp) / sqrt(su)) : 1.0;
    factor = float(double(factor) * ratio + (1.0 - ratio));
  }
  factor = fminf(fmaxf(factor, factorMin), factorMax);
  const float last = *lastFactor;
  factor = fminf(factor, __fmul_rn(last, 1.0f + thr));
  factor = fmaxf(factor, __fmul_rn(last, 1.0f - thr));
  *newLastFactor = factor;
}

/// Phase 3: p -= lr * coeff_freeze * factor * (m / (sqrt(v) + eps) + wd p).
template <dsc_i64 N>
__device__ void onebitLambApply(const float *p, const float *newM,
                                const float *v, const float *coeffFreeze,
                                const float *factor, const float *lr,
                                float eps, float wd, float *newP) {
  const float k = __fmul_rn(__fmul_rn(*lr, *coeffFreeze), *factor);
  DSC_GRID_LOOP(i, N) {
    newP[i] = __fsub_rn(
        p[i], __fmul_rn(k, frozenAdamUpdate(newM[i], v[i], p[i], eps, wd)));
  }
}


//===----------------------------------------------------------------------===//
// 8-bit Adam (cpu: adam8bit, DynamicMap.h)
//===----------------------------------------------------------------------===//

/// torch.linspace(0.1, 1, steps)[idx] in float32 (optim::linspacePoint).
__device__ __forceinline__ float linspacePoint(int idx, int steps) {
  const float step = __fdiv_rn(__fsub_rn(1.0f, 0.1f), float(steps - 1));
  return idx < steps / 2
             ? __fadd_rn(0.1f, __fmul_rn(step, float(idx)))
             : __fsub_rn(1.0f, __fmul_rn(step, float(steps - idx - 1)));
}

/// Entry j of bitsandbytes' dynamic map, ascending (optim::dynamicMapValue,
/// the same arithmetic).
__device__ float dynamicMapValue(int j, bool isSigned) {
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
  const int points = (isSigned ? 1 << level : 2 << level) + 1;
  const int m = k - first;
  const float mean = __fdiv_rn(
      __fadd_rn(linspacePoint(m, points), linspacePoint(m + 1, points)), 2.0f);
  const double scales[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  const float v = __fmul_rn(float(scales[level]), mean);
  return negative ? -v : v;
}

/// The code nearest to x in an ascending 256-entry map (ties: the lower),
/// moved one towards x where its sign bit differs and KEEP_SIGN
/// (optim::quantizeNearest).
template <bool KEEP_SIGN>
__device__ __forceinline__ unsigned char quantizeNearest(const float *code,
                                                         float x) {
  int lo = 0, hi = 255;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (code[mid] < x)
      lo = mid + 1;
    else
      hi = mid;
  }
  int c = lo;
  if (c > 0 && __fsub_rn(x, code[c - 1]) <= __fsub_rn(code[c], x))
    c = c - 1;
  if (KEEP_SIGN && signbit(code[c]) != signbit(x))
    c += x > 0.0f ? 1 : -1;
  return (unsigned char)c;
}

/// dsc.adam_8bit: one block of 256 threads per quantization block of 256
/// elements (cpu::adam8bit, the same order of operations): dequantize,
/// update the moments and the parameter, the block's new absmax, quantize.
template <dsc_i64 N, bool SKIP, typename TS>
__device__ void adam8bitBlocks(const float *p, const float *g,
                               const unsigned char *q1,
                               const unsigned char *q2, const float *a1,
                               const float *a2, const float *lrIn,
                               const TS *stepIn, const float *gscaleIn,
                               const float *skipIn, float b1, float b2,
                               float eps, float wd, float *po,
                               unsigned char *q1o, unsigned char *q2o,
                               float *a1o, float *a2o, dsc_u32 code) {
  __shared__ float code1[256], code2[256];
  if (N == 0) // the one block of an empty launch has no absmax to read
    return;
  const dsc_i64 blk = blockIdx.x;
  const dsc_i64 i = blk * 256 + threadIdx.x;
  const bool valid = i < N;
  const StepScalars st = readStep(lrIn, stepIn, gscaleIn, SKIP ? skipIn : nullptr);
  if (st.skip) {
    if (valid) {
      passThrough(p, po, i);
      if (q1 != q1o)
        q1o[i] = q1[i];
      if (q2 != q2o)
        q2o[i] = q2[i];
    }
    if (threadIdx.x == 0) {
      passThrough(a1, a1o, blk);
      passThrough(a2, a2o, blk);
    }
    return;
  }
  if (st.step < 1) {
    if (blk == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  code1[threadIdx.x] = dynamicMapValue(threadIdx.x, true);
  code2[threadIdx.x] = dynamicMapValue(threadIdx.x, false);
  const float absmax1 = a1[blk], absmax2 = a2[blk];
  __syncthreads();
  const float c1 = __fsub_rn(1.0f, powf(b1, float(st.step)));
  const float c2 = __fsqrt_rn(__fsub_rn(1.0f, powf(b2, float(st.step))));
  const float stepSize = __fdiv_rn(__fmul_rn(-st.lr, c2), c1);
  float s1 = 0.0f, s2 = 0.0f;
  bool finite = false;
  if (valid) {
    const float gi = g[i];
    finite = !nonFinite(gi);
    if (finite) {
      const float gv = __fmul_rn(gi, st.gscale);
      s2 = __fmul_rn(code2[q2[i]], absmax2);
      s2 = __fadd_rn(__fmul_rn(s2, b2),
                     __fmul_rn(__fmul_rn(__fsub_rn(1.0f, b2), gv), gv));
      s1 = __fmul_rn(code1[q1[i]], absmax1);
      s1 = __fadd_rn(__fmul_rn(s1, b1), __fmul_rn(__fsub_rn(1.0f, b1), gv));
    }
  }
  const float max1 = blockMaxFloat<256>(fabsf(s1));
  const float max2 = blockMaxFloat<256>(fabsf(s2));
  if (threadIdx.x == 0) {
    a1o[blk] = max1;
    a2o[blk] = max2;
  }
  if (!valid)
    return;
  if (finite) {
    float pi = __fadd_rn(
        p[i], __fmul_rn(stepSize,
                        __fdiv_rn(s1, __fadd_rn(__fsqrt_rn(s2),
                                                __fmul_rn(c2, eps)))));
    if (wd > 0.0f)
      pi = __fmul_rn(pi, __fsub_rn(1.0f, __fmul_rn(st.lr, wd)));
    po[i] = pi;
  } else {
    passThrough(p, po, i);
  }
  q1o[i] = max1 > 0.0f ? quantizeNearest<true>(code1, __fdiv_rn(s1, max1))
                       : (unsigned char)127;
  q2o[i] = max2 > 0.0f ? quantizeNearest<false>(code2, __fdiv_rn(s2, max2))
                       : (unsigned char)0;
}

//===----------------------------------------------------------------------===//
// Adafactor (cpu: adafactor)
//===----------------------------------------------------------------------===//

/// The scalars of an Adafactor step: beta2t and its complement.
struct AdafactorStep {
  float keep, take;
};
__device__ __forceinline__ AdafactorStep adafactorStep(dsc_i64 t,
                                                       double decayRate) {
  const float keep = float(1.0 - pow(double(t), decayRate));
  return {keep, float(1.0 - double(keep))};
}

/// Phase 1, factored: block b < ROWS updates row factor b from the mean of
/// g'^2 + eps1 over its C elements, block ROWS + c column factor c (of
/// batch c / C) over its R elements. Sums in double, as the CPU.
template <dsc_i64 BATCH, dsc_i64 R, dsc_i64 C, int BLOCK, bool SKIP,
          typename TS>
__device__ void adafactorFactors(const float *g, const float *row,
                                 const float *col, const TS *stepIn,
                                 const float *gscaleIn, const float *skipIn,
                                 double decayRate, float eps1, float *rowOut,
                                 float *colOut) {
  const dsc_i64 b = blockIdx.x;
  const bool isRow = b < BATCH * R;
  const dsc_i64 idx = isRow ? b : b - BATCH * R;
  if (SKIP && *skipIn != 0.0f) {
    if (threadIdx.x == 0)
      isRow ? passThrough(row, rowOut, idx) : passThrough(col, colOut, idx);
    return;
  }
  const dsc_i64 t = dsc_i64(*stepIn);
  if (t < 1)
    return; // adafactorApply reports it
  const float gs = *gscaleIn;
  double sum = 0.0;
  if (isRow) {
    for (dsc_i64 c = threadIdx.x; c < C; c += BLOCK) {
      const float gv = __fmul_rn(g[idx * C + c], gs);
      sum += double(__fadd_rn(__fmul_rn(gv, gv), eps1));
    }
  } else {
    const dsc_i64 batch = idx / C, c = idx % C;
    for (dsc_i64 r = threadIdx.x; r < R; r += BLOCK) {
      const float gv = __fmul_rn(g[(batch * R + r) * C + c], gs);
      sum += double(__fadd_rn(__fmul_rn(gv, gv), eps1));
    }
  }
  sum = blockSumDouble<BLOCK>(sum);
  if (threadIdx.x == 0) {
    const AdafactorStep s = adafactorStep(t, decayRate);
    const float mean = float(sum / double(isRow ? C : R));
    if (isRow)
      rowOut[idx] = __fadd_rn(__fmul_rn(row[idx], s.keep), __fmul_rn(s.take, mean));
    else
      colOut[idx] = __fadd_rn(__fmul_rn(col[idx], s.keep), __fmul_rn(s.take, mean));
  }
}

/// Phase 1, a vector: v = beta2t v + (1 - beta2t)(g'^2 + eps1).
template <dsc_i64 N, bool SKIP, typename TS>
__device__ void adafactorVector(const float *g, const float *v,
                                const TS *stepIn, const float *gscaleIn,
                                const float *skipIn, double decayRate,
                                float eps1, float *vOut) {
  const bool skipped = SKIP && *skipIn != 0.0f;
  const dsc_i64 t = dsc_i64(*stepIn);
  const float gs = *gscaleIn;
  const AdafactorStep s = adafactorStep(t < 1 ? 1 : t, decayRate);
  DSC_GRID_LOOP(i, N) {
    if (skipped || t < 1) {
      passThrough(v, vOut, i);
      continue;
    }
    const float gv = __fmul_rn(g[i], gs);
    vOut[i] = __fadd_rn(__fmul_rn(v[i], s.keep),
                        __fmul_rn(s.take, __fadd_rn(__fmul_rn(gv, gv), eps1)));
  }
}

/// The unclipped update of element i: rsqrt(row / rowMean) rsqrt(col) g'
/// (factored) or rsqrt(v) g'.
template <dsc_i64 R, dsc_i64 C, bool FACTORED>
__device__ __forceinline__ float adafactorUpdate(dsc_i64 i, const float *g,
                                                 float gs, const float *rowV,
                                                 const float *col,
                                                 const double *rowMean) {
  const float gv = __fmul_rn(g[i], gs);
  if (!FACTORED)
    return __fmul_rn(__frcp_rn(__fsqrt_rn(rowV[i])), gv);
  const dsc_i64 b = i / (R * C), r = (i / C) % R, c = i % C;
  const float rf = __frcp_rn(
      __fsqrt_rn(__fdiv_rn(rowV[b * R + r], float(rowMean[b]))));
  const float cf = __frcp_rn(__fsqrt_rn(col[b * C + c]));
  return __fmul_rn(__fmul_rn(rf, cf), gv);
}

/// Phase 2 (one block): the mean of each batch's row factor (factored).
template <dsc_i64 BATCH, dsc_i64 R, int BLOCK>
__device__ void adafactorRowMeans(const float *row, const float *skipIn,
                                  double *rowMean) {
  if (skipIn && *skipIn != 0.0f)
    return;
  for (dsc_i64 b = 0; b < BATCH; ++b) {
    double s = 0.0;
    for (dsc_i64 r = threadIdx.x; r < R; r += BLOCK)
      s += double(row[b * R + r]);
    s = blockSumDouble<BLOCK>(s);
    if (threadIdx.x == 0)
      rowMean[b] = double(float(s / double(R)));
  }
}

/// Phase 3: per chunk of CHUNK elements, the sums of p^2 and of the
/// update's squares (double).
template <dsc_i64 N, dsc_i64 R, dsc_i64 C, dsc_i64 CHUNK, int BLOCK,
          bool FACTORED>
__device__ void adafactorSums(const float *p, const float *g,
                              const float *gscaleIn, const float *skipIn,
                              const float *rowV, const float *col,
                              const double *rowMean, double *partP,
                              double *partU) {
  if (skipIn && *skipIn != 0.0f)
    return;
  const float gs = *gscaleIn;
  const dsc_i64 i0 = dsc_i64(blockIdx.x) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < N ? i0 + CHUNK : N;
  double sp = 0.0, su = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const double pv = p[i];
    sp += pv * pv;
    const double u = adafactorUpdate<R, C, FACTORED>(i, g, gs, rowV, col, rowMean);
    su += u * u;
  }
  sp = blockSumDouble<BLOCK>(sp);
  su = blockSumDouble<BLOCK>(su);
  if (threadIdx.x == 0) {
    partP[blockIdx.x] = sp;
    partU[blockIdx.x] = su;
  }
}

/// Phase 4 (one block): lr_t and the clipping divisor (cpu::adafactorLr).
template <dsc_i64 N, dsc_i64 CHUNKS, int BLOCK, typename TS>
__device__ void adafactorScalars(const double *partP, const double *partU,
                                 const float *lrIn, const TS *stepIn,
                                 const float *skipIn, double eps2,
                                 double clipThreshold, bool scaleParameter,
                                 bool relativeStep, bool warmupInit,
                                 float *scalars) {
  if (skipIn && *skipIn != 0.0f)
    return;
  const double p2 = sumOfParts<CHUNKS, BLOCK>(partP);
  const double u2 = sumOfParts<CHUNKS, BLOCK>(partU);
  if (threadIdx.x != 0)
    return;
  const dsc_i64 t = dsc_i64(*stepIn);
  const double rmsP = float(sqrt(p2) / sqrt(double(N)));
  double rel = *lrIn;
  if (relativeStep) {
    const double minStep = warmupInit ? 1e-6 * double(t) : 1e-2;
    const double inv = 1.0 / sqrt(double(t));
    rel = minStep < inv ? minStep : inv;
  }
  const double scale = scaleParameter ? (eps2 > rmsP ? eps2 : rmsP) : 1.0;
  const float rmsU = float(sqrt(u2) / sqrt(double(N)));
  const float ratio = __fdiv_rn(rmsU, float(clipThreshold));
  scalars[0] = float(scale * rel);
  scalars[1] = ratio > 1.0f ? ratio : 1.0f;
}

/// Phase 5: the update, the first moment, weight decay; p and exp_avg.
template <dsc_i64 N, dsc_i64 R, dsc_i64 C, bool FACTORED, bool FIRST,
          bool SKIP, typename TS>
__device__ void adafactorApply(const float *p, const float *g, const float *m,
                               const float *gscaleIn, const TS *stepIn,
                               const float *skipIn, const float *rowV,
                               const float *col, const double *rowMean,
                               const float *scalars, float beta1, double wd,
                               float *po, float *mo, dsc_u32 code) {
  const bool skipped = SKIP && *skipIn != 0.0f;
  const dsc_i64 t = dsc_i64(*stepIn);
  if (!skipped && t < 1) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  const float gs = *gscaleIn;
  const float lrT = skipped ? 0.0f : scalars[0],
              divisor = skipped ? 1.0f : scalars[1];
  const float decay = float(-wd * double(lrT));
  const float oneMinusB1 = float(1.0 - double(beta1));
  DSC_GRID_LOOP(i, N) {
    if (skipped) {
      passThrough(p, po, i);
      if (FIRST)
        passThrough(m, mo, i);
      continue;
    }
    float u = __fmul_rn(
        __fdiv_rn(adafactorUpdate<R, C, FACTORED>(i, g, gs, rowV, col, rowMean),
                  divisor),
        lrT);
    if (FIRST) {
      u = __fadd_rn(__fmul_rn(m[i], beta1), __fmul_rn(oneMinusB1, u));
      mo[i] = u;
    }
    float pi = p[i];
    if (wd != 0.0)
      pi = __fadd_rn(pi, __fmul_rn(pi, decay));
    po[i] = __fsub_rn(pi, u);
  }
}

} // namespace dsc
