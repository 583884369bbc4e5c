//===- Demo.h - The built-in default job -----------------------*- C++ -*-===//
#ifndef DSC_TOOLS_DSCRUN_DEMO_H
#define DSC_TOOLS_DSCRUN_DEMO_H

#include <cstdint>
#include <string>
#include <vector>

namespace dsc {

/// Lines of 3 to 8 consecutive numbers from a random start, e.g.
/// "97 98 99 100 101": deterministic after the first number, so
/// the loss can fall far, and learning it needs attention (copy the previous
/// number, add one, carry). Generated from a fixed seed; needs no files.
std::string makeCountingText(uint64_t seed, int64_t numLines);

/// The byte-level tokens of `text`.
std::vector<int32_t> bytesToTokens(const std::string &text);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_DEMO_H
