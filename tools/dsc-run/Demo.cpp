//===- Demo.cpp - Data for the built-in default job -----------------------===//

#include "Demo.h"

#include "dsc/Runtime/Philox.h"

std::string dsc::makeAdditionText(uint64_t seed, int64_t numLines) {
  std::string text;
  auto key = rt::philoxKey(seed);
  for (int64_t i = 0; i < numLines; ++i) {
    rt::PhiloxBlock r = rt::philox4x32_10({uint32_t(i), 0x0add, 0, 0}, key);
    int a = int(r[0] % 100), b = int(r[1] % 100);
    text += std::to_string(a) + "+" + std::to_string(b) + "=" +
            std::to_string(a + b) + "\n";
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
