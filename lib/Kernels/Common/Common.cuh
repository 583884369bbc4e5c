//===- Common.cuh - Shared part of the CUDA device library -----*- CUDA -*-===//
//
// The device library that `dsc-translate --emit-cuda` pastes verbatim at the
// top of every translation unit it writes (lib/Codegen/CudaEmitter.cpp
// embeds it at build time): this file, then the device templates of each
// kernel family, <Family>/<Family>.cuh, in the order of
// DSC_KERNELS_CUDA_LIBRARY (lib/Kernels/Kernels.cmake). The emitter
// instantiates the templates with every shape, dtype and attribute baked in
// as template arguments, inside one `extern "C" __global__` wrapper per
// specialised instruction.
//
// Every template mirrors a CPU kernel of its family (<Family>Cpu.cpp, named
// in its comment) operation for operation: same formulas, same masking
// conventions, same Philox mapping (so dropout and MLM masks are bitwise the
// CPU's), and the same fixed summation blocks where the CPU has them (32-row
// blocks for bias/LayerNorm parameter gradients), so no result depends on
// thread scheduling. Loads widen to f32 and stores round to nearest even, so
// every computation is f32 whatever the storage type.
//
// Compiles under NVRTC (-default-device) and under nvcc; uses no standard
// library headers. This file holds what the families share: the status
// variable, loads and stores, Philox, row reductions, the grid-stride loop,
// the blocked column sums and the row-kernel loads and stores.
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

/// A 16-bit value's float from its bits, and the bits of a float rounded
/// to nearest even (through the raw structs, host and device alike).
template <typename T> __device__ __forceinline__ float fromBits(dsc_u32 bits) {
  if constexpr (Same<T, __half>::value) {
    __half_raw r;
    r.x = static_cast<unsigned short>(bits);
    return __half2float(__half(r));
  } else {
    __nv_bfloat16_raw r;
    r.x = static_cast<unsigned short>(bits);
    return __bfloat162float(__nv_bfloat16(r));
  }
}
template <typename T> __device__ __forceinline__ dsc_u32 toBits(float v) {
  if constexpr (Same<T, __half>::value)
    return static_cast<__half_raw>(__float2half_rn(v)).x;
  else
    return static_cast<__nv_bfloat16_raw>(__float2bfloat16_rn(v)).x;
}

/// Eight consecutive elements starting at i (i a multiple of 8, buffers
/// 16-byte aligned): one 16-byte load or store of a 16-bit type, two
/// float4 of f32.
template <typename T>
__device__ __forceinline__ void ld8(const T *p, dsc_i64 i, float (&v)[8]) {
  if constexpr (Same<T, float>::value) {
    float lo[4], hi[4];
    ld4(p, i, lo);
    ld4(p, i + 4, hi);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[k] = lo[k];
      v[k + 4] = hi[k];
    }
  } else {
    const uint4 q = *reinterpret_cast<const uint4 *>(p + i);
    const dsc_u32 words[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      v[2 * k] = fromBits<T>(words[k] & 0xffffu);
      v[2 * k + 1] = fromBits<T>(words[k] >> 16);
    }
  }
}
template <typename T>
__device__ __forceinline__ void st8(T *p, dsc_i64 i, const float (&v)[8]) {
  if constexpr (Same<T, float>::value) {
    const float lo[4] = {v[0], v[1], v[2], v[3]},
                hi[4] = {v[4], v[5], v[6], v[7]};
    st4(p, i, lo);
    st4(p, i + 4, hi);
  } else {
    dsc_u32 words[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      words[k] = toBits<T>(v[2 * k]) | (toBits<T>(v[2 * k + 1]) << 16);
    *reinterpret_cast<uint4 *>(p + i) =
        make_uint4(words[0], words[1], words[2], words[3]);
  }
}

/// VEC (1, 4 or 8) consecutive elements.
template <int VEC, typename T>
__device__ __forceinline__ void ldv(const T *p, dsc_i64 i, float (&v)[VEC]) {
  if constexpr (VEC == 8)
    ld8(p, i, v);
  else if constexpr (VEC == 4)
    ld4(p, i, v);
  else
    v[0] = ld(p, i);
}
template <int VEC, typename T>
__device__ __forceinline__ void stv(T *p, dsc_i64 i, const float (&v)[VEC]) {
  if constexpr (VEC == 8)
    st8(p, i, v);
  else if constexpr (VEC == 4)
    st4(p, i, v);
  else
    st(p, i, v[0]);
}

__device__ __forceinline__ bool nonFinite(float v) {
  return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}

//===----------------------------------------------------------------------===//
// Philox4x32-10 (include/dsc/Support/Philox.h): key = {seed, seed >> 32};
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
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
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

/// `op` over the block (BLOCK threads, a power of two), in a fixed order;
/// the result is valid in thread 0.
template <int BLOCK, typename T, typename Op>
__device__ T blockReduce(T v, Op op) {
  __shared__ T part[BLOCK];
  part[threadIdx.x] = v;
  __syncthreads();
#pragma unroll
  for (int s = BLOCK / 2; s > 0; s >>= 1) {
    if (int(threadIdx.x) < s)
      part[threadIdx.x] = op(part[threadIdx.x], part[threadIdx.x + s]);
    __syncthreads();
  }
  const T r = part[0];
  __syncthreads();
  return r;
}
template <int BLOCK> __device__ double blockSumDouble(double v) {
  return blockReduce<BLOCK>(v, Sum());
}
template <int BLOCK> __device__ float blockMaxFloat(float v) {
  return blockReduce<BLOCK>(v, Max());
}

/// The sum of the N per-block partials of a first phase, by one block in a
/// fixed order (every thread gets it).
template <dsc_i64 N, int BLOCK>
__device__ double sumOfParts(const double *part) {
  double s = 0.0;
  for (dsc_i64 i = threadIdx.x; i < N; i += BLOCK)
    s += part[i];
  return blockSumDouble<BLOCK>(s);
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
inline constexpr dsc_i64 kRowBlock = 32;

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

} // namespace dsc
