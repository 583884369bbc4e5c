//===- Compression.cuh - 1-bit compression CUDA templates ------*- CUDA -*-===//
//
// onebit_compress, onebit_decode and onebit_decode_mean as CompressionCpu.cpp
// computes them: the same operation order, signs packed as numpy.packbits
// (bit 7 of byte k for element 8k; a set bit is y >= 0, NaN included), the
// compression scale ||y|| / sqrt(P) from a sum of squares in double. The
// sums run in a fixed order (per-block partials, then one block), so runs
// are bit-identical; products that the CPU rounds are rounded here too
// (__fmul_rn), so no fused multiply-add changes a decoded value.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// dsc.onebit_compress, phase 1: y = pad(x, P) + error (into the new error
/// buffer) and, per CHUNK elements, the sum of y^2 in double. A skipped
/// step (SKIP and *skip != 0) copies the error and sums nothing.
template <dsc_i64 N, dsc_i64 P, dsc_i64 CHUNK, int BLOCK, bool SKIP>
__device__ void onebitErrorSum(const float *x, const float *error,
                               const float *skip, float *y, double *part) {
  const bool skipped = SKIP && *skip != 0.0f;
  const dsc_i64 i0 = dsc_i64(blockIdx.x) * CHUNK;
  const dsc_i64 i1 = i0 + CHUNK < P ? i0 + CHUNK : P;
  double s = 0.0;
  for (dsc_i64 i = i0 + threadIdx.x; i < i1; i += BLOCK) {
    const float v = skipped ? error[i] : (i < N ? x[i] : 0.0f) + error[i];
    y[i] = v;
    s += double(v) * double(v);
  }
  s = blockSumDouble<BLOCK>(s);
  if (threadIdx.x == 0)
    part[blockIdx.x] = s;
}

/// Phase 2 (one block): scale = float(sqrt(sum)) / float(sqrt(P)); 0 on a
/// skipped step (what is sent then is never used).
template <dsc_i64 CHUNKS, dsc_i64 P, int BLOCK, bool SKIP>
__device__ void onebitScale(const double *part, const float *skip,
                            float *scale) {
  const double s = sumOfParts<CHUNKS, BLOCK>(part);
  if (threadIdx.x == 0)
    *scale = SKIP && *skip != 0.0f
                 ? 0.0f
                 : float(sqrt(s)) / float(sqrt(double(P)));
}

/// Phase 3, one thread per byte: pack the signs of y[8k, 8k + 8) and make y
/// the new error y - scale * sign(y). A skipped step sends zero bytes and
/// keeps the copied error.
template <dsc_i64 P, bool SKIP>
__device__ void onebitPack(const float *scale, const float *skip, float *y,
                           unsigned char *signs) {
  const bool skipped = SKIP && *skip != 0.0f;
  const float s = *scale;
  DSC_GRID_LOOP(k, P / 8) {
    unsigned byte = 0;
    for (int b = 0; b < 8; ++b) {
      const float v = y[8 * k + b];
      const bool positive = !(v < 0.0f);
      byte |= unsigned(positive) << (7 - b);
      if (!skipped)
        y[8 * k + b] = v - (positive ? s : -s);
    }
    signs[k] = skipped ? 0 : static_cast<unsigned char>(byte);
  }
}

__device__ __forceinline__ bool signBit(const unsigned char *signs,
                                        dsc_i64 i) {
  return (signs[i >> 3] >> (7 - (i & 7))) & 1;
}

/// dsc.onebit_decode: chunk j of C elements is +-scales[j].
template <dsc_i64 ROWS, dsc_i64 C>
__device__ void onebitDecode(const unsigned char *signs, const float *scales,
                             float *out) {
  DSC_GRID_LOOP(i, ROWS * C) {
    const float s = scales[i / C];
    out[i] = signBit(signs, i) ? s : -s;
  }
}

/// dsc.onebit_decode_mean: the mean of G chunks of C signs, each weighted
/// by its scale times 1/G (rounded first, as DeepSpeed and the CPU do),
/// summed in chunk order.
template <dsc_i64 G, dsc_i64 C>
__device__ void onebitDecodeMean(const unsigned char *signs,
                                 const float *scales, float *out) {
  const float inv = float(1.0 / double(G));
  DSC_GRID_LOOP(i, C) {
    float acc = 0.0f;
    for (dsc_i64 j = 0; j < G; ++j) {
      const float w = __fmul_rn(scales[j], inv);
      acc = __fadd_rn(acc, signBit(signs, j * C + i) ? w : -w);
    }
    out[i] = acc;
  }
}

/// max |x| over block b of B elements (a quantization block's scale).
template <dsc_i64 B, typename T>
__device__ float blockAbsMax(const T *x, dsc_i64 b) {
  float m = 0.0f;
  for (dsc_i64 i = b * B; i < (b + 1) * B; ++i)
    m = fmaxf(m, fabsf(ld(x, i)));
  return m;
}

/// dsc.quantize_int8 (cpu::runCompression): one thread per block of B
/// elements: scale = max|x| / 127, code = rint(x / scale).
template <dsc_i64 BLOCKS, dsc_i64 B, typename T>
__device__ void quantizeInt8(const T *x, signed char *codes, float *scales) {
  DSC_GRID_LOOP(b, BLOCKS) {
    const float m = blockAbsMax<B>(x, b);
    const float scale = __fdiv_rn(m, 127.0f);
    scales[b] = scale;
    for (dsc_i64 i = b * B; i < (b + 1) * B; ++i)
      codes[i] = scale > 0.0f
                     ? static_cast<signed char>(rintf(__fdiv_rn(ld(x, i), scale)))
                     : static_cast<signed char>(0);
  }
}

/// dsc.quantize_int4 (cpu::runCompression): one thread per block of B
/// elements: scale = max|x| / 7, code = rint(x / scale) + 8, two per byte.
template <dsc_i64 BLOCKS, dsc_i64 B, typename T>
__device__ void quantizeInt4(const T *x, unsigned char *codes, float *scales) {
  DSC_GRID_LOOP(b, BLOCKS) {
    const float m = blockAbsMax<B>(x, b);
    const float scale = __fdiv_rn(m, 7.0f);
    scales[b] = scale;
    for (dsc_i64 i = b * B; i < (b + 1) * B; i += 2) {
      int code[2];
      for (int h = 0; h < 2; ++h)
        code[h] = scale > 0.0f
                      ? int(fminf(fmaxf(rintf(__fdiv_rn(ld(x, i + h), scale)),
                                        -7.0f),
                                  7.0f)) + 8
                      : 8;
      codes[i / 2] = static_cast<unsigned char>(code[0] | code[1] << 4);
    }
  }
}

/// dsc.dequantize_reduce_int4: per element, the sum over the G chunks in
/// order of code * scale; MEAN divides it by G.
template <dsc_i64 C, dsc_i64 G, dsc_i64 B, bool MEAN, typename T>
__device__ void dequantizeReduceInt4(const unsigned char *codes,
                                     const float *scales, T *out) {
  DSC_GRID_LOOP(i, C) {
    float acc = 0.0f;
    for (dsc_i64 j = 0; j < G; ++j) {
      const dsc_i64 k = j * C + i;
      const int nibble = k % 2 ? codes[k / 2] >> 4 : codes[k / 2] & 15;
      acc = __fadd_rn(acc, __fmul_rn(float(nibble - 8), scales[k / B]));
    }
    st(out, i, MEAN ? __fdiv_rn(acc, float(G)) : acc);
  }
}

/// dsc.dequantize_int8: code * its block's scale.
template <dsc_i64 N, dsc_i64 B, typename T>
__device__ void dequantizeInt8(const signed char *codes, const float *scales,
                               T *out) {
  DSC_GRID_LOOP(i, N) {
    st(out, i, __fmul_rn(float(codes[i]), scales[i / B]));
  }
}

} // namespace dsc
