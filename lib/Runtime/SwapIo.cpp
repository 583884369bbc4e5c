//===- SwapIo.cpp - The request queues of ZeRO-Infinity's swap file -------===//

#include "SwapIo.h"

#include "dsc/Support/Error.h"

#include <liburing.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

namespace dsc::rt {

namespace {

int64_t roundUp(int64_t n, int64_t to) { return (n + to - 1) / to * to; }

void freeAligned(char *p) { std::free(p); }

/// DSC_SWAP_IO: "threads" asks for blocking calls; unset or "io_uring"
/// for io_uring where the kernel allows it.
bool blockingCallsAsked() {
  const char *v = std::getenv("DSC_SWAP_IO");
  if (!v || !*v || std::string(v) == "io_uring")
    return false;
  if (std::string(v) == "threads")
    return true;
  throw Error(std::string("DSC_SWAP_IO='") + v +
              "': expected io_uring or threads");
}

} // namespace

/// One thread's requests: its staging slots (one block each, aligned for
/// O_DIRECT) and, with io_uring, its ring.
struct SwapIo::Queue {
  struct Request {
    int64_t fileOffset = 0;
    char *data = nullptr;
    int64_t bytes = 0; ///< of data
    int64_t whole = 0; ///< bytes and the padding to the alignment
    int64_t done = 0;
  };

  Queue(SwapIo &io, bool useRing) : io(io) {
    const int64_t slotCount = useRing ? io.opts.queueDepth : 1;
    void *p = nullptr;
    if (posix_memalign(&p, size_t(kAlignment),
                       size_t(slotCount * io.opts.blockSize)) != 0)
      throw Error(io.what + ": cannot allocate " +
                  std::to_string(slotCount * io.opts.blockSize) +
                  " bytes of aligned staging buffers");
    staging = {static_cast<char *>(p), &freeAligned};
    requests.resize(size_t(slotCount));
    if (useRing) {
      ringError = -io_uring_queue_init(unsigned(slotCount), &ring, 0);
      hasRing = ringError == 0;
    }
  }
  ~Queue() {
    if (hasRing)
      io_uring_queue_exit(&ring);
    // Requests an abandoned ring never reaped may still write into the
    // staging slots after its file closes: never hand that memory back.
    if (abandonedErr != 0)
      (void)staging.release();
  }

  char *slot(size_t s) const {
    return staging.get() + int64_t(s) * io.opts.blockSize;
  }

  /// Fills slot `s` with the next request of the share.
  void prepare(size_t s, bool write, int64_t fileOffset, char *data,
               int64_t bytes) {
    Request &r = requests[s];
    r = {fileOffset, data, bytes, roundUp(bytes, kAlignment), 0};
    if (write) {
      std::memcpy(slot(s), data, size_t(bytes));
      std::memset(slot(s) + bytes, 0, size_t(r.whole - bytes));
    }
  }

  void run(bool write, const Share &share) {
    if (abandonedErr != 0)
      io.fail(write ? "writing (the queue failed earlier)"
                    : "reading (the queue failed earlier)",
              abandonedErr);
    if (share.bytes > 0)
      hasRing ? runOnRing(write, share) : runBlocking(write, share);
  }

  /// Blocking pread/pwrite, one request at a time.
  void runBlocking(bool write, const Share &share) {
    for (int64_t at = 0; at < share.bytes; at += io.opts.blockSize) {
      prepare(0, write, share.offset + at, share.data + at,
              std::min(io.opts.blockSize, share.bytes - at));
      const Request &r = requests[0];
      if (int err = blockingTransfer(io.fd, write, slot(0), r.whole,
                                     r.fileOffset))
        io.fail(write ? "writing" : "reading", err);
      if (!write)
        std::memcpy(r.data, slot(0), size_t(r.bytes));
    }
  }

  /// Up to queue_depth requests in flight on the ring. An error stops new
  /// requests; the ones in flight complete before it is reported, so the
  /// ring is empty for the next transfer.
  void runOnRing(bool write, const Share &share) {
    std::vector<size_t> idle;
    for (size_t s = requests.size(); s-- > 0;)
      idle.push_back(s);
    int64_t issued = 0;
    int inFlight = 0, unsubmitted = 0, err = 0;
    auto queueRest = [&](size_t s) {
      Request &r = requests[s];
      io_uring_sqe *sqe = io_uring_get_sqe(&ring); // never full: one per slot
      if (write)
        io_uring_prep_write(sqe, io.fd, slot(s) + r.done,
                            unsigned(r.whole - r.done),
                            uint64_t(r.fileOffset + r.done));
      else
        io_uring_prep_read(sqe, io.fd, slot(s) + r.done,
                           unsigned(r.whole - r.done),
                           uint64_t(r.fileOffset + r.done));
      io_uring_sqe_set_data64(sqe, s);
      ++unsubmitted;
      if (io.opts.singleSubmit)
        submit(unsubmitted, inFlight, err);
    };
    while (err == 0 &&
           (issued < share.bytes || inFlight > 0 || unsubmitted > 0)) {
      if (io.opts.overlapEvents || inFlight == 0) {
        while (err == 0 && issued < share.bytes && !idle.empty()) {
          const size_t s = idle.back();
          idle.pop_back();
          const int64_t n = std::min(io.opts.blockSize, share.bytes - issued);
          prepare(s, write, share.offset + issued, share.data + issued, n);
          issued += n;
          queueRest(s);
        }
        submit(unsubmitted, inFlight, err);
      }
      // overlap_events: refill as each request completes; otherwise the
      // whole queue completes first.
      for (int wanted = io.opts.overlapEvents ? 1 : inFlight;
           wanted > 0 && inFlight > 0; --wanted) {
        const auto [s, res] = reap(inFlight);
        if (s == kNoSlot) {
          err = err ? err : -res;
          break;
        }
        Request &r = requests[s];
        if (res == -EINTR || res == -EAGAIN) {
          if (err == 0)
            queueRest(s);
          continue;
        }
        if (res <= 0) {
          err = err ? err : (res < 0 ? -res : EIO);
          continue;
        }
        r.done += res;
        if (r.done < r.whole) {
          if (err == 0)
            queueRest(s);
          continue;
        }
        if (!write)
          std::memcpy(r.data, slot(s), size_t(r.bytes));
        idle.push_back(s);
      }
    }
    while (inFlight > 0 && abandonedErr == 0)
      reap(inFlight);
    if (err != 0) {
      // Requests prepared but never submitted must not leak into the next
      // transfer: start over with a fresh ring. (After a failed wait the
      // queue is abandoned instead: requests it could not reap may still
      // land in the staging slots.)
      if (unsubmitted > 0 && abandonedErr == 0)
        rebuildRing();
      io.fail(write ? "writing" : "reading", err);
    }
  }

  void rebuildRing() {
    io_uring_queue_exit(&ring);
    ringError = -io_uring_queue_init(unsigned(requests.size()), &ring, 0);
    hasRing = ringError == 0;
    if (!hasRing) {
      io.kind = SwapIo::Engine::BlockingCalls;
      std::fprintf(stderr,
                   "dsc: io_uring failed and cannot be set up again (%s): "
                   "a share of %s is moved by blocking pread/pwrite from "
                   "now on\n",
                   std::strerror(ringError), io.what.c_str());
    }
  }

  void submit(int &unsubmitted, int &inFlight, int &err) {
    while (unsubmitted > 0 && err == 0) {
      const int k = io_uring_submit(&ring);
      if (k == -EINTR)
        continue;
      if (k == -EAGAIN) { // the kernel is short of resources: let it drain
        std::this_thread::sleep_for(std::chrono::microseconds(50));
        continue;
      }
      if (k < 0) {
        err = -k;
        break;
      }
      unsubmitted -= k;
      inFlight += k;
    }
  }

  /// The next completion: (slot, result). When the wait itself fails the
  /// result is that error on no request (kNoSlot), and the queue is
  /// abandoned: every later transfer fails with it, since requests it can
  /// no longer reap may still write into its staging slots.
  std::pair<size_t, int> reap(int &inFlight) {
    io_uring_cqe *cqe = nullptr;
    int k;
    while ((k = io_uring_wait_cqe(&ring, &cqe)) == -EINTR) {
    }
    if (k < 0) {
      abandonedErr = -k;
      inFlight = 0;
      return {kNoSlot, k};
    }
    const std::pair<size_t, int> done{size_t(io_uring_cqe_get_data64(cqe)),
                                      cqe->res};
    io_uring_cqe_seen(&ring, cqe);
    --inFlight;
    return done;
  }

  SwapIo &io;
  std::unique_ptr<char, void (*)(char *)> staging{nullptr, nullptr};
  std::vector<Request> requests;
  static constexpr size_t kNoSlot = ~size_t(0);
  io_uring ring{};
  bool hasRing = false;
  int abandonedErr = 0; ///< why the ring's completions cannot be read
  int ringError = 0; ///< why the ring could not be made (errno)
};

SwapIo::SwapIo(int fd, const AioOptions &options, std::string what)
    : fd(fd), opts(options), what(std::move(what)) {
  // The config's bounds (OffloadConfig.cpp), checked again for a
  // hand-edited step: a request's length must fit the kernel's largest
  // read, a ring's depth io_uring's.
  if (opts.blockSize < kAlignment || opts.blockSize % kAlignment != 0 ||
      opts.blockSize > (int64_t(1) << 28) || opts.queueDepth < 1 ||
      opts.queueDepth > 4096 || opts.threads < 1 || opts.threads > 256)
    throw Error(this->what + ": aio block_size " +
                std::to_string(opts.blockSize) + ", queue_depth " +
                std::to_string(opts.queueDepth) + ", threads " +
                std::to_string(opts.threads) +
                ": expected a multiple of 4096 up to 256 MiB, a depth in "
                "[1, 4096] and [1, 256] threads");
  const bool blocking = opts.blockingCalls || blockingCallsAsked();
  for (int64_t t = 0; t < opts.threads; ++t) {
    queues.push_back(
        std::make_unique<Queue>(*this, !blocking && kind == Engine::IoUring));
    if (!blocking && t == 0 && !queues[0]->hasRing) {
      std::fprintf(stderr,
                   "dsc: io_uring is unavailable (%s): %s is read and "
                   "written by %lld thread(s) of pread/pwrite, one request "
                   "each in flight\n",
                   std::strerror(queues[0]->ringError), this->what.c_str(),
                   static_cast<long long>(opts.threads));
      kind = Engine::BlockingCalls;
    }
  }
  if (blocking)
    kind = Engine::BlockingCalls;
  shares.resize(queues.size());
  try {
    for (size_t w = 1; w < queues.size(); ++w)
      workers.emplace_back([this, w] { serve(w); });
  } catch (...) {
    // No destructor runs for a half-made SwapIo: stop what started.
    stop();
    throw;
  }
}

SwapIo::~SwapIo() {
  std::lock_guard<std::mutex> one(oneTransfer);
  stop();
}

void SwapIo::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wake.notify_all();
  for (std::thread &t : workers)
    t.join();
}

int SwapIo::blockingTransfer(int fd, bool write, char *data, int64_t bytes,
                             int64_t offset) {
  for (int64_t done = 0; done < bytes;) {
    const ssize_t k =
        write ? pwrite(fd, data + done, size_t(bytes - done), off_t(offset + done))
              : pread(fd, data + done, size_t(bytes - done), off_t(offset + done));
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return k < 0 ? errno : EIO;
    done += k;
  }
  return 0;
}

void SwapIo::fail(const std::string &action, int err) const {
  throw Error(what + ": " + action + " the swap file: " + std::strerror(err));
}

void SwapIo::serve(size_t worker) {
  uint64_t seen = 0;
  std::unique_lock<std::mutex> lock(mutex);
  for (;;) {
    wake.wait(lock, [&] { return stopping || generation != seen; });
    if (stopping)
      return;
    seen = generation;
    const Share share = shares[worker];
    const bool write = writing;
    lock.unlock();
    std::exception_ptr failure;
    try {
      queues[worker]->run(write, share);
    } catch (...) {
      failure = std::current_exception();
    }
    lock.lock();
    if (failure && !error)
      error = failure;
    if (--busy == 0)
      finished.notify_all();
  }
}

void SwapIo::transfer(bool write, int64_t offset, char *data, int64_t bytes) {
  std::lock_guard<std::mutex> one(oneTransfer);
  // Each thread moves a contiguous run of whole blocks.
  const int64_t blocks = (bytes + opts.blockSize - 1) / opts.blockSize;
  const int64_t n = int64_t(queues.size());
  const int64_t per = (blocks + n - 1) / n * opts.blockSize;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t at = std::min(bytes, t * per);
    shares[size_t(t)] = {offset + at, data + at,
                         std::min(per, bytes - at)};
  }
  if (n > 1) {
    std::lock_guard<std::mutex> lock(mutex);
    writing = write;
    error = nullptr;
    busy = size_t(n - 1);
    ++generation;
  }
  wake.notify_all();
  std::exception_ptr failure;
  try {
    queues[0]->run(write, shares[0]);
  } catch (...) {
    failure = std::current_exception();
  }
  if (n > 1) {
    std::unique_lock<std::mutex> lock(mutex);
    finished.wait(lock, [&] { return busy == 0; });
    if (!failure)
      failure = error;
  }
  if (failure)
    std::rethrow_exception(failure);
}

} // namespace dsc::rt
