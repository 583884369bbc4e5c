//===- MoeRouteTest.cpp - The CUDA token-dropping route on CPU -----------===//
//
// moeRoute, moeZeroRows, moeDispatch, moeCombine and moeSlotDot
// (lib/Kernels/Moe/Moe.cuh) compiled for the host and run by
// WarpEmulation.h (one block of 128 threads; __syncthreads a barrier),
// against the route written here from dsc.moe_route's definition: each
// expert keeps its first `capacity` choices by choice rank, then token;
// kept choices are numbered expert by expert in token order, dropped ones
// are -1; a dropped choice moves nothing, its weight's gradient is 0, and
// the rows no kept choice takes are zero. Only a GPU run checks them on
// the hardware.
//
//===----------------------------------------------------------------------===//

#include "WarpEmulation.h"

#include "Common/Common.cuh"

// Optimizers.cuh's table of tensors, which Moe.cuh's balance loss takes
// (the rest of Optimizers.cuh needs device intrinsics the emulation lacks).
namespace dsc {
template <int K> struct Ptrs {
  float *p[K];
};
} // namespace dsc

#include "Moe/Moe.cuh"

#include <gtest/gtest.h>

#include <vector>

namespace {

constexpr dsc_i64 N = 12, K = 2, E = 3, C = 2;

/// The expected slots and counts of `experts` (N x K) under `capacity`
/// (0: none).
void expectedRoute(const std::vector<int> &experts, int capacity,
                   std::vector<int> &slots, std::vector<int> &counts) {
  std::vector<bool> kept(experts.size(), false);
  counts.assign(E, 0);
  for (dsc_i64 k = 0; k < K; ++k)
    for (dsc_i64 n = 0; n < N; ++n) {
      const int x = experts[size_t(n * K + k)];
      if (capacity == 0 || counts[size_t(x)] < capacity) {
        ++counts[size_t(x)];
        kept[size_t(n * K + k)] = true;
      }
    }
  slots.assign(experts.size(), -1);
  int next = 0;
  for (int x = 0; x < E; ++x)
    for (size_t i = 0; i < experts.size(); ++i)
      if (kept[i] && experts[i] == x)
        slots[i] = next++;
}

/// Token n's choices: expert 0 is everybody's first choice, so capacity 4
/// drops most of them.
std::vector<int> choices() {
  std::vector<int> experts;
  for (dsc_i64 n = 0; n < N; ++n) {
    experts.push_back(n % 5 == 4 ? 2 : 0);
    experts.push_back(n % 5 == 4 ? 0 : int(1 + n % 2));
  }
  return experts;
}

template <dsc_i64 CAP> void checkRoute() {
  const std::vector<int> experts = choices();
  std::vector<int> slots(N * K, 99), counts(E, 99), wantSlots, wantCounts;
  dsc_emu::launch(1, [&] {
    dsc::moeRoute<N * K, E, K, CAP>(experts.data(), slots.data(),
                                    counts.data(), 1);
  });
  expectedRoute(experts, int(CAP), wantSlots, wantCounts);
  EXPECT_EQ(slots, wantSlots) << "capacity " << CAP;
  EXPECT_EQ(counts, wantCounts) << "capacity " << CAP;
  EXPECT_EQ(dsc_status, 0u);
}

TEST(MoeKernels, RouteKeepsEachExpertsFirstChoices) {
  checkRoute<0>();
  checkRoute<4>();
  checkRoute<1>();
}

TEST(MoeKernels, DroppedChoicesMoveNothing) {
  const std::vector<int> experts = choices();
  std::vector<int> slots, counts;
  expectedRoute(experts, 4, slots, counts);
  int kept = 0;
  for (int c : counts)
    kept += c;
  ASSERT_LT(kept, N * K) << "nothing was dropped";
  std::vector<float> x(N * C), w(N * K);
  for (dsc_i64 i = 0; i < N * C; ++i)
    x[size_t(i)] = float(i + 1);
  for (dsc_i64 i = 0; i < N * K; ++i)
    w[size_t(i)] = 0.25f * float(i % 3 + 1);
  // Dispatch after zeroing: kept rows hold their token, the rest zero.
  std::vector<float> rows(N * K * C, -7.0f);
  dsc_emu::launch(1, [&] {
    dsc::moeZeroRows<float, N * K, C>(rows.data());
  });
  dsc_emu::launch(1, [&] {
    dsc::moeDispatch<float, float, float, N, K, C, false>(
        x.data(), slots.data(), nullptr, rows.data(), 1);
  });
  std::vector<float> want(N * K * C, 0.0f);
  for (dsc_i64 a = 0; a < N * K; ++a)
    if (slots[size_t(a)] >= 0)
      for (dsc_i64 c = 0; c < C; ++c)
        want[size_t(slots[size_t(a)] * C + c)] = x[size_t((a / K) * C + c)];
  EXPECT_EQ(rows, want);
  // Combine: a dropped choice contributes nothing.
  std::vector<float> y(N * C, -7.0f), wantY(N * C, 0.0f);
  dsc_emu::launch(1, [&] {
    dsc::moeCombine<float, float, float, N, K, C, true>(
        rows.data(), slots.data(), w.data(), y.data(), 1);
  });
  for (dsc_i64 n = 0; n < N; ++n)
    for (dsc_i64 k = 0; k < K; ++k)
      if (slots[size_t(n * K + k)] >= 0)
        for (dsc_i64 c = 0; c < C; ++c)
          wantY[size_t(n * C + c)] += w[size_t(n * K + k)] * x[size_t(n * C + c)];
  EXPECT_EQ(y, wantY);
  // The weights' gradient: 0 for a dropped choice.
  std::vector<float> dw(N * K, -7.0f);
  dsc_emu::launch(1, [&] {
    dsc::moeSlotDot<float, float, float, N, K, C>(x.data(), rows.data(),
                                                  slots.data(), dw.data(), 1);
  });
  for (dsc_i64 a = 0; a < N * K; ++a) {
    float s = 0.0f;
    if (slots[size_t(a)] >= 0)
      for (dsc_i64 c = 0; c < C; ++c)
        s += x[size_t((a / K) * C + c)] * x[size_t((a / K) * C + c)];
    EXPECT_EQ(dw[size_t(a)], s) << "choice " << a;
  }
}

} // namespace
