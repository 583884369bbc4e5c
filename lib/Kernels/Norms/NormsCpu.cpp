//===- NormsCpu.cpp - LayerNorm and RMSNorm CPU kernels -------------------===//
//
// layer_norm, invertible_layer_norm, rms_norm, invertible_rms_norm,
// bias_dropout_add_layer_norm, add_rms_norm and the gradients, and runNorms,
// their dispatch. Weight and bias
// gradients are summed per 32-row block and merged in block order, so they
// do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

namespace dsc::rt::cpu {

namespace {

inline void rowMoments(const float *x, int64_t C, float eps, float &mean,
                       float &rstd) {
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t c = 0; c < C; ++c)
    s += x[c];
  mean = s / float(C);
  float v = 0.0f;
  const float mu = mean;
#pragma omp simd reduction(+ : v)
  for (int64_t c = 0; c < C; ++c) {
    float d = x[c] - mu;
    v += d * d;
  }
  rstd = 1.0f / std::sqrt(v / float(C) + eps);
}

/// One row of dsc.layer_norm; returns its 1/std.
inline float layerNormRow(const float *xr, const float *gamma,
                          const float *beta, float *yr, int64_t C, float eps) {
  float mean, rstd;
  rowMoments(xr, C, eps, mean, rstd);
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  return rstd;
}

/// `rstdOut` (rows floats, or null) receives each row's 1/std.
void layerNorm(const float *x, const float *gamma, const float *beta,
               float *y, int64_t rows, int64_t C, float eps, float *rstdOut) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float rstd = layerNormRow(x + r * C, gamma, beta, y + r * C, C, eps);
    if (rstdOut)
      rstdOut[r] = rstd;
  }
}

/// dx += dres for one row: the residual gradient a fused norm backward adds.
/// A second pass over the row (in L1), not one expression with dx: the
/// compiler would contract it into an FMA, and the sum must round like the
/// separate dsc.add of the unfused step.
inline void addResidualGradRow(float *dxr, const float *dr, int64_t C) {
#pragma omp simd
  for (int64_t c = 0; c < C; ++c)
    dxr[c] += dr[c];
}

/// LayerNorm backward given, per row, the normalised input x_hat and 1/std:
/// `rowStats(r, xh)` writes row r's x_hat into xh and returns its rstd.
/// `dres` (or null) is added into dx in the same pass.
template <typename RowStats>
void layerNormGradRows(const float *dy, const float *gamma, const float *dres,
                       float *dx, float *dgamma, float *dbeta, int64_t rows,
                       int64_t C, RowStats rowStats) {
  // dgamma/dbeta: per fixed-size row block partial sums, then a fixed-order
  // merge, so the result is independent of the thread count.
  const int64_t RB = 32, blocks = std::max<int64_t>(1, ceilDiv(rows, RB));
  std::vector<float> part(size_t(blocks * 2 * C), 0.0f);
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *pg = part.data() + blk * 2 * C, *pb = pg + C;
    std::vector<float> xhRow(static_cast<size_t>(C));
    float *xh = xhRow.data();
    const int64_t r1 = std::min(rows, (blk + 1) * RB);
    for (int64_t r = blk * RB; r < r1; ++r) {
      const float *dyr = dy + r * C;
      float *dxr = dx + r * C;
      const float rstd = rowStats(r, xh);
      float sg = 0.0f, sgx = 0.0f;
#pragma omp simd reduction(+ : sg, sgx)
      for (int64_t c = 0; c < C; ++c) {
        float g = dyr[c] * gamma[c];
        sg += g;
        sgx += g * xh[c];
        pg[c] += dyr[c] * xh[c];
        pb[c] += dyr[c];
      }
      const float mg = sg / float(C), mgx = sgx / float(C);
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        dxr[c] = rstd * (dyr[c] * gamma[c] - mg - xh[c] * mgx);
      if (dres)
        addResidualGradRow(dxr, dres + r * C, C);
    }
  }
  const int64_t cb = 64, slices = ceilDiv(C, cb);
#pragma omp parallel for schedule(static) if (blocks * C > (1 << 14))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * cb, c1 = std::min(C, c0 + cb);
    for (int64_t c = c0; c < c1; ++c) {
      dgamma[c] = 0.0f;
      dbeta[c] = 0.0f;
    }
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const float *pg = part.data() + blk * 2 * C, *pb = pg + C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c) {
        dgamma[c] += pg[c];
        dbeta[c] += pb[c];
      }
    }
  }
}

inline float rmsRstd(const float *x, int64_t C, float eps) {
  float q = 0.0f;
#pragma omp simd reduction(+ : q)
  for (int64_t c = 0; c < C; ++c)
    q += x[c] * x[c];
  return 1.0f / std::sqrt(q / float(C) + eps);
}

/// RMSNorm: y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps). With
/// `res` (dsc.add_rms_norm), x + res is normalised and written to `sum`
/// first, in the same pass over the row. `rstdOut` (rows floats, or null)
/// receives each row's rstd.
void rmsNorm(const float *x, const float *res, const float *w, float *sum,
             float *y, float *rstdOut, int64_t rows, int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C;
    if (res) {
      const float *rr = res + r * C;
      float *sr = sum + r * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        sr[c] = xr[c] + rr[c];
      xr = sr;
    }
    float *yr = y + r * C;
    const float rstd = rmsRstd(xr, C, eps);
    if (rstdOut)
      rstdOut[r] = rstd;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      yr[c] = (xr[c] * rstd) * w[c];
  }
}

/// RMSNorm backward given, per row, x_hat and rstd: `rowStats(r, xh)` writes
/// row r's x_hat into xh and returns its rstd. dx = rstd * (dy*w - x_hat *
/// mean(dy*w*x_hat)), dw = sum_rows dy*x_hat; `dres` (or null) is added
/// into dx afterwards, a separate rounding like the unfused step's dsc.add.
template <typename RowStats>
void rmsNormGradRows(const float *dy, const float *w, const float *dres,
                     float *dx, float *dw, int64_t rows, int64_t C,
                     RowStats rowStats) {
  rowsWithColumnSum(rows, C, dw, [&](int64_t r, float *acc) {
    thread_local std::vector<float> xhRow;
    xhRow.resize(size_t(C));
    float *xh = xhRow.data();
    const float *dyr = dy + r * C;
    float *dxr = dx + r * C;
    const float rstd = rowStats(r, xh);
    float sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
    for (int64_t c = 0; c < C; ++c) {
      sgx += dyr[c] * w[c] * xh[c];
      acc[c] += dyr[c] * xh[c];
    }
    const float mgx = sgx / float(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      dxr[c] = rstd * (dyr[c] * w[c] - xh[c] * mgx);
    if (dres)
      addResidualGradRow(dxr, dres + r * C, C);
  });
}

void rmsNormGrad(const float *dy, const float *x, const float *w,
                 const float *dres, float *dx, float *dw, int64_t rows,
                 int64_t C, float eps) {
  rmsNormGradRows(dy, w, dres, dx, dw, rows, C, [&](int64_t r, float *xh) {
    const float *xr = x + r * C;
    const float rstd = rmsRstd(xr, C, eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      xh[c] = xr[c] * rstd;
    return rstd;
  });
}

/// The same gradient from the output y and the saved rstd (the invertible
/// RMSNorm): x_hat = y / w. Throws if w has a zero.
void rmsNormGradFromOutput(const float *dy, const float *y, const float *w,
                           const float *rstd, const float *dres, float *dx,
                           float *dw, int64_t rows, int64_t C) {
  for (int64_t c = 0; c < C; ++c)
    if (w[c] == 0.0f)
      throw Error("rms_norm_grad_from_output: RMSNorm weight element " +
                  std::to_string(c) +
                  " is 0, so the input cannot be recovered from the output; "
                  "switch off transformer_kernel.normalize_invertible");
  rmsNormGradRows(dy, w, dres, dx, dw, rows, C, [&](int64_t r, float *xh) {
    const float *yr = y + r * C;
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      xh[c] = yr[c] / w[c];
    return rstd[r];
  });
}

/// `dres` (rows * C floats, or null) is added into dx: the gradient that
/// reaches the LayerNorm input along a residual connection.
void layerNormGrad(const float *dy, const float *x, const float *gamma,
                   const float *dres, float *dx, float *dgamma, float *dbeta,
                   int64_t rows, int64_t C, float eps) {
  layerNormGradRows(dy, gamma, dres, dx, dgamma, dbeta, rows, C,
                    [&](int64_t r, float *xh) {
                      const float *xr = x + r * C;
                      float mean, rstd;
                      rowMoments(xr, C, eps, mean, rstd);
#pragma omp simd
                      for (int64_t c = 0; c < C; ++c)
                        xh[c] = (xr[c] - mean) * rstd;
                      return rstd;
                    });
}

/// The same gradient from the output y and the saved 1/std (the invertible
/// LayerNorm): x_hat = (y - beta) / gamma. Throws if gamma has a zero.
void layerNormGradFromOutput(const float *dy, const float *y,
                             const float *gamma, const float *beta,
                             const float *rstd, const float *dres,
                             float *dx, float *dgamma, float *dbeta,
                             int64_t rows, int64_t C) {
  for (int64_t c = 0; c < C; ++c)
    if (gamma[c] == 0.0f)
      throw Error("layer_norm_grad_from_output: LayerNorm weight element " +
                  std::to_string(c) +
                  " is 0, so the input cannot be recovered from the output; "
                  "switch off transformer_kernel.normalize_invertible");
  // y = gamma * x_hat + beta  =>  x_hat = (y - beta) / gamma.
  layerNormGradRows(dy, gamma, dres, dx, dgamma, dbeta, rows, C,
                    [&](int64_t r, float *xh) {
                      const float *yr = y + r * C;
#pragma omp simd
                      for (int64_t c = 0; c < C; ++c)
                        xh[c] = (yr[c] - beta[c]) / gamma[c];
                      return rstd[r];
                    });
}

/// sum = biasDropoutAdd(x, b, res), y = layerNorm(sum) with each row's 1/std
/// in rstd, one pass per row (bitwise the two kernels' results).
void biasDropoutAddLayerNorm(const float *x, const float *b, const float *res,
                             const float *gamma, const float *beta, float *sum,
                             float *y, float *rstdOut, int64_t rows, int64_t C,
                             double rate, uint32_t stream, uint64_t seed,
                             uint64_t offset, float eps) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    // The row stays in L1 between the residual sum and the normalisation;
    // both use the row functions of biasDropoutAdd and layerNorm.
    biasDropoutAddRow(x, b, res, sum, r, C, rate, stream, seed, offset);
    rstdOut[r] =
        layerNormRow(sum + r * C, gamma, beta, y + r * C, C, eps);
  }
}

} // namespace

void runNorms(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  const RngContext &rng = e.rng;
  switch (asFamily<NormsOpcode>(I.op)) {
  case NormsOpcode::LayerNorm:
  case NormsOpcode::InvertibleLayerNorm: {
    float *rstd =
        I.op == Opcode::InvertibleLayerNorm ? e.fout(1, "rstd") : nullptr;
    const float *px = e.fin(0, "x"), *pg = e.fin(1, "gamma"),
                *pb = e.fin(2, "beta");
    layerNorm(px, pg, pb, e.fout(0, "output"), d.rows, d.cols,
              float(I.getFloat("epsilon")), rstd);
    return;
  }
  case NormsOpcode::LayerNormGradFromOutput: {
    const float *dres =
        I.inputs.size() == 6 ? e.fin(5, "residual gradient") : nullptr;
    layerNormGradFromOutput(e.fin(0, "dy"), e.fin(1, "y"), e.fin(2, "gamma"),
                            e.fin(3, "beta"), e.fin(4, "rstd"), dres,
                            e.fout(0, "dx"), e.fout(1, "dgamma"),
                            e.fout(2, "dbeta"), d.rows, d.cols);
    return;
  }
  case NormsOpcode::LayerNormGrad: {
    const float *dres =
        I.inputs.size() == 4 ? e.fin(3, "residual gradient") : nullptr;
    const float *dy = e.fin(0, "dy"), *px = e.fin(1, "x"),
                *pg = e.fin(2, "gamma");
    float *dx = e.fout(0, "dx"), *dg = e.fout(1, "dgamma"),
          *db = e.fout(2, "dbeta");
    layerNormGrad(dy, px, pg, dres, dx, dg, db, d.rows, d.cols,
                  float(I.getFloat("epsilon")));
    return;
  }
  case NormsOpcode::RmsNorm:
  case NormsOpcode::InvertibleRmsNorm: {
    float *rstd =
        I.op == Opcode::InvertibleRmsNorm ? e.fout(1, "rstd") : nullptr;
    rmsNorm(e.fin(0, "x"), nullptr, e.fin(1, "weight"), nullptr,
            e.fout(0, "output"), rstd, d.rows, d.cols,
            float(I.getFloat("epsilon")));
    return;
  }
  case NormsOpcode::AddRmsNorm:
    rmsNorm(e.fin(0, "x"), e.fin(1, "residual"), e.fin(2, "weight"),
            e.fout(0, "sum"), e.fout(1, "output"), e.fout(2, "rstd"), d.rows,
            d.cols, float(I.getFloat("epsilon")));
    return;
  case NormsOpcode::RmsNormGrad: {
    const float *dres =
        I.inputs.size() == 4 ? e.fin(3, "residual gradient") : nullptr;
    rmsNormGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fin(2, "weight"), dres,
                e.fout(0, "dx"), e.fout(1, "dweight"), d.rows, d.cols,
                float(I.getFloat("epsilon")));
    return;
  }
  case NormsOpcode::RmsNormGradFromOutput: {
    const float *dres =
        I.inputs.size() == 5 ? e.fin(4, "residual gradient") : nullptr;
    rmsNormGradFromOutput(e.fin(0, "dy"), e.fin(1, "y"), e.fin(2, "weight"),
                          e.fin(3, "rstd"), dres, e.fout(0, "dx"),
                          e.fout(1, "dweight"), d.rows, d.cols);
    return;
  }
  case NormsOpcode::BiasDropoutAddLayerNorm:
    biasDropoutAddLayerNorm(e.fin(0, "x"), e.fin(1, "bias"),
                            e.fin(2, "residual"), e.fin(3, "gamma"),
                            e.fin(4, "beta"), e.fout(0, "sum"),
                            e.fout(1, "output"), e.fout(2, "rstd"), d.rows,
                            d.cols, d.rate, uint32_t(I.getInt("stream")),
                            rng.seed, rng.offset, float(I.getFloat("epsilon")));
    return;
  }
  e.fail("internal: not a norms opcode");
}

} // namespace dsc::rt::cpu
