//===- CheckpointFuzzer.cpp - checkpoint metadata checks ------------------===//
//
// What Trainer::loadCheckpoint checks before it trusts a file's metadata
// (rt::checkCheckpointFormat, rt::parseCheckpointCounters). Input: a first
// byte, then either (even) a whole safetensors file whose __metadata__ is
// checked, or (odd) "key=value" lines taken as the metadata directly.
// Accepted: rt::Error. Accepted counters satisfy 0 <= skipped <= step <= 2^53 and
// are the numbers their text spells.
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "dsc/Runtime/IO.h"

using namespace dsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1)
    return 0;
  const std::string_view rest = fuzz::bytesOf(data + 1, size - 1);
  std::map<std::string, std::string> metadata;
  if (data[0] % 2 == 0) {
    try {
      metadata = rt::Safetensors::parse(rest, "fuzz.safetensors").metadata;
    } catch (const rt::Error &) {
      return 0;
    } catch (...) {
      fuzz::unexpectedException();
    }
  } else {
    size_t pos = 0;
    while (pos < rest.size()) {
      size_t end = rest.find('\n', pos);
      if (end == std::string_view::npos)
        end = rest.size();
      std::string_view line = rest.substr(pos, end - pos);
      size_t eq = line.find('=');
      if (eq != std::string_view::npos)
        metadata[std::string(line.substr(0, eq))] =
            std::string(line.substr(eq + 1));
      pos = end + 1;
    }
  }
  rt::CheckpointCounters c;
  try {
    rt::checkCheckpointFormat(metadata, "fuzz.safetensors");
    c = rt::parseCheckpointCounters(metadata, "fuzz.safetensors");
  } catch (const rt::Error &) {
    return 0;
  } catch (...) {
    fuzz::unexpectedException();
  }
  fuzz::require(c.step >= 0 && c.step <= (int64_t(1) << 53),
                "accepted step " + std::to_string(c.step) + " from '" +
                    metadata["step"] + "'");
  fuzz::require(c.skipped >= 0 && c.skipped <= c.step,
                "accepted skipped steps outside [0, step]");
  // The value is the decimal number spelled (leading zeros aside).
  auto spells = [](const std::string &text, uint64_t v) {
    size_t i = 0;
    while (i + 1 < text.size() && text[i] == '0')
      ++i;
    return text.substr(i) == std::to_string(v);
  };
  fuzz::require(spells(metadata["step"], uint64_t(c.step)),
                "step is not the number its text spells");
  fuzz::require(spells(metadata["seed"], c.seed),
                "seed is not the number its text spells");
  if (metadata.count("skipped_steps"))
    fuzz::require(spells(metadata["skipped_steps"], uint64_t(c.skipped)),
                  "skipped_steps is not the number its text spells");
  return 0;
}
