//===- AttentionRegistersTest.cpp - The mma.sync attention kernels on CPU -===//
//
// attentionForwardRegisters, attentionGradKVRegisters and
// attentionGradQRegisters (lib/Kernels/Attention/Attention.cuh), compiled
// for the host and run block by block on threads by WarpEmulation.h, whose
// mma.sync follows the PTX ISA's fragment layouts. They are compared with a
// float64 attention written here from the op's definition (scaled scores,
// causal mask, softmax, dropout with keep flags of element
// (bh T + i) T + j of the Philox stream, GQA): a fragment in the wrong
// register, a wrong tile walk or a dropout flag of the wrong element shows
// as an O(1) error; what remains is the rounding of P and dS to 16 bits.
// This checks the kernels' index arithmetic without a GPU; only a GPU run
// (gpu-check's check-cuda-registers) checks them on the hardware.
//
//===----------------------------------------------------------------------===//

#include "WarpEmulation.h"

#include "Common/Common.cuh"

#include "Attention/Attention.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

struct Tensors {
  std::vector<double> q, k, v, dout; ///< the 16-bit inputs' exact values
};

/// Inputs rounded to TC, and their values.
template <typename TC>
std::vector<TC> roundedInputs(size_t n, std::mt19937 &gen,
                              std::vector<double> &exact) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<TC> out(n);
  exact.resize(n);
  for (size_t i = 0; i < n; ++i) {
    float x = normal(gen);
    if constexpr (std::is_same<TC, __half>::value) {
      out[i] = __float2half_rn(x);
      exact[i] = __half2float(out[i]);
    } else {
      out[i] = __float2bfloat16_rn(x);
      exact[i] = __bfloat162float(out[i]);
    }
  }
  return out;
}

/// The largest |got - want| over the largest |want|.
double relativeError(const std::vector<float> &got,
                     const std::vector<double> &want) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(want[i]));
  }
  return scale > 0.0 ? err / scale : err;
}

struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
};

/// Optional key padding and block layout, as the kernels take them: a key
/// mask [BH / kmh, T] (0: padded), and a layout of 64-token tiles shared by
/// all heads, compressed by query tile (rows, cols) and by key tile
/// (keyRows, keyCols).
struct Masks {
  int64_t kmh = 0;
  std::vector<int> keyMask;
  std::vector<std::vector<bool>> tiles; ///< [query tile][key tile]
  std::vector<int> rows, cols, keyRows, keyCols;

  void setLayout(std::vector<std::vector<bool>> layout) {
    tiles = std::move(layout);
    const size_t n = tiles.size();
    rows = {0};
    keyRows = {0};
    for (size_t a = 0; a < n; ++a) {
      for (size_t b = 0; b < n; ++b) {
        if (tiles[a][b])
          cols.push_back(int(b));
        if (tiles[b][a])
          keyCols.push_back(int(b));
      }
      rows.push_back(int(cols.size()));
      keyRows.push_back(int(keyCols.size()));
    }
  }
  bool allows(int64_t bh, int64_t T, int64_t i, int64_t j) const {
    if (!keyMask.empty() && keyMask[size_t(bh / kmh * T + j)] == 0)
      return false;
    return tiles.empty() || tiles[size_t(i / 64)][size_t(j / 64)];
  }
  const int *mask() const { return keyMask.empty() ? nullptr : keyMask.data(); }
  const int *ptr(const std::vector<int> &v) const {
    return tiles.empty() ? nullptr : v.data();
  }
};

/// float64 attention and its gradients from the definition.
Reference reference(const Tensors &x, int64_t BH, int64_t T, int64_t D,
                    bool causal, int64_t groups, float scale, float rate,
                    const dsc::Rng &rng, const Masks &masks) {
  const double keepScale = rate > 0.0f ? 1.0 / (1.0 - double(rate)) : 1.0;
  Reference r;
  r.out.assign(size_t(BH * T * D), 0.0);
  r.lse.assign(size_t(BH * T), -std::numeric_limits<double>::infinity());
  r.dq.assign(size_t(BH * T * D), 0.0);
  r.dk.assign(size_t(BH / groups * T * D), 0.0);
  r.dv.assign(size_t(BH / groups * T * D), 0.0);
  std::vector<double> s(static_cast<size_t>(T)), p(static_cast<size_t>(T)),
      z(static_cast<size_t>(T));
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t base = bh * T * D, kv = bh / groups * T * D;
    for (int64_t i = 0; i < T; ++i) {
      std::vector<int64_t> keys;
      for (int64_t j = 0; j < T; ++j)
        if ((!causal || j <= i) && masks.allows(bh, T, i, j))
          keys.push_back(j);
      double m = -std::numeric_limits<double>::infinity(), l = 0.0;
      for (int64_t j : keys) {
        double dot = 0.0;
        for (int64_t d = 0; d < D; ++d)
          dot += x.q[size_t(base + i * D + d)] * x.k[size_t(kv + j * D + d)];
        s[size_t(j)] = double(scale) * dot;
        m = std::max(m, s[size_t(j)]);
      }
      for (int64_t j : keys) {
        p[size_t(j)] = std::exp(s[size_t(j)] - m);
        l += p[size_t(j)];
        bool keep[1];
        rng.keep<1>((bh * T + i) * T + j, rate, keep);
        z[size_t(j)] = keep[0] ? keepScale : 0.0;
      }
      r.lse[size_t(bh * T + i)] = m + std::log(l);
      double rowDot = 0.0;
      for (int64_t d = 0; d < D; ++d) {
        double o = 0.0;
        for (int64_t j : keys)
          o += z[size_t(j)] * p[size_t(j)] / l * x.v[size_t(kv + j * D + d)];
        r.out[size_t(base + i * D + d)] = o;
        rowDot += x.dout[size_t(base + i * D + d)] * o;
      }
      for (int64_t j : keys) {
        const double pj = p[size_t(j)] / l;
        double dp = 0.0;
        for (int64_t d = 0; d < D; ++d)
          dp += x.dout[size_t(base + i * D + d)] * x.v[size_t(kv + j * D + d)];
        const double ds = pj * (z[size_t(j)] * dp - rowDot);
        for (int64_t d = 0; d < D; ++d) {
          r.dv[size_t(kv + j * D + d)] +=
              z[size_t(j)] * pj * x.dout[size_t(base + i * D + d)];
          r.dk[size_t(kv + j * D + d)] +=
              double(scale) * ds * x.q[size_t(base + i * D + d)];
          r.dq[size_t(base + i * D + d)] +=
              double(scale) * ds * x.k[size_t(kv + j * D + d)];
        }
      }
    }
  }
  return r;
}

/// Runs the three kernels on BH query heads of [T, D] and compares them
/// with the float64 reference.
template <typename TC, dsc_i64 BH, dsc_i64 T, int D, bool CAUSAL, int GROUPS,
          int KMH = 0, int LH = 0>
void checkRegisterKernels(float rate, const Masks &masks = {}) {
  constexpr dsc_i64 TILES = (T + 63) / 64;
  const float scale = 1.0f / std::sqrt(float(D));
  const float keepScale = rate > 0.0f ? 1.0f / (1.0f - rate) : 1.0f;
  const dsc::Rng rng{7u, 1234ull, 64ull};
  std::mt19937 gen(42);
  Tensors x;
  const auto q = roundedInputs<TC>(size_t(BH * T * D), gen, x.q);
  const auto k = roundedInputs<TC>(size_t(BH / GROUPS * T * D), gen, x.k);
  const auto v = roundedInputs<TC>(size_t(BH / GROUPS * T * D), gen, x.v);
  const auto g = roundedInputs<TC>(size_t(BH * T * D), gen, x.dout);
  const Reference want =
      reference(x, BH, T, D, CAUSAL, GROUPS, scale, rate, rng, masks);

  std::vector<float> out(size_t(BH * T * D)), lse(size_t(BH * T));
  dsc_emu::launch(BH * TILES, [&] {
    dsc::attentionForwardRegisters<TC, TC, TC, float, TC, BH, T, D, CAUSAL,
                                   GROUPS, LH, KMH>(
        q.data(), k.data(), v.data(), masks.mask(), out.data(), lse.data(),
        masks.ptr(masks.rows), masks.ptr(masks.cols), scale, rate, keepScale,
        rng);
  });
  EXPECT_LT(relativeError(out, want.out), 1e-2) << "out";
  EXPECT_LT(relativeError(lse, want.lse), 1e-3) << "lse";

  // D_i = rowsum(dout * out), as attentionRowDot computes it.
  std::vector<float> rowDot(size_t(BH * T));
  for (int64_t r = 0; r < BH * T; ++r) {
    double dot = 0.0;
    for (int64_t d = 0; d < D; ++d)
      dot += x.dout[size_t(r * D + d)] * out[size_t(r * D + d)];
    rowDot[size_t(r)] = float(dot);
  }
  std::vector<float> dq(size_t(BH * T * D)), dk(size_t(BH / GROUPS * T * D)),
      dv(size_t(BH / GROUPS * T * D));
  dsc_emu::launch(BH / GROUPS * TILES, [&] {
    dsc::attentionGradKVRegisters<TC, TC, TC, TC, float, TC, BH, T, D, CAUSAL,
                                  GROUPS, LH, KMH>(
        g.data(), q.data(), k.data(), v.data(), lse.data(), rowDot.data(),
        masks.mask(), dk.data(), dv.data(), masks.ptr(masks.keyRows),
        masks.ptr(masks.keyCols), scale, rate, keepScale, rng);
  });
  dsc_emu::launch(BH * TILES, [&] {
    dsc::attentionGradQRegisters<TC, TC, TC, TC, float, TC, BH, T, D, CAUSAL,
                                 GROUPS, LH, KMH>(
        g.data(), q.data(), k.data(), v.data(), lse.data(), rowDot.data(),
        masks.mask(), dq.data(), masks.ptr(masks.rows), masks.ptr(masks.cols),
        scale, rate, keepScale, rng);
  });
  EXPECT_LT(relativeError(dv, want.dv), 2e-2) << "dv";
  EXPECT_LT(relativeError(dk, want.dk), 2e-2) << "dk";
  EXPECT_LT(relativeError(dq, want.dq), 2e-2) << "dq";
}

// GPT-2's head dim, causal, dropout: two query and key tiles.
TEST(AttentionRegisters, CausalWithDropout) {
  checkRegisterKernels<__nv_bfloat16, 2, 128, 64, true, 1>(0.1f);
}

// Grouped-query attention (two query heads per key/value head), a sequence
// that ends inside its second tile, no dropout.
TEST(AttentionRegisters, GroupedBidirectionalPartialTile) {
  checkRegisterKernels<__nv_bfloat16, 4, 100, 32, false, 2>(0.0f);
}

// T not a multiple of 4: the dropout flags come one Philox element at a
// time; fp16.
TEST(AttentionRegisters, HalfOddLengthWithDropout) {
  checkRegisterKernels<__half, 2, 98, 16, true, 1>(0.2f);
}

// Key padding (two heads per mask row; a padded key inside each tile) and a
// block-sparse layout of 64-token tiles that skips query tile 1's key
// tile 0, bidirectional with dropout: both walk the layout's compressed
// rows (forward, dQ) and columns (dK, dV).
TEST(AttentionRegisters, KeyPaddingAndBlockLayout) {
  constexpr int64_t B = 2, H = 2, T = 192;
  Masks masks;
  masks.kmh = H;
  masks.keyMask.assign(size_t(B * T), 1);
  for (int64_t j : {5, 70, 150, 151})
    masks.keyMask[size_t(j)] = 0;
  for (int64_t j = 180; j < T; ++j)
    masks.keyMask[size_t(T + j)] = 0;
  masks.setLayout(
      {{true, true, false}, {false, true, true}, {true, false, true}});
  checkRegisterKernels<__nv_bfloat16, B * H, T, 32, false, 1, H, 1>(0.1f,
                                                                    masks);
}

// Causal with a block-causal layout that drops the diagonal's neighbour:
// query tile 2 sees key tiles 0 and 2 only.
TEST(AttentionRegisters, CausalBlockLayout) {
  Masks masks;
  masks.setLayout(
      {{true, false, false}, {true, true, false}, {true, false, true}});
  checkRegisterKernels<__nv_bfloat16, 2, 192, 64, true, 1, 0, 1>(0.0f, masks);
}

} // namespace
