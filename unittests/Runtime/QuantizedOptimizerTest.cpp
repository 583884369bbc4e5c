// 8-bit Adam (bitsandbytes' dynamic maps, nearest-code quantization, the
// block update's rules for zero blocks, non-finite gradients and skipped
// steps) and Adafactor (factored and whole second moments, a rank-3
// parameter, the first moment) against hand-computed values and
// independent double-precision loops.
#include "TestUtil.h"

#include "Optimizers/DynamicMap.h"

#include <array>
#include <cmath>
#include <cstring>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;
using dsc::optim::dynamicMap;
using dsc::optim::quantizeNearest;

TEST(DynamicMap, Structure) {
  const auto s = dynamicMap(true), u = dynamicMap(false);
  for (int j = 1; j < 256; ++j) {
    EXPECT_LT(s[j - 1], s[j]) << j;
    EXPECT_LT(u[j - 1], u[j]) << j;
  }
  EXPECT_EQ(s[127], 0.0f);
  EXPECT_EQ(s[255], 1.0f);
  EXPECT_EQ(u[0], 0.0f);
  EXPECT_EQ(u[255], 1.0f);
  for (int j = 0; j < 127; ++j) // the negatives mirror the positives
    EXPECT_EQ(s[size_t(j)], -s[size_t(254 - j)]) << j;
  // bitsandbytes' smallest magnitudes: 10^-6 times the midpoint of
  // linspace(0.1, 1, 2) (signed) and of its first two points of 3
  // (unsigned); the largest below 1: 1 - 0.9/128/2 and 1 - 0.9/256/2.
  EXPECT_NEAR(s[128], 0.55e-6, 1e-13);
  EXPECT_NEAR(u[1], 0.325e-6, 1e-13);
  EXPECT_NEAR(s[254], 1.0 - 0.9 / 64 / 2, 1e-6);
  EXPECT_NEAR(u[254], 1.0 - 0.9 / 128 / 2, 1e-6);
}

TEST(DynamicMap, QuantizesToTheNearestCode) {
  const auto s = dynamicMap(true), u = dynamicMap(false);
  for (int j = 0; j < 256; ++j) {
    EXPECT_EQ(quantizeNearest(s.data(), s[size_t(j)], true), j);
    EXPECT_EQ(quantizeNearest(u.data(), u[size_t(j)], false), j);
  }
  for (float x : uniform(2000, 5)) {
    const int c = quantizeNearest(s.data(), x, false);
    for (int j = 0; j < 256; ++j)
      ASSERT_LE(std::fabs(s[size_t(c)] - x), std::fabs(s[size_t(j)] - x))
          << x;
  }
  // A tiny negative momentum keeps its sign: the smallest negative code,
  // not 0; a tiny positive one rounds to 0 (its sign bit is 0 too).
  EXPECT_EQ(quantizeNearest(s.data(), -1e-9f, true), 126);
  EXPECT_EQ(quantizeNearest(s.data(), -1e-9f, false), 127);
  EXPECT_EQ(quantizeNearest(s.data(), 1e-9f, true), 127);
}

/// The nearest-code rule by its definition, one code at a time: the first
/// code >= x among the first 255 (else the last), or its predecessor when
/// that is at most as far; then the sign rule.
static int nearestByScan(const std::array<float, 256> &code, float x,
                         bool keepSign) {
  int c = 255;
  for (int j = 0; j < 255; ++j)
    if (!(code[size_t(j)] < x)) {
      c = j;
      break;
    }
  if (c > 0 && x - code[size_t(c - 1)] <= code[size_t(c)] - x)
    c = c - 1;
  if (keepSign && std::signbit(code[size_t(c)]) != std::signbit(x))
    c += x > 0.0f ? 1 : -1;
  return c;
}

TEST(DynamicMap, SearchesMatchTheScanEverywhere) {
  for (bool isSigned : {true, false}) {
    const auto map = dynamicMap(isSigned);
    std::vector<float> xs = {0.0f, -0.0f, 1.0f, -1.0f, 1e-30f, -1e-30f,
                             std::nanf(""), 2.0f, -2.0f, INFINITY, -INFINITY};
    uint32_t nanBits = 0x7F800001u; // a NaN in +inf's bucket
    float payloadNan;
    std::memcpy(&payloadNan, &nanBits, sizeof payloadNan);
    xs.push_back(payloadNan);
    for (int j = 0; j + 1 < 256; ++j) { // each code, its midpoints, and ulps
      const float a = map[size_t(j)], b = map[size_t(j + 1)];
      const float mid = a + (b - a) / 2;
      for (float x : {a, mid, std::nextafter(mid, a), std::nextafter(mid, b),
                      std::nextafter(a, b), std::nextafter(b, a)})
        xs.push_back(x);
    }
    for (float x : uniform(4000, 11))
      xs.push_back(x);
    const dsc::optim::NearestCode nearest(map);
    for (float x : xs)
      for (bool keepSign : {true, false}) {
        const uint8_t want = uint8_t(nearestByScan(map, x, keepSign));
        ASSERT_EQ(quantizeNearest(map.data(), x, keepSign), want)
            << "x " << x << (isSigned ? " signed" : " unsigned")
            << (keepSign ? " keeping the sign" : "");
        ASSERT_EQ(nearest(x, keepSign), want)
            << "NearestCode, x " << x << (isSigned ? " signed" : " unsigned")
            << (keepSign ? " keeping the sign" : "");
      }
  }
}

namespace {
/// One adam_8bit instruction over n elements (ceil(n/256) blocks).
struct Adam8 {
  Harness h;
  int64_t n, blocks;
  int p, g, m, v, am, av, lr, step, gs, skip;
  int po, mo, vo, amo, avo; // the outputs (the inputs' buffers if in place)
  Adam8(int64_t n, bool inPlace = true)
      : n(n), blocks((n + 255) / 256) {
    p = h.buf({n});
    g = h.buf({n});
    m = h.buf({n}, DType::U8);
    v = h.buf({n}, DType::U8);
    am = h.buf({blocks});
    av = h.buf({blocks});
    lr = h.buf({});
    step = h.buf({}, DType::I64);
    gs = h.buf({});
    skip = h.buf({});
    po = inPlace ? p : h.buf({n});
    mo = inPlace ? m : h.buf({n}, DType::U8);
    vo = inPlace ? v : h.buf({n}, DType::U8);
    amo = inPlace ? am : h.buf({blocks});
    avo = inPlace ? av : h.buf({blocks});
    h.alloc();
    for (int id : {m, v, mo, vo})
      std::fill(h.storage->u8(id), h.storage->u8(id) + n, uint8_t(0));
    for (int id : {am, av, amo, avo})
      std::fill(h.f(id), h.f(id) + blocks, 0.0f);
  }
  void run(float lrv, int64_t s, double wd, bool withSkip = false,
           float skipv = 0.0f) {
    h.f(lr)[0] = lrv;
    h.l(step)[0] = s;
    h.f(gs)[0] = 1.0f;
    h.f(skip)[0] = skipv;
    std::vector<int> ins = {p, g, m, v, am, av, lr, step, gs};
    if (withSkip)
      ins.push_back(skip);
    h.run(Opcode::Adam8bit, ins, {po, mo, vo, amo, avo},
          {{"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8},
           {"weight_decay", wd}});
  }
};
} // namespace

TEST(Adam8bit, FirstStepHandComputed) {
  // g = 1 everywhere: m = 0.1 and v = 1 - 0.999 (in float, as bitsandbytes
  // computes 1.0f - beta2) in every element, each block's absmax, code 255
  // (1.0); c1 = 0.1, c2 = sqrt(0.001): p -= lr / (1 + eps), to float noise.
  Adam8 o(300);
  o.h.set(o.p, std::vector<float>(300, 0.5f));
  o.h.set(o.g, std::vector<float>(300, 1.0f));
  o.run(0.01f, 1, 0.0);
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_NEAR(o.h.f(o.am)[b], 0.1f, 1e-7);
    EXPECT_EQ(o.h.f(o.av)[b], 1.0f - 0.999f);
  }
  for (int64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(o.h.storage->u8(o.m)[i], 255);
    EXPECT_EQ(o.h.storage->u8(o.v)[i], 255);
    EXPECT_NEAR(o.h.f(o.p)[i], 0.49f, 1e-5);
  }
  // Decoupled decay after the step, as bitsandbytes: p = (p - lr)(1 - lr
  // wd) = 0.441 (decay first, as torch's AdamW, would give 0.44).
  Adam8 d(1);
  d.h.set(d.p, {0.5f});
  d.h.set(d.g, {1.0f});
  d.run(0.01f, 1, 10.0);
  EXPECT_NEAR(d.h.f(d.p)[0], 0.49f * 0.9f, 1e-5);
}

TEST(Adam8bit, ZeroBlocksNonFiniteGradientsAndSkippedSteps) {
  // Block 0 all-zero gradients: absmax stays 0, codes of 0, p unchanged.
  // Block 1: one NaN gradient zeroes its moments and keeps its p.
  Adam8 o(512);
  auto p0 = uniform(512, 3);
  o.h.set(o.p, p0);
  std::vector<float> g(512, 0.0f);
  for (int64_t i = 256; i < 512; ++i)
    g[size_t(i)] = float(i - 300) / 256.0f;
  g[400] = std::nanf("");
  o.h.set(o.g, g);
  o.run(0.01f, 1, 0.0);
  EXPECT_EQ(o.h.f(o.am)[0], 0.0f);
  EXPECT_EQ(o.h.f(o.av)[0], 0.0f);
  for (int64_t i = 0; i < 256; ++i) {
    EXPECT_EQ(o.h.storage->u8(o.m)[i], 127); // signed code of 0
    EXPECT_EQ(o.h.storage->u8(o.v)[i], 0);   // unsigned code of 0
    EXPECT_EQ(o.h.f(o.p)[i], p0[size_t(i)]);
  }
  const auto s = dynamicMap(true), u = dynamicMap(false);
  EXPECT_EQ(s[o.h.storage->u8(o.m)[400]], 0.0f);
  EXPECT_EQ(u[o.h.storage->u8(o.v)[400]], 0.0f);
  EXPECT_EQ(o.h.f(o.p)[400], p0[400]);
  EXPECT_NE(o.h.f(o.p)[401], p0[401]);
  // The largest |m| of block 1 is its absmax and is stored as code 255.
  EXPECT_NEAR(o.h.f(o.am)[1], 0.1f * 211.0f / 256.0f, 1e-7);

  // A skipped step (fp16 overflow) copies everything, out of place too.
  Adam8 k(300, /*inPlace=*/false);
  auto q0 = uniform(300, 4);
  k.h.set(k.p, q0);
  k.h.set(k.g, uniform(300, 5));
  for (int64_t i = 0; i < 300; ++i) {
    k.h.storage->u8(k.m)[i] = uint8_t(i % 256);
    k.h.storage->u8(k.v)[i] = uint8_t((7 * i) % 256);
  }
  k.h.set(k.am, {0.5f, 0.25f});
  k.h.set(k.av, {0.125f, 2.0f});
  k.run(0.01f, 3, 0.1, /*withSkip=*/true, 1.0f);
  for (int64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(k.h.f(k.po)[i], q0[size_t(i)]);
    EXPECT_EQ(k.h.storage->u8(k.mo)[i], uint8_t(i % 256));
    EXPECT_EQ(k.h.storage->u8(k.vo)[i], uint8_t((7 * i) % 256));
  }
  EXPECT_EQ(k.h.get(k.amo), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(k.h.get(k.avo), (std::vector<float>{0.125f, 2.0f}));
}

TEST(Adam8bit, RejectsWrongStateSizesAndTypes) {
  Harness h;
  const int p = h.buf({300}), g = h.buf({300}), m = h.buf({300}, DType::U8),
            mf = h.buf({300}), am = h.buf({2}), bad = h.buf({1}),
            lr = h.buf({}), step = h.buf({}, DType::I64), gs = h.buf({});
  h.alloc();
  const std::map<std::string, AttrValue> at = {
      {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.0}};
  EXPECT_NE(errorOf([&] {
              h.run(Opcode::Adam8bit, {p, g, m, m, bad, am, lr, step, gs},
                    {p, m, m, bad, am}, at);
            }).find("exp_avg_absmax"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              h.run(Opcode::Adam8bit, {p, g, mf, m, am, am, lr, step, gs},
                    {p, mf, m, am, am}, at);
            }).find("exp_avg must be u8"),
            std::string::npos);
}

namespace {
/// transformers' Adafactor step in double for a [B, R, C] parameter
/// (factored) or a vector, with a first moment when `m` is non-empty.
struct AdafactorRef {
  std::vector<double> p, row, col, v, m;
  int64_t B, R, C;
  bool factored;
  void step(const std::vector<float> &g, int64_t t, double lr, double wd,
            double beta1, double decay, double clip, double eps1,
            double eps2, bool relative, bool scale) {
    const int64_t n = int64_t(p.size());
    double p2 = 0;
    for (double x : p)
      p2 += x * x;
    double rel = relative ? std::min(1e-2, 1 / std::sqrt(double(t))) : lr;
    const double lrT =
        (scale ? std::max(eps2, std::sqrt(p2 / double(n))) : 1.0) * rel;
    const double b2 = 1 - std::pow(double(t), decay);
    std::vector<double> u(static_cast<size_t>(n));
    if (factored) {
      for (int64_t br = 0; br < B * R; ++br) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c)
          s += double(g[size_t(br * C + c)]) * g[size_t(br * C + c)] + eps1;
        row[size_t(br)] = b2 * row[size_t(br)] + (1 - b2) * s / double(C);
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t c = 0; c < C; ++c) {
          double s = 0;
          for (int64_t r = 0; r < R; ++r) {
            const double x = g[size_t((b * R + r) * C + c)];
            s += x * x + eps1;
          }
          col[size_t(b * C + c)] =
              b2 * col[size_t(b * C + c)] + (1 - b2) * s / double(R);
        }
      for (int64_t b = 0; b < B; ++b) {
        double mean = 0;
        for (int64_t r = 0; r < R; ++r)
          mean += row[size_t(b * R + r)] / double(R);
        for (int64_t r = 0; r < R; ++r)
          for (int64_t c = 0; c < C; ++c) {
            const int64_t i = (b * R + r) * C + c;
            u[size_t(i)] = g[size_t(i)] /
                           std::sqrt(row[size_t(b * R + r)] / mean) /
                           std::sqrt(col[size_t(b * C + c)]);
          }
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const double x = g[size_t(i)];
        v[size_t(i)] = b2 * v[size_t(i)] + (1 - b2) * (x * x + eps1);
        u[size_t(i)] = x / std::sqrt(v[size_t(i)]);
      }
    }
    double u2 = 0;
    for (double x : u)
      u2 += x * x;
    const double div = std::max(1.0, std::sqrt(u2 / double(n)) / clip);
    for (int64_t i = 0; i < n; ++i) {
      double x = u[size_t(i)] / div * lrT;
      if (!m.empty()) {
        m[size_t(i)] = beta1 * m[size_t(i)] + (1 - beta1) * x;
        x = m[size_t(i)];
      }
      p[size_t(i)] += -wd * lrT * p[size_t(i)];
      p[size_t(i)] -= x;
    }
  }
};

void checkAdafactor(std::vector<int64_t> shape, bool first, bool relative,
                    bool scale) {
  Harness h;
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  const bool factored = shape.size() >= 2;
  const int64_t C = shape.back(), R = factored ? shape[shape.size() - 2] : 1,
                B = factored ? n / (R * C) : 1;
  const int p = h.buf(shape), g = h.buf(shape);
  std::vector<int> states;
  std::vector<int64_t> rowShape(shape.begin(), shape.end() - 1),
      colShape(shape.begin(), shape.end() - (factored ? 2 : 1));
  colShape.push_back(C);
  if (factored) {
    states.push_back(h.buf(rowShape));
    states.push_back(h.buf(colShape));
  } else {
    states.push_back(h.buf(shape));
  }
  if (first)
    states.push_back(h.buf(shape));
  const int lr = h.buf({}), step = h.buf({}, DType::I64), gs = h.buf({});
  h.alloc();
  auto p0 = uniform(size_t(n), 11);
  h.set(p, p0);
  for (int s : states)
    std::fill(h.f(s), h.f(s) + h.numel(s), 0.0f);
  AdafactorRef ref{std::vector<double>(p0.begin(), p0.end()),
                   std::vector<double>(size_t(B * R), 0.0),
                   std::vector<double>(size_t(B * C), 0.0),
                   std::vector<double>(size_t(n), 0.0),
                   first ? std::vector<double>(size_t(n), 0.0)
                         : std::vector<double>(),
                   B, R, C, factored};
  const double wd = 0.05, beta1 = 0.8, decay = -0.8, clip = 0.7;
  for (int64_t t = 1; t <= 3; ++t) {
    auto gv = uniform(size_t(n), 20 + uint32_t(t));
    h.set(g, gv);
    h.f(lr)[0] = 0.003f;
    h.l(step)[0] = t;
    h.f(gs)[0] = 1.0f;
    std::vector<int> ins = {p, g};
    ins.insert(ins.end(), states.begin(), states.end());
    ins.insert(ins.end(), {lr, step, gs});
    std::vector<int> outs = {p};
    outs.insert(outs.end(), states.begin(), states.end());
    h.run(Opcode::Adafactor, ins, outs,
          {{"eps1", 1e-30},
           {"eps2", 1e-3},
           {"clip_threshold", clip},
           {"decay_rate", decay},
           {"first_moment", int64_t(first)},
           {"beta1", beta1},
           {"weight_decay", wd},
           {"scale_parameter", int64_t(scale)},
           {"relative_step", int64_t(relative)},
           {"warmup_init", int64_t(0)}});
    ref.step(gv, t, double(0.003f), wd, beta1, decay, clip, 1e-30, 1e-3,
             relative, scale);
  }
  double worst = 0, scaleP = 0;
  for (int64_t i = 0; i < n; ++i) {
    worst = std::max(worst, std::fabs(h.f(p)[i] - ref.p[size_t(i)]));
    scaleP = std::max(scaleP, std::fabs(ref.p[size_t(i)]));
  }
  EXPECT_LE(worst / scaleP, 2e-6) << "rank " << shape.size();
  if (factored) {
    for (int64_t r = 0; r < B * R; ++r)
      EXPECT_NEAR(h.f(states[0])[r], ref.row[size_t(r)],
                  1e-6 * ref.row[size_t(r)]);
  }
}
} // namespace

TEST(Adafactor, MatchesTransformersFormula) {
  checkAdafactor({6, 5}, false, true, true);   // HF's defaults, a matrix
  checkAdafactor({2, 4, 3}, true, false, true); // rank 3: per-batch factors
  checkAdafactor({7}, true, true, false);       // a vector, first moment
}

TEST(Adafactor, RejectsStateCountsAndShapes) {
  Harness h;
  const int p = h.buf({4, 3}), g = h.buf({4, 3}), row = h.buf({4}),
            col = h.buf({3}), lr = h.buf({}), step = h.buf({}, DType::I64),
            gs = h.buf({});
  h.alloc();
  std::map<std::string, AttrValue> at = {
      {"eps1", 1e-30},          {"eps2", 1e-3},
      {"clip_threshold", 1.0},  {"decay_rate", -0.8},
      {"first_moment", int64_t(1)}, {"beta1", 0.9},
      {"weight_decay", 0.0},    {"scale_parameter", int64_t(1)},
      {"relative_step", int64_t(1)}, {"warmup_init", int64_t(0)}};
  EXPECT_NE(errorOf([&] {
              h.run(Opcode::Adafactor, {p, g, row, col, lr, step, gs},
                    {p, row, col}, at);
            }).find("expects 4 outputs for a rank-2 parameter with "
                    "first_moment"),
            std::string::npos);
  at["first_moment"] = int64_t(0);
  EXPECT_NE(errorOf([&] {
              h.run(Opcode::Adafactor, {p, g, col, row, lr, step, gs},
                    {p, col, row}, at);
            }).find("exp_avg_sq_row"),
            std::string::npos);
}
