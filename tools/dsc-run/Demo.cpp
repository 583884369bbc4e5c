//===- Demo.cpp - Data for the built-in default job -----------------------===//

#include "Demo.h"

#include "dsc/Support/Philox.h"

#include <cstdio>

std::string dsc::makeCountingText(uint64_t seed, int64_t numLines) {
  std::string text;
  auto key = philoxKey(seed);
  char number[8];
  for (int64_t i = 0; i < numLines; ++i) {
    PhiloxBlock r = philox4x32_10({uint32_t(i), 0xc0de, 0, 0}, key);
    // Numbers of varying width on lines of varying length: with fixed-width
    // fields every batch row would start at the same phase of the text, and
    // the position embeddings would learn the phase instead of the task.
    int count = 3 + int(r[1] % 6);
    int start = int(r[0] % (1000 - count));
    for (int k = 0; k < count; ++k) {
      std::snprintf(number, sizeof number, "%d", start + k);
      text += number;
      text += k + 1 < count ? ' ' : '\n';
    }
  }
  return text;
}

std::vector<int32_t> dsc::bytesToTokens(const std::string &text) {
  std::vector<int32_t> tokens;
  tokens.reserve(text.size());
  for (unsigned char c : text)
    tokens.push_back(c);
  return tokens;
}
