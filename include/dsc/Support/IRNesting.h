//===- IRNesting.h - Bound the nesting of MLIR text -------------*- C++ -*-===//
//
// MLIR's parser recurses once per nested region, attribute or type bracket,
// so input nested a few thousand levels deep overflows the stack (SIGSEGV,
// no message). Every tool that parses user IR first checks its nesting with
// this linear scan.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_IRNESTING_H
#define DSC_SUPPORT_IRNESTING_H

#include <string>
#include <string_view>

namespace dsc {

/// Far deeper than any IR dsc writes (about 10 levels) and far shallower
/// than what overflows the parser's stack (thousands of levels on 8 MiB).
constexpr int kMaxIRNesting = 256;

/// Throws FileError "<name>:<line>: IR nested deeper than 256 levels
/// (brackets, braces, parentheses or angle brackets)" when `text` opens more
/// than kMaxIRNesting brackets at once (string literals and // comments
/// excepted).
void checkIRNesting(std::string_view text, const std::string &name);

} // namespace dsc

#endif // DSC_SUPPORT_IRNESTING_H
