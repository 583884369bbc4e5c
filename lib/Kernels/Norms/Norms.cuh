//===- Norms.cuh - LayerNorm and RMSNorm device templates ------*- CUDA -*-===//
//
// layer_norm, invertible_layer_norm, rms_norm, invertible_rms_norm,
// bias_dropout_add_layer_norm, add_rms_norm and their gradients, row
// kernels: the CUDA side of NormsCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// The invertible backwards divide by the weight (gamma): a zero element
/// among this thread's columns sets the status `code` (the CPU refuses the
/// same input).
template <dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void failOnZeroWeight(const float (&g)[ITEMS][VEC], int lane,
                                 dsc_u32 code) {
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      if ((dsc_i64(k) * THREADS + lane) * VEC + l < C && g[k][l] == 0.0f)
        fail(code);
}

/// d += dres[offset row]: the residual gradient added after the norm's, a
/// separate rounding (as the CPU and the unfused dsc.add do), never an FMA.
template <dsc_i64 C, int THREADS, int ITEMS, int VEC, typename TR>
__device__ void addResidualGrad(float (&d)[ITEMS][VEC], const TR *dres,
                                dsc_i64 offset, int lane) {
  float dr[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(dres, offset, lane, dr, 0.0f);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      d[k][l] = __fadd_rn(d[k][l], dr[k][l]);
}

/// dsc.layer_norm / dsc.invertible_layer_norm (cpu::layerNorm): two-pass
/// mean and variance, rstd = 1 / sqrt(var + eps).
template <typename TX, typename TG, typename TB, typename TY, typename TR,
          bool RSTD, dsc_i64 ROWS, dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void layerNorm(const TX *x, const TG *gamma, const TB *beta, TY *y,
                          TR *rstdOut, float eps) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      s += v[k][l];
  const float mean = rowSum<THREADS>(s) / float(C);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC + l;
      const float d = c < C ? v[k][l] - mean : 0.0f;
      q += d * d;
    }
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
  if constexpr (RSTD)
    if (lane == 0)
      st(rstdOut, r, rstd);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC], b[VEC];
    ldv<VEC>(gamma, c, g);
    ldv<VEC>(beta, c, b);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] - mean) * rstd * g[l] + b[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

/// dsc.layer_norm_grad and dsc.layer_norm_grad_from_output
/// (cpu::layerNormGrad / layerNormGradFromOutput through layerNormGradRows):
/// THREADS threads own a block of 32 rows, rows in order, so each thread
/// keeps the dgamma/dbeta partial sums of its columns in registers and
/// writes them to part[blk, 2C] (dgamma then dbeta), merged by columnSum.
/// FROM_OUTPUT: x_hat = (y - beta) / gamma with the saved rstd; a zero gamma
/// element sets the status (the CPU refuses the same input). DRES: the
/// residual gradient dres is added to dx afterwards (a separate rounding, as
/// the CPU does, never contracted into an FMA).
template <typename TD, typename TX, typename TG, typename TB, typename TS,
          typename TR, typename TO, bool FROM_OUTPUT, bool DRES, dsc_i64 ROWS,
          dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void layerNormGradRows(const TD *dy, const TX *xOrY,
                                  const TG *gamma, const TB *beta,
                                  const TS *rstdIn, const TR *dres, TO *dx,
                                  float *part, float eps, dsc_u32 code) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  const dsc_i64 blk = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (blk >= blocks)
    return;
  float g[ITEMS][VEC], bt[ITEMS][VEC], pg[ITEMS][VEC], pb[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(gamma, 0, lane, g, 0.0f);
  if constexpr (FROM_OUTPUT) {
    loadRow<THREADS, ITEMS, VEC, C>(beta, 0, lane, bt, 0.0f);
    if (blk == 0)
      failOnZeroWeight<C, THREADS, ITEMS, VEC>(g, lane, code);
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      pg[k][l] = pb[k][l] = 0.0f;
  const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
  for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
    float xh[ITEMS][VEC], d[ITEMS][VEC];
    loadRow<THREADS, ITEMS, VEC, C>(xOrY, r * C, lane, xh, 0.0f);
    loadRow<THREADS, ITEMS, VEC, C>(dy, r * C, lane, d, 0.0f);
    float rstd;
    if constexpr (FROM_OUTPUT) {
      rstd = ld(rstdIn, r);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = (dsc_i64(k) * THREADS + lane) * VEC + l < C
                         ? (xh[k][l] - bt[k][l]) / g[k][l]
                         : 0.0f;
    } else {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          s += xh[k][l];
      const float mean = rowSum<THREADS>(s) / float(C);
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l) {
          const bool in = (dsc_i64(k) * THREADS + lane) * VEC + l < C;
          const float dv = in ? xh[k][l] - mean : 0.0f;
          q += dv * dv;
        }
      rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = (xh[k][l] - mean) * rstd;
    }
    float sg = 0.0f, sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const bool in = (dsc_i64(k) * THREADS + lane) * VEC + l < C;
        const float gd = in ? d[k][l] * g[k][l] : 0.0f;
        sg += gd;
        sgx += gd * xh[k][l];
        pg[k][l] += in ? d[k][l] * xh[k][l] : 0.0f;
        pb[k][l] += in ? d[k][l] : 0.0f;
      }
    const float mg = rowSum<THREADS>(sg) / float(C);
    const float mgx = rowSum<THREADS>(sgx) / float(C);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        d[k][l] = rstd * (d[k][l] * g[k][l] - mg - xh[k][l] * mgx);
    if constexpr (DRES)
      addResidualGrad<C, THREADS, ITEMS, VEC>(d, dres, r * C, lane);
    storeRow<THREADS, ITEMS, VEC, C>(dx, r * C, lane, d);
  }
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * 2 * C, lane, pg);
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * 2 * C + C, lane, pb);
}

/// dsc.rms_norm, dsc.invertible_rms_norm and dsc.add_rms_norm
/// (cpu::rmsNorm): rstd = 1 / sqrt(mean(x^2) + eps), y = (x * rstd) * w.
/// RES: x + res is written to sum and normalised (the f32 row sum, not its
/// stored, possibly rounded, copy). RSTD: rstd is written per row.
template <typename TX, typename TR, typename TW, typename TS, typename TY,
          typename TD, bool RES, bool RSTD, dsc_i64 ROWS, dsc_i64 C,
          int THREADS, int ITEMS, int VEC>
__device__ void rmsNorm(const TX *x, const TR *res, const TW *w, TS *sum,
                        TY *y, TD *rstdOut, float eps) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
  if constexpr (RES) {
    float rv[ITEMS][VEC];
    loadRow<THREADS, ITEMS, VEC, C>(res, r * C, lane, rv, 0.0f);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        v[k][l] = __fadd_rn(v[k][l], rv[k][l]);
    storeRow<THREADS, ITEMS, VEC, C>(sum, r * C, lane, v);
  }
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      q += v[k][l] * v[k][l];
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
  if constexpr (RSTD)
    if (lane == 0)
      st(rstdOut, r, rstd);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC];
    ldv<VEC>(w, c, g);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] * rstd) * g[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

/// dsc.rms_norm_grad and dsc.rms_norm_grad_from_output (cpu::rmsNormGrad /
/// rmsNormGradFromOutput through rmsNormGradRows): blocks of 32 rows as
/// layerNormGradRows; dx = rstd * (dy*w - x_hat * mean(dy*w*x_hat)) and the
/// block's dw partial sums to part[blk, C], merged by columnSum.
/// FROM_OUTPUT: x_hat = y / w with the saved rstd; a zero weight element
/// sets the status. DRES: dres is added to dx afterwards (a separate
/// rounding, as the CPU does).
template <typename TD, typename TX, typename TW, typename TS, typename TR,
          typename TO, bool FROM_OUTPUT, bool DRES, dsc_i64 ROWS, dsc_i64 C,
          int THREADS, int ITEMS, int VEC>
__device__ void rmsNormGradRows(const TD *dy, const TX *xOrY, const TW *w,
                                const TS *rstdIn, const TR *dres, TO *dx,
                                float *part, float eps, dsc_u32 code) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  const dsc_i64 blk = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (blk >= blocks)
    return;
  float g[ITEMS][VEC], pw[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(w, 0, lane, g, 0.0f);
  if constexpr (FROM_OUTPUT)
    if (blk == 0)
      failOnZeroWeight<C, THREADS, ITEMS, VEC>(g, lane, code);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      pw[k][l] = 0.0f;
  const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
  for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
    float xh[ITEMS][VEC], d[ITEMS][VEC];
    loadRow<THREADS, ITEMS, VEC, C>(xOrY, r * C, lane, xh, 0.0f);
    loadRow<THREADS, ITEMS, VEC, C>(dy, r * C, lane, d, 0.0f);
    float rstd;
    if constexpr (FROM_OUTPUT) {
      rstd = ld(rstdIn, r);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = (dsc_i64(k) * THREADS + lane) * VEC + l < C
                         ? xh[k][l] / g[k][l]
                         : 0.0f;
    } else {
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          q += xh[k][l] * xh[k][l];
      rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = xh[k][l] * rstd;
    }
    float sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        sgx += d[k][l] * g[k][l] * xh[k][l];
        pw[k][l] += d[k][l] * xh[k][l];
      }
    const float mgx = rowSum<THREADS>(sgx) / float(C);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        d[k][l] = rstd * (d[k][l] * g[k][l] - xh[k][l] * mgx);
    if constexpr (DRES)
      addResidualGrad<C, THREADS, ITEMS, VEC>(d, dres, r * C, lane);
    storeRow<THREADS, ITEMS, VEC, C>(dx, r * C, lane, d);
  }
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * C, lane, pw);
}

/// dsc.bias_dropout_add_layer_norm (cpu::biasDropoutAddLayerNorm): sum =
/// res + dropout(x + b) (dsc.bias_dropout_add's mask), then LayerNorm of the
/// f32 row sum (not of its stored, possibly rounded, copy) with rstd out.
template <typename TX, typename TB, typename TR, typename TG, typename TE,
          typename TS, typename TY, typename TD, bool RATE0, dsc_i64 ROWS,
          dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void biasDropoutAddLayerNorm(const TX *x, const TB *bias,
                                        const TR *res, const TG *gamma,
                                        const TE *beta, TS *sum, TY *y,
                                        TD *rstdOut, float rate,
                                        float scale, float eps, Rng rng) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float vb[VEC], vr[VEC];
    bool keep[VEC];
    ldv<VEC>(bias, c, vb);
    ldv<VEC>(res, r * C + c, vr);
    if constexpr (!RATE0)
      rng.keep<VEC>(r * C + c, rate, keep);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float t = v[k][l] + vb[l];
      if constexpr (RATE0)
        v[k][l] = vr[l] + t;
      else
        v[k][l] = vr[l] + (keep[l] ? t * scale : 0.0f);
    }
  }
  storeRow<THREADS, ITEMS, VEC, C>(sum, r * C, lane, v);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      s += v[k][l];
  const float mean = rowSum<THREADS>(s) / float(C);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC + l;
      const float d = c < C ? v[k][l] - mean : 0.0f;
      q += d * d;
    }
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
  if (lane == 0)
    st(rstdOut, r, rstd);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC], b[VEC];
    ldv<VEC>(gamma, c, g);
    ldv<VEC>(beta, c, b);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] - mean) * rstd * g[l] + b[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

} // namespace dsc
