// dsc.norm_all_reduce on NCCL (CudaBackend): the rank's norm squared into
// a scratch float, NCCL's sum over the group, its square root. One thread
// each; both round as the CPU backend does (one multiply, a correctly
// rounded square root).
extern "C" __global__ void dsc_norm_square(const float *norm, float *square) {
  square[0] = __fmul_rn(norm[0], norm[0]);
}

extern "C" __global__ void dsc_norm_sqrt(const float *square, float *result) {
  result[0] = __fsqrt_rn(square[0]);
}
