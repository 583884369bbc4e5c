//===- Demo.h - The built-in default job -----------------------*- C++ -*-===//
#ifndef DSC_TOOLS_DSCRUN_DEMO_H
#define DSC_TOOLS_DSCRUN_DEMO_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

/// `a+b=c` lines, a and b in [0, 100), from a fixed seed: deterministic,
/// learnable, and needs no files.
std::string makeAdditionText(uint64_t seed, int64_t numLines);

/// The byte-level tokens of `text`.
std::vector<int32_t> bytesToTokens(const std::string &text);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_DEMO_H
