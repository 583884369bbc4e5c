//===- FuzzCommon.h - What a fuzz target may and may not do ----*- C++ -*-===//
//
// Every harness feeds its input to one entry point and accepts only that
// entry point's documented error paths (dsc's own exception types). Anything
// else is a finding and aborts, so libFuzzer (or the standalone replay
// driver of the ctest smoke tests) records the input: another exception
// type, a broken invariant of an accepted input, a crash or a sanitizer
// report. libFuzzer adds hangs (-timeout) and allocations over a bound
// (-rss_limit_mb, -malloc_limit_mb).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FUZZ_FUZZCOMMON_H
#define DSC_FUZZ_FUZZCOMMON_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>
#include <typeinfo>

namespace dsc::fuzz {

[[noreturn]] inline void finding(const std::string &what) {
  std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Called from a catch-all after the accepted types were caught.
[[noreturn]] inline void unexpectedException() {
  try {
    throw;
  } catch (const std::exception &e) {
    finding(std::string("undocumented exception ") + typeid(e).name() + ": " +
            e.what());
  } catch (...) {
    finding("undocumented exception of a non-std type");
  }
}

inline void require(bool ok, const std::string &invariant) {
  if (!ok)
    finding("invariant broken: " + invariant);
}

inline std::string_view bytesOf(const uint8_t *data, size_t size) {
  return {reinterpret_cast<const char *>(data), size};
}

} // namespace dsc::fuzz

#endif // DSC_FUZZ_FUZZCOMMON_H
