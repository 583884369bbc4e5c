//===- SoftmaxLayoutTest.cpp - The CUDA block-sparse softmax on CPU -------===//
//
// softmaxRows (lib/Kernels/Attention/Attention.cuh) with a block layout,
// compiled for the host and run by WarpEmulation.h, against the
// definition written here in float64: a row's probabilities over the keys
// of its query block's layout blocks that the causal mask leaves, every
// other key exactly 0 (cpu::softmaxRowSparse). Two heads with different
// layouts, a query block with no block at all (its row is all zeros), a
// layout row whose blocks skip one, warp rows and block rows.
//
//===----------------------------------------------------------------------===//

#include "WarpEmulation.h"

#include "Common/Common.cuh"

#include "Attention/Attention.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

// [B=1, H=2, T=16, T=16] scores, blocks of 4 (4 per side), one layout per
// head.
constexpr dsc_i64 H = 2, T = 16, BLOCK = 4, BLOCKS = T / BLOCK,
                  ROWS = H * T;
constexpr float SCALE = 0.5f;

// Compressed rows of both heads' layouts (head h's rows at h * BLOCKS):
// head 0: block-diagonal plus the first column, but query block 2 has
// none; head 1: every block at or below the diagonal but block (3, 1).
const std::vector<int> kRows = {0, 1, 3, 3, 5, 6, 8, 11, 14};
const std::vector<int> kCols = {0, 0, 1, 0, 3, 0, 0, 1, 0, 1, 2, 0, 2, 3};

bool inLayout(dsc_i64 head, dsc_i64 qb, dsc_i64 kb) {
  const dsc_i64 row = head * BLOCKS + qb;
  for (int k = kRows[size_t(row)]; k < kRows[size_t(row + 1)]; ++k)
    if (kCols[size_t(k)] == kb)
      return true;
  return false;
}

std::vector<float> scores() {
  std::vector<float> x;
  for (dsc_i64 i = 0; i < ROWS * T; ++i)
    x.push_back(float(std::cos(double(i) * 0.37) * 4.0));
  return x;
}

template <int THREADS, int VEC> void checkRows() {
  const std::vector<float> x = scores();
  std::vector<float> probs(ROWS * T, 7.0f);
  const int64_t grid = THREADS == 32 ? (ROWS + 3) / 4 : ROWS;
  dsc_emu::launch(grid, [&] {
    dsc::softmaxRows<float, float, float, true, false, ROWS, T, T, THREADS, 1,
                     VEC, 0, BLOCK, BLOCKS, H>(
        x.data(), nullptr, probs.data(), (float *)nullptr, SCALE, 0.0f, 1.0f,
        dsc::Rng{0u, 0ull, 0ull}, kRows.data(), kCols.data());
  });
  for (dsc_i64 r = 0; r < ROWS; ++r) {
    const dsc_i64 head = r / T, q = r % T;
    auto live = [&](dsc_i64 j) {
      return j <= q && inLayout(head, q / BLOCK, j / BLOCK);
    };
    double mx = -1e300, sum = 0.0;
    for (dsc_i64 j = 0; j < T; ++j)
      if (live(j))
        mx = std::max(mx, double(SCALE) * x[size_t(r * T + j)]);
    for (dsc_i64 j = 0; j < T; ++j)
      if (live(j))
        sum += std::exp(double(SCALE) * x[size_t(r * T + j)] - mx);
    for (dsc_i64 j = 0; j < T; ++j) {
      const float got = probs[size_t(r * T + j)];
      if (!live(j)) {
        EXPECT_EQ(got, 0.0f) << "row " << r << ", key " << j;
        continue;
      }
      const double want =
          std::exp(double(SCALE) * x[size_t(r * T + j)] - mx) / sum;
      EXPECT_NEAR(got, want, 1e-6) << "row " << r << ", key " << j;
    }
  }
}

TEST(SoftmaxLayout, KeysOutsideTheLayoutGetNothing) {
  checkRows<32, 1>();
  checkRows<32, 4>();
}

} // namespace
