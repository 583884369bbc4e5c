//===- CompressionTest.cpp - 1-bit Adam's kernels and their checks --------===//

#include "TestUtil.h"

#include "dsc/Program/InstrCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace dsc::rt;
using namespace dsc::rt::test;

TEST(OnebitCompress, HandComputed) {
  Harness h;
  int x = h.buf({2, 3}), err = h.buf({8}), signs = h.buf({1}, DType::U8),
      scale = h.buf({1});
  h.alloc();
  h.set(x, {1.0f, -2.0f, 0.0f, -0.0f, 3.0f, -1.0f});
  h.set(err, {0, 0, 0, 0, 0, 0, 0.5f, -0.5f}); // padding gets the error
  h.run(Opcode::OnebitCompress, {x, err}, {signs, scale, err});
  // y = [1, -2, 0, -0, 3, -1, 0.5, -0.5]; sign(0) and sign(-0) are +1.
  EXPECT_EQ(h.storage->u8(signs)[0], 0xBA); // 1011 1010
  const float s = float(std::sqrt(15.5)) / float(std::sqrt(8.0));
  EXPECT_EQ(h.get(scale)[0], s);
  const std::vector<float> e = h.get(err);
  EXPECT_EQ(e[0], 1.0f - s);
  EXPECT_EQ(e[1], -2.0f + s);
  EXPECT_EQ(e[3], -s);
  EXPECT_EQ(e[7], -0.5f + s);
}

TEST(OnebitCompress, SkipKeepsTheError) {
  Harness h;
  int x = h.buf({8}), err = h.buf({8}), signs = h.buf({1}, DType::U8),
      scale = h.buf({1}), skip = h.buf({});
  h.alloc();
  h.set(x, {1, 2, 3, 4, 5, 6, 7, 8});
  h.set(err, {1, 1, 1, 1, 1, 1, 1, 1});
  h.set(skip, {1.0f});
  h.run(Opcode::OnebitCompress, {x, err, skip}, {signs, scale, err});
  EXPECT_EQ(h.get(err), std::vector<float>(8, 1.0f));
}

TEST(OnebitDecode, ChunksAndMean) {
  Harness h;
  int signs = h.buf({2}, DType::U8), scales = h.buf({2}),
      whole = h.buf({16}), mean = h.buf({8});
  h.alloc();
  h.storage->u8(signs)[0] = 0xF0;
  h.storage->u8(signs)[1] = 0x0F;
  h.set(scales, {0.5f, 0.25f});
  h.run(Opcode::OnebitDecode, {signs, scales}, {whole});
  const std::vector<float> w = h.get(whole);
  EXPECT_EQ(w[0], 0.5f);
  EXPECT_EQ(w[4], -0.5f);
  EXPECT_EQ(w[8], -0.25f);
  EXPECT_EQ(w[15], 0.25f);
  h.run(Opcode::OnebitDecodeMean, {signs, scales}, {mean});
  const std::vector<float> m = h.get(mean);
  EXPECT_EQ(m[0], 0.25f - 0.125f);  // +0.5/2 - 0.25/2
  EXPECT_EQ(m[7], -0.25f + 0.125f); // -0.5/2 + 0.25/2
}

TEST(FrozenAdam, UpdateMaskAndSkip) {
  Harness h;
  int p = h.buf({2}), oldM = h.buf({2}), m = h.buf({2}), v = h.buf({2}),
      lr = h.buf({}), skip = h.buf({}), gscale = h.buf({}), g = h.buf({2});
  h.alloc();
  h.set(p, {1.0f, 2.0f});
  h.set(oldM, {0.5f, 0.5f});
  h.set(m, {0.3f, 0.7f});
  h.set(v, {0.04f, 0.0f}); // element 1 has only seen zero gradients
  h.set(lr, {0.1f});
  h.set(skip, {0.0f});
  std::map<std::string, AttrValue> attrs = {{"eps", 1e-8},
                                            {"weight_decay", 0.5}};
  h.run(Opcode::FrozenAdam, {p, oldM, m, v, lr, skip}, {p, oldM}, attrs);
  const float u0 = 0.3f / (std::sqrt(0.04f) + 1e-8f) + 0.5f * 1.0f;
  EXPECT_FLOAT_EQ(h.get(p)[0], 1.0f + -0.1f * u0);
  EXPECT_FLOAT_EQ(h.get(p)[1], 2.0f + -0.1f * (0.5f * 2.0f)); // decay only
  EXPECT_EQ(h.get(oldM), (std::vector<float>{0.3f, 0.0f}));
  // Skipped: param and the previous momentum pass through.
  h.set(p, {1.0f, 2.0f});
  h.set(oldM, {0.5f, 0.5f});
  h.set(skip, {1.0f});
  h.run(Opcode::FrozenAdam, {p, oldM, m, v, lr, skip}, {p, oldM}, attrs);
  EXPECT_EQ(h.get(p), (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(h.get(oldM), (std::vector<float>{0.5f, 0.5f}));
  // EmaUpdate: beta * avg + (1 - beta) * gscale * grad.
  h.set(g, {1.0f, -1.0f});
  h.set(gscale, {0.5f});
  h.run(Opcode::EmaUpdate, {m, g, gscale}, {m}, {{"beta", 0.9}});
  EXPECT_FLOAT_EQ(h.get(m)[0], 0.9f * 0.3f + float(1.0 - 0.9) * 0.5f);
}

TEST(CompressionCheck, Errors) {
  Harness h;
  int x = h.buf({10}), err12 = h.buf({12}), err16 = h.buf({16}),
      signs = h.buf({2}, DType::U8), f32signs = h.buf({2}), scale = h.buf({1}),
      odd = h.buf({3}, DType::U8), scales = h.buf({2}), out = h.buf({16});
  h.alloc();
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::OnebitCompress, {x, err12}, {signs, scale, err12});
            }),
            "OnebitCompress: error 'b1' has 12 elements; it must be a multiple "
            "of 8 and at least the input's 10");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::OnebitCompress, {x, err16},
                    {f32signs, scale, err16});
            }),
            "OnebitCompress: signs 'b4' must be u8, got f32");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::OnebitDecode, {odd, scales}, {out});
            }),
            "OnebitDecode: signs 'b6' of 3 bytes do not split into 2 chunks");
}

TEST(QuantizeInt4, CodesAndScalesPerBlock) {
  Harness h;
  int x = h.buf({8}), codes = h.buf({4}, DType::U8), scales = h.buf({2});
  h.alloc();
  // Block 0: max|x| = 7, scale 1; -3.5 rounds half to even (-4). Block 1
  // is all zero: scale 0, every code 0 (stored 8).
  h.set(x, {7.0f, -3.5f, 0.0f, 1.0f, 0, 0, 0, 0});
  h.run(Opcode::QuantizeInt4, {x}, {codes, scales},
        {{"block_size", int64_t(4)}});
  const uint8_t *c = h.storage->u8(codes);
  EXPECT_EQ(c[0], 0x4F); // low 7 + 8, high -4 + 8
  EXPECT_EQ(c[1], 0x98); // low 0 + 8, high 1 + 8
  EXPECT_EQ(c[2], 0x88);
  EXPECT_EQ(c[3], 0x88);
  EXPECT_EQ(h.get(scales), (std::vector<float>{1.0f, 0.0f}));
}

TEST(DequantizeReduceInt4, SumsTheChunksInOrder) {
  Harness h;
  int codes = h.buf({4}, DType::U8), scales = h.buf({2}), mean = h.buf({4}),
      sum = h.buf({4});
  h.alloc();
  // Chunk 0: codes 7, -4, 0, 1 (scale 0.5); chunk 1: -7, 2, 3, -1 (0.25).
  const uint8_t bytes[] = {0x4F, 0x98, 0xA1, 0x7B};
  std::copy(bytes, bytes + 4, h.storage->u8(codes));
  h.set(scales, {0.5f, 0.25f});
  h.run(Opcode::DequantizeReduceInt4, {codes, scales}, {sum},
        {{"block_size", int64_t(4)}, {"op", std::string("sum")}});
  EXPECT_EQ(h.get(sum), (std::vector<float>{3.5f - 1.75f, -2.0f + 0.5f,
                                            0.0f + 0.75f, 0.5f - 0.25f}));
  h.run(Opcode::DequantizeReduceInt4, {codes, scales}, {mean},
        {{"block_size", int64_t(4)}, {"op", std::string("mean")}});
  EXPECT_EQ(h.get(mean), (std::vector<float>{0.875f, -0.75f, 0.375f,
                                             0.125f}));
}

// Quantized then reduced, each element is within half a step (scale / 2)
// of its chunk's value, per chunk.
TEST(QuantizeInt4, RoundTripWithinHalfAStep) {
  Harness h;
  const int64_t G = 3, c = 256, B = 64;
  int x = h.buf({G * c}), codes = h.buf({G * c / 2}, DType::U8),
      scales = h.buf({G * c / B}), sum = h.buf({c});
  h.alloc();
  std::vector<float> v(size_t(G * c));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = float(std::sin(0.37 * double(i)) * (1.0 + double(i % 7)));
  h.set(x, v);
  h.run(Opcode::QuantizeInt4, {x}, {codes, scales},
        {{"block_size", B}});
  h.run(Opcode::DequantizeReduceInt4, {codes, scales}, {sum},
        {{"block_size", B}, {"op", std::string("sum")}});
  const std::vector<float> s = h.get(scales), r = h.get(sum);
  for (int64_t i = 0; i < c; ++i) {
    double want = 0, slack = 0;
    for (int64_t j = 0; j < G; ++j) {
      want += v[size_t(j * c + i)];
      slack += s[size_t((j * c + i) / B)] / 2 * (1 + 1e-5);
    }
    EXPECT_NEAR(r[size_t(i)], want, slack + 1e-5) << i;
  }
}

TEST(CompressionCheck, Int4Errors) {
  Harness h;
  int codes = h.buf({4}, DType::U8), scales = h.buf({2}), out = h.buf({3}),
      odd = h.buf({6}), oddCodes = h.buf({3}, DType::U8),
      oddScales = h.buf({1});
  h.alloc();
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::DequantizeReduceInt4, {codes, scales}, {out},
                    {{"block_size", int64_t(4)}, {"op", std::string("mean")}});
            }),
            "DequantizeReduceInt4: the 8 codes do not split into chunks of "
            "the result's 3 elements");
  EXPECT_EQ(errorOf([&] {
              h.run(Opcode::QuantizeInt4, {odd}, {oddCodes, oddScales},
                    {{"block_size", int64_t(3)}});
            }),
            "QuantizeInt4: block_size 3 is not even or does not divide the 6 "
            "elements");
}
