//===- SafetensorsFuzzer.cpp - rt::Safetensors::parse ---------------------===//
//
// The input is a whole safetensors file. Accepted: rt::Error. An accepted
// file must hold only tensors whose shape is non-negative and whose bytes
// are exactly product(shape) * dtypeSize (what the loaders memcpy).
//
//===----------------------------------------------------------------------===//

#include "FuzzCommon.h"

#include "dsc/Runtime/IO.h"

#include <algorithm>

using namespace dsc;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  rt::Safetensors st;
  try {
    st = rt::Safetensors::parse(fuzz::bytesOf(data, size), "fuzz.safetensors");
  } catch (const rt::Error &) {
    return 0;
  } catch (...) {
    fuzz::unexpectedException();
  }
  for (const auto &[name, t] : st.tensors) {
    // product(shape), saturating at 2^64 (a 0 anywhere makes it 0).
    unsigned __int128 numel = 1;
    bool zero = false;
    for (int64_t d : t.shape) {
      fuzz::require(d >= 0, "tensor '" + name + "' has a negative dimension " +
                                std::to_string(d));
      zero |= d == 0;
      numel = std::min<unsigned __int128>(numel * uint64_t(d),
                                          (unsigned __int128)1 << 64);
    }
    if (zero)
      numel = 0;
    fuzz::require(numel * rt::dtypeSize(t.dtype) == t.bytes.size(),
                  "tensor '" + name + "' holds " +
                      std::to_string(t.bytes.size()) +
                      " bytes, not product(shape) * dtype size");
    fuzz::require(!st.skipped.count(name),
                  "tensor '" + name + "' both loaded and skipped");
  }
  return 0;
}
