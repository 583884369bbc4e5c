//===- AttentionCpu.cpp - Softmax and fused attention CPU kernels ---------===//
//
// softmax, softmax_dropout, attention (FlashAttention-2 on the CPU) and
// their gradients, dense or block-sparse (a #dsc.block_layout), and
// runAttention, their dispatch.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include <cblas.h>

#include <cassert>
#include <limits>

namespace dsc::rt::cpu {

namespace {

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

/// Keys a causal row may attend to: j <= i + (Tk - Tq) for query i.
inline int64_t validKeys(int64_t r, int64_t Tq, int64_t Tk, bool causal) {
  return causal ? std::clamp<int64_t>(r % Tq + (Tk - Tq) + 1, 0, Tk) : Tk;
}

/// One row of dsc.softmax: masked keys (j >= valid, or padding where the
/// row's key mask `km` is 0) get exactly 0, and a row with no key left is
/// all zeros.
inline void softmaxRow(const float *xr, float *yr, int64_t valid, int64_t Tk,
                       float scale, const int32_t *km) {
  if (km) {
    // Padding keys read as -inf scores: e^-inf = 0 below.
    for (int64_t j = 0; j < valid; ++j)
      yr[j] = km[j] ? scale * xr[j] : -std::numeric_limits<float>::infinity();
    xr = yr;
    scale = 1.0f;
  }
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < valid; ++j)
    mx = std::max(mx, scale * xr[j]);
  if (mx == -std::numeric_limits<float>::infinity())
    valid = 0; // nothing to attend to
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    float e = km && !km[j] ? 0.0f : expApprox(scale * xr[j] - mx);
    yr[j] = e;
    sum += e;
  }
  const float inv = valid > 0 ? 1.0f / sum : 0.0f;
#pragma omp simd
  for (int64_t j = 0; j < valid; ++j)
    yr[j] *= inv;
  for (int64_t j = valid; j < Tk; ++j)
    yr[j] = 0.0f;
}

/// One row of a block-sparse softmax: only the keys of the layout's blocks
/// of row `layoutRow` (and below `valid`, and not padding where the key
/// mask `km` is 0) count; every other key gets 0.
inline void softmaxRowSparse(const float *xr, float *yr, int64_t valid,
                             int64_t Tk, float scale, const BlockLayout &l,
                             int64_t layoutRow, const int32_t *km) {
  const auto live = [&](int64_t j) { return !km || km[j] != 0; };
  const int32_t k0 = l.rows[size_t(layoutRow)],
                k1 = l.rows[size_t(layoutRow + 1)];
  const auto keys = [&](int32_t k, int64_t &j0, int64_t &j1) {
    j0 = l.cols[size_t(k)] * l.block;
    j1 = std::min(j0 + l.block, valid);
  };
  float mx = -std::numeric_limits<float>::infinity();
  for (int32_t k = k0; k < k1; ++k) {
    int64_t j0, j1;
    keys(k, j0, j1);
    for (int64_t j = j0; j < j1; ++j)
      if (live(j))
        mx = std::max(mx, scale * xr[j]);
  }
  fillF32(yr, Tk, 0.0f);
  float sum = 0.0f;
  for (int32_t k = k0; k < k1; ++k) {
    int64_t j0, j1;
    keys(k, j0, j1);
    for (int64_t j = j0; j < j1; ++j) {
      yr[j] = live(j) ? expApprox(scale * xr[j] - mx) : 0.0f;
      sum += yr[j];
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  for (int32_t k = k0; k < k1; ++k) {
    int64_t j0, j1;
    keys(k, j0, j1);
    for (int64_t j = j0; j < j1; ++j)
      yr[j] *= inv;
  }
}

/// The masks of a softmax over rows of scores [B, ..., Tq, Tk]: causal, a
/// block layout (empty: none) and key padding (`keys` [B, Tk], null: none;
/// `rowsPerBatch` rows of scores per row of it).
struct SoftmaxMasks {
  bool causal;
  const BlockLayout &layout;
  const int32_t *keys;
  int64_t rowsPerBatch;
};

/// Row r of x[rows, Tk] (rows = B*H*Tq) under `masks`.
inline void maskedSoftmaxRow(const float *x, float *y, int64_t r, int64_t Tq,
                             int64_t Tk, float scale, const SoftmaxMasks &masks) {
  const int64_t valid = validKeys(r, Tq, Tk, masks.causal);
  const int32_t *km =
      masks.keys ? masks.keys + r / masks.rowsPerBatch * Tk : nullptr;
  const BlockLayout &l = masks.layout;
  if (l.empty())
    return softmaxRow(x + r * Tk, y + r * Tk, valid, Tk, scale, km);
  const int64_t row = l.headOf(r / Tq) * l.blocks + r % Tq / l.block;
  softmaxRowSparse(x + r * Tk, y + r * Tk, valid, Tk, scale, l, row, km);
}

/// One row of dsc.softmax_grad; dxr may alias dyr.
inline void softmaxGradRow(const float *dyr, const float *yr, float *dxr,
                           int64_t Tk, float scale) {
  float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
  for (int64_t j = 0; j < Tk; ++j)
    dot += dyr[j] * yr[j];
#pragma omp simd
  for (int64_t j = 0; j < Tk; ++j)
    dxr[j] = scale * yr[j] * (dyr[j] - dot);
}

/// Softmax over the last dim of x[rows, Tk], rows = batch*Tq.
void softmax(const float *x, float *y, int64_t rows, int64_t Tq, int64_t Tk,
             float scale, const SoftmaxMasks &masks) {
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    maskedSoftmaxRow(x, y, r, Tq, Tk, scale, masks);
}

void softmaxGrad(const float *dy, const float *y, float *dx, int64_t rows,
                 int64_t Tk, float scale) {
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    softmaxGradRow(dy + r * Tk, y + r * Tk, dx + r * Tk, Tk, scale);
}

/// softmax then dropout (dsc.dropout's mask) of each row in one pass; the
/// undropped probabilities are kept for the backward.
void softmaxDropout(const float *x, float *dropped, float *probs,
                    int64_t rows, int64_t Tq, int64_t Tk, float scale,
                    const SoftmaxMasks &masks, double rate, uint32_t stream,
                    uint64_t seed, uint64_t offset) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    maskedSoftmaxRow(x, probs, r, Tq, Tk, scale, masks);
    forDropoutMask(r * Tk, (r + 1) * Tk, rate, stream, seed, offset,
                   [&](int64_t i, bool keep) {
                     float p = probs[i];
                     dropped[i] = keep ? (rate > 0.0 ? p * keepScale : p)
                                       : 0.0f;
                   });
  }
}

/// softmaxGrad(dropout(dy), probs) in one pass per row.
/// The mask is read off the forward's dropped output (kept where non-zero).
void softmaxDropoutGrad(const float *dy, const float *probs,
                        const float *dropped, float *dx, int64_t rows,
                        int64_t Tk, float scale, double rate) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t i0 = r * Tk;
    if (rate > 0.0) {
#pragma omp simd
      for (int64_t i = i0; i < i0 + Tk; ++i)
        dx[i] = dropped[i] != 0.0f ? dy[i] * keepScale : 0.0f;
    } else {
#pragma omp simd
      for (int64_t i = i0; i < i0 + Tk; ++i)
        dx[i] = dy[i];
    }
    softmaxGradRow(dx + i0, probs + i0, dx + i0, Tk, scale);
  }
}

//===----------------------------------------------------------------------===//
// Fused attention (FlashAttention-2 on the CPU)
//===----------------------------------------------------------------------===//
//
// Per (batch, head), queries and keys go in tiles of kAttnTile rows; the
// tile products are single-threaded OpenBLAS GEMMs and the OpenMP threads
// split the (batch, head[, query tile]) work. Nothing of size [T, T] is
// allocated: a thread holds one [tile, tile] block of scores at a time.
// The dropout decision of probability (i, j) is forDropoutMask's for
// element (bh*T + i)*T + j of the [B, H, T, T] probabilities, i.e.
// dsc.softmax_dropout's mask.

constexpr int64_t kAttnTile = 64;

/// C[m, n] = alpha * A[m, k] @ op(B) + beta * C, row-major with leading
/// dimensions lda, ldb, ldc.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 float alpha, const float *A, int64_t lda, const float *B,
                 int64_t ldb, float beta, float *C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, int(m), int(n), int(k),
              alpha, A, int(lda), B, int(ldb), beta, C, int(ldc));
}

/// Keys of tile [j0, j0 + bc) that query i may attend to: the first n.
inline int64_t attnValid(int64_t i, int64_t j0, int64_t bc, bool causal) {
  return causal ? std::clamp<int64_t>(i + 1 - j0, 0, bc) : bc;
}

/// The tiles of one attention: the layout's blocks, or kAttnTile rows
/// everywhere when it is dense. `visited` lists the key tiles a query tile
/// reads (the layout's row; every tile up to the causal end when dense),
/// `visitors` the query tiles that read a key tile (the transposed
/// layout's row; every tile from the causal start when dense), which only
/// the backward asks for: the transpose is built for it alone.
struct AttentionTiles {
  AttentionTiles(const BlockLayout &layout, int64_t T, bool causal,
                 bool backward)
      : layout(layout),
        byKey(backward ? layout.transposed() : BlockLayout{}), causal(causal),
        size(layout.empty() ? kAttnTile : layout.block),
        count(ceilDiv(T, size)) {}

  void visited(int64_t bh, int64_t qt, std::vector<int64_t> &tiles) const {
    list(layout, bh, qt, 0, causal ? qt + 1 : count, tiles);
  }
  void visitors(int64_t bh, int64_t kt, std::vector<int64_t> &tiles) const {
    assert(byKey.empty() == layout.empty() && "visitors of a forward");
    list(byKey, bh, kt, causal ? kt : 0, count, tiles);
  }

  const BlockLayout &layout;
  const BlockLayout byKey;
  const bool causal;
  const int64_t size, count;

private:
  /// Row `t` of `l` for head bh; dense: the tiles [from, to).
  static void list(const BlockLayout &l, int64_t bh, int64_t t, int64_t from,
                   int64_t to, std::vector<int64_t> &tiles) {
    tiles.clear();
    if (l.empty()) {
      for (int64_t j = from; j < to; ++j)
        tiles.push_back(j);
      return;
    }
    const int64_t row = l.headOf(bh) * l.blocks + t;
    for (int32_t k = l.rows[size_t(row)]; k < l.rows[size_t(row + 1)]; ++k)
      tiles.push_back(l.cols[size_t(k)]);
  }
};

/// Zeroes the scores (or probabilities) of padding keys in a row of n keys
/// starting at key j0; `km` is the batch's key mask (null: no padding).
inline void dropPaddingKeys(float *row, int64_t n, const int32_t *km,
                            int64_t j0, float value) {
  if (!km)
    return;
  for (int64_t j = 0; j < n; ++j)
    if (!km[j0 + j])
      row[j] = value;
}

/// dsc.attention over BH = B*H heads of [T, D]: out = dropout(softmax(scale
/// q k^T, causal, layout, key padding)) v and lse[BH, T] of the scaled,
/// masked scores, with softmaxDropout's mask over the [BH, T, T]
/// probabilities. Query head bh reads key/value head bh / groups
/// (grouped-query attention) and key mask row bh / H (`keyMask` [B, T],
/// null: none); a query with no key left gets out 0 and lse -inf. Only the
/// tiles `tiles` visits are computed.
void attention(const float *q, const float *k, const float *v,
               const int32_t *keyMask, float *out, float *lse, int64_t BH,
               int64_t H, int64_t groups, int64_t T, int64_t D, float scale,
               const AttentionTiles &tiles, double rate, uint32_t stream,
               uint64_t seed, uint64_t offset) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  const int64_t tile = tiles.size;
  const bool causal = tiles.causal;
#pragma omp parallel
  {
    std::vector<float> S(static_cast<size_t>(tile * tile)),
        m(static_cast<size_t>(tile)), l(static_cast<size_t>(tile));
    std::vector<int64_t> keyTiles;
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < BH * tiles.count; ++task) {
      const int64_t bh = task / tiles.count, qt = task % tiles.count;
      const int64_t i0 = qt * tile, br = std::min(tile, T - i0);
      const float *qb = q + (bh * T + i0) * D,
                  *kb = k + bh / groups * T * D, *vb = v + bh / groups * T * D;
      const int32_t *km = keyMask ? keyMask + bh / H * T : nullptr;
      float *acc = out + (bh * T + i0) * D; // accumulated in place
      fillF32(acc, br * D, 0.0f);
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      tiles.visited(bh, qt, keyTiles);
      for (int64_t kt : keyTiles) {
        const int64_t j0 = kt * tile, bc = std::min(tile, T - j0);
        gemm(false, true, br, bc, D, scale, qb, D, kb + j0 * D, D, 0.0f,
             S.data(), bc);
        for (int64_t r = 0; r < br; ++r) {
          const int64_t i = i0 + r, n = attnValid(i, j0, bc, causal);
          float *sr = S.data() + r * bc;
          dropPaddingKeys(sr, n, km, j0, -kInf);
          float mx = m[size_t(r)];
#pragma omp simd reduction(max : mx)
          for (int64_t j = 0; j < n; ++j)
            mx = std::max(mx, sr[j]);
          // A row with no valid key yet keeps m = -inf: nothing to correct,
          // nothing to add.
          const bool none = mx == -kInf;
          const float corr = none ? 1.0f : expApprox(m[size_t(r)] - mx);
          const int64_t live = none ? 0 : n;
          float sum = 0.0f;
          // Padding keys (score -inf) get exactly 0: expApprox clamps its
          // argument, so e^-inf would not be.
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < live; ++j) {
            sr[j] = sr[j] == -kInf ? 0.0f : expApprox(sr[j] - mx);
            sum += sr[j];
          }
          for (int64_t j = live; j < bc; ++j)
            sr[j] = 0.0f;
          m[size_t(r)] = mx;
          l[size_t(r)] = l[size_t(r)] * corr + sum;
          const int64_t e0 = (bh * T + i) * T + j0;
          forDropoutMask(e0, e0 + n, rate, stream, seed, offset,
                         [&](int64_t e, bool keep) {
                           if (!keep)
                             sr[e - e0] = 0.0f;
                         });
          float *ar = acc + r * D;
#pragma omp simd
          for (int64_t d = 0; d < D; ++d)
            ar[d] *= corr;
        }
        gemm(false, false, br, D, bc, 1.0f, S.data(), bc, vb + j0 * D, D, 1.0f,
             acc, D);
      }
      for (int64_t r = 0; r < br; ++r) {
        const float lr = l[size_t(r)];
        const float inv = lr > 0.0f ? keepScale / lr : 0.0f;
        float *ar = acc + r * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          ar[d] *= inv;
        lse[bh * T + i0 + r] = lr > 0.0f ? m[size_t(r)] + std::log(lr) : -kInf;
      }
    }
  }
}

/// Scratch of one attentionGradHeads call: two [tile, tile] tiles, the
/// rows' D_i and a tile list.
struct GradScratch {
  GradScratch(int64_t tile, int64_t T)
      : P(static_cast<size_t>(tile * tile)),
        dP(static_cast<size_t>(tile * tile)),
        rowDot(static_cast<size_t>(T)) {}
  std::vector<float> P, dP, rowDot;
  std::vector<int64_t> queryTiles;
};

/// dsc.attention_grad: dq, dk, dv from the probabilities recomputed per
/// tile from q, k and lse (FlashAttention-2's backward) for the query heads
/// [h0, h0 + groups) that share one key/value head (grouped-query
/// attention): dk and dv accumulate over them in head order.
void attentionGradHeads(const float *dout, const float *q, const float *k,
                        const float *v, const float *out, const float *lse,
                        const int32_t *km, float *dq, float *dk, float *dv,
                        int64_t h0, int64_t groups, int64_t T, int64_t D,
                        float scale,
                        const AttentionTiles &tiles, double rate,
                        uint32_t stream, uint64_t seed, uint64_t offset,
                        GradScratch &w) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  const int64_t tile = tiles.size;
  const int64_t kvBase = h0 / groups * T * D;
  const float *kb = k + kvBase, *vb = v + kvBase;
  float *dkb = dk + kvBase, *dvb = dv + kvBase;
  float *P = w.P.data(), *dP = w.dP.data(), *rowDot = w.rowDot.data();
  fillF32(dkb, T * D, 0.0f);
  fillF32(dvb, T * D, 0.0f);
  for (int64_t bh = h0; bh < h0 + groups; ++bh) {
    const int64_t base = bh * T * D;
    const float *qb = q + base, *gb = dout + base, *ob = out + base,
                *lb = lse + bh * T;
    float *dqb = dq + base;
    // D_i = rowsum(dout * out) = rowsum(dP * P) of the softmax backward.
    for (int64_t i = 0; i < T; ++i) {
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < D; ++d)
        dot += gb[i * D + d] * ob[i * D + d];
      rowDot[i] = dot;
    }
    fillF32(dqb, T * D, 0.0f);
    for (int64_t kt = 0; kt < tiles.count; ++kt) {
      const int64_t j0 = kt * tile, bc = std::min(tile, T - j0);
      tiles.visitors(bh, kt, w.queryTiles);
      for (int64_t qt : w.queryTiles) {
        const int64_t i0 = qt * tile, br = std::min(tile, T - i0);
        // P = exp(scale * q k^T - lse) (0 where masked); dP = dout v^T.
        gemm(false, true, br, bc, D, scale, qb + i0 * D, D, kb + j0 * D, D,
             0.0f, P, bc);
        gemm(false, true, br, bc, D, 1.0f, gb + i0 * D, D, vb + j0 * D, D,
             0.0f, dP, bc);
        for (int64_t r = 0; r < br; ++r) {
          const int64_t i = i0 + r, n = attnValid(i, j0, bc, tiles.causal);
          float *pr = P + r * bc, *dpr = dP + r * bc;
          const float li = lb[i], di = rowDot[i];
#pragma omp simd
          for (int64_t j = 0; j < n; ++j)
            pr[j] = expApprox(pr[j] - li);
          for (int64_t j = n; j < bc; ++j)
            pr[j] = 0.0f;
          dropPaddingKeys(pr, n, km, j0, 0.0f);
          // dS = P * (Z dP - D), and P becomes the dropped Z P, where Z
          // is keep / (1 - rate) or 0.
          const int64_t e0 = (bh * T + i) * T + j0;
          forDropoutMask(e0, e0 + bc, rate, stream, seed, offset,
                         [&](int64_t e, bool keep) {
                           const int64_t j = e - e0;
                           const float z = keep ? keepScale : 0.0f;
                           const float p = pr[j];
                           dpr[j] = p * (z * dpr[j] - di);
                           pr[j] = z * p;
                         });
        }
        // dv += Zp^T dout; dq += scale dS k; dk += scale dS^T q.
        gemm(true, false, bc, D, br, 1.0f, P, bc, gb + i0 * D, D, 1.0f,
             dvb + j0 * D, D);
        gemm(false, false, br, D, bc, scale, dP, bc, kb + j0 * D, D, 1.0f,
             dqb + i0 * D, D);
        gemm(true, false, bc, D, br, scale, dP, bc, qb + i0 * D, D, 1.0f,
             dkb + j0 * D, D);
      }
    }
  }
}

/// dsc.attention_grad over BH query heads, one task per key/value head;
/// `keyMask` as attention()'s.
void attentionGrad(const float *dout, const float *q, const float *k,
                   const float *v, const float *out, const float *lse,
                   const int32_t *keyMask, float *dq, float *dk, float *dv,
                   int64_t BH, int64_t H, int64_t groups, int64_t T, int64_t D,
                   float scale,
                   const AttentionTiles &tiles, double rate, uint32_t stream,
                   uint64_t seed, uint64_t offset) {
#pragma omp parallel
  {
    GradScratch scratch(tiles.size, T);
#pragma omp for schedule(dynamic)
    for (int64_t kvh = 0; kvh < BH / groups; ++kvh)
      attentionGradHeads(dout, q, k, v, out, lse,
                         keyMask ? keyMask + kvh * groups / H * T : nullptr,
                         dq, dk, dv, kvh * groups, groups, T, D, scale, tiles,
                         rate, stream, seed, offset, scratch);
  }
}

} // namespace

void runAttention(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  const RngContext &rng = e.rng;
  const int32_t *keyMask =
      d.keyMaskInput >= 0 ? e.iin(size_t(d.keyMaskInput), "key_mask")
                          : nullptr;
  const auto softmaxMasks = [&] {
    return SoftmaxMasks{I.getInt("causal") != 0, I.getLayout("layout"),
                        keyMask, keyMask ? d.rows / d.B : 0};
  };
  switch (asFamily<AttentionOpcode>(I.op)) {
  case AttentionOpcode::Softmax: {
    const float scale = float(I.getFloat("scale"));
    const float *px = e.fin(0, "x");
    softmax(px, e.fout(0, "output"), d.rows, d.tq, d.cols, scale,
            softmaxMasks());
    return;
  }
  case AttentionOpcode::SoftmaxDropout:
  case AttentionOpcode::SoftmaxDropoutGrad: {
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    if (I.op == Opcode::SoftmaxDropoutGrad)
      softmaxDropoutGrad(e.fin(0, "dy"), e.fin(1, "probs"), e.fin(2, "dropped"),
                         e.fout(0, "dx"), d.rows, d.cols, scale, d.rate);
    else
      softmaxDropout(e.fin(0, "scores"), e.fout(0, "dropped"),
                     e.fout(1, "probs"), d.rows, d.tq, d.cols, scale,
                     softmaxMasks(), d.rate, uint32_t(I.getInt("stream")),
                     rng.seed, rng.offset);
    return;
  }
  case AttentionOpcode::Attention:
  case AttentionOpcode::AttentionGrad: {
    const float scale = float(I.getFloat("scale"));
    const AttentionTiles tiles(I.getLayout("layout"), d.T,
                               I.getInt("causal") != 0,
                               I.op == Opcode::AttentionGrad);
    const uint32_t stream = uint32_t(I.getInt("stream"));
    if (I.op == Opcode::AttentionGrad)
      attentionGrad(e.fin(0, "dout"), e.fin(1, "q"), e.fin(2, "k"),
                    e.fin(3, "v"), e.fin(4, "out"), e.fin(5, "lse"), keyMask,
                    e.fout(0, "dq"), e.fout(1, "dk"), e.fout(2, "dv"), d.BH,
                    d.H, d.groups, d.T, d.D, scale, tiles, d.rate, stream,
                    rng.seed, rng.offset);
    else
      attention(e.fin(0, "q"), e.fin(1, "k"), e.fin(2, "v"), keyMask,
                e.fout(0, "out"), e.fout(1, "lse"), d.BH, d.H, d.groups, d.T,
                d.D, scale, tiles, d.rate, stream, rng.seed, rng.offset);
    return;
  }
  case AttentionOpcode::SoftmaxGrad: {
    const float scale = I.has("scale") ? float(I.getFloat("scale")) : 1.0f;
    const float *dy = e.fin(0, "dy"), *py = e.fin(1, "y");
    softmaxGrad(dy, py, e.fout(0, "dx"), d.rows, d.cols, scale);
    return;
  }
  }
  e.fail("internal: not a softmax or attention opcode");
}

} // namespace dsc::rt::cpu
