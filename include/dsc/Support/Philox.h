//===- Philox.h - Counter-based random numbers -----------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., SC'11). Every random number in dsc is a pure
// function of (key, counter), so results never depend on thread scheduling and
// a recomputed forward, the CPU backend and the CUDA backend draw the same bits.
//
// Conventions shared by every backend:
//   key     = {seed & 0xffffffff, seed >> 32}
//   dropout element i of op `stream` at offset o:
//           counter = {i / 4, stream, o & 0xffffffff, o >> 32}, lane i % 4,
//           keep iff uniform(lane) >= rate
//   mlm element i: counter = {i, stream, o & 0xffffffff, o >> 32}, lanes 0..2
//   uniform(x) = (x >> 8) * 2^-24, in [0, 1)
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_PHILOX_H
#define DSC_SUPPORT_PHILOX_H

#include <array>
#include <cstdint>

namespace dsc {

using PhiloxBlock = std::array<uint32_t, 4>;

inline PhiloxBlock philox4x32_10(PhiloxBlock ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kMul0) * ctr[0];
    uint64_t p1 = uint64_t(kMul1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1),
           uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
    key[0] += kWeyl0;
    key[1] += kWeyl1;
  }
  return ctr;
}

inline std::array<uint32_t, 2> philoxKey(uint64_t seed) {
  return {uint32_t(seed), uint32_t(seed >> 32)};
}

inline float philoxUniform(uint32_t x) { return float(x >> 8) * 0x1p-24f; }

} // namespace dsc

#endif // DSC_SUPPORT_PHILOX_H
