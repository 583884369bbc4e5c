//===- AioOptions.h - DeepSpeed's aio section: the swap file's queues -----===//
//
// The shape of the request queues that read and write ZeRO-Infinity's swap
// file: parsed from a config's `aio` section (lib/Frontend/OffloadConfig.cpp),
// recorded on the compiled step as dsc.aio_* attributes, and run by
// lib/Runtime/SwapIo.h. One struct for all three.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_SUPPORT_AIOOPTIONS_H
#define DSC_SUPPORT_AIOOPTIONS_H

#include <cstdint>

namespace dsc {

struct AioOptions {
  int64_t blockSize = int64_t(1) << 20; ///< aio.block_size: bytes per request
  int64_t queueDepth = 8; ///< aio.queue_depth: requests in flight per thread
  /// aio.intra_op_parallelism (DeepSpeed's newer name of thread_count):
  /// threads splitting a transfer
  int64_t threads = 1;
  bool singleSubmit = false; ///< aio.single_submit: submit one by one
  bool overlapEvents = true; ///< aio.overlap_events: refill as each completes
  /// Not a config key: blocking pread/pwrite calls instead of io_uring (one
  /// request in flight per thread), as DSC_SWAP_IO=threads asks and
  /// swap-bench's one-request-at-a-time peer uses.
  bool blockingCalls = false;
};

} // namespace dsc

#endif // DSC_SUPPORT_AIOOPTIONS_H
