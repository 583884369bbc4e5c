// Dropout and MlmMask: Philox conventions, determinism, statistics.
#include "TestUtil.h"

#include "dsc/Support/Philox.h"

#include <cmath>
#include <gtest/gtest.h>
#include <omp.h>

using namespace dsc;
using namespace dsc::rt;
using namespace dsc::rt::test;

void checkDropoutConvention(int64_t n);

TEST(Dropout, FollowsPhiloxConventionExactly) {
  // Sizes straddling the kernel's 1024-element tasks and its 8-block
  // (32-element) batched Philox, with ragged tails.
  for (int64_t n : {int64_t(1003), int64_t(1024 + 29), int64_t(5000)})
    checkDropoutConvention(n);
}

void checkDropoutConvention(int64_t n) {
  SCOPED_TRACE(n);
  const double rate = 0.3;
  Harness h;
  h.rng.seed = 0x123456789abcull;
  h.rng.offset = (5ull << 32) | 17;
  int x = h.buf({n}), y = h.buf({n});
  h.alloc();
  auto xv = uniform(size_t(n), 60);
  h.set(x, xv);
  h.run(Opcode::Dropout, {x}, {y}, {{"rate", rate}, {"stream", int64_t(9)}});
  auto key = philoxKey(h.rng.seed);
  const float scale = float(1.0 / (1.0 - rate));
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10({uint32_t(i / 4), 9u, 17u, 5u}, key);
    bool keep = philoxUniform(b[size_t(i % 4)]) >= float(rate);
    ASSERT_EQ(h.f(y)[i], keep ? xv[size_t(i)] * scale : 0.0f) << i;
  }
}

TEST(Dropout, DeterministicAndKeepRate) {
  const int64_t n = 200000;
  Harness h;
  int x = h.buf({n}), y1 = h.buf({n}), y2 = h.buf({n}), y3 = h.buf({n});
  h.alloc();
  h.set(x, std::vector<float>(size_t(n), 1.0f));
  std::map<std::string, AttrValue> at = {{"rate", 0.1}, {"stream", int64_t(3)}};
  h.run(Opcode::Dropout, {x}, {y1}, at);
  int saved = omp_get_max_threads();
  omp_set_num_threads(1); // thread count must not matter
  h.run(Opcode::Dropout, {x}, {y2}, at);
  omp_set_num_threads(saved);
  EXPECT_EQ(h.get(y1), h.get(y2));
  h.rng.offset += 1; // next micro-batch draws a fresh mask
  h.run(Opcode::Dropout, {x}, {y3}, at);
  EXPECT_NE(h.get(y1), h.get(y3));
  int64_t kept = 0;
  for (int64_t i = 0; i < n; ++i) {
    float v = h.f(y1)[i];
    ASSERT_TRUE(v == 0.0f || std::fabs(v - 1.0f / 0.9f) < 1e-6f);
    kept += v != 0.0f;
  }
  double rate = double(kept) / double(n);
  EXPECT_NEAR(rate, 0.9, 0.004); // ~6 sigma
}

TEST(Dropout, ZeroRateCopiesAndInPlace) {
  Harness h;
  int x = h.buf({10}), y = h.buf({10});
  h.alloc();
  auto xv = uniform(10, 61);
  h.set(x, xv);
  h.run(Opcode::Dropout, {x}, {y}, {{"rate", 0.0}, {"stream", int64_t(0)}});
  EXPECT_EQ(h.get(y), xv);
  h.run(Opcode::Dropout, {x}, {x}, {{"rate", 0.5}, {"stream", int64_t(0)}});
  h.run(Opcode::Dropout, {y}, {y}, {{"rate", 0.5}, {"stream", int64_t(0)}});
  EXPECT_EQ(h.get(x), h.get(y));
  EXPECT_THROW(h.run(Opcode::Dropout, {x}, {y}, {{"rate", 1.0}, {"stream", int64_t(0)}}),
               Error);
}

/// One position in ten is the padding token, which is never selected.
TEST(MlmMask, FollowsPhiloxConventionAndStatistics) {
  const int64_t n = 100000, vocab = 30522, maskId = 103, padId = 5;
  const double p = 0.15;
  Harness h;
  h.rng.seed = 77;
  h.rng.offset = 3;
  int ids = h.buf({n}, DType::I32), in = h.buf({n}, DType::I32),
      lab = h.buf({n}, DType::I32);
  h.alloc();
  for (int64_t i = 0; i < n; ++i)
    h.i(ids)[i] = i % 10 == 0 ? int32_t(padId) : int32_t(1000 + i % 20000);
  h.run(Opcode::MlmMask, {ids}, {in, lab},
        {{"mask_prob", p},
         {"mask_token_id", maskId},
         {"vocab_size", vocab},
         {"stream", int64_t(4)},
         {"pad_token_id", padId}});
  auto key = philoxKey(77);
  int64_t sel = 0, masked = 0, random = 0, same = 0;
  for (int64_t i = 0; i < n; ++i) {
    PhiloxBlock b = philox4x32_10({uint32_t(i), 4u, 3u, 0u}, key);
    const int32_t id = h.i(ids)[i], got = h.i(in)[i], l = h.i(lab)[i];
    // Padding is never selected; the others' draws are unchanged by it.
    if (philoxUniform(b[0]) < float(p) && id != padId) {
      ++sel;
      ASSERT_EQ(l, id);
      float u = philoxUniform(b[1]);
      if (u < 0.8f) {
        ASSERT_EQ(got, maskId);
        ++masked;
      } else if (u < 0.9f) {
        ASSERT_EQ(got, int32_t(b[2] % uint32_t(vocab)));
        ++random;
      } else {
        ASSERT_EQ(got, id);
        ++same;
      }
    } else {
      ASSERT_EQ(l, -100);
      ASSERT_EQ(got, id);
    }
  }
  EXPECT_NEAR(double(sel) / (n - n / 10), p, 0.007);
  EXPECT_NEAR(double(masked) / sel, 0.8, 0.03);
  EXPECT_NEAR(double(random) / sel, 0.1, 0.025);
  EXPECT_NEAR(double(same) / sel, 0.1, 0.025);
}
