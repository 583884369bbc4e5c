//===- KernelCache.h - NVRTC binaries cached on disk ------------*- C++ -*-===//
//
// Compiling a GPT-2 step's kernels with NVRTC takes tens of seconds; the
// CUDA backend compiles once per (source, architecture, NVRTC version,
// flags) and keeps the CUBIN on disk. An entry stores its whole key, the
// source included, and a checksum of the binary, so a hash collision, a
// truncated write or a foreign file is a miss (recompile and replace), never
// a wrong kernel. Entries are written to a temporary file and renamed, so
// concurrent runs and crashes leave either the old entry or the new one.
// Needs NVRTC only (no driver, no GPU).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_KERNELCACHE_H
#define DSC_CODEGEN_KERNELCACHE_H

#include "dsc/Codegen/Nvrtc.h"

#include <string>

namespace dsc::cuda {

/// $DSC_KERNEL_CACHE, else $XDG_CACHE_HOME/dsc/kernels, else
/// $HOME/.cache/dsc/kernels; "" when none of them is set (no caching).
std::string defaultKernelCacheDir();

struct CachedCompile {
  NvrtcResult result;   ///< as compileWithNvrtc returns it
  bool hit = false;     ///< the binary came from the cache
  std::string path;     ///< the entry's file ("" without a cache directory)
  /// Why the entry could not be read or written, when it could not (the
  /// compile itself still succeeded); "" otherwise. Worth a warning only.
  std::string cacheProblem;
};

/// The binary of `source` for `options`: from `cacheDir` when an entry with
/// the same key is there, else compiled by NVRTC and stored (when the
/// compile succeeded). An empty `cacheDir` compiles every time.
CachedCompile compileCached(const std::string &source, const std::string &name,
                            const NvrtcOptions &options,
                            const std::string &cacheDir);

} // namespace dsc::cuda

#endif // DSC_CODEGEN_KERNELCACHE_H
