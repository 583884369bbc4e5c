// 0/1 Adam's step policy against DeepSpeed's counters worked by hand, and
// its kernels against the formulas.
#include "TestUtil.h"

#include "dsc/Runtime/ZeroOneAdam.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {
std::string stagesOf(ZeroOneAdamPolicy policy, int64_t steps) {
  std::string out;
  for (int64_t k = 1; k <= steps; ++k)
    switch (policy.next(k)) {
    case ZeroOneAdamPolicy::Stage::Full:
      out += 'F';
      break;
    case ZeroOneAdamPolicy::Stage::OnebitGradient:
      out += 'O';
      break;
    case ZeroOneAdamPolicy::Stage::Local:
      out += 'L';
      break;
    case ZeroOneAdamPolicy::Stage::Sync:
      out += 'S';
      break;
    }
  return out;
}
} // namespace

// var_freeze_step 6, var_update_scaler 2, local_step_scaler 3, clipper 4,
// on DeepSpeed's step count s = k + 1: full at s = 2, 3 (interval 1, then
// 2 after two updates), 4 (then 4 after two more), 6; 1-bit gradients at
// s = 5, 7; from k = 7 synchronisations at s divisible by the local
// interval (1 for three steps, 2 for three, then 4), local steps between.
TEST(ZeroOneAdam, PolicyFollowsDeepSpeedsCounters) {
  ZeroOneAdamPolicy policy(6, 2, 3, 4);
  EXPECT_EQ(stagesOf(policy, 16), "FFFOFOSSSLSLLLSL");
  EXPECT_TRUE(policy.freezesAt(7));
  EXPECT_FALSE(policy.freezesAt(6));
  // DeepSpeed's defaults: 16 full steps (s = 2 .. 17), then the interval
  // is 2: s = 18 full, 19 1-bit, 20 full, 21 1-bit.
  EXPECT_EQ(stagesOf(ZeroOneAdamPolicy(100000, 16, 32678, 16), 20),
            "FFFFFFFFFFFFFFFFFOFO");
  // Frozen from the start: synchronisations at s = 2, 3 (interval 1 for
  // two steps), then at even s (local_step_scaler 2, clipper 2).
  EXPECT_EQ(stagesOf(ZeroOneAdamPolicy(0, 16, 2, 2), 6), "SSSLSL");
}

TEST(ZeroOneAdam, PolicyRefusesStepsOutOfOrder) {
  ZeroOneAdamPolicy policy(6, 2, 3, 4);
  policy.next(1);
  EXPECT_EQ(policy.expected(), 2);
  EXPECT_EQ(errorOf([&] { policy.next(3); }),
            "0/1 Adam: optimizer step 3 out of order (expected 2)");
  EXPECT_THROW(ZeroOneAdamPolicy(-1, 2, 3, 4), Error);
  EXPECT_STREQ(zeroOneStageFunction(ZeroOneAdamPolicy::Stage::Sync),
               "apply_step_sync");
}

// A local step, then a synchronisation of one rank (the mean is the rank's
// own scaled accumulator): the parameter returns to where the local steps
// began plus the accumulated update, the momentum to -w / lr_sum; an
// element with v == 0 keeps the start and a zero momentum.
TEST(ZeroOneAdam, LocalStepAndSync) {
  Harness h;
  int p = h.buf({3}), m0 = h.buf({3}), m = h.buf({3}), v = h.buf({3}),
      u = h.buf({3}), lr = h.buf({1}), p1 = h.buf({3}), m1 = h.buf({3}),
      u1 = h.buf({3}), start = h.buf({3}), w = h.buf({3}), p2 = h.buf({3}),
      m2 = h.buf({3}), sum = h.buf({1});
  h.alloc();
  h.set(p, {1.0f, -2.0f, 0.5f});
  h.set(m, {0.1f, 0.2f, 0.3f});
  h.set(v, {0.04f, 0.01f, 0.0f});
  h.set(u, {0.01f, -0.02f, 0.0f});
  h.set(lr, {0.1f});
  const float eps = 1e-8f, wd = 0.5f;
  h.run(Opcode::LocalAdam, {p, m0, m, v, u, lr}, {p1, m1, u1},
        {{"eps", 1e-8}, {"weight_decay", 0.5}});
  for (int i = 0; i < 3; ++i) {
    const float mi = h.get(v)[size_t(i)] != 0 ? h.get(m)[size_t(i)] : 0.0f;
    const float upd =
        mi / (std::sqrt(h.get(v)[size_t(i)]) + eps) + wd * h.get(p)[size_t(i)];
    EXPECT_FLOAT_EQ(h.get(p1)[size_t(i)], h.get(p)[size_t(i)] - 0.1f * upd);
    EXPECT_FLOAT_EQ(h.get(u1)[size_t(i)], h.get(u)[size_t(i)] - 0.1f * upd);
    EXPECT_EQ(h.get(m1)[size_t(i)], mi);
  }
  h.run(Opcode::ZeroOneUnwind, {p1, u1, v}, {start, w}, {{"eps", 1e-8}});
  h.set(sum, {0.3f});
  h.run(Opcode::ZeroOneSync, {start, w, v, sum}, {p2, m2}, {{"eps", 1e-8}});
  for (int i = 0; i < 3; ++i) {
    const float vi = h.get(v)[size_t(i)];
    EXPECT_FLOAT_EQ(h.get(start)[size_t(i)],
                    h.get(p1)[size_t(i)] - h.get(u1)[size_t(i)]);
    EXPECT_FLOAT_EQ(h.get(w)[size_t(i)],
                    h.get(u1)[size_t(i)] * (std::sqrt(vi) + eps));
    const float wi = vi != 0 ? h.get(w)[size_t(i)] : 0.0f;
    EXPECT_FLOAT_EQ(h.get(p2)[size_t(i)],
                    h.get(start)[size_t(i)] + wi / (std::sqrt(vi) + eps));
    EXPECT_FLOAT_EQ(h.get(m2)[size_t(i)], -(wi / 0.3f));
  }
  EXPECT_EQ(h.get(m2)[2], 0.0f); // v == 0: no momentum
  h.set(sum, {0.0f});
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::ZeroOneSync, {start, w, v, sum}, {p2, m2},
                    {{"eps", 1e-8}});
            }).rfind("ZeroOneSync: lr_sum must be > 0", 0),
            0u);
}
