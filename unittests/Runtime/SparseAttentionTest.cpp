//===- SparseAttentionTest.cpp - Block-sparse attention on the CPU --------===//
//
// The block-sparse attention and softmax kernels against a dense reference
// in double written here: scores masked element by element with the
// layout's blocks (and the causal mask), softmax, and the analytic
// backward. Layouts are random, with a random number of blocks per row
// (one at least), shared by all heads or one per head; blocks of 1, 3 and
// 8 tokens; grouped-query attention; causal and bidirectional; with and
// without a key padding mask (dense attention too), including queries that
// see only padding (output 0, no gradient).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

/// A random layout: each query block attends to a random, non-empty set of
/// key blocks (at or below the diagonal when causal).
BlockLayout randomLayout(int64_t block, int64_t heads, int64_t blocks,
                         bool causal, uint32_t seed) {
  std::mt19937 gen(seed);
  BlockLayout l{block, heads, blocks, {0}, {}};
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < blocks; ++i) {
      const int64_t last = causal ? i : blocks - 1;
      const int64_t must = std::uniform_int_distribution<int64_t>(0, last)(gen);
      for (int64_t j = 0; j <= last; ++j)
        if (j == must || std::bernoulli_distribution(0.4)(gen))
          l.cols.push_back(int32_t(j));
      l.rows.push_back(int32_t(l.cols.size()));
    }
  return l;
}

bool attends(const BlockLayout &l, int64_t head, int64_t i, int64_t j,
             bool causal) {
  if (causal && j > i)
    return false;
  if (l.empty())
    return true;
  const int64_t row = head % l.heads * l.blocks + i / l.block;
  for (int32_t k = l.rows[size_t(row)]; k < l.rows[size_t(row + 1)]; ++k)
    if (l.cols[size_t(k)] == j / l.block)
      return true;
  return false;
}

struct Case {
  int64_t block, blocks, heads, groups, layoutHeads; ///< layoutHeads 0: dense
  bool causal, padded;
};

/// A key padding mask [2, T]: batch 0 pads a random third of its keys,
/// batch 1 its first three (on the left: under a causal mask its first
/// queries see only padding).
std::vector<int32_t> paddingMask(int64_t T, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<int32_t> mask(size_t(2 * T), 1);
  for (int64_t j = 0; j < T; ++j) {
    mask[size_t(j)] = std::bernoulli_distribution(1.0 / 3)(gen) ? 0 : 1;
    mask[size_t(T + j)] = j < 3 ? 0 : 1;
  }
  return mask;
}

class SparseAttentionTest : public ::testing::TestWithParam<Case> {};

/// Forward (out, lse) and backward (dq, dk, dv) against the dense masked
/// reference; the kernels must also equal the dense kernel's result where
/// the layout is all ones. A query with no key left has out 0, lse -inf
/// and contributes no gradient.
TEST_P(SparseAttentionTest, EqualsDenseMaskedReference) {
  const Case c = GetParam();
  const int64_t B = 2, H = c.heads, KV = H / c.groups,
                T = c.block * c.blocks, D = 5;
  const double scale = 0.4;
  const BlockLayout layout =
      c.layoutHeads ? randomLayout(c.block, c.layoutHeads, c.blocks, c.causal,
                                   uint32_t(T * 31 + H))
                    : BlockLayout{};
  const std::vector<int32_t> keyMask =
      c.padded ? paddingMask(T, uint32_t(T)) : std::vector<int32_t>();
  const auto sees = [&](int64_t bh, int64_t i, int64_t j) {
    return attends(layout, bh % H, i, j, c.causal) &&
           (keyMask.empty() || keyMask[size_t(bh / H * T + j)]);
  };
  Harness h;
  int q = h.buf({B, H, T, D}), k = h.buf({B, KV, T, D}),
      v = h.buf({B, KV, T, D}), out = h.buf({B, H, T, D}),
      lse = h.buf({B, H, T}), dout = h.buf({B, H, T, D}),
      dq = h.buf({B, H, T, D}), dk = h.buf({B, KV, T, D}),
      dv = h.buf({B, KV, T, D}), mask = h.buf({B, T}, DType::I32);
  h.alloc();
  std::vector<int> extra;
  if (c.padded) {
    h.seti(mask, keyMask);
    extra.push_back(mask);
  }
  h.set(q, uniform(size_t(B * H * T * D), 1, -2, 2));
  h.set(k, uniform(size_t(B * KV * T * D), 2, -2, 2));
  h.set(v, uniform(size_t(B * KV * T * D), 3));
  h.set(dout, uniform(size_t(B * H * T * D), 4));
  const std::map<std::string, AttrValue> attrs = {
      {"scale", scale},         {"causal", int64_t(c.causal)},
      {"rate", 0.0},            {"stream", int64_t(1)},
      {"layout", layout}};
  std::vector<int> fwdIns = {q, k, v}, bwdIns = {dout, q, k, v, out, lse};
  fwdIns.insert(fwdIns.end(), extra.begin(), extra.end());
  bwdIns.insert(bwdIns.end(), extra.begin(), extra.end());
  h.run(Opcode::Attention, fwdIns, {out, lse}, attrs);
  h.run(Opcode::AttentionGrad, bwdIns, {dq, dk, dv}, attrs);

  std::vector<double> wantDq(size_t(B * H * T * D)),
      wantDk(size_t(B * KV * T * D)), wantDv(size_t(B * KV * T * D));
  for (int64_t bh = 0; bh < B * H; ++bh) {
    const int64_t kvh = bh / H * KV + bh % H / c.groups;
    const float *qb = h.f(q) + bh * T * D, *kb = h.f(k) + kvh * T * D,
                *vb = h.f(v) + kvh * T * D, *gb = h.f(dout) + bh * T * D;
    for (int64_t i = 0; i < T; ++i) {
      std::vector<double> p(size_t(T), 0.0);
      double mx = -INFINITY;
      for (int64_t j = 0; j < T; ++j)
        if (sees(bh, i, j)) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += double(qb[i * D + d]) * kb[j * D + d];
          p[size_t(j)] = scale * s;
          mx = std::max(mx, p[size_t(j)]);
        }
      double sum = 0;
      for (int64_t j = 0; j < T; ++j)
        if (sees(bh, i, j))
          sum += (p[size_t(j)] = std::exp(p[size_t(j)] - mx));
      for (int64_t j = 0; j < T; ++j)
        p[size_t(j)] = sees(bh, i, j)
                           ? p[size_t(j)] / sum
                           : 0.0;
      if (sum == 0.0)
        ASSERT_EQ(h.f(lse)[bh * T + i], -INFINITY)
            << "lse of head " << bh << " row " << i << ", which sees no key";
      else
        ASSERT_NEAR(h.f(lse)[bh * T + i], mx + std::log(sum), 1e-4)
            << "lse of head " << bh << " row " << i;
      // dP = dout v^T; dS = P (dP - rowsum(P dP)).
      std::vector<double> dp(size_t(T), 0.0);
      double rowDot = 0;
      for (int64_t j = 0; j < T; ++j) {
        for (int64_t d = 0; d < D; ++d)
          dp[size_t(j)] += double(gb[i * D + d]) * vb[j * D + d];
        rowDot += p[size_t(j)] * dp[size_t(j)];
      }
      for (int64_t d = 0; d < D; ++d) {
        double o = 0;
        for (int64_t j = 0; j < T; ++j)
          o += p[size_t(j)] * vb[j * D + d];
        ASSERT_NEAR(h.f(out)[(bh * T + i) * D + d], o, 1e-5)
            << "out of head " << bh << " row " << i;
      }
      for (int64_t j = 0; j < T; ++j) {
        const double ds = p[size_t(j)] * (dp[size_t(j)] - rowDot);
        for (int64_t d = 0; d < D; ++d) {
          wantDq[size_t((bh * T + i) * D + d)] += scale * ds * kb[j * D + d];
          wantDk[size_t((kvh * T + j) * D + d)] += scale * ds * qb[i * D + d];
          wantDv[size_t((kvh * T + j) * D + d)] +=
              p[size_t(j)] * gb[i * D + d];
        }
      }
    }
  }
  for (auto [id, want, name] :
       {std::make_tuple(dq, &wantDq, "dq"), std::make_tuple(dk, &wantDk, "dk"),
        std::make_tuple(dv, &wantDv, "dv")})
    for (size_t e = 0; e < want->size(); ++e)
      ASSERT_NEAR(h.f(id)[e], (*want)[e], 1e-4) << name << "[" << e << "]";
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, SparseAttentionTest,
    ::testing::Values(Case{1, 7, 2, 1, 1, true, false},
                      Case{3, 5, 3, 1, 3, false, false},
                      Case{3, 6, 4, 2, 4, true, false},
                      Case{8, 4, 2, 2, 1, false, false},
                      Case{8, 5, 3, 3, 3, true, false},
                      Case{2, 9, 1, 1, 1, false, false},
                      Case{3, 6, 4, 2, 4, true, true},
                      Case{8, 4, 2, 2, 1, false, true},
                      Case{16, 5, 3, 3, 0, true, true},
                      Case{16, 5, 2, 1, 0, false, true}),
    [](const ::testing::TestParamInfo<Case> &info) {
      const Case &c = info.param;
      return "block" + std::to_string(c.block) + "x" +
             std::to_string(c.blocks) + "_heads" + std::to_string(c.heads) +
             "_groups" + std::to_string(c.groups) + "_layouts" +
             std::to_string(c.layoutHeads) +
             (c.causal ? "_causal" : "_bidirectional") +
             (c.padded ? "_padded" : "");
    });

/// Row r of y = softmax(0.5 x) over rows of T scores keeps only the keys
/// `sees(r, j)` allows: the others exactly 0, a row with none all 0.
template <typename Sees>
void expectMaskedSoftmax(Harness &h, int x, int y, int64_t rows, int64_t T,
                         Sees sees) {
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < T; ++j)
      if (sees(r, j))
        mx = std::max(mx, 0.5 * h.f(x)[r * T + j]);
    for (int64_t j = 0; j < T; ++j)
      if (sees(r, j))
        sum += std::exp(0.5 * h.f(x)[r * T + j] - mx);
    for (int64_t j = 0; j < T; ++j) {
      const float got = h.f(y)[r * T + j];
      if (!sees(r, j))
        ASSERT_EQ(got, 0.0f) << "row " << r << " key " << j;
      else
        ASSERT_NEAR(got, std::exp(0.5 * h.f(x)[r * T + j] - mx) / sum, 1e-6)
            << "row " << r << " key " << j;
    }
  }
}

/// The unfused softmax with a layout (the fused kernels' dense reference
/// in a step) masks exactly the layout's blocks: masked probabilities are
/// exactly 0, the others a softmax over the row's attended keys.
TEST(SparseSoftmax, MasksTheLayoutsBlocks) {
  const int64_t B = 2, H = 3, block = 3, blocks = 4, T = block * blocks;
  for (bool causal : {false, true}) {
    const BlockLayout layout = randomLayout(block, H, blocks, causal, 7);
    Harness h;
    int x = h.buf({B, H, T, T}), y = h.buf({B, H, T, T});
    h.alloc();
    h.set(x, uniform(size_t(B * H * T * T), 8, -5, 5));
    h.run(Opcode::Softmax, {x}, {y},
          {{"scale", 0.5}, {"causal", int64_t(causal)}, {"layout", layout}});
    expectMaskedSoftmax(h, x, y, B * H * T, T, [&](int64_t r, int64_t j) {
      return attends(layout, r / T % H, r % T, j, causal);
    });
  }
}

/// The unfused softmax with a key padding mask (with and without a layout):
/// padding keys get exactly 0, a row left with no key is all 0, the others
/// are a softmax over the row's remaining keys.
TEST(PaddedSoftmax, MasksPaddingKeys) {
  const int64_t B = 2, H = 2, block = 2, blocks = 4, T = block * blocks;
  const std::vector<int32_t> keyMask = paddingMask(T, 5);
  for (bool sparse : {false, true}) {
    const BlockLayout layout =
        sparse ? randomLayout(block, H, blocks, true, 9) : BlockLayout{};
    Harness h;
    int x = h.buf({B, H, T, T}), y = h.buf({B, H, T, T}),
        mask = h.buf({B, T}, DType::I32);
    h.alloc();
    h.set(x, uniform(size_t(B * H * T * T), 8, -5, 5));
    h.seti(mask, keyMask);
    h.run(Opcode::Softmax, {x, mask}, {y},
          {{"scale", 0.5}, {"causal", int64_t(1)}, {"layout", layout}});
    expectMaskedSoftmax(h, x, y, B * H * T, T, [&](int64_t r, int64_t j) {
      return attends(layout, r / T % H, r % T, j, true) &&
             keyMask[size_t(r / (H * T) * T + j)] != 0;
    });
  }
}

/// A key padding mask must be [B, T] of i32.
TEST(PaddedAttention, KeyMaskMustFitTheBatch) {
  Harness h;
  int q = h.buf({2, 2, 6, 4}), out = h.buf({2, 2, 6, 4}),
      lse = h.buf({2, 2, 6}), wide = h.buf({2, 7}, DType::I32),
      floats = h.buf({2, 6});
  h.alloc();
  const std::map<std::string, AttrValue> attrs = {
      {"scale", 1.0}, {"causal", int64_t(1)}, {"rate", 0.0},
      {"stream", int64_t(1)}, {"layout", BlockLayout{}}};
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::Attention, {q, q, q, wide}, {out, lse}, attrs);
            }),
            "Attention: key_mask 'b3' [2,7] must be [2,6]");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::Attention, {q, q, q, floats}, {out, lse}, attrs);
            }),
            "Attention: key_mask 'b4' must be i32, got f32");
}

/// A layout that does not fit the instruction is refused by name.
TEST(SparseAttention, LayoutMustFitTheShape) {
  Harness h;
  int q = h.buf({1, 2, 6, 4}), out = h.buf({1, 2, 6, 4}),
      lse = h.buf({1, 2, 6});
  h.alloc();
  std::map<std::string, AttrValue> attrs = {
      {"scale", 1.0}, {"causal", int64_t(1)}, {"rate", 0.0},
      {"stream", int64_t(1)}, {"layout", randomLayout(2, 1, 4, true, 3)}};
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Attention, {q, q, q}, {out, lse}, attrs); }),
            "Attention: block layout covers 8 tokens, the scores are 6 x 6");
  attrs["layout"] = BlockLayout{2, 1, 3, {0, 1, 2, 4}, {1, 0, 2, 2}};
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Attention, {q, q, q}, {out, lse}, attrs); }),
            "Attention: attribute 'layout': the key blocks of each query "
            "block must ascend within [0, blocks)");
  attrs["layout"] = BlockLayout{2, 1, 3, {0, 1, 3, 5}, {0, 0, 1, 1, 2}};
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Attention, {q, q, q}, {out, lse}, attrs); }),
            "<no error>");
  attrs["layout"] = BlockLayout{2, 1, 3, {0, 1, 3, 5}, {0, 0, 2, 1, 2}};
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Attention, {q, q, q}, {out, lse}, attrs); }),
            "Attention: causal attention needs a block-causal layout (no "
            "block above the diagonal)");
  attrs["layout"] = BlockLayout{2, 3, 3, {0, 1, 3, 5}, {0, 0, 1, 1, 2}};
  EXPECT_EQ(errorOf([&] { h.run(Opcode::Attention, {q, q, q}, {out, lse}, attrs); }),
            "Attention: attribute 'layout': rows must be heads * blocks + 1 "
            "offsets from 0 to the number of cols");
}

/// transposed() and refined() keep the mask.
TEST(BlockLayout, TransposeAndRefineKeepTheMask) {
  const BlockLayout l = randomLayout(4, 2, 5, false, 11);
  const BlockLayout t = l.transposed(), f = l.refined(2);
  EXPECT_EQ(t.transposed(), l);
  EXPECT_EQ(f.block, 2);
  EXPECT_EQ(f.blocks, 10);
  EXPECT_EQ(f.invalidReason(), "");
  for (int64_t hd = 0; hd < 2; ++hd)
    for (int64_t i = 0; i < 20; ++i)
      for (int64_t j = 0; j < 20; ++j) {
        ASSERT_EQ(attends(f, hd, i, j, false), attends(l, hd, i, j, false));
        ASSERT_EQ(attends(t, hd, j, i, false), attends(l, hd, i, j, false));
      }
}

} // namespace
