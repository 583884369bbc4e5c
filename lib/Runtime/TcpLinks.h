//===- TcpLinks.h - The TCP communicator's connections ----------*- C++ -*-===//
//
// Internal to lib/Runtime (TcpLinks.cpp, TcpCommunicator.cpp): the frames
// ranks exchange, the connection to one peer (Link: a writer thread and a
// stash of frames not yet asked for), the job's connections (Links), and
// the start-up that connects every pair of ranks (connectJob).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_TCPLINKS_H
#define DSC_LIB_RUNTIME_TCPLINKS_H

#include "dsc/Runtime/TcpCommunicator.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace dsc::rt::tcp {

using Clock = std::chrono::steady_clock;

/// Tags of the collectives' own messages, above the users' 0..kMaxUserTag.
constexpr uint32_t kMaxUserTag = 32767;
constexpr uint32_t kCollectiveTag = 1u << 20, kBarrierTag = kCollectiveTag + 1;
/// A larger frame is not one of ours (a stray connection, a corrupt stream).
constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 40;

struct FrameHeader {
  uint64_t context; ///< the communicator (the job's, or a split one)
  uint32_t tag;
  uint32_t reserved;
  uint64_t bytes;
};

std::string errnoText();
/// `seconds` from now (no deadline when <= 0).
Clock::time_point deadlineAfter(double seconds);
/// Milliseconds left until `deadline` for poll() (-1: no deadline).
int pollMillis(Clock::time_point deadline);
/// Writes all of `data`; false (errno set) on error.
bool writeAll(int fd, const void *data, size_t bytes);
/// How a read ended.
enum class ReadEnd { Done, Closed, TimedOut, Failed };
/// Reads exactly `bytes` into `data` before `deadline`.
ReadEnd readAll(int fd, void *data, size_t bytes, Clock::time_point deadline);

/// The connection to one peer: its socket, a thread that writes what is
/// posted to it (so a send never waits for the peer to receive), and the
/// frames read from it that no receive has asked for yet.
class Link {
public:
  Link(int fd, int peer)
      : fd(fd), peer(peer), writer([this] { writeLoop(); }) {}
  ~Link() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    queued.notify_all();
    // A writer blocked on a peer that reads nothing any more gives up.
    ::shutdown(fd, SHUT_RDWR);
    writer.join();
    ::close(fd);
  }

  /// Queues a copy of `bytes` bytes; returns the frame's number.
  uint64_t post(uint64_t context, uint32_t tag, const void *data,
                size_t bytes) {
    Frame f;
    f.header = {context, tag, 0, bytes};
    f.payload.assign(static_cast<const char *>(data),
                     static_cast<const char *>(data) + bytes);
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure.empty())
      throw Error("sending to rank " + std::to_string(peer) + ": " + failure);
    frames.push_back(std::move(f));
    queued.notify_one();
    return ++posted;
  }

  /// Waits until frame `number` and those before it are written.
  void waitWritten(uint64_t number, Clock::time_point deadline) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!written.wait_until(lock, deadline,
                            [&] { return done >= number || !failure.empty(); }))
      throw Error("sending to rank " + std::to_string(peer) +
                  ": it has read nothing for too long (DSC_COMM_TIMEOUT "
                  "sets the limit)");
    if (!failure.empty())
      throw Error("sending to rank " + std::to_string(peer) + ": " + failure);
  }
  uint64_t lastPosted() {
    std::lock_guard<std::mutex> lock(mutex);
    return posted;
  }

  const int fd;
  const int peer; ///< the job's rank
  struct Stashed {
    uint64_t context;
    uint32_t tag;
    std::vector<char> payload;
  };
  std::deque<Stashed> stash; ///< read by the receiving (main) thread only

private:
  struct Frame {
    FrameHeader header;
    std::vector<char> payload;
  };
  void writeLoop() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      queued.wait(lock, [&] { return stopping || !frames.empty(); });
      if (frames.empty())
        return;
      Frame f = std::move(frames.front());
      frames.pop_front();
      const bool skip = !failure.empty();
      lock.unlock();
      const bool ok =
          skip || (writeAll(fd, &f.header, sizeof f.header) &&
                   writeAll(fd, f.payload.data(), f.payload.size()));
      const std::string why = ok ? "" : errnoText();
      lock.lock();
      if (!ok && failure.empty())
        failure = why + " (rank " + std::to_string(peer) +
                  " exited or failed: see its message)";
      ++done;
      written.notify_all();
    }
  }

  std::mutex mutex;
  std::condition_variable queued, written;
  std::deque<Frame> frames;
  uint64_t posted = 0, done = 0;
  std::string failure;
  bool stopping = false;
  std::thread writer;
};

/// The job's connections, shared by its communicator and those split from
/// it.
struct Links {
  int localRank = 0, localSize = 1;
  double timeoutSeconds = 45;
  std::vector<std::unique_ptr<Link>> links; ///< by job rank; null for self
  /// The contexts of this rank's communicators (main thread only). A peer
  /// sends on a split communicator only after this rank has split too: the
  /// split's frames come first on the connection, so a frame for any other
  /// context is not from a dsc rank of this job.
  std::vector<uint64_t> contexts;

  ~Links() {
    if (std::uncaught_exceptions())
      return; // ~Link shuts every connection down at once
    // A clean end: finish writing, say so (FIN), and read until every peer
    // has said so too, so that no rank closes with frames unread (a reset
    // could cost a peer frames it has not read yet).
    const auto deadline = deadlineAfter(timeoutSeconds);
    try {
      for (auto &link : links)
        if (link)
          link->waitWritten(link->lastPosted(), deadline);
    } catch (const Error &) {
      return;
    }
    for (auto &link : links)
      if (link)
        ::shutdown(link->fd, SHUT_WR);
    char sink[4096];
    for (auto &link : links) {
      if (!link)
        continue;
      for (;;) {
        pollfd pfd{link->fd, POLLIN, 0};
        if (::poll(&pfd, 1, pollMillis(deadline)) <= 0 ||
            ::recv(link->fd, sink, sizeof sink, 0) <= 0)
          break;
      }
    }
  }

  /// Receives the frame (context, tag) from job rank `peer` into `data`
  /// (exactly `bytes`), keeping frames of other receives for later.
  void take(int peer, uint64_t context, uint32_t tag, void *data, size_t bytes,
            const char *what, double patience) {
    Link &link = *links[size_t(peer)];
    for (auto it = link.stash.begin(); it != link.stash.end(); ++it) {
      if (it->context != context || it->tag != tag)
        continue;
      checkSize(peer, what, it->payload.size(), bytes);
      std::memcpy(data, it->payload.data(), bytes);
      link.stash.erase(it);
      return;
    }
    const double limit = timeoutSeconds * patience;
    const auto deadline = deadlineAfter(limit);
    for (size_t others = 0;; ++others) {
      FrameHeader h;
      read(link, &h, sizeof h, deadline, limit, what, others);
      if (!isOurs(h))
        throw Error(std::string(what) + ": rank " + std::to_string(peer) +
                    " sent a frame no rank of this job sends (communicator " +
                    std::to_string(h.context) + ", tag " +
                    std::to_string(h.tag) + ", " + std::to_string(h.bytes) +
                    " bytes): not a dsc rank's stream");
      if (h.context == context && h.tag == tag) {
        checkSize(peer, what, h.bytes, bytes);
        read(link, data, bytes, deadline, limit, what, others);
        return;
      }
      Link::Stashed s{h.context, h.tag, std::vector<char>(h.bytes)};
      read(link, s.payload.data(), h.bytes, deadline, limit, what, others);
      link.stash.push_back(std::move(s));
    }
  }

private:
  /// Whether a dsc rank of this job could have sent `h`; frames that could
  /// not are refused rather than kept for a receive that never comes.
  bool isOurs(const FrameHeader &h) const {
    const bool knownTag =
        h.tag <= kMaxUserTag || h.tag == kCollectiveTag || h.tag == kBarrierTag;
    return h.bytes <= kMaxFrameBytes && !h.reserved && knownTag &&
           std::find(contexts.begin(), contexts.end(), h.context) !=
               contexts.end();
  }
  /// Reads `bytes` from `link` before `deadline`, `limit` seconds after the
  /// receive began (the message's number), in which the peer sent `others`
  /// frames for other receives.
  void read(Link &link, void *data, size_t bytes, Clock::time_point deadline,
            double limit, const char *what, size_t others) {
    const std::string from =
        std::string(what) + ": rank " + std::to_string(link.peer);
    switch (readAll(link.fd, data, bytes, deadline)) {
    case ReadEnd::Done:
      return;
    case ReadEnd::Closed:
      throw Error(from + " closed its connection (it exited or failed: see "
                         "its message)");
    case ReadEnd::TimedOut:
      if (others)
        throw Error(from + " sent nothing for this " + what + " in " +
                    std::to_string(int(limit)) + " s, only " +
                    std::to_string(others) +
                    (others == 1 ? " frame" : " frames") +
                    " for other receives (the ranks run different steps?; "
                    "DSC_COMM_TIMEOUT sets the limit)");
      throw Error(from + " sent nothing for " + std::to_string(int(limit)) +
                  " s: it stopped or fell behind (DSC_COMM_TIMEOUT sets the "
                  "limit)");
    case ReadEnd::Failed:
      throw Error(from + ": " + errnoText());
    }
  }
  void checkSize(int peer, const char *what, size_t got, size_t want) const {
    if (got != want)
      throw Error(std::string(what) + ": rank " + std::to_string(peer) +
                  " sent " + std::to_string(got) + " bytes where " +
                  std::to_string(want) +
                  " were expected (the ranks run different steps?)");
  }
};

/// Connects this rank to every other rank of `job` (rank 0 hands out the
/// addresses), refusing whatever is not a dsc rank of this job and build.
std::shared_ptr<Links> connectJob(const TcpJob &job);

} // namespace dsc::rt::tcp

#endif // DSC_LIB_RUNTIME_TCPLINKS_H
