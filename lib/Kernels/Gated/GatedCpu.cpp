//===- GatedCpu.cpp - SiLU, products and the SwiGLU gate, CPU -------------===//
//
// silu, mul, swiglu (silu(gate) * up) and their gradients: LLaMA's MLP;
// scale (by a constant): LoRA's alpha / r; softcap: Gemma 2's
// cap * tanh(x / cap). Every operand of these ops has one shape (the
// instruction checker's Pointwise family), so each kernel is one
// vectorised loop. sigmoid_gate (Qwen2-MoE's shared expert) scales each
// row by the sigmoid of its gate value (the RowGate family).
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

namespace dsc::rt::cpu {

namespace {

/// sigmoid(x) with the branch-free exp (1 / (1 + e^-x); e^-x saturates at
/// e^87.3, where the sigmoid is 0 to float precision anyway).
inline float sigmoidAt(float x) { return 1.0f / (1.0f + expApprox(-x)); }

/// d silu / dx = s + x s (1 - s), given s = sigmoid(x).
inline float siluDerivative(float x, float s) {
  return s * (1.0f + x * (1.0f - s));
}

void silu(const float *x, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * sigmoidAt(x[i]);
}

void siluGrad(const float *dy, const float *x, float *dx, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = dy[i] * siluDerivative(x[i], sigmoidAt(x[i]));
}

void mul(const float *a, const float *b, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = a[i] * b[i];
}

void scale(const float *x, float factor, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = x[i] * factor;
}

/// Gemma 2's soft-capping and its gradient (from the result).
void softcap(const float *x, float cap, float *y, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = cap * std::tanh(x[i] / cap);
}

void softcapGrad(const float *dy, const float *y, float cap, float *dx,
                 int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float t = y[i] / cap;
    dx[i] = dy[i] * (1.0f - t * t);
  }
}

void swiglu(const float *gate, const float *up, float *y, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i)
    y[i] = gate[i] * sigmoidAt(gate[i]) * up[i];
}

/// dgate = dy * up * silu'(gate), dup = dy * silu(gate). The outputs may
/// alias dy (each element is read before it is written).
void swigluGrad(const float *dy, const float *gate, const float *up,
                float *dgate, float *dup, int64_t n) {
#pragma omp parallel for simd schedule(static)
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i], d = dy[i], s = sigmoidAt(g);
    dgate[i] = d * up[i] * siluDerivative(g, s);
    dup[i] = d * g * s;
  }
}

/// y[r] = sigmoid(gate[r]) x[r] over rows of C.
void sigmoidGate(const float *gate, const float *x, float *y, int64_t rows,
                 int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const float s = sigmoidAt(gate[r]);
    for (int64_t c = 0; c < C; ++c)
      y[r * C + c] = s * x[r * C + c];
  }
}

/// dx[r] = s dy[r]; dgate[r] = s (1 - s) dot(dy[r], x[r]) (in order).
void sigmoidGateGrad(const float *dy, const float *gate, const float *x,
                     float *dgate, float *dx, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C > (1 << 15))
  for (int64_t r = 0; r < rows; ++r) {
    const float s = sigmoidAt(gate[r]);
    float dot = 0.0f;
    for (int64_t c = 0; c < C; ++c)
      dot += dy[r * C + c] * x[r * C + c];
    for (int64_t c = 0; c < C; ++c)
      dx[r * C + c] = s * dy[r * C + c];
    dgate[r] = s * (1.0f - s) * dot;
  }
}

} // namespace

void runGated(Exec &e) {
  const int64_t n = e.d.n;
  switch (asFamily<GatedOpcode>(e.I.op)) {
  case GatedOpcode::Silu:
    silu(e.fin(0, "x"), e.fout(0, "y"), n);
    return;
  case GatedOpcode::SiluGrad:
    siluGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fout(0, "dx"), n);
    return;
  case GatedOpcode::Mul:
    mul(e.fin(0, "a"), e.fin(1, "b"), e.fout(0, "y"), n);
    return;
  case GatedOpcode::Scale:
    scale(e.fin(0, "x"), float(e.I.getFloat("factor")), e.fout(0, "y"), n);
    return;
  case GatedOpcode::Swiglu:
    swiglu(e.fin(0, "gate"), e.fin(1, "up"), e.fout(0, "y"), n);
    return;
  case GatedOpcode::Softcap:
    softcap(e.fin(0, "x"), float(e.I.getFloat("cap")), e.fout(0, "y"), n);
    return;
  case GatedOpcode::SoftcapGrad:
    softcapGrad(e.fin(0, "dy"), e.fin(1, "y"), float(e.I.getFloat("cap")),
                e.fout(0, "dx"), n);
    return;
  case GatedOpcode::SwigluGrad: {
    const float *dy = e.fin(0, "dy"), *gate = e.fin(1, "gate"),
                *up = e.fin(2, "up");
    swigluGrad(dy, gate, up, e.fout(0, "dgate"), e.fout(1, "dup"), n);
    return;
  }
  case GatedOpcode::SigmoidGate:
    sigmoidGate(e.fin(0, "gate"), e.fin(1, "x"), e.fout(0, "y"), e.d.rows,
                e.d.cols);
    return;
  case GatedOpcode::SigmoidGateGrad:
    sigmoidGateGrad(e.fin(0, "dy"), e.fin(1, "gate"), e.fin(2, "x"),
                    e.fout(0, "dgate"), e.fout(1, "dx"), e.d.rows, e.d.cols);
    return;
  }
  e.fail("internal: not a gated opcode");
}

} // namespace dsc::rt::cpu
