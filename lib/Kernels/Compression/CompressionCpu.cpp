//===- CompressionCpu.cpp - 1-bit compression CPU kernels -----------------===//
//
// onebit_compress, onebit_decode and onebit_decode_mean: the arithmetic of
// DeepSpeed's compressed_allreduce (deepspeed/runtime/comm/nccl.py), in its
// operation order, so that a straightforward reference of the same math
// agrees bit for bit. The one deliberate difference: the norm's sum of
// squares is accumulated in double (torch.norm accumulates in float), which
// makes the scale independent of the thread count.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

namespace dsc::rt::cpu {

namespace {

/// Packs the signs of y[0, p) (p a multiple of 8), bit 7 of byte k for
/// element 8k, as numpy.packbits; a set bit is y >= 0 (NaN included, as
/// DeepSpeed's sign(y) + 1 > 0 test counts NaN as +1).
void packSigns(const float *y, int64_t p, uint8_t *signs) {
#pragma omp parallel for schedule(static) if (p > (1 << 18))
  for (int64_t k = 0; k < p / 8; ++k) {
    uint8_t byte = 0;
    for (int b = 0; b < 8; ++b)
      byte = uint8_t(byte | (uint8_t(!(y[8 * k + b] < 0.0f)) << (7 - b)));
    signs[k] = byte;
  }
}

inline bool signBit(const uint8_t *signs, int64_t i) {
  return (signs[i >> 3] >> (7 - (i & 7))) & 1;
}

/// y = pad(x, p) + error; scale = ||y|| / sqrt(p); new_error = y - scale *
/// sign(y). `newError` may be `error` (in place).
void compress(const float *x, int64_t n, const float *error, int64_t p,
              uint8_t *signs, float *scale, float *newError) {
#pragma omp parallel for simd schedule(static) if (p > (1 << 15))
  for (int64_t i = 0; i < p; ++i)
    newError[i] = (i < n ? x[i] : 0.0f) + error[i];
  // torch.norm(y) / np.sqrt(numel): the norm as a float, divided by the
  // square root rounded to float.
  const float s = float(std::sqrt(sumSquares(newError, p))) /
                  float(std::sqrt(double(p)));
  packSigns(newError, p, signs);
#pragma omp parallel for simd schedule(static) if (p > (1 << 15))
  for (int64_t i = 0; i < p; ++i)
    newError[i] = newError[i] - (newError[i] < 0.0f ? -s : s);
  *scale = s;
}

/// max |x[i]| over n elements (a quantization block's scale).
float absMax(const float *x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i)
    m = std::max(m, std::fabs(x[i]));
  return m;
}

} // namespace

void runCompression(Exec &e) {
  const InstrDims &d = e.d;
  switch (asFamily<CompressionOpcode>(e.I.op)) {
  case CompressionOpcode::OnebitCompress: {
    const float *x = e.fin(0, "input");
    const float *error = e.fin(1, "error");
    uint8_t *signs = e.u8out(0, "signs");
    float *scale = e.fout(1, "scale");
    float *newError = e.fout(2, "new_error");
    if (e.I.inputs.size() == 3 && e.scalarIn(2, "skip") != 0.0f) {
      // A skipped step: the error is kept; what is sent is never used.
      copyBytes(newError, error, size_t(d.cols) * sizeof(float));
      std::memset(signs, 0, size_t(d.cols / 8));
      *scale = 0.0f;
      return;
    }
    compress(x, d.n, error, d.cols, signs, scale, newError);
    return;
  }
  case CompressionOpcode::QuantizeInt4: {
    // Per block: scale = max|x| / 7, code = rint(x / scale) + 8, two per
    // byte, the even element low (the CUDA template's arithmetic).
    const float *x = e.fin(0, "input");
    uint8_t *codes = e.u8out(0, "codes");
    float *scales = e.fout(1, "scales");
    const int64_t B = d.cols;
#pragma omp parallel for schedule(static) if (d.n > (1 << 15))
    for (int64_t b = 0; b < d.rows; ++b) {
      const float m = absMax(x + b * B, B);
      const float scale = m / 7.0f;
      scales[b] = scale;
      auto code = [&](float v) {
        if (!(scale > 0.0f))
          return 8;
        return int(std::clamp(std::rint(v / scale), -7.0f, 7.0f)) + 8;
      };
      for (int64_t i = b * B; i < (b + 1) * B; i += 2)
        codes[i / 2] = uint8_t(code(x[i]) | code(x[i + 1]) << 4);
    }
    return;
  }
  case CompressionOpcode::DequantizeReduceInt4: {
    const uint8_t *codes = e.u8in(0, "codes");
    const float *scales = e.fin(1, "scales");
    float *out = e.fout(0, "result");
    const int64_t c = d.n, G = d.rows, B = d.cols;
    const bool mean = d.reduce == ReduceOp::Mean;
#pragma omp parallel for schedule(static) if (c * G > (1 << 15))
    for (int64_t i = 0; i < c; ++i) {
      float acc = 0.0f;
      for (int64_t j = 0; j < G; ++j) {
        const int64_t k = j * c + i;
        const int nibble = k % 2 ? codes[k / 2] >> 4 : codes[k / 2] & 15;
        acc += float(nibble - 8) * scales[k / B];
      }
      out[i] = mean ? acc / float(G) : acc;
    }
    return;
  }
  case CompressionOpcode::QuantizeInt8: {
    // Per block: scale = max|x| / 127, code = rint(x / scale) (the CUDA
    // template's arithmetic: one division, round half to even).
    const float *x = e.fin(0, "input");
    auto *codes = static_cast<int8_t *>(e.S.data(e.outId(0)));
    float *scales = e.fout(1, "scales");
    const int64_t B = d.cols;
#pragma omp parallel for schedule(static) if (d.n > (1 << 15))
    for (int64_t b = 0; b < d.rows; ++b) {
      const float m = absMax(x + b * B, B);
      const float scale = m / 127.0f;
      scales[b] = scale;
      for (int64_t i = b * B; i < (b + 1) * B; ++i)
        codes[i] = scale > 0.0f ? int8_t(std::rint(x[i] / scale)) : 0;
    }
    return;
  }
  case CompressionOpcode::DequantizeInt8: {
    const auto *codes = static_cast<const int8_t *>(e.S.data(e.inId(0)));
    const float *scales = e.fin(1, "scales");
    float *out = e.fout(0, "result");
    const int64_t B = d.cols;
#pragma omp parallel for schedule(static) if (d.n > (1 << 15))
    for (int64_t i = 0; i < d.n; ++i)
      out[i] = float(codes[i]) * scales[i / B];
    return;
  }
  case CompressionOpcode::OnebitDecode: {
    const uint8_t *signs = e.u8in(0, "signs");
    const float *scales = e.fin(1, "scales");
    float *out = e.fout(0, "result");
    const int64_t c = d.cols;
#pragma omp parallel for schedule(static) if (d.rows * c > (1 << 15))
    for (int64_t i = 0; i < d.rows * c; ++i)
      out[i] = signBit(signs, i) ? scales[i / c] : -scales[i / c];
    return;
  }
  case CompressionOpcode::OnebitDecodeMean: {
    const uint8_t *signs = e.u8in(0, "signs");
    const float *scales = e.fin(1, "scales");
    float *out = e.fout(0, "result");
    const int64_t c = d.cols, g = d.rows;
    // DeepSpeed scales first (scale * (1 / G), a float), then sums the G
    // chunks in rank order.
    std::vector<float> chunkWeight(static_cast<size_t>(g));
    const float inv = float(1.0 / double(g));
    for (int64_t j = 0; j < g; ++j)
      chunkWeight[size_t(j)] = scales[j] * inv;
#pragma omp parallel for schedule(static) if (c > (1 << 15))
    for (int64_t i = 0; i < c; ++i) {
      float acc = 0.0f;
      for (int64_t j = 0; j < g; ++j)
        acc += signBit(signs, j * c + i) ? chunkWeight[size_t(j)]
                                         : -chunkWeight[size_t(j)];
      out[i] = acc;
    }
    return;
  }
  }
  e.fail("internal: not a compression opcode");
}

} // namespace dsc::rt::cpu
