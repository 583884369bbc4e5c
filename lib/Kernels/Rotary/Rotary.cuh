//===- Rotary.cuh - Rotary embeddings and shared KV heads, CUDA -*- CUDA -*-===//
//
// rotary, repeat_kv and repeat_kv_grad: the CUDA side of RotaryCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

/// dsc.rotary (cpu::rotary): one item per (row, pair); `freq` holds the
/// D/2 frequencies (RotaryEmit.cpp writes them into the kernel), the angle
/// and its sine and cosine are taken in double as the CPU kernel does.
template <typename TX, typename TY, dsc_i64 ROWS, dsc_i64 T, int D,
          bool INVERSE>
__device__ void rotary(const TX *x, TY *y, const double *freq) {
  constexpr int HALF = D / 2;
  DSC_GRID_LOOP(e, ROWS * HALF) {
    const dsc_i64 r = e / HALF;
    const int i = int(e % HALF);
    double sn, cs;
    sincos(double(r % T) * freq[i], &sn, &cs);
    const float c = float(cs), s = INVERSE ? -float(sn) : float(sn);
    const float lo = ld(x, r * D + i), hi = ld(x, r * D + i + HALF);
    st(y, r * D + i, lo * c - hi * s);
    st(y, r * D + i + HALF, hi * c + lo * s);
  }
}

/// dsc.repeat_kv (cpu::repeatKv): [B, KV, TD] -> [B, KV * G, TD].
template <typename TX, typename TY, dsc_i64 B, dsc_i64 KV, dsc_i64 G,
          dsc_i64 TD>
__device__ void repeatKv(const TX *x, TY *y) {
  DSC_GRID_LOOP(e, B * KV * G * TD) {
    const dsc_i64 bh = e / TD, b = bh / (KV * G), h = bh % (KV * G);
    st(y, e, ld(x, (b * KV + h / G) * TD + e % TD));
  }
}

/// dsc.repeat_kv_grad (cpu::repeatKvGrad): the group sums in order.
template <typename TX, typename TY, dsc_i64 B, dsc_i64 KV, dsc_i64 G,
          dsc_i64 TD>
__device__ void repeatKvGrad(const TX *dy, TY *dx) {
  DSC_GRID_LOOP(e, B * KV * TD) {
    const dsc_i64 bk = e / TD;
    const dsc_i64 first = bk * G * TD + e % TD;
    float sum = ld(dy, first);
    for (dsc_i64 g = 1; g < G; ++g)
      sum += ld(dy, first + g * TD);
    st(dx, e, sum);
  }
}

} // namespace dsc
