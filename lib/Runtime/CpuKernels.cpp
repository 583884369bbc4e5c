//===- CpuKernels.cpp - CPU kernels: OpenBLAS GEMMs, OpenMP elsewhere -----===//
//
// Threading: OpenBLAS is made single-threaded and every GEMM is tiled over
// OpenMP threads here, so the process runs one thread pool instead of an
// OpenMP pool and an OpenBLAS pthread pool spinning against each other.
// Every reduction has a fixed order, so results do not depend on the number
// of threads.
//
//===----------------------------------------------------------------------===//

#include "CpuKernels.h"

#include "dsc/Runtime/Broadcast.h"
#include "dsc/Runtime/InstrCheck.h"
#include "dsc/Runtime/Philox.h"
#include "dsc/Runtime/Program.h"

#include <cblas.h>
#include <omp.h>
#ifdef __AVX2__
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>

namespace dsc::rt::cpu {

namespace {

inline int numThreads() { return omp_get_max_threads(); }

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

//===----------------------------------------------------------------------===//
// Vectorisable math. Written branch-free so `#pragma omp simd` loops compile
// to AVX2 code (the libm calls would not vectorise).
//===----------------------------------------------------------------------===//

inline float bitsToFloat(int32_t i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}

/// exp(x), Cephes polynomial on [-ln2/2, ln2/2], ~2 ulp for x in
/// [-87.3, 88.3]; inputs are clamped to that range (exp(-87.3) ~ 1e-38).
inline float expApprox(float x) {
  x = x < -87.3f ? -87.3f : x;
  x = x > 88.3f ? 88.3f : x;
  // Round x*log2(e) to the nearest integer n with the 1.5*2^23 trick: the
  // integer lands in the low mantissa bits of k (no roundps/cvt needed).
  const float k = x * 1.44269504088896341f + 12582912.0f;
  int32_t ki;
  std::memcpy(&ki, &k, 4);
  const float n = k - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * bitsToFloat((ki - 0x4B400000 + 127) << 23);
}

/// erf(x): the rational approximation used by Eigen/XLA (few ulp in fp32).
inline float erfApprox(float x) {
  x = x > 4.0f ? 4.0f : x;
  x = x < -4.0f ? -4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

std::once_flag blasOnce;

} // namespace

void configureBlasThreads() {
  std::call_once(blasOnce, [] { openblas_set_num_threads(1); });
}

//===----------------------------------------------------------------------===//
// GEMM tiling
//===----------------------------------------------------------------------===//

namespace {

struct NoPrologue {
  void operator()(int64_t, int64_t, int64_t, int64_t, int64_t) const {}
};

/// C[b] = alpha * op(A[b]) @ op(B[b]) + beta * C[b] for b < batch, row-major,
/// op(A) is [M,K], op(B) is [K,N]. The (batch, M-tile, N-tile) space is split
/// over OpenMP threads, each calling single-threaded sgemm on its tile; `pre`
/// runs on a tile just before its sgemm (bias prefill). Tiling changes no
/// per-element summation order (K is never split).
template <typename Pre = NoPrologue>
void gemmTiled(int64_t batch, bool tA, bool tB, int64_t M, int64_t N,
               int64_t K, float alpha, const float *A, int64_t lda,
               int64_t strideA, const float *B, int64_t ldb, int64_t strideB,
               float beta, float *C, int64_t ldc, int64_t strideC,
               Pre pre = Pre()) {
  if (batch <= 0 || M <= 0 || N <= 0)
    return;
  configureBlasThreads();
  const CBLAS_TRANSPOSE ta = tA ? CblasTrans : CblasNoTrans;
  const CBLAS_TRANSPOSE tb = tB ? CblasTrans : CblasNoTrans;
  const int nt = numThreads();
  const double flops = 2.0 * double(batch) * double(M) * double(N) * double(K);
  int64_t pm = 1, pn = 1;
  if (nt > 1 && flops >= 4e6 && batch < 2 * nt) {
    // Tiles per matrix so that batch * tiles covers the threads about twice.
    int64_t want = ceilDiv(2 * nt, batch);
    pm = std::min<int64_t>(want, std::max<int64_t>(1, M / 32));
    pn = std::min<int64_t>(ceilDiv(want, pm), std::max<int64_t>(1, N / 64));
  }
  const int64_t mb = ceilDiv(ceilDiv(M, pm), 8) * 8;
  const int64_t nb = ceilDiv(ceilDiv(N, pn), 16) * 16;
  const int64_t tm = ceilDiv(M, mb), tn = ceilDiv(N, nb);
  const int64_t tasks = batch * tm * tn;
  auto runTask = [&](int64_t t) {
    int64_t b = t / (tm * tn), rem = t % (tm * tn);
    int64_t m0 = (rem / tn) * mb, n0 = (rem % tn) * nb;
    int64_t m1 = std::min(M, m0 + mb), n1 = std::min(N, n0 + nb);
    const float *a = A + b * strideA + (tA ? m0 : m0 * lda);
    const float *bb = B + b * strideB + (tB ? n0 * ldb : n0);
    float *c = C + b * strideC + m0 * ldc + n0;
    pre(b, m0, m1, n0, n1);
    cblas_sgemm(CblasRowMajor, ta, tb, int(m1 - m0), int(n1 - n0), int(K),
                alpha, a, int(lda), bb, int(ldb), beta, c, int(ldc));
  };
  if (tasks == 1 || nt == 1 || flops < 4e6) {
    for (int64_t t = 0; t < tasks; ++t)
      runTask(t);
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t t = 0; t < tasks; ++t)
    runTask(t);
}

} // namespace

void linear(const float *x, const float *w, const float *bias, float *out,
            int64_t M, int64_t K, int64_t N, bool transW) {
  const int64_t ldw = transW ? K : N;
  if (bias) {
    auto pre = [&](int64_t, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
      for (int64_t m = m0; m < m1; ++m)
        std::memcpy(out + m * N + n0, bias + n0, size_t(n1 - n0) * 4);
    };
    gemmTiled(1, false, transW, M, N, K, 1.0f, x, K, 0, w, ldw, 0, 1.0f, out,
              N, 0, pre);
  } else {
    gemmTiled(1, false, transW, M, N, K, 1.0f, x, K, 0, w, ldw, 0, 0.0f, out,
              N, 0);
  }
}

void linearGradInput(const float *dy, const float *w, float *dx, int64_t M,
                     int64_t K, int64_t N, bool transW) {
  // dx[M,K] = dy[M,N] @ W^T; W^T is w^T for w[K,N], or w itself for w[N,K].
  if (transW)
    gemmTiled(1, false, false, M, K, N, 1.0f, dy, N, 0, w, K, 0, 0.0f, dx, K,
              0);
  else
    gemmTiled(1, false, true, M, K, N, 1.0f, dy, N, 0, w, N, 0, 0.0f, dx, K,
              0);
}

void linearGradWeight(const float *x, const float *dy, float *dw, int64_t M,
                      int64_t K, int64_t N, bool transW) {
  if (transW) // dw[N,K] = dy^T[N,M] @ x[M,K]
    gemmTiled(1, true, false, N, K, M, 1.0f, dy, N, 0, x, K, 0, 0.0f, dw, K,
              0);
  else // dw[K,N] = x^T[K,M] @ dy[M,N]
    gemmTiled(1, true, false, K, N, M, 1.0f, x, K, 0, dy, N, 0, 0.0f, dw, N,
              0);
}

void batchMatmul(const float *a, const float *b, float *out, int64_t batch,
                 int64_t M, int64_t N, int64_t K, bool transA, bool transB,
                 float alpha) {
  const int64_t lda = transA ? M : K, ldb = transB ? K : N;
  gemmTiled(batch, transA, transB, M, N, K, alpha, a, lda, M * K, b, ldb,
            K * N, 0.0f, out, N, M * N);
}

//===----------------------------------------------------------------------===//
// Elementwise and data movement
//===----------------------------------------------------------------------===//

void fillF32(float *out, int64_t n, float v) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = v;
}

void fillI32(int32_t *out, int64_t n, int32_t v) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = v;
}

void iota(int32_t *out, int64_t n, int64_t start, int64_t step) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = int32_t(start + i * step);
}

void copyBytes(void *out, const void *in, size_t bytes) {
  if (out == in || bytes == 0)
    return;
  const size_t chunk = 1 << 20;
  const int64_t chunks = int64_t((bytes + chunk - 1) / chunk);
  char *o = static_cast<char *>(out);
  const char *s = static_cast<const char *>(in);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    size_t b = size_t(c) * chunk;
    std::memmove(o + b, s + b, std::min(chunk, bytes - b));
  }
}

/// Every id indexes a row of a [V, C] table.
static void checkIds(const char *op, const int32_t *ids, int64_t rows,
                     int64_t V) {
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] < 0 || ids[r] >= V)
      throw Error(std::string(op) + ": token id " + std::to_string(ids[r]) +
                  " out of range [0," + std::to_string(V) + ")");
}

void embedding(const float *table, const int32_t *ids, float *out,
               int64_t rows, int64_t V, int64_t C) {
  checkIds("embedding", ids, rows, V);
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out + r * C, table + int64_t(ids[r]) * C, size_t(C) * 4);
}

void embeddingGrad(const int32_t *ids, const float *dy, float *dtable,
                   int64_t rows, int64_t V, int64_t C) {
  checkIds("embedding_grad", ids, rows, V);
  fillF32(dtable, V * C, 0.0f);
  // Each thread owns a column slice of the table: no races, and every
  // element sums its rows in token order whatever the thread count.
  const int64_t cb = 64;
  const int64_t slices = ceilDiv(C, cb);
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * cb, c1 = std::min(C, c0 + cb);
    for (int64_t r = 0; r < rows; ++r) {
      float *dst = dtable + int64_t(ids[r]) * C;
      const float *src = dy + r * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  }
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

namespace {

/// Offset in b of a's row r (row = all merged dims but the last).
inline int64_t bRowOffset(const MergedDims &m, int64_t r) {
  int64_t off = 0;
  for (size_t i = m.len.size() - 1; i-- > 0;) {
    int64_t idx = r % m.len[i];
    r /= m.len[i];
    off += idx * m.bStride[i];
  }
  return off;
}

} // namespace

void addBroadcast(const float *a, const float *b, float *out,
                  const std::vector<int64_t> &aShape,
                  const std::vector<int64_t> &bShape) {
  MergedDims m = mergeBroadcastDims(aShape, bShape);
  const int64_t L = m.len.back(), rows = m.rows();
  const bool lastFull = m.full.back();
  const int64_t chunk = 16384;
  const int64_t perRow = ceilDiv(L, chunk), tasks = rows * perRow;
#pragma omp parallel for schedule(static) if (rows * L > (1 << 15))
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t r = t / perRow, j0 = (t % perRow) * chunk;
    int64_t j1 = std::min(L, j0 + chunk);
    const float *ar = a + r * L;
    float *o = out + r * L;
    const float *br = b + bRowOffset(m, r);
    if (lastFull) {
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j)
        o[j] = ar[j] + br[j];
    } else {
      const float s = br[0];
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j)
        o[j] = ar[j] + s;
    }
  }
}

void reduceTo(const float *x, float *out, const std::vector<int64_t> &aShape,
              const std::vector<int64_t> &bShape) {
  MergedDims m = mergeBroadcastDims(aShape, bShape);
  const size_t k = m.len.size();
  const int64_t L = m.len.back();
  const bool lastFull = m.full.back();
  // Row strides of x over the merged dims but the last.
  std::vector<int64_t> xStride(k, 0);
  {
    int64_t s = L;
    for (size_t i = k - 1; i-- > 0;) {
      xStride[i] = s;
      s *= m.len[i];
    }
  }
  // Outer dims (all but last) split into full (output) and bcast (summed).
  std::vector<size_t> fullDims, bcastDims;
  for (size_t i = 0; i + 1 < k; ++i)
    (m.full[i] ? fullDims : bcastDims).push_back(i);
  int64_t outRows = 1, sumRows = 1;
  for (size_t i : fullDims)
    outRows *= m.len[i];
  for (size_t i : bcastDims)
    sumRows *= m.len[i];
  auto xRowOffset = [&](int64_t o, int64_t q) {
    int64_t off = 0;
    for (size_t j = fullDims.size(); j-- > 0;) {
      size_t d = fullDims[j];
      off += (o % m.len[d]) * xStride[d];
      o /= m.len[d];
    }
    for (size_t j = bcastDims.size(); j-- > 0;) {
      size_t d = bcastDims[j];
      off += (q % m.len[d]) * xStride[d];
      q /= m.len[d];
    }
    return off;
  };
  const bool par = outRows * sumRows * L > (1 << 15);
  if (lastFull) {
    // out is [outRows, L]; each task owns a column slice of one out row and
    // sums x rows in a fixed order.
    const int64_t cb = 64, slices = ceilDiv(L, cb), tasks = outRows * slices;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t o = t / slices, c0 = (t % slices) * cb,
              c1 = std::min(L, c0 + cb);
      float *dst = out + o * L;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] = 0.0f;
      for (int64_t q = 0; q < sumRows; ++q) {
        const float *src = x + xRowOffset(o, q);
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c)
          dst[c] += src[c];
      }
    }
  } else {
    // The innermost run is broadcast: each out element sums contiguous runs.
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outRows; ++o) {
      double acc = 0.0;
      for (int64_t q = 0; q < sumRows; ++q) {
        const float *src = x + xRowOffset(o, q);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < L; ++c)
          s += src[c];
        acc += s;
      }
      out[o] = float(acc);
    }
  }
}

//===----------------------------------------------------------------------===//
// LayerNorm
//===----------------------------------------------------------------------===//

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
} // namespace

namespace {
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
} // namespace

void layerNorm(const float *x, const float *gamma, const float *beta,
               float *y, int64_t rows, int64_t C, float eps, float *rstdOut) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float rstd = layerNormRow(x + r * C, gamma, beta, y + r * C, C, eps);
    if (rstdOut)
      rstdOut[r] = rstd;
  }
}

namespace {

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
      // A second pass over the row (in L1), not one expression: the
      // compiler would contract it into an FMA, and the sum must round like
      // the separate dsc.add of the unfused step.
      if (dres) {
        const float *dr = dres + r * C;
#pragma omp simd
        for (int64_t c = 0; c < C; ++c)
          dxr[c] += dr[c];
      }
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

/// Rows of [rows, N] in blocks of 32 (in parallel); `row(r, acc)` handles
/// row r and adds its column-sum contribution (a bias or norm-weight
/// gradient) into `acc` ([N]); the block sums are merged into `db` in block
/// order, so the result does not depend on the thread count.
template <typename RowFn>
void rowsWithColumnSum(int64_t rows, int64_t N, float *db, RowFn row) {
  const int64_t RB = 32, blocks = std::max<int64_t>(1, ceilDiv(rows, RB));
  std::vector<float> part(size_t(blocks * N), 0.0f);
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
  for (int64_t blk = 0; blk < blocks; ++blk) {
    float *acc = part.data() + blk * N;
    for (int64_t r = blk * RB, r1 = std::min(rows, r + RB); r < r1; ++r)
      row(r, acc);
  }
  fillF32(db, N, 0.0f);
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const float *acc = part.data() + blk * N;
#pragma omp simd
    for (int64_t c = 0; c < N; ++c)
      db[c] += acc[c];
  }
}

inline float rmsRstd(const float *x, int64_t C, float eps) {
  float q = 0.0f;
#pragma omp simd reduction(+ : q)
  for (int64_t c = 0; c < C; ++c)
    q += x[c] * x[c];
  return 1.0f / std::sqrt(q / float(C) + eps);
}

} // namespace

void rmsNorm(const float *x, const float *w, float *y, int64_t rows,
             int64_t C, float eps) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * C;
    float *yr = y + r * C;
    const float rstd = rmsRstd(xr, C, eps);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      yr[c] = (xr[c] * rstd) * w[c];
  }
}

void rmsNormGrad(const float *dy, const float *x, const float *w, float *dx,
                 float *dw, int64_t rows, int64_t C, float eps) {
  rowsWithColumnSum(rows, C, dw, [&](int64_t r, float *acc) {
    const float *xr = x + r * C, *dyr = dy + r * C;
    float *dxr = dx + r * C;
    const float rstd = rmsRstd(xr, C, eps);
    float sgx = 0.0f;
#pragma omp simd reduction(+ : sgx)
    for (int64_t c = 0; c < C; ++c) {
      const float xh = xr[c] * rstd;
      sgx += dyr[c] * w[c] * xh;
      acc[c] += dyr[c] * xh;
    }
    const float mgx = sgx / float(C);
#pragma omp simd
    for (int64_t c = 0; c < C; ++c)
      dxr[c] = rstd * (dyr[c] * w[c] - xr[c] * rstd * mgx);
  });
}

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

//===----------------------------------------------------------------------===//
// Philox in batches
//===----------------------------------------------------------------------===//

#ifdef __AVX2__
namespace {

/// (hi, lo) 32-bit halves of the 64-bit products m * x for 8 lanes.
inline void mulHiLo(__m256i x, __m256i m, __m256i &hi, __m256i &lo) {
  __m256i even = _mm256_mul_epu32(x, m);
  __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(x, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/// Philox4x32-10 of the 8 counters {c0 + l, c1, c2, c3}, l = 0..7; the same
/// rounds as philox4x32_10, eight blocks per instruction.
void philox8(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
             std::array<uint32_t, 2> key, uint32_t *out) {
  const __m256i m0 = _mm256_set1_epi32(int(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(int(0xCD9E8D57u));
  __m256i x0 = _mm256_add_epi32(_mm256_set1_epi32(int(c0)),
                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  __m256i x1 = _mm256_set1_epi32(int(c1)), x2 = _mm256_set1_epi32(int(c2)),
          x3 = _mm256_set1_epi32(int(c3));
  uint32_t k0 = key[0], k1 = key[1];
  for (int round = 0; round < 10; ++round) {
    __m256i hi0, lo0, hi1, lo1;
    mulHiLo(x0, m0, hi0, lo0);
    mulHiLo(x2, m1, hi1, lo1);
    __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(hi1, x1),
                                  _mm256_set1_epi32(int(k0)));
    __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(hi0, x3),
                                  _mm256_set1_epi32(int(k1)));
    x0 = n0;
    x1 = lo1;
    x2 = n2;
    x3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  alignas(32) uint32_t lanes[4][8];
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[0]), x0);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[1]), x1);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[2]), x2);
  _mm256_store_si256(reinterpret_cast<__m256i *>(lanes[3]), x3);
  for (int l = 0; l < 8; ++l)
    for (int k = 0; k < 4; ++k)
      out[4 * l + k] = lanes[k][l];
}

} // namespace
#endif

void philoxBlocks(uint32_t firstBlock, int64_t count, uint32_t stream,
                  uint64_t seed, uint64_t offset, uint32_t *out) {
  const auto key = philoxKey(seed);
  const uint32_t lo = uint32_t(offset), hi = uint32_t(offset >> 32);
  int64_t b = 0;
#ifdef __AVX2__
  for (; b + 8 <= count; b += 8)
    philox8(firstBlock + uint32_t(b), stream, lo, hi, key, out + 4 * b);
#endif
  for (; b < count; ++b) {
    PhiloxBlock bits =
        philox4x32_10({firstBlock + uint32_t(b), stream, lo, hi}, key);
    std::copy(bits.begin(), bits.end(), out + 4 * b);
  }
}

//===----------------------------------------------------------------------===//
// GELU
//===----------------------------------------------------------------------===//

namespace {

/// GELU and its derivative at v. Shared by the plain and the fused kernels
/// so both compute bit-identical values; the approximation is a template
/// parameter so the loops that call them vectorise.
template <bool Tanh> inline float geluAt(float v) {
  if constexpr (Tanh) {
    // 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation near u << 0.
    float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    return v * (1.0f / (1.0f + expApprox(-2.0f * u)));
  } else {
    return 0.5f * v * (1.0f + erfApprox(v * kInvSqrt2));
  }
}

template <bool Tanh> inline float geluDerivativeAt(float v) {
  if constexpr (Tanh) {
    float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    float s = 1.0f / (1.0f + expApprox(-2.0f * u)); // 0.5 (1 + tanh u)
    // d/dx [x s(2u)] = s + x * 2 s (1 - s) u'
    return s + v * 2.0f * s * (1.0f - s) * du;
  } else {
    float cdf = 0.5f * (1.0f + erfApprox(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expApprox(-0.5f * v * v);
    return cdf + v * pdf;
  }
}

/// Calls `body(std::bool_constant<Tanh>)` with the approximation as a
/// compile-time constant.
template <typename Body> inline void withGelu(bool tanhApprox, Body body) {
  if (tanhApprox)
    body(std::true_type());
  else
    body(std::false_type());
}

/// Calls `f(i, keep)` for i in [i0, i1) with the Philox dropout decision of
/// element i (keep is always true for rate 0): the mask of dsc.dropout.
/// The bits come from philoxBlocks in chunks, so the Philox rounds run eight
/// blocks at a time, and the decision is an integer compare so the loop over
/// a chunk vectorises: philoxUniform(x) = (x >> 8) * 2^-24 >= rate exactly
/// when the integer x >> 8 >= ceil(rate * 2^24) (rate as a float, scaled by
/// a power of two: exact).
template <typename F>
inline void forDropoutMask(int64_t i0, int64_t i1, double rate,
                           uint32_t stream, uint64_t seed, uint64_t offset,
                           F f) {
  if (rate <= 0.0) {
    for (int64_t i = i0; i < i1; ++i)
      f(i, true);
    return;
  }
  const uint32_t threshold =
      uint32_t(std::ceil(double(float(rate)) * 16777216.0));
  constexpr int64_t kChunkBlocks = 64;
  uint32_t bits[4 * kChunkBlocks];
  for (int64_t q0 = i0 / 4; q0 * 4 < i1; q0 += kChunkBlocks) {
    const int64_t blocks = std::min<int64_t>(kChunkBlocks, ceilDiv(i1, 4) - q0);
    philoxBlocks(uint32_t(q0), blocks, stream, seed, offset, bits);
    const int64_t lo = std::max(i0, q0 * 4),
                  hi = std::min(i1, (q0 + blocks) * 4), first = q0 * 4;
#pragma omp simd
    for (int64_t i = lo; i < hi; ++i)
      f(i, (bits[i - first] >> 8) >= threshold);
  }
}

} // namespace

void gelu(const float *x, float *y, int64_t n, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
    for (int64_t i = 0; i < n; ++i)
      y[i] = geluAt<tanh()>(x[i]);
  });
}

void geluGrad(const float *dy, const float *x, float *dx, int64_t n,
              bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dy[i] * geluDerivativeAt<tanh()>(x[i]);
  });
}

void biasGelu(const float *x, const float *b, float *y, int64_t rows,
              int64_t N, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * N;
      float *yr = y + r * N;
#pragma omp simd
      for (int64_t c = 0; c < N; ++c)
        yr[c] = geluAt<tanh()>(xr[c] + b[c]);
    }
  });
}

void biasGeluGrad(const float *dy, const float *x, const float *b, float *dx,
                  float *db, int64_t rows, int64_t N, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
    rowsWithColumnSum(rows, N, db, [&](int64_t r, float *acc) {
      const float *dyr = dy + r * N, *xr = x + r * N;
      float *dxr = dx + r * N;
#pragma omp simd
      for (int64_t c = 0; c < N; ++c) {
        float g = dyr[c] * geluDerivativeAt<tanh()>(xr[c] + b[c]);
        dxr[c] = g;
        acc[c] += g;
      }
    });
  });
}

namespace {
/// Row r of dsc.bias_dropout_add: y = res + dropout(x + b).
inline void biasDropoutAddRow(const float *x, const float *b, const float *res,
                              float *y, int64_t r, int64_t N, double rate,
                              uint32_t stream, uint64_t seed,
                              uint64_t offset) {
  const float scale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  forDropoutMask(r * N, (r + 1) * N, rate, stream, seed, offset,
                 [&, row = r * N](int64_t i, bool keep) {
                   float v = x[i] + b[i - row];
                   y[i] = res[i] + (keep ? (rate > 0.0 ? v * scale : v)
                                         : 0.0f);
                 });
}
} // namespace

void biasDropoutAdd(const float *x, const float *b, const float *res,
                    float *y, int64_t rows, int64_t N, double rate,
                    uint32_t stream, uint64_t seed, uint64_t offset) {
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
  for (int64_t r = 0; r < rows; ++r)
    biasDropoutAddRow(x, b, res, y, r, N, rate, stream, seed, offset);
}

void dropoutBiasGrad(const float *dy, float *dx, float *db, int64_t rows,
                     int64_t N, double rate, uint32_t stream, uint64_t seed,
                     uint64_t offset) {
  const float scale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  rowsWithColumnSum(rows, N, db, [&](int64_t r, float *acc) {
    forDropoutMask(r * N, (r + 1) * N, rate, stream, seed, offset,
                   [&](int64_t i, bool keep) {
                     float g = keep ? (rate > 0.0 ? dy[i] * scale : dy[i])
                                    : 0.0f;
                     dx[i] = g;
                     acc[i - r * N] += g;
                   });
  });
}

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

//===----------------------------------------------------------------------===//
// Softmax
//===----------------------------------------------------------------------===//

namespace {

/// Keys a causal row may attend to: j <= i + (Tk - Tq) for query i.
inline int64_t validKeys(int64_t r, int64_t Tq, int64_t Tk, bool causal) {
  return causal ? std::clamp<int64_t>(r % Tq + (Tk - Tq) + 1, 0, Tk) : Tk;
}

/// One row of dsc.softmax: masked keys (j >= valid) get exactly 0, and a
/// fully masked row (only possible when Tq > Tk) is all zeros.
inline void softmaxRow(const float *xr, float *yr, int64_t valid, int64_t Tk,
                       float scale) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t j = 0; j < valid; ++j)
    mx = std::max(mx, scale * xr[j]);
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int64_t j = 0; j < valid; ++j) {
    float e = expApprox(scale * xr[j] - mx);
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

} // namespace

void softmax(const float *x, float *y, int64_t rows, int64_t Tq, int64_t Tk,
             float scale, bool causal) {
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    softmaxRow(x + r * Tk, y + r * Tk, validKeys(r, Tq, Tk, causal), Tk,
               scale);
}

void softmaxGrad(const float *dy, const float *y, float *dx, int64_t rows,
                 int64_t Tk, float scale) {
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r)
    softmaxGradRow(dy + r * Tk, y + r * Tk, dx + r * Tk, Tk, scale);
}

void softmaxDropout(const float *x, float *dropped, float *probs,
                    int64_t rows, int64_t Tq, int64_t Tk, float scale,
                    bool causal, double rate, uint32_t stream, uint64_t seed,
                    uint64_t offset) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
#pragma omp parallel for schedule(static) if (rows * Tk > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    float *pr = probs + r * Tk;
    softmaxRow(x + r * Tk, pr, validKeys(r, Tq, Tk, causal), Tk, scale);
    forDropoutMask(r * Tk, (r + 1) * Tk, rate, stream, seed, offset,
                   [&](int64_t i, bool keep) {
                     float p = probs[i];
                     dropped[i] = keep ? (rate > 0.0 ? p * keepScale : p)
                                       : 0.0f;
                   });
  }
}

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

namespace {

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

/// Last key tile start a query tile ending at row i1 - 1 needs.
inline int64_t attnKeyEnd(int64_t i1, int64_t T, bool causal) {
  return causal ? i1 : T;
}

} // namespace

void attention(const float *q, const float *k, const float *v, float *out,
               float *lse, int64_t BH, int64_t T, int64_t D, float scale,
               bool causal, double rate, uint32_t stream, uint64_t seed,
               uint64_t offset) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  const int64_t tiles = ceilDiv(T, kAttnTile);
#pragma omp parallel
  {
    std::vector<float> S(size_t(kAttnTile * kAttnTile)), m(kAttnTile),
        l(kAttnTile);
#pragma omp for schedule(dynamic)
    for (int64_t task = 0; task < BH * tiles; ++task) {
      const int64_t bh = task / tiles, i0 = (task % tiles) * kAttnTile;
      const int64_t br = std::min(kAttnTile, T - i0);
      const float *qb = q + (bh * T + i0) * D, *kb = k + bh * T * D,
                  *vb = v + bh * T * D;
      float *acc = out + (bh * T + i0) * D; // accumulated in place
      fillF32(acc, br * D, 0.0f);
      std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.end(), 0.0f);
      for (int64_t j0 = 0; j0 < attnKeyEnd(i0 + br, T, causal);
           j0 += kAttnTile) {
        const int64_t bc = std::min(kAttnTile, T - j0);
        gemm(false, true, br, bc, D, scale, qb, D, kb + j0 * D, D, 0.0f,
             S.data(), bc);
        for (int64_t r = 0; r < br; ++r) {
          const int64_t i = i0 + r, n = attnValid(i, j0, bc, causal);
          float *sr = S.data() + r * bc;
          float mx = m[r];
#pragma omp simd reduction(max : mx)
          for (int64_t j = 0; j < n; ++j)
            mx = std::max(mx, sr[j]);
          const float corr = expApprox(m[r] - mx);
          float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
          for (int64_t j = 0; j < n; ++j) {
            sr[j] = expApprox(sr[j] - mx);
            sum += sr[j];
          }
          for (int64_t j = n; j < bc; ++j)
            sr[j] = 0.0f;
          m[r] = mx;
          l[r] = l[r] * corr + sum;
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
        const float inv = keepScale / l[r];
        float *ar = acc + r * D;
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          ar[d] *= inv;
        lse[bh * T + i0 + r] = m[r] + std::log(l[r]);
      }
    }
  }
}

void attentionGrad(const float *dout, const float *q, const float *k,
                   const float *v, const float *out, const float *lse,
                   float *dq, float *dk, float *dv, int64_t BH, int64_t T,
                   int64_t D, float scale, bool causal, double rate,
                   uint32_t stream, uint64_t seed, uint64_t offset) {
  const float keepScale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
#pragma omp parallel
  {
    const size_t tile = size_t(kAttnTile * kAttnTile);
    std::vector<float> P(tile), dP(tile), rowDot(static_cast<size_t>(T));
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < BH; ++bh) {
      const int64_t base = bh * T * D;
      const float *qb = q + base, *kb = k + base, *vb = v + base,
                  *gb = dout + base, *ob = out + base, *lb = lse + bh * T;
      float *dqb = dq + base, *dkb = dk + base, *dvb = dv + base;
      // D_i = rowsum(dout * out) = rowsum(dP * P) of the softmax backward.
      for (int64_t i = 0; i < T; ++i) {
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < D; ++d)
          dot += gb[i * D + d] * ob[i * D + d];
        rowDot[size_t(i)] = dot;
      }
      fillF32(dqb, T * D, 0.0f);
      fillF32(dkb, T * D, 0.0f);
      fillF32(dvb, T * D, 0.0f);
      for (int64_t j0 = 0; j0 < T; j0 += kAttnTile) {
        const int64_t bc = std::min(kAttnTile, T - j0);
        // Causal: query tiles that end before key j0 see none of its keys.
        for (int64_t i0 = causal ? j0 : 0; i0 < T;
             i0 += kAttnTile) {
          const int64_t br = std::min(kAttnTile, T - i0);
          // P = exp(scale * q k^T - lse) (0 where masked); dP = dout v^T.
          gemm(false, true, br, bc, D, scale, qb + i0 * D, D, kb + j0 * D, D,
               0.0f, P.data(), bc);
          gemm(false, true, br, bc, D, 1.0f, gb + i0 * D, D, vb + j0 * D, D,
               0.0f, dP.data(), bc);
          for (int64_t r = 0; r < br; ++r) {
            const int64_t i = i0 + r, n = attnValid(i, j0, bc, causal);
            float *pr = P.data() + r * bc, *dpr = dP.data() + r * bc;
            const float li = lb[i], di = rowDot[size_t(i)];
#pragma omp simd
            for (int64_t j = 0; j < n; ++j)
              pr[j] = expApprox(pr[j] - li);
            for (int64_t j = n; j < bc; ++j)
              pr[j] = 0.0f;
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
          gemm(true, false, bc, D, br, 1.0f, P.data(), bc, gb + i0 * D, D,
               1.0f, dvb + j0 * D, D);
          gemm(false, false, br, D, bc, scale, dP.data(), bc, kb + j0 * D, D,
               1.0f, dqb + i0 * D, D);
          gemm(true, false, bc, D, br, scale, dP.data(), bc, qb + i0 * D, D,
               1.0f, dkb + j0 * D, D);
        }
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

void dropout(const float *x, float *y, int64_t n, double rate, uint32_t stream,
             uint64_t seed, uint64_t offset) {
  if (rate <= 0.0) {
    copyBytes(y, x, size_t(n) * 4);
    return;
  }
  if (rate >= 1.0) {
    fillF32(y, n, 0.0f);
    return;
  }
  const float s = float(1.0 / (1.0 - rate));
  constexpr int64_t kChunk = 1024; // elements per task, a multiple of 4
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t c = 0; c < ceilDiv(n, kChunk); ++c)
    forDropoutMask(c * kChunk, std::min(n, (c + 1) * kChunk), rate, stream,
                   seed, offset, [&](int64_t i, bool keep) {
                     y[i] = keep ? x[i] * s : 0.0f;
                   });
}

void mlmMask(const int32_t *ids, int32_t *inputs, int32_t *labels, int64_t n,
             double maskProb, int32_t maskToken, int64_t vocab,
             uint32_t stream, uint64_t seed, uint64_t offset) {
  const auto key = philoxKey(seed);
  const uint32_t lo = uint32_t(offset), hi = uint32_t(offset >> 32);
  const float p = float(maskProb);
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10({uint32_t(i), stream, lo, hi}, key);
    const int32_t id = ids[i];
    if (philoxUniform(b[0]) < p) {
      labels[i] = id;
      float u = philoxUniform(b[1]);
      if (u < 0.8f)
        inputs[i] = maskToken;
      else if (u < 0.9f)
        inputs[i] = int32_t(b[2] % uint32_t(vocab));
      else
        inputs[i] = id;
    } else {
      labels[i] = -100;
      inputs[i] = id;
    }
  }
}

//===----------------------------------------------------------------------===//
// Heads
//===----------------------------------------------------------------------===//

void splitHeads(const float *x, const float *bias,
                const std::vector<float *> &outs, int64_t B, int64_t T,
                int64_t H, int64_t D) {
  const int64_t P = int64_t(outs.size()), W = P * H * D;
#pragma omp parallel for schedule(static) if (B * T * W > (1 << 15))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    const float *src = x + bt * W;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t h = 0; h < H; ++h) {
        float *dst = outs[size_t(p)] + ((b * H + h) * T + t) * D;
        const int64_t col = (p * H + h) * D;
        if (!bias) {
          std::memcpy(dst, src + col, size_t(D) * 4);
          continue;
        }
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          dst[d] = src[col + d] + bias[col + d];
      }
  }
}

void mergeHeads(const std::vector<const float *> &ins, float *out, int64_t B,
                int64_t T, int64_t H, int64_t D) {
  const int64_t P = int64_t(ins.size()), W = P * H * D;
#pragma omp parallel for schedule(static) if (B * T * W > (1 << 15))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    float *dst = out + bt * W;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(dst + (p * H + h) * D,
                    ins[size_t(p)] + ((b * H + h) * T + t) * D, size_t(D) * 4);
  }
}

namespace {

/// Visits the runs a tensor viewed as [outer, sum(widths), inner] shares
/// with its pieces [outer, widths[i], inner]: `copy(wholeOffset,
/// pieceOffset, i, count)` in floats. Concat gathers, split scatters.
template <typename CopyFn>
void forEachPieceRun(const std::vector<int64_t> &widths, int64_t outer,
                     int64_t inner, CopyFn copy) {
  int64_t total = 0;
  for (int64_t w : widths)
    total += w;
#pragma omp parallel for schedule(static) if (outer * total * inner > (1 << 15))
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      copy((o * total + at) * inner, o * widths[i] * inner, i,
           widths[i] * inner);
      at += widths[i];
    }
  }
}

} // namespace

void concat(const std::vector<const float *> &ins,
            const std::vector<int64_t> &widths, float *out, int64_t outer,
            int64_t inner) {
  forEachPieceRun(widths, outer, inner,
                  [&](int64_t whole, int64_t piece, size_t i, int64_t n) {
                    std::memcpy(out + whole, ins[i] + piece, size_t(n) * 4);
                  });
}

void split(const float *in, const std::vector<float *> &outs,
           const std::vector<int64_t> &widths, int64_t outer, int64_t inner) {
  forEachPieceRun(widths, outer, inner,
                  [&](int64_t whole, int64_t piece, size_t i, int64_t n) {
                    std::memcpy(outs[i] + piece, in + whole, size_t(n) * 4);
                  });
}

//===----------------------------------------------------------------------===//
// Cross entropy
//===----------------------------------------------------------------------===//

namespace {
void checkLabels(const int32_t *labels, int64_t rows, int64_t V,
                 int64_t ignoreIndex, const char *op, int64_t &count) {
  count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    if (labels[r] < 0 || labels[r] >= V)
      throw Error(std::string(op) + ": label " + std::to_string(labels[r]) +
                  " at position " + std::to_string(r) + " out of range [0," +
                  std::to_string(V) + ") and not ignore_index " +
                  std::to_string(ignoreIndex));
    ++count;
  }
}

/// log(sum(exp(row))) with the row max; two passes over a cache-hot row.
inline void rowLogSumExp(const float *z, int64_t V, float &mx, float &sum) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < V; ++j)
    m = std::max(m, z[j]);
  float s = 0.0f;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < V; ++j)
    s += expApprox(z[j] - m);
  mx = m;
  sum = s;
}
} // namespace

float crossEntropy(const float *logits, const int32_t *labels, int64_t rows,
                   int64_t V, int64_t ignoreIndex) {
  int64_t count;
  checkLabels(labels, rows, V, ignoreIndex, "cross_entropy", count);
  if (count == 0)
    return 0.0f;
  std::vector<double> loss(size_t(rows), 0.0);
#pragma omp parallel for schedule(static) if (rows * V > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    const float *z = logits + r * V;
    float mx, sum;
    rowLogSumExp(z, V, mx, sum);
    loss[size_t(r)] = double(mx) + std::log(double(sum)) - double(z[labels[r]]);
  }
  double total = 0.0;
  for (double l : loss)
    total += l;
  return float(total / double(count));
}

void crossEntropyGrad(float dloss, const float *logits, const int32_t *labels,
                      float *dlogits, int64_t rows, int64_t V,
                      int64_t ignoreIndex) {
  int64_t count;
  checkLabels(labels, rows, V, ignoreIndex, "cross_entropy_grad", count);
  const float k = count > 0 ? dloss / float(count) : 0.0f;
#pragma omp parallel for schedule(static) if (rows * V > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * V;
    float *d = dlogits + r * V;
    if (labels[r] == ignoreIndex) {
      std::memset(d, 0, size_t(V) * 4);
      continue;
    }
    float mx, sum;
    rowLogSumExp(z, V, mx, sum);
    const float f = k / sum;
#pragma omp simd
    for (int64_t j = 0; j < V; ++j)
      d[j] = f * expApprox(z[j] - mx);
    d[labels[r]] -= k;
  }
}

//===----------------------------------------------------------------------===//
// Training step
//===----------------------------------------------------------------------===//

double sumSquares(const float *x, int64_t n) {
  // Fixed-size chunks summed in order: independent of the thread count.
  const int64_t cb = 1 << 14, chunks = ceilDiv(n, cb);
  std::vector<double> part(size_t(std::max<int64_t>(chunks, 1)), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * cb, i1 = std::min(n, i0 + cb);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (int64_t i = i0; i < i1; ++i)
      s += double(x[i]) * double(x[i]);
    part[size_t(c)] = s;
  }
  double total = 0.0;
  for (double s : part)
    total += s;
  return total;
}

float clipCoefficient(float norm, double maxNorm) {
  double n = double(norm) + 1e-6;
  if (maxNorm > 0.0 && n > maxNorm)
    return float(maxNorm / n);
  return 1.0f;
}

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
float lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr,
           int64_t step, float gscale, const LambParams &hp) {
  const float b1 = float(hp.beta1), b2 = float(hp.beta2), eps = float(hp.eps),
              wd = float(hp.weightDecay);
  const int64_t cb = 1 << 14, chunks = std::max<int64_t>(1, ceilDiv(n, cb));
  std::vector<double> pw(size_t(chunks), 0.0), pu(size_t(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t i0 = c * cb, i1 = std::min(n, i0 + cb);
    double sw = 0.0, su = 0.0;
#pragma omp simd reduction(+ : sw, su)
    for (int64_t i = i0; i < i1; ++i) {
      float gi = g[i] * gscale;
      float mi = b1 * m[i] + (1.0f - b1) * gi;
      float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
      m[i] = mi;
      v[i] = vi;
      float u = mi / (std::sqrt(vi) + eps) + wd * p[i];
      sw += double(p[i]) * double(p[i]);
      su += double(u) * double(u);
    }
    pw[size_t(c)] = sw;
    pu[size_t(c)] = su;
  }
  double w2 = 0.0, u2 = 0.0;
  for (int64_t c = 0; c < chunks; ++c) {
    w2 += pw[size_t(c)];
    u2 += pu[size_t(c)];
  }
  const float wn = float(std::sqrt(w2)), un = float(std::sqrt(u2));
  float coeff = 1.0f;
  if (wn != 0.0f && un != 0.0f) {
    coeff = wn / un;
    if (coeff > float(hp.maxCoeff))
      coeff = float(hp.maxCoeff);
    if (coeff < float(hp.minCoeff))
      coeff = float(hp.minCoeff);
  }
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

} // namespace dsc::rt::cpu
