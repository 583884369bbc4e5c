//===- GemmCpu.cpp - GEMM CPU kernels: OpenBLAS tiled over OpenMP ---------===//
//
// linear, linear_grad_input, linear_grad_weight and batch_matmul on
// single-threaded OpenBLAS sgemm calls, one per tile of the output, the
// tiles split over the OpenMP threads; and runGemm, their dispatch.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include <cblas.h>
#include <omp.h>

namespace dsc::rt::cpu {

namespace {

inline int numThreads() { return omp_get_max_threads(); }

//===----------------------------------------------------------------------===//
// GEMM tiling
//===----------------------------------------------------------------------===//

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

/// out[M,N] = x[M,K] @ W (+ bias[N]); W is w[K,N], or w[N,K] if transW.
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

/// dx[M,K] = dy[M,N] @ W^T.
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

/// dw = x^T @ dy ([K,N]) or dy^T @ x ([N,K] if transW).
void linearGradWeight(const float *x, const float *dy, float *dw, int64_t M,
                      int64_t K, int64_t N, bool transW) {
  if (transW) // dw[N,K] = dy^T[N,M] @ x[M,K]
    gemmTiled(1, true, false, N, K, M, 1.0f, dy, N, 0, x, K, 0, 0.0f, dw, K,
              0);
  else // dw[K,N] = x^T[K,M] @ dy[M,N]
    gemmTiled(1, true, false, K, N, M, 1.0f, x, K, 0, dy, N, 0, 0.0f, dw, N,
              0);
}

/// out[b] = alpha * op(a[b]) @ op(b[b]); op(a) is [M,K], op(b) is [K,N].
void batchMatmul(const float *a, const float *b, float *out, int64_t batch,
                 int64_t M, int64_t N, int64_t K, bool transA, bool transB,
                 float alpha) {
  const int64_t lda = transA ? M : K, ldb = transB ? K : N;
  gemmTiled(batch, transA, transB, M, N, K, alpha, a, lda, M * K, b, ldb,
            K * N, 0.0f, out, N, M * N);
}

} // namespace

void runGemm(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  switch (asFamily<GemmOpcode>(I.op)) {
  case GemmOpcode::Linear: {
    const float *bias = I.inputs.size() == 3 ? e.fin(2, "bias") : nullptr;
    const float *px = e.fin(0, "x"), *pw = e.fin(1, "weight");
    linear(px, pw, bias, e.fout(0, "output"), d.M, d.K, d.N, d.transW);
    return;
  }
  case GemmOpcode::LinearGradInput: {
    const float *pdy = e.fin(0, "dy"), *pw = e.fin(1, "weight");
    linearGradInput(pdy, pw, e.fout(0, "dx"), d.M, d.K, d.N, d.transW);
    return;
  }
  case GemmOpcode::LinearGradWeight: {
    const float *px = e.fin(0, "x"), *pdy = e.fin(1, "dy");
    linearGradWeight(px, pdy, e.fout(0, "dw"), d.M, d.K, d.N, d.transW);
    return;
  }
  case GemmOpcode::BatchMatmul: {
    const float alpha = I.has("alpha") ? float(I.getFloat("alpha")) : 1.0f;
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    batchMatmul(pa, pb, e.fout(0, "output"), d.batch, d.M, d.N, d.K, d.transA,
                d.transB, alpha);
    return;
  }
  }
  e.fail("internal: not a GEMM opcode");
}

} // namespace dsc::rt::cpu
