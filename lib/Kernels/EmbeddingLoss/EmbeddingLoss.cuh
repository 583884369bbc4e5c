//===- EmbeddingLoss.cuh - Embedding and loss templates --------*- CUDA -*-===//
//
// embedding and embedding_grad, mlm_mask, cross_entropy and its gradient:
// the CUDA side of EmbeddingLossCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// cpu::embedding: out[r, :] = table[ids[r], :]; an id outside [0, V) sets
/// the status and writes zeros.
template <typename TT, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 C, int VEC>
__device__ void embedding(const TT *table, const int *ids, TO *out,
                          dsc_u32 code) {
  DSC_GRID_LOOP(g, ROWS *(C / VEC)) {
    const dsc_i64 r = g / (C / VEC), c = (g % (C / VEC)) * VEC;
    const int id = ids[r];
    float v[VEC];
    if (id < 0 || id >= V) {
      if (c == 0)
        fail(code);
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        v[l] = 0.0f;
    } else {
      ldv<VEC>(table, dsc_i64(id) * C + c, v);
    }
    stv<VEC>(out, r * C + c, v);
  }
}

/// cpu::embeddingGrad over the table rows [0, LOCAL) that hold token ids
/// [first, first + LOCAL): block b owns rows [b*R, (b+1)*R). It zeroes
/// them, then reads the ROWS token ids once, THREADS at a time: the tile's
/// tokens that fall in its rows are compacted in token order (a ballot per
/// warp, the warps' counts through shared memory) and their dy rows added,
/// element (row, c) always by thread c % THREADS. Every element thus sums
/// its tokens in token order, the CPU's order: bitwise the same sums, with
/// the ids read once per block rather than once per table column. An id
/// outside [0, V) sets the status.
template <typename TD, typename TO, dsc_i64 ROWS, dsc_i64 LOCAL, dsc_i64 V,
          dsc_i64 C, dsc_i64 R, int THREADS>
__device__ void embeddingGradRows(const int *ids, const TD *dy, TO *dtable,
                                  dsc_i64 first, dsc_u32 code) {
  static_assert(THREADS % 32 == 0 && THREADS <= 1024, "whole warps");
  __shared__ int tileRow[THREADS], tileToken[THREADS];
  __shared__ int warpMatches[THREADS / 32];
  const int tid = int(threadIdx.x), lane = tid % 32, warp = tid / 32;
  const dsc_i64 lo = dsc_i64(blockIdx.x) * R;
  const dsc_i64 hi = lo + R < LOCAL ? lo + R : LOCAL;
  for (dsc_i64 e = lo * C + tid; e < hi * C; e += THREADS)
    st(dtable, e, 0.0f);
  __syncthreads();
  for (dsc_i64 base = 0; base < ROWS; base += THREADS) {
    const dsc_i64 r = base + tid;
    bool match = false;
    dsc_i64 row = 0;
    if (r < ROWS) {
      const int id = ids[r];
      if (id < 0 || id >= V) {
        if (blockIdx.x == 0)
          fail(code);
      } else {
        row = dsc_i64(id) - first;
        match = row >= lo && row < hi;
      }
    }
    const unsigned ballot = __ballot_sync(0xffffffffu, match);
    if (lane == 0)
      warpMatches[warp] = __popc(ballot);
    __syncthreads();
    int at = 0, total = 0;
    for (int w = 0; w < THREADS / 32; ++w) {
      at += w < warp ? warpMatches[w] : 0;
      total += warpMatches[w];
    }
    if (match) {
      const int k = at + __popc(ballot & ((1u << lane) - 1u));
      tileRow[k] = int(row);
      tileToken[k] = int(r);
    }
    __syncthreads();
    for (int k = 0; k < total; ++k) {
      const dsc_i64 to = dsc_i64(tileRow[k]) * C, from = dsc_i64(tileToken[k]) * C;
      for (dsc_i64 c = tid; c < C; c += THREADS)
        st(dtable, to + c, ld(dtable, to + c) + ld(dy, from + c));
    }
    __syncthreads();
  }
}

/// cpu::embeddingGrad: the whole table (embeddingGradRows), grid
/// ceil(V / R) blocks of THREADS.
template <typename TD, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 C,
          dsc_i64 R, int THREADS>
__device__ void embeddingGrad(const int *ids, const TD *dy, TO *dtable,
                              dsc_u32 code) {
  embeddingGradRows<TD, TO, ROWS, V, V, C, R, THREADS>(ids, dy, dtable, 0,
                                                       code);
}

/// dsc.mlm_mask (cpu::mlmMask): the 80/10/10 rule from one Philox block per
/// token; unmasked labels are -100; the padding token (PAD >= 0) is never
/// masked.
template <dsc_i64 N, dsc_i64 PAD>
__device__ void mlmMask(const int *ids, int *inputs, int *labels,
                        float maskProb, int maskToken, dsc_u32 vocab,
                        dsc_u32 stream, dsc_u64 seed, dsc_u64 offset) {
  DSC_GRID_LOOP(i, N) {
    const Bits4 b = philox(dsc_u32(i), stream, dsc_u32(offset),
                           dsc_u32(offset >> 32), seed);
    const int id = ids[i];
    if (uniform(b.v[0]) < maskProb && id != PAD) {
      labels[i] = id;
      const float u = uniform(b.v[1]);
      inputs[i] = u < 0.8f ? maskToken : u < 0.9f ? int(b.v[2] % vocab) : id;
    } else {
      labels[i] = -100;
      inputs[i] = id;
    }
  }
}

/// dsc.padding_mask: 1 where the token is not PAD, 0 where it is.
template <dsc_i64 N, dsc_i64 PAD>
__device__ void paddingMask(const int *ids, int *mask) {
  DSC_GRID_LOOP(i, N) { mask[i] = ids[i] != PAD; }
}

//===----------------------------------------------------------------------===//
// Cross entropy (cpu::crossEntropy / crossEntropyGrad): rows of V logits
// streamed by THREADS threads, VEC (1, 4 or 8) elements per load (V may be
// 50k; a padded vocabulary's rows are multiples of 64), of which the first
// CLASSES are the classes (the rest pad the vocabulary: no probability,
// zero gradient). Labels equal to IGNORE do not count; any other label
// outside [0, CLASSES) sets the status.
//===----------------------------------------------------------------------===//

/// A row's maximum and sum of exponentials over its first CLASSES logits,
/// VEC (1 or 4) at a time (the row starts VEC-aligned).
template <typename TL, dsc_i64 CLASSES, int THREADS, int VEC>
__device__ __forceinline__ void rowLogSumExp(const TL *z, int lane, float &mx,
                                             float &sum) {
  constexpr dsc_i64 SPAN = (CLASSES + VEC - 1) / VEC * VEC;
  float m = -__int_as_float(0x7f800000);
  for (dsc_i64 j = dsc_i64(lane) * VEC; j < SPAN; j += dsc_i64(THREADS) * VEC) {
    float v[VEC];
    ldv<VEC>(z, j, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      if (j + l < CLASSES)
        m = fmaxf(m, v[l]);
  }
  m = rowMax<THREADS>(m);
  float s = 0.0f;
  for (dsc_i64 j = dsc_i64(lane) * VEC; j < SPAN; j += dsc_i64(THREADS) * VEC) {
    float v[VEC];
    ldv<VEC>(z, j, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      if (j + l < CLASSES)
        s += expf(v[l] - m);
  }
  mx = m;
  sum = rowSum<THREADS>(s);
}

/// Per-row NLL into rowLoss (double, 0 for ignored rows).
template <typename TL, dsc_i64 ROWS, dsc_i64 V, dsc_i64 CLASSES,
          dsc_i64 IGNORE, int THREADS, int VEC>
__device__ void crossEntropyRows(const TL *logits, const int *labels,
                                 double *rowLoss, dsc_u32 code) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const int label = labels[r];
  if (label == IGNORE) {
    if (lane == 0)
      rowLoss[r] = 0.0;
    return;
  }
  if (label < 0 || label >= CLASSES) {
    if (lane == 0) {
      fail(code);
      rowLoss[r] = 0.0;
    }
    return;
  }
  float mx, sum;
  rowLogSumExp<TL, CLASSES, THREADS, VEC>(logits + r * V, lane, mx, sum);
  if (lane == 0)
    rowLoss[r] = double(mx) + log(double(sum)) - double(ld(logits, r * V + label));
}

/// Number of labels != IGNORE, by one block of BLOCK threads.
template <dsc_i64 ROWS, dsc_i64 IGNORE, int BLOCK>
__device__ double countLabels(const int *labels) {
  double n = 0.0;
  for (dsc_i64 r = threadIdx.x; r < ROWS; r += BLOCK)
    n += labels[r] != IGNORE ? 1.0 : 0.0;
  return blockSumDouble<BLOCK>(n);
}

/// loss = sum(rowLoss) / count (0 when every label is ignored); one block.
template <typename TO, dsc_i64 ROWS, dsc_i64 IGNORE, int BLOCK>
__device__ void crossEntropyFinish(const double *rowLoss, const int *labels,
                                   TO *loss) {
  const double total = sumOfParts<ROWS, BLOCK>(rowLoss);
  const double count = countLabels<ROWS, IGNORE, BLOCK>(labels);
  if (threadIdx.x == 0)
    st(loss, 0, count > 0.0 ? float(total / count) : 0.0f);
}

/// k = dloss / count (0 when every label is ignored) into *k; one block.
template <typename TS, dsc_i64 ROWS, dsc_i64 IGNORE, int BLOCK>
__device__ void crossEntropyGradScale(const TS *dloss, const int *labels,
                                      float *k) {
  const double count = countLabels<ROWS, IGNORE, BLOCK>(labels);
  if (threadIdx.x == 0)
    *k = count > 0.0 ? ld(dloss, 0) / float(count) : 0.0f;
}

/// dlogits = k * softmax(z), minus k at the label; ignored rows all 0. With
/// rowLoss (CrossEntropyWithGrad), also crossEntropyRows' row loss from the
/// same maximum and sum. dlogits may be the logits: each element is read,
/// then written, by one thread, and the label's logit is read by the thread
/// that overwrites it.
template <typename TL, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 CLASSES,
          dsc_i64 IGNORE, int THREADS, int VEC>
__device__ void crossEntropyWithGradRows(const float *kIn, const TL *logits,
                                         const int *labels, double *rowLoss,
                                         TO *dlogits, dsc_u32 code) {
  static_assert(V % VEC == 0, "rows of whole vectors");
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const int label = labels[r];
  const bool bad = label != IGNORE && (label < 0 || label >= CLASSES);
  if (bad && lane == 0)
    fail(code);
  if (label == IGNORE || bad) {
    if (rowLoss && lane == 0)
      rowLoss[r] = 0.0;
    const float zero[VEC] = {};
    for (dsc_i64 j = dsc_i64(lane) * VEC; j < V; j += dsc_i64(THREADS) * VEC)
      stv<VEC>(dlogits, r * V + j, zero);
    return;
  }
  const float k = *kIn;
  float mx, sum;
  rowLogSumExp<TL, CLASSES, THREADS, VEC>(logits + r * V, lane, mx, sum);
  const float f = k / sum;
  for (dsc_i64 j = dsc_i64(lane) * VEC; j < V; j += dsc_i64(THREADS) * VEC) {
    float z[VEC], d[VEC];
    ldv<VEC>(logits, r * V + j, z);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      d[l] = j + l < CLASSES ? f * expf(z[l] - mx) : 0.0f;
      if (j + l == label) {
        if (rowLoss)
          rowLoss[r] = double(mx) + log(double(sum)) - double(z[l]);
        d[l] -= k;
      }
    }
    stv<VEC>(dlogits, r * V + j, d);
  }
}

/// CrossEntropyGrad's rows: the above without the loss.
template <typename TL, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 CLASSES,
          dsc_i64 IGNORE, int THREADS, int VEC>
__device__ void crossEntropyGradRows(const float *kIn, const TL *logits,
                                     const int *labels, TO *dlogits,
                                     dsc_u32 code) {
  crossEntropyWithGradRows<TL, TO, ROWS, V, CLASSES, IGNORE, THREADS, VEC>(
      kIn, logits, labels, nullptr, dlogits, code);
}

} // namespace dsc
