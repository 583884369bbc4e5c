//===- Attention.cuh - Softmax and attention device templates --*- CUDA -*-===//
//
// softmax and softmax_dropout and their gradients (row kernels), and the
// FlashAttention-2 kernels of attention and attention_grad: the CUDA side of
// AttentionCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// Keys a causal row may attend to (AttentionCpu.cpp validKeys).
template <dsc_i64 TQ, dsc_i64 TK, bool CAUSAL>
__device__ __forceinline__ dsc_i64 validKeys(dsc_i64 r) {
  if constexpr (!CAUSAL) {
    return TK;
  } else {
    dsc_i64 v = r % TQ + (TK - TQ) + 1;
    return v < 0 ? 0 : v > TK ? TK : v;
  }
}

/// Whether key block `col` is among the layout's blocks of row `row`
/// (compressed rows: row r's ascending columns are cols[rows[r],
/// rows[r + 1])); a binary search.
__device__ __forceinline__ bool layoutHas(const int *rows, const int *cols,
                                          dsc_i64 row, int col) {
  int lo = rows[row], hi = rows[row + 1];
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (cols[mid] < col)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < rows[row + 1] && cols[lo] == col;
}

/// dsc.softmax and dsc.softmax_dropout (cpu::softmax / softmaxDropout):
/// softmax of scale*x over the valid keys, masked keys exactly 0, a row
/// with no key left all zeros; DROPOUT also writes dropout(probs) to
/// `dropped`. Key padding (KM > 0 rows per batch): key j of row r is
/// masked where keyMask[r / KM][j] is 0. A block layout (LBLOCK > 0, its
/// compressed `layoutRows`/`layoutCols` over LBLOCKS blocks per side and
/// LHEADS heads): key j of row r counts only where its block is one of
/// the layout's blocks of r's query block (cpu::softmaxRowSparse).
template <typename TX, typename TP, typename TDR, bool CAUSAL, bool DROPOUT,
          dsc_i64 ROWS, dsc_i64 TQ, dsc_i64 TK, int THREADS, int ITEMS,
          int VEC, dsc_i64 KM, dsc_i64 LBLOCK = 0, dsc_i64 LBLOCKS = 0,
          dsc_i64 LHEADS = 1>
__device__ void softmaxRows(const TX *x, const int *keyMask, TP *probs,
                            TDR *dropped, float scale, float rate,
                            float keepScale, Rng rng,
                            const int *layoutRows = nullptr,
                            const int *layoutCols = nullptr) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const dsc_i64 valid = validKeys<TQ, TK, CAUSAL>(r);
  dsc_i64 layoutRow = 0; // the layout's row: r's head and query block
  if constexpr (LBLOCK > 0)
    layoutRow = (r / TQ) % LHEADS * LBLOCKS + r % TQ / LBLOCK;
  const auto live = [&](dsc_i64 j) {
    bool on = j < valid;
    if constexpr (KM > 0)
      on = on && keyMask[r / KM * TK + j] != 0;
    if constexpr (LBLOCK > 0)
      on = on && layoutHas(layoutRows, layoutCols, layoutRow, int(j / LBLOCK));
    return on;
  };
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, TK>(x, r * TK, lane, v, 0.0f);
  float mx = -__int_as_float(0x7f800000);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC + l;
      v[k][l] = scale * v[k][l];
      if (live(j))
        mx = fmaxf(mx, v[k][l]);
    }
  mx = rowMax<THREADS>(mx);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC + l;
      v[k][l] = live(j) ? expf(v[k][l] - mx) : 0.0f;
      sum += v[k][l];
    }
  sum = rowSum<THREADS>(sum);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] *= inv;
  storeRow<THREADS, ITEMS, VEC, TK>(probs, r * TK, lane, v);
  if constexpr (DROPOUT) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC;
      if (j >= TK)
        continue;
      bool keep[VEC];
      rng.keep<VEC>(r * TK + j, rate, keep);
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        v[k][l] = keep[l] ? v[k][l] * keepScale : 0.0f;
    }
    storeRow<THREADS, ITEMS, VEC, TK>(dropped, r * TK, lane, v);
  }
}

/// dsc.softmax_grad and dsc.softmax_dropout_grad (cpu::softmaxGrad /
/// softmaxDropoutGrad): dx = scale * y * (d - sum(d * y)) with d = dy
/// (MASK 0), d = dropout(dy) with a Philox mask (MASK 1, unused by the
/// emitter today), or d = dy * keepScale where the forward's dropped output
/// is non-zero (MASK 2: the op's definition; at rate 0, d = dy).
template <typename TD, typename TY, typename TM, typename TO, int MASK,
          dsc_i64 ROWS, dsc_i64 TK, int THREADS, int ITEMS, int VEC>
__device__ void softmaxGradRows(const TD *dy, const TY *y, const TM *dropped,
                                TO *dx, float scale, float rate,
                                float keepScale, Rng rng) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float d[ITEMS][VEC], p[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, TK>(dy, r * TK, lane, d, 0.0f);
  loadRow<THREADS, ITEMS, VEC, TK>(y, r * TK, lane, p, 0.0f);
  if constexpr (MASK == 1) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC;
      if (j >= TK)
        continue;
      bool keep[VEC];
      rng.keep<VEC>(r * TK + j, rate, keep);
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        d[k][l] = keep[l] ? d[k][l] * keepScale : 0.0f;
    }
  } else if constexpr (MASK == 2) {
    if (rate > 0.0f) {
      float m[ITEMS][VEC];
      loadRow<THREADS, ITEMS, VEC, TK>(dropped, r * TK, lane, m, 0.0f);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          d[k][l] = m[k][l] != 0.0f ? d[k][l] * keepScale : 0.0f;
    }
  }
  float dot = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      dot += d[k][l] * p[k][l];
  dot = rowSum<THREADS>(dot);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      d[k][l] = scale * p[k][l] * (d[k][l] - dot);
  storeRow<THREADS, ITEMS, VEC, TK>(dx, r * TK, lane, d);
}

//===----------------------------------------------------------------------===//
// Fused attention (cpu::attention / attentionGrad, FlashAttention-2): one
// block of WARPS warps per (batch*head, tile of TILE queries or keys); the
// [TILE, TILE] scores live in shared memory only. Tile products go through
// mmaTile: WMMA m16n16k16 tensor-core fragments with f32 accumulation when
// the tiles are stored as __half / __nv_bfloat16 (TC), FMA otherwise. The
// dropout decision of probability (i, j) is Rng::keep of element
// (bh*T + i)*T + j, the mask of dsc.softmax_dropout. The backward is two
// kernels that each recompute P from the saved lse, so dK/dV (per key
// tile) and dQ (per query tile) are written without atomics: deterministic.
// Block-sparse attention (LH > 0 layout heads, TILE the layout's block):
// a query tile visits only the key tiles of its layout row, a key tile only
// the query tiles of its column (the compressed rows of the layout and of
// its transpose, arrays of the emitted module); LH = 0 is dense. Key
// padding (KMH > 0 query heads per batch row): keys whose [B, T] mask entry
// is 0 are masked like causal ones.
// The structure is the CPU kernel's, tile for tile. On an H200 (2026-11-26)
// it matched the CPU (check-cuda) but ran 12-14x slower than PyTorch's
// SDPA at GPT-2's shapes (README, Benchmark): every tile product loads its
// WMMA fragments from shared memory and stores the result back there. The
// four-per-Philox-block dropout (keep4) and the 16-byte tile loads came
// after that run and have not run on a GPU yet.
//===----------------------------------------------------------------------===//

/// C[M, N] (f32, row-major, ldc) = op(A)[M, K] @ op(B)[K, N] (+ C when
/// ACC): A row-major [M, K] (lda), or with TA stored [K, M]; B row-major
/// [K, N] (ldb), or with TB stored [N, K]. All of the block's threads call
/// it; the caller synchronises before and after.
template <typename TC, int M, int N, int K, bool TA, bool TB, bool ACC,
          int WARPS>
__device__ __forceinline__ void mmaTile(const TC *A, int lda, const TC *B,
                                        int ldb, float *C, int ldc) {
  constexpr bool kTensorCores =
      !Same<TC, float>::value && M % 16 == 0 && N % 16 == 0 && K % 16 == 0;
  if constexpr (kTensorCores) {
    using namespace nvcuda;
    using LA = typename Select<TA, wmma::col_major, wmma::row_major>::type;
    using LB = typename Select<TB, wmma::col_major, wmma::row_major>::type;
    const int warp = int(threadIdx.x >> 5);
    for (int t = warp; t < (M / 16) * (N / 16); t += WARPS) {
      const int tm = t / (N / 16) * 16, tn = t % (N / 16) * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> c;
      if constexpr (ACC)
        wmma::load_matrix_sync(c, C + tm * ldc + tn, unsigned(ldc),
                               wmma::mem_row_major);
      else
        wmma::fill_fragment(c, 0.0f);
      for (int k = 0; k < K; k += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, TC, LA> a;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, TC, LB> b;
        wmma::load_matrix_sync(a, TA ? A + k * lda + tm : A + tm * lda + k,
                               unsigned(lda));
        wmma::load_matrix_sync(b, TB ? B + tn * ldb + k : B + k * ldb + tn,
                               unsigned(ldb));
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(C + tm * ldc + tn, c, unsigned(ldc),
                              wmma::mem_row_major);
    }
  } else {
    for (int e = int(threadIdx.x); e < M * N; e += WARPS * 32) {
      const int i = e / N, j = e % N;
      float acc = ACC ? C[i * ldc + j] : 0.0f;
      for (int k = 0; k < K; ++k)
        acc += ld(A, TA ? k * lda + i : i * lda + k) *
               ld(B, TB ? j * ldb + k : k * ldb + j);
      C[i * ldc + j] = acc;
    }
  }
}

/// Rows [r0, r0 + TILE) of a [T, D] head into a [TILE, D] tile; rows past
/// T are zero. A 16-bit head stored as it is moves 16 bytes (8 elements of
/// a row) per load: heads start 16-byte aligned (the arena's buffers are
/// 64-byte aligned) and so do their rows when D % 8 == 0.
template <dsc_i64 T, int D, int TILE, int WARPS, typename TS, typename TC>
__device__ __forceinline__ void loadTile(const TS *src, dsc_i64 r0, TC *tile) {
  if constexpr (Same<TS, TC>::value && sizeof(TC) == 2 && D % 8 == 0) {
    for (int e = 8 * int(threadIdx.x); e < TILE * D; e += 8 * WARPS * 32) {
      const dsc_i64 r = r0 + e / D;
      uint4 bits = make_uint4(0u, 0u, 0u, 0u); // +0.0 in f16 and bf16
      if (r < T)
        bits = *reinterpret_cast<const uint4 *>(src + r * D + e % D);
      *reinterpret_cast<uint4 *>(tile + e) = bits;
    }
  } else {
    for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32) {
      const dsc_i64 r = r0 + e / D;
      st(tile, e, r < T ? ld(src, r * D + e % D) : 0.0f);
    }
  }
}

/// Whether query i of head bh may attend to key j (attnValid of the CPU
/// kernel, and the key padding mask [B, T] when KMH > 0: the query heads
/// per batch row).
template <dsc_i64 T, bool CAUSAL, int KMH>
__device__ __forceinline__ bool attnValid(const int *keyMask, dsc_i64 bh,
                                          dsc_i64 i, dsc_i64 j) {
  if (!(i < T && j < T && (!CAUSAL || j <= i)))
    return false;
  if constexpr (KMH > 0)
    return keyMask[bh / KMH * T + j] != 0;
  else
    return true;
}

/// The tiles tile `t` of query head bh visits, as positions [begin, end)
/// of a list (tileAt): row (bh % LH) * TILES + t of a compressed layout
/// (`rows`), or, dense (LH = 0), the tiles [denseBegin, denseEnd) themselves.
template <int LH, dsc_i64 TILES>
__device__ __forceinline__ void tileRange(const int *rows, dsc_i64 bh,
                                          dsc_i64 t, dsc_i64 denseBegin,
                                          dsc_i64 denseEnd, dsc_i64 &begin,
                                          dsc_i64 &end) {
  if constexpr (LH > 0) {
    const dsc_i64 row = (bh % LH) * TILES + t;
    begin = rows[row];
    end = rows[row + 1];
  } else {
    begin = denseBegin;
    end = denseEnd;
  }
}

/// The tile at position k of a tileRange.
template <int LH>
__device__ __forceinline__ dsc_i64 tileAt(const int *cols, dsc_i64 k) {
  if constexpr (LH > 0) {
    return cols[k];
  } else {
    return k;
  }
}

/// Dropout's keep flags of scores (i, j) .. (i, j + 3) of query head bh
/// (the mask of dsc.softmax_dropout: element (bh T + i) T + j of the Philox
/// stream; j a multiple of 4). Rng hands out four elements per Philox
/// block, so when T % 4 == 0 the four come from one block; at rate 0 none
/// is drawn: every score is kept, as the CPU's uniform >= 0 keeps it.
template <dsc_i64 T>
__device__ __forceinline__ void keep4(const Rng &rng, dsc_i64 bh, dsc_i64 i,
                                      dsc_i64 j, float rate, bool (&k)[4]) {
  if (rate == 0.0f) {
    k[0] = k[1] = k[2] = k[3] = true;
    return;
  }
  const dsc_i64 e = (bh * T + i) * T + j;
  if constexpr (T % 4 == 0) {
    rng.keep<4>(e, rate, k);
  } else {
#pragma unroll
    for (int l = 0; l < 4; ++l) {
      bool one[1];
      rng.keep<1>(e + l, rate, one);
      k[l] = one[0];
    }
  }
}

/// One key tile of the forward's online softmax over the scores sS: P
/// (dropped) into sP, the rows' accumulators sO rescaled by
/// exp(m_old - m_new), their maxima sM and undropped sums sL updated.
/// Tiles of 16 or more (a multiple of 4): LANES lanes per row, four
/// consecutive scores each (one Philox block for their dropout), ROWS rows
/// per warp at a time; smaller tiles (block-sparse layouts of small
/// blocks): one warp per row, a score per lane.
template <dsc_i64 T, int D, int TILE, bool CAUSAL, int WARPS, int KMH,
          typename TC>
__device__ __forceinline__ void
onlineSoftmax(const float *sS, TC *sP, float *sO, float *sM, float *sL,
              const int *keyMask, dsc_i64 bh, dsc_i64 i0, dsc_i64 j0,
              float scale, float rate, const Rng &rng) {
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const float inf = __int_as_float(0x7f800000);
  if constexpr (TILE % 4 == 0 && TILE >= 16) {
    constexpr int LANES = TILE / 4, ROWS = 32 / LANES;
    static_assert(32 % LANES == 0 && TILE % ROWS == 0,
                  "the lanes of a row tile a warp, its rows the tile");
    for (int r0 = warp * ROWS; r0 < TILE; r0 += WARPS * ROWS) {
      const int r = r0 + lane / LANES, c = 4 * (lane % LANES);
      const dsc_i64 i = i0 + r, j = j0 + c;
      const float mOld = sM[r];
      const float4 s4 = *reinterpret_cast<const float4 *>(sS + r * TILE + c);
      const float sc[4] = {scale * s4.x, scale * s4.y, scale * s4.z,
                           scale * s4.w};
      bool valid[4];
      float mx = mOld;
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        valid[l] = attnValid<T, CAUSAL, KMH>(keyMask, bh, i, j + l);
        if (valid[l])
          mx = fmaxf(mx, sc[l]);
      }
#pragma unroll
      for (int o = LANES / 2; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
      bool keep[4] = {true, true, true, true};
      if (valid[0] || valid[1] || valid[2] || valid[3])
        keep4<T>(rng, bh, i, j, rate, keep);
      float sum = 0.0f;
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        float e = 0.0f;
        if (valid[l]) {
          e = expf(sc[l] - mx);
          sum += e;
          e = keep[l] ? e : 0.0f;
        }
        st(sP, r * TILE + c + l, e);
      }
#pragma unroll
      for (int o = LANES / 2; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
      // A row past T, or with no key left, has no valid key: leave it at
      // zero.
      const float corr = mx == -inf ? 1.0f : expf(mOld - mx);
      for (int d = lane % LANES; d < D; d += LANES)
        sO[r * D + d] *= corr;
      if (lane % LANES == 0) {
        sM[r] = mx;
        sL[r] = sL[r] * corr + sum;
      }
    }
  } else {
    for (int r = warp; r < TILE; r += WARPS) {
      const dsc_i64 i = i0 + r;
      const float mOld = sM[r];
      float mx = mOld;
      for (int c = lane; c < TILE; c += 32)
        if (attnValid<T, CAUSAL, KMH>(keyMask, bh, i, j0 + c))
          mx = fmaxf(mx, scale * sS[r * TILE + c]);
      mx = rowMax<32>(mx);
      float sum = 0.0f;
      for (int c = lane; c < TILE; c += 32) {
        const dsc_i64 j = j0 + c;
        float e = 0.0f;
        if (attnValid<T, CAUSAL, KMH>(keyMask, bh, i, j)) {
          e = expf(scale * sS[r * TILE + c] - mx);
          sum += e;
          bool keep[1];
          rng.keep<1>((bh * T + i) * T + j, rate, keep);
          e = keep[0] ? e : 0.0f;
        }
        st(sP, r * TILE + c, e);
      }
      sum = rowSum<32>(sum);
      const float corr = mx == -inf ? 1.0f : expf(mOld - mx);
      for (int d = lane; d < D; d += 32)
        sO[r * D + d] *= corr;
      if (lane == 0) {
        sM[r] = mx;
        sL[r] = sL[r] * corr + sum;
      }
    }
  }
}

/// dsc.attention: out = dropout(softmax(scale q k^T)) v, lse of each row.
/// Query head bh reads key/value head bh / GROUPS (grouped-query attention).
/// `rows`/`cols`: the block layout (LH > 0). `keyMask`: key padding (KMH >
/// 0); a row with no key left gets out 0 and lse -inf.
template <typename TQ, typename TK, typename TV, typename TO, typename TC,
          dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL, int WARPS,
          int GROUPS, int LH, int KMH>
__device__ void attentionForward(const TQ *q, const TK *k, const TV *v,
                                 const int *keyMask, TO *out, float *lse,
                                 const int *rows, const int *cols, float scale,
                                 float rate, float keepScale, Rng rng) {
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(32) TC sQ[TILE * D];
  __shared__ __align__(32) TC sKV[TILE * D];
  __shared__ __align__(32) TC sP[TILE * TILE];
  __shared__ __align__(32) float sS[TILE * TILE];
  __shared__ __align__(32) float sO[TILE * D];
  __shared__ float sM[TILE], sL[TILE];
  const dsc_i64 bh = blockIdx.x / TILES, i0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 base = bh * T * D, kvBase = bh / GROUPS * T * D;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const float inf = __int_as_float(0x7f800000);
  loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sO[e] = 0.0f;
  for (int r = int(threadIdx.x); r < TILE; r += WARPS * 32) {
    sM[r] = -inf;
    sL[r] = 0.0f;
  }
  const dsc_i64 qt = i0 / TILE;
  dsc_i64 kBegin, kEnd;
  tileRange<LH, TILES>(rows, bh, qt, 0, CAUSAL ? qt + 1 : TILES, kBegin,
                       kEnd);
  for (dsc_i64 kk = kBegin; kk < kEnd; ++kk) {
    const dsc_i64 j0 = tileAt<LH>(cols, kk) * TILE;
    loadTile<T, D, TILE, WARPS>(k + kvBase, j0, sKV);
    __syncthreads();
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sKV, D, sS,
                                                          TILE);
    __syncthreads();
    onlineSoftmax<T, D, TILE, CAUSAL, WARPS, KMH>(sS, sP, sO, sM, sL, keyMask,
                                                  bh, i0, j0, scale, rate, rng);
    __syncthreads();
    loadTile<T, D, TILE, WARPS>(v + kvBase, j0, sKV);
    __syncthreads();
    mmaTile<TC, TILE, D, TILE, false, false, true, WARPS>(sP, TILE, sKV, D, sO,
                                                          D);
    __syncthreads();
  }
  for (int r = warp; r < TILE; r += WARPS) {
    const dsc_i64 i = i0 + r;
    if (i >= T)
      continue;
    const float l = sL[r], inv = l > 0.0f ? keepScale / l : 0.0f;
    for (int d = lane; d < D; d += 32)
      st(out, base + i * D + d, sO[r * D + d] * inv);
    if (lane == 0)
      lse[bh * T + i] = l > 0.0f ? sM[r] + logf(l) : -inf;
  }
}

//===----------------------------------------------------------------------===//
// Register-resident forward (FlashAttention-2's work split; selected by
// EmitOptions::attention = Registers, DSC_CUDA_ATTENTION=registers): a block
// of 4 warps takes 64 queries, each warp 16 of them, and walks key tiles of
// 64 staged in shared memory. A warp keeps its Q fragments, its 16 x 64
// scores and its 16 x D output in registers and multiplies with
// mma.sync.m16n8k16 (16-bit inputs, f32 accumulators), so only K and V
// pass through shared memory. Fragment layouts (PTX ISA, "Matrix Fragments
// for mma.m16n8k16"), with g = lane / 4 and t = lane % 4:
//   A (16 x 16, row-major), 4 registers of two 16-bit values each:
//     {(g, 2t..2t+1)}, {(g+8, 2t..)}, {(g, 2t+8..)}, {(g+8, 2t+8..)};
//   B (16 x 8, "col"), 2 registers: {(k 2t..2t+1, n g)}, {(k 2t+8.., n g)};
//   C (16 x 8, f32): c0, c1 at (g, 2t..2t+1), c2, c3 at (g+8, 2t..2t+1).
// Two neighbouring C tiles of the scores are exactly the A fragment of P
// for the P V product, so P never leaves the registers. Needs sm_80.
// unittests/Kernels/AttentionRegistersTest.cpp runs these kernels on the
// host (WarpEmulation.h) against a float64 attention.
// Same masking, dropout mapping and online softmax as attentionForward;
// only the order of the f32 sums differs.
//===----------------------------------------------------------------------===//

/// Two floats as the two 16-bit halves of one mma operand register (`lo`
/// at the lower column).
template <typename TC> __device__ __forceinline__ dsc_u32 pack2(float lo, float hi);
template <>
__device__ __forceinline__ dsc_u32 pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<dsc_u32 *>(&h);
}
template <>
__device__ __forceinline__ dsc_u32 pack2<__half>(float lo, float hi) {
  __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<dsc_u32 *>(&h);
}

/// Two 16-bit values already in memory as one operand register.
template <typename TC>
__device__ __forceinline__ dsc_u32 join2(const TC &lo, const TC &hi) {
  return dsc_u32(*reinterpret_cast<const unsigned short *>(&lo)) |
         (dsc_u32(*reinterpret_cast<const unsigned short *>(&hi)) << 16);
}

/// c[16 x 8] += a[16 x 16] b[16 x 8] on the tensor cores.
template <typename TC>
__device__ __forceinline__ void mma16816(float (&c)[4], const dsc_u32 (&a)[4],
                                         dsc_u32 b0, dsc_u32 b1) {
#if __CUDA_ARCH__ >= 800
  if constexpr (Same<TC, __half>::value)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0),
                   "r"(b1));
#elif defined(DSC_WARP_EMULATION)
  dsc_emu::mma16816<TC>(c, a, b0, b1); // unittests/Kernels/WarpEmulation.h
#else
  __trap(); // the emitter selects this kernel for sm_80 and newer only
#endif
}

/// Elements (r, c) and (r, c + 1) of a [T, D] head as one register; rows
/// past T are zero.
template <dsc_i64 T, int D, typename TC>
__device__ __forceinline__ dsc_u32 loadPair(const TC *head, dsc_i64 r, int c) {
  return r < T ? *reinterpret_cast<const dsc_u32 *>(head + r * D + c) : 0u;
}

/// Rows [j0, j0 + 64) of a [T, D] head into a [64, STRIDE] tile (16 bytes
/// per load; rows past T zero). STRIDE = D + 8 staggers the rows over the
/// shared-memory banks for the fragment loads.
template <dsc_i64 T, int D, int STRIDE, typename TC>
__device__ __forceinline__ void stageTile(const TC *head, dsc_i64 j0, TC *tile) {
  for (int e = 8 * int(threadIdx.x); e < 64 * D; e += 8 * 128) {
    const int r = e / D, c = e % D;
    uint4 bits = make_uint4(0u, 0u, 0u, 0u);
    if (j0 + r < T)
      bits = *reinterpret_cast<const uint4 *>(head + (j0 + r) * D + c);
    *reinterpret_cast<uint4 *>(tile + r * STRIDE + c) = bits;
  }
}

/// A warp's 16 rows [r0, r0 + 16) of a [T, D] head as mma A fragments.
template <dsc_i64 T, int D, typename TC>
__device__ __forceinline__ void loadRowsA(const TC *head, dsc_i64 r0,
                                          dsc_u32 (&a)[D / 16][4]) {
  const int g = int(threadIdx.x & 31) >> 2, t = int(threadIdx.x & 3);
#pragma unroll
  for (int kd = 0; kd < D / 16; ++kd) {
    a[kd][0] = loadPair<T, D>(head, r0 + g, kd * 16 + 2 * t);
    a[kd][1] = loadPair<T, D>(head, r0 + g + 8, kd * 16 + 2 * t);
    a[kd][2] = loadPair<T, D>(head, r0 + g, kd * 16 + 8 + 2 * t);
    a[kd][3] = loadPair<T, D>(head, r0 + g + 8, kd * 16 + 8 + 2 * t);
  }
}

/// c[n] = a b^T for the eight 16 x 8 tiles n of a 64-row staged tile
/// (rows n*8 .. n*8+7 of `tile`, D columns): the warp's 16 rows against 64.
template <int D, int STRIDE, typename TC>
__device__ __forceinline__ void rowsTimesTileT(const dsc_u32 (&a)[D / 16][4],
                                               const TC *tile,
                                               float (&c)[8][4]) {
  const int g = int(threadIdx.x & 31) >> 2, t = int(threadIdx.x & 3);
#pragma unroll
  for (int n = 0; n < 8; ++n) {
    c[n][0] = c[n][1] = c[n][2] = c[n][3] = 0.0f;
    const TC *row = tile + (n * 8 + g) * STRIDE + 2 * t;
#pragma unroll
    for (int kd = 0; kd < D / 16; ++kd)
      mma16816<TC>(c[n], a[kd],
                   *reinterpret_cast<const dsc_u32 *>(row + kd * 16),
                   *reinterpret_cast<const dsc_u32 *>(row + kd * 16 + 8));
  }
}

/// acc[16 x D] += x[16 x 64] tile[64 x D]: x in C layout (eight 16 x 8
/// tiles, rounded to TC as the A fragments of four k-steps), `tile` staged.
template <int D, int STRIDE, typename TC>
__device__ __forceinline__ void accumulateTimesTile(const float (&x)[8][4],
                                                    const TC *tile,
                                                    float (&acc)[D / 8][4]) {
  const int g = int(threadIdx.x & 31) >> 2, t = int(threadIdx.x & 3);
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    const dsc_u32 xa[4] = {pack2<TC>(x[2 * c][0], x[2 * c][1]),
                           pack2<TC>(x[2 * c][2], x[2 * c][3]),
                           pack2<TC>(x[2 * c + 1][0], x[2 * c + 1][1]),
                           pack2<TC>(x[2 * c + 1][2], x[2 * c + 1][3])};
    const TC *col = tile + (c * 16 + 2 * t) * STRIDE + g;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      mma16816<TC>(acc[n], xa, join2(col[n * 8], col[n * 8 + STRIDE]),
                   join2(col[n * 8 + 8 * STRIDE], col[n * 8 + 9 * STRIDE]));
  }
}

/// A warp's 16 x D accumulator (C layout) to rows [r0, r0 + 16) of a [T, D]
/// head, times `factor`; rows past T are not written.
template <dsc_i64 T, int D, typename TO>
__device__ __forceinline__ void storeRows(const float (&acc)[D / 8][4],
                                          TO *head, dsc_i64 r0, float factor) {
  const int g = int(threadIdx.x & 31) >> 2, t = int(threadIdx.x & 3);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const dsc_i64 r = r0 + g + 8 * h;
    if (r >= T)
      continue;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      st(head, r * D + n * 8 + 2 * t, factor * acc[n][2 * h]);
      st(head, r * D + n * 8 + 2 * t + 1, factor * acc[n][2 * h + 1]);
    }
  }
}

/// dsc.attention as attentionForward computes it, with 64-query and 64-key
/// tiles and the scores, probabilities and output in registers. TC is TQ,
/// TK and TV (one 16-bit type); D a multiple of 16 up to 128.
template <typename TQ, typename TK, typename TV, typename TO, typename TC,
          dsc_i64 BH, dsc_i64 T, int D, bool CAUSAL, int GROUPS, int LH,
          int KMH>
__device__ void attentionForwardRegisters(const TQ *q, const TK *k,
                                          const TV *v, const int *keyMask,
                                          TO *out, float *lse, const int *rows,
                                          const int *cols, float scale,
                                          float rate, float keepScale,
                                          Rng rng) {
  static_assert(Same<TQ, TC>::value && Same<TK, TC>::value &&
                    Same<TV, TC>::value && !Same<TC, float>::value,
                "q, k and v share one 16-bit type");
  static_assert(D % 16 == 0 && D <= 128, "D is a multiple of 16 up to 128");
  constexpr int TILE = 64, STRIDE = D + 8, KD = D / 16, ND = D / 8;
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(16) TC sK[TILE * STRIDE];
  __shared__ __align__(16) TC sV[TILE * STRIDE];
  const dsc_i64 bh = blockIdx.x / TILES, i0 = (blockIdx.x % TILES) * TILE;
  const TC *qh = q + bh * T * D;
  const TC *kh = k + bh / GROUPS * T * D, *vh = v + bh / GROUPS * T * D;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  // This thread's two query rows: r[0] = g and r[1] = g + 8 of its warp's 16.
  const dsc_i64 r[2] = {i0 + warp * 16 + g, i0 + warp * 16 + g + 8};
  const float inf = __int_as_float(0x7f800000);

  dsc_u32 qa[KD][4];
  loadRowsA<T, D>(qh, i0 + warp * 16, qa);
  float o[ND][4];
#pragma unroll
  for (int n = 0; n < ND; ++n)
    o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // Running maxima and this thread's part of the undropped sums, per row.
  float m[2] = {-inf, -inf}, l[2] = {0.0f, 0.0f};

  const dsc_i64 qt = i0 / TILE;
  dsc_i64 kBegin, kEnd;
  tileRange<LH, TILES>(rows, bh, qt, 0, CAUSAL ? qt + 1 : TILES, kBegin,
                       kEnd);
  for (dsc_i64 kk = kBegin; kk < kEnd; ++kk) {
    const dsc_i64 j0 = tileAt<LH>(cols, kk) * TILE;
    __syncthreads(); // the previous tile's fragments are read
    stageTile<T, D, STRIDE>(kh, j0, sK);
    stageTile<T, D, STRIDE>(vh, j0, sV);
    __syncthreads();

    // S = Q K^T: eight 16 x 8 tiles of keys n*8 .. n*8+7.
    float s[8][4];
    rowsTimesTileT<D, STRIDE>(qa, sK, s);

    // Scale and mask (a masked score is -inf), then the rows' new maxima
    // over the four threads that share each row.
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const dsc_i64 j = j0 + n * 8 + 2 * t + (e & 1);
        const float x = attnValid<T, CAUSAL, KMH>(keyMask, bh, r[h], j)
                            ? scale * s[n][e]
                            : -inf;
        s[n][e] = x;
        mx[h] = fmaxf(mx[h], x);
      }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
      mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
      // A row with no valid key yet keeps its (zero) state.
      const float corr = mx[h] == -inf ? 1.0f : expf(m[h] - mx[h]);
      m[h] = mx[h];
      l[h] *= corr;
#pragma unroll
      for (int n = 0; n < ND; ++n) {
        o[n][2 * h] *= corr;
        o[n][2 * h + 1] *= corr;
      }
    }

    // P = exp(S - m), summed undropped, then dropped. Four consecutive
    // keys are one Philox block: of the two threads that hold them (t and
    // t ^ 1), the even one draws row g's, the odd one row g + 8's, and
    // they swap.
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      bool kp[4];
      // (Selected, not indexed: r[t & 1] would put r in local memory.)
      keep4<T>(rng, bh, (t & 1) ? r[1] : r[0], j0 + n * 8 + (t >> 1) * 4,
               rate, kp);
      const dsc_u32 mine = dsc_u32(kp[0]) | dsc_u32(kp[1]) << 1 |
                           dsc_u32(kp[2]) << 2 | dsc_u32(kp[3]) << 3;
      const dsc_u32 other = __shfl_xor_sync(0xffffffffu, mine, 1);
      const dsc_u32 bits[2] = {(t & 1) ? other : mine, (t & 1) ? mine : other};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1;
        const float p = s[n][e] == -inf ? 0.0f : expf(s[n][e] - m[h]);
        l[h] += p;
        s[n][e] = (bits[h] >> (2 * (t & 1) + (e & 1))) & 1u ? p : 0.0f;
      }
    }

    // O += P V: k-steps of 16 keys (score tiles 2c and 2c + 1).
    accumulateTimesTile<D, STRIDE>(s, sV, o);
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
    l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    if (r[h] >= T)
      continue;
    const float inv = l[h] > 0.0f ? keepScale / l[h] : 0.0f;
    TO *row = out + (bh * T + r[h]) * D;
#pragma unroll
    for (int n = 0; n < ND; ++n) {
      st(row, n * 8 + 2 * t, o[n][2 * h] * inv);
      st(row, n * 8 + 2 * t + 1, o[n][2 * h + 1] * inv);
    }
    if (t == 0)
      lse[bh * T + r[h]] = l[h] > 0.0f ? m[h] + logf(l[h]) : -inf;
  }
}

/// The dropout keep flags of the 64 x 64 scores (i0 .. i0+63, j0 .. j0+63)
/// of query head bh as bits: word 2 i + h holds keys j0 + 32 h .. + 31 of
/// query i0 + i. Each of the 128 threads draws one word, eight Philox
/// blocks of four keys (keep4: the forward's decisions).
template <dsc_i64 T>
__device__ __forceinline__ void stageKeep(const Rng &rng, dsc_i64 bh,
                                          dsc_i64 i0, dsc_i64 j0, float rate,
                                          dsc_u32 *sKeep) {
  const int i = int(threadIdx.x) >> 1, h = int(threadIdx.x) & 1;
  dsc_u32 word = 0;
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    bool kp[4];
    keep4<T>(rng, bh, i0 + i, j0 + 32 * h + 4 * b, rate, kp);
#pragma unroll
    for (int l = 0; l < 4; ++l)
      word |= dsc_u32(kp[l]) << (4 * b + l);
  }
  sKeep[2 * i + h] = word;
}

/// What the backward register kernels take: dout, q, k and v of one 16-bit
/// type, and a head dim whose two 16 x D accumulators fit the registers.
template <typename TG, typename TQ, typename TK, typename TV, typename TC,
          int D>
__device__ __forceinline__ void requireRegistersBackward() {
  static_assert(Same<TG, TC>::value && Same<TQ, TC>::value &&
                    Same<TK, TC>::value && Same<TV, TC>::value &&
                    !Same<TC, float>::value,
                "dout, q, k and v share one 16-bit type");
  static_assert(D % 16 == 0 && D <= 64, "D is a multiple of 16 up to 64");
}

/// dK and dV as attentionGradKV computes them, with 64-key and 64-query
/// tiles: a warp owns 16 keys, keeps K and V as A fragments and dK, dV in
/// registers, and computes S^T = K Q^T and dP^T = V dO^T against the staged
/// query tile. D a multiple of 16 up to 64 (the accumulators' registers).
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, bool CAUSAL, int GROUPS,
          int LH, int KMH>
__device__ void attentionGradKVRegisters(const TG *dout, const TQ *q,
                                         const TK *k, const TV *v,
                                         const float *lse, const float *rowDot,
                                         const int *keyMask, TO *dk, TO *dv,
                                         const int *rows, const int *cols,
                                         float scale, float rate,
                                         float keepScale, Rng rng) {
  requireRegistersBackward<TG, TQ, TK, TV, TC, D>();
  constexpr int TILE = 64, STRIDE = D + 8, KD = D / 16, ND = D / 8;
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(16) TC sQ[TILE * STRIDE];
  __shared__ __align__(16) TC sG[TILE * STRIDE];
  __shared__ float sLse[TILE], sDot[TILE];
  __shared__ dsc_u32 sKeep[2 * TILE];
  const dsc_i64 kvh = blockIdx.x / TILES, j0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 kvBase = kvh * T * D, kt = j0 / TILE;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  // This warp's keys: local rows 16 warp + g and + 8 of the tile.
  const int jl[2] = {16 * warp + g, 16 * warp + g + 8};

  dsc_u32 ka[KD][4], va[KD][4];
  loadRowsA<T, D>(k + kvBase, j0 + 16 * warp, ka);
  loadRowsA<T, D>(v + kvBase, j0 + 16 * warp, va);
  float dK[ND][4], dV[ND][4];
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      dK[n][e] = dV[n][e] = 0.0f;

  for (dsc_i64 bh = kvh * GROUPS; bh < (kvh + 1) * GROUPS; ++bh) {
    const dsc_i64 base = bh * T * D;
    dsc_i64 qBegin, qEnd;
    tileRange<LH, TILES>(rows, bh, kt, CAUSAL ? kt : 0, TILES, qBegin, qEnd);
    for (dsc_i64 qq = qBegin; qq < qEnd; ++qq) {
      const dsc_i64 i0 = tileAt<LH>(cols, qq) * TILE;
      __syncthreads(); // the previous query tile is read
      stageTile<T, D, STRIDE>(q + base, i0, sQ);
      stageTile<T, D, STRIDE>(dout + base, i0, sG);
      for (int i = int(threadIdx.x); i < TILE; i += 128) {
        const bool in = i0 + i < T;
        sLse[i] = in ? lse[bh * T + i0 + i] : 0.0f;
        sDot[i] = in ? rowDot[bh * T + i0 + i] : 0.0f;
      }
      stageKeep<T>(rng, bh, i0, j0, rate, sKeep);
      __syncthreads();

      // Rows: this warp's 16 keys; columns: the tile's 64 queries.
      float s[8][4], dp[8][4];
      rowsTimesTileT<D, STRIDE>(ka, sQ, s);
      rowsTimesTileT<D, STRIDE>(va, sG, dp);
#pragma unroll
      for (int n = 0; n < 8; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int il = n * 8 + 2 * t + (e & 1), j = jl[e >> 1];
          float p = 0.0f, ds = 0.0f;
          if (attnValid<T, CAUSAL, KMH>(keyMask, bh, i0 + il, j0 + j)) {
            p = expf(scale * s[n][e] - sLse[il]);
            const float z =
                (sKeep[2 * il + (j >> 5)] >> (j & 31)) & 1u ? keepScale : 0.0f;
            ds = p * (z * dp[n][e] - sDot[il]);
            p *= z;
          }
          s[n][e] = p;   // (Z P)^T
          dp[n][e] = ds; // dS^T
        }
      // dV += (Z P)^T dO, dK += dS^T Q (scaled when stored).
      accumulateTimesTile<D, STRIDE>(s, sG, dV);
      accumulateTimesTile<D, STRIDE>(dp, sQ, dK);
    }
  }
  storeRows<T, D>(dK, dk + kvBase, j0 + 16 * warp, scale);
  storeRows<T, D>(dV, dv + kvBase, j0 + 16 * warp, 1.0f);
}

/// dQ as attentionGradQ computes it, with 64-query and 64-key tiles: a warp
/// owns 16 queries, keeps Q and dO as A fragments and dQ in registers.
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, bool CAUSAL, int GROUPS,
          int LH, int KMH>
__device__ void attentionGradQRegisters(const TG *dout, const TQ *q,
                                        const TK *k, const TV *v,
                                        const float *lse, const float *rowDot,
                                        const int *keyMask, TO *dq,
                                        const int *rows, const int *cols,
                                        float scale, float rate,
                                        float keepScale, Rng rng) {
  requireRegistersBackward<TG, TQ, TK, TV, TC, D>();
  constexpr int TILE = 64, STRIDE = D + 8, KD = D / 16, ND = D / 8;
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(16) TC sK[TILE * STRIDE];
  __shared__ __align__(16) TC sV[TILE * STRIDE];
  __shared__ dsc_u32 sKeep[2 * TILE];
  const dsc_i64 bh = blockIdx.x / TILES, i0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 base = bh * T * D, kvBase = bh / GROUPS * T * D;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int g = lane >> 2, t = lane & 3;
  // This warp's queries: local rows 16 warp + g and + 8 of the tile.
  const int il[2] = {16 * warp + g, 16 * warp + g + 8};
  float rowLse[2], rowD[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const bool in = i0 + il[h] < T;
    rowLse[h] = in ? lse[bh * T + i0 + il[h]] : 0.0f;
    rowD[h] = in ? rowDot[bh * T + i0 + il[h]] : 0.0f;
  }

  dsc_u32 qa[KD][4], ga[KD][4];
  loadRowsA<T, D>(q + base, i0 + 16 * warp, qa);
  loadRowsA<T, D>(dout + base, i0 + 16 * warp, ga);
  float dQ[ND][4];
#pragma unroll
  for (int n = 0; n < ND; ++n)
    dQ[n][0] = dQ[n][1] = dQ[n][2] = dQ[n][3] = 0.0f;

  const dsc_i64 qt = i0 / TILE;
  dsc_i64 kBegin, kEnd;
  tileRange<LH, TILES>(rows, bh, qt, 0, CAUSAL ? qt + 1 : TILES, kBegin,
                       kEnd);
  for (dsc_i64 kk = kBegin; kk < kEnd; ++kk) {
    const dsc_i64 j0 = tileAt<LH>(cols, kk) * TILE;
    __syncthreads(); // the previous key tile is read
    stageTile<T, D, STRIDE>(k + kvBase, j0, sK);
    stageTile<T, D, STRIDE>(v + kvBase, j0, sV);
    stageKeep<T>(rng, bh, i0, j0, rate, sKeep);
    __syncthreads();

    // Rows: this warp's 16 queries; columns: the tile's 64 keys.
    float s[8][4], dp[8][4];
    rowsTimesTileT<D, STRIDE>(qa, sK, s);
    rowsTimesTileT<D, STRIDE>(ga, sV, dp);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, j = n * 8 + 2 * t + (e & 1);
        float ds = 0.0f;
        if (attnValid<T, CAUSAL, KMH>(keyMask, bh, i0 + il[h], j0 + j)) {
          const float p = expf(scale * s[n][e] - rowLse[h]);
          const float z =
              (sKeep[2 * il[h] + (j >> 5)] >> (j & 31)) & 1u ? keepScale
                                                              : 0.0f;
          ds = p * (z * dp[n][e] - rowD[h]);
        }
        s[n][e] = ds;
      }
    // dQ += dS K (scaled when stored).
    accumulateTimesTile<D, STRIDE>(s, sK, dQ);
  }
  storeRows<T, D>(dQ, dq + base, i0 + 16 * warp, scale);
}

/// D_i = rowsum(dout * out) of every row (the backward's softmax term).
template <typename TG, typename TO, dsc_i64 ROWS, int D>
__device__ void attentionRowDot(const TG *dout, const TO *out, float *rowDot) {
  DSC_GRID_LOOP(r, ROWS) {
    float dot = 0.0f;
    for (int d = 0; d < D; ++d)
      dot += ld(dout, r * D + d) * ld(out, r * D + d);
    rowDot[r] = dot;
  }
}

/// P (recomputed from lse, 0 where masked) and dS = P (Z dP - D_i) of one
/// [TILE, TILE] tile, from S = q k^T and dP = dout v^T in sS / sDP; writes
/// the dropped Z P to sP (when KEEP_P) and dS to sDS.
template <dsc_i64 T, int TILE, bool CAUSAL, int KMH, bool KEEP_P, int WARPS,
          typename TC>
__device__ __forceinline__ void
attentionDs(const float *sS, const float *sDP, TC *sP, TC *sDS,
            const float *lse, const float *rowDot, const int *keyMask,
            dsc_i64 bh, dsc_i64 i0, dsc_i64 j0, float scale, float rate,
            float keepScale, Rng rng) {
  if constexpr (TILE % 4 == 0) {
    // Four consecutive scores per thread: one Philox block for their
    // dropout.
    for (int e = 4 * int(threadIdx.x); e < TILE * TILE;
         e += 4 * WARPS * 32) {
      const dsc_i64 i = i0 + e / TILE, j = j0 + e % TILE;
      const float4 s4 = *reinterpret_cast<const float4 *>(sS + e);
      const float4 dp4 = *reinterpret_cast<const float4 *>(sDP + e);
      const float s[4] = {s4.x, s4.y, s4.z, s4.w},
                  dp[4] = {dp4.x, dp4.y, dp4.z, dp4.w};
      bool valid[4];
#pragma unroll
      for (int l = 0; l < 4; ++l)
        valid[l] = attnValid<T, CAUSAL, KMH>(keyMask, bh, i, j + l);
      bool keep[4] = {true, true, true, true};
      float rowLse = 0.0f, rowDotI = 0.0f;
      if (valid[0] || valid[1] || valid[2] || valid[3]) {
        keep4<T>(rng, bh, i, j, rate, keep);
        rowLse = lse[bh * T + i];
        rowDotI = rowDot[bh * T + i];
      }
#pragma unroll
      for (int l = 0; l < 4; ++l) {
        float p = 0.0f, ds = 0.0f;
        if (valid[l]) {
          p = expf(scale * s[l] - rowLse);
          const float z = keep[l] ? keepScale : 0.0f;
          ds = p * (z * dp[l] - rowDotI);
          p *= z;
        }
        if constexpr (KEEP_P)
          st(sP, e + l, p);
        st(sDS, e + l, ds);
      }
    }
  } else {
    for (int e = int(threadIdx.x); e < TILE * TILE; e += WARPS * 32) {
      const dsc_i64 i = i0 + e / TILE, j = j0 + e % TILE;
      float p = 0.0f, ds = 0.0f;
      if (attnValid<T, CAUSAL, KMH>(keyMask, bh, i, j)) {
        p = expf(scale * sS[e] - lse[bh * T + i]);
        bool keep[1];
        rng.keep<1>((bh * T + i) * T + j, rate, keep);
        const float z = keep[0] ? keepScale : 0.0f;
        ds = p * (z * sDP[e] - rowDot[bh * T + i]);
        p *= z;
      }
      if constexpr (KEEP_P)
        st(sP, e, p);
      st(sDS, e, ds);
    }
  }
}

/// dK and dV of one key tile of key/value head kvh: loops over the GROUPS
/// query heads that share it and the query tiles that see it (`rows`/`cols`:
/// the transposed block layout, LH > 0; `keyMask`: key padding, KMH > 0).
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL,
          int WARPS, int GROUPS, int LH, int KMH>
__device__ void attentionGradKV(const TG *dout, const TQ *q, const TK *k,
                                const TV *v, const float *lse,
                                const float *rowDot, const int *keyMask,
                                TO *dk, TO *dv, const int *rows,
                                const int *cols, float scale, float rate,
                                float keepScale, Rng rng) {
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(32) TC sK[TILE * D];
  __shared__ __align__(32) TC sV[TILE * D];
  __shared__ __align__(32) TC sQ[TILE * D];
  __shared__ __align__(32) TC sG[TILE * D];
  __shared__ __align__(32) TC sP[TILE * TILE];
  __shared__ __align__(32) TC sDS[TILE * TILE];
  __shared__ __align__(32) float sS[TILE * TILE];
  __shared__ __align__(32) float sDP[TILE * TILE];
  __shared__ __align__(32) float sDK[TILE * D];
  __shared__ __align__(32) float sDV[TILE * D];
  const dsc_i64 kvh = blockIdx.x / TILES, j0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 kvBase = kvh * T * D;
  loadTile<T, D, TILE, WARPS>(k + kvBase, j0, sK);
  loadTile<T, D, TILE, WARPS>(v + kvBase, j0, sV);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sDK[e] = sDV[e] = 0.0f;
  for (dsc_i64 bh = kvh * GROUPS; bh < (kvh + 1) * GROUPS; ++bh) {
    const dsc_i64 base = bh * T * D, kt = j0 / TILE;
    // Causal: query tiles ending before key j0 see none of this tile.
    dsc_i64 qBegin, qEnd;
    tileRange<LH, TILES>(rows, bh, kt, CAUSAL ? kt : 0, TILES, qBegin, qEnd);
    for (dsc_i64 qq = qBegin; qq < qEnd; ++qq) {
      const dsc_i64 i0 = tileAt<LH>(cols, qq) * TILE;
      loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
      loadTile<T, D, TILE, WARPS>(dout + base, i0, sG);
      __syncthreads();
      mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sK, D, sS,
                                                            TILE);
      mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sG, D, sV, D, sDP,
                                                            TILE);
      __syncthreads();
      attentionDs<T, TILE, CAUSAL, KMH, true, WARPS>(
          sS, sDP, sP, sDS, lse, rowDot, keyMask, bh, i0, j0, scale, rate,
          keepScale, rng);
      __syncthreads();
      // dv += (Z P)^T dout; dk += dS^T q (scaled when stored).
      mmaTile<TC, TILE, D, TILE, true, false, true, WARPS>(sP, TILE, sG, D, sDV,
                                                           D);
      mmaTile<TC, TILE, D, TILE, true, false, true, WARPS>(sDS, TILE, sQ, D, sDK,
                                                           D);
      __syncthreads();
    }
  }
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32) {
    const dsc_i64 j = j0 + e / D;
    if (j < T) {
      st(dk, kvBase + j * D + e % D, scale * sDK[e]);
      st(dv, kvBase + j * D + e % D, sDV[e]);
    }
  }
}

/// dQ of one query tile: loops over the key tiles it sees (`rows`/`cols`:
/// the block layout, LH > 0; `keyMask`: key padding, KMH > 0).
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL,
          int WARPS, int GROUPS, int LH, int KMH>
__device__ void attentionGradQ(const TG *dout, const TQ *q, const TK *k,
                               const TV *v, const float *lse,
                               const float *rowDot, const int *keyMask,
                               TO *dq, const int *rows, const int *cols,
                               float scale, float rate, float keepScale,
                               Rng rng) {
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(32) TC sQ[TILE * D];
  __shared__ __align__(32) TC sG[TILE * D];
  __shared__ __align__(32) TC sK[TILE * D];
  __shared__ __align__(32) TC sV[TILE * D];
  __shared__ __align__(32) TC sDS[TILE * TILE];
  __shared__ __align__(32) float sS[TILE * TILE];
  __shared__ __align__(32) float sDP[TILE * TILE];
  __shared__ __align__(32) float sDQ[TILE * D];
  const dsc_i64 bh = blockIdx.x / TILES, i0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 base = bh * T * D, kvBase = bh / GROUPS * T * D;
  loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
  loadTile<T, D, TILE, WARPS>(dout + base, i0, sG);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sDQ[e] = 0.0f;
  const dsc_i64 qt = i0 / TILE;
  dsc_i64 kBegin, kEnd;
  tileRange<LH, TILES>(rows, bh, qt, 0, CAUSAL ? qt + 1 : TILES, kBegin,
                       kEnd);
  for (dsc_i64 kk = kBegin; kk < kEnd; ++kk) {
    const dsc_i64 j0 = tileAt<LH>(cols, kk) * TILE;
    loadTile<T, D, TILE, WARPS>(k + kvBase, j0, sK);
    loadTile<T, D, TILE, WARPS>(v + kvBase, j0, sV);
    __syncthreads();
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sK, D, sS,
                                                          TILE);
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sG, D, sV, D, sDP,
                                                          TILE);
    __syncthreads();
    attentionDs<T, TILE, CAUSAL, KMH, false, WARPS>(
        sS, sDP, sDS, sDS, lse, rowDot, keyMask, bh, i0, j0, scale, rate,
        keepScale, rng);
    __syncthreads();
    mmaTile<TC, TILE, D, TILE, false, false, true, WARPS>(sDS, TILE, sK, D,
                                                          sDQ, D);
    __syncthreads();
  }
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32) {
    const dsc_i64 i = i0 + e / D;
    if (i < T)
      st(dq, base + i * D + e % D, scale * sDQ[e]);
  }
}

} // namespace dsc
