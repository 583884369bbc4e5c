//===- VocabParallel.cuh - Vocabulary-parallel embedding and loss -*- CUDA -*-===//
//
// Tensor slicing's vocabulary-parallel embedding and cross-entropy (the
// CUDA side of EmbeddingLossCpu.cpp's runVocabParallel): the rank at
// coordinate `rank` of its tensor group holds LOCAL table rows or logit
// columns from first = rank * LOCAL; those from V (the vocabulary) on are
// padding. The group's reductions between the phases are collective steps
// of the emitted module (the row maxima, the sums of exponentials and the
// labels' logits in the launcher scratch), so each phase is its own kernel.
//
// Not a standalone header: part of the CUDA device library, pasted after
// EmbeddingLoss.cuh, whose helpers it uses.
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// This rank's columns that are not padding.
template <dsc_i64 V, dsc_i64 LOCAL>
__device__ __forceinline__ dsc_i64 vocabValid(int rank) {
  const dsc_i64 left = V - dsc_i64(rank) * LOCAL;
  return left < 0 ? 0 : left > LOCAL ? LOCAL : left;
}

/// out[r, :] = table[ids[r] - first, :] for this rank's ids, 0 for the
/// others (the group's all-reduce then sums one row per token); an id
/// outside [0, V) sets the status.
template <typename TT, typename TO, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V,
          dsc_i64 C, int VEC>
__device__ void vocabEmbedding(const TT *table, const int *ids, TO *out,
                               int rank, dsc_u32 code) {
  const dsc_i64 first = dsc_i64(rank) * LOCAL;
  DSC_GRID_LOOP(g, ROWS *(C / VEC)) {
    const dsc_i64 r = g / (C / VEC), c = (g % (C / VEC)) * VEC;
    const int id = ids[r];
    if ((id < 0 || id >= V) && c == 0)
      fail(code);
    const dsc_i64 row = dsc_i64(id) - first;
    float v[VEC];
    if (id >= 0 && id < V && row >= 0 && row < LOCAL) {
      ldv<VEC>(table, row * C + c, v);
    } else {
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        v[l] = 0.0f;
    }
    stv<VEC>(out, r * C + c, v);
  }
}

/// embeddingGrad over this rank's rows [rank*LOCAL, (rank+1)*LOCAL) of the
/// vocabulary (embeddingGradRows): grid ceil(LOCAL / R) blocks of THREADS.
template <typename TD, typename TO, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V,
          dsc_i64 C, dsc_i64 R, int THREADS>
__device__ void vocabEmbeddingGrad(const int *ids, const TD *dy, TO *dtable,
                                   int rank, dsc_u32 code) {
  embeddingGradRows<TD, TO, ROWS, LOCAL, V, C, R, THREADS>(
      ids, dy, dtable, dsc_i64(rank) * LOCAL, code);
}

/// Each row's maximum over this rank's valid columns into mx (-inf where
/// it has none); the group's max follows.
template <typename TL, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V, int THREADS>
__device__ void vocabRowMax(const TL *logits, int rank, float *mx) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const dsc_i64 valid = vocabValid<V, LOCAL>(rank);
  float m = -__int_as_float(0x7f800000);
  for (dsc_i64 j = lane; j < valid; j += THREADS)
    m = fmaxf(m, ld(logits, r * LOCAL + j));
  m = rowMax<THREADS>(m);
  if (lane == 0)
    mx[r] = m;
}

/// Each row's sum of exp(z - mx) over this rank's valid columns into sum,
/// and (target non-null) the label's logit where this rank holds it, else
/// 0, into target; the group's sum of both follows.
template <typename TL, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V, dsc_i64 IGNORE,
          int THREADS>
__device__ void vocabRowSums(const TL *logits, const int *labels, int rank,
                             const float *mx, float *sum, float *target) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const dsc_i64 valid = vocabValid<V, LOCAL>(rank), first = dsc_i64(rank) * LOCAL;
  const float m = mx[r];
  float s = 0.0f;
  for (dsc_i64 j = lane; j < valid; j += THREADS)
    s += expf(ld(logits, r * LOCAL + j) - m);
  s = rowSum<THREADS>(s);
  if (lane != 0)
    return;
  sum[r] = s;
  if (target) {
    const int label = labels[r];
    const dsc_i64 col = dsc_i64(label) - first;
    target[r] = label != IGNORE && col >= 0 && col < valid
                    ? ld(logits, r * LOCAL + col)
                    : 0.0f;
  }
}

/// loss = the mean over the rows whose label is not IGNORE of mx + log(sum)
/// - target (0 when every label is ignored); one block. A label outside
/// [0, V) that is not IGNORE sets the status.
template <typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 IGNORE, int BLOCK>
__device__ void vocabLoss(const float *mx, const float *sum,
                          const float *target, const int *labels, TO *loss,
                          dsc_u32 code) {
  double total = 0.0, count = 0.0;
  for (dsc_i64 r = threadIdx.x; r < ROWS; r += BLOCK) {
    const int label = labels[r];
    if (label == IGNORE)
      continue;
    if (label < 0 || label >= V)
      fail(code);
    total += double(mx[r]) + log(double(sum[r])) - double(target[r]);
    count += 1.0;
  }
  total = blockSumDouble<BLOCK>(total);
  count = blockSumDouble<BLOCK>(count);
  if (threadIdx.x == 0)
    st(loss, 0, count > 0.0 ? float(total / count) : 0.0f);
}

/// dlogits over this rank's columns: k * exp(z - mx) / sum on valid
/// columns, 0 on padding, minus k at the label where this rank holds it;
/// rows whose label is IGNORE (or out of range: the status) all 0.
template <typename TL, typename TO, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V,
          dsc_i64 IGNORE, int THREADS>
__device__ void vocabCrossEntropyGradRows(const float *kIn, const TL *logits,
                                          const int *labels, int rank,
                                          const float *mx, const float *sum,
                                          TO *dlogits, dsc_u32 code) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const int label = labels[r];
  const bool bad = label != IGNORE && (label < 0 || label >= V);
  if (bad && lane == 0)
    fail(code);
  if (label == IGNORE || bad) {
    for (dsc_i64 j = lane; j < LOCAL; j += THREADS)
      st(dlogits, r * LOCAL + j, 0.0f);
    return;
  }
  const dsc_i64 valid = vocabValid<V, LOCAL>(rank), first = dsc_i64(rank) * LOCAL;
  const float k = *kIn, f = k / sum[r], m = mx[r];
  for (dsc_i64 j = lane; j < LOCAL; j += THREADS) {
    float d = j < valid ? f * expf(ld(logits, r * LOCAL + j) - m) : 0.0f;
    if (first + j == label)
      d -= k;
    st(dlogits, r * LOCAL + j, d);
  }
}

} // namespace dsc
