//===- Quantized.cuh - GEMMs over 4-bit weights ----------------*- CUDA -*-===//
//
// linear_4bit and linear_4bit_grad_input (QuantizedCpu.cpp on the CPU): a
// tiled GEMM y[M, P] = a[M, Q] @ B with B(q, p) the 4-bit weight's element
// q * sq + p * sp, dequantized as it is loaded into shared memory (the code
// book's value times its block's absmax, the absmax decoded from its 8-bit
// code under double quantization): no full-precision copy of the weight is
// ever made. One 256-thread block computes a 16 x 16 tile of y; each thread
// one element, summing over Q in order in f32.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Optimizers.cuh (dynamicMapValue: the nested absmax's code book).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// Where the parts of a 4-bit weight lie in its bytes (FourBitLayout).
struct FourBitBlob {
  dsc_i64 block;      ///< elements per absmax
  bool doubleQuant;
  dsc_i64 absmaxAt;   ///< bytes: absmax f32[] or qabsmax u8[]
  dsc_i64 codesAt;    ///< bytes: the codes, two per byte, high nibble first
};

/// The absmax of block b: f32, or the signed dynamic map's value times the
/// block's nested scale plus the offset under double quantization.
__device__ __forceinline__ float fourBitAbsmax(const unsigned char *blob,
                                               const FourBitBlob &l,
                                               const float *nestedMap,
                                               dsc_i64 b) {
  if (!l.doubleQuant)
    return reinterpret_cast<const float *>(blob + l.absmaxAt)[b];
  const float *f = reinterpret_cast<const float *>(blob);
  return __fadd_rn(__fmul_rn(nestedMap[blob[l.absmaxAt + b]], f[1 + b / 256]),
                   f[0]);
}

/// Element i of the weight in f32.
__device__ __forceinline__ float fourBitAt(const unsigned char *blob,
                                           const FourBitBlob &l,
                                           const float *code,
                                           const float *nestedMap, dsc_i64 i) {
  const unsigned char byte = blob[l.codesAt + i / 2];
  const int c = (i % 2 == 0) ? (byte >> 4) : (byte & 15);
  return __fmul_rn(code[c], fourBitAbsmax(blob, l, nestedMap, i / l.block));
}

template <typename TA, typename TY>
__device__ void fourBitGemm(const TA *a, const unsigned char *blob, TY *y,
                            dsc_i64 M, dsc_i64 P, dsc_i64 Q, dsc_i64 sq,
                            dsc_i64 sp, FourBitBlob l, const float *code) {
  __shared__ float nestedMap[256];
  __shared__ float as[16][17];
  __shared__ float bs[16][17];
  const int t = threadIdx.x, ty = t / 16, tx = t % 16;
  if (l.doubleQuant)
    nestedMap[t] = dynamicMapValue(t, true);
  const dsc_i64 tilesP = (P + 15) / 16;
  const dsc_i64 m0 = (dsc_i64(blockIdx.x) / tilesP) * 16;
  const dsc_i64 p0 = (dsc_i64(blockIdx.x) % tilesP) * 16;
  __syncthreads();
  float acc = 0.0f;
  for (dsc_i64 q0 = 0; q0 < Q; q0 += 16) {
    const dsc_i64 m = m0 + ty, qa = q0 + tx;
    as[ty][tx] = (m < M && qa < Q) ? ld(a, m * Q + qa) : 0.0f;
    const dsc_i64 qb = q0 + ty, p = p0 + tx;
    bs[ty][tx] = (qb < Q && p < P)
                     ? fourBitAt(blob, l, code, nestedMap, qb * sq + p * sp)
                     : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < 16; ++k)
      acc = __fmaf_rn(as[ty][k], bs[k][tx], acc);
    __syncthreads();
  }
  const dsc_i64 m = m0 + ty, p = p0 + tx;
  if (m < M && p < P)
    st(y, m * P + p, acc);
}

} // namespace dsc
