// Fill, Iota, Embedding, Add/ReduceTo broadcasting, GELU, heads, Copy and the
// gradient-norm ops against naive reference loops.
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

TEST(Elementwise, FillAndIota) {
  Harness h;
  int f = h.buf({5});
  int i = h.buf({5}, DType::I32);
  int it = h.buf({4}, DType::I32);
  h.run(Opcode::Fill, {}, {f}, {{"value", 1.5}});
  h.run(Opcode::Fill, {}, {i}, {{"value", int64_t(7)}});
  h.run(Opcode::Iota, {}, {it}, {{"start", int64_t(3)}, {"step", int64_t(2)}});
  EXPECT_EQ(h.get(f), std::vector<float>(5, 1.5f));
  EXPECT_EQ(h.geti(i), std::vector<int32_t>(5, 7));
  EXPECT_EQ(h.geti(it), (std::vector<int32_t>{3, 5, 7, 9}));
}

TEST(Elementwise, EmbeddingGathersRows) {
  Harness h;
  int t = h.buf({4, 3});
  int ids = h.buf({2, 2}, DType::I32);
  int o = h.buf({2, 2, 3});
  h.alloc();
  h.set(t, uniform(12, 1));
  h.seti(ids, {3, 0, 3, 1});
  h.run(Opcode::Embedding, {t, ids}, {o});
  auto tab = h.get(t), out = h.get(o);
  int32_t want[4] = {3, 0, 3, 1};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c)
      EXPECT_EQ(out[size_t(r * 3 + c)], tab[size_t(want[r] * 3 + c)]);
}

TEST(Elementwise, EmbeddingRejectsOutOfRangeId) {
  Harness h;
  int t = h.buf({4, 3});
  int ids = h.buf({2}, DType::I32);
  int o = h.buf({2, 3});
  h.alloc();
  h.seti(ids, {1, 4});
  try {
    h.run(Opcode::Embedding, {t, ids}, {o});
    FAIL() << "no throw";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "embedding: token id 4 out of range [0,4)");
  }
  h.seti(ids, {-1, 0});
  EXPECT_THROW(h.run(Opcode::Embedding, {t, ids}, {o}), Error);
}

TEST(Elementwise, EmbeddingGradScatterAdds) {
  Harness h;
  int ids = h.buf({5}, DType::I32);
  int dy = h.buf({5, 70}); // more than one 64-column slice
  int dt = h.buf({6, 70});
  h.alloc();
  std::vector<int32_t> id = {2, 5, 2, 0, 2};
  h.seti(ids, id);
  auto g = uniform(350, 2);
  h.set(dy, g);
  h.set(dt, std::vector<float>(420, 9.0f)); // must be overwritten
  h.run(Opcode::EmbeddingGrad, {ids, dy}, {dt});
  std::vector<double> ref(420, 0.0);
  for (int r = 0; r < 5; ++r)
    for (int c = 0; c < 70; ++c)
      ref[size_t(id[size_t(r)] * 70 + c)] += g[size_t(r * 70 + c)];
  auto out = h.get(dt);
  for (size_t k = 0; k < 420; ++k)
    EXPECT_NEAR(out[k], ref[k], 1e-5) << k;
}

namespace {
// Naive numpy-style broadcast add.
std::vector<float> refAdd(const std::vector<float> &a,
                          const std::vector<int64_t> &as,
                          const std::vector<float> &b,
                          const std::vector<int64_t> &bs) {
  std::vector<float> out(a.size());
  size_t off = as.size() - bs.size();
  for (size_t i = 0; i < a.size(); ++i) {
    size_t rem = i, bi = 0, bstride = 1;
    for (size_t d = as.size(); d-- > 0;) {
      size_t idx = rem % size_t(as[d]);
      rem /= size_t(as[d]);
      if (d >= off) {
        size_t bd = size_t(bs[d - off]);
        bi += (bd == 1 ? 0 : idx) * bstride;
        bstride *= bd;
      }
    }
    out[i] = a[i] + b[bi];
  }
  return out;
}
} // namespace

TEST(Elementwise, AddBroadcastShapes) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  std::vector<Case> cases = {{{2, 3, 4}, {2, 3, 4}}, {{2, 3, 4}, {4}},
                             {{2, 3, 4}, {3, 1}},    {{2, 3, 4}, {2, 1, 4}},
                             {{2, 3, 4}, {1}},       {{2, 1, 4}, {1, 1, 4}},
                             {{5, 1, 3, 2}, {5, 1, 1, 2}}};
  for (const Case &c : cases) {
    Harness h;
    int a = h.buf(c.a), b = h.buf(c.b), o = h.buf(c.a);
    h.alloc();
    auto av = uniform(size_t(h.numel(a)), 3), bv = uniform(size_t(h.numel(b)), 4);
    h.set(a, av);
    h.set(b, bv);
    h.run(Opcode::Add, {a, b}, {o});
    EXPECT_EQ(h.get(o), refAdd(av, c.a, bv, c.b));
    // In place on a.
    h.run(Opcode::Add, {a, b}, {a});
    EXPECT_EQ(h.get(a), refAdd(av, c.a, bv, c.b));
  }
}

TEST(Elementwise, AddRejectsBadBroadcast) {
  Harness h;
  int a = h.buf({2, 3}), b = h.buf({2}), o = h.buf({2, 3});
  EXPECT_THROW(h.run(Opcode::Add, {a, b}, {o}), Error);
}

// ReduceTo is Add's gradient with respect to b: check it against finite
// differences of L = <w, a + broadcast(b)>.
TEST(Elementwise, ReduceToIsAddGradient) {
  struct Case {
    std::vector<int64_t> a, b;
  };
  std::vector<Case> cases = {{{4, 3, 5}, {5}},       {{4, 3, 5}, {3, 1}},
                             {{4, 3, 5}, {4, 1, 5}}, {{4, 3, 5}, {1}},
                             {{4, 3, 5}, {4, 3, 5}}, {{2, 3, 2, 70}, {3, 1, 70}}};
  for (const Case &c : cases) {
    Harness h;
    int a = h.buf(c.a), b = h.buf(c.b), o = h.buf(c.a), w = h.buf(c.a),
        db = h.buf(c.b);
    h.alloc();
    h.set(a, uniform(size_t(h.numel(a)), 5));
    h.set(b, uniform(size_t(h.numel(b)), 6));
    h.set(w, uniform(size_t(h.numel(w)), 7));
    h.run(Opcode::ReduceTo, {w}, {db});
    auto loss = [&] {
      h.run(Opcode::Add, {a, b}, {o});
      return dot(h.f(w), h.f(o), h.numel(o));
    };
    auto num = numericGrad(h.f(b), h.numel(b), loss);
    auto got = h.get(db);
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_NEAR(got[k], num[k], 2e-3 * (1 + std::fabs(num[k]))) << k;
  }
}

namespace {
double refGeluTanh(double x) {
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double refGeluErf(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
} // namespace

TEST(Elementwise, GeluMatchesReference) {
  Harness h;
  const int n = 2001;
  int x = h.buf({n}), y = h.buf({n}), z = h.buf({n});
  h.alloc();
  std::vector<float> xs(n);
  for (int k = 0; k < n; ++k)
    xs[size_t(k)] = -10.0f + 20.0f * float(k) / float(n - 1);
  h.set(x, xs);
  h.run(Opcode::Gelu, {x}, {y}, {{"approximation", std::string("tanh")}});
  h.run(Opcode::Gelu, {x}, {z}, {{"approximation", std::string("erf")}});
  for (int k = 0; k < n; ++k) {
    double v = xs[size_t(k)];
    EXPECT_NEAR(h.f(y)[k], refGeluTanh(v), 1e-6 * (1 + std::fabs(v))) << v;
    EXPECT_NEAR(h.f(z)[k], refGeluErf(v), 1e-6 * (1 + std::fabs(v))) << v;
  }
}

TEST(Elementwise, GeluGradFiniteDifference) {
  for (std::string approx : {"tanh", "erf"}) {
    Harness h;
    const int n = 64;
    int x = h.buf({n}), y = h.buf({n}), w = h.buf({n}), dx = h.buf({n});
    h.alloc();
    h.set(x, uniform(n, 8, -4, 4));
    h.set(w, uniform(n, 9));
    h.run(Opcode::GeluGrad, {w, x}, {dx}, {{"approximation", approx}});
    auto loss = [&] {
      h.run(Opcode::Gelu, {x}, {y}, {{"approximation", approx}});
      return dot(h.f(w), h.f(y), n);
    };
    auto num = numericGrad(h.f(x), n, loss, 1e-2f);
    for (int k = 0; k < n; ++k)
      EXPECT_NEAR(h.f(dx)[k], num[size_t(k)], 2e-3) << approx << " " << k;
  }
}

// Gemma 2's soft-capping against tanh in double, and its gradient (from
// the result) against finite differences of the capped values.
TEST(Elementwise, SoftcapAndItsGradient) {
  Harness h;
  const int n = 64;
  const double cap = 1.5;
  int x = h.buf({n}), y = h.buf({n}), w = h.buf({n}), dx = h.buf({n});
  h.alloc();
  h.set(x, uniform(n, 8, -6, 6));
  h.set(w, uniform(n, 9));
  h.run(Opcode::Softcap, {x}, {y}, {{"cap", cap}});
  for (int k = 0; k < n; ++k) {
    const double v = h.f(x)[k];
    EXPECT_NEAR(h.f(y)[k], cap * std::tanh(v / cap), 1e-6) << v;
    EXPECT_LT(std::fabs(h.f(y)[k]), cap);
  }
  h.run(Opcode::SoftcapGrad, {w, y}, {dx}, {{"cap", cap}});
  auto loss = [&] {
    h.run(Opcode::Softcap, {x}, {y}, {{"cap", cap}});
    return dot(h.f(w), h.f(y), n);
  };
  auto num = numericGrad(h.f(x), n, loss, 1e-2f);
  for (int k = 0; k < n; ++k)
    EXPECT_NEAR(h.f(dx)[k], num[size_t(k)], 2e-3) << k;
}

// Qwen2-MoE's shared-expert gate: each row of x times the sigmoid of its
// gate, against double; both gradients against finite differences.
TEST(Elementwise, SigmoidGateAndItsGradients) {
  Harness h;
  const int64_t rows = 6, C = 5;
  int g = h.buf({2, 3, 1}), x = h.buf({2, 3, C}), y = h.buf({2, 3, C}),
      w = h.buf({2, 3, C}), dg = h.buf({2, 3, 1}), dx = h.buf({2, 3, C});
  h.alloc();
  h.set(g, uniform(size_t(rows), 21, -4, 4));
  h.set(x, uniform(size_t(rows * C), 22, -2, 2));
  h.set(w, uniform(size_t(rows * C), 23));
  h.run(Opcode::SigmoidGate, {g, x}, {y});
  for (int64_t i = 0; i < rows * C; ++i)
    EXPECT_NEAR(h.f(y)[i],
                double(h.f(x)[i]) / (1.0 + std::exp(-double(h.f(g)[i / C]))),
                1e-6)
        << i;
  h.run(Opcode::SigmoidGateGrad, {w, g, x}, {dg, dx});
  auto loss = [&] {
    h.run(Opcode::SigmoidGate, {g, x}, {y});
    return dot(h.f(w), h.f(y), int(rows * C));
  };
  const std::vector<float> dgate = h.get(dg), dinput = h.get(dx);
  auto numG = numericGrad(h.f(g), int(rows), loss, 1e-2f);
  for (int64_t r = 0; r < rows; ++r)
    EXPECT_NEAR(dgate[size_t(r)], numG[size_t(r)], 2e-3) << r;
  auto numX = numericGrad(h.f(x), int(rows * C), loss, 1e-2f);
  for (int64_t i = 0; i < rows * C; ++i)
    EXPECT_NEAR(dinput[size_t(i)], numX[size_t(i)], 2e-3) << i;
}

TEST(Elementwise, SplitAndMergeHeads) {
  const int64_t B = 2, T = 3, P = 3, H = 2, D = 4;
  Harness h;
  int x = h.buf({B, T, P * H * D});
  std::vector<int> parts;
  for (int p = 0; p < P; ++p)
    parts.push_back(h.buf({B, H, T, D}));
  int back = h.buf({B, T, P * H * D});
  h.alloc();
  auto xv = uniform(size_t(B * T * P * H * D), 10);
  h.set(x, xv);
  h.run(Opcode::SplitHeads, {x}, parts, {{"num_heads", H}});
  for (int64_t p = 0; p < P; ++p)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t hh = 0; hh < H; ++hh)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < D; ++d)
            ASSERT_EQ(h.f(parts[size_t(p)])[((b * H + hh) * T + t) * D + d],
                      xv[size_t((b * T + t) * P * H * D + p * H * D + hh * D + d)]);
  h.run(Opcode::MergeHeads, parts, {back}); // H from the parts
  EXPECT_EQ(h.get(back), xv);
  EXPECT_THROW(h.run(Opcode::SplitHeads, {x}, parts, {{"num_heads", int64_t(5)}}),
               Error);
}

// Gradient buckets: pieces of any shape, flattened one after another.
TEST(Elementwise, PackAndUnpack) {
  Harness h;
  int a = h.buf({2, 3}), b = h.buf({4}), c = h.buf({1, 1, 2}),
      flat = h.buf({12}), a2 = h.buf({2, 3}), b2 = h.buf({4}),
      c2 = h.buf({1, 1, 2}), small = h.buf({11});
  h.alloc();
  h.set(a, {0, 1, 2, 3, 4, 5});
  h.set(b, {6, 7, 8, 9});
  h.set(c, {10, 11});
  const std::map<std::string, AttrValue> one = {{"chunks", int64_t(1)}},
                                          two = {{"chunks", int64_t(2)}};
  h.run(Opcode::Pack, {a, b, c}, {flat}, one);
  EXPECT_EQ(h.get(flat),
            std::vector<float>({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  h.run(Opcode::Unpack, {flat}, {a2, b2, c2}, one);
  EXPECT_EQ(h.get(a2), h.get(a));
  EXPECT_EQ(h.get(b2), h.get(b));
  EXPECT_EQ(h.get(c2), h.get(c));
  // Two chunks: every piece's first half, then every piece's second half
  // (what rank 0 and rank 1 of a reduce-scatter take).
  h.run(Opcode::Pack, {a, b, c}, {flat}, two);
  EXPECT_EQ(h.get(flat),
            std::vector<float>({0, 1, 2, 6, 7, 10, 3, 4, 5, 8, 9, 11}));
  h.run(Opcode::Unpack, {flat}, {a2, b2, c2}, two);
  EXPECT_EQ(h.get(a2), h.get(a));
  EXPECT_EQ(h.get(b2), h.get(b));
  EXPECT_EQ(h.get(c2), h.get(c));
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Pack, {a, b, c}, {small}, one); }),
            "Pack: packed result 'b7' [11] has 11 elements, expected 12");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::Pack, {a, b, c}, {flat}, {{"chunks", int64_t(4)}});
            }),
            "Pack: piece 'b0' [2,3] does not split into 4 chunks");
}

TEST(Elementwise, CopyGlobalNormClip) {
  Harness h;
  int a = h.buf({3}), b = h.buf({2, 2}), c = h.buf({3}), n = h.buf({1}),
      k = h.buf({1}), ids = h.buf({3}, DType::I32), ids2 = h.buf({3}, DType::I32);
  h.alloc();
  h.set(a, {1, 2, 3});
  h.set(b, {1, 1, 1, 1});
  h.run(Opcode::Copy, {a}, {c});
  EXPECT_EQ(h.get(c), (std::vector<float>{1, 2, 3}));
  h.seti(ids, {4, 5, 6});
  h.run(Opcode::Copy, {ids}, {ids2});
  EXPECT_EQ(h.geti(ids2), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_THROW(h.run(Opcode::Copy, {a}, {ids}), Error);
  h.run(Opcode::GlobalNorm, {a, b}, {n});
  EXPECT_NEAR(h.f(n)[0], std::sqrt(18.0), 1e-6);
  h.run(Opcode::ClipCoefficient, {n}, {k}, {{"max_norm", 1.0}});
  EXPECT_NEAR(h.f(k)[0], 1.0 / (std::sqrt(18.0) + 1e-6), 1e-7);
  h.run(Opcode::ClipCoefficient, {n}, {k}, {{"max_norm", 10.0}});
  EXPECT_EQ(h.f(k)[0], 1.0f);
  h.run(Opcode::ClipCoefficient, {n}, {k}, {{"max_norm", 0.0}});
  EXPECT_EQ(h.f(k)[0], 1.0f);
}

TEST(Elementwise, GlobalNormLargeIsAccurate) {
  Harness h;
  const int64_t n = 3 << 20; // several chunks
  int a = h.buf({n}), o = h.buf({1});
  h.alloc();
  double ref = 0;
  for (int64_t k = 0; k < n; ++k) {
    h.f(a)[k] = float(k % 7) * 0.1f;
    ref += double(h.f(a)[k]) * double(h.f(a)[k]);
  }
  h.run(Opcode::GlobalNorm, {a}, {o});
  EXPECT_NEAR(h.f(o)[0], std::sqrt(ref), 1e-6 * std::sqrt(ref));
}

// The CPU backend flushes subnormal floats to zero (FTZ and DAZ: they cost
// x86 cores microcode assists that slowed stalled runs several times).
TEST(Elementwise, SubnormalsFlushToZero) {
  Harness h;
  int a = h.buf({4}), b = h.buf({4}), out = h.buf({4});
  h.alloc();
  // 1e-39 is subnormal in f32 (below 1.18e-38): read as zero (DAZ), and a
  // sum that lands below it is written as zero (FTZ).
  h.set(a, {1e-39f, 1.0f, 3e-38f, 0.0f});
  h.set(b, {1.0f, 1e-39f, -2.9e-38f, 0.0f});
  h.run(Opcode::Add, {a, b}, {out});
  const std::vector<float> got = h.get(out);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], 1.0f);
  EXPECT_EQ(got[2], 0.0f) << "3e-38 - 2.9e-38 = 1e-39 is subnormal";
  EXPECT_EQ(got[3], 0.0f);
  // An input that is subnormal alone is read as zero.
  h.set(a, {1e-39f, 2e-39f, 0.0f, 0.0f});
  h.set(b, {0.0f, 0.0f, 0.0f, 0.0f});
  h.run(Opcode::Add, {a, b}, {out});
  EXPECT_EQ(h.get(out), std::vector<float>(4, 0.0f));
}
