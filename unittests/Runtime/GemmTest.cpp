// Linear, LinearGradInput/Weight and BatchMatmul against naive loops and
// finite differences. Sizes are chosen so the threaded tiling path runs.
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {
std::map<std::string, AttrValue> bmmAttrs(bool ta, bool tb, double alpha) {
  return {{"transpose_a", int64_t(ta)},
          {"transpose_b", int64_t(tb)},
          {"alpha", alpha}};
}

// out[M,N] = x[M,K] @ W, W from w[K,N] or w[N,K] (transW), + bias.
std::vector<double> refLinear(const std::vector<float> &x,
                              const std::vector<float> &w, const float *bias,
                              int64_t M, int64_t K, int64_t N, bool tw) {
  std::vector<double> o(size_t(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k)
        s += double(x[size_t(m * K + k)]) *
             double(tw ? w[size_t(n * K + k)] : w[size_t(k * N + n)]);
      o[size_t(m * N + n)] = s;
    }
  return o;
}

void expectClose(const float *got, const std::vector<double> &want,
                 double tol) {
  for (size_t k = 0; k < want.size(); ++k)
    ASSERT_NEAR(got[k], want[k], tol * (1 + std::fabs(want[k]))) << k;
}
} // namespace

class LinearTest : public ::testing::TestWithParam<bool> {};

TEST_P(LinearTest, ForwardMatchesNaive) {
  const bool tw = GetParam();
  const int64_t B = 3, T = 100, K = 70, N = 130; // M = 300: tiled path
  Harness h;
  int x = h.buf({B, T, K});
  int w = h.buf(tw ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  int bias = h.buf({N});
  int o = h.buf({B, T, N}), o2 = h.buf({B, T, N});
  h.alloc();
  h.set(x, uniform(size_t(B * T * K), 11));
  h.set(w, uniform(size_t(K * N), 12));
  h.set(bias, uniform(size_t(N), 13));
  h.run(Opcode::Linear, {x, w, bias}, {o}, {{"transpose_w", int64_t(tw)}});
  expectClose(h.f(o), refLinear(h.get(x), h.get(w), h.f(bias), B * T, K, N, tw),
              1e-5);
  h.run(Opcode::Linear, {x, w}, {o2}, {{"transpose_w", int64_t(tw)}});
  expectClose(h.f(o2), refLinear(h.get(x), h.get(w), nullptr, B * T, K, N, tw),
              1e-5);
}

TEST_P(LinearTest, GradientsMatchFiniteDifferences) {
  const bool tw = GetParam();
  const int64_t M = 6, K = 5, N = 7;
  Harness h;
  int x = h.buf({2, 3, K});
  int w = h.buf(tw ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  int bias = h.buf({N});
  int y = h.buf({2, 3, N}), dy = h.buf({2, 3, N});
  int dx = h.buf({2, 3, K}), dw = h.buf(h.prog.buffers[size_t(w)].shape);
  h.alloc();
  h.set(x, uniform(size_t(M * K), 14));
  h.set(w, uniform(size_t(K * N), 15));
  h.set(bias, uniform(size_t(N), 16));
  h.set(dy, uniform(size_t(M * N), 17));
  std::map<std::string, AttrValue> at = {{"transpose_w", int64_t(tw)}};
  h.run(Opcode::LinearGradInput, {dy, w}, {dx}, at);
  h.run(Opcode::LinearGradWeight, {x, dy}, {dw}, at);
  auto loss = [&] {
    h.run(Opcode::Linear, {x, w, bias}, {y}, at);
    return dot(h.f(dy), h.f(y), M * N);
  };
  auto nx = numericGrad(h.f(x), M * K, loss);
  auto nw = numericGrad(h.f(w), K * N, loss);
  for (int64_t k = 0; k < M * K; ++k)
    EXPECT_NEAR(h.f(dx)[k], nx[size_t(k)], 2e-3) << k;
  for (int64_t k = 0; k < K * N; ++k)
    EXPECT_NEAR(h.f(dw)[k], nw[size_t(k)], 2e-3) << k;
}

TEST_P(LinearTest, LargeGradsMatchNaive) {
  const bool tw = GetParam();
  const int64_t M = 257, K = 96, N = 160;
  Harness h;
  int x = h.buf({M, K});
  int w = h.buf(tw ? std::vector<int64_t>{N, K} : std::vector<int64_t>{K, N});
  int dy = h.buf({M, N}), dx = h.buf({M, K});
  int dw = h.buf(h.prog.buffers[size_t(w)].shape);
  h.alloc();
  auto xv = uniform(size_t(M * K), 18), wv = uniform(size_t(K * N), 19),
       dyv = uniform(size_t(M * N), 20);
  h.set(x, xv);
  h.set(w, wv);
  h.set(dy, dyv);
  std::map<std::string, AttrValue> at = {{"transpose_w", int64_t(tw)}};
  h.run(Opcode::LinearGradInput, {dy, w}, {dx}, at);
  h.run(Opcode::LinearGradWeight, {x, dy}, {dw}, at);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      double s = 0;
      for (int64_t n = 0; n < N; ++n)
        s += double(dyv[size_t(m * N + n)]) *
             (tw ? wv[size_t(n * K + k)] : wv[size_t(k * N + n)]);
      ASSERT_NEAR(h.f(dx)[m * K + k], s, 1e-4 * (1 + std::fabs(s)));
    }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0;
      for (int64_t m = 0; m < M; ++m)
        s += double(xv[size_t(m * K + k)]) * dyv[size_t(m * N + n)];
      float got = tw ? h.f(dw)[n * K + k] : h.f(dw)[k * N + n];
      ASSERT_NEAR(got, s, 1e-4 * (1 + std::fabs(s)));
    }
}

INSTANTIATE_TEST_SUITE_P(TransposeW, LinearTest, ::testing::Bool());

TEST(Linear, RejectsMismatchedShapes) {
  Harness h;
  int x = h.buf({4, 5}), w = h.buf({6, 7}), o = h.buf({4, 7});
  try {
    h.run(Opcode::Linear, {x, w}, {o}, {{"transpose_w", int64_t(0)}});
    FAIL();
  } catch (const Error &e) {
    EXPECT_EQ(std::string(e.what()).rfind("Linear: x 'b0' [4,5] does not "
                                          "match weight [6,7]",
                                          0),
              0u)
        << e.what();
  }
}

class BatchMatmulTest
    : public ::testing::TestWithParam<std::tuple<bool, bool, int>> {};

TEST_P(BatchMatmulTest, MatchesNaive) {
  auto [ta, tb, batch1] = GetParam();
  const int64_t B0 = batch1, B1 = 2, M = 40, N = 72, K = 33;
  Harness h;
  int a = h.buf(ta ? std::vector<int64_t>{B0, B1, K, M}
                   : std::vector<int64_t>{B0, B1, M, K});
  int b = h.buf(tb ? std::vector<int64_t>{B0, B1, N, K}
                   : std::vector<int64_t>{B0, B1, K, N});
  int o = h.buf({B0, B1, M, N});
  h.alloc();
  auto av = uniform(size_t(B0 * B1 * M * K), 21);
  auto bv = uniform(size_t(B0 * B1 * K * N), 22);
  h.set(a, av);
  h.set(b, bv);
  h.run(Opcode::BatchMatmul, {a, b}, {o},
        {{"transpose_a", int64_t(ta)}, {"transpose_b", int64_t(tb)},
         {"alpha", 0.5}});
  for (int64_t z = 0; z < B0 * B1; ++z)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          double x = ta ? av[size_t(z * M * K + k * M + m)]
                        : av[size_t(z * M * K + m * K + k)];
          double y = tb ? bv[size_t(z * K * N + n * K + k)]
                        : bv[size_t(z * K * N + k * N + n)];
          s += x * y;
        }
        ASSERT_NEAR(h.f(o)[(z * M + m) * N + n], 0.5 * s, 1e-5 * (1 + std::fabs(s)));
      }
}

INSTANTIATE_TEST_SUITE_P(Transposes, BatchMatmulTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Values(1, 9)));

TEST(BatchMatmul, GradientsMatchFiniteDifferences) {
  // out = a @ b^T (attention scores); da = dout @ b, db = dout^T @ a are
  // themselves BatchMatmuls with other transpose flags.
  const int64_t Z = 2, M = 3, N = 4, K = 5;
  Harness h;
  int a = h.buf({Z, 1, M, K}), b = h.buf({Z, 1, N, K}), o = h.buf({Z, 1, M, N});
  int d = h.buf({Z, 1, M, N}), da = h.buf({Z, 1, M, K}), db = h.buf({Z, 1, N, K});
  h.alloc();
  h.set(a, uniform(size_t(Z * M * K), 23));
  h.set(b, uniform(size_t(Z * N * K), 24));
  h.set(d, uniform(size_t(Z * M * N), 25));
  const double alpha = 0.25;
  h.run(Opcode::BatchMatmul, {d, b}, {da}, bmmAttrs(false, false, alpha));
  h.run(Opcode::BatchMatmul, {d, a}, {db}, bmmAttrs(true, false, alpha));
  auto loss = [&] {
    h.run(Opcode::BatchMatmul, {a, b}, {o}, bmmAttrs(false, true, alpha));
    return dot(h.f(d), h.f(o), Z * M * N);
  };
  auto na = numericGrad(h.f(a), Z * M * K, loss);
  auto nb = numericGrad(h.f(b), Z * N * K, loss);
  for (int64_t k = 0; k < Z * M * K; ++k)
    EXPECT_NEAR(h.f(da)[k], na[size_t(k)], 1e-3);
  for (int64_t k = 0; k < Z * N * K; ++k)
    EXPECT_NEAR(h.f(db)[k], nb[size_t(k)], 1e-3);
}

TEST(BatchMatmul, RejectsMismatch) {
  Harness h;
  int a = h.buf({2, 3, 4}), b = h.buf({3, 4, 5}), o = h.buf({2, 3, 5});
  try {
    h.run(Opcode::BatchMatmul, {a, b}, {o}, bmmAttrs(false, false, 1.0));
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("batch dims differ"),
              std::string::npos) << e.what();
  }
  Harness g;
  int a2 = g.buf({2, 3, 4}), b2 = g.buf({2, 5, 5}), o2 = g.buf({2, 3, 5});
  try {
    g.run(Opcode::BatchMatmul, {a2, b2}, {o2}, bmmAttrs(false, false, 1.0));
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("contraction dims differ"),
              std::string::npos) << e.what();
  }
}
