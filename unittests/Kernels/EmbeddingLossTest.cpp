//===- EmbeddingLossTest.cpp - CUDA embedding and loss kernels on CPU -----===//
//
// lib/Kernels/EmbeddingLoss's kernels compiled for the host and run by
// WarpEmulation.h (blocks of 128 threads, one at a time; shuffles, ballots
// and __syncthreads emulated):
// - embeddingGrad and vocabEmbeddingGrad against the definition written
//   here: dtable[id] is the sum of dy's rows with that id, added in token
//   order (the CPU backend's order, so the sums are compared bit for bit).
//   The ids repeat one token many times, cross tiles of the block and leave
//   rows untouched, whose gradient must be written as zero.
// - the cross-entropy rows of a padded vocabulary (V columns, the first
//   CLASSES of them classes) against float64: per-row losses, the scale
//   and the gradient, whose padding columns and ignored rows must be
//   exactly zero, in place or not; warp rows (32 threads) and block rows,
//   scalar and 4-element loads (37 classes: a partial last vector), and
//   bf16 rows read and written 8 elements (16 bytes) at a time.
//
//===----------------------------------------------------------------------===//

#include "WarpEmulation.h"

#include "Common/Common.cuh"
#include "EmbeddingLoss/EmbeddingLoss.cuh"
#include "EmbeddingLoss/VocabParallel.cuh"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace {

constexpr dsc_i64 ROWS = 300, V = 37, C = 5;
constexpr int THREADS = dsc_emu::kThreads;

std::vector<int> tokenIds() {
  std::vector<int> ids;
  for (dsc_i64 r = 0; r < ROWS; ++r)
    ids.push_back(r % 3 == 0 ? 7 : int((r * 11) % 29)); // rows 29..36 unused
  return ids;
}

std::vector<float> upstream() {
  std::vector<float> dy;
  for (dsc_i64 i = 0; i < ROWS * C; ++i) // irregular magnitudes: order shows
    dy.push_back(float(std::sin(double(i) * 0.7) * std::pow(10.0, i % 7 - 3)));
  return dy;
}

/// Rows [first, first + local) of the table's gradient, in token order.
std::vector<float> expected(const std::vector<int> &ids,
                            const std::vector<float> &dy, dsc_i64 first,
                            dsc_i64 local) {
  std::vector<float> dtable(size_t(local * C), 0.0f);
  for (dsc_i64 r = 0; r < ROWS; ++r) {
    const dsc_i64 row = ids[size_t(r)] - first;
    if (row >= 0 && row < local)
      for (dsc_i64 c = 0; c < C; ++c)
        dtable[size_t(row * C + c)] += dy[size_t(r * C + c)];
  }
  return dtable;
}

bool sameBits(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

template <dsc_i64 R> void checkWholeTable() {
  const std::vector<int> ids = tokenIds();
  const std::vector<float> dy = upstream();
  std::vector<float> dtable(V * C, 123.0f); // stale values must be cleared
  dsc_status = 0;
  dsc_emu::launch((V + R - 1) / R, [&] {
    dsc::embeddingGrad<float, float, ROWS, V, C, R, THREADS>(
        ids.data(), dy.data(), dtable.data(), 5u);
  });
  EXPECT_EQ(dsc_status, 0u);
  EXPECT_TRUE(sameBits(dtable, expected(ids, dy, 0, V)))
      << R << " rows per block";
}

TEST(EmbeddingGradKernel, TokenOrderSumsWhateverTheRowsPerBlock) {
  checkWholeTable<1>();
  checkWholeTable<4>();
  checkWholeTable<V>(); // one block reads every tile
}

TEST(EmbeddingGradKernel, VocabularyParallelRankHoldsItsRowsOnly) {
  const std::vector<int> ids = tokenIds();
  const std::vector<float> dy = upstream();
  constexpr dsc_i64 LOCAL = 10, R = 3;
  for (int rank = 0; rank < 4; ++rank) { // rank 3 holds padded rows 37..39
    std::vector<float> dtable(LOCAL * C, -1.0f);
    dsc_status = 0;
    dsc_emu::launch((LOCAL + R - 1) / R, [&] {
      dsc::vocabEmbeddingGrad<float, float, ROWS, LOCAL, V, C, R, THREADS>(
          ids.data(), dy.data(), dtable.data(), rank, 5u);
    });
    EXPECT_EQ(dsc_status, 0u);
    EXPECT_TRUE(sameBits(dtable, expected(ids, dy, rank * LOCAL, LOCAL)))
        << "rank " << rank;
  }
}

TEST(EmbeddingGradKernel, OutOfRangeIdSetsTheStatusAndIsSkipped) {
  std::vector<int> ids = tokenIds();
  ids[200] = int(V); // one past the table
  const std::vector<float> dy = upstream();
  std::vector<float> dtable(V * C, 0.0f);
  dsc_status = 0;
  dsc_emu::launch(V, [&] {
    dsc::embeddingGrad<float, float, ROWS, V, C, 1, THREADS>(
        ids.data(), dy.data(), dtable.data(), 9u);
  });
  EXPECT_EQ(dsc_status, 9u);
  std::vector<int> kept = ids;
  kept[200] = -1; // the definition skips it
  EXPECT_TRUE(sameBits(dtable, expected(kept, dy, 0, V)));
}

// Cross entropy over a padded vocabulary: 7 rows of 40 logits, 37 classes.
constexpr dsc_i64 CE_ROWS = 7, CE_V = 40, CE_CLASSES = 37, CE_IGNORE = -100;

struct LossCase {
  std::vector<float> logits;
  std::vector<int> labels;
};

LossCase lossCase() {
  LossCase c;
  for (dsc_i64 r = 0; r < CE_ROWS; ++r)
    for (dsc_i64 j = 0; j < CE_V; ++j)
      // The padding columns are large: counted, they would dominate.
      c.logits.push_back(j >= CE_CLASSES
                             ? 40.0f
                             : float(std::sin(double(r * CE_V + j) * 1.3) * 3.0));
  c.labels = {3, 36, int(CE_IGNORE), 0, 17, 36, 5};
  return c;
}

/// Row r's maximum and sum of exponentials over the classes, float64.
void rowStats(const LossCase &c, dsc_i64 r, double &mx, double &sum) {
  const float *z = c.logits.data() + r * CE_V;
  mx = -1e300;
  sum = 0.0;
  for (dsc_i64 j = 0; j < CE_CLASSES; ++j)
    mx = std::max(mx, double(z[j]));
  for (dsc_i64 j = 0; j < CE_CLASSES; ++j)
    sum += std::exp(double(z[j]) - mx);
}

/// The row's loss, float64.
double rowLoss(const LossCase &c, dsc_i64 r) {
  double mx, sum;
  rowStats(c, r, mx, sum);
  return mx + std::log(sum) -
         double(c.logits[size_t(r * CE_V + c.labels[size_t(r)])]);
}

/// The fused kernel's row losses and gradient `got(i)` (element i of the
/// [rows, V] dlogits) against float64 from `c`'s logits at scale k: each
/// gradient element within relTol of its value plus 1e-7, the padding
/// columns and ignored rows exactly 0.
template <typename Got>
void expectGradRows(const LossCase &c, const std::vector<double> &rows,
                    float k, Got got, double relTol) {
  for (dsc_i64 r = 0; r < CE_ROWS; ++r) {
    const bool ignored = c.labels[size_t(r)] == CE_IGNORE;
    EXPECT_NEAR(rows[size_t(r)], ignored ? 0.0 : rowLoss(c, r), 1e-5)
        << "row " << r;
    double mx, sum;
    rowStats(c, r, mx, sum);
    for (dsc_i64 j = 0; j < CE_V; ++j) {
      const float g = got(r * CE_V + j);
      if (ignored || j >= CE_CLASSES) {
        EXPECT_EQ(g, 0.0f) << "row " << r << ", column " << j;
        continue;
      }
      double want =
          double(k) * std::exp(double(c.logits[size_t(r * CE_V + j)]) - mx) /
          sum;
      if (j == c.labels[size_t(r)])
        want -= double(k);
      EXPECT_NEAR(g, want, relTol * std::fabs(want) + 1e-7)
          << "row " << r << ", column " << j;
    }
  }
}

template <int THREADS> int64_t lossGrid() {
  return THREADS == 32 ? (CE_ROWS + 3) / 4 : CE_ROWS;
}

template <int THREADS, int VEC> void checkLossRows() {
  const LossCase c = lossCase();
  std::vector<double> rows(CE_ROWS, -1.0);
  dsc_status = 0;
  dsc_emu::launch(lossGrid<THREADS>(), [&] {
    dsc::crossEntropyRows<float, CE_ROWS, CE_V, CE_CLASSES, CE_IGNORE, THREADS,
                          VEC>(c.logits.data(), c.labels.data(), rows.data(),
                               3u);
  });
  EXPECT_EQ(dsc_status, 0u);
  for (dsc_i64 r = 0; r < CE_ROWS; ++r) {
    const double want = c.labels[size_t(r)] == CE_IGNORE ? 0.0 : rowLoss(c, r);
    EXPECT_NEAR(rows[size_t(r)], want, 1e-5 * std::max(1.0, want))
        << "row " << r << ", " << THREADS << " threads per row";
  }
}

TEST(CrossEntropyKernel, RowLossesTakeTheClassesOnly) {
  checkLossRows<32, 1>();
  checkLossRows<32, 4>();
  checkLossRows<THREADS, 4>();
}

/// dlogits (and the fused row losses) from k = dloss / count, written over
/// the logits when `inPlace`.
template <int THREADS, int VEC> void checkGradRows(bool inPlace) {
  LossCase c = lossCase();
  const LossCase original = c;
  float k = -1.0f;
  const float dloss = 0.5f;
  std::vector<double> rows(CE_ROWS, -1.0);
  std::vector<float> separate(CE_ROWS * CE_V, 99.0f);
  float *dlogits = inPlace ? c.logits.data() : separate.data();
  dsc_status = 0;
  dsc_emu::launch(1, [&] {
    dsc::crossEntropyGradScale<float, CE_ROWS, CE_IGNORE, THREADS>(
        &dloss, c.labels.data(), &k);
  });
  EXPECT_FLOAT_EQ(k, 0.5f / 6.0f); // one row of seven is ignored
  dsc_emu::launch(lossGrid<THREADS>(), [&] {
    dsc::crossEntropyWithGradRows<float, float, CE_ROWS, CE_V, CE_CLASSES,
                                  CE_IGNORE, THREADS, VEC>(
        &k, c.logits.data(), c.labels.data(), rows.data(), dlogits, 3u);
  });
  EXPECT_EQ(dsc_status, 0u);
  expectGradRows(original, rows, k, [&](dsc_i64 i) { return dlogits[i]; }, 0.0);
}

TEST(CrossEntropyKernel, GradientIsZeroOnPaddingAndIgnoredRows) {
  checkGradRows<32, 1>(false);
  checkGradRows<32, 4>(false);
  checkGradRows<32, 4>(true);
  checkGradRows<THREADS, 4>(false);
  checkGradRows<THREADS, 1>(true);
}

TEST(CrossEntropyKernel, LabelInThePaddingSetsTheStatus) {
  LossCase c = lossCase();
  c.labels[4] = int(CE_CLASSES); // a padding column, not a class
  std::vector<double> rows(CE_ROWS, -1.0);
  dsc_status = 0;
  dsc_emu::launch(lossGrid<32>(), [&] {
    dsc::crossEntropyRows<float, CE_ROWS, CE_V, CE_CLASSES, CE_IGNORE, 32, 4>(
        c.logits.data(), c.labels.data(), rows.data(), 8u);
  });
  EXPECT_EQ(dsc_status, 8u);
  EXPECT_EQ(rows[4], 0.0);
}

// bf16 logits and gradient, 8 elements (16 bytes) per load: the kernel
// reads the rounded logits exactly, so the row losses match float64 over
// them; each gradient element is within a bf16 rounding of its value.
template <int THREADS> void checkHalfRows() {
  const LossCase c = lossCase();
  std::vector<__nv_bfloat16> logits, dlogits(CE_ROWS * CE_V);
  LossCase rounded = c;
  for (size_t i = 0; i < c.logits.size(); ++i) {
    logits.push_back(__float2bfloat16_rn(c.logits[i]));
    rounded.logits[i] = __bfloat162float(logits.back());
  }
  const float k = 0.25f;
  std::vector<double> rows(CE_ROWS, -1.0);
  dsc_status = 0;
  dsc_emu::launch(lossGrid<THREADS>(), [&] {
    dsc::crossEntropyWithGradRows<__nv_bfloat16, __nv_bfloat16, CE_ROWS, CE_V,
                                  CE_CLASSES, CE_IGNORE, THREADS, 8>(
        &k, logits.data(), c.labels.data(), rows.data(), dlogits.data(), 3u);
  });
  EXPECT_EQ(dsc_status, 0u);
  expectGradRows(
      rounded, rows, k,
      [&](dsc_i64 i) { return __bfloat162float(dlogits[size_t(i)]); },
      1.0 / 128.0);
}

TEST(CrossEntropyKernel, Bf16RowsLoadSixteenBytes) {
  checkHalfRows<32>();
  checkHalfRows<THREADS>();
}

} // namespace
