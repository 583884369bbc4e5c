// Adam/AdamW, Lamb and SGD against hand-computed values and independent
// double-precision reference loops.
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {
/// Buffers for one optimizer instruction over a tensor of n elements.
struct Opt {
  Harness h;
  int p, g, m, v, lr, step, gs;
  explicit Opt(int64_t n, bool sgd = false) {
    p = h.buf({n});
    g = h.buf({n});
    m = h.buf({n});
    v = sgd ? -1 : h.buf({n});
    lr = h.buf({});
    step = h.buf({}, DType::I64);
    gs = h.buf({});
    h.alloc();
  }
  void scalars(float lrv, int64_t s, float gscale) {
    h.f(lr)[0] = lrv;
    h.l(step)[0] = s;
    h.f(gs)[0] = gscale;
  }
  void adam(std::map<std::string, AttrValue> at) {
    h.run(Opcode::Adam, {p, g, m, v, lr, step, gs}, {p, m, v}, at);
  }
  void lamb(std::map<std::string, AttrValue> at) {
    h.run(Opcode::Lamb, {p, g, m, v, lr, step, gs}, {p, m, v}, at);
  }
  void sgd(std::map<std::string, AttrValue> at) {
    h.run(Opcode::Sgd, {p, g, m, lr, step, gs}, {p, m}, at);
  }
};

std::map<std::string, AttrValue> adamAttrs(double wd, bool adamw, bool bc) {
  return {{"beta1", 0.9},         {"beta2", 0.999},
          {"eps", 1e-8},          {"weight_decay", wd},
          {"adamw", int64_t(adamw)}, {"bias_correction", int64_t(bc)}};
}
} // namespace

TEST(Adam, FirstStepHandComputed) {
  Opt o(1);
  o.h.f(o.p)[0] = 1.0f;
  o.h.f(o.g)[0] = 0.5f;
  o.scalars(0.1f, 1, 2.0f); // g * gscale = 1
  o.adam(adamAttrs(0.0, false, true));
  // m = 0.1, v = 0.001, m_hat = 1, v_hat = 1: p = 1 - 0.1 * 1 / (1 + 1e-8)
  EXPECT_NEAR(o.h.f(o.m)[0], 0.1f, 1e-7);
  EXPECT_NEAR(o.h.f(o.v)[0], 0.001f, 1e-9);
  EXPECT_NEAR(o.h.f(o.p)[0], 0.9f, 1e-6);
}

TEST(Adam, MatchesTorchFormulaOverSteps) {
  for (int variant = 0; variant < 3; ++variant) {
    const bool adamw = variant == 0, bc = variant != 2;
    const double wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    const int64_t n = 50;
    Opt o(n);
    auto p0 = uniform(size_t(n), 70);
    o.h.set(o.p, p0);
    std::vector<double> p(p0.begin(), p0.end()), m(size_t(n), 0), v(size_t(n), 0);
    for (int64_t s = 1; s <= 3; ++s) {
      auto g = uniform(size_t(n), 71 + uint32_t(s));
      o.h.set(o.g, g);
      o.scalars(0.01f, s, 0.5f);
      o.adam(adamAttrs(wd, adamw, bc));
      const double lr = double(0.01f);
      for (int64_t i = 0; i < n; ++i) {
        double gi = double(g[size_t(i)]) * 0.5;
        if (!adamw)
          gi += wd * p[size_t(i)];
        else
          p[size_t(i)] *= 1 - lr * wd;
        m[size_t(i)] = b1 * m[size_t(i)] + (1 - b1) * gi;
        v[size_t(i)] = b2 * v[size_t(i)] + (1 - b2) * gi * gi;
        double bc1 = bc ? 1 - std::pow(b1, s) : 1, bc2 = bc ? 1 - std::pow(b2, s) : 1;
        p[size_t(i)] -= lr / bc1 * m[size_t(i)] /
                        (std::sqrt(v[size_t(i)]) / std::sqrt(bc2) + eps);
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_NEAR(o.h.f(o.p)[i], p[size_t(i)], 2e-6) << variant << " " << i;
      EXPECT_NEAR(o.h.f(o.m)[i], m[size_t(i)], 1e-6);
      EXPECT_NEAR(o.h.f(o.v)[i], v[size_t(i)], 1e-7);
    }
  }
}

TEST(Adam, RejectsBadStepAndDtypes) {
  Opt o(4);
  o.scalars(0.1f, 0, 1.0f);
  EXPECT_THROW(o.adam(adamAttrs(0, true, true)), Error);
  o.scalars(0.1f, 1, 1.0f);
  EXPECT_THROW(o.adam({{"beta1", 0.9}}), Error); // missing attributes
}

namespace {
std::map<std::string, AttrValue> lambAttrs(double wd, bool bc, double maxc,
                                           double minc) {
  return {{"beta1", 0.9},       {"beta2", 0.999},     {"eps", 1e-6},
          {"weight_decay", wd}, {"bias_correction", int64_t(bc)},
          {"max_coeff", maxc},  {"min_coeff", minc}};
}

/// DeepSpeed FusedLamb (fused_lamb_cuda_kernel.cu, eps outside the sqrt).
double refLamb(std::vector<double> &p, std::vector<double> &m,
               std::vector<double> &v, const std::vector<float> &g,
               double gscale, double lr, int64_t s, double wd, bool bc,
               double maxc, double minc) {
  const double b1 = 0.9, b2 = 0.999, eps = 1e-6;
  double wn = 0, un = 0;
  std::vector<double> u(p.size());
  for (size_t i = 0; i < p.size(); ++i) {
    double gi = g[i] * gscale;
    m[i] = b1 * m[i] + (1 - b1) * gi;
    v[i] = b2 * v[i] + (1 - b2) * gi * gi;
    u[i] = m[i] / (std::sqrt(v[i]) + eps) + wd * p[i];
    wn += p[i] * p[i];
    un += u[i] * u[i];
  }
  wn = std::sqrt(wn);
  un = std::sqrt(un);
  double coeff = 1;
  if (wn != 0 && un != 0)
    coeff = std::min(maxc, std::max(minc, wn / un));
  double step = bc ? lr * std::sqrt(1 - std::pow(b2, s)) / (1 - std::pow(b1, s)) : lr;
  for (size_t i = 0; i < p.size(); ++i)
    p[i] -= step * coeff * u[i];
  return coeff;
}
} // namespace

TEST(Lamb, FirstStepHandComputed) {
  // p = [3, 4] (norm 5), g = [1, 0]: m = [0.1, 0], v = [0.001, 0],
  // update = [0.1/(sqrt(0.001)+1e-6), 0] = [3.16218..., 0] (wd = 0),
  // trust ratio = 5 / 3.16218 = 1.58118, step size = lr*sqrt(0.001)/0.1.
  Opt o(2);
  o.h.set(o.p, {3, 4});
  o.h.set(o.g, {1, 0});
  o.scalars(0.01f, 1, 1.0f);
  o.lamb(lambAttrs(0.0, true, 10.0, 0.01));
  const double u0 = 0.1 / (std::sqrt(0.001) + 1e-6);
  const double coeff = 5.0 / u0;
  const double stepSize = 0.01 * std::sqrt(0.001) / 0.1;
  EXPECT_NEAR(o.h.f(o.p)[0], 3.0 - stepSize * coeff * u0, 1e-6);
  EXPECT_EQ(o.h.f(o.p)[1], 4.0f);
}

TEST(Lamb, MatchesDeepSpeedFormula) {
  struct Case {
    double wd;
    bool bc;
    double maxc, minc;
    float pscale;
  } cases[] = {{0.01, true, 10.0, 0.01, 1.0f},  // unclamped
               {0.0, false, 10.0, 0.01, 1.0f},  // no bias correction
               {0.0, true, 0.5, 0.01, 100.0f},  // clamped to max_coeff
               {0.0, true, 10.0, 0.9, 0.01f},   // clamped to min_coeff
               {0.0, true, 10.0, 0.01, 0.0f}};  // ||p|| = 0 -> coeff 1
  int idx = 0;
  for (const Case &c : cases) {
    const int64_t n = 40;
    Opt o(n);
    auto p0 = uniform(size_t(n), 80);
    for (float &x : p0)
      x *= c.pscale;
    o.h.set(o.p, p0);
    std::vector<double> p(p0.begin(), p0.end()), m(size_t(n), 0), v(size_t(n), 0);
    double coeff = 0;
    const int64_t steps = idx == 4 ? 1 : 2; // p moves off 0 after step 1
    for (int64_t s = 1; s <= steps; ++s) {
      auto g = uniform(size_t(n), 81 + uint32_t(s));
      o.h.set(o.g, g);
      o.scalars(0.02f, s, 0.25f);
      o.lamb(lambAttrs(c.wd, c.bc, c.maxc, c.minc));
      coeff = refLamb(p, m, v, g, 0.25, double(0.02f), s, c.wd, c.bc, c.maxc,
                      c.minc);
    }
    if (idx == 2) {
      EXPECT_EQ(coeff, 0.5);
    }
    if (idx == 3) {
      EXPECT_EQ(coeff, 0.9);
    }
    if (idx == 4) {
      EXPECT_EQ(coeff, 1.0);
    }
    for (int64_t i = 0; i < n; ++i)
      EXPECT_NEAR(o.h.f(o.p)[i], p[size_t(i)], 1e-5 * (1 + std::fabs(p[size_t(i)])))
          << "case " << idx << " i " << i;
    ++idx;
  }
}

TEST(Lamb, ZeroGradientKeepsCoefficientOne) {
  Opt o(3);
  o.h.set(o.p, {1, 2, 3});
  o.scalars(0.1f, 1, 1.0f);
  o.lamb(lambAttrs(0.0, true, 10.0, 0.01)); // update norm 0
  EXPECT_EQ(o.h.get(o.p), (std::vector<float>{1, 2, 3}));
}

namespace {
std::map<std::string, AttrValue> sgdAttrs(double mom, double damp, double wd,
                                          bool nesterov) {
  return {{"momentum", mom},
          {"dampening", damp},
          {"weight_decay", wd},
          {"nesterov", int64_t(nesterov)}};
}
} // namespace

TEST(Sgd, HandComputed) {
  {
    Opt o(1, true);
    o.h.f(o.p)[0] = 1.0f;
    o.h.f(o.g)[0] = 1.0f;
    o.scalars(0.1f, 1, 1.0f);
    o.sgd(sgdAttrs(0.9, 0.0, 0.0, false));
    EXPECT_NEAR(o.h.f(o.p)[0], 0.9f, 1e-7); // buf = 1
    o.scalars(0.1f, 2, 1.0f);
    o.sgd(sgdAttrs(0.9, 0.0, 0.0, false));
    EXPECT_NEAR(o.h.f(o.m)[0], 1.9f, 1e-6); // buf = 0.9 + 1
    EXPECT_NEAR(o.h.f(o.p)[0], 0.71f, 1e-6);
  }
  {
    Opt o(1, true); // nesterov
    o.h.f(o.p)[0] = 1.0f;
    o.h.f(o.g)[0] = 1.0f;
    o.scalars(0.1f, 1, 1.0f);
    o.sgd(sgdAttrs(0.9, 0.0, 0.0, true));
    EXPECT_NEAR(o.h.f(o.p)[0], 0.81f, 1e-6); // g + 0.9 * buf = 1.9
  }
  {
    Opt o(1, true); // dampening, weight decay, gscale
    o.h.f(o.p)[0] = 2.0f;
    o.h.f(o.g)[0] = 4.0f;
    o.h.f(o.m)[0] = 123.0f; // ignored on the first step
    o.scalars(0.1f, 1, 0.25f);
    o.sgd(sgdAttrs(0.9, 0.5, 0.5, false));
    // g = 4*0.25 + 0.5*2 = 2; buf = 2; p = 2 - 0.2 = 1.8
    EXPECT_NEAR(o.h.f(o.m)[0], 2.0f, 1e-6);
    EXPECT_NEAR(o.h.f(o.p)[0], 1.8f, 1e-6);
    o.scalars(0.1f, 2, 0.25f);
    o.sgd(sgdAttrs(0.9, 0.5, 0.5, false));
    // g = 1 + 0.9 = 1.9; buf = 0.9*2 + 0.5*1.9 = 2.75; p = 1.8 - 0.275
    EXPECT_NEAR(o.h.f(o.m)[0], 2.75f, 1e-6);
    EXPECT_NEAR(o.h.f(o.p)[0], 1.525f, 1e-6);
  }
  {
    Opt o(1, true); // plain SGD, no momentum buffer use
    o.h.f(o.p)[0] = 1.0f;
    o.h.f(o.g)[0] = 3.0f;
    o.scalars(0.5f, 7, 1.0f);
    o.sgd(sgdAttrs(0.0, 0.0, 0.0, false));
    EXPECT_NEAR(o.h.f(o.p)[0], -0.5f, 1e-7);
    EXPECT_EQ(o.h.f(o.m)[0], 0.0f);
  }
}
