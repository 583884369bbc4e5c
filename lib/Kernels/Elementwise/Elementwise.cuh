//===- Elementwise.cuh - Elementwise device templates ----------*- CUDA -*-===//
//
// fill, iota, convert (dsc.convert and copies between storage types), the
// pieces of concat/split, the head split/merge, add, reduce_to, gelu,
// dropout, the bias epilogues and their gradients: the CUDA side of
// ElementwiseCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// dsc.fill (cpu::fillF32 / fillI32): the value converted as the CPU does.
template <typename T, dsc_i64 N> __device__ void fill(T *out, float v) {
  DSC_GRID_LOOP(i, N) { st(out, i, v); }
}
template <dsc_i64 N> __device__ void fillInt(int *out, int v) {
  DSC_GRID_LOOP(i, N) { out[i] = v; }
}
template <dsc_i64 N> __device__ void fillI64(dsc_i64 *out, dsc_i64 v) {
  DSC_GRID_LOOP(i, N) { out[i] = v; }
}

/// dsc.flat_resize: the first min(FROM, TO) elements, zeros after them
/// (f32, or the bytes of 4-bit weights).
template <dsc_i64 FROM, dsc_i64 TO, typename T>
__device__ void flatResize(const T *x, T *y) {
  DSC_GRID_LOOP(i, TO) { y[i] = i < FROM ? x[i] : T(0); }
}

/// cpu::iota.
template <dsc_i64 N, dsc_i64 START, dsc_i64 STEP> __device__ void iota(int *out) {
  DSC_GRID_LOOP(i, N) { out[i] = int(START + i * STEP); }
}

/// out = in between float storage types (dsc.convert, Copy): through f32,
/// the store rounding to nearest even as cpu::Exec does.
template <typename TI, typename TO, dsc_i64 N, int VEC>
__device__ void convert(const TI *in, TO *out) {
  DSC_GRID_LOOP(g, N / VEC) {
    float v[VEC];
    ldv<VEC>(in, g * VEC, v);
    stv<VEC>(out, g * VEC, v);
  }
}

/// One piece of dsc.concat / dsc.split: the tensor viewed as [OUTER,
/// TOTAL * INNER] and the piece [OUTER, W * INNER] at column AT * INNER
/// (cpu::concat / cpu::split). TO_WHOLE: concat direction.
template <typename TS, typename TD, bool TO_WHOLE, dsc_i64 OUTER,
          dsc_i64 INNER, dsc_i64 TOTAL, dsc_i64 AT, dsc_i64 W, int VEC>
__device__ void copyPiece(const TS *src, TD *dst) {
  constexpr dsc_i64 run = W * INNER;
  DSC_GRID_LOOP(g, OUTER *(run / VEC)) {
    const dsc_i64 o = g / (run / VEC), k = (g % (run / VEC)) * VEC;
    const dsc_i64 whole = o * TOTAL * INNER + AT * INNER + k, piece = o * run + k;
    float v[VEC];
    ldv<VEC>(src, TO_WHOLE ? piece : whole, v);
    stv<VEC>(dst, TO_WHOLE ? whole : piece, v);
  }
}

/// dsc.split_heads / dsc.bias_split_heads / dsc.merge_heads for one part p
/// (cpu::splitHeads / mergeHeads): x[B, T, P*H*D] <-> heads[B, H, T, D] at
/// column (p*H + h)*D. A block moves TT tokens of one (b, h) through shared
/// memory: the token-major side in runs of D, the head side as one
/// contiguous run of TT*D; the bias is added on the way in.
template <dsc_i64 T, dsc_i64 H, dsc_i64 D, dsc_i64 P, int TT>
struct HeadTile {
  static constexpr dsc_i64 W = P * H * D;
  static constexpr dsc_i64 tiles = (T + TT - 1) / TT;
  dsc_i64 b, h, t0, n, col, headBase;
  __device__ __forceinline__ HeadTile(int part) {
    const dsc_i64 blk = blockIdx.x;
    const dsc_i64 tt = blk % tiles;
    h = (blk / tiles) % H;
    b = blk / (tiles * H);
    t0 = tt * TT;
    n = (T - t0 < TT ? T - t0 : TT) * D;
    col = (dsc_i64(part) * H + h) * D;
    headBase = ((b * H + h) * T + t0) * D;
  }
  /// Offset in x of element k (= t * D + d) of the tile.
  __device__ __forceinline__ dsc_i64 xAt(dsc_i64 k) const {
    return (b * T + t0 + k / D) * W + col + k % D;
  }
};

template <typename TX, typename TB, typename TH, bool BIAS, dsc_i64 T,
          dsc_i64 H, dsc_i64 D, dsc_i64 P, int TT>
__device__ void splitHeadsPart(const TX *x, const TB *bias, TH *heads,
                               int part) {
  __shared__ float tile[TT * D];
  const HeadTile<T, H, D, P, TT> at(part);
  for (dsc_i64 k = threadIdx.x; k < at.n; k += blockDim.x) {
    float v = ld(x, at.xAt(k));
    if constexpr (BIAS)
      v += ld(bias, at.col + k % D);
    tile[k] = v;
  }
  __syncthreads();
  for (dsc_i64 k = threadIdx.x; k < at.n; k += blockDim.x)
    st(heads, at.headBase + k, tile[k]);
}

template <typename TH, typename TX, dsc_i64 T, dsc_i64 H, dsc_i64 D,
          dsc_i64 P, int TT>
__device__ void mergeHeadsPart(const TH *heads, TX *x, int part) {
  __shared__ float tile[TT * D];
  const HeadTile<T, H, D, P, TT> at(part);
  for (dsc_i64 k = threadIdx.x; k < at.n; k += blockDim.x)
    tile[k] = ld(heads, at.headBase + k);
  __syncthreads();
  for (dsc_i64 k = threadIdx.x; k < at.n; k += blockDim.x)
    st(x, at.xAt(k), tile[k]);
}

//===----------------------------------------------------------------------===//
// Math shared by forward and backward kernels (ElementwiseCpu.cpp geluAt,
// geluDerivativeAt): the same formulas, with libdevice expf/erff.
//===----------------------------------------------------------------------===//

template <bool TANH> __device__ __forceinline__ float geluAt(float v) {
  if constexpr (TANH) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    return v * (1.0f / (1.0f + expf(-2.0f * u)));
  } else {
    return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
  }
}

template <bool TANH>
__device__ __forceinline__ float geluDerivativeAt(float v) {
  if constexpr (TANH) {
    const float u = 0.7978845608028654f * (v + 0.044715f * v * v * v);
    const float du = 0.7978845608028654f * (1.0f + 3.0f * 0.044715f * v * v);
    const float s = 1.0f / (1.0f + expf(-2.0f * u));
    return s + v * 2.0f * s * (1.0f - s) * du;
  } else {
    const float cdf = 0.5f * (1.0f + erff(v * 0.7071067811865476f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * v * v);
    return cdf + v * pdf;
  }
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// dsc.add with numpy broadcast of b (cpu::addBroadcast): a viewed as
/// [N / L, L]; BOFF(r) is the offset of row r in b, and b is a row
/// (B_FULL) or one value per row.
template <typename TA, typename TB, typename TO, dsc_i64 N, dsc_i64 L,
          bool B_FULL, int VEC, typename BOff>
__device__ void addBroadcast(const TA *a, const TB *b, TO *out, BOff boff) {
  DSC_GRID_LOOP(g, N / VEC) {
    const dsc_i64 i = g * VEC, r = i / L, j = i % L;
    const dsc_i64 bo = boff(r);
    float va[VEC], vb[VEC];
    ldv<VEC>(a, i, va);
    if constexpr (B_FULL) {
      ldv<VEC>(b, bo + j, vb);
    } else {
      const float s = ld(b, bo);
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        vb[l] = s;
    }
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      va[l] = va[l] + vb[l];
    stv<VEC>(out, i, va);
  }
}

/// dsc.reduce_to (cpu::reduceTo), innermost dim kept: out[o, c] = sum over q
/// of x[XOFF(o, q) + c], q in order.
template <typename TX, typename TO, dsc_i64 OUTROWS, dsc_i64 SUMROWS,
          dsc_i64 L, typename XOff>
__device__ void reduceToColumns(const TX *x, TO *out, XOff xoff) {
  DSC_GRID_LOOP(t, OUTROWS *L) {
    const dsc_i64 o = t / L, c = t % L;
    float s = 0.0f;
    for (dsc_i64 q = 0; q < SUMROWS; ++q)
      s += ld(x, xoff(o, q) + c);
    st(out, t, s);
  }
}

/// dsc.reduce_to, innermost dim summed: each run of L summed in f32, runs
/// accumulated in double (as the CPU does).
template <typename TX, typename TO, dsc_i64 OUTROWS, dsc_i64 SUMROWS,
          dsc_i64 L, typename XOff>
__device__ void reduceToScalars(const TX *x, TO *out, XOff xoff) {
  DSC_GRID_LOOP(o, OUTROWS) {
    double acc = 0.0;
    for (dsc_i64 q = 0; q < SUMROWS; ++q) {
      const dsc_i64 base = xoff(o, q);
      float s = 0.0f;
      for (dsc_i64 c = 0; c < L; ++c)
        s += ld(x, base + c);
      acc += double(s);
    }
    st(out, o, float(acc));
  }
}

/// dsc.gelu / dsc.gelu_grad (cpu::gelu / geluGrad).
template <typename TX, typename TY, bool TANH, dsc_i64 N, int VEC>
__device__ void gelu(const TX *x, TY *y) {
  DSC_GRID_LOOP(g, N / VEC) {
    float v[VEC];
    ldv<VEC>(x, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[l] = geluAt<TANH>(v[l]);
    stv<VEC>(y, g * VEC, v);
  }
}
template <typename TD, typename TX, typename TO, bool TANH, dsc_i64 N, int VEC>
__device__ void geluGrad(const TD *dy, const TX *x, TO *dx) {
  DSC_GRID_LOOP(g, N / VEC) {
    float d[VEC], v[VEC];
    ldv<VEC>(dy, g * VEC, d);
    ldv<VEC>(x, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      d[l] = d[l] * geluDerivativeAt<TANH>(v[l]);
    stv<VEC>(dx, g * VEC, d);
  }
}

/// dsc.bias_gelu (cpu::biasGelu): y = gelu(x + b), x [N / C, C].
template <typename TX, typename TB, typename TY, bool TANH, dsc_i64 N,
          dsc_i64 C, int VEC>
__device__ void biasGelu(const TX *x, const TB *b, TY *y) {
  DSC_GRID_LOOP(g, N / VEC) {
    const dsc_i64 i = g * VEC;
    float v[VEC], vb[VEC];
    ldv<VEC>(x, i, v);
    ldv<VEC>(b, i % C, vb);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[l] = geluAt<TANH>(v[l] + vb[l]);
    stv<VEC>(y, i, v);
  }
}

/// dsc.dropout (cpu::dropout): y = keep ? x * scale : 0.
template <typename TX, typename TY, dsc_i64 N, int VEC>
__device__ void dropout(const TX *x, TY *y, float rate, float scale, Rng rng) {
  DSC_GRID_LOOP(g, N / VEC) {
    const dsc_i64 i = g * VEC;
    float v[VEC];
    bool k[VEC];
    ldv<VEC>(x, i, v);
    rng.keep<VEC>(i, rate, k);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[l] = k[l] ? v[l] * scale : 0.0f;
    stv<VEC>(y, i, v);
  }
}

/// dsc.bias_dropout_add (cpu::biasDropoutAdd): y = res + dropout(x + b);
/// RATE0: rate 0, no mask and no scaling (the CPU's exact arithmetic).
template <typename TX, typename TB, typename TR, typename TY, bool RATE0,
          dsc_i64 N, dsc_i64 C, int VEC>
__device__ void biasDropoutAdd(const TX *x, const TB *b, const TR *res, TY *y,
                               float rate, float scale, Rng rng) {
  DSC_GRID_LOOP(g, N / VEC) {
    const dsc_i64 i = g * VEC;
    float v[VEC], vb[VEC], vr[VEC];
    bool k[VEC];
    ldv<VEC>(x, i, v);
    ldv<VEC>(b, i % C, vb);
    ldv<VEC>(res, i, vr);
    if constexpr (!RATE0)
      rng.keep<VEC>(i, rate, k);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float s = v[l] + vb[l];
      if constexpr (RATE0)
        v[l] = vr[l] + s;
      else
        v[l] = vr[l] + (k[l] ? s * scale : 0.0f);
    }
    stv<VEC>(y, i, v);
  }
}

//===----------------------------------------------------------------------===//
// Rows with a bias gradient (cpu::rowsWithColumnSum): x [ROWS, C] in blocks
// of 32 rows; a thread owns VEC columns of one block, writes dx and the
// block's column partial sums part[blk, C]; columnSum() merges the blocks in
// order.
//===----------------------------------------------------------------------===//

/// dsc.bias_gelu_grad (cpu::biasGeluGrad).
template <typename TD, typename TX, typename TB, typename TO, bool TANH,
          dsc_i64 ROWS, dsc_i64 C, int VEC>
__device__ void biasGeluGradRows(const TD *dy, const TX *x, const TB *b,
                                 TO *dx, float *part) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  DSC_GRID_LOOP(t, blocks *(C / VEC)) {
    const dsc_i64 blk = t / (C / VEC), c = (t % (C / VEC)) * VEC;
    const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
    float acc[VEC], vb[VEC];
    ldv<VEC>(b, c, vb);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      acc[l] = 0.0f;
    for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
      float d[VEC], v[VEC];
      ldv<VEC>(dy, r * C + c, d);
      ldv<VEC>(x, r * C + c, v);
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        d[l] = d[l] * geluDerivativeAt<TANH>(v[l] + vb[l]);
        acc[l] += d[l];
      }
      stv<VEC>(dx, r * C + c, d);
    }
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      part[blk * C + c + l] = acc[l];
  }
}

/// dsc.dropout_bias_grad (cpu::dropoutBiasGrad): dx = dropout(dy) with the
/// forward mask, db = column sums of dx.
template <typename TD, typename TO, bool RATE0, dsc_i64 ROWS, dsc_i64 C,
          int VEC>
__device__ void dropoutBiasGradRows(const TD *dy, TO *dx, float *part,
                                    float rate, float scale, Rng rng) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  DSC_GRID_LOOP(t, blocks *(C / VEC)) {
    const dsc_i64 blk = t / (C / VEC), c = (t % (C / VEC)) * VEC;
    const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
    float acc[VEC];
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      acc[l] = 0.0f;
    for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
      float d[VEC];
      bool k[VEC];
      ldv<VEC>(dy, r * C + c, d);
      if constexpr (!RATE0)
        rng.keep<VEC>(r * C + c, rate, k);
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        if constexpr (!RATE0)
          d[l] = k[l] ? d[l] * scale : 0.0f;
        acc[l] += d[l];
      }
      stv<VEC>(dx, r * C + c, d);
    }
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      part[blk * C + c + l] = acc[l];
  }
}

} // namespace dsc
