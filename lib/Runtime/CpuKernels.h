//===- CpuKernels.h - CPU reference kernels (private) ----------*- C++ -*-===//
//
// Plain-pointer kernels behind the CPU backend. Shapes are passed as flat
// sizes; the backend validates buffers before calling. Every kernel is
// deterministic: its result does not depend on the number of OpenMP threads.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_CPUKERNELS_H
#define DSC_LIB_RUNTIME_CPUKERNELS_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt {
struct LrScheduleAttrs; // InstrCheck.h
} // namespace dsc::rt

namespace dsc::rt::cpu {

/// Makes OpenBLAS single-threaded: GEMMs are partitioned over OpenMP threads
/// by the callers below, so the process has one thread pool, not two fighting
/// over the cores. Idempotent.
void configureBlasThreads();

// Elementwise / data movement.
void fillF32(float *out, int64_t n, float v);
void fillI32(int32_t *out, int64_t n, int32_t v);
void iota(int32_t *out, int64_t n, int64_t start, int64_t step);
void copyBytes(void *out, const void *in, size_t bytes);

/// out[r, :] = table[ids[r], :]; throws rt::Error on an id outside [0, V).
void embedding(const float *table, const int32_t *ids, float *out,
               int64_t rows, int64_t V, int64_t C);
/// dtable = 0; dtable[ids[r], :] += dy[r, :]. Throws on a bad id.
void embeddingGrad(const int32_t *ids, const float *dy, float *dtable,
                   int64_t rows, int64_t V, int64_t C);

/// out = a + broadcast(b). `aShape`/`bShape` follow numpy rules (b right
/// aligned, each dim equal or 1). out may alias a.
void addBroadcast(const float *a, const float *b, float *out,
                  const std::vector<int64_t> &aShape,
                  const std::vector<int64_t> &bShape);
/// out (shape bShape) = sum of x (shape aShape) over the broadcast dims.
void reduceTo(const float *x, float *out, const std::vector<int64_t> &aShape,
              const std::vector<int64_t> &bShape);

// GEMM-based ops (OpenBLAS sgemm, partitioned over OpenMP threads).
/// out[M,N] = x[M,K] @ W (+ bias[N]); W is w[K,N], or w[N,K] if transW.
void linear(const float *x, const float *w, const float *bias, float *out,
            int64_t M, int64_t K, int64_t N, bool transW);
/// dx[M,K] = dy[M,N] @ W^T.
void linearGradInput(const float *dy, const float *w, float *dx, int64_t M,
                     int64_t K, int64_t N, bool transW);
/// dw = x^T @ dy ([K,N]) or dy^T @ x ([N,K] if transW).
void linearGradWeight(const float *x, const float *dy, float *dw, int64_t M,
                      int64_t K, int64_t N, bool transW);
/// out[b] = alpha * op(a[b]) @ op(b[b]); op(a) is [M,K], op(b) is [K,N].
void batchMatmul(const float *a, const float *b, float *out, int64_t batch,
                 int64_t M, int64_t N, int64_t K, bool transA, bool transB,
                 float alpha);

// Normalisation and activations.
/// `rstdOut` (rows floats, or null) receives each row's 1/std.
void layerNorm(const float *x, const float *gamma, const float *beta,
               float *y, int64_t rows, int64_t C, float eps,
               float *rstdOut = nullptr);
/// `dres` (rows * C floats, or null) is added into dx: the gradient that
/// reaches the LayerNorm input along a residual connection.
void layerNormGrad(const float *dy, const float *x, const float *gamma,
                   const float *dres, float *dx, float *dgamma, float *dbeta,
                   int64_t rows, int64_t C, float eps);
/// The same gradient from the output y and the saved 1/std (the invertible
/// LayerNorm): x_hat = (y - beta) / gamma. Throws if gamma has a zero.
void layerNormGradFromOutput(const float *dy, const float *y,
                             const float *gamma, const float *beta,
                             const float *rstd, const float *dres,
                             float *dx, float *dgamma, float *dbeta,
                             int64_t rows, int64_t C);
/// RMSNorm: y = x * rstd * w with rstd = 1 / sqrt(mean(x^2) + eps).
void rmsNorm(const float *x, const float *w, float *y, int64_t rows,
             int64_t C, float eps);
/// dx = rstd * (dy*w - x_hat * mean(dy*w*x_hat)), dw = sum_rows dy*x_hat.
void rmsNormGrad(const float *dy, const float *x, const float *w, float *dx,
                 float *dw, int64_t rows, int64_t C, float eps);
void gelu(const float *x, float *y, int64_t n, bool tanhApprox);
// Fused epilogues over [rows, N] with a bias [N]; bias gradients are summed
// per 32-row block and merged in block order (thread-count independent).
void biasGelu(const float *x, const float *b, float *y, int64_t rows,
              int64_t N, bool tanhApprox);
void biasGeluGrad(const float *dy, const float *x, const float *b, float *dx,
                  float *db, int64_t rows, int64_t N, bool tanhApprox);
/// y = res + dropout(x + b), with dsc.dropout's Philox mask.
void biasDropoutAdd(const float *x, const float *b, const float *res,
                    float *y, int64_t rows, int64_t N, double rate,
                    uint32_t stream, uint64_t seed, uint64_t offset);
/// sum = biasDropoutAdd(x, b, res), y = layerNorm(sum) with each row's 1/std
/// in rstd, one pass per row (bitwise the two kernels' results).
void biasDropoutAddLayerNorm(const float *x, const float *b, const float *res,
                             const float *gamma, const float *beta, float *sum,
                             float *y, float *rstd, int64_t rows, int64_t C,
                             double rate, uint32_t stream, uint64_t seed,
                             uint64_t offset, float eps);
/// dx = dropout(dy) (same mask), db = sum of dx over rows.
void dropoutBiasGrad(const float *dy, float *dx, float *db, int64_t rows,
                     int64_t N, double rate, uint32_t stream, uint64_t seed,
                     uint64_t offset);
void geluGrad(const float *dy, const float *x, float *dx, int64_t n,
              bool tanhApprox);
/// Softmax over the last dim of x[rows, Tk], rows = batch*Tq.
void softmax(const float *x, float *y, int64_t rows, int64_t Tq, int64_t Tk,
             float scale, bool causal);
void softmaxGrad(const float *dy, const float *y, float *dx, int64_t rows,
                 int64_t Tk, float scale);
/// softmax then dropout (dsc.dropout's mask) of each row in one pass; the
/// undropped probabilities are kept for the backward.
void softmaxDropout(const float *x, float *dropped, float *probs,
                    int64_t rows, int64_t Tq, int64_t Tk, float scale,
                    bool causal, double rate, uint32_t stream, uint64_t seed,
                    uint64_t offset);
/// softmaxGrad(dropout(dy), probs) in one pass per row.
/// The mask is read off the forward's dropped output (kept where non-zero).
void softmaxDropoutGrad(const float *dy, const float *probs,
                        const float *dropped, float *dx, int64_t rows,
                        int64_t Tk, float scale, double rate);

/// dsc.attention over BH = B*H heads of [T, D]: out = dropout(softmax(scale
/// q k^T, causal)) v and lse[BH, T] of the scaled, masked scores, with
/// softmaxDropout's mask over the [BH, T, T] probabilities.
void attention(const float *q, const float *k, const float *v, float *out,
               float *lse, int64_t BH, int64_t T, int64_t D, float scale,
               bool causal, double rate, uint32_t stream, uint64_t seed,
               uint64_t offset);
/// dsc.attention_grad: dq, dk, dv from the probabilities recomputed per
/// tile from q, k and lse (FlashAttention-2's backward).
void attentionGrad(const float *dout, const float *q, const float *k,
                   const float *v, const float *out, const float *lse,
                   float *dq, float *dk, float *dv, int64_t BH, int64_t T,
                   int64_t D, float scale, bool causal, double rate,
                   uint32_t stream, uint64_t seed, uint64_t offset);

// Randomness (Philox conventions of Philox.h).
/// The Philox bits of blocks [firstBlock, firstBlock + count) of `stream`
/// (counter {block, stream, offset}, the dropout convention of Philox.h),
/// 4 per block in element order; eight blocks at a time with AVX2.
void philoxBlocks(uint32_t firstBlock, int64_t count, uint32_t stream,
                  uint64_t seed, uint64_t offset, uint32_t *out);
void dropout(const float *x, float *y, int64_t n, double rate, uint32_t stream,
             uint64_t seed, uint64_t offset);
void mlmMask(const int32_t *ids, int32_t *inputs, int32_t *labels, int64_t n,
             double maskProb, int32_t maskToken, int64_t vocab,
             uint32_t stream, uint64_t seed, uint64_t offset);

// Heads.
/// `bias` ([P*H*D], or null) is added on the way (dsc.bias_split_heads).
void splitHeads(const float *x, const float *bias,
                const std::vector<float *> &outs, int64_t B, int64_t T,
                int64_t H, int64_t D);
void mergeHeads(const std::vector<const float *> &ins, float *out, int64_t B,
                int64_t T, int64_t H, int64_t D);
/// Concatenation / split along one axis of tensors viewed as
/// [outer, width_i, inner].
void concat(const std::vector<const float *> &ins,
            const std::vector<int64_t> &widths, float *out, int64_t outer,
            int64_t inner);
void split(const float *in, const std::vector<float *> &outs,
           const std::vector<int64_t> &widths, int64_t outer, int64_t inner);

// Loss.
float crossEntropy(const float *logits, const int32_t *labels, int64_t rows,
                   int64_t V, int64_t ignoreIndex);
void crossEntropyGrad(float dloss, const float *logits, const int32_t *labels,
                      float *dlogits, int64_t rows, int64_t V,
                      int64_t ignoreIndex);

// Training step.
/// sum of squares, accumulated in double.
double sumSquares(const float *x, int64_t n);
float clipCoefficient(float norm, double maxNorm);

struct AdamParams {
  double beta1, beta2, eps, weightDecay;
  bool adamw, biasCorrection;
};
void adam(float *p, const float *g, float *m, float *v, int64_t n, float lr,
          int64_t step, float gscale, const AdamParams &hp);

struct LambParams {
  double beta1, beta2, eps, weightDecay, maxCoeff, minCoeff;
  bool biasCorrection;
};
/// Returns the trust ratio (lamb coefficient) that was applied.
float lamb(float *p, const float *g, float *m, float *v, int64_t n, float lr,
           int64_t step, float gscale, const LambParams &hp);

struct SgdParams {
  double momentum, dampening, weightDecay;
  bool nesterov;
};
void sgd(float *p, const float *g, float *buf, int64_t n, float lr,
         int64_t step, float gscale, const SgdParams &hp);

/// Learning rate of optimizer update number `step` (1-based).
double lrSchedule(const LrScheduleAttrs &p, int64_t step);

} // namespace dsc::rt::cpu

#endif // DSC_LIB_RUNTIME_CPUKERNELS_H
