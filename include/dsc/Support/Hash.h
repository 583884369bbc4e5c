//===- Hash.h - A 64-bit FNV-1a hash ---------------------------*- C++ -*-===//
//
// Fingerprints of files and sources (the kernel cache's keys, the inputs the
// ranks of a job must share). Not cryptographic: it finds accidents, not
// adversaries.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_HASH_H
#define DSC_SUPPORT_HASH_H

#include <cstdint>
#include <string_view>

namespace dsc {

constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

/// FNV-1a of `bytes`, continuing from `h` (start from kFnv1aBasis).
inline uint64_t fnv1a64(std::string_view bytes, uint64_t h = kFnv1aBasis) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

} // namespace dsc

#endif // DSC_SUPPORT_HASH_H
