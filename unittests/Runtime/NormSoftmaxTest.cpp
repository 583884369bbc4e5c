// LayerNorm, RMSNorm and Softmax forward against naive loops, backward
// against finite differences.
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

TEST(LayerNorm, ForwardMatchesNaive) {
  const int64_t R = 37, C = 100;
  const double eps = 1e-5;
  Harness h;
  int x = h.buf({R, C}), g = h.buf({C}), b = h.buf({C}), y = h.buf({R, C});
  h.alloc();
  auto xv = uniform(size_t(R * C), 30, -3, 5);
  auto gv = uniform(size_t(C), 31), bv = uniform(size_t(C), 32);
  h.set(x, xv);
  h.set(g, gv);
  h.set(b, bv);
  h.run(Opcode::LayerNorm, {x, g, b}, {y}, {{"epsilon", eps}});
  for (int64_t r = 0; r < R; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c)
      mean += xv[size_t(r * C + c)];
    mean /= C;
    for (int64_t c = 0; c < C; ++c)
      var += std::pow(xv[size_t(r * C + c)] - mean, 2);
    var /= C; // biased, as PyTorch
    for (int64_t c = 0; c < C; ++c) {
      double want = (xv[size_t(r * C + c)] - mean) / std::sqrt(var + eps) *
                        gv[size_t(c)] +
                    bv[size_t(c)];
      ASSERT_NEAR(h.f(y)[r * C + c], want, 2e-5);
    }
  }
}

TEST(LayerNorm, GradMatchesFiniteDifferences) {
  const int64_t R = 5, C = 8;
  const double eps = 1e-5;
  Harness h;
  int x = h.buf({R, C}), g = h.buf({C}), b = h.buf({C}), y = h.buf({R, C});
  int dy = h.buf({R, C}), dx = h.buf({R, C}), dg = h.buf({C}), db = h.buf({C});
  h.alloc();
  h.set(x, uniform(size_t(R * C), 33, -2, 2));
  h.set(g, uniform(size_t(C), 34, 0.5, 1.5));
  h.set(b, uniform(size_t(C), 35));
  h.set(dy, uniform(size_t(R * C), 36));
  h.run(Opcode::LayerNormGrad, {dy, x, g}, {dx, dg, db}, {{"epsilon", eps}});
  auto loss = [&] {
    h.run(Opcode::LayerNorm, {x, g, b}, {y}, {{"epsilon", eps}});
    return dot(h.f(dy), h.f(y), R * C);
  };
  auto nx = numericGrad(h.f(x), R * C, loss, 1e-2f);
  auto ng = numericGrad(h.f(g), C, loss, 1e-2f);
  auto nb = numericGrad(h.f(b), C, loss, 1e-2f);
  for (int64_t k = 0; k < R * C; ++k)
    EXPECT_NEAR(h.f(dx)[k], nx[size_t(k)], 5e-3) << k;
  for (int64_t k = 0; k < C; ++k) {
    EXPECT_NEAR(h.f(dg)[k], ng[size_t(k)], 2e-3) << k;
    EXPECT_NEAR(h.f(db)[k], nb[size_t(k)], 2e-3) << k;
  }
}

TEST(LayerNorm, GradParamSumsOverManyRows) {
  // More rows than one partial-sum block.
  const int64_t R = 100, C = 3;
  Harness h;
  int x = h.buf({R, C}), g = h.buf({C}), dy = h.buf({R, C}), dx = h.buf({R, C}),
      dg = h.buf({C}), db = h.buf({C});
  h.alloc();
  auto xv = uniform(size_t(R * C), 37), dyv = uniform(size_t(R * C), 38);
  h.set(x, xv);
  h.set(dy, dyv);
  h.set(g, {1, 1, 1});
  h.run(Opcode::LayerNormGrad, {dy, x, g}, {dx, dg, db}, {{"epsilon", 1e-5}});
  for (int64_t c = 0; c < C; ++c) {
    double sb = 0, sg = 0;
    for (int64_t r = 0; r < R; ++r) {
      const float *xr = xv.data() + r * C;
      double m = (xr[0] + xr[1] + xr[2]) / 3.0, v = 0;
      for (int k = 0; k < 3; ++k)
        v += (xr[k] - m) * (xr[k] - m);
      v /= 3;
      sb += dyv[size_t(r * C + c)];
      sg += dyv[size_t(r * C + c)] * (xr[c] - m) / std::sqrt(v + 1e-5);
    }
    EXPECT_NEAR(h.f(db)[c], sb, 1e-4);
    EXPECT_NEAR(h.f(dg)[c], sg, 1e-4);
  }
}

namespace {
std::vector<double> refSoftmax(const std::vector<float> &x, int64_t rows,
                               int64_t Tq, int64_t Tk, double scale,
                               bool causal) {
  std::vector<double> y(x.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    int64_t i = r % Tq, valid = causal ? std::min(Tk, i + (Tk - Tq) + 1) : Tk;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < valid; ++j)
      mx = std::max(mx, scale * x[size_t(r * Tk + j)]);
    for (int64_t j = 0; j < valid; ++j)
      s += std::exp(scale * x[size_t(r * Tk + j)] - mx);
    for (int64_t j = 0; j < valid; ++j)
      y[size_t(r * Tk + j)] = std::exp(scale * x[size_t(r * Tk + j)] - mx) / s;
  }
  return y;
}
} // namespace

class SoftmaxTest : public ::testing::TestWithParam<std::tuple<bool, int>> {};

TEST_P(SoftmaxTest, ForwardMatchesNaive) {
  auto [causal, extraKeys] = GetParam();
  const int64_t B = 2, H = 3, Tq = 9, Tk = 9 + extraKeys;
  const double scale = 0.37;
  Harness h;
  int x = h.buf({B, H, Tq, Tk}), y = h.buf({B, H, Tq, Tk});
  h.alloc();
  auto xv = uniform(size_t(B * H * Tq * Tk), 40, -20, 20);
  h.set(x, xv);
  h.run(Opcode::Softmax, {x}, {y},
        {{"scale", scale}, {"causal", int64_t(causal)},
         {"layout", BlockLayout{}}});
  auto want = refSoftmax(xv, B * H * Tq, Tq, Tk, scale, causal);
  for (size_t k = 0; k < want.size(); ++k) {
    if (want[k] == 0.0)
      ASSERT_EQ(h.f(y)[k], 0.0f) << "masked probability must be exactly 0";
    else
      ASSERT_NEAR(h.f(y)[k], want[k], 1e-6 + 1e-5 * want[k]) << k;
  }
}

TEST_P(SoftmaxTest, GradMatchesFiniteDifferences) {
  auto [causal, extraKeys] = GetParam();
  const int64_t Tq = 4, Tk = 4 + extraKeys;
  const double scale = 0.7;
  Harness h;
  int x = h.buf({2, Tq, Tk}), y = h.buf({2, Tq, Tk}), dy = h.buf({2, Tq, Tk}),
      dx = h.buf({2, Tq, Tk});
  h.alloc();
  h.set(x, uniform(size_t(2 * Tq * Tk), 41, -2, 2));
  h.set(dy, uniform(size_t(2 * Tq * Tk), 42));
  std::map<std::string, AttrValue> at = {{"scale", scale},
                                         {"causal", int64_t(causal)},
                                         {"layout", BlockLayout{}}};
  h.run(Opcode::Softmax, {x}, {y}, at);
  h.run(Opcode::SoftmaxGrad, {dy, y}, {dx}, {{"scale", scale}});
  auto loss = [&] {
    h.run(Opcode::Softmax, {x}, {y}, at);
    return dot(h.f(dy), h.f(y), 2 * Tq * Tk);
  };
  auto num = numericGrad(h.f(x), 2 * Tq * Tk, loss, 1e-2f);
  for (int64_t k = 0; k < 2 * Tq * Tk; ++k)
    EXPECT_NEAR(h.f(dx)[k], num[size_t(k)], 1e-3) << k;
}

INSTANTIATE_TEST_SUITE_P(Masks, SoftmaxTest,
                         ::testing::Combine(::testing::Bool(),
                                            ::testing::Values(0, 3)));

TEST(Softmax, InPlaceAndLongRows) {
  const int64_t Tk = 5000;
  Harness h;
  int x = h.buf({3, Tk});
  h.alloc();
  auto xv = uniform(size_t(3 * Tk), 43, -50, 50);
  h.set(x, xv);
  h.run(Opcode::Softmax, {x}, {x},
        {{"scale", 1.0}, {"causal", int64_t(0)}, {"layout", BlockLayout{}}});
  auto want = refSoftmax(xv, 3, 1, Tk, 1.0, false);
  double sum = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_NEAR(h.f(x)[k], want[k], 1e-7 + 1e-5 * want[k]);
    sum += h.f(x)[k];
  }
  EXPECT_NEAR(sum, 3.0, 1e-5);
}

TEST(RmsNorm, ForwardMatchesNaive) {
  const int64_t R = 37, C = 100;
  const double eps = 1e-6;
  Harness h;
  int x = h.buf({R, C}), w = h.buf({C}), y = h.buf({R, C});
  h.alloc();
  auto xv = uniform(size_t(R * C), 40, -3, 5), wv = uniform(size_t(C), 41);
  h.set(x, xv);
  h.set(w, wv);
  h.run(Opcode::RmsNorm, {x, w}, {y}, {{"epsilon", eps}});
  for (int64_t r = 0; r < R; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c)
      ms += std::pow(double(xv[size_t(r * C + c)]), 2);
    ms /= C;
    for (int64_t c = 0; c < C; ++c) {
      double want =
          xv[size_t(r * C + c)] / std::sqrt(ms + eps) * wv[size_t(c)];
      ASSERT_NEAR(h.f(y)[r * C + c], want, 2e-5 * (1 + std::fabs(want)));
    }
  }
}

// 70 rows: more than two 32-row partial-sum blocks for dweight.
TEST(RmsNorm, GradMatchesFiniteDifferences) {
  const int64_t R = 70, C = 8;
  const double eps = 1e-5;
  Harness h;
  int x = h.buf({R, C}), w = h.buf({C}), y = h.buf({R, C});
  int dy = h.buf({R, C}), dx = h.buf({R, C}), dw = h.buf({C});
  h.alloc();
  h.set(x, uniform(size_t(R * C), 42, -2, 2));
  h.set(w, uniform(size_t(C), 43, 0.5, 1.5));
  h.set(dy, uniform(size_t(R * C), 44));
  h.run(Opcode::RmsNormGrad, {dy, x, w}, {dx, dw}, {{"epsilon", eps}});
  auto loss = [&] {
    h.run(Opcode::RmsNorm, {x, w}, {y}, {{"epsilon", eps}});
    return dot(h.f(dy), h.f(y), R * C);
  };
  auto nx = numericGrad(h.f(x), R * C, loss, 1e-2f);
  auto nw = numericGrad(h.f(w), C, loss, 1e-2f);
  for (int64_t k = 0; k < R * C; ++k)
    EXPECT_NEAR(h.f(dx)[k], nx[size_t(k)], 5e-3) << k;
  for (int64_t k = 0; k < C; ++k)
    EXPECT_NEAR(h.f(dw)[k], nw[size_t(k)], 1e-2) << k;
}

TEST(RmsNorm, RejectsWrongWeight) {
  Harness h;
  int x = h.buf({4, 8}), w = h.buf({7}), y = h.buf({4, 8});
  try {
    h.run(Opcode::RmsNorm, {x, w}, {y}, {{"epsilon", 1e-6}});
    FAIL();
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(),
                 "RmsNorm: per-feature parameter 'b1' [7] has 7 elements, expected 8");
  }
}

// add_rms_norm: the sum is x + res, the output bitwise rms_norm of it (the
// unfused pair), rstd the naive 1/rms; invertible_rms_norm yields the same
// output and rstd.
TEST(RmsNorm, AddAndInvertibleForms) {
  const int64_t R = 37, C = 100;
  const double eps = 1e-6;
  Harness h;
  int x = h.buf({R, C}), res = h.buf({R, C}), w = h.buf({C});
  int sum = h.buf({R, C}), y = h.buf({R, C}), rstd = h.buf({R});
  int yPlain = h.buf({R, C}), yInv = h.buf({R, C}), rstdInv = h.buf({R});
  h.alloc();
  auto xv = uniform(size_t(R * C), 50, -3, 5),
       rv = uniform(size_t(R * C), 51, -2, 2);
  h.set(x, xv);
  h.set(res, rv);
  h.set(w, uniform(size_t(C), 52));
  h.run(Opcode::AddRmsNorm, {x, res, w}, {sum, y, rstd}, {{"epsilon", eps}});
  h.run(Opcode::RmsNorm, {sum, w}, {yPlain}, {{"epsilon", eps}});
  h.run(Opcode::InvertibleRmsNorm, {sum, w}, {yInv, rstdInv},
        {{"epsilon", eps}});
  for (int64_t r = 0; r < R; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) {
      const size_t k = size_t(r * C + c);
      ASSERT_EQ(h.f(sum)[k], xv[k] + rv[k]) << k;
      ms += std::pow(double(h.f(sum)[k]), 2);
    }
    const double want = 1.0 / std::sqrt(ms / C + eps);
    EXPECT_NEAR(h.f(rstd)[r], want, 1e-5 * want) << r;
    EXPECT_EQ(h.f(rstdInv)[r], h.f(rstd)[r]) << r;
  }
  for (int64_t k = 0; k < R * C; ++k) {
    ASSERT_EQ(h.f(y)[k], h.f(yPlain)[k]) << k;
    ASSERT_EQ(h.f(yInv)[k], h.f(yPlain)[k]) << k;
  }
}

// The residual gradient is added after the RMSNorm one (one rounding, like
// the unfused add), and the gradient from the output and 1/rms equals the
// one from the input up to rounding.
TEST(RmsNorm, GradWithResidualAndFromOutput) {
  const int64_t R = 70, C = 24;
  const double eps = 1e-5;
  Harness h;
  int x = h.buf({R, C}), w = h.buf({C}), dy = h.buf({R, C}),
      dres = h.buf({R, C}), y = h.buf({R, C}), rstd = h.buf({R});
  int dx = h.buf({R, C}), dw = h.buf({C}), dxRes = h.buf({R, C}),
      dwRes = h.buf({C}), dxOut = h.buf({R, C}), dwOut = h.buf({C});
  h.alloc();
  h.set(x, uniform(size_t(R * C), 53, -2, 2));
  h.set(w, uniform(size_t(C), 54, 0.5, 1.5));
  h.set(dy, uniform(size_t(R * C), 55));
  h.set(dres, uniform(size_t(R * C), 56));
  h.run(Opcode::RmsNormGrad, {dy, x, w}, {dx, dw}, {{"epsilon", eps}});
  h.run(Opcode::RmsNormGrad, {dy, x, w, dres}, {dxRes, dwRes},
        {{"epsilon", eps}});
  h.run(Opcode::InvertibleRmsNorm, {x, w}, {y, rstd}, {{"epsilon", eps}});
  h.run(Opcode::RmsNormGradFromOutput, {dy, y, w, rstd, dres},
        {dxOut, dwOut}, {});
  for (int64_t k = 0; k < R * C; ++k) {
    ASSERT_EQ(h.f(dxRes)[k], h.f(dx)[k] + h.f(dres)[k]) << k;
    EXPECT_NEAR(h.f(dxOut)[k], h.f(dxRes)[k],
                1e-5 * (1 + std::fabs(h.f(dxRes)[k])))
        << k;
  }
  for (int64_t k = 0; k < C; ++k) {
    ASSERT_EQ(h.f(dwRes)[k], h.f(dw)[k]) << k;
    EXPECT_NEAR(h.f(dwOut)[k], h.f(dw)[k], 1e-5 * (1 + std::fabs(h.f(dw)[k])))
        << k;
  }
}

TEST(RmsNorm, GradFromOutputRejectsZeroWeight) {
  const int64_t R = 4, C = 8;
  Harness h;
  int dy = h.buf({R, C}), y = h.buf({R, C}), w = h.buf({C}),
      rstd = h.buf({R}), dx = h.buf({R, C}), dw = h.buf({C});
  h.alloc();
  auto wv = uniform(size_t(C), 57, 0.5, 1.5);
  wv[5] = 0.0f;
  h.set(w, wv);
  try {
    h.run(Opcode::RmsNormGradFromOutput, {dy, y, w, rstd}, {dx, dw}, {});
    FAIL();
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("RMSNorm weight element 5 is 0"),
              std::string::npos)
        << e.what();
  }
}
