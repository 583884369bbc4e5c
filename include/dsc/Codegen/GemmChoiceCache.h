//===- GemmChoiceCache.h - Timed cuBLASLt algorithm choices on disk -*- C++ -*-===//
//
// The CUDA backend times the first few algorithms cuBLASLt's heuristic
// proposes for each GEMM shape once and keeps the fastest. The choice is
// stored beside the kernel cache, one small file per GEMM key (device,
// cuBLASLt version, the whole descriptor), so a later run of any model
// with that GEMM skips the timing. A file whose stored key differs (a hash
// collision), or that is truncated or foreign, is a miss; writes go
// through a temporary file and a rename. Needs no CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_GEMMCHOICECACHE_H
#define DSC_CODEGEN_GEMMCHOICECACHE_H

#include <optional>
#include <string>

namespace dsc::cuda {

/// Which of the heuristic's candidates (in its order) ran fastest, and its
/// time.
struct GemmChoice {
  int candidate = 0;
  double microseconds = 0.0;
};

/// The choice stored for `key` under `cacheDir`, if there is one with
/// exactly this key ("" cacheDir: none).
std::optional<GemmChoice> loadGemmChoice(const std::string &cacheDir,
                                         const std::string &key);

/// Stores `choice` for `key` under `cacheDir`; returns why it could not,
/// or "" (also for an empty cacheDir, which stores nothing).
std::string storeGemmChoice(const std::string &cacheDir,
                            const std::string &key, const GemmChoice &choice);

} // namespace dsc::cuda

#endif // DSC_CODEGEN_GEMMCHOICECACHE_H
