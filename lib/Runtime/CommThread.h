//===- CommThread.h - Collectives beside the compute -------------*- C++ -*-===//
//
// overlap_comm on CPU ranks: the CPU backend hands a function's
// collectives to one communication thread, in program order (so every
// rank still issues them in the same order), and runs the following
// instructions meanwhile. An instruction waits only for the queued
// collectives whose memory it touches: bytes a collective writes that the
// instruction reads or writes, or bytes it reads that the instruction
// writes (the memory plan reuses arena bytes, so hazards are checked on
// byte ranges, not buffer ids). The function's end waits for all.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_COMMTHREAD_H
#define DSC_LIB_RUNTIME_COMMTHREAD_H

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace dsc::rt {

/// Byte ranges [begin, end) of memory an instruction reads or writes.
using ByteRanges = std::vector<std::pair<uintptr_t, uintptr_t>>;

class CommThread {
public:
  CommThread();
  ~CommThread();
  CommThread(const CommThread &) = delete;
  CommThread &operator=(const CommThread &) = delete;

  /// Queues `work` (a collective) that reads `reads` and writes `writes`.
  void submit(std::function<void()> work, ByteRanges reads, ByteRanges writes);
  /// Returns once no queued collective conflicts with an instruction that
  /// reads `reads` and writes `writes` (waiting for the conflicting one and
  /// everything queued before it). Rethrows a collective's error (and
  /// every later call does: the collectives queued after it are skipped).
  void waitFor(const ByteRanges &reads, const ByteRanges &writes);
  /// Waits for every queued collective; rethrows the first error.
  void drain();

private:
  struct Task {
    uint64_t ticket;
    std::function<void()> work;
    ByteRanges reads, writes;
  };
  void loop();
  void waitUntilDone(uint64_t ticket);

  std::mutex mutex;
  std::condition_variable changed;
  std::deque<Task> queue;   ///< not yet finished (front: running or next)
  uint64_t submitted = 0, done = 0;
  std::exception_ptr failure;
  bool stopping = false;
  std::thread worker;
};

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_COMMTHREAD_H
