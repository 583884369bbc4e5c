//===- Gemm.cuh - GEMM operand widening kernels ----------------*- CUDA -*-===//
//
// Used by the CUDA backend (lib/CudaRuntime), not by the emitted launchers:
// GEMMs run as cuBLASLt descriptors (GemmCpu.cpp is the CPU side), and
// cuBLASLt takes operands of one type, so a GEMM of a 16-bit temporary by an
// f32 buffer first widens the 16-bit one (exactly) to f32; and it adds a
// bias of the output's type only, so an f32 bias of a 16-bit output is
// first rounded to that type (narrowed).
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh (see there and lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {
/// y[i] = x[i] in y's type (exact when widening; round to nearest even
/// when narrowing), over a grid-stride loop.
template <typename TX, typename TY>
__device__ __forceinline__ void convertElements(const TX *x, TY *y,
                                                dsc_i64 n) {
  for (dsc_i64 i = blockIdx.x * dsc_i64(blockDim.x) + threadIdx.x; i < n;
       i += dsc_i64(gridDim.x) * blockDim.x)
    st(y, i, ld(x, i));
}
} // namespace dsc

extern "C" __global__ void dsc_widen_f16(const __half *x, float *y,
                                         dsc_i64 n) {
  dsc::convertElements(x, y, n);
}

extern "C" __global__ void dsc_widen_bf16(const __nv_bfloat16 *x, float *y,
                                          dsc_i64 n) {
  dsc::convertElements(x, y, n);
}

extern "C" __global__ void dsc_narrow_f16(const float *x, __half *y,
                                          dsc_i64 n) {
  dsc::convertElements(x, y, n);
}

extern "C" __global__ void dsc_narrow_bf16(const float *x, __nv_bfloat16 *y,
                                           dsc_i64 n) {
  dsc::convertElements(x, y, n);
}
