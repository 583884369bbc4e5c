//===- ElementwiseCpu.cpp - Elementwise and data-movement CPU kernels -----===//
//
// fill, iota, copy, add (numpy broadcast), reduce_to, gelu, dropout, the
// bias epilogues (bias_gelu, bias_dropout_add and their gradients), the
// head split/merge, concat/split and convert, and runElementwise, their
// dispatch. Every kernel computes in f32: cpu::Exec widens f16/bf16 inputs
// and narrows 16-bit outputs (dsc/Program/Half.h), so convert is a copy.
//
//===----------------------------------------------------------------------===//

#include "Common/CommonCpu.h"

#include "dsc/Program/Broadcast.h"

#include <type_traits>

namespace dsc::rt::cpu {

namespace {

void fillI32(int32_t *out, int64_t n, int32_t v) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 16))
  for (int64_t i = 0; i < n; ++i)
    out[i] = v;
}

void iota(int32_t *out, int64_t n, int64_t start, int64_t step) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = int32_t(start + i * step);
}

//===----------------------------------------------------------------------===//
// Broadcasting
//===----------------------------------------------------------------------===//

/// Offset in b of a's row r (row = all merged dims but the last).
inline int64_t bRowOffset(const MergedDims &m, int64_t r) {
  int64_t off = 0;
  for (size_t i = m.len.size() - 1; i-- > 0;) {
    int64_t idx = r % m.len[i];
    r /= m.len[i];
    off += idx * m.bStride[i];
  }
  return off;
}

/// out = a + broadcast(b). `aShape`/`bShape` follow numpy rules (b right
/// aligned, each dim equal or 1). out may alias a.
void addBroadcast(const float *a, const float *b, float *out,
                  const std::vector<int64_t> &aShape,
                  const std::vector<int64_t> &bShape) {
  MergedDims m = mergeBroadcastDims(aShape, bShape);
  const int64_t L = m.len.back(), rows = m.rows();
  const bool lastFull = m.full.back();
  const int64_t chunk = 16384;
  const int64_t perRow = ceilDiv(L, chunk), tasks = rows * perRow;
#pragma omp parallel for schedule(static) if (rows * L > (1 << 15))
  for (int64_t t = 0; t < tasks; ++t) {
    int64_t r = t / perRow, j0 = (t % perRow) * chunk;
    int64_t j1 = std::min(L, j0 + chunk);
    const float *ar = a + r * L;
    float *o = out + r * L;
    const float *br = b + bRowOffset(m, r);
    if (lastFull) {
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j)
        o[j] = ar[j] + br[j];
    } else {
      const float s = br[0];
#pragma omp simd
      for (int64_t j = j0; j < j1; ++j)
        o[j] = ar[j] + s;
    }
  }
}

/// out (shape bShape) = sum of x (shape aShape) over the broadcast dims.
void reduceTo(const float *x, float *out, const std::vector<int64_t> &aShape,
              const std::vector<int64_t> &bShape) {
  const ReduceToPlan plan = planReduceTo(aShape, bShape);
  const int64_t L = plan.L, outRows = plan.outRows, sumRows = plan.sumRows;
  const bool par = outRows * sumRows * L > (1 << 15);
  if (plan.lastFull) {
    // out is [outRows, L]; each task owns a column slice of one out row and
    // sums x rows in a fixed order.
    const int64_t cb = 64, slices = ceilDiv(L, cb), tasks = outRows * slices;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t t = 0; t < tasks; ++t) {
      int64_t o = t / slices, c0 = (t % slices) * cb,
              c1 = std::min(L, c0 + cb);
      float *dst = out + o * L;
      for (int64_t c = c0; c < c1; ++c)
        dst[c] = 0.0f;
      for (int64_t q = 0; q < sumRows; ++q) {
        const float *src = x + plan.xRowOffset(o, q);
#pragma omp simd
        for (int64_t c = c0; c < c1; ++c)
          dst[c] += src[c];
      }
    }
  } else {
    // The innermost run is broadcast: each out element sums contiguous runs.
#pragma omp parallel for schedule(static) if (par)
    for (int64_t o = 0; o < outRows; ++o) {
      double acc = 0.0;
      for (int64_t q = 0; q < sumRows; ++q) {
        const float *src = x + plan.xRowOffset(o, q);
        float s = 0.0f;
#pragma omp simd reduction(+ : s)
        for (int64_t c = 0; c < L; ++c)
          s += src[c];
        acc += s;
      }
      out[o] = float(acc);
    }
  }
}

//===----------------------------------------------------------------------===//
// GELU
//===----------------------------------------------------------------------===//

/// erf(x): the rational approximation used by Eigen/XLA (few ulp in fp32).
inline float erfApprox(float x) {
  x = x > 4.0f ? 4.0f : x;
  x = x < -4.0f ? -4.0f : x;
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 + -2.10102402082508e-06f;
  p = p * x2 + -5.69250639462346e-05f;
  p = p * x2 + -7.34990630326855e-04f;
  p = p * x2 + -2.95459980854025e-03f;
  p = p * x2 + -1.60960333262415e-02f;
  p = p * x;
  float q = -1.45660718464996e-05f;
  q = q * x2 + -2.13374055278905e-04f;
  q = q * x2 + -1.68282697438203e-03f;
  q = q * x2 + -7.37332916720468e-03f;
  q = q * x2 + -1.42647390514189e-02f;
  return p / q;
}

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoeff = 0.044715f;
constexpr float kInvSqrt2 = 0.7071067811865476f;
constexpr float kInvSqrt2Pi = 0.3989422804014327f;

/// GELU and its derivative at v. Shared by the plain and the fused kernels
/// so both compute bit-identical values; the approximation is a template
/// parameter so the loops that call them vectorise.
template <bool Tanh> inline float geluAt(float v) {
  if constexpr (Tanh) {
    // 0.5 x (1 + tanh(u)) == x * sigmoid(2u): no cancellation near u << 0.
    float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    return v * (1.0f / (1.0f + expApprox(-2.0f * u)));
  } else {
    return 0.5f * v * (1.0f + erfApprox(v * kInvSqrt2));
  }
}

template <bool Tanh> inline float geluDerivativeAt(float v) {
  if constexpr (Tanh) {
    float u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoeff * v * v);
    float s = 1.0f / (1.0f + expApprox(-2.0f * u)); // 0.5 (1 + tanh u)
    // d/dx [x s(2u)] = s + x * 2 s (1 - s) u'
    return s + v * 2.0f * s * (1.0f - s) * du;
  } else {
    float cdf = 0.5f * (1.0f + erfApprox(v * kInvSqrt2));
    float pdf = kInvSqrt2Pi * expApprox(-0.5f * v * v);
    return cdf + v * pdf;
  }
}

/// Calls `body(std::bool_constant<Tanh>)` with the approximation as a
/// compile-time constant.
template <typename Body> inline void withGelu(bool tanhApprox, Body body) {
  if (tanhApprox)
    body(std::true_type());
  else
    body(std::false_type());
}

void gelu(const float *x, float *y, int64_t n, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
    for (int64_t i = 0; i < n; ++i)
      y[i] = geluAt<tanh()>(x[i]);
  });
}

void geluGrad(const float *dy, const float *x, float *dx, int64_t n,
              bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for simd schedule(static) if (parallel : n > (1 << 15))
    for (int64_t i = 0; i < n; ++i)
      dx[i] = dy[i] * geluDerivativeAt<tanh()>(x[i]);
  });
}

//===----------------------------------------------------------------------===//
// Fused epilogues over [rows, N] with a bias [N], and dropout. Bias
// gradients are summed per 32-row block and merged in block order
// (rowsWithColumnSum: thread-count independent).
//===----------------------------------------------------------------------===//

void biasGelu(const float *x, const float *b, float *y, int64_t rows,
              int64_t N, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
    for (int64_t r = 0; r < rows; ++r) {
      const float *xr = x + r * N;
      float *yr = y + r * N;
#pragma omp simd
      for (int64_t c = 0; c < N; ++c)
        yr[c] = geluAt<tanh()>(xr[c] + b[c]);
    }
  });
}

void biasGeluGrad(const float *dy, const float *x, const float *b, float *dx,
                  float *db, int64_t rows, int64_t N, bool tanhApprox) {
  withGelu(tanhApprox, [&](auto tanh) {
    rowsWithColumnSum(rows, N, db, [&](int64_t r, float *acc) {
      const float *dyr = dy + r * N, *xr = x + r * N;
      float *dxr = dx + r * N;
#pragma omp simd
      for (int64_t c = 0; c < N; ++c) {
        float g = dyr[c] * geluDerivativeAt<tanh()>(xr[c] + b[c]);
        dxr[c] = g;
        acc[c] += g;
      }
    });
  });
}

/// y = res + dropout(x + b), with dsc.dropout's Philox mask.
void biasDropoutAdd(const float *x, const float *b, const float *res,
                    float *y, int64_t rows, int64_t N, double rate,
                    uint32_t stream, uint64_t seed, uint64_t offset) {
#pragma omp parallel for schedule(static) if (rows * N > (1 << 15))
  for (int64_t r = 0; r < rows; ++r)
    biasDropoutAddRow(x, b, res, y, r, N, rate, stream, seed, offset);
}

/// dx = dropout(dy) (same mask), db = sum of dx over rows.
void dropoutBiasGrad(const float *dy, float *dx, float *db, int64_t rows,
                     int64_t N, double rate, uint32_t stream, uint64_t seed,
                     uint64_t offset) {
  const float scale = rate > 0.0 ? float(1.0 / (1.0 - rate)) : 1.0f;
  rowsWithColumnSum(rows, N, db, [&](int64_t r, float *acc) {
    forDropoutMask(r * N, (r + 1) * N, rate, stream, seed, offset,
                   [&](int64_t i, bool keep) {
                     float g = keep ? (rate > 0.0 ? dy[i] * scale : dy[i])
                                    : 0.0f;
                     dx[i] = g;
                     acc[i - r * N] += g;
                   });
  });
}

void dropout(const float *x, float *y, int64_t n, double rate, uint32_t stream,
             uint64_t seed, uint64_t offset) {
  if (rate <= 0.0) {
    copyBytes(y, x, size_t(n) * 4);
    return;
  }
  if (rate >= 1.0) {
    fillF32(y, n, 0.0f);
    return;
  }
  const float s = float(1.0 / (1.0 - rate));
  constexpr int64_t kChunk = 1024; // elements per task, a multiple of 4
#pragma omp parallel for schedule(static) if (n > (1 << 15))
  for (int64_t c = 0; c < ceilDiv(n, kChunk); ++c)
    forDropoutMask(c * kChunk, std::min(n, (c + 1) * kChunk), rate, stream,
                   seed, offset, [&](int64_t i, bool keep) {
                     y[i] = keep ? x[i] * s : 0.0f;
                   });
}

//===----------------------------------------------------------------------===//
// Heads, concat and split
//===----------------------------------------------------------------------===//

/// `bias` ([P*H*D], or null) is added on the way (dsc.bias_split_heads).
void splitHeads(const float *x, const float *bias,
                const std::vector<float *> &outs, int64_t B, int64_t T,
                int64_t H, int64_t D) {
  const int64_t P = int64_t(outs.size()), W = P * H * D;
#pragma omp parallel for schedule(static) if (B * T * W > (1 << 15))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    const float *src = x + bt * W;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t h = 0; h < H; ++h) {
        float *dst = outs[size_t(p)] + ((b * H + h) * T + t) * D;
        const int64_t col = (p * H + h) * D;
        if (!bias) {
          std::memcpy(dst, src + col, size_t(D) * 4);
          continue;
        }
#pragma omp simd
        for (int64_t d = 0; d < D; ++d)
          dst[d] = src[col + d] + bias[col + d];
      }
  }
}

void mergeHeads(const std::vector<const float *> &ins, float *out, int64_t B,
                int64_t T, int64_t H, int64_t D) {
  const int64_t P = int64_t(ins.size()), W = P * H * D;
#pragma omp parallel for schedule(static) if (B * T * W > (1 << 15))
  for (int64_t bt = 0; bt < B * T; ++bt) {
    const int64_t b = bt / T, t = bt % T;
    float *dst = out + bt * W;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t h = 0; h < H; ++h)
        std::memcpy(dst + (p * H + h) * D,
                    ins[size_t(p)] + ((b * H + h) * T + t) * D, size_t(D) * 4);
  }
}

/// Visits the runs a tensor viewed as [outer, sum(widths), inner] shares
/// with its pieces [outer, widths[i], inner]: `copy(wholeOffset,
/// pieceOffset, i, count)` in floats. Concat gathers, split scatters.
template <typename CopyFn>
void forEachPieceRun(const std::vector<int64_t> &widths, int64_t outer,
                     int64_t inner, CopyFn copy) {
  int64_t total = 0;
  for (int64_t w : widths)
    total += w;
#pragma omp parallel for schedule(static) if (outer * total * inner > (1 << 15))
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = 0;
    for (size_t i = 0; i < widths.size(); ++i) {
      copy((o * total + at) * inner, o * widths[i] * inner, i,
           widths[i] * inner);
      at += widths[i];
    }
  }
}

/// Concatenation / split along one axis of tensors viewed as
/// [outer, width_i, inner].
void concat(const std::vector<const float *> &ins,
            const std::vector<int64_t> &widths, float *out, int64_t outer,
            int64_t inner) {
  forEachPieceRun(widths, outer, inner,
                  [&](int64_t whole, int64_t piece, size_t i, int64_t n) {
                    std::memcpy(out + whole, ins[i] + piece, size_t(n) * 4);
                  });
}

void split(const float *in, const std::vector<float *> &outs,
           const std::vector<int64_t> &widths, int64_t outer, int64_t inner) {
  forEachPieceRun(widths, outer, inner,
                  [&](int64_t whole, int64_t piece, size_t i, int64_t n) {
                    std::memcpy(outs[i] + piece, in + whole, size_t(n) * 4);
                  });
}

} // namespace

void runElementwise(Exec &e) {
  const Instr &I = e.I;
  const InstrDims &d = e.d;
  const RngContext &rng = e.rng;
  Storage &S = e.S;
  switch (asFamily<ElementwiseOpcode>(I.op)) {
  case ElementwiseOpcode::Fill: {
    const double v = I.getFloat("value");
    if (isFloat(e.out(0).dtype))
      fillF32(e.fout(0, "output"), d.n, float(v));
    else if (e.out(0).dtype == DType::I32)
      fillI32(S.i32(e.outId(0)), d.n, int32_t(v));
    else {
      int64_t *p = S.i64(e.outId(0));
      for (int64_t i = 0; i < d.n; ++i)
        p[i] = int64_t(v);
    }
    return;
  }
  case ElementwiseOpcode::Iota:
    iota(e.iout(0, "output"), d.n, I.getInt("start"), I.getInt("step"));
    return;
  case ElementwiseOpcode::Add: {
    const float *pa = e.fin(0, "a"), *pb = e.fin(1, "b");
    addBroadcast(pa, pb, e.fout(0, "output"), e.in(0).shape, e.in(1).shape);
    return;
  }
  case ElementwiseOpcode::ReduceTo: {
    const float *px = e.fin(0, "input");
    float *po = e.fout(0, "output");
    if (px == po)
      e.fail("output must not alias the input");
    reduceTo(px, po, e.in(0).shape, e.out(0).shape);
    return;
  }
  case ElementwiseOpcode::Gelu: {
    const float *x = e.fin(0, "x");
    gelu(x, e.fout(0, "output"), d.n, d.tanh);
    return;
  }
  case ElementwiseOpcode::GeluGrad: {
    const float *dy = e.fin(0, "dy"), *x = e.fin(1, "x");
    geluGrad(dy, x, e.fout(0, "dx"), d.n, d.tanh);
    return;
  }
  case ElementwiseOpcode::Dropout: {
    const float *x = e.fin(0, "x");
    dropout(x, e.fout(0, "output"), d.n, d.rate, uint32_t(I.getInt("stream")),
            rng.seed, rng.offset);
    return;
  }
  case ElementwiseOpcode::BiasGelu:
    biasGelu(e.fin(0, "x"), e.fin(1, "bias"), e.fout(0, "output"), d.rows,
             d.cols, d.tanh);
    return;
  case ElementwiseOpcode::BiasGeluGrad:
    biasGeluGrad(e.fin(0, "dy"), e.fin(1, "x"), e.fin(2, "bias"),
                 e.fout(0, "dx"), e.fout(1, "dbias"), d.rows, d.cols, d.tanh);
    return;
  case ElementwiseOpcode::BiasDropoutAdd:
    biasDropoutAdd(e.fin(0, "x"), e.fin(1, "bias"), e.fin(2, "residual"),
                   e.fout(0, "output"), d.rows, d.cols, d.rate,
                   uint32_t(I.getInt("stream")), rng.seed, rng.offset);
    return;
  case ElementwiseOpcode::DropoutBiasGrad:
    dropoutBiasGrad(e.fin(0, "dy"), e.fout(0, "dx"), e.fout(1, "dbias"), d.rows,
                    d.cols, d.rate, uint32_t(I.getInt("stream")), rng.seed,
                    rng.offset);
    return;
  case ElementwiseOpcode::SplitHeads:
  case ElementwiseOpcode::BiasSplitHeads: {
    const float *px = e.fin(0, "x");
    const float *bias =
        I.op == Opcode::BiasSplitHeads ? e.fin(1, "bias") : nullptr;
    std::vector<float *> outs;
    for (size_t p = 0; p < I.outputs.size(); ++p)
      outs.push_back(e.fout(p, "output"));
    splitHeads(px, bias, outs, d.B, d.T, d.H, d.D);
    return;
  }
  case ElementwiseOpcode::MergeHeads: {
    std::vector<const float *> ins;
    for (size_t p = 0; p < I.inputs.size(); ++p)
      ins.push_back(e.fin(p, "input"));
    mergeHeads(ins, e.fout(0, "output"), d.B, d.T, d.H, d.D);
    return;
  }
  case ElementwiseOpcode::Pack:
  case ElementwiseOpcode::Concat: {
    std::vector<const float *> ins;
    for (size_t k = 0; k < I.inputs.size(); ++k)
      ins.push_back(e.fin(k, "piece"));
    concat(ins, d.widths, e.fout(0, "output"), d.outer, d.inner);
    return;
  }
  case ElementwiseOpcode::Unpack:
  case ElementwiseOpcode::Split: {
    std::vector<float *> outs;
    for (size_t k = 0; k < I.outputs.size(); ++k)
      outs.push_back(e.fout(k, "piece"));
    split(e.fin(0, "input"), outs, d.widths, d.outer, d.inner);
    return;
  }
  case ElementwiseOpcode::FlatResize: {
    const int64_t n = e.in(0).numElements(), m = e.out(0).numElements();
    if (e.in(0).dtype == DType::U8) { // 4-bit weights' bytes under ZeRO-3
      auto *out = static_cast<uint8_t *>(S.data(e.outId(0)));
      copyBytes(out, S.data(e.inId(0)), size_t(std::min(n, m)));
      if (m > n)
        std::memset(out + n, 0, size_t(m - n));
      return;
    }
    float *out = e.fout(0, "result");
    copyBytes(out, e.fin(0, "input"), size_t(std::min(n, m)) * sizeof(float));
    if (m > n)
      fillF32(out + n, m - n, 0.0f);
    return;
  }
  case ElementwiseOpcode::Copy:
  case ElementwiseOpcode::TpCopy:
  case ElementwiseOpcode::ToHost:   // ZeRO-Offload: on the CPU both memories are RAM
  case ElementwiseOpcode::ToDevice: {
    const Buffer &i = e.in(0), &o = e.out(0);
    if (i.dtype != o.dtype)
      e.fail("dtypes differ: " + std::string(dtypeName(i.dtype)) + " -> " +
             dtypeName(o.dtype));
    copyBytes(S.data(e.outId(0)), S.data(e.inId(0)), i.bytes());
    return;
  }
  case ElementwiseOpcode::SwapIn: // ZeRO-Infinity: the swap file's bytes
  case ElementwiseOpcode::SwapOut: {
    const Buffer &i = e.in(0), &o = e.out(0);
    if (i.dtype != o.dtype || i.bytes() != o.bytes())
      e.fail("'" + i.name + "' and '" + o.name + "' differ in type or size");
    if (e.I.op == Opcode::SwapIn)
      S.swapIn(e.inId(0), S.data(e.outId(0)));
    else
      S.swapOut(e.outId(0), S.data(e.inId(0)));
    return;
  }
  case ElementwiseOpcode::Convert: // in f32: fin widens, commit narrows
    copyBytes(e.fout(0, "output"), e.fin(0, "input"), size_t(d.n) * 4);
    return;
  }
  e.fail("internal: not an elementwise opcode");
}

} // namespace dsc::rt::cpu
