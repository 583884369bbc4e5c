//===- SwapIo.h - The request queues of ZeRO-Infinity's swap file -*- C++ -*-===//
//
// How a transfer between memory and the swap file (opened with O_DIRECT)
// is cut into requests and kept in flight, with the knobs of DeepSpeed's
// `aio` section: requests of `block_size` bytes, each through an aligned
// staging slot; `intra_op_parallelism` (formerly `thread_count`) threads,
// each moving a contiguous share of the transfer; `queue_depth` requests
// in flight per thread on an io_uring ring; `single_submit` submits each
// request on its own; `overlap_events` submits the next request as soon
// as one completes (otherwise a whole queue of them completes first).
//
// Where the kernel refuses io_uring (old kernels, seccomp, the
// io_uring_disabled sysctl), or AioOptions::blockingCalls or
// DSC_SWAP_IO=threads asks for it, each thread issues blocking
// pread/pwrite calls instead: one request in flight per thread.
//
//===----------------------------------------------------------------------===//

#ifndef DSC_RUNTIME_SWAPIO_H
#define DSC_RUNTIME_SWAPIO_H

#include "dsc/Runtime/SwapQueues.h"

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <atomic>
#include <thread>
#include <vector>

namespace dsc::rt {

class SwapIo {
public:
  enum class Engine { IoUring, BlockingCalls };

  /// Queues on `fd` (opened with O_DIRECT); `what` names the file in
  /// errors. Says on stderr, once, when io_uring is unavailable.
  SwapIo(int fd, const AioOptions &options, std::string what);
  ~SwapIo();
  SwapIo(const SwapIo &) = delete;
  SwapIo &operator=(const SwapIo &) = delete;

  /// What moves the bytes now: io_uring, or blocking calls once any
  /// thread's ring has failed and could not be made again (said on
  /// stderr; the other threads keep their rings).
  Engine engine() const { return kind.load(); }
  const AioOptions &options() const { return opts; }

  /// Moves `bytes` between `data` and the file at `offset` (a multiple of
  /// the 4096-byte alignment); a write pads its last request with zeros
  /// up to the next multiple. One transfer at a time.
  void transfer(bool write, int64_t offset, char *data, int64_t bytes);

  static constexpr int64_t kAlignment = 4096;

  /// Moves all `bytes` between `data` and `fd` at `offset` with blocking
  /// pread/pwrite calls (retried on EINTR and short transfers); returns 0
  /// or the errno that stopped it (EIO: the file ended).
  static int blockingTransfer(int fd, bool write, char *data, int64_t bytes,
                              int64_t offset);

private:
  struct Queue;
  struct Share {
    int64_t offset = 0;
    char *data = nullptr;
    int64_t bytes = 0;
  };
  void serve(size_t worker);
  /// Stops and joins the helper threads.
  void stop();
  [[noreturn]] void fail(const std::string &action, int err) const;

  int fd;
  AioOptions opts;
  std::string what;
  std::atomic<Engine> kind{Engine::IoUring};
  /// One per thread; queue 0 is the calling thread's.
  std::vector<std::unique_ptr<Queue>> queues;

  // The helper threads of intra-op parallelism (queues 1..n-1).
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, finished;
  std::vector<Share> shares;
  bool writing = false;
  uint64_t generation = 0;
  size_t busy = 0;
  bool stopping = false;
  std::exception_ptr error;
  std::mutex oneTransfer;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_SWAPIO_H
