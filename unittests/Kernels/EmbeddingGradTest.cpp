//===- EmbeddingGradTest.cpp - The CUDA embedding gradient on CPU ---------===//
//
// embeddingGrad and vocabEmbeddingGrad (lib/Kernels/EmbeddingLoss) compiled
// for the host and run by WarpEmulation.h (blocks of 128 threads, one at a
// time; ballots and __syncthreads emulated), against the definition
// written here: dtable[id] is the sum of dy's rows with that id, added in
// token order (the CPU backend's order, so the sums are compared bit for
// bit). The ids repeat one token many times, cross tiles of the block and
// leave rows untouched, whose gradient must be written as zero.
//
//===----------------------------------------------------------------------===//

#include "WarpEmulation.h"

#include "Common/Common.cuh"
#include "EmbeddingLoss/EmbeddingLoss.cuh"
#include "EmbeddingLoss/VocabParallel.cuh"

#include <gtest/gtest.h>

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

} // namespace
