#include "dsc/Support/Philox.h"

#include <gtest/gtest.h>

using namespace dsc;

// Known-answer vectors of Random123 (kat_vectors, philox4x32_10).
TEST(Philox, KnownAnswerZero) {
  PhiloxBlock r = philox4x32_10({0, 0, 0, 0}, {0, 0});
  EXPECT_EQ(r, (PhiloxBlock{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
}

TEST(Philox, KnownAnswerOnes) {
  PhiloxBlock r = philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu,
                                 0xffffffffu},
                                {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(r, (PhiloxBlock{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
}

TEST(Philox, KnownAnswerPi) {
  PhiloxBlock r = philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu,
                                 0x03707344u},
                                {0xa4093822u, 0x299f31d0u});
  EXPECT_EQ(r, (PhiloxBlock{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Philox, KeyAndUniformConventions) {
  auto k = philoxKey(0x1122334455667788ull);
  EXPECT_EQ(k[0], 0x55667788u);
  EXPECT_EQ(k[1], 0x11223344u);
  EXPECT_EQ(philoxUniform(0), 0.0f);
  EXPECT_LT(philoxUniform(0xffffffffu), 1.0f);
  EXPECT_EQ(philoxUniform(0x80000000u), 0.5f);
}
