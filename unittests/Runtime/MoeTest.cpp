// The mixture-of-experts kernels against naive loops and finite
// differences: the router's top-k and its gradient, the expert-major layout
// (exact slots), the row moves and their adjointness, the grouped GEMMs with
// an expert that gets no rows, the per-layer load and the load-balancing
// loss; and the errors for bad indices and counts.
#include "TestUtil.h"

#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <numeric>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

/// softmax of one row, in double.
std::vector<double> softmax(const float *row, int64_t E) {
  std::vector<double> p(static_cast<size_t>(E));
  double mx = *std::max_element(row, row + E), sum = 0.0;
  for (int64_t e = 0; e < E; ++e)
    sum += (p[size_t(e)] = std::exp(double(row[e]) - mx));
  for (double &v : p)
    v /= sum;
  return p;
}

} // namespace

TEST(MoeTopk, MatchesNaiveAndFiniteDifferences) {
  const int64_t N = 7, E = 5, K = 2;
  Harness h;
  int logits = h.buf({N, E}), w = h.buf({N, K}),
      experts = h.buf({N, K}, DType::I32), dw = h.buf({N, K}),
      dl = h.buf({N, E});
  h.alloc();
  h.set(logits, uniform(size_t(N * E), 3, -2.0f, 2.0f));
  h.run(Opcode::MoeTopk, {logits}, {w, experts}, {{"k", int64_t(K)}, {"normalize", int64_t(1)}});
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> p = softmax(h.f(logits) + n * E, E);
    std::vector<int> order(static_cast<size_t>(E));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return p[size_t(a)] > p[size_t(b)]; });
    const double sum = p[size_t(order[0])] + p[size_t(order[1])];
    for (int64_t k = 0; k < K; ++k) {
      EXPECT_EQ(h.i(experts)[n * K + k], order[size_t(k)]) << n;
      EXPECT_NEAR(h.f(w)[n * K + k], p[size_t(order[size_t(k)])] / sum, 1e-6);
    }
  }
  // d/dlogits of sum(c * weights), the choices held fixed.
  std::vector<float> c = uniform(size_t(N * K), 4);
  h.set(dw, c);
  h.run(Opcode::MoeTopkGrad, {dw, w, experts}, {dl});
  std::vector<float> analytic = h.get(dl);
  auto loss = [&] {
    h.run(Opcode::MoeTopk, {logits}, {w, experts}, {{"k", int64_t(K)}, {"normalize", int64_t(1)}});
    return dot(c.data(), h.f(w), N * K);
  };
  std::vector<double> numeric = numericGrad(h.f(logits), N * E, loss, 1e-3f);
  for (int64_t i = 0; i < N * E; ++i)
    EXPECT_NEAR(analytic[size_t(i)], numeric[size_t(i)], 2e-3) << i;
}

// normalize = false (Qwen2-MoE's norm_topk_prob false): the weights are the
// chosen probabilities themselves, and with the logits as its fourth
// operand the gradient reaches every expert's logit.
TEST(MoeTopk, UnnormalisedWeightsAndTheirGradient) {
  const int64_t N = 6, E = 5, K = 2;
  Harness h;
  int logits = h.buf({N, E}), w = h.buf({N, K}),
      experts = h.buf({N, K}, DType::I32), dw = h.buf({N, K}),
      dl = h.buf({N, E});
  h.alloc();
  h.set(logits, uniform(size_t(N * E), 13, -2.0f, 2.0f));
  const std::map<std::string, AttrValue> attrs = {{"k", int64_t(K)},
                                                 {"normalize", int64_t(0)}};
  h.run(Opcode::MoeTopk, {logits}, {w, experts}, attrs);
  for (int64_t n = 0; n < N; ++n) {
    std::vector<double> p = softmax(h.f(logits) + n * E, E);
    for (int64_t k = 0; k < K; ++k)
      EXPECT_NEAR(h.f(w)[n * K + k], p[size_t(h.i(experts)[n * K + k])], 1e-6);
  }
  std::vector<float> c = uniform(size_t(N * K), 14);
  h.set(dw, c);
  h.run(Opcode::MoeTopkGrad, {dw, w, experts, logits}, {dl});
  std::vector<float> analytic = h.get(dl);
  auto loss = [&] {
    h.run(Opcode::MoeTopk, {logits}, {w, experts}, attrs);
    return dot(c.data(), h.f(w), N * K);
  };
  std::vector<double> numeric = numericGrad(h.f(logits), N * E, loss, 1e-3f);
  int unchosenMoved = 0;
  for (int64_t i = 0; i < N * E; ++i) {
    EXPECT_NEAR(analytic[size_t(i)], numeric[size_t(i)], 2e-3) << i;
    unchosenMoved += std::fabs(analytic[size_t(i)]) > 1e-4;
  }
  EXPECT_GT(unchosenMoved, N * K) << "only the chosen logits got a gradient";
}

TEST(MoeRoute, StableExpertMajorSlots) {
  Harness h;
  int experts = h.buf({3, 2}, DType::I32), slots = h.buf({3, 2}, DType::I32),
      counts = h.buf({3}, DType::I32);
  h.alloc();
  h.seti(experts, {1, 0, 1, 2, 0, 1});
  h.run(Opcode::MoeRoute, {experts}, {slots, counts},
        {{"num_experts", int64_t(3)}, {"capacity", int64_t(0)}});
  // Expert 0: (0,1), (2,0); expert 1: (0,0), (1,0), (2,1); expert 2: (1,1).
  EXPECT_EQ(h.geti(counts), (std::vector<int32_t>{2, 3, 1}));
  EXPECT_EQ(h.geti(slots), (std::vector<int32_t>{2, 0, 3, 5, 1, 4}));
  h.seti(experts, {1, 0, 1, 3, 0, 1});
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::MoeRoute, {experts}, {slots, counts},
                    {{"num_experts", int64_t(3)}, {"capacity", int64_t(0)}});
            }),
            "MoeRoute: expert choice 3 out of range [0,3)");
}

// Token dropping: an expert keeps its first `capacity` assignments, first
// choices (k = 0) of every token before any second choice; dropped ones get
// slot -1, no row and no contribution; the rows after the kept ones are
// zero.
TEST(MoeRoute, CapacityDropsLaterChoicesFirst) {
  const int64_t N = 4, K = 2, C = 3, E = 3;
  Harness h;
  int experts = h.buf({N, K}, DType::I32), slots = h.buf({N, K}, DType::I32),
      counts = h.buf({E}, DType::I32), x = h.buf({N, C}),
      w = h.buf({N, K}), rows = h.buf({N * K, C}), y = h.buf({N, C}),
      dw = h.buf({N, K});
  h.alloc();
  // Expert 0 is chosen by (0,0), (1,1), (2,0), (3,0): with capacity 2 the
  // first choices (0,0) and (2,0) are kept, (3,0) and the second choice
  // (1,1) dropped. Expert 1: (0,1), (1,0); expert 2: (2,1), (3,1).
  h.seti(experts, {0, 1, 1, 0, 0, 2, 0, 2});
  h.run(Opcode::MoeRoute, {experts}, {slots, counts},
        {{"num_experts", E}, {"capacity", int64_t(2)}});
  EXPECT_EQ(h.geti(counts), (std::vector<int32_t>{2, 2, 2}));
  EXPECT_EQ(h.geti(slots), (std::vector<int32_t>{0, 2, 3, -1, 1, 4, -1, 5}));
  h.set(x, uniform(size_t(N * C), 11));
  h.set(w, uniform(size_t(N * K), 12, 0.1f, 1.0f));
  h.set(rows, std::vector<float>(size_t(N * K * C), NAN));
  h.run(Opcode::MoeDispatch, {x, slots}, {rows});
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(h.f(rows)[0 * C + c], h.f(x)[0 * C + c]); // (0,0)
    EXPECT_EQ(h.f(rows)[6 * C + c], 0.0f);              // padding
    EXPECT_EQ(h.f(rows)[7 * C + c], 0.0f);
  }
  h.run(Opcode::MoeCombine, {rows, slots, w}, {y});
  for (int64_t c = 0; c < C; ++c) // token 3 keeps only its expert 2 row
    EXPECT_NEAR(h.f(y)[3 * C + c], h.f(w)[3 * K + 1] * h.f(x)[3 * C + c],
                1e-6);
  h.run(Opcode::MoeSlotDot, {x, rows, slots}, {dw});
  EXPECT_EQ(h.f(dw)[1 * K + 1], 0.0f);
  EXPECT_EQ(h.f(dw)[3 * K + 0], 0.0f);
}

TEST(MoeRows, DispatchCombineAndSlotDotMatchNaive) {
  const int64_t N = 5, K = 2, C = 9;
  Harness h;
  int x = h.buf({N, C}), slots = h.buf({N, K}, DType::I32), w = h.buf({N, K}),
      rows = h.buf({N * K, C}), y = h.buf({N, C}), r = h.buf({N * K, C}),
      dw = h.buf({N, K});
  h.alloc();
  h.set(x, uniform(size_t(N * C), 5));
  h.set(w, uniform(size_t(N * K), 6, 0.1f, 1.0f));
  h.set(r, uniform(size_t(N * K * C), 7));
  h.seti(slots, {3, 7, 0, 9, 5, 1, 8, 2, 6, 4}); // a permutation of 0..9
  h.run(Opcode::MoeDispatch, {x, slots, w}, {rows});
  h.run(Opcode::MoeCombine, {r, slots, w}, {y});
  h.run(Opcode::MoeSlotDot, {x, r, slots}, {dw});
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) {
      const int64_t s = h.i(slots)[n * K + k];
      double d = 0.0;
      for (int64_t c = 0; c < C; ++c) {
        EXPECT_FLOAT_EQ(h.f(rows)[s * C + c],
                        h.f(x)[n * C + c] * h.f(w)[n * K + k]);
        d += double(h.f(x)[n * C + c]) * h.f(r)[s * C + c];
      }
      EXPECT_NEAR(h.f(dw)[n * K + k], d, 1e-5);
    }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c) {
      double v = 0.0;
      for (int64_t k = 0; k < K; ++k)
        v += double(h.f(w)[n * K + k]) *
             h.f(r)[int64_t(h.i(slots)[n * K + k]) * C + c];
      EXPECT_NEAR(h.f(y)[n * C + c], v, 1e-5);
    }
  // The two moves are adjoint: <dispatch(x), r> = <x, combine(r)>.
  EXPECT_NEAR(dot(h.f(rows), h.f(r), N * K * C), dot(h.f(x), h.f(y), N * C),
              1e-4);
  h.seti(slots, {3, 7, 0, 10, 5, 1, 8, 2, 6, 4});
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::MoeCombine, {r, slots}, {y});
            }),
            "MoeCombine: slot 10 out of range [-1,10)");
}

class GroupedLinearTest : public ::testing::TestWithParam<bool> {};

TEST_P(GroupedLinearTest, MatchesNaiveWithAnEmptyExpert) {
  const bool tw = GetParam();
  const int64_t S = 5, K = 4, N = 3, E = 3;
  Harness h;
  int x = h.buf({S, K}), counts = h.buf({E}, DType::I32),
      w = h.buf(tw ? std::vector<int64_t>{E * N, K}
                   : std::vector<int64_t>{E * K, N}),
      y = h.buf({S, N}), dy = h.buf({S, N}),
      dw = h.buf(h.prog.buffers[2].shape);
  h.alloc();
  h.set(x, uniform(size_t(S * K), 8));
  h.set(w, uniform(size_t(E * K * N), 9));
  h.set(dy, uniform(size_t(S * N), 10));
  h.set(dw, std::vector<float>(size_t(E * K * N), NAN));
  h.seti(counts, {3, 0, 2}); // expert 1 gets no rows
  const std::map<std::string, AttrValue> attrs = {{"transpose_w", int64_t(tw)}};
  h.run(Opcode::GroupedLinear, {x, w, counts}, {y}, attrs);
  h.run(Opcode::GroupedLinearGradWeight, {x, dy, counts}, {dw}, attrs);
  const int64_t expertOf[S] = {0, 0, 0, 2, 2};
  auto W = [&](int64_t e, int64_t k, int64_t n) {
    return double(h.f(w)[e * K * N + (tw ? n * K + k : k * N + n)]);
  };
  for (int64_t s = 0; s < S; ++s)
    for (int64_t n = 0; n < N; ++n) {
      double v = 0.0;
      for (int64_t k = 0; k < K; ++k)
        v += double(h.f(x)[s * K + k]) * W(expertOf[s], k, n);
      EXPECT_NEAR(h.f(y)[s * N + n], v, 1e-5);
    }
  for (int64_t e = 0; e < E; ++e)
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) {
        double v = 0.0;
        for (int64_t s = 0; s < S; ++s)
          if (expertOf[s] == e)
            v += double(h.f(x)[s * K + k]) * h.f(dy)[s * N + n];
        EXPECT_NEAR(h.f(dw)[e * K * N + (tw ? n * K + k : k * N + n)], v, 1e-5);
      }
  // Fewer counted rows than rows: the rest is padding (expert
  // parallelism's receiving buffer), with zero results.
  h.seti(counts, {2, 0, 1});
  h.run(Opcode::GroupedLinear, {x, w, counts}, {y}, attrs);
  for (int64_t s = 3; s < S; ++s)
    for (int64_t n = 0; n < N; ++n)
      EXPECT_EQ(h.f(y)[s * N + n], 0.0f);
  h.seti(counts, {3, 1, 2});
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::GroupedLinear, {x, w, counts}, {y}, attrs);
            }),
            "GroupedLinear: the experts' row counts add up to 6, more than "
            "the 5 rows");
}

INSTANTIATE_TEST_SUITE_P(Layouts, GroupedLinearTest, ::testing::Bool());

TEST(MoeLoad, BalanceLossAndGradients) {
  const int64_t N = 6, E = 4, K = 2;
  Harness h;
  int logits = h.buf({N, E}), experts = h.buf({N, K}, DType::I32),
      w = h.buf({N, K}), load = h.buf({2, E}), other = h.buf({2, E}),
      aux = h.buf({}), daux = h.buf({}), dload = h.buf({2, E}),
      dl = h.buf({N, E});
  h.alloc();
  h.set(logits, uniform(size_t(N * E), 11, -2.0f, 2.0f));
  h.set(other, uniform(size_t(2 * E), 12, 0.0f, 3.0f));
  h.run(Opcode::MoeTopk, {logits}, {w, experts}, {{"k", int64_t(K)}, {"normalize", int64_t(1)}});
  h.run(Opcode::MoeLoad, {logits, experts}, {load});
  for (int64_t e = 0; e < E; ++e) {
    int chosen = 0;
    double prob = 0.0;
    for (int64_t n = 0; n < N; ++n) {
      prob += softmax(h.f(logits) + n * E, E)[size_t(e)];
      for (int64_t k = 0; k < K; ++k)
        chosen += h.i(experts)[n * K + k] == e;
    }
    EXPECT_EQ(h.f(load)[e], float(chosen));
    EXPECT_NEAR(h.f(load)[E + e], prob, 1e-5);
  }
  // Two layers' loads: loss = s * sum_e T0 T1 with T their sum.
  const double s = 0.3;
  const std::map<std::string, AttrValue> scale = {{"scale", s}};
  h.run(Opcode::MoeBalanceLoss, {load, other}, {aux}, scale);
  double want = 0.0;
  for (int64_t e = 0; e < E; ++e)
    want += double(h.f(load)[e] + h.f(other)[e]) *
            (h.f(load)[E + e] + h.f(other)[E + e]);
  EXPECT_NEAR(h.f(aux)[0], s * want, 1e-5);
  h.set(daux, {2.0f});
  h.run(Opcode::MoeBalanceLossGrad, {daux, load, other}, {dload}, scale);
  for (int64_t e = 0; e < E; ++e) {
    EXPECT_NEAR(h.f(dload)[e], 2 * s * (h.f(load)[E + e] + h.f(other)[E + e]),
                1e-5);
    EXPECT_NEAR(h.f(dload)[E + e], 2 * s * (h.f(load)[e] + h.f(other)[e]),
                1e-5);
  }
  // The router logits' gradient through the probability sums, the choices
  // (and so the counts) held fixed.
  h.run(Opcode::MoeLoadGrad, {dload, logits}, {dl});
  std::vector<float> analytic = h.get(dl), g = h.get(dload);
  auto loss = [&] {
    h.run(Opcode::MoeLoad, {logits, experts}, {load});
    return dot(g.data() + E, h.f(load) + E, E);
  };
  std::vector<double> numeric = numericGrad(h.f(logits), N * E, loss, 1e-3f);
  for (int64_t i = 0; i < N * E; ++i)
    EXPECT_NEAR(analytic[size_t(i)], numeric[size_t(i)], 2e-3) << i;
}

TEST(MoeInstrCheck, RejectsMismatchedOperands) {
  Harness h;
  int x = h.buf({5, 4}), w = h.buf({10, 4}), counts = h.buf({3}, DType::I32),
      y = h.buf({5, 3}), logits = h.buf({5, 4}), wk = h.buf({5, 3}),
      ek = h.buf({5, 2}, DType::I32), fcounts = h.buf({3});
  h.alloc();
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::GroupedLinear, {x, w, counts}, {y},
                    {{"transpose_w", int64_t(1)}});
            }),
            "GroupedLinear: weight '" + h.prog.buffers[size_t(w)].name +
                "' [10,4] does not stack 3 experts");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::MoeTopk, {logits}, {wk, ek}, {{"k", int64_t(2)}, {"normalize", int64_t(1)}});
            }),
            "MoeTopk: weights '" + h.prog.buffers[size_t(wk)].name +
                "' [5,3] must be [tokens..., 2] over 5 tokens");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::GroupedLinear, {x, w, fcounts}, {y},
                    {{"transpose_w", int64_t(1)}});
            }),
            "GroupedLinear: counts '" + h.prog.buffers[size_t(fcounts)].name +
                "' must be i32, got f32");
}

TEST(MoeTopk, NaNRowStillChoosesDistinctExperts) {
  Harness h;
  int logits = h.buf({1, 3}), w = h.buf({1, 2}),
      experts = h.buf({1, 2}, DType::I32);
  h.alloc();
  h.set(logits, {0.5f, NAN, 1.0f});
  h.run(Opcode::MoeTopk, {logits}, {w, experts}, {{"k", int64_t(2)}, {"normalize", int64_t(1)}});
  std::vector<int32_t> e = h.geti(experts);
  EXPECT_NE(e[0], e[1]);
  for (int32_t x : e)
    EXPECT_TRUE(x >= 0 && x < 3) << x;
  EXPECT_TRUE(std::isnan(h.f(w)[0]));
}
