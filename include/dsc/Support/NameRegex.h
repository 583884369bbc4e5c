//===- NameRegex.h - Linear-time regular expressions for names --*- C++ -*-===//
//
// PEFT's `target_modules` may be a regular expression, matched with Python's
// re.fullmatch against each module name. std::regex compiles by recursion
// (a pattern nested a few thousand groups deep overflows the stack) and
// matches by backtracking (`((.*)*)*z` never ends), so a user's pattern
// could crash or hang dsc. NameRegex is a Thompson automaton: the pattern
// is parsed with a bounded nesting depth into at most kMaxStates states,
// and a match advances the set of live states one character at a time,
// so it takes O(name length x states) whatever the pattern.
//
// The syntax is the part of Python's `re` that names need: literals, `.`,
// classes `[a-z_]` / `[^...]` with `\d \w \s` and escaped characters in
// them, `\d \w \s \D \W \S`, escaped punctuation, groups `(...)` and
// `(?:...)`, `|`, `* + ?` (a lazy `*? +? ??` matches the same names under
// fullmatch), `{m}`, `{m,}`, `{m,n}`, and `^` / `$` at the ends. Anything
// else (backreferences, lookaround, flags, `\b`) is refused with a message
// naming it, never misread.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_NAMEREGEX_H
#define DSC_SUPPORT_NAMEREGEX_H

#include "dsc/Support/Error.h"

#include <bitset>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace dsc {

/// A pattern NameRegex refuses; what() says where and why.
class RegexError : public Error {
public:
  using Error::Error;
};

class NameRegex {
public:
  static constexpr int kMaxNesting = 64;
  static constexpr size_t kMaxStates = 1 << 14;

  /// Throws RegexError for a pattern outside the syntax above, nested
  /// deeper than kMaxNesting groups, or needing more than kMaxStates states
  /// (repeat counts multiply the pattern).
  explicit NameRegex(std::string_view pattern);

  /// Whether the whole of `name` matches (Python's re.fullmatch).
  bool fullMatch(std::string_view name) const;

  /// One automaton state: a character set to consume (then go to `next`),
  /// or, when `split`, epsilon moves to `next` and `alt`.
  struct State {
    std::bitset<256> chars;
    bool split = false;
    int next = -1, alt = -1;
  };

private:
  std::vector<State> states;
  int start = -1; ///< the accepting state is the one index -1 points to
};

} // namespace dsc

#endif // DSC_SUPPORT_NAMEREGEX_H
