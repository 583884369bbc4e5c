//===- RotaryCpu.cpp - Rotary embeddings and shared KV heads, CPU ---------===//
//
// rotary (Hugging Face's half rotation, forward and inverse), repeat_kv and
// repeat_kv_grad (grouped-query attention's shared key/value heads).
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"
#include "Rotary/Rotary.h"

namespace dsc::rt::cpu {

namespace {

/// y = rotate(x) over BH heads of [T, D]; the cos/sin table is built once
/// per call from the double-precision angles t * f_i. `y` may be `x`.
void rotary(const float *x, float *y, int64_t BH, int64_t T, int64_t D,
            const std::vector<double> &freq, bool inverse) {
  const int64_t half = D / 2;
  std::vector<float> cosT(size_t(T * half)), sinT(size_t(T * half));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < half; ++i) {
      const double a = double(t) * freq[size_t(i)];
      cosT[size_t(t * half + i)] = float(std::cos(a));
      sinT[size_t(t * half + i)] = float(inverse ? -std::sin(a) : std::sin(a));
    }
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < BH * T; ++r) {
    const int64_t t = r % T;
    const float *xr = x + r * D, *c = cosT.data() + t * half,
                *s = sinT.data() + t * half;
    float *yr = y + r * D;
#pragma omp simd
    for (int64_t i = 0; i < half; ++i) {
      const float lo = xr[i], hi = xr[i + half];
      yr[i] = lo * c[i] - hi * s[i];
      yr[i + half] = hi * c[i] + lo * s[i];
    }
  }
}

/// [B, KV, T*D] -> [B, KV * G, T*D]: head h copies head h / G.
void repeatKv(const float *x, float *y, int64_t B, int64_t KV, int64_t G,
              int64_t TD) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < KV * G; ++h)
      std::memcpy(y + (b * KV * G + h) * TD, x + (b * KV + h / G) * TD,
                  size_t(TD) * 4);
}

/// The sum over each group, g = 0 .. G-1 in order.
void repeatKvGrad(const float *dy, float *dx, int64_t B, int64_t KV,
                  int64_t G, int64_t TD) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < KV; ++k) {
      float *out = dx + (b * KV + k) * TD;
      const float *first = dy + (b * KV * G + k * G) * TD;
      std::memcpy(out, first, size_t(TD) * 4);
      for (int64_t g = 1; g < G; ++g) {
        const float *in = first + g * TD;
#pragma omp simd
        for (int64_t i = 0; i < TD; ++i)
          out[i] += in[i];
      }
    }
}

} // namespace

void runRotary(Exec &e) {
  const InstrDims &d = e.d;
  switch (asFamily<RotaryOpcode>(e.I.op)) {
  case RotaryOpcode::Rotary:
    rotary(e.fin(0, "x"), e.fout(0, "y"), d.B * d.H, d.T, d.D,
           rotaryFrequencies(e.I, d.D), e.I.getInt("inverse") != 0);
    return;
  case RotaryOpcode::RepeatKv:
  case RotaryOpcode::RepeatKvGrad: {
    const float *x = e.fin(0, "input");
    float *y = e.fout(0, "output");
    if (x == y)
      e.fail("output must not alias the input");
    if (e.I.op == Opcode::RepeatKv)
      repeatKv(x, y, d.B, d.H, d.groups, d.T * d.D);
    else
      repeatKvGrad(x, y, d.B, d.H, d.groups, d.T * d.D);
    return;
  }
  }
  e.fail("internal: not a rotary or repeat_kv opcode");
}

} // namespace dsc::rt::cpu
