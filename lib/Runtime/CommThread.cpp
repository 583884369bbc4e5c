//===- CommThread.cpp - Collectives beside the compute --------------------===//

#include "CommThread.h"

namespace dsc::rt {

namespace {

bool overlaps(const ByteRanges &a, const ByteRanges &b) {
  for (const auto &[b0, e0] : a)
    for (const auto &[b1, e1] : b)
      if (b0 < e1 && b1 < e0)
        return true;
  return false;
}

} // namespace

CommThread::CommThread() : worker([this] { loop(); }) {}

CommThread::~CommThread() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  worker.join();
}

void CommThread::loop() {
  for (;;) {
    std::function<void()> work;
    {
      std::unique_lock<std::mutex> lock(mutex);
      changed.wait(lock, [&] { return stopping || done < submitted; });
      if (done == submitted)
        return; // stopping with nothing queued
      work = queue.front().work;
    }
    std::exception_ptr error;
    try {
      // After a failure the rest are skipped: the job is ending.
      if (!failure)
        work();
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (error && !failure)
        failure = error;
      queue.pop_front();
      ++done;
    }
    changed.notify_all();
  }
}

void CommThread::submit(std::function<void()> work, ByteRanges reads,
                        ByteRanges writes) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    queue.push_back({++submitted, std::move(work), std::move(reads),
                     std::move(writes)});
  }
  changed.notify_all();
}

void CommThread::waitUntilDone(uint64_t ticket) {
  std::unique_lock<std::mutex> lock(mutex);
  changed.wait(lock, [&] { return done >= ticket; });
  if (failure)
    std::rethrow_exception(failure);
}

void CommThread::waitFor(const ByteRanges &reads, const ByteRanges &writes) {
  uint64_t last = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (failure)
      std::rethrow_exception(failure);
    for (const Task &t : queue)
      if (overlaps(t.writes, reads) || overlaps(t.writes, writes) ||
          overlaps(t.reads, writes))
        last = t.ticket;
  }
  if (last)
    waitUntilDone(last);
}

void CommThread::drain() {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mutex);
    last = submitted;
  }
  waitUntilDone(last);
}

} // namespace dsc::rt
