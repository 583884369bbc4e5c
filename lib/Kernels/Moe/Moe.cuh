//===- Moe.cuh - Mixture-of-experts kernels, CUDA --------------*- CUDA -*-===//
//
// The CUDA side of MoeCpu.cpp: router top-k, the expert-major layout, row
// moves, grouped GEMMs and the load-balancing loss, with their gradients.
// Every sum runs in a fixed order (no atomics), so results are
// deterministic. The grouped GEMMs are plain per-element dot products: the
// expert row counts live on the device, so a launch needs no host sync
// (CUDA graphs) but no tensor cores either.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh and Optimizers.cuh (Ptrs), whose helpers it uses (see
// lib/Kernels/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// p[e] = softmax(row)[e] for one row of E logits, in f32.
template <typename TL, dsc_i64 E>
__device__ __forceinline__ float moeRowMax(const TL *row) {
  float mx = ld(row, 0);
  for (dsc_i64 e = 1; e < E; ++e)
    mx = fmaxf(mx, ld(row, e));
  return mx;
}
template <typename TL, dsc_i64 E>
__device__ __forceinline__ float moeRowSum(const TL *row, float mx) {
  float sum = 0.0f;
  for (dsc_i64 e = 0; e < E; ++e)
    sum += expf(ld(row, e) - mx);
  return sum;
}

/// dsc.moe_topk (cpu::topk): one thread per token; a row with a NaN still
/// chooses K distinct experts. NORM: the weights renormalised to sum to 1.
template <typename TL, typename TW, dsc_i64 N, dsc_i64 E, dsc_i64 K, bool NORM>
__device__ void moeTopk(const TL *logits, TW *weights, int *experts) {
  DSC_GRID_LOOP(n, N) {
    const TL *row = logits + n * E;
    const float mx = moeRowMax<TL, E>(row), sum = moeRowSum<TL, E>(row, mx);
    float w[K];
    float total = 0.0f;
    for (dsc_i64 k = 0; k < K; ++k) {
      int best = -1;
      float bestP = 0.0f;
      for (dsc_i64 e = 0; e < E; ++e) {
        bool taken = false;
        for (dsc_i64 j = 0; j < k; ++j)
          taken = taken || experts[n * K + j] == int(e);
        const float p = expf(ld(row, e) - mx) / sum;
        if (!taken && (best < 0 || p > bestP)) {
          best = int(e);
          bestP = p;
        }
      }
      experts[n * K + k] = best;
      total += (w[k] = bestP);
    }
    for (dsc_i64 k = 0; k < K; ++k)
      st(weights, n * K + k, NORM ? w[k] / total : w[k]);
  }
}

/// dsc.moe_topk_grad (cpu::topkGrad): one thread per token. With `logits`
/// (LOGITS: unnormalised weights), an unchosen expert gets -p times the
/// dot product instead of zero.
template <typename TD, typename TW, typename TO, typename TL, dsc_i64 N,
          dsc_i64 E, dsc_i64 K, bool LOGITS>
__device__ void moeTopkGrad(const TD *dw, const TW *w, const int *experts,
                            const TL *logits, TO *dlogits) {
  DSC_GRID_LOOP(n, N) {
    float dot = 0.0f;
    for (dsc_i64 k = 0; k < K; ++k)
      dot += ld(w, n * K + k) * ld(dw, n * K + k);
    if (LOGITS) {
      const TL *row = logits + n * E;
      const float mx = moeRowMax<TL, E>(row), sum = moeRowSum<TL, E>(row, mx);
      for (dsc_i64 e = 0; e < E; ++e)
        st(dlogits, n * E + e, -(expf(ld(row, e) - mx) / sum) * dot);
    } else {
      for (dsc_i64 e = 0; e < E; ++e)
        st(dlogits, n * E + e, 0.0f);
    }
    for (dsc_i64 k = 0; k < K; ++k)
      st(dlogits, n * E + experts[n * K + k],
         ld(w, n * K + k) * (ld(dw, n * K + k) - dot));
  }
}

/// dsc.moe_route (cpu::route): one block, thread e walks the choices by
/// choice rank, then token (choice i = n * K + k), keeping expert e's first
/// CAP (all when CAP is 0) and marking the rest dropped (-1); then numbers
/// its kept ones in token order after the lower experts' rows.
template <dsc_i64 NK, dsc_i64 E, dsc_i64 K, dsc_i64 CAP>
__device__ void moeRoute(const int *experts, int *slots, int *counts,
                         dsc_u32 code) {
  constexpr int kKept = -2; // numbered in the second pass
  const dsc_i64 e = threadIdx.x;
  if (e < E) {
    int c = 0;
    for (dsc_i64 k = 0; k < K; ++k)
      for (dsc_i64 i = k; i < NK; i += K) {
        const int x = experts[i];
        if (e == 0 && (x < 0 || x >= E))
          fail(code);
        if (x != int(e))
          continue;
        if (CAP == 0 || c < CAP) {
          ++c;
          slots[i] = kKept;
        } else {
          slots[i] = -1;
        }
      }
    counts[e] = c;
  }
  __syncthreads();
  if (e < E) {
    int next = 0;
    for (dsc_i64 j = 0; j < e; ++j)
      next += counts[j];
    for (dsc_i64 i = 0; i < NK; ++i)
      if (experts[i] == int(e) && slots[i] == kKept)
        slots[i] = next++;
  }
}

/// The rows of token dropping's padding (dsc.moe_dispatch's rows no kept
/// choice takes) are zero: with dropping, dispatch zeroes its output first.
template <typename TR, dsc_i64 ROWS, dsc_i64 C>
__device__ void moeZeroRows(TR *rows) {
  DSC_GRID_LOOP(i, ROWS * C) { st(rows, i, 0.0f); }
}

/// dsc.moe_dispatch (cpu::dispatch): rows[slots[n, k]] = x[n] (* w[n, k]);
/// a dropped choice (slot -1) moves nothing.
template <typename TX, typename TW, typename TR, dsc_i64 N, dsc_i64 K,
          dsc_i64 C, bool WEIGHTED>
__device__ void moeDispatch(const TX *x, const int *slots, const TW *w,
                            TR *rows, dsc_u32 code) {
  DSC_GRID_LOOP(i, N * K * C) {
    const dsc_i64 a = i / C, c = i % C;
    const int slot = slots[a];
    if (slot == -1) // dropped
      continue;
    if (slot < 0 || slot >= N * K) {
      fail(code);
      continue;
    }
    float v = ld(x, (a / K) * C + c);
    if constexpr (WEIGHTED)
      v *= ld(w, a);
    st(rows, dsc_i64(slot) * C + c, v);
  }
}

/// dsc.moe_combine (cpu::combine): y[n] = sum_k w[n, k] rows[slots[n, k]].
template <typename TR, typename TW, typename TY, dsc_i64 N, dsc_i64 K,
          dsc_i64 C, bool WEIGHTED>
__device__ void moeCombine(const TR *rows, const int *slots, const TW *w,
                           TY *y, dsc_u32 code) {
  DSC_GRID_LOOP(i, N * C) {
    const dsc_i64 n = i / C, c = i % C;
    float v = 0.0f;
    for (dsc_i64 k = 0; k < K; ++k) {
      const int slot = slots[n * K + k];
      if (slot == -1) // dropped: no contribution
        continue;
      if (slot < 0 || slot >= N * K) {
        fail(code);
        continue;
      }
      const float scale = WEIGHTED ? ld(w, n * K + k) : 1.0f;
      v += scale * ld(rows, dsc_i64(slot) * C + c);
    }
    st(y, i, v);
  }
}

/// dsc.moe_slot_dot (cpu::slotDot): dw[n, k] = dot(x[n], rows[slots[n, k]]).
template <typename TX, typename TR, typename TO, dsc_i64 N, dsc_i64 K,
          dsc_i64 C>
__device__ void moeSlotDot(const TX *x, const TR *rows, const int *slots,
                           TO *dw, dsc_u32 code) {
  DSC_GRID_LOOP(a, N * K) {
    const int slot = slots[a];
    if (slot == -1) { // dropped: its weight reaches nothing
      st(dw, a, 0.0f);
      continue;
    }
    if (slot < 0 || slot >= N * K) {
      fail(code);
      continue;
    }
    float s = 0.0f;
    for (dsc_i64 c = 0; c < C; ++c)
      s += ld(x, (a / K) * C + c) * ld(rows, dsc_i64(slot) * C + c);
    st(dw, a, s);
  }
}

/// The expert whose rows hold row `r` (counts' prefix sums), or -1 when the
/// counts do not cover it.
template <dsc_i64 E>
__device__ __forceinline__ int moeExpertOfRow(const int *counts, dsc_i64 r) {
  dsc_i64 end = 0;
  for (dsc_i64 e = 0; e < E; ++e) {
    end += counts[e];
    if (r < end)
      return int(e);
  }
  return -1;
}

/// dsc.grouped_linear (cpu::groupedLinear): y[s, j] = x[s] . column j of
/// W_e for the expert e of row s. W is [E*K, N] ([E*N, K] when TRANS).
template <typename TX, typename TW, typename TY, dsc_i64 S, dsc_i64 K,
          dsc_i64 N, dsc_i64 E, bool TRANS>
__device__ void groupedLinear(const TX *x, const TW *w, const int *counts,
                              TY *y, dsc_u32 code) {
  DSC_GRID_LOOP(i, S * N) {
    const dsc_i64 s = i / N, j = i % N;
    const int e = moeExpertOfRow<E>(counts, s);
    if (e < 0) { // padding after the counts' rows
      st(y, i, 0.0f);
      continue;
    }
    const TW *we = w + dsc_i64(e) * K * N;
    float acc = 0.0f;
    for (dsc_i64 k = 0; k < K; ++k)
      acc += ld(x, s * K + k) * (TRANS ? ld(we, j * K + k) : ld(we, k * N + j));
    st(y, i, acc);
  }
}

/// dsc.grouped_linear_grad_weight (cpu::groupedLinearGradWeight): each
/// element of each expert's weight gradient sums that expert's rows in order.
template <typename TX, typename TD, typename TO, dsc_i64 S, dsc_i64 K,
          dsc_i64 N, dsc_i64 E, bool TRANS>
__device__ void groupedLinearGradWeight(const TX *x, const TD *dy,
                                        const int *counts, TO *dw,
                                        dsc_u32 code) {
  DSC_GRID_LOOP(i, E * K * N) {
    const dsc_i64 e = i / (K * N), rem = i % (K * N);
    // rem indexes W_e in its layout: [N, K] when TRANS, else [K, N].
    const dsc_i64 k = TRANS ? rem % K : rem / N, j = TRANS ? rem / K : rem % N;
    dsc_i64 first = 0, total = 0;
    for (dsc_i64 x2 = 0; x2 < E; ++x2) {
      if (x2 < e)
        first += counts[x2];
      total += counts[x2];
    }
    if (total > S) {
      fail(code);
      continue;
    }
    float acc = 0.0f;
    for (dsc_i64 r = first, end = first + counts[e]; r < end; ++r)
      acc += ld(x, r * K + k) * ld(dy, r * N + j);
    st(dw, i, acc);
  }
}

/// dsc.moe_load (cpu::load): one block, thread e sums expert e's choices
/// and router probabilities over the tokens in order (in double).
template <typename TL, dsc_i64 N, dsc_i64 E, dsc_i64 K>
__device__ void moeLoad(const TL *logits, const int *experts, float *load) {
  const dsc_i64 e = threadIdx.x;
  if (e >= E)
    return;
  double chosen = 0.0, prob = 0.0;
  for (dsc_i64 n = 0; n < N; ++n) {
    const TL *row = logits + n * E;
    const float mx = moeRowMax<TL, E>(row), sum = moeRowSum<TL, E>(row, mx);
    prob += expf(ld(row, e) - mx) / sum;
    for (dsc_i64 k = 0; k < K; ++k)
      chosen += experts[n * K + k] == int(e) ? 1.0 : 0.0;
  }
  load[e] = float(chosen);
  load[E + e] = float(prob);
}

/// dsc.moe_load_grad (cpu::loadGrad): one thread per logit.
template <typename TL, typename TO, dsc_i64 N, dsc_i64 E>
__device__ void moeLoadGrad(const float *dload, const TL *logits,
                            TO *dlogits) {
  DSC_GRID_LOOP(i, N * E) {
    const TL *row = logits + (i / E) * E;
    const float mx = moeRowMax<TL, E>(row), sum = moeRowSum<TL, E>(row, mx);
    float dot = 0.0f;
    for (dsc_i64 e = 0; e < E; ++e)
      dot += expf(ld(row, e) - mx) / sum * dload[E + e];
    const float p = expf(ld(row, i % E) - mx) / sum;
    st(dlogits, i, p * (dload[E + i % E] - dot));
  }
}

/// dsc.moe_balance_loss and its gradient: T = the loads' sum ([2, E] each,
/// layer order, in double). GRAD: dload[0] = g s T[1], dload[1] = g s T[0];
/// else loss = s sum_e T[0, e] T[1, e] (one thread).
template <int L, dsc_i64 E, bool GRAD>
__device__ void moeBalanceLoss(Ptrs<L> loads, const float *dloss,
                               float *out, double scale) {
  DSC_GRID_LOOP(e, GRAD ? E : 1) {
    double total = 0.0;
    for (dsc_i64 x = GRAD ? e : 0; x < (GRAD ? e + 1 : E); ++x) {
      double t0 = 0.0, t1 = 0.0;
      for (int l = 0; l < L; ++l) {
        t0 += loads.p[l][x];
        t1 += loads.p[l][E + x];
      }
      if constexpr (GRAD) {
        const double g = double(dloss[0]) * scale;
        out[x] = float(g * t1);
        out[E + x] = float(g * t0);
      } else {
        total += t0 * t1;
      }
    }
    if constexpr (!GRAD)
      out[0] = float(scale * total);
  }
}

} // namespace dsc
