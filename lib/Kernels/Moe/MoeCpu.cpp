//===- MoeCpu.cpp - Mixture-of-experts CPU kernels ------------------------===//
//
// The router (softmax, top-k, renormalised weights), the expert-major row
// layout (a stable counting sort of the choices), the row moves between
// tokens and experts, the grouped GEMMs (one single-threaded OpenBLAS sgemm
// per expert, the experts over the OpenMP threads) and the load-balancing
// loss, with their gradients; and runMoe, their dispatch. Every reduction
// runs in a fixed order, so results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include <cblas.h>

namespace dsc::rt::cpu {

namespace {

/// p = softmax(row[0, E)), in f32.
void softmaxRow(const float *row, int64_t E, float *p) {
  float mx = row[0];
  for (int64_t e = 1; e < E; ++e)
    mx = std::max(mx, row[e]);
  float sum = 0.0f;
  for (int64_t e = 0; e < E; ++e)
    sum += (p[e] = expApprox(row[e] - mx));
  for (int64_t e = 0; e < E; ++e)
    p[e] /= sum;
}

/// Per token: the K most probable experts (descending; ties to the lower
/// expert) and their probabilities, renormalised to sum to 1 when
/// `normalize`. A row with a NaN still chooses K distinct experts (its
/// weights are NaN, which the step's non-finite check reports).
void topk(const float *logits, float *weights, int32_t *experts, int64_t N,
          int64_t E, int64_t K, bool normalize) {
#pragma omp parallel for schedule(static) if (N * E > (1 << 14))
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> p(static_cast<size_t>(E));
    std::vector<bool> taken(static_cast<size_t>(E), false);
    softmaxRow(logits + n * E, E, p.data());
    float *w = weights + n * K;
    int32_t *chosen = experts + n * K;
    float sum = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      int64_t best = -1;
      for (int64_t e = 0; e < E; ++e)
        if (!taken[size_t(e)] &&
            (best < 0 || p[size_t(e)] > p[size_t(best)]))
          best = e;
      taken[size_t(best)] = true;
      chosen[k] = int32_t(best);
      sum += (w[k] = p[size_t(best)]);
    }
    if (normalize)
      for (int64_t k = 0; k < K; ++k)
        w[k] /= sum;
  }
}

/// dlogits[n, experts[n, k]] = w (dw - sum_j w_j dw_j); elsewhere 0, or,
/// with `logits` (unnormalised weights: softmax probabilities p), -p_j
/// times that sum.
void topkGrad(const float *dw, const float *w, const int32_t *experts,
              const float *logits, float *dlogits, int64_t N, int64_t E,
              int64_t K) {
#pragma omp parallel for schedule(static) if (N * E > (1 << 14))
  for (int64_t n = 0; n < N; ++n) {
    float *out = dlogits + n * E;
    float dot = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      dot += w[n * K + k] * dw[n * K + k];
    if (logits) {
      softmaxRow(logits + n * E, E, out);
      for (int64_t j = 0; j < E; ++j)
        out[j] *= -dot;
    } else {
      std::fill(out, out + E, 0.0f);
    }
    for (int64_t k = 0; k < K; ++k)
      out[experts[n * K + k]] = w[n * K + k] * (dw[n * K + k] - dot);
  }
}

/// The offsets of each expert's rows (counts' exclusive prefix sum); fails
/// unless the counts are non-negative and sum to `rows` (with `padded`: to
/// at most `rows`, the rest being padding).
std::vector<int64_t> offsetsOf(Exec &e, const int32_t *counts, int64_t E,
                               int64_t rows, bool padded = false) {
  std::vector<int64_t> off(size_t(E) + 1, 0);
  for (int64_t x = 0; x < E; ++x) {
    if (counts[x] < 0)
      e.fail("expert " + std::to_string(x) + " has a negative row count");
    off[size_t(x) + 1] = off[size_t(x)] + counts[x];
  }
  if (padded ? off[size_t(E)] > rows : off[size_t(E)] != rows)
    e.fail("the experts' row counts add up to " +
           std::to_string(off[size_t(E)]) + ", " +
           (padded ? "more than" : "not") + " the " + std::to_string(rows) +
           " rows");
  return off;
}

/// A stable counting sort of the N*K choices (K per token) by expert.
/// With `capacity` > 0 an expert keeps its first `capacity` assignments
/// in priority order (choice k = 0 of every token in token order, then
/// k = 1, ...); the others get slot -1 and no row.
void route(Exec &e, const int32_t *experts, int32_t *slots, int32_t *counts,
           int64_t NK, int64_t K, int64_t E, int64_t capacity) {
  std::fill(counts, counts + E, 0);
  for (int64_t i = 0; i < NK; ++i)
    if (experts[i] < 0 || experts[i] >= E)
      e.fail("expert choice " + std::to_string(experts[i]) +
             " out of range [0," + std::to_string(E) + ")");
  std::vector<bool> kept(size_t(NK), true);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t i = k; i < NK; i += K) {
      int32_t &count = counts[experts[i]];
      if (capacity > 0 && count >= capacity)
        kept[size_t(i)] = false;
      else
        ++count;
    }
  std::vector<int64_t> next = offsetsOf(e, counts, E, NK, /*padded=*/true);
  for (int64_t i = 0; i < NK; ++i)
    slots[i] = kept[size_t(i)] ? int32_t(next[size_t(experts[i])]++) : -1;
}

/// Slots are rows of the layout, or -1 for a dropped assignment.
void checkSlots(Exec &e, const int32_t *slots, int64_t NK) {
  for (int64_t i = 0; i < NK; ++i)
    if (slots[i] < -1 || slots[i] >= NK)
      e.fail("slot " + std::to_string(slots[i]) + " out of range [-1," +
             std::to_string(NK) + ")");
}

/// rows[slots[n, k]] = x[n] (* w[n, k]); rows no kept assignment takes
/// (token dropping's padding) are zero.
void dispatch(const float *x, const int32_t *slots, const float *w, float *rows,
              int64_t N, int64_t K, int64_t C) {
  int64_t kept = 0;
  for (int64_t i = 0; i < N * K; ++i)
    kept += slots[i] >= 0;
  std::fill(rows + kept * C, rows + N * K * C, 0.0f);
#pragma omp parallel for schedule(static) if (N * K * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      if (slots[n * K + k] < 0)
        continue;
      const float scale = w ? w[n * K + k] : 1.0f;
      float *r = rows + int64_t(slots[n * K + k]) * C;
      const float *src = x + n * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        r[c] = src[c] * scale;
    }
}

/// y[n] = sum_k w[n, k] rows[slots[n, k]], k in order.
void combine(const float *rows, const int32_t *slots, const float *w, float *y,
             int64_t N, int64_t K, int64_t C) {
#pragma omp parallel for schedule(static) if (N * K * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n) {
    float *out = y + n * C;
    std::fill(out, out + C, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      if (slots[n * K + k] < 0) // dropped: no contribution
        continue;
      const float scale = w ? w[n * K + k] : 1.0f;
      const float *r = rows + int64_t(slots[n * K + k]) * C;
#pragma omp simd
      for (int64_t c = 0; c < C; ++c)
        out[c] += scale * r[c];
    }
  }
}

/// dw[n, k] = dot(x[n], rows[slots[n, k]]).
void slotDot(const float *x, const float *rows, const int32_t *slots, float *dw,
             int64_t N, int64_t K, int64_t C) {
#pragma omp parallel for schedule(static) if (N * K * C > (1 << 15))
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      if (slots[n * K + k] < 0) { // dropped: its weight reaches nothing
        dw[n * K + k] = 0.0f;
        continue;
      }
      const float *a = x + n * C, *r = rows + int64_t(slots[n * K + k]) * C;
      float s = 0.0f;
      for (int64_t c = 0; c < C; ++c)
        s += a[c] * r[c];
      dw[n * K + k] = s;
    }
}

/// Whether the experts' GEMMs (rows x K x N in all) are worth the OpenMP
/// threads; below GemmCpu.cpp's threshold a team costs more than it saves.
bool worthThreads(const std::vector<int64_t> &off, int64_t K, int64_t N) {
  return 2.0 * double(off.back()) * double(K) * double(N) >= 4e6;
}

/// y_e = x_e @ W_e (W_e^T when transW) for each expert's rows.
void groupedLinear(const float *x, const float *w, float *y,
                   const std::vector<int64_t> &off, int64_t M, int64_t K,
                   int64_t N, bool transW) {
  configureBlasThreads();
  const int64_t E = int64_t(off.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1) if (worthThreads(off, K, N))
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = off[size_t(e) + 1] - off[size_t(e)];
    if (rows == 0)
      continue;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transW ? CblasTrans : CblasNoTrans,
                int(rows), int(N), int(K), 1.0f, x + off[size_t(e)] * K, int(K),
                w + e * K * N, int(transW ? K : N), 0.0f,
                y + off[size_t(e)] * N, int(N));
  }
  // Padding rows (after the counts' sum) have zero results.
  std::fill(y + off[size_t(E)] * N, y + M * N, 0.0f);
}

/// dW_e = x_e^T @ dy_e ([K, N]; its transpose [N, K] when transW); an
/// expert without rows gets a zero gradient.
void groupedLinearGradWeight(const float *x, const float *dy, float *dw,
                             const std::vector<int64_t> &off, int64_t K,
                             int64_t N, bool transW) {
  configureBlasThreads();
  const int64_t E = int64_t(off.size()) - 1;
#pragma omp parallel for schedule(dynamic, 1) if (worthThreads(off, K, N))
  for (int64_t e = 0; e < E; ++e) {
    const int64_t rows = off[size_t(e) + 1] - off[size_t(e)];
    float *out = dw + e * K * N;
    if (rows == 0) {
      std::fill(out, out + K * N, 0.0f);
      continue;
    }
    const float *xe = x + off[size_t(e)] * K, *dye = dy + off[size_t(e)] * N;
    if (transW)
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(K),
                  int(rows), 1.0f, dye, int(N), xe, int(K), 0.0f, out, int(K));
    else
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(K), int(N),
                  int(rows), 1.0f, xe, int(K), dye, int(N), 0.0f, out, int(N));
  }
}

/// load[0, e]: the choices of expert e; load[1, e]: its router probability
/// summed over the tokens (in token order, in double).
void load(Exec &ex, const float *logits, const int32_t *experts, float *out,
          int64_t N, int64_t E, int64_t K) {
  std::vector<double> chosen(static_cast<size_t>(E), 0.0),
      prob(static_cast<size_t>(E), 0.0);
  std::vector<float> p(static_cast<size_t>(E));
  for (int64_t n = 0; n < N; ++n) {
    softmaxRow(logits + n * E, E, p.data());
    for (int64_t e = 0; e < E; ++e)
      prob[size_t(e)] += p[size_t(e)];
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = experts[n * K + k];
      if (e < 0 || e >= E)
        ex.fail("expert choice " + std::to_string(e) + " out of range [0," +
                std::to_string(E) + ")");
      chosen[size_t(e)] += 1.0;
    }
  }
  for (int64_t e = 0; e < E; ++e) {
    out[e] = float(chosen[size_t(e)]);
    out[E + e] = float(prob[size_t(e)]);
  }
}

/// The softmax backward of every row for the probability-sum gradient
/// dload[1] (row 0, the counts, has none).
void loadGrad(const float *dload, const float *logits, float *dlogits,
              int64_t N, int64_t E) {
  const float *g = dload + E;
#pragma omp parallel for schedule(static) if (N * E > (1 << 14))
  for (int64_t n = 0; n < N; ++n) {
    std::vector<float> p(static_cast<size_t>(E));
    softmaxRow(logits + n * E, E, p.data());
    float dot = 0.0f;
    for (int64_t e = 0; e < E; ++e)
      dot += p[size_t(e)] * g[e];
    for (int64_t e = 0; e < E; ++e)
      dlogits[n * E + e] = p[size_t(e)] * (g[e] - dot);
  }
}

/// The sum of the layers' loads (inputs first..end), in layer order.
std::vector<double> totalLoad(Exec &e, size_t first, int64_t E) {
  std::vector<double> t(size_t(2 * E), 0.0);
  for (size_t k = first; k < e.I.inputs.size(); ++k) {
    const float *l = e.fin(k, "load");
    for (int64_t i = 0; i < 2 * E; ++i)
      t[size_t(i)] += l[i];
  }
  return t;
}

} // namespace

void runMoe(Exec &e) {
  const InstrDims &d = e.d;
  const int64_t N = d.rows, E = d.experts, K = d.topK, C = d.cols;
  switch (asFamily<MoeOpcode>(e.I.op)) {
  case MoeOpcode::MoeTopk:
    topk(e.fin(0, "logits"), e.fout(0, "weights"), e.iout(1, "experts"), N, E,
         K, e.I.getInt("normalize") != 0);
    return;
  case MoeOpcode::MoeTopkGrad:
    topkGrad(e.fin(0, "dweights"), e.fin(1, "weights"), e.iin(2, "experts"),
             e.I.inputs.size() == 4 ? e.fin(3, "logits") : nullptr,
             e.fout(0, "dlogits"), N, E, K);
    return;
  case MoeOpcode::MoeRoute:
    route(e, e.iin(0, "experts"), e.iout(0, "slots"), e.iout(1, "counts"),
          N * K, K, E, e.I.getInt("capacity"));
    return;
  case MoeOpcode::MoeDispatch:
  case MoeOpcode::MoeCombine: {
    const int32_t *slots = e.iin(1, "slots");
    checkSlots(e, slots, N * K);
    const float *w = e.I.inputs.size() == 3 ? e.fin(2, "weights") : nullptr;
    if (e.I.op == Opcode::MoeDispatch)
      dispatch(e.fin(0, "x"), slots, w, e.fout(0, "rows"), N, K, C);
    else
      combine(e.fin(0, "rows"), slots, w, e.fout(0, "y"), N, K, C);
    return;
  }
  case MoeOpcode::MoeSlotDot: {
    const int32_t *slots = e.iin(2, "slots");
    checkSlots(e, slots, N * K);
    slotDot(e.fin(0, "x"), e.fin(1, "rows"), slots, e.fout(0, "dweights"), N, K,
            C);
    return;
  }
  case MoeOpcode::GroupedLinear:
  case MoeOpcode::GroupedLinearGradWeight: {
    std::vector<int64_t> off =
        offsetsOf(e, e.iin(2, "counts"), E, d.M, /*padded=*/true);
    if (e.I.op == Opcode::GroupedLinear)
      groupedLinear(e.fin(0, "x"), e.fin(1, "weight"), e.fout(0, "y"), off, d.M,
                    d.K, d.N, d.transW);
    else
      groupedLinearGradWeight(e.fin(0, "x"), e.fin(1, "dy"), e.fout(0, "dw"),
                              off, d.K, d.N, d.transW);
    return;
  }
  case MoeOpcode::MoeLoad:
    load(e, e.fin(0, "logits"), e.iin(1, "experts"), e.fout(0, "load"), N, E,
         K);
    return;
  case MoeOpcode::MoeLoadGrad:
    loadGrad(e.fin(0, "dload"), e.fin(1, "logits"), e.fout(0, "dlogits"), N, E);
    return;
  case MoeOpcode::MoeBalanceLoss: {
    std::vector<double> t = totalLoad(e, 0, E);
    double s = 0.0;
    for (int64_t x = 0; x < E; ++x)
      s += t[size_t(x)] * t[size_t(E + x)];
    e.fout(0, "loss")[0] = float(e.I.getFloat("scale") * s);
    return;
  }
  case MoeOpcode::MoeBalanceLossGrad: {
    const double g = e.scalarIn(0, "dloss") * e.I.getFloat("scale");
    std::vector<double> t = totalLoad(e, 1, E);
    float *out = e.fout(0, "dload");
    for (int64_t x = 0; x < E; ++x) {
      out[x] = float(g * t[size_t(E + x)]);
      out[E + x] = float(g * t[size_t(x)]);
    }
    return;
  }
  }
  e.fail("internal: not a mixture-of-experts opcode");
}

} // namespace dsc::rt::cpu
