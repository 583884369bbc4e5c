//===- NameRegexTest.cpp - PEFT-style target_modules patterns -------------===//
//
// NameRegex against Python's re.fullmatch (the expectations were produced
// by Python 3.11's `re` on these exact patterns and names), the syntax it
// refuses, and the inputs that crashed or hung std::regex.
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/NameRegex.h"

#include <gtest/gtest.h>

#include <string>

using dsc::NameRegex;
using dsc::RegexError;

namespace {

struct Case {
  const char *pattern, *name;
  bool matches;
};

TEST(NameRegex, MatchesAsPythonFullmatch) {
  const Case cases[] = {
      {".*\\.(q_proj|v_proj)", "model.layers.0.self_attn.q_proj", true},
      {".*\\.(q_proj|v_proj)", "model.layers.0.self_attn.k_proj", false},
      {".*\\.(q_proj|v_proj)", "q_proj", false},
      {".*\\.(q_proj|v_proj)", "x.v_proj", true},
      {"^model\\.layers\\.\\d+\\.self_attn\\.(q|v)_proj$",
       "model.layers.12.self_attn.v_proj", true},
      {"^model\\.layers\\.\\d+\\.self_attn\\.(q|v)_proj$",
       "model.layers.x.self_attn.v_proj", false},
      {"^model\\.layers\\.\\d+\\.self_attn\\.(q|v)_proj$",
       "model.layers.1.self_attn.o_proj", false},
      {"transformer\\.h\\.[0-3]\\.attn\\.c_attn", "transformer.h.3.attn.c_attn",
       true},
      {"transformer\\.h\\.[0-3]\\.attn\\.c_attn", "transformer.h.4.attn.c_attn",
       false},
      {"transformer\\.h\\.[0-3]\\.attn\\.c_attn", "transformer_h.0.attn.c_attn",
       false},
      {"(?:ab){2}", "abab", true},
      {"(?:ab){2}", "ab", false},
      {"(?:ab){2}", "ababab", false},
      {"a{1,3}b", "b", false},
      {"a{1,3}b", "ab", true},
      {"a{1,3}b", "aaab", true},
      {"a{1,3}b", "aaaab", false},
      {"a{,2}", "", true},
      {"a{,2}", "a", true},
      {"a{,2}", "aa", true},
      {"a{,2}", "aaa", false},
      {"a{2,}", "a", false},
      {"a{2,}", "aa", true},
      {"a{2,}", "aaaaa", true},
      {"[^.]+\\.[\\w-]+", "ab.c_d-e", true},
      {"[^.]+\\.[\\w-]+", "ab..c", false},
      {"[^.]+\\.[\\w-]+", "a.b.c", false},
      {".*?_proj", "q_proj", true},
      {".*?_proj", "q_projx", false},
      {"a{x", "a{x", true},
      {"a{x", "ax", false},
      {"x|", "x", true},
      {"x|", "", true},
      {"(a*)*b", "aaab", true},
      {"(a*)*b", "b", true},
      {"(a*)*b", "aaa", false},
      {"\\W\\S\\D", "..a", true},
      {"\\W\\S\\D", "a.a", false},
      {"a\\$", "a$", true},
      {"a\\$", "a", false},
  };
  for (const Case &c : cases)
    EXPECT_EQ(NameRegex(c.pattern).fullMatch(c.name), c.matches)
        << c.pattern << " on " << c.name;
}

std::string refusal(const std::string &pattern) {
  try {
    NameRegex r(pattern);
  } catch (const RegexError &e) {
    return e.what();
  }
  return "accepted";
}

TEST(NameRegex, RefusesWhatItDoesNotImplement) {
  EXPECT_EQ(refusal("(q"), "missing ')' at position 2");
  EXPECT_EQ(refusal("a)"), "unbalanced ')' at position 1");
  EXPECT_EQ(refusal("*a"), "nothing to repeat at position 0");
  EXPECT_EQ(refusal("{2}a"), "nothing to repeat at position 0");
  EXPECT_EQ(refusal("a**"), "multiple repeat at position 2");
  EXPECT_EQ(refusal("(?=x)"),
            "'(?' (lookaround, flags, named groups) is not supported at "
            "position 1");
  EXPECT_EQ(refusal("(a)\\1"), "escape '\\1' is not supported at position 4");
  EXPECT_EQ(refusal("\\bq"), "escape '\\b' is not supported at position 1");
  EXPECT_EQ(refusal("[a"), "unterminated character class at position 0");
  EXPECT_EQ(refusal("[z-a]"), "bad character range at position 4");
  EXPECT_EQ(refusal("a{3,1}"),
            "repeat {3,1} has its maximum below its minimum at position 6");
  EXPECT_EQ(refusal("a^b"),
            "'^' is supported only at the start ('^') or end ('$') of the "
            "pattern at position 1");
  EXPECT_EQ(refusal("a\\"), "trailing backslash at position 2");
}

// std::regex overflowed the stack compiling this (SIGSEGV).
TEST(NameRegex, BoundsNesting) {
  const std::string deep =
      std::string(20000, '(') + "q" + std::string(20000, ')');
  EXPECT_EQ(refusal(deep), "groups nested deeper than 64 at position 64");
  const std::string ok = std::string(64, '(') + "q" + std::string(64, ')');
  EXPECT_TRUE(NameRegex(ok).fullMatch("q"));
}

// Repeat counts multiply the automaton; its size is bounded.
TEST(NameRegex, BoundsStates) {
  EXPECT_EQ(refusal("a{100000}"),
            "the pattern needs more than 16384 automaton states (repeat "
            "counts multiply it)");
  EXPECT_TRUE(NameRegex("a{1000}").fullMatch(std::string(1000, 'a')));
  EXPECT_FALSE(NameRegex("a{1000}").fullMatch(std::string(999, 'a')));
}

// std::regex backtracked on these for longer than anyone waits; the
// automaton's time is linear in the name.
TEST(NameRegex, NoCatastrophicBacktracking) {
  const std::string name(64, 'a');
  EXPECT_FALSE(NameRegex("((.*)*)*z").fullMatch(name));
  EXPECT_FALSE(NameRegex("(a|aa)+b").fullMatch(name));
  EXPECT_TRUE(NameRegex("(.?){25}.{25}").fullMatch(std::string(40, 'x')));
}

} // namespace
