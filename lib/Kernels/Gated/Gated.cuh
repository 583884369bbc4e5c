//===- Gated.cuh - SiLU, products and the SwiGLU gate, CUDA ----*- CUDA -*-===//
//
// silu, mul, swiglu, scale and their gradients: the CUDA side of
// GatedCpu.cpp.
//
// Not a standalone header: part of the CUDA device library, pasted after
// Common.cuh, whose helpers it uses (see Common.cuh and
// lib/Kernels/Kernels.cmake).
//
//===----------------------------------------------------------------------===//

namespace dsc {

__device__ __forceinline__ float sigmoidAt(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// d silu / dx = s + x s (1 - s), given s = sigmoid(x).
__device__ __forceinline__ float siluDerivative(float x, float s) {
  return s * (1.0f + x * (1.0f - s));
}

/// OP 0: y = silu(a); 1: y = a * b; 2: y = silu(a) * b (swiglu);
/// 3: y = a * factor (scale).
template <int OP, typename TA, typename TB, typename TY, dsc_i64 N, int VEC>
__device__ void gatedForward(const TA *a, const TB *b, TY *y, float factor) {
  DSC_GRID_LOOP(g, N / VEC) {
    float va[VEC], vb[VEC];
    ldv<VEC>(a, g * VEC, va);
    if constexpr (OP == 1 || OP == 2)
      ldv<VEC>(b, g * VEC, vb);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      if constexpr (OP == 0)
        va[l] = va[l] * sigmoidAt(va[l]);
      else if constexpr (OP == 1)
        va[l] = va[l] * vb[l];
      else if constexpr (OP == 3)
        va[l] = va[l] * factor;
      else
        va[l] = va[l] * sigmoidAt(va[l]) * vb[l];
    }
    stv<VEC>(y, g * VEC, va);
  }
}

/// dsc.silu_grad (cpu::siluGrad): dx = dy * silu'(x).
template <typename TD, typename TX, typename TO, dsc_i64 N, int VEC>
__device__ void siluGrad(const TD *dy, const TX *x, TO *dx) {
  DSC_GRID_LOOP(g, N / VEC) {
    float d[VEC], v[VEC];
    ldv<VEC>(dy, g * VEC, d);
    ldv<VEC>(x, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      d[l] = d[l] * siluDerivative(v[l], sigmoidAt(v[l]));
    stv<VEC>(dx, g * VEC, d);
  }
}

/// dsc.softcap (cpu::softcap): y = cap * tanh(x / cap).
template <typename TX, typename TY, dsc_i64 N, int VEC>
__device__ void softcap(const TX *x, TY *y, float cap) {
  DSC_GRID_LOOP(g, N / VEC) {
    float v[VEC];
    ldv<VEC>(x, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l)
      v[l] = __fmul_rn(cap, tanhf(__fdiv_rn(v[l], cap)));
    stv<VEC>(y, g * VEC, v);
  }
}

/// dsc.softcap_grad (cpu::softcapGrad): dx = dy * (1 - (y / cap)^2).
template <typename TD, typename TY, typename TO, dsc_i64 N, int VEC>
__device__ void softcapGrad(const TD *dy, const TY *y, TO *dx, float cap) {
  DSC_GRID_LOOP(g, N / VEC) {
    float d[VEC], v[VEC];
    ldv<VEC>(dy, g * VEC, d);
    ldv<VEC>(y, g * VEC, v);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float t = __fdiv_rn(v[l], cap);
      d[l] = __fmul_rn(d[l], __fsub_rn(1.0f, __fmul_rn(t, t)));
    }
    stv<VEC>(dx, g * VEC, d);
  }
}

/// dsc.swiglu_grad (cpu::swigluGrad).
template <typename TD, typename TG, typename TU, typename TO, dsc_i64 N,
          int VEC>
__device__ void swigluGrad(const TD *dy, const TG *gate, const TU *up,
                           TO *dgate, TO *dup) {
  DSC_GRID_LOOP(g, N / VEC) {
    float d[VEC], a[VEC], u[VEC], da[VEC];
    ldv<VEC>(dy, g * VEC, d);
    ldv<VEC>(gate, g * VEC, a);
    ldv<VEC>(up, g * VEC, u);
#pragma unroll
    for (int l = 0; l < VEC; ++l) {
      const float s = sigmoidAt(a[l]);
      da[l] = d[l] * u[l] * siluDerivative(a[l], s);
      d[l] = d[l] * a[l] * s;
    }
    stv<VEC>(dgate, g * VEC, da);
    stv<VEC>(dup, g * VEC, d);
  }
}

/// dsc.sigmoid_gate (cpu::sigmoidGate): y[r] = sigmoid(gate[r]) x[r].
template <typename TG, typename TX, typename TY, dsc_i64 ROWS, dsc_i64 C>
__device__ void sigmoidGate(const TG *gate, const TX *x, TY *y) {
  DSC_GRID_LOOP(i, ROWS * C) {
    st(y, i, sigmoidAt(ld(gate, i / C)) * ld(x, i));
  }
}

/// dsc.sigmoid_gate_grad (cpu::sigmoidGateGrad): one thread per row, the
/// row's dot product in order.
template <typename TD, typename TG, typename TX, typename TOG, typename TOX,
          dsc_i64 ROWS, dsc_i64 C>
__device__ void sigmoidGateGrad(const TD *dy, const TG *gate, const TX *x,
                                TOG *dgate, TOX *dx) {
  DSC_GRID_LOOP(r, ROWS) {
    const float s = sigmoidAt(ld(gate, r));
    float dot = 0.0f;
    for (dsc_i64 c = 0; c < C; ++c) {
      const float d = ld(dy, r * C + c);
      dot += d * ld(x, r * C + c);
      st(dx, r * C + c, s * d);
    }
    st(dgate, r, s * (1.0f - s) * dot);
  }
}

} // namespace dsc
