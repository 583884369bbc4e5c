// LrSchedule: DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR at
// optimizer update s, which runs with last_batch_iteration = s - 2.
#include "TestUtil.h"

#include <cmath>
#include <gtest/gtest.h>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {
double lrAt(int64_t s, std::map<std::string, AttrValue> at) {
  Harness h;
  int step = h.buf({}, DType::I64), out = h.buf({});
  h.alloc();
  h.l(step)[0] = s;
  h.run(Opcode::LrSchedule, {step}, {out}, at);
  return h.f(out)[0];
}
std::map<std::string, AttrValue> warmup(const std::string &kind,
                                        const std::string &type) {
  return {{"kind", kind},
          {"lr", 0.1},
          {"warmup_min_lr", 0.0},
          {"warmup_max_lr", 0.01},
          {"warmup_num_steps", int64_t(100)},
          {"total_num_steps", int64_t(1000)},
          {"warmup_type", type},
          {"warmup_min_ratio", 0.1},
          {"cos_min_ratio", 0.01}};
}
} // namespace

TEST(LrSchedule, Constant) {
  std::map<std::string, AttrValue> at = warmup("constant", "log");
  at["lr"] = 3e-4;
  EXPECT_FLOAT_EQ(lrAt(1, at), 3e-4f);
  EXPECT_FLOAT_EQ(lrAt(999, at), 3e-4f);
}

TEST(LrSchedule, WarmupLRLog) {
  auto at = warmup("WarmupLR", "log");
  at["warmup_min_lr"] = 0.001;
  EXPECT_FLOAT_EQ(lrAt(1, at), 0.001f); // last_batch_iteration = -1: min_lr
  EXPECT_FLOAT_EQ(lrAt(2, at), 0.001f); // log(0 + 1) = 0
  EXPECT_FLOAT_EQ(lrAt(3, at), float(0.001 + 0.009 * std::log(2.0) / std::log(100.0)));
  EXPECT_FLOAT_EQ(lrAt(101, at), 0.01f); // iteration 99: log(100)/log(100)
  EXPECT_FLOAT_EQ(lrAt(5000, at), 0.01f);
}

TEST(LrSchedule, WarmupLRLinearAndMinimumSteps) {
  auto at = warmup("WarmupLR", "linear");
  EXPECT_FLOAT_EQ(lrAt(52, at), 0.005f); // iteration 50 of 100
  at["warmup_num_steps"] = int64_t(1);   // DeepSpeed uses max(2, n)
  EXPECT_FLOAT_EQ(lrAt(3, at), 0.005f);  // iteration 1 of 2
  EXPECT_FLOAT_EQ(lrAt(4, at), 0.01f);
}

TEST(LrSchedule, WarmupDecayLR) {
  auto at = warmup("WarmupDecayLR", "linear");
  EXPECT_FLOAT_EQ(lrAt(1, at), 0.0f);
  EXPECT_FLOAT_EQ(lrAt(102, at), 0.01f);                    // iteration 100
  EXPECT_FLOAT_EQ(lrAt(602, at), float(0.01 * 400.0 / 900.0)); // iteration 600
  EXPECT_FLOAT_EQ(lrAt(1102, at), 0.0f);                    // clamped at 0
}

TEST(LrSchedule, WarmupCosineLR) {
  auto at = warmup("WarmupCosineLR", "linear");
  EXPECT_EQ(lrAt(1, at), 0.0f); // DeepSpeed's get_lr() before the start
  EXPECT_FLOAT_EQ(lrAt(2, at), float(0.1 * 0.1)); // ratio = warmup_min_ratio
  EXPECT_FLOAT_EQ(lrAt(52, at), float(0.1 * (0.1 + 0.5 * 0.9)));
  double c = (1 + std::cos(M_PI * 1.0 / 900.0)) / 2;
  EXPECT_FLOAT_EQ(lrAt(102, at), float(0.1 * (0.01 + 0.99 * c)));
  EXPECT_FLOAT_EQ(lrAt(1001, at), float(0.1 * 0.01)); // cos(pi) = -1
  auto lg = warmup("WarmupCosineLR", "log");
  EXPECT_FLOAT_EQ(lrAt(12, lg),
                  float(0.1 * (0.1 + 0.9 * std::log(11.0) / std::log(100.0))));
}

TEST(LrSchedule, Errors) {
  EXPECT_THROW(lrAt(5, {{"kind", std::string("OneCycle")}}), Error);
  EXPECT_THROW(lrAt(5, warmup("WarmupLR", "cubic")), Error);
  auto at = warmup("WarmupDecayLR", "log");
  at.erase("total_num_steps");
  EXPECT_THROW(lrAt(5, at), Error);
  // A cosine decay with no steps to run is refused before the first step,
  // not when the warmup ends.
  auto cosine = warmup("WarmupCosineLR", "linear");
  cosine["total_num_steps"] = int64_t(100);
  try {
    lrAt(1, cosine);
    FAIL() << "no throw";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "LrSchedule: WarmupCosineLR needs total_num_steps "
                           "(100) different from warmup_num_steps (100)");
  }
}
