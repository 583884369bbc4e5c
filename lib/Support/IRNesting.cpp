//===- IRNesting.cpp - Bound the nesting of MLIR text --------------------===//

#include "dsc/Support/IRNesting.h"
#include "dsc/Support/Files.h"

namespace dsc {

void checkIRNesting(std::string_view text, const std::string &name) {
  int depth = 0, line = 1;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    switch (c) {
    case '\n':
      ++line;
      break;
    case '"': // a string literal: skip to its closing quote
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\')
          ++i;
        else if (text[i] == '\n')
          ++line;
      }
      break;
    case '/': // a comment: skip to the end of the line
      if (i + 1 < text.size() && text[i + 1] == '/')
        while (i + 1 < text.size() && text[i + 1] != '\n')
          ++i;
      break;
    case '-': // "->" is an arrow, not a closing bracket
      if (i + 1 < text.size() && text[i + 1] == '>')
        ++i;
      break;
    case '{':
    case '(':
    case '[':
    case '<':
      if (++depth > kMaxIRNesting)
        throw FileError(name + ":" + std::to_string(line) +
                        ": IR nested deeper than " +
                        std::to_string(kMaxIRNesting) +
                        " levels (brackets, braces, parentheses or angle "
                        "brackets)");
      break;
    case '}':
    case ')':
    case ']':
    case '>':
      if (depth > 0)
        --depth;
      break;
    default:
      break;
    }
  }
}

} // namespace dsc
