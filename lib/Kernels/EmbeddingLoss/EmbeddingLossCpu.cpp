//===- EmbeddingLossCpu.cpp - Embedding, loss and MLM-mask CPU kernels ----===//
//
// embedding and embedding_grad, cross_entropy and its gradient, mlm_mask,
// and runEmbeddingLoss, their dispatch. A token id or a label outside the
// vocabulary (and not ignore_index) is an rt::Error naming the op.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include "dsc/Support/Philox.h"

#include <limits>

namespace dsc::rt::cpu {

namespace {

/// Every id indexes a row of a [V, C] table.
void checkIds(const char *op, const int32_t *ids, int64_t rows, int64_t V) {
  for (int64_t r = 0; r < rows; ++r)
    if (ids[r] < 0 || ids[r] >= V)
      throw Error(std::string(op) + ": token id " + std::to_string(ids[r]) +
                  " out of range [0," + std::to_string(V) + ")");
}

/// out[r, :] = table[ids[r] - first, :] for the ids in the table's rows
/// [first, first + V), zeros for the others (a vocabulary-parallel rank's
/// part; first = 0 and every id checked for a whole table).
void embedding(const float *table, const int32_t *ids, float *out,
               int64_t rows, int64_t V, int64_t C, int64_t first = 0) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = int64_t(ids[r]) - first;
    if (row >= 0 && row < V)
      std::memcpy(out + r * C, table + row * C, size_t(C) * 4);
    else
      std::memset(out + r * C, 0, size_t(C) * 4);
  }
}

/// dtable = 0; dtable[ids[r] - first, :] += dy[r, :] for the ids in the
/// table's rows [first, first + V) (as embedding).
void embeddingGrad(const int32_t *ids, const float *dy, float *dtable,
                   int64_t rows, int64_t V, int64_t C, int64_t first = 0) {
  fillF32(dtable, V * C, 0.0f);
  // Each thread owns a column slice of the table: no races, and every
  // element sums its rows in token order whatever the thread count.
  const int64_t cb = 64;
  const int64_t slices = ceilDiv(C, cb);
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t s = 0; s < slices; ++s) {
    const int64_t c0 = s * cb, c1 = std::min(C, c0 + cb);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t row = int64_t(ids[r]) - first;
      if (row < 0 || row >= V)
        continue;
      float *dst = dtable + row * C;
      const float *src = dy + r * C;
#pragma omp simd
      for (int64_t c = c0; c < c1; ++c)
        dst[c] += src[c];
    }
  }
}

/// BERT's masking: 80% mask token, 10% random token, 10% unchanged, from one
/// Philox block per token; unmasked labels are -100. The padding token
/// (padToken >= 0) is never masked.
void mlmMask(const int32_t *ids, int32_t *inputs, int32_t *labels, int64_t n,
             double maskProb, int32_t maskToken, int64_t vocab,
             int64_t padToken, uint32_t stream, uint64_t seed,
             uint64_t offset) {
  const auto key = philoxKey(seed);
  const uint32_t lo = uint32_t(offset), hi = uint32_t(offset >> 32);
  const float p = float(maskProb);
#pragma omp parallel for schedule(static) if (n > (1 << 14))
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10({uint32_t(i), stream, lo, hi}, key);
    const int32_t id = ids[i];
    if (philoxUniform(b[0]) < p && id != padToken) {
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
// Cross entropy
//===----------------------------------------------------------------------===//

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

/// Rows of `stride` logits whose first `classes` are the classes (the rest
/// pad the vocabulary: no probability, zero gradient).
float crossEntropy(const float *logits, const int32_t *labels, int64_t rows,
                   int64_t stride, int64_t classes, int64_t ignoreIndex) {
  int64_t count;
  checkLabels(labels, rows, classes, ignoreIndex, "cross_entropy", count);
  if (count == 0)
    return 0.0f;
  std::vector<double> loss(size_t(rows), 0.0);
#pragma omp parallel for schedule(static) if (rows * classes > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    if (labels[r] == ignoreIndex)
      continue;
    const float *z = logits + r * stride;
    float mx, sum;
    rowLogSumExp(z, classes, mx, sum);
    loss[size_t(r)] = double(mx) + std::log(double(sum)) - double(z[labels[r]]);
  }
  double total = 0.0;
  for (double l : loss)
    total += l;
  return float(total / double(count));
}

void crossEntropyGrad(float dloss, const float *logits, const int32_t *labels,
                      float *dlogits, int64_t rows, int64_t stride,
                      int64_t classes, int64_t ignoreIndex) {
  int64_t count;
  checkLabels(labels, rows, classes, ignoreIndex, "cross_entropy_grad", count);
  const float k = count > 0 ? dloss / float(count) : 0.0f;
#pragma omp parallel for schedule(static) if (rows * classes > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * stride;
    float *d = dlogits + r * stride;
    if (labels[r] == ignoreIndex) {
      std::memset(d, 0, size_t(stride) * 4);
      continue;
    }
    float mx, sum;
    rowLogSumExp(z, classes, mx, sum);
    const float f = k / sum;
#pragma omp simd
    for (int64_t j = 0; j < classes; ++j)
      d[j] = f * expApprox(z[j] - mx);
    d[labels[r]] -= k;
    std::memset(d + classes, 0, size_t(stride - classes) * 4);
  }
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel (each rank holds Vl rows or logit columns from
// offset = rank * Vl; those from `vocab` on are padding)
//===----------------------------------------------------------------------===//

/// The row-wise maximum and sum of exponentials of the whole vocabulary's
/// logits, from this rank's `valid` columns and the group's.
void vocabRowStats(const float *logits, int64_t rows, int64_t Vl,
                   int64_t valid, Communicator &group, std::vector<float> &mx,
                   std::vector<float> &sum) {
  mx.assign(size_t(rows), -std::numeric_limits<float>::infinity());
  sum.assign(size_t(rows), 0.0f);
#pragma omp parallel for schedule(static) if (rows * Vl > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * Vl;
    float m = mx[size_t(r)];
    for (int64_t j = 0; j < valid; ++j)
      m = std::max(m, z[j]);
    mx[size_t(r)] = m;
  }
  group.allReduce(mx.data(), rows, ReduceOp::Max);
#pragma omp parallel for schedule(static) if (rows * Vl > (1 << 14))
  for (int64_t r = 0; r < rows; ++r) {
    const float *z = logits + r * Vl;
    const float m = mx[size_t(r)];
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < valid; ++j)
      s += expApprox(z[j] - m);
    sum[size_t(r)] = s;
  }
  group.allReduce(sum.data(), rows, ReduceOp::Sum);
}

} // namespace

void runVocabParallel(Exec &e, Communicator &group) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  const int64_t V = I.getInt("vocab");
  const bool embed =
      I.op == Opcode::VocabEmbedding || I.op == Opcode::VocabEmbeddingGrad;
  const int64_t local = embed ? d.vocab : d.cols;
  if (local * group.size() < V || local * (group.size() - 1) >= V)
    e.fail(std::to_string(local) + " entries per rank do not split a "
           "vocabulary of " + std::to_string(V) + " over " +
           std::to_string(group.size()) + " ranks");
  const int64_t offset = int64_t(group.rank()) * local;
  const int64_t valid = std::clamp(V - offset, int64_t(0), local);
  auto mine = [&](int64_t id) { return id >= offset && id < offset + valid; };
  if (I.op == Opcode::VocabEmbedding) {
    const int32_t *ids = e.iin(1, "ids");
    float *out = e.fout(0, "output");
    checkIds("vocab_embedding", ids, d.rows, V);
    embedding(e.fin(0, "table"), ids, out, d.rows, d.vocab, d.cols, offset);
    group.allReduce(out, d.rows * d.cols, ReduceOp::Sum);
    return;
  }
  if (I.op == Opcode::VocabEmbeddingGrad) {
    const int32_t *ids = e.iin(0, "ids");
    checkIds("vocab_embedding_grad", ids, d.rows, V);
    embeddingGrad(ids, e.fin(1, "dy"), e.fout(0, "dtable"), d.rows, d.vocab,
                  d.cols, offset);
    return;
  }
  if (I.op == Opcode::VocabCrossEntropy || I.op == Opcode::VocabCrossEntropyGrad) {
    const bool grad = I.op == Opcode::VocabCrossEntropyGrad;
    const size_t li = grad ? 1 : 0;
    const int64_t ignore = I.getInt("ignore_index");
    const float *logits = e.fin(li, "logits");
    const int32_t *labels = e.iin(li + 1, "labels");
    int64_t count;
    checkLabels(labels, d.rows, V, ignore, grad ? "vocab_cross_entropy_grad"
                                                : "vocab_cross_entropy",
                count);
    std::vector<float> mx, sum;
    vocabRowStats(logits, d.rows, d.cols, valid, group, mx, sum);
    if (!grad) {
      // The labels' logits: each is on one rank.
      std::vector<float> target(size_t(d.rows), 0.0f);
      for (int64_t r = 0; r < d.rows; ++r)
        if (labels[r] != ignore && mine(labels[r]))
          target[size_t(r)] = logits[r * d.cols + labels[r] - offset];
      group.allReduce(target.data(), d.rows, ReduceOp::Sum);
      double total = 0.0;
      for (int64_t r = 0; r < d.rows; ++r)
        if (labels[r] != ignore)
          total += double(mx[size_t(r)]) + std::log(double(sum[size_t(r)])) -
                   double(target[size_t(r)]);
      e.fout(0, "loss")[0] = count > 0 ? float(total / double(count)) : 0.0f;
      return;
    }
    const float k = count > 0 ? e.scalarIn(0, "dloss") / float(count) : 0.0f;
    float *dlogits = e.fout(0, "dlogits");
#pragma omp parallel for schedule(static) if (d.rows * d.cols > (1 << 14))
    for (int64_t r = 0; r < d.rows; ++r) {
      const float *z = logits + r * d.cols;
      float *dz = dlogits + r * d.cols;
      std::memset(dz, 0, size_t(d.cols) * 4);
      if (labels[r] == ignore)
        continue;
      const float f = k / sum[size_t(r)], m = mx[size_t(r)];
      for (int64_t j = 0; j < valid; ++j)
        dz[j] = f * expApprox(z[j] - m);
      if (mine(labels[r]))
        dz[labels[r] - offset] -= k;
    }
    return;
  }
  e.fail("internal: not a vocabulary-parallel opcode");
}

void runEmbeddingLoss(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  const RngContext &rng = e.rng;
  switch (asFamily<EmbeddingLossOpcode>(I.op)) {
  case EmbeddingLossOpcode::Embedding: {
    const float *table = e.fin(0, "table");
    const int32_t *ids = e.iin(1, "ids");
    checkIds("embedding", ids, d.rows, d.vocab);
    embedding(table, ids, e.fout(0, "output"), d.rows, d.vocab, d.cols);
    return;
  }
  case EmbeddingLossOpcode::EmbeddingGrad: {
    const int32_t *ids = e.iin(0, "ids");
    const float *dy = e.fin(1, "dy");
    checkIds("embedding_grad", ids, d.rows, d.vocab);
    embeddingGrad(ids, dy, e.fout(0, "dtable"), d.rows, d.vocab, d.cols);
    return;
  }
  case EmbeddingLossOpcode::CrossEntropy:
  case EmbeddingLossOpcode::CrossEntropyGrad:
  case EmbeddingLossOpcode::CrossEntropyWithGrad: {
    const bool both = I.op == Opcode::CrossEntropyWithGrad;
    const bool grad = both || I.op == Opcode::CrossEntropyGrad;
    const size_t li = grad ? 1 : 0;
    const int64_t ignore =
        I.has("ignore_index") ? I.getInt("ignore_index") : -100;
    const float *logits = e.fin(li, "logits");
    const int32_t *labels = e.iin(li + 1, "labels");
    // The fused op's loss first: its dlogits may overwrite the logits. The
    // same two computations as the separate ops, so the same bits.
    if (!grad || both)
      e.fout(0, "loss")[0] =
          crossEntropy(logits, labels, d.rows, d.cols, d.vocab, ignore);
    if (grad)
      crossEntropyGrad(e.scalarIn(0, "dloss"), logits, labels,
                       e.fout(both ? 1 : 0, "dlogits"), d.rows, d.cols,
                       d.vocab, ignore);
    return;
  }
  case EmbeddingLossOpcode::MlmMask: {
    const int32_t *ids = e.iin(0, "ids");
    int32_t *inputs = e.iout(0, "inputs"), *labels = e.iout(1, "labels");
    if (ids == inputs || ids == labels || inputs == labels)
      e.fail("outputs must not alias the input or each other");
    mlmMask(ids, inputs, labels, d.n, I.getFloat("mask_prob"),
            int32_t(I.getInt("mask_token_id")), I.getInt("vocab_size"),
            I.getInt("pad_token_id"), uint32_t(I.getInt("stream")), rng.seed,
            rng.offset);
    return;
  }
  case EmbeddingLossOpcode::PaddingMask: {
    const int32_t *ids = e.iin(0, "ids");
    int32_t *mask = e.iout(0, "mask");
    const int64_t pad = I.getInt("pad_token_id");
#pragma omp parallel for schedule(static) if (d.n > (1 << 16))
    for (int64_t i = 0; i < d.n; ++i)
      mask[i] = ids[i] != pad;
    return;
  }
  }
  e.fail("internal: not an embedding or loss opcode");
}

} // namespace dsc::rt::cpu
