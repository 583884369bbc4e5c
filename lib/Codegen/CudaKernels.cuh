//===- CudaKernels.cuh - Device library of the dsc CUDA emitter -*- CUDA -*-===//
//
// Pasted verbatim at the top of every translation unit `dsc-translate
// --emit-cuda` writes (lib/Codegen/CudaEmitter.cpp embeds it at build time).
// The emitter instantiates these templates with every shape, dtype and
// attribute baked in as template arguments, inside one `extern "C"
// __global__` wrapper per specialised instruction.
//
// Every template mirrors a CPU kernel of its family in lib/Kernels (named
// in its comment) operation for operation: same formulas, same masking
// conventions, same Philox mapping (so dropout and MLM masks are bitwise the
// CPU's), and the same fixed summation blocks where the CPU has them (32-row
// blocks for bias/LayerNorm parameter gradients), so no result depends on
// thread scheduling. Loads widen to f32 and stores round to nearest even, so
// every computation is f32 whatever the storage type.
//
// Compiles under NVRTC (-default-device) and under nvcc; uses no standard
// library headers.
//
//===----------------------------------------------------------------------===//
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

typedef long long dsc_i64;
typedef unsigned long long dsc_u64;
typedef unsigned int dsc_u32;

/// First error a kernel found (0: none): an index into the message table of
/// the emitted header (`dsc_status_messages`). Kernels never trap; the
/// runtime reads this after a step and fails with the message.
extern "C" {
__device__ dsc_u32 dsc_status = 0;
}

namespace dsc {

__device__ __forceinline__ void fail(dsc_u32 code) {
  atomicCAS(&dsc_status, 0u, code);
}

//===----------------------------------------------------------------------===//
// Loads and stores: f32 in registers, f32/f16/bf16 in memory.
//===----------------------------------------------------------------------===//

__device__ __forceinline__ float ld(const float *p, dsc_i64 i) { return p[i]; }
__device__ __forceinline__ float ld(const __half *p, dsc_i64 i) {
  return __half2float(p[i]);
}
__device__ __forceinline__ float ld(const __nv_bfloat16 *p, dsc_i64 i) {
  return __bfloat162float(p[i]);
}
__device__ __forceinline__ void st(float *p, dsc_i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void st(__half *p, dsc_i64 i, float v) {
  p[i] = __float2half_rn(v);
}
__device__ __forceinline__ void st(__nv_bfloat16 *p, dsc_i64 i, float v) {
  p[i] = __float2bfloat16_rn(v);
}

/// Four consecutive elements starting at i (i a multiple of 4, buffers
/// 16-byte aligned): one float4, or two __half2 / __nv_bfloat162 in 8 bytes.
__device__ __forceinline__ void ld4(const float *p, dsc_i64 i, float (&v)[4]) {
  const float4 q = *reinterpret_cast<const float4 *>(p + i);
  v[0] = q.x;
  v[1] = q.y;
  v[2] = q.z;
  v[3] = q.w;
}
__device__ __forceinline__ void ld4(const __half *p, dsc_i64 i, float (&v)[4]) {
  const uint2 q = *reinterpret_cast<const uint2 *>(p + i);
  const float2 a = __half22float2(*reinterpret_cast<const __half2 *>(&q.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2 *>(&q.y));
  v[0] = a.x;
  v[1] = a.y;
  v[2] = b.x;
  v[3] = b.y;
}
__device__ __forceinline__ void ld4(const __nv_bfloat16 *p, dsc_i64 i,
                                    float (&v)[4]) {
  const uint2 q = *reinterpret_cast<const uint2 *>(p + i);
  const float2 a =
      __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&q.x));
  const float2 b =
      __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162 *>(&q.y));
  v[0] = a.x;
  v[1] = a.y;
  v[2] = b.x;
  v[3] = b.y;
}
__device__ __forceinline__ void st4(float *p, dsc_i64 i, const float (&v)[4]) {
  *reinterpret_cast<float4 *>(p + i) = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void st4(__half *p, dsc_i64 i, const float (&v)[4]) {
  __half2 a = __floats2half2_rn(v[0], v[1]), b = __floats2half2_rn(v[2], v[3]);
  uint2 q;
  q.x = *reinterpret_cast<const dsc_u32 *>(&a);
  q.y = *reinterpret_cast<const dsc_u32 *>(&b);
  *reinterpret_cast<uint2 *>(p + i) = q;
}
__device__ __forceinline__ void st4(__nv_bfloat16 *p, dsc_i64 i,
                                    const float (&v)[4]) {
  __nv_bfloat162 a = __floats2bfloat162_rn(v[0], v[1]),
                 b = __floats2bfloat162_rn(v[2], v[3]);
  uint2 q;
  q.x = *reinterpret_cast<const dsc_u32 *>(&a);
  q.y = *reinterpret_cast<const dsc_u32 *>(&b);
  *reinterpret_cast<uint2 *>(p + i) = q;
}

/// VEC (1 or 4) consecutive elements.
template <int VEC, typename T>
__device__ __forceinline__ void ldv(const T *p, dsc_i64 i, float (&v)[VEC]) {
  if constexpr (VEC == 4)
    ld4(p, i, v);
  else
    v[0] = ld(p, i);
}
template <int VEC, typename T>
__device__ __forceinline__ void stv(T *p, dsc_i64 i, const float (&v)[VEC]) {
  if constexpr (VEC == 4)
    st4(p, i, v);
  else
    st(p, i, v[0]);
}

/// RoundToHalf of an f32 value kept in f32 (cpu::roundToHalf):
/// 0 = none, 1 = f16, 2 = bf16. Round to nearest even, inf/NaN kept.
template <int ROUND> __device__ __forceinline__ float roundTo(float v) {
  if constexpr (ROUND == 1)
    return __half2float(__float2half_rn(v));
  else if constexpr (ROUND == 2)
    return __bfloat162float(__float2bfloat16_rn(v));
  else
    return v;
}

/// Type traits (no standard library headers under NVRTC).
template <typename A, typename B> struct Same {
  static constexpr bool value = false;
};
template <typename A> struct Same<A, A> {
  static constexpr bool value = true;
};
template <bool C, typename A, typename B> struct Select {
  using type = A;
};
template <typename A, typename B> struct Select<false, A, B> {
  using type = B;
};

__device__ __forceinline__ bool nonFinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

//===----------------------------------------------------------------------===//
// Philox4x32-10 (include/dsc/Runtime/Philox.h): key = {seed, seed >> 32};
// dropout element i: counter {i / 4, stream, offset, offset >> 32}, lane
// i % 4, keep iff uniform(lane) >= rate; MLM element i: counter {i, stream,
// offset, offset >> 32}.
//===----------------------------------------------------------------------===//

struct Bits4 {
  dsc_u32 v[4];
};

__device__ __forceinline__ Bits4 philox(dsc_u32 c0, dsc_u32 c1, dsc_u32 c2,
                                        dsc_u32 c3, dsc_u64 seed) {
  dsc_u32 k0 = dsc_u32(seed), k1 = dsc_u32(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const dsc_u32 hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const dsc_u32 hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const dsc_u32 n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  Bits4 b;
  b.v[0] = c0;
  b.v[1] = c1;
  b.v[2] = c2;
  b.v[3] = c3;
  return b;
}

__device__ __forceinline__ float uniform(dsc_u32 x) {
  return __uint2float_rn(x >> 8) * 0x1p-24f;
}

/// The Philox context of one dropout instruction.
struct Rng {
  dsc_u32 stream;
  dsc_u64 seed, offset;
  __device__ __forceinline__ Bits4 block(dsc_i64 i) const {
    return philox(dsc_u32(i >> 2), stream, dsc_u32(offset),
                  dsc_u32(offset >> 32), seed);
  }
  /// Keep flags of elements i .. i+VEC-1 (i a multiple of VEC).
  template <int VEC>
  __device__ __forceinline__ void keep(dsc_i64 i, float rate,
                                       bool (&k)[VEC]) const {
    const Bits4 b = block(i);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      k[l] = uniform(b.v[(i + l) & 3]) >= rate;
  }
};

//===----------------------------------------------------------------------===//
// Reductions: THREADS (a power of two >= 32) threads own one row; a warp
// reduces with shuffles, a block through shared memory. Every thread of the
// row gets the result.
//===----------------------------------------------------------------------===//

template <int THREADS, typename Op>
__device__ __forceinline__ float rowReduce(float v, Op op, float identity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if constexpr (THREADS > 32) {
    __shared__ float part[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); // part[] may still be read by the previous reduction
    if (lane == 0)
      part[warp] = v;
    __syncthreads();
    v = lane < THREADS / 32 ? part[lane] : identity;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
      v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  }
  return v;
}

struct Sum {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return a + b;
  }
};
struct Max {
  __device__ __forceinline__ float operator()(float a, float b) const {
    return fmaxf(a, b);
  }
};

template <int THREADS> __device__ __forceinline__ float rowSum(float v) {
  return rowReduce<THREADS>(v, Sum(), 0.0f);
}
template <int THREADS> __device__ __forceinline__ float rowMax(float v) {
  return rowReduce<THREADS>(v, Max(), -__int_as_float(0x7f800000));
}

/// Sum over the block (BLOCK threads, a power of two) in double, in a fixed
/// order; the result is valid in thread 0.
template <int BLOCK> __device__ double blockSumDouble(double v) {
  __shared__ double part[BLOCK];
  part[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double r = part[0];
  __syncthreads();
  return r;
}

/// Row r of a row kernel: rows of THREADS threads, RPB rows per block
/// (RPB = 32 * 4 / THREADS for warp rows, 1 otherwise).
template <int THREADS> __device__ __forceinline__ dsc_i64 rowIndex() {
  if constexpr (THREADS == 32)
    return dsc_i64(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  else
    return blockIdx.x;
}
template <int THREADS> __device__ __forceinline__ int rowLane() {
  return THREADS == 32 ? int(threadIdx.x & 31) : int(threadIdx.x);
}

/// Grid-stride loop over n items.
#define DSC_GRID_LOOP(i, n)                                                    \
  for (dsc_i64 i = dsc_i64(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += dsc_i64(gridDim.x) * blockDim.x)

/// Parameter gradients (bias, LayerNorm and RMSNorm weights) are summed in
/// fixed blocks of kRowBlock rows (cpu::rowsWithColumnSum); columnSum()
/// merges the blocks' column partial sums part[blk * STRIDE + c] in order.
constexpr dsc_i64 kRowBlock = 32;

template <typename TO, dsc_i64 BLOCKS, dsc_i64 C, dsc_i64 STRIDE>
__device__ void columnSum(const float *part, TO *out) {
  DSC_GRID_LOOP(c, C) {
    float s = 0.0f;
    for (dsc_i64 k = 0; k < BLOCKS; ++k)
      s += part[k * STRIDE + c];
    st(out, c, s);
  }
}

//===----------------------------------------------------------------------===//
// Row kernels: THREADS threads per row (a warp, or a block of up to 1024),
// the row cached in registers: ITEMS vectors of VEC per thread, element
// (k * THREADS + lane) * VEC + l.
//===----------------------------------------------------------------------===//

template <int THREADS, int ITEMS, int VEC, dsc_i64 C, typename T>
__device__ __forceinline__ void loadRow(const T *p, dsc_i64 base, int lane,
                                        float (&v)[ITEMS][VEC],
                                        float fillValue) {
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c < C) {
      ldv<VEC>(p, base + c, v[k]);
    } else {
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        v[k][l] = fillValue;
    }
  }
}

template <int THREADS, int ITEMS, int VEC, dsc_i64 C, typename T>
__device__ __forceinline__ void storeRow(T *p, dsc_i64 base, int lane,
                                         const float (&v)[ITEMS][VEC]) {
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c < C)
      stv<VEC>(p, base + c, v[k]);
  }
}

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

/// cpu::iota.
template <dsc_i64 N, dsc_i64 START, dsc_i64 STEP> __device__ void iota(int *out) {
  DSC_GRID_LOOP(i, N) { out[i] = int(START + i * STEP); }
}

/// out = round(in): RoundToHalf (ROUND 1/2), or a copy between storage types.
template <typename TI, typename TO, int ROUND, dsc_i64 N, int VEC>
__device__ void convert(const TI *in, TO *out) {
  DSC_GRID_LOOP(g, N / VEC) {
    float v[VEC];
    ldv<VEC>(in, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[l] = roundTo<ROUND>(v[l]);
    stv<VEC>(out, g * VEC, v);
  }
}

/// Byte copy of same-typed buffers (Copy of i32/i64 buffers).
template <typename T, dsc_i64 N> __device__ void copyRaw(const T *in, T *out) {
  DSC_GRID_LOOP(i, N) { out[i] = in[i]; }
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

/// dsc.layer_norm / dsc.invertible_layer_norm (cpu::layerNorm): two-pass
/// mean and variance, rstd = 1 / sqrt(var + eps).
template <typename TX, typename TG, typename TB, typename TY, typename TR,
          bool RSTD, dsc_i64 ROWS, dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void layerNorm(const TX *x, const TG *gamma, const TB *beta, TY *y,
                          TR *rstdOut, float eps) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      s += v[k][l];
  const float mean = rowSum<THREADS>(s) / float(C);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC + l;
      const float d = c < C ? v[k][l] - mean : 0.0f;
      q += d * d;
    }
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
  if constexpr (RSTD)
    if (lane == 0)
      st(rstdOut, r, rstd);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC], b[VEC];
    ldv<VEC>(gamma, c, g);
    ldv<VEC>(beta, c, b);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] - mean) * rstd * g[l] + b[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

/// dsc.layer_norm_grad and dsc.layer_norm_grad_from_output
/// (cpu::layerNormGrad / layerNormGradFromOutput through layerNormGradRows):
/// THREADS threads own a block of 32 rows, rows in order, so each thread
/// keeps the dgamma/dbeta partial sums of its columns in registers and
/// writes them to part[blk, 2C] (dgamma then dbeta), merged by columnSum.
/// FROM_OUTPUT: x_hat = (y - beta) / gamma with the saved rstd; a zero gamma
/// element sets the status (the CPU refuses the same input). DRES: the
/// residual gradient dres is added to dx afterwards (a separate rounding, as
/// the CPU does, never contracted into an FMA).
template <typename TD, typename TX, typename TG, typename TB, typename TS,
          typename TR, typename TO, bool FROM_OUTPUT, bool DRES, dsc_i64 ROWS,
          dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void layerNormGradRows(const TD *dy, const TX *xOrY,
                                  const TG *gamma, const TB *beta,
                                  const TS *rstdIn, const TR *dres, TO *dx,
                                  float *part, float eps, dsc_u32 code) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  const dsc_i64 blk = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (blk >= blocks)
    return;
  float g[ITEMS][VEC], bt[ITEMS][VEC], pg[ITEMS][VEC], pb[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(gamma, 0, lane, g, 0.0f);
  if constexpr (FROM_OUTPUT) {
    loadRow<THREADS, ITEMS, VEC, C>(beta, 0, lane, bt, 0.0f);
    if (blk == 0)
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          if ((dsc_i64(k) * THREADS + lane) * VEC + l < C && g[k][l] == 0.0f)
            fail(code);
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      pg[k][l] = pb[k][l] = 0.0f;
  const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
  for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
    float xh[ITEMS][VEC], d[ITEMS][VEC];
    loadRow<THREADS, ITEMS, VEC, C>(xOrY, r * C, lane, xh, 0.0f);
    loadRow<THREADS, ITEMS, VEC, C>(dy, r * C, lane, d, 0.0f);
    float rstd;
    if constexpr (FROM_OUTPUT) {
      rstd = ld(rstdIn, r);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = (dsc_i64(k) * THREADS + lane) * VEC + l < C
                         ? (xh[k][l] - bt[k][l]) / g[k][l]
                         : 0.0f;
    } else {
      float s = 0.0f;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          s += xh[k][l];
      const float mean = rowSum<THREADS>(s) / float(C);
      float q = 0.0f;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l) {
          const bool in = (dsc_i64(k) * THREADS + lane) * VEC + l < C;
          const float dv = in ? xh[k][l] - mean : 0.0f;
          q += dv * dv;
        }
      rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          xh[k][l] = (xh[k][l] - mean) * rstd;
    }
    float sg = 0.0f, sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const bool in = (dsc_i64(k) * THREADS + lane) * VEC + l < C;
        const float gd = in ? d[k][l] * g[k][l] : 0.0f;
        sg += gd;
        sgx += gd * xh[k][l];
        pg[k][l] += in ? d[k][l] * xh[k][l] : 0.0f;
        pb[k][l] += in ? d[k][l] : 0.0f;
      }
    const float mg = rowSum<THREADS>(sg) / float(C);
    const float mgx = rowSum<THREADS>(sgx) / float(C);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        d[k][l] = rstd * (d[k][l] * g[k][l] - mg - xh[k][l] * mgx);
    if constexpr (DRES) {
      float dr[ITEMS][VEC];
      loadRow<THREADS, ITEMS, VEC, C>(dres, r * C, lane, dr, 0.0f);
#pragma unroll
      for (int k = 0; k < ITEMS; ++k)
#pragma unroll
        for (int l = 0; l < VEC; ++l)
          d[k][l] = __fadd_rn(d[k][l], dr[k][l]);
    }
    storeRow<THREADS, ITEMS, VEC, C>(dx, r * C, lane, d);
  }
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * 2 * C, lane, pg);
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * 2 * C + C, lane, pb);
}

/// dsc.rms_norm (cpu::rmsNorm): rstd = 1 / sqrt(mean(x^2) + eps),
/// y = (x * rstd) * w.
template <typename TX, typename TW, typename TY, dsc_i64 ROWS, dsc_i64 C,
          int THREADS, int ITEMS, int VEC>
__device__ void rmsNorm(const TX *x, const TW *w, TY *y, float eps) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      q += v[k][l] * v[k][l];
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC];
    ldv<VEC>(w, c, g);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] * rstd) * g[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

/// dsc.rms_norm_grad (cpu::rmsNormGrad): blocks of 32 rows as
/// layerNormGradRows; dx = rstd * (dy*w - x_hat * mean(dy*w*x_hat)) and the
/// block's dw partial sums to part[blk, C], merged by columnSum.
template <typename TD, typename TX, typename TW, typename TO, dsc_i64 ROWS,
          dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void rmsNormGradRows(const TD *dy, const TX *x, const TW *w,
                                TO *dx, float *part, float eps) {
  constexpr dsc_i64 blocks = (ROWS + kRowBlock - 1) / kRowBlock;
  const dsc_i64 blk = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (blk >= blocks)
    return;
  float g[ITEMS][VEC], pw[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(w, 0, lane, g, 0.0f);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      pw[k][l] = 0.0f;
  const dsc_i64 r1 = (blk + 1) * kRowBlock < ROWS ? (blk + 1) * kRowBlock : ROWS;
  for (dsc_i64 r = blk * kRowBlock; r < r1; ++r) {
    float xv[ITEMS][VEC], d[ITEMS][VEC];
    loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, xv, 0.0f);
    loadRow<THREADS, ITEMS, VEC, C>(dy, r * C, lane, d, 0.0f);
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        q += xv[k][l] * xv[k][l];
    const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
    float sgx = 0.0f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l) {
        const float xh = xv[k][l] * rstd;
        sgx += d[k][l] * g[k][l] * xh;
        pw[k][l] += d[k][l] * xh;
      }
    const float mgx = rowSum<THREADS>(sgx) / float(C);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
#pragma unroll
      for (int l = 0; l < VEC; ++l)
        d[k][l] = rstd * (d[k][l] * g[k][l] - xv[k][l] * rstd * mgx);
    storeRow<THREADS, ITEMS, VEC, C>(dx, r * C, lane, d);
  }
  storeRow<THREADS, ITEMS, VEC, C>(part, blk * C, lane, pw);
}

/// dsc.bias_dropout_add_layer_norm (cpu::biasDropoutAddLayerNorm): sum =
/// res + dropout(x + b) (dsc.bias_dropout_add's mask), then LayerNorm of the
/// f32 row sum (not of its stored, possibly rounded, copy) with rstd out.
template <typename TX, typename TB, typename TR, typename TG, typename TE,
          typename TS, typename TY, typename TD, bool RATE0, dsc_i64 ROWS,
          dsc_i64 C, int THREADS, int ITEMS, int VEC>
__device__ void biasDropoutAddLayerNorm(const TX *x, const TB *bias,
                                        const TR *res, const TG *gamma,
                                        const TE *beta, TS *sum, TY *y,
                                        TD *rstdOut, float rate,
                                        float scale, float eps, Rng rng) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, C>(x, r * C, lane, v, 0.0f);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float vb[VEC], vr[VEC];
    bool keep[VEC];
    ldv<VEC>(bias, c, vb);
    ldv<VEC>(res, r * C + c, vr);
    if constexpr (!RATE0)
      rng.keep<VEC>(r * C + c, rate, keep);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float t = v[k][l] + vb[l];
      if constexpr (RATE0)
        v[k][l] = vr[l] + t;
      else
        v[k][l] = vr[l] + (keep[l] ? t * scale : 0.0f);
    }
  }
  storeRow<THREADS, ITEMS, VEC, C>(sum, r * C, lane, v);
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      s += v[k][l];
  const float mean = rowSum<THREADS>(s) / float(C);
  float q = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC + l;
      const float d = c < C ? v[k][l] - mean : 0.0f;
      q += d * d;
    }
  const float rstd = 1.0f / sqrtf(rowSum<THREADS>(q) / float(C) + eps);
  if (lane == 0)
    st(rstdOut, r, rstd);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const dsc_i64 c = (dsc_i64(k) * THREADS + lane) * VEC;
    if (c >= C)
      continue;
    float g[VEC], b[VEC];
    ldv<VEC>(gamma, c, g);
    ldv<VEC>(beta, c, b);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[k][l] = (v[k][l] - mean) * rstd * g[l] + b[l];
  }
  storeRow<THREADS, ITEMS, VEC, C>(y, r * C, lane, v);
}

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

/// dsc.softmax and dsc.softmax_dropout (cpu::softmax / softmaxDropout):
/// softmax of scale*x over the valid keys, masked keys exactly 0, a fully
/// masked row all zeros; DROPOUT also writes dropout(probs) to `dropped`.
template <typename TX, typename TP, typename TDR, bool CAUSAL, bool DROPOUT,
          dsc_i64 ROWS, dsc_i64 TQ, dsc_i64 TK, int THREADS, int ITEMS,
          int VEC>
__device__ void softmaxRows(const TX *x, TP *probs, TDR *dropped, float scale,
                            float rate, float keepScale, Rng rng) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const dsc_i64 valid = validKeys<TQ, TK, CAUSAL>(r);
  float v[ITEMS][VEC];
  loadRow<THREADS, ITEMS, VEC, TK>(x, r * TK, lane, v, 0.0f);
  float mx = -__int_as_float(0x7f800000);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC + l;
      v[k][l] = scale * v[k][l];
      if (j < valid)
        mx = fmaxf(mx, v[k][l]);
    }
  mx = rowMax<THREADS>(mx);
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const dsc_i64 j = (dsc_i64(k) * THREADS + lane) * VEC + l;
      v[k][l] = j < valid ? expf(v[k][l] - mx) : 0.0f;
      sum += v[k][l];
    }
  sum = rowSum<THREADS>(sum);
  const float inv = valid > 0 ? 1.0f / sum : 0.0f;
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
// NOT RUN ON A GPU YET (compiled with NVRTC only); the structure is the
// CPU kernel's, tile for tile.
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
/// T are zero.
template <dsc_i64 T, int D, int TILE, int WARPS, typename TS, typename TC>
__device__ __forceinline__ void loadTile(const TS *src, dsc_i64 r0, TC *tile) {
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32) {
    const dsc_i64 r = r0 + e / D;
    st(tile, e, r < T ? ld(src, r * D + e % D) : 0.0f);
  }
}

/// Whether query i may attend to key j (attnValid of the CPU kernel).
template <dsc_i64 T, bool CAUSAL>
__device__ __forceinline__ bool attnValid(dsc_i64 i, dsc_i64 j) {
  return i < T && j < T && (!CAUSAL || j <= i);
}

/// dsc.attention: out = dropout(softmax(scale q k^T)) v, lse of each row.
template <typename TQ, typename TK, typename TV, typename TO, typename TC,
          dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL, int WARPS>
__device__ void attentionForward(const TQ *q, const TK *k, const TV *v,
                                 TO *out, float *lse, float scale, float rate,
                                 float keepScale, Rng rng) {
  constexpr dsc_i64 TILES = (T + TILE - 1) / TILE;
  __shared__ __align__(32) TC sQ[TILE * D];
  __shared__ __align__(32) TC sKV[TILE * D];
  __shared__ __align__(32) TC sP[TILE * TILE];
  __shared__ __align__(32) float sS[TILE * TILE];
  __shared__ __align__(32) float sO[TILE * D];
  __shared__ float sM[TILE], sL[TILE];
  const dsc_i64 bh = blockIdx.x / TILES, i0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 base = bh * T * D;
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const float inf = __int_as_float(0x7f800000);
  loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sO[e] = 0.0f;
  for (int r = int(threadIdx.x); r < TILE; r += WARPS * 32) {
    sM[r] = -inf;
    sL[r] = 0.0f;
  }
  const dsc_i64 keyEnd = CAUSAL ? (i0 + TILE < T ? i0 + TILE : T) : T;
  for (dsc_i64 j0 = 0; j0 < keyEnd; j0 += TILE) {
    loadTile<T, D, TILE, WARPS>(k + base, j0, sKV);
    __syncthreads();
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sKV, D, sS,
                                                          TILE);
    __syncthreads();
    // Online softmax, one warp per row: rescale the row's accumulator by
    // exp(m_old - m_new), keep the undropped sum, drop in P only.
    for (int r = warp; r < TILE; r += WARPS) {
      const dsc_i64 i = i0 + r;
      const float mOld = sM[r];
      float mx = mOld;
      for (int c = lane; c < TILE; c += 32)
        if (attnValid<T, CAUSAL>(i, j0 + c))
          mx = fmaxf(mx, scale * sS[r * TILE + c]);
      mx = rowMax<32>(mx);
      float sum = 0.0f;
      for (int c = lane; c < TILE; c += 32) {
        const dsc_i64 j = j0 + c;
        float e = 0.0f;
        if (attnValid<T, CAUSAL>(i, j)) {
          e = expf(scale * sS[r * TILE + c] - mx);
          sum += e;
          bool keep[1];
          rng.keep<1>((bh * T + i) * T + j, rate, keep);
          e = keep[0] ? e : 0.0f;
        }
        st(sP, r * TILE + c, e);
      }
      sum = rowSum<32>(sum);
      // A padding row (i >= T) has no valid key: leave it at zero.
      const float corr = mx == -inf ? 1.0f : expf(mOld - mx);
      for (int d = lane; d < D; d += 32)
        sO[r * D + d] *= corr;
      if (lane == 0) {
        sM[r] = mx;
        sL[r] = sL[r] * corr + sum;
      }
    }
    __syncthreads();
    loadTile<T, D, TILE, WARPS>(v + base, j0, sKV);
    __syncthreads();
    mmaTile<TC, TILE, D, TILE, false, false, true, WARPS>(sP, TILE, sKV, D, sO,
                                                          D);
    __syncthreads();
  }
  for (int r = warp; r < TILE; r += WARPS) {
    const dsc_i64 i = i0 + r;
    if (i >= T)
      continue;
    const float inv = keepScale / sL[r];
    for (int d = lane; d < D; d += 32)
      st(out, base + i * D + d, sO[r * D + d] * inv);
    if (lane == 0)
      lse[bh * T + i] = sM[r] + logf(sL[r]);
  }
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
template <dsc_i64 T, int TILE, bool CAUSAL, bool KEEP_P, int WARPS,
          typename TC>
__device__ __forceinline__ void attentionDs(const float *sS, const float *sDP,
                                            TC *sP, TC *sDS, const float *lse,
                                            const float *rowDot, dsc_i64 bh,
                                            dsc_i64 i0, dsc_i64 j0,
                                            float scale, float rate,
                                            float keepScale, Rng rng) {
  for (int e = int(threadIdx.x); e < TILE * TILE; e += WARPS * 32) {
    const dsc_i64 i = i0 + e / TILE, j = j0 + e % TILE;
    float p = 0.0f, ds = 0.0f;
    if (attnValid<T, CAUSAL>(i, j)) {
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

/// dK and dV of one key tile: loops over the query tiles that see it.
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL,
          int WARPS>
__device__ void attentionGradKV(const TG *dout, const TQ *q, const TK *k,
                                const TV *v, const float *lse,
                                const float *rowDot, TO *dk, TO *dv,
                                float scale, float rate, float keepScale,
                                Rng rng) {
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
  const dsc_i64 bh = blockIdx.x / TILES, j0 = (blockIdx.x % TILES) * TILE;
  const dsc_i64 base = bh * T * D;
  loadTile<T, D, TILE, WARPS>(k + base, j0, sK);
  loadTile<T, D, TILE, WARPS>(v + base, j0, sV);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sDK[e] = sDV[e] = 0.0f;
  // Causal: query tiles ending before key j0 see none of this tile.
  for (dsc_i64 i0 = CAUSAL ? j0 : 0; i0 < T; i0 += TILE) {
    loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
    loadTile<T, D, TILE, WARPS>(dout + base, i0, sG);
    __syncthreads();
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sK, D, sS,
                                                          TILE);
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sG, D, sV, D, sDP,
                                                          TILE);
    __syncthreads();
    attentionDs<T, TILE, CAUSAL, true, WARPS>(sS, sDP, sP, sDS, lse, rowDot,
                                              bh, i0, j0, scale, rate,
                                              keepScale, rng);
    __syncthreads();
    // dv += (Z P)^T dout; dk += dS^T q (scaled when stored).
    mmaTile<TC, TILE, D, TILE, true, false, true, WARPS>(sP, TILE, sG, D, sDV,
                                                         D);
    mmaTile<TC, TILE, D, TILE, true, false, true, WARPS>(sDS, TILE, sQ, D, sDK,
                                                         D);
    __syncthreads();
  }
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32) {
    const dsc_i64 j = j0 + e / D;
    if (j < T) {
      st(dk, base + j * D + e % D, scale * sDK[e]);
      st(dv, base + j * D + e % D, sDV[e]);
    }
  }
}

/// dQ of one query tile: loops over the key tiles it sees.
template <typename TG, typename TQ, typename TK, typename TV, typename TO,
          typename TC, dsc_i64 BH, dsc_i64 T, int D, int TILE, bool CAUSAL,
          int WARPS>
__device__ void attentionGradQ(const TG *dout, const TQ *q, const TK *k,
                               const TV *v, const float *lse,
                               const float *rowDot, TO *dq, float scale,
                               float rate, float keepScale, Rng rng) {
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
  const dsc_i64 base = bh * T * D;
  loadTile<T, D, TILE, WARPS>(q + base, i0, sQ);
  loadTile<T, D, TILE, WARPS>(dout + base, i0, sG);
  for (int e = int(threadIdx.x); e < TILE * D; e += WARPS * 32)
    sDQ[e] = 0.0f;
  const dsc_i64 keyEnd = CAUSAL ? (i0 + TILE < T ? i0 + TILE : T) : T;
  for (dsc_i64 j0 = 0; j0 < keyEnd; j0 += TILE) {
    loadTile<T, D, TILE, WARPS>(k + base, j0, sK);
    loadTile<T, D, TILE, WARPS>(v + base, j0, sV);
    __syncthreads();
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sQ, D, sK, D, sS,
                                                          TILE);
    mmaTile<TC, TILE, TILE, D, false, true, false, WARPS>(sG, D, sV, D, sDP,
                                                          TILE);
    __syncthreads();
    attentionDs<T, TILE, CAUSAL, false, WARPS>(sS, sDP, sDS, sDS, lse, rowDot,
                                               bh, i0, j0, scale, rate,
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

/// cpu::embeddingGrad: thread (c, p) owns the table elements [v, c] with
/// v % PARTS == p; it zeroes them, then adds every row of dy with such an
/// id in token order (the CPU's order: bitwise the same sums).
template <typename TD, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 C,
          dsc_i64 PARTS>
__device__ void embeddingGrad(const int *ids, const TD *dy, TO *dtable,
                              dsc_u32 code) {
  DSC_GRID_LOOP(t, C *PARTS) {
    const dsc_i64 c = t % C, p = t / C;
    for (dsc_i64 v = p; v < V; v += PARTS)
      st(dtable, v * C + c, 0.0f);
    for (dsc_i64 r = 0; r < ROWS; ++r) {
      const int id = ids[r];
      if (id < 0 || id >= V) {
        if (t == 0)
          fail(code);
        continue;
      }
      if (id % PARTS == p)
        st(dtable, id * C + c, ld(dtable, id * C + c) + ld(dy, r * C + c));
    }
  }
}

/// dsc.mlm_mask (cpu::mlmMask): the 80/10/10 rule from one Philox block per
/// token; unmasked labels are -100.
template <dsc_i64 N>
__device__ void mlmMask(const int *ids, int *inputs, int *labels,
                        float maskProb, int maskToken, dsc_u32 vocab,
                        dsc_u32 stream, dsc_u64 seed, dsc_u64 offset) {
  DSC_GRID_LOOP(i, N) {
    const Bits4 b = philox(dsc_u32(i), stream, dsc_u32(offset),
                           dsc_u32(offset >> 32), seed);
    const int id = ids[i];
    if (uniform(b.v[0]) < maskProb) {
      labels[i] = id;
      const float u = uniform(b.v[1]);
      inputs[i] = u < 0.8f ? maskToken : u < 0.9f ? int(b.v[2] % vocab) : id;
    } else {
      labels[i] = -100;
      inputs[i] = id;
    }
  }
}

//===----------------------------------------------------------------------===//
// Cross entropy (cpu::crossEntropy / crossEntropyGrad): rows of V logits
// streamed by THREADS threads (V may be 50k). Labels equal to IGNORE do not
// count; any other label outside [0, V) sets the status.
//===----------------------------------------------------------------------===//

template <typename TL, dsc_i64 V, int THREADS>
__device__ __forceinline__ void rowLogSumExp(const TL *z, int lane, float &mx,
                                             float &sum) {
  float m = -__int_as_float(0x7f800000);
  for (dsc_i64 j = lane; j < V; j += THREADS)
    m = fmaxf(m, ld(z, j));
  m = rowMax<THREADS>(m);
  float s = 0.0f;
  for (dsc_i64 j = lane; j < V; j += THREADS)
    s += expf(ld(z, j) - m);
  mx = m;
  sum = rowSum<THREADS>(s);
}

/// Per-row NLL into rowLoss (double, 0 for ignored rows).
template <typename TL, dsc_i64 ROWS, dsc_i64 V, dsc_i64 IGNORE, int THREADS>
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
  if (label < 0 || label >= V) {
    if (lane == 0) {
      fail(code);
      rowLoss[r] = 0.0;
    }
    return;
  }
  float mx, sum;
  rowLogSumExp<TL, V, THREADS>(logits + r * V, lane, mx, sum);
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
  double s = 0.0;
  for (dsc_i64 r = threadIdx.x; r < ROWS; r += BLOCK)
    s += rowLoss[r];
  const double total = blockSumDouble<BLOCK>(s);
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

/// dlogits = k * softmax(z), minus k at the label; ignored rows all 0.
template <typename TL, typename TO, dsc_i64 ROWS, dsc_i64 V, dsc_i64 IGNORE,
          int THREADS>
__device__ void crossEntropyGradRows(const float *kIn, const TL *logits,
                                     const int *labels, TO *dlogits,
                                     dsc_u32 code) {
  const dsc_i64 r = rowIndex<THREADS>();
  const int lane = rowLane<THREADS>();
  if (r >= ROWS)
    return;
  const int label = labels[r];
  const bool bad = label != IGNORE && (label < 0 || label >= V);
  if (bad && lane == 0)
    fail(code);
  if (label == IGNORE || bad) {
    for (dsc_i64 j = lane; j < V; j += THREADS)
      st(dlogits, r * V + j, 0.0f);
    return;
  }
  const float k = *kIn;
  float mx, sum;
  rowLogSumExp<TL, V, THREADS>(logits + r * V, lane, mx, sum);
  const float f = k / sum;
  for (dsc_i64 j = lane; j < V; j += THREADS) {
    float d = f * expf(ld(logits, r * V + j) - mx);
    if (j == label)
      d -= k;
    st(dlogits, r * V + j, d);
  }
}

//===----------------------------------------------------------------------===//
// Multi-tensor kernels: K f32 tensors in one launch, described by a table of
// device pointers (passed by value) and, baked in by the emitter, the first
// chunk of each tensor (CHUNK elements per chunk, one block per chunk).
//===----------------------------------------------------------------------===//

template <int K> struct Ptrs {
  float *p[K];
};

/// Tensor of chunk `c`: the last t with first[t] <= c.
template <int K>
__device__ __forceinline__ int tensorOf(const dsc_i64 (&first)[K + 1],
                                        dsc_i64 c) {
  int t = 0;
  while (t + 1 < K && first[t + 1] <= c)
    ++t;
  return t;
}

/// dsc.global_norm, phase 1: partial sums of squares per chunk (double).
template <int K, dsc_i64 CHUNK, int BLOCK>
__device__ void sumSquaresChunks(Ptrs<K> x, const dsc_i64 (&n)[K],
                                 const dsc_i64 (&first)[K + 1],
                                 double *part) {
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  double s = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const double v = x.p[t][i];
    s += v * v;
  }
  s = blockSumDouble<BLOCK>(s);
  if (threadIdx.x == 0)
    part[c] = s;
}

/// dsc.global_norm, phase 2: out = sqrt(sum of the chunk partials).
template <typename TO, dsc_i64 CHUNKS, int BLOCK>
__device__ void sqrtOfSum(const double *part, TO *out) {
  double s = 0.0;
  for (dsc_i64 c = threadIdx.x; c < CHUNKS; c += BLOCK)
    s += part[c];
  s = blockSumDouble<BLOCK>(s);
  if (threadIdx.x == 0)
    st(out, 0, float(sqrt(s)));
}

/// dsc.check_finite (cpu::hasNonFinite): out was zeroed; any inf/NaN
/// element writes 1.
template <int K, dsc_i64 CHUNK, int BLOCK>
__device__ void checkFiniteChunks(Ptrs<K> x, const dsc_i64 (&n)[K],
                                  const dsc_i64 (&first)[K + 1], float *out) {
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  bool bad = false;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK)
    bad |= nonFinite(x.p[t][i]);
  if (__syncthreads_or(bad) && threadIdx.x == 0)
    *out = 1.0f;
}

/// The optimizer's per-step scalars, read on the device.
struct StepScalars {
  float lr, gscale;
  dsc_i64 step;
  bool skip;
};

template <typename TS>
__device__ __forceinline__ StepScalars readStep(const float *lr,
                                                const TS *step,
                                                const float *gscale,
                                                const float *skip) {
  StepScalars s;
  s.lr = *lr;
  s.step = dsc_i64(*step);
  s.gscale = *gscale;
  s.skip = skip && *skip != 0.0f;
  return s;
}

/// Copies in to out (when they differ): an optimizer's skipped update.
__device__ __forceinline__ void passThrough(const float *in, float *out,
                                            dsc_i64 i) {
  if (in != out)
    out[i] = in[i];
}

/// dsc.adam (cpu::adam): torch.optim.Adam / AdamW, single-tensor path.
/// Tables: p, g, m, v (inputs), p', m', v' (outputs; may equal the inputs).
template <int K, dsc_i64 CHUNK, int BLOCK, bool ADAMW, bool BIAS_CORRECTION,
          typename TS>
__device__ void adamChunks(Ptrs<K> p, Ptrs<K> g, Ptrs<K> m, Ptrs<K> v,
                           Ptrs<K> po, Ptrs<K> mo, Ptrs<K> vo,
                           const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                           const float *lrIn, const TS *stepIn,
                           const float *gscaleIn, const float *skipIn,
                           double beta1, double beta2, float eps, double wdD,
                           dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(m.p[t], mo.p[t], i);
      passThrough(v.p[t], vo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  const float b1 = float(beta1), b2 = float(beta2), wd = float(wdD);
  double bc1 = 1.0, bc2 = 1.0;
  if (BIAS_CORRECTION) {
    bc1 = 1.0 - pow(beta1, double(s.step));
    bc2 = 1.0 - pow(beta2, double(s.step));
  }
  const float stepSize = float(double(s.lr) / bc1);
  const float bc2Sqrt = float(sqrt(bc2));
  const float decay = float(1.0 - double(s.lr) * wdD);
  const float c1 = float(1.0 - beta1), c2 = float(1.0 - beta2);
  const bool l2 = !ADAMW && wd != 0.0f;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    float gi = g.p[t][i] * s.gscale;
    float pi = p.p[t][i];
    if (l2)
      gi += wd * pi;
    if (ADAMW)
      pi *= decay;
    const float mi = b1 * m.p[t][i] + c1 * gi;
    const float vi = b2 * v.p[t][i] + c2 * gi * gi;
    mo.p[t][i] = mi;
    vo.p[t][i] = vi;
    const float denom = sqrtf(vi) / bc2Sqrt + eps;
    po.p[t][i] = pi - stepSize * (mi / denom);
  }
}

/// dsc.sgd (cpu::sgd): torch.optim.SGD, single-tensor path. Tables: p, g,
/// buf, p', buf'.
template <int K, dsc_i64 CHUNK, int BLOCK, bool NESTEROV, typename TS>
__device__ void sgdChunks(Ptrs<K> p, Ptrs<K> g, Ptrs<K> buf, Ptrs<K> po,
                          Ptrs<K> bufo, const dsc_i64 (&n)[K],
                          const dsc_i64 (&first)[K + 1], const float *lrIn,
                          const TS *stepIn, const float *gscaleIn,
                          const float *skipIn, double momentum,
                          double dampening, float wd, dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(buf.p[t], bufo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  const float mom = float(momentum), oneMinusDamp = float(1.0 - dampening);
  const bool useMom = momentum != 0.0, firstStep = s.step <= 1;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    float gi = g.p[t][i] * s.gscale + wd * p.p[t][i];
    if (useMom) {
      const float b = firstStep ? gi : mom * buf.p[t][i] + oneMinusDamp * gi;
      bufo.p[t][i] = b;
      gi = NESTEROV ? gi + mom * b : b;
    } else if (buf.p[t] != bufo.p[t]) {
      bufo.p[t][i] = buf.p[t][i];
    }
    po.p[t][i] = p.p[t][i] - s.lr * gi;
  }
}

/// dsc.lamb (cpu::lamb, DeepSpeed FusedLamb), phase 1: m, v updated, and per
/// chunk the partial sums of p^2 and update^2 (double) into part[2c], part[2c+1].
template <int K, dsc_i64 CHUNK, int BLOCK, typename TS>
__device__ void lambMoments(Ptrs<K> p, Ptrs<K> g, Ptrs<K> m, Ptrs<K> v,
                            Ptrs<K> po, Ptrs<K> mo, Ptrs<K> vo,
                            const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                            const float *lrIn, const TS *stepIn,
                            const float *gscaleIn, const float *skipIn,
                            float b1, float b2, float eps, float wd,
                            double *part, dsc_u32 code) {
  const StepScalars s = readStep(lrIn, stepIn, gscaleIn, skipIn);
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  if (s.skip) {
    for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
      passThrough(p.p[t], po.p[t], i);
      passThrough(m.p[t], mo.p[t], i);
      passThrough(v.p[t], vo.p[t], i);
    }
    return;
  }
  if (s.step < 1) {
    if (c == 0 && threadIdx.x == 0)
      fail(code);
    return;
  }
  double sw = 0.0, su = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float gi = g.p[t][i] * s.gscale;
    const float mi = b1 * m.p[t][i] + (1.0f - b1) * gi;
    const float vi = b2 * v.p[t][i] + (1.0f - b2) * gi * gi;
    mo.p[t][i] = mi;
    vo.p[t][i] = vi;
    const float pi = p.p[t][i];
    const float u = mi / (sqrtf(vi) + eps) + wd * pi;
    sw += double(pi) * double(pi);
    su += double(u) * double(u);
  }
  sw = blockSumDouble<BLOCK>(sw);
  su = blockSumDouble<BLOCK>(su);
  if (threadIdx.x == 0) {
    part[2 * c] = sw;
    part[2 * c + 1] = su;
  }
}

/// Phase 2, one block per tensor: the trust ratio, clamped as DeepSpeed
/// does, times the step size, into coeff[t].
template <int K, int BLOCK, bool BIAS_CORRECTION, typename TS>
__device__ void lambCoefficients(const dsc_i64 (&first)[K + 1],
                                 const double *part, const float *lrIn,
                                 const TS *stepIn, const float *skipIn,
                                 double beta1, double beta2, float maxCoeff,
                                 float minCoeff, float *coeff) {
  const int t = blockIdx.x;
  double w2 = 0.0, u2 = 0.0;
  for (dsc_i64 c = first[t] + threadIdx.x; c < first[t + 1]; c += BLOCK) {
    w2 += part[2 * c];
    u2 += part[2 * c + 1];
  }
  w2 = blockSumDouble<BLOCK>(w2);
  u2 = blockSumDouble<BLOCK>(u2);
  if (threadIdx.x != 0)
    return;
  const float wn = float(sqrt(w2)), un = float(sqrt(u2));
  float k = 1.0f;
  if (wn != 0.0f && un != 0.0f) {
    k = wn / un;
    if (k > maxCoeff)
      k = maxCoeff;
    if (k < minCoeff)
      k = minCoeff;
  }
  const float lr = *lrIn;
  float stepSize = lr;
  if (BIAS_CORRECTION) {
    const dsc_i64 step = dsc_i64(*stepIn);
    const float bc1 = float(1.0 - pow(beta1, double(step)));
    const float bc2 = float(1.0 - pow(beta2, double(step)));
    stepSize = lr * sqrtf(bc2) / bc1;
  }
  coeff[t] = stepSize * k;
}

/// Phase 3: p' = p - coeff[t] * (m' / (sqrt(v') + eps) + wd * p).
template <int K, dsc_i64 CHUNK, int BLOCK, typename TS>
__device__ void lambApply(Ptrs<K> p, Ptrs<K> mo, Ptrs<K> vo, Ptrs<K> po,
                          const dsc_i64 (&n)[K], const dsc_i64 (&first)[K + 1],
                          const TS *stepIn, const float *skipIn, float eps,
                          float wd, const float *coeff) {
  if ((skipIn && *skipIn != 0.0f) || dsc_i64(*stepIn) < 1)
    return;
  const dsc_i64 c = blockIdx.x;
  const int t = tensorOf<K>(first, c);
  const dsc_i64 i0 = (c - first[t]) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < n[t] ? i0 + CHUNK : n[t];
  const float k = coeff[t];
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float pi = p.p[t][i];
    const float u = mo.p[t][i] / (sqrtf(vo.p[t][i]) + eps) + wd * pi;
    po.p[t][i] = pi - k * u;
  }
}

//===----------------------------------------------------------------------===//
// Scalar bookkeeping, one thread (cpu::clipCoefficient, lrSchedule,
// currentLossScale, unscaleClip, updateLossScale).
//===----------------------------------------------------------------------===//

template <typename TI, typename TO>
__device__ void clipCoefficient(const TI *norm, TO *out, double maxNorm) {
  const double n = double(ld(norm, 0)) + 1e-6;
  st(out, 0, maxNorm > 0.0 && n > maxNorm ? float(maxNorm / n) : 1.0f);
}

/// DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR as the engine
/// drives them (update s runs with last_batch_iteration s - 2); KIND 0
/// constant, 1 WarmupLR, 2 WarmupDecayLR, 3 WarmupCosineLR.
template <int KIND, bool LOG_WARMUP, typename TS, typename TO>
__device__ void lrSchedule(const TS *stepIn, TO *out, double lr,
                           double warmupMinLr, double warmupMaxLr,
                           dsc_i64 warmupNumSteps, dsc_i64 totalNumSteps,
                           double warmupMinRatio, double cosMinRatio) {
  double result;
  const dsc_i64 last = dsc_i64(*stepIn) - 2;
  const dsc_i64 warmup = warmupNumSteps > 2 ? warmupNumSteps : 2;
  const double invLog = 1.0 / log(double(warmup));
  const double gammaWarm = LOG_WARMUP ? invLog * log(double(last + 1))
                                      : double(last) / double(warmup);
  if (KIND == 0) {
    result = lr;
  } else if (KIND == 3) {
    if (last < 0) {
      result = 0.0;
    } else {
      double ratio;
      if (last < warmup) {
        ratio = warmupMinRatio + gammaWarm * (1.0 - warmupMinRatio);
      } else {
        const dsc_i64 realLast = last - warmup + 1;
        const dsc_i64 realTotal = totalNumSteps - warmup;
        const double c =
            (1.0 + cos(3.14159265358979323846 * double(realLast) /
                       double(realTotal))) /
            2.0;
        ratio = cosMinRatio + (1.0 - cosMinRatio) * c;
        ratio = ratio > 0.0 ? ratio : 0.0;
      }
      result = lr * ratio;
    }
  } else if (last < 0) {
    result = warmupMinLr;
  } else {
    double gamma;
    if (last < warmup) {
      gamma = gammaWarm;
    } else if (KIND == 1) {
      gamma = 1.0;
    } else {
      const double den = double(totalNumSteps - warmup) > 1.0
                             ? double(totalNumSteps - warmup)
                             : 1.0;
      gamma = double(totalNumSteps - last) / den;
      gamma = gamma > 0.0 ? gamma : 0.0;
    }
    result = warmupMinLr + (warmupMaxLr - warmupMinLr) * gamma;
  }
  st(out, 0, float(result));
}

template <typename TO>
__device__ void lossScale(const float *state, TO *out, double initialScale,
                          double multiplier) {
  const float scale = state[0] == 0.0f ? float(initialScale) : state[0];
  st(out, 0, float(double(scale) * multiplier));
}

template <typename TN, typename TS>
__device__ void unscaleClip(const TN *scaledNorm, const TS *scaleIn,
                            float *gradScale, float *norm, double maxNorm) {
  const double total = double(ld(scaledNorm, 0)), s = double(ld(scaleIn, 0));
  double combined = s;
  if (maxNorm > 0.0) {
    const double clip = ((total / s) + 1e-6) / maxNorm;
    if (clip > 1.0)
      combined = clip * s;
  }
  *gradScale = float(1.0 / combined);
  *norm = float(total / s);
}

/// DynamicLossScaler.update_scale (scale factor 2) over the state
/// [scale, hysteresis used, iterations since the last overflow].
template <bool DYNAMIC, bool CONSECUTIVE, typename TF>
__device__ void updateLossScale(const float *state, const TF *overflowIn,
                                float *next, double initialScale,
                                dsc_i64 scaleWindow, dsc_i64 hysteresis,
                                double minScale, dsc_u32 code) {
  const float s0 = state[0], s1 = state[1], s2 = state[2];
  if (!DYNAMIC) {
    next[0] = s0;
    next[1] = s1;
    next[2] = s2;
    return;
  }
  const bool overflow = ld(overflowIn, 0) != 0.0f;
  double scale = s0 == 0.0f ? double(float(initialScale)) : double(s0);
  dsc_i64 curHysteresis = hysteresis - dsc_i64(s1);
  dsc_i64 since = dsc_i64(s2);
  if (overflow) {
    if (hysteresis == 1 || curHysteresis == 1) {
      if (float(scale) == float(minScale)) {
        fail(code);
        next[0] = s0;
        next[1] = s1;
        next[2] = s2;
        return;
      }
      scale = scale / 2.0 > minScale ? scale / 2.0 : minScale;
    } else {
      curHysteresis -= 1;
    }
    since = 0;
  } else {
    if (CONSECUTIVE)
      curHysteresis = hysteresis;
    if ((since + 1) % scaleWindow == 0) {
      if (!CONSECUTIVE)
        curHysteresis = hysteresis;
      scale *= 2.0;
    }
    since += 1;
  }
  next[0] = float(scale);
  next[1] = float(hysteresis - curHysteresis);
  next[2] = float(since);
}

} // namespace dsc

//===----------------------------------------------------------------------===//
// Used by the CUDA backend, not by the emitted launchers: cuBLASLt takes
// operands of one type, so a GEMM of a 16-bit temporary by an f32 buffer
// first widens the 16-bit one (exactly) to f32.
//===----------------------------------------------------------------------===//

extern "C" __global__ void dsc_widen_f16(const __half *x, float *y,
                                         dsc_i64 n) {
  for (dsc_i64 i = blockIdx.x * dsc_i64(blockDim.x) + threadIdx.x; i < n;
       i += dsc_i64(gridDim.x) * blockDim.x)
    y[i] = __half2float(x[i]);
}

extern "C" __global__ void dsc_widen_bf16(const __nv_bfloat16 *x, float *y,
                                          dsc_i64 n) {
  for (dsc_i64 i = blockIdx.x * dsc_i64(blockDim.x) + threadIdx.x; i < n;
       i += dsc_i64(gridDim.x) * blockDim.x)
    y[i] = __bfloat162float(x[i]);
}
