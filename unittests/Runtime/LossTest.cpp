// CrossEntropy and CrossEntropyGrad (classes 0: every column is a class;
// a padded vocabulary's classes last).
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {
double refCE(const std::vector<float> &z, const std::vector<int32_t> &lab,
             int64_t V, int64_t ignore) {
  double total = 0;
  int64_t count = 0;
  for (size_t r = 0; r < lab.size(); ++r) {
    if (lab[r] == ignore)
      continue;
    double mx = -1e300, s = 0;
    for (int64_t j = 0; j < V; ++j)
      mx = std::max(mx, double(z[r * size_t(V) + size_t(j)]));
    for (int64_t j = 0; j < V; ++j)
      s += std::exp(z[r * size_t(V) + size_t(j)] - mx);
    total += mx + std::log(s) - z[r * size_t(V) + size_t(lab[r])];
    ++count;
  }
  return count ? total / double(count) : 0.0;
}
} // namespace

TEST(CrossEntropy, MatchesNaiveWithIgnoredPositions) {
  const int64_t B = 3, T = 4, V = 1000;
  Harness h;
  int z = h.buf({B, T, V}), lab = h.buf({B, T}, DType::I32), out = h.buf({});
  h.alloc();
  auto zv = uniform(size_t(B * T * V), 50, -8, 8);
  std::vector<int32_t> lv = {1, 999, -100, 7, 0, -100, 3, 500, 2, 2, 2, -100};
  h.set(z, zv);
  h.seti(lab, lv);
  h.run(Opcode::CrossEntropy, {z, lab}, {out}, {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}});
  EXPECT_NEAR(h.f(out)[0], refCE(zv, lv, V, -100), 1e-5);
}

TEST(CrossEntropy, AllIgnoredIsZero) {
  Harness h;
  int z = h.buf({2, 5}), lab = h.buf({2}, DType::I32), out = h.buf({1}),
      d = h.buf({}), dz = h.buf({2, 5});
  h.alloc();
  h.set(z, uniform(10, 51));
  h.seti(lab, {-100, -100});
  h.f(out)[0] = 42;
  h.f(d)[0] = 1;
  h.run(Opcode::CrossEntropy, {z, lab}, {out}, {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}});
  EXPECT_EQ(h.f(out)[0], 0.0f);
  h.set(dz, std::vector<float>(10, 3.0f));
  h.run(Opcode::CrossEntropyGrad, {d, z, lab}, {dz},
        {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}});
  EXPECT_EQ(h.get(dz), std::vector<float>(10, 0.0f));
}

TEST(CrossEntropy, RejectsLabelOutOfRange) {
  Harness h;
  int z = h.buf({2, 5}), lab = h.buf({2}, DType::I32), out = h.buf({1}),
      d = h.buf({1}), dz = h.buf({2, 5});
  h.alloc();
  h.seti(lab, {1, 5});
  EXPECT_THROW(h.run(Opcode::CrossEntropy, {z, lab}, {out},
                     {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}}),
               Error);
  EXPECT_THROW(h.run(Opcode::CrossEntropyGrad, {d, z, lab}, {dz},
                     {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}}),
               Error);
  h.seti(lab, {1, -1}); // negative but not ignore_index
  EXPECT_THROW(h.run(Opcode::CrossEntropy, {z, lab}, {out},
                     {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}}),
               Error);
  h.seti(lab, {1, -1}); // -1 is the ignore index here
  EXPECT_NO_THROW(h.run(Opcode::CrossEntropy, {z, lab}, {out},
                        {{"ignore_index", int64_t(-1)}, {"classes", int64_t(0)}}));
}

TEST(CrossEntropy, GradMatchesFiniteDifferences) {
  const int64_t R = 4, V = 6;
  Harness h;
  int z = h.buf({R, V}), lab = h.buf({R}, DType::I32), out = h.buf({1}),
      d = h.buf({1}), dz = h.buf({R, V});
  h.alloc();
  h.set(z, uniform(size_t(R * V), 52, -3, 3));
  h.seti(lab, {2, -100, 5, 0});
  h.f(d)[0] = 1.7f;
  std::map<std::string, AttrValue> at = {{"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}};
  h.run(Opcode::CrossEntropyGrad, {d, z, lab}, {dz}, at);
  auto loss = [&] {
    h.run(Opcode::CrossEntropy, {z, lab}, {out}, at);
    return 1.7 * double(h.f(out)[0]);
  };
  auto num = numericGrad(h.f(z), R * V, loss, 1e-2f);
  for (int64_t k = 0; k < R * V; ++k)
    EXPECT_NEAR(h.f(dz)[k], num[size_t(k)], 1e-3) << k;
  for (int64_t j = 0; j < V; ++j)
    EXPECT_EQ(h.f(dz)[V + j], 0.0f); // ignored row
}

// A padded vocabulary (classes = 7 of 10 columns): the loss of the first 7
// columns alone, whatever the padding holds; its gradient is the unpadded
// one on the classes and exactly zero on the padding; a label in the
// padding is refused; classes past the columns are refused.
TEST(CrossEntropy, PaddedVocabularyCountsTheClassesOnly) {
  const int64_t R = 3, V = 10, K = 7;
  Harness h;
  int z = h.buf({R, V}), lab = h.buf({R}, DType::I32), out = h.buf({1}),
      d = h.buf({1}), dz = h.buf({R, V}), zk = h.buf({R, K}),
      outk = h.buf({1}), dzk = h.buf({R, K});
  h.alloc();
  std::vector<float> zv = uniform(size_t(R * V), 53, -3, 3), kv;
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < V; ++j)
      if (j >= K)
        zv[size_t(r * V + j)] = 30.0f; // would dominate if counted
      else
        kv.push_back(zv[size_t(r * V + j)]);
  h.set(z, zv);
  h.set(zk, kv);
  h.seti(lab, {6, 0, 3});
  h.f(d)[0] = 1.0f;
  const std::map<std::string, AttrValue> padded = {
      {"ignore_index", int64_t(-100)}, {"classes", K}};
  const std::map<std::string, AttrValue> whole = {
      {"ignore_index", int64_t(-100)}, {"classes", int64_t(0)}};
  h.run(Opcode::CrossEntropy, {z, lab}, {out}, padded);
  h.run(Opcode::CrossEntropy, {zk, lab}, {outk}, whole);
  EXPECT_EQ(h.f(out)[0], h.f(outk)[0]);
  h.run(Opcode::CrossEntropyGrad, {d, z, lab}, {dz}, padded);
  h.run(Opcode::CrossEntropyGrad, {d, zk, lab}, {dzk}, whole);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < V; ++j)
      EXPECT_EQ(h.f(dz)[r * V + j], j < K ? h.f(dzk)[r * K + j] : 0.0f)
          << r << "," << j;
  h.seti(lab, {6, 7, 3});
  EXPECT_THROW(h.run(Opcode::CrossEntropy, {z, lab}, {out}, padded), Error);
  EXPECT_THROW(h.run(Opcode::CrossEntropy, {z, lab}, {out},
                     {{"ignore_index", int64_t(-100)}, {"classes", V + 1}}),
               Error);
}
