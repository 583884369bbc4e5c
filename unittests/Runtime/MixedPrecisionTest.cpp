//===- MixedPrecisionTest.cpp - 16-bit buffers and the loss scaler --------===//

#include "TestUtil.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

using namespace dsc::rt;
using namespace dsc::rt::test;

namespace {

float bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
uint32_t bitsOf(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

/// x converted to `half` and back, by two dsc.convert instructions.
std::vector<float> roundAll(const std::vector<float> &x, DType half) {
  Harness h;
  const int64_t n = int64_t(x.size());
  int a = h.buf({n}), m = h.buf({n}, half), b = h.buf({n});
  h.alloc();
  h.set(a, x);
  h.run(Opcode::Convert, {a}, {m});
  h.run(Opcode::Convert, {m}, {b});
  return h.get(b);
}
float f16(float x) { return roundAll({x}, DType::F16)[0]; }
float bf16(float x) { return roundAll({x}, DType::BF16)[0]; }

} // namespace

TEST(HalfConversion, F16KnownValues) {
  EXPECT_EQ(f16(65504.0f), 65504.0f); // largest finite half
  EXPECT_EQ(f16(65519.996f), 65504.0f);
  EXPECT_EQ(f16(65520.0f), INFINITY); // half-way to 2^16: ties to even -> inf
  EXPECT_EQ(f16(-70000.0f), -INFINITY);
  EXPECT_EQ(f16(std::ldexp(1.0f, -24)), std::ldexp(1.0f, -24)); // min subnormal
  EXPECT_EQ(f16(std::ldexp(1.0f, -25)), 0.0f);  // tie -> even (0)
  EXPECT_EQ(f16(std::ldexp(1.5f, -25)), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16(std::ldexp(3.0f, -25)), std::ldexp(1.0f, -23)); // 1.5 ulp -> 2
  EXPECT_EQ(f16(std::ldexp(1.0f, -14)), std::ldexp(1.0f, -14)); // min normal
  EXPECT_EQ(f16(std::ldexp(1023.5f, -24)), std::ldexp(1.0f, -14)); // -> normal
  EXPECT_EQ(f16(1.0f + std::ldexp(1.0f, -11)), 1.0f);   // tie -> even
  EXPECT_EQ(f16(1.0f + std::ldexp(3.0f, -11)), 1.0f + std::ldexp(1.0f, -9));
  EXPECT_EQ(f16(0.1f), 0.0999755859375f);
  EXPECT_EQ(bitsOf(f16(-0.0f)), 0x80000000u);
  EXPECT_EQ(bitsOf(f16(-std::ldexp(1.0f, -26))), 0x80000000u); // -0
  EXPECT_EQ(f16(INFINITY), INFINITY);
  EXPECT_TRUE(std::isnan(f16(NAN)));
  EXPECT_TRUE(std::isnan(f16(bits(0x7f800001u)))); // signalling NaN
  EXPECT_EQ(f16(bits(0x00000001u)), 0.0f);          // f32 subnormal
}

TEST(HalfConversion, BF16KnownValues) {
  EXPECT_EQ(bf16(1.0f), 1.0f);
  EXPECT_EQ(bitsOf(bf16(bits(0x3f808000u))), 0x3f800000u); // tie -> even (down)
  EXPECT_EQ(bitsOf(bf16(bits(0x3f818000u))), 0x3f820000u); // tie -> even (up)
  EXPECT_EQ(bitsOf(bf16(bits(0x3f808001u))), 0x3f810000u); // above tie
  EXPECT_EQ(bitsOf(bf16(bits(0x3f807fffu))), 0x3f800000u); // below tie
  EXPECT_EQ(bf16(std::numeric_limits<float>::max()), INFINITY);
  EXPECT_EQ(bitsOf(bf16(bits(0x7f7f0000u))), 0x7f7f0000u); // largest bf16
  EXPECT_EQ(bitsOf(bf16(bits(0x00018000u))), 0x00020000u); // subnormal tie
  EXPECT_EQ(bf16(-INFINITY), -INFINITY);
  EXPECT_TRUE(std::isnan(bf16(NAN)));
  EXPECT_TRUE(std::isnan(bf16(bits(0x7f800001u)))); // NaN stays NaN, not inf
}

TEST(HalfConversion, Idempotent) {
  std::vector<float> x = uniform(1000, 7, -1e5f, 1e5f);
  for (DType half : {DType::F16, DType::BF16}) {
    std::vector<float> once = roundAll(x, half);
    EXPECT_NE(once, x);
    EXPECT_EQ(roundAll(once, half), once) << dtypeName(half);
  }
}

// A kernel with 16-bit operands computes in f32 on the widened inputs and
// rounds its outputs once, in place too; the buffers hold 2 bytes each.
TEST(HalfBuffers, KernelsComputeInF32AndRoundOnStore) {
  const std::vector<float> x = uniform(64, 3, -4, 4), y = uniform(64, 4, -4, 4);
  for (DType half : {DType::F16, DType::BF16}) {
    Harness h;
    int a32 = h.buf({64}), b32 = h.buf({64});
    int a = h.buf({64}, half), b = h.buf({64}, half), c = h.buf({64}, half);
    int c32 = h.buf({64});
    h.alloc();
    EXPECT_EQ(h.prog.buffers[size_t(a)].bytes(), 128u);
    h.set(a32, x);
    h.set(b32, y);
    h.run(Opcode::Convert, {a32}, {a});
    h.run(Opcode::Convert, {b32}, {b});
    h.run(Opcode::Add, {a, b}, {c});
    h.run(Opcode::Convert, {c}, {c32});
    const std::vector<float> xr = roundAll(x, half), yr = roundAll(y, half);
    std::vector<float> want(64);
    for (size_t i = 0; i < 64; ++i)
      want[i] = xr[i] + yr[i];
    EXPECT_EQ(h.get(c32), roundAll(want, half)) << dtypeName(half);
    h.run(Opcode::Add, {c, b}, {c}); // in place
    h.run(Opcode::Convert, {c}, {c32});
    const std::vector<float> c1 = roundAll(want, half);
    for (size_t i = 0; i < 64; ++i)
      want[i] = c1[i] + yr[i];
    EXPECT_EQ(h.get(c32), roundAll(want, half)) << dtypeName(half);
  }
}

TEST(HalfBuffers, IntegerOperandsAreRejected) {
  Harness h;
  int a = h.buf({4}, DType::I32), b = h.buf({4}, DType::BF16);
  h.alloc();
  try {
    h.run(Opcode::Convert, {a}, {b});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("must be f32, f16 or bf16, got i32"),
              std::string::npos)
        << e.what();
  }
}

TEST(LossScaling, CheckFinite) {
  Harness h;
  int a = h.buf({4}), b = h.buf({2}), o = h.buf({});
  h.alloc();
  h.set(a, {1, 2, 3, 4});
  h.set(b, {0, -1});
  h.run(Opcode::CheckFinite, {a, b}, {o});
  EXPECT_EQ(h.get(o)[0], 0.0f);
  h.set(b, {0, -INFINITY});
  h.run(Opcode::CheckFinite, {a, b}, {o});
  EXPECT_EQ(h.get(o)[0], 1.0f);
  h.set(b, {NAN, 0});
  h.run(Opcode::CheckFinite, {a, b}, {o});
  EXPECT_EQ(h.get(o)[0], 1.0f);
}

namespace {

/// deepspeed/runtime/fp16/loss_scaler.py DynamicLossScaler, transcribed.
struct DeepSpeedScaler {
  double cur_scale;
  int64_t cur_iter = 0, last_overflow_iter = -1;
  int64_t scale_window, delayed_shift, cur_hysteresis;
  double min_scale;
  bool consecutive;
  bool update(bool overflow) { // false: DeepSpeed raises
    if (overflow) {
      if (delayed_shift == 1 || cur_hysteresis == 1) {
        if (cur_scale == min_scale)
          return false;
        cur_scale = std::max(cur_scale / 2, min_scale);
      } else {
        cur_hysteresis -= 1;
      }
      last_overflow_iter = cur_iter;
    } else {
      if (consecutive)
        cur_hysteresis = delayed_shift;
      if ((cur_iter - last_overflow_iter) % scale_window == 0) {
        if (!consecutive)
          cur_hysteresis = delayed_shift;
        cur_scale *= 2;
      }
    }
    cur_iter += 1;
    return true;
  }
};

} // namespace

TEST(LossScaling, UpdateMatchesDeepSpeed) {
  for (bool consecutive : {false, true})
    for (int64_t hyst : {1, 2, 3})
      for (int64_t window : {1, 2, 5}) {
        DeepSpeedScaler ref{1024.0, 0, -1, window, hyst, hyst, 64.0,
                            consecutive};
        Harness h;
        int st = h.buf({3}), ov = h.buf({}), sc = h.buf({});
        h.alloc();
        h.set(st, {0, 0, 0});
        std::map<std::string, AttrValue> at = {
            {"dynamic", int64_t(1)},       {"initial_scale", 1024.0},
            {"scale_window", window},      {"hysteresis", hyst},
            {"min_scale", 64.0},
            {"consecutive_hysteresis", int64_t(consecutive)}};
        uint32_t pattern = 0x2c6b5a3du; // overflows: 1 bits, then good runs
        for (int i = 0; i < 60; ++i) {
          bool overflow = i < 32 ? (pattern >> i) & 1u : i % 7 == 0;
          h.run(Opcode::LossScale, {st}, {sc},
                {{"initial_scale", 1024.0}, {"multiplier", 1.0}});
          ASSERT_EQ(h.get(sc)[0], float(ref.cur_scale)) << i;
          h.set(ov, {overflow ? 1.0f : 0.0f});
          if (!ref.update(overflow)) {
            EXPECT_THROW(h.run(Opcode::UpdateLossScale, {st, ov}, {st}, at),
                         Error);
            break;
          }
          h.run(Opcode::UpdateLossScale, {st, ov}, {st}, at);
        }
      }
}

TEST(LossScaling, StaticScaleNeverChanges) {
  Harness h;
  int st = h.buf({3}), ov = h.buf({}), sc = h.buf({});
  h.alloc();
  h.set(st, {0, 0, 0});
  h.set(ov, {1});
  std::map<std::string, AttrValue> at = {
      {"dynamic", int64_t(0)},  {"initial_scale", 128.0},
      {"scale_window", int64_t(1)}, {"hysteresis", int64_t(1)},
      {"min_scale", 128.0},     {"consecutive_hysteresis", int64_t(0)}};
  for (int i = 0; i < 3; ++i)
    h.run(Opcode::UpdateLossScale, {st, ov}, {st}, at);
  h.run(Opcode::LossScale, {st}, {sc},
        {{"initial_scale", 128.0}, {"multiplier", 0.5}});
  EXPECT_EQ(h.get(sc)[0], 64.0f);
}

TEST(LossScaling, UnscaleClipUsesTheUnscaledNorm) {
  Harness h;
  int n = h.buf({}), s = h.buf({}), g = h.buf({}), u = h.buf({});
  h.alloc();
  h.set(n, {1024.0f * 3.0f});
  h.set(s, {1024.0f});
  h.run(Opcode::UnscaleClip, {n, s}, {g, u}, {{"max_norm", 0.0}});
  EXPECT_EQ(h.get(u)[0], 3.0f);
  EXPECT_EQ(h.get(g)[0], 1.0f / 1024.0f);
  h.run(Opcode::UnscaleClip, {n, s}, {g, u}, {{"max_norm", 10.0}});
  EXPECT_EQ(h.get(g)[0], 1.0f / 1024.0f); // norm 3 < 10: no clipping
  h.run(Opcode::UnscaleClip, {n, s}, {g, u}, {{"max_norm", 1.0}});
  EXPECT_FLOAT_EQ(h.get(g)[0], float(1.0 / ((3.0 + 1e-6) * 1024.0)));
}

TEST(LossScaling, OptimizersSkipOnOverflow) {
  Harness h;
  int p = h.buf({2}), g = h.buf({2}), m = h.buf({2}), v = h.buf({2});
  int lr = h.buf({}), step = h.buf({}, DType::I64), gs = h.buf({}),
      skip = h.buf({});
  h.alloc();
  h.set(p, {1, 2});
  h.set(g, {NAN, INFINITY});
  h.set(m, {0.5f, 0.25f});
  h.set(v, {0.1f, 0.2f});
  h.set(lr, {0.1f});
  h.l(step)[0] = 1;
  h.set(gs, {1});
  h.set(skip, {1});
  std::map<std::string, AttrValue> adam = {
      {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.1},
      {"adamw", int64_t(1)}, {"bias_correction", int64_t(1)}};
  h.run(Opcode::Adam, {p, g, m, v, lr, step, gs, skip}, {p, m, v}, adam);
  EXPECT_EQ(h.get(p), (std::vector<float>{1, 2}));
  EXPECT_EQ(h.get(m), (std::vector<float>{0.5f, 0.25f}));
  EXPECT_EQ(h.get(v), (std::vector<float>{0.1f, 0.2f}));
  h.run(Opcode::Sgd, {p, g, m, lr, step, gs, skip}, {p, m},
        {{"momentum", 0.9}, {"dampening", 0.0}, {"weight_decay", 0.0},
         {"nesterov", int64_t(0)}});
  EXPECT_EQ(h.get(p), (std::vector<float>{1, 2}));
  h.set(g, {1, 1});
  h.set(skip, {0});
  h.run(Opcode::Adam, {p, g, m, v, lr, step, gs, skip}, {p, m, v}, adam);
  EXPECT_NE(h.get(p), (std::vector<float>{1, 2}));
}
