//===- SwapQueues.h - ZeRO-Infinity's swap-file queues, and their timing -===//
//
// The shape of the request queues that read and write ZeRO-Infinity's swap
// file (DeepSpeed's `aio` section; lib/Runtime/SwapIo.h runs them), and a
// measurement of what a shape achieves on a directory's file system
// (`dsc-run swap-bench`).
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SWAPQUEUES_H
#define DSC_RUNTIME_SWAPQUEUES_H

#include "dsc/Support/AioOptions.h"

#include <cstdint>
#include <string>

namespace dsc::rt {

/// DeepSpeed's `aio` section (dsc/Support/AioOptions.h).
using dsc::AioOptions;

/// What writing and then reading a swap file took.
struct SwapTimes {
  double writeSeconds = 0;
  double readSeconds = 0;
  bool direct = false;  ///< O_DIRECT (false: through the page cache)
  std::string engine;   ///< "io_uring" or "pread/pwrite"
};

/// Writes `bytes` of a pattern to a new swap file in `dir` in transfers of
/// at most `transferBytes` (the step swaps tensor by tensor), reads them
/// back, and checks them; the best of `repeats`. Throws an Error naming
/// `dir` when it cannot, or when the bytes read differ.
SwapTimes timeSwapQueues(const std::string &dir, int64_t bytes,
                         int64_t transferBytes, const AioOptions &aio,
                         int repeats);

} // namespace dsc::rt

#endif // DSC_RUNTIME_SWAPQUEUES_H
