//===- TokenFileFuzzer.cpp - rt::TokenFile::parse and batch ---------------===//
//
// Input: [format][B][T][step: 8 bytes][slice][slices] then the file's bytes.
// format % 3 picks the name: .bin (llm.c or raw uint16), .tok (raw uint16)
// or .txt (bytes). Accepted: rt::Error from parse and batch. An accepted
// file holds tokens in range; batch writes exactly B*T inputs and targets,
// the targets being the inputs shifted by one.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "dsc/Runtime/IO.h"

#include <cstring>
#include <vector>

using namespace dsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  constexpr size_t kPrefix = 13;
  if (size < kPrefix)
    return 0;
  static const char *const names[] = {"fuzz.bin", "fuzz.tok", "fuzz.txt"};
  const std::string name = names[data[0] % 3];
  const int64_t B = 1 + data[1] % 8, T = 1 + data[2] % 16;
  uint64_t stepBits;
  std::memcpy(&stepBits, data + 3, 8);
  const int64_t step = int64_t(stepBits >> 1); // any non-negative int64
  const int64_t slices = 1 + data[12] % 4, slice = data[11] % slices;
  const std::string_view file = fuzz::bytesOf(data + kPrefix, size - kPrefix);

  rt::TokenFile tf;
  try {
    tf = rt::TokenFile::parse(file, name);
  } catch (const rt::Error &) {
    return 0;
  } catch (...) {
    fuzz::unexpectedException();
  }
  const int32_t limit = name == "fuzz.txt" ? 255 : 65535;
  for (int32_t t : tf.data())
    fuzz::require(t >= 0 && t <= limit, "token out of range");
  fuzz::require(name != "fuzz.txt" || tf.size() == int64_t(file.size()),
                ".txt: one token per byte");
  fuzz::require(name == "fuzz.txt" || tf.size() <= int64_t(file.size() / 2),
                "more tokens than the file holds");

  // Exactly B*T elements each: ASan reports a write past them.
  std::vector<int32_t> inputs(size_t(B * T)), targets(size_t(B * T));
  try {
    tf.batch(step, slice, slices, B, T, inputs.data(), targets.data());
  } catch (const rt::Error &) {
    fuzz::require(tf.size() < slices * B * T + 2,
                  "batch refused a file long enough");
    return 0;
  } catch (...) {
    fuzz::unexpectedException();
  }
  for (int64_t i = 0; i + 1 < B * T; ++i)
    fuzz::require(targets[size_t(i)] == inputs[size_t(i + 1)],
                  "targets are not the inputs shifted by one");
  return 0;
}
