//===- TcpCommunicator.cpp - Collectives over TCP, torchrun-style ---------===//

#include "TcpCommunicator.h"

#include "Launcher.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace dsc::rt {

namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMagic = 0x64736331; // "dsc1"
/// Changes whenever a start-up message or the frame header changes shape.
constexpr uint32_t kProtocolVersion = 2;
/// Tags of the collectives' own messages, above the users' 0..kMaxUserTag.
constexpr uint32_t kMaxUserTag = 32767;
constexpr uint32_t kCollectiveTag = 1u << 20, kBarrierTag = kCollectiveTag + 1;
/// A larger frame is not one of ours (a stray connection, a corrupt stream).
constexpr uint64_t kMaxFrameBytes = uint64_t(1) << 40;
constexpr size_t kHostBytes = 64;

struct FrameHeader {
  uint64_t context; ///< the communicator (the job's, or a split one)
  uint32_t tag;
  uint32_t reserved;
  uint64_t bytes;
};

/// Opens every start-up message, so that whatever else answers on a port
/// (another program, another dsc build, a rank of another job) is refused
/// at once instead of being read as addresses or frames.
struct Stamp {
  uint32_t magic, version;
  int32_t worldSize, rank; ///< the sender's
};

Stamp stampOf(int worldSize, int rank) {
  return {kMagic, kProtocolVersion, worldSize, rank};
}

/// What a rank tells rank 0 when it joins.
struct Hello {
  Stamp stamp;
  uint32_t listenPort;
  char host[kHostBytes];
};

/// Where a rank listens, as rank 0 hands it to every rank.
struct Address {
  uint32_t ip; ///< network order, as accept() saw the rank
  uint32_t port;
  char host[kHostBytes];
};

std::string errnoText() { return std::strerror(errno); }

/// Why a stamp received from another process is not from a dsc rank of
/// this build; empty when it is. Says what came instead.
std::string strangerIn(const Stamp &s) {
  if (s.magic != kMagic) {
    std::string bytes;
    const auto *p = reinterpret_cast<const unsigned char *>(&s);
    for (size_t i = 0; i < sizeof s; ++i) {
      char hex[4];
      std::snprintf(hex, sizeof hex, " %02x", p[i]);
      bytes += hex;
    }
    return "it sent" + bytes + " where a dsc rank sends its magic number";
  }
  if (s.version != kProtocolVersion)
    return "it speaks version " + std::to_string(s.version) +
           " of the start-up, this rank " + std::to_string(kProtocolVersion) +
           " (another dsc build)";
  return "";
}

Clock::time_point deadlineAfter(double seconds) {
  if (seconds <= 0)
    return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(seconds));
}

/// Milliseconds left until `deadline` for poll() (-1: no deadline).
int pollMillis(Clock::time_point deadline) {
  if (deadline == Clock::time_point::max())
    return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now())
                        .count();
  return int(std::clamp<long long>(left, 0, 1 << 30));
}

/// Writes all of `data`; false (errno set) on error.
bool writeAll(int fd, const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    bytes -= size_t(n);
  }
  return true;
}

/// How a read ended.
enum class ReadEnd { Done, Closed, TimedOut, Failed };

/// Reads exactly `bytes` into `data` before `deadline`.
ReadEnd readAll(int fd, void *data, size_t bytes, Clock::time_point deadline) {
  char *p = static_cast<char *>(data);
  while (bytes) {
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, pollMillis(deadline));
    if (ready < 0) {
      if (errno == EINTR)
        continue;
      return ReadEnd::Failed;
    }
    if (ready == 0)
      return ReadEnd::TimedOut;
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n == 0)
      return ReadEnd::Closed;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN)
        continue;
      return errno == ECONNRESET ? ReadEnd::Closed : ReadEnd::Failed;
    }
    p += n;
    bytes -= size_t(n);
  }
  return ReadEnd::Done;
}

sockaddr_in resolve(const std::string &host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo *found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
      rc != 0 || !found)
    throw Error("MASTER_ADDR='" + host + "': " + ::gai_strerror(rc));
  sockaddr_in addr = *reinterpret_cast<sockaddr_in *>(found->ai_addr);
  ::freeaddrinfo(found);
  addr.sin_port = htons(uint16_t(port));
  return addr;
}

std::string addressText(const sockaddr_in &a) {
  char ip[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &a.sin_addr, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

void setNoDelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/// A socket listening on every interface at `port` (0: any free port).
int listenOn(int port, int backlog) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    throw Error("socket: " + errnoText());
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(uint16_t(port));
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0 ||
      ::listen(fd, backlog) != 0) {
    const std::string why = errnoText();
    ::close(fd);
    throw Error("cannot listen on port " + std::to_string(port) + ": " + why +
                (port ? " (MASTER_PORT in use?)" : ""));
  }
  return fd;
}

int listeningPort(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  return ntohs(addr.sin_port);
}

/// Accepts one connection before `deadline`; `from` gets the peer address.
int acceptBefore(int listener, Clock::time_point deadline, sockaddr_in &from,
                 const std::string &waitingFor) {
  for (;;) {
    pollfd pfd{listener, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, pollMillis(deadline));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0)
      throw Error("start-up: " + waitingFor + " did not connect in time");
    socklen_t len = sizeof from;
    const int fd = ::accept4(listener, reinterpret_cast<sockaddr *>(&from),
                             &len, SOCK_CLOEXEC);
    if (fd >= 0) {
      setNoDelay(fd);
      return fd;
    }
    if (errno != EINTR && errno != ECONNABORTED)
      throw Error("start-up: accept: " + errnoText());
  }
}

/// Connects to `to`, retrying while nobody listens there yet (the peer may
/// start later) until `deadline`.
int connectBefore(const sockaddr_in &to, Clock::time_point deadline,
                  const std::string &what) {
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      throw Error("socket: " + errnoText());
    if (::connect(fd, reinterpret_cast<const sockaddr *>(&to), sizeof to) ==
        0) {
      setNoDelay(fd);
      return fd;
    }
    const std::string why = errnoText();
    ::close(fd);
    if (Clock::now() >= deadline)
      throw Error("start-up: cannot connect to " + what + " at " +
                  addressText(to) + ": " + why);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// Writes all of `data` during the start-up, or fails naming `what` and
/// why (errno read after the write failed).
void writeOrFail(int fd, const void *data, size_t bytes,
                 const std::string &what) {
  if (!writeAll(fd, data, bytes))
    throw Error("start-up: " + what + ": " + errnoText());
}

std::string hostName() {
  char host[kHostBytes] = {};
  ::gethostname(host, sizeof host - 1);
  return host;
}

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

/// Reads what rank 0, at `master`, sends a rank that joins: its stamp, then
/// where every rank listens.
void readAddresses(int fd, const sockaddr_in &master, int worldSize,
                   std::vector<Address> &table, Clock::time_point deadline,
                   double seconds) {
  const std::string rank0 =
      "rank 0 (MASTER_ADDR:MASTER_PORT " + addressText(master) + ")";
  Stamp stamp{};
  ReadEnd end = readAll(fd, &stamp, sizeof stamp, deadline);
  if (end == ReadEnd::Done) {
    if (const std::string stranger = strangerIn(stamp); !stranger.empty())
      throw Error("start-up: MASTER_ADDR:MASTER_PORT " + addressText(master) +
                  " is not a dsc rank 0: " + stranger);
    if (stamp.worldSize != worldSize)
      throw Error("start-up: " + rank0 +
                  " has WORLD_SIZE=" + std::to_string(stamp.worldSize) +
                  ", this rank " + std::to_string(worldSize));
    end = readAll(fd, table.data(), table.size() * sizeof(Address), deadline);
  }
  switch (end) {
  case ReadEnd::Done:
    return;
  case ReadEnd::Closed:
    throw Error("start-up: rank 0 closed the connection before sending the "
                "addresses (see its message)");
  case ReadEnd::TimedOut:
    throw Error("start-up: " + rank0 + " sent no addresses in " +
                std::to_string(int(seconds)) + " s (did every rank start?)");
  case ReadEnd::Failed:
    throw Error("start-up: reading the addresses from " + rank0 + ": " +
                errnoText());
  }
}

/// Connects the job: every rank to rank 0 (which hands out the addresses),
/// then every pair of the other ranks.
std::shared_ptr<Links> connectJob(const TcpJob &job) {
  auto net = std::make_shared<Links>();
  net->timeoutSeconds = job.timeoutSeconds;
  net->links.resize(size_t(job.worldSize));
  const int n = job.worldSize, me = job.rank;
  // The others may start a while after this one.
  const double startSeconds =
      std::max(60.0, job.timeoutSeconds > 0 ? job.timeoutSeconds : 60.0);
  const auto deadline = deadlineAfter(startSeconds);
  std::vector<Address> table(static_cast<size_t>(n));
  std::vector<int> fds(size_t(n), -1);
  auto closeAll = [&] {
    for (int &fd : fds)
      if (fd >= 0)
        ::close(fd), fd = -1;
  };
  int listener = -1;
  try {
    if (me == 0) {
      listener = listenOn(job.masterPort, n);
      for (int joined = 1; joined < n; ++joined) {
        sockaddr_in from{};
        const int fd = acceptBefore(listener, deadline, from,
                                    std::to_string(n - joined) + " of the " +
                                        std::to_string(n - 1) + " other ranks");
        Hello hello{};
        const std::string stranger =
            readAll(fd, &hello, sizeof hello, deadline) == ReadEnd::Done
                ? strangerIn(hello.stamp)
                : "it sent no whole greeting";
        if (!stranger.empty()) {
          ::close(fd);
          throw Error("start-up: a connection to MASTER_PORT " +
                      std::to_string(job.masterPort) + " from " +
                      addressText(from) + " is not a dsc rank: " + stranger);
        }
        const int rank = hello.stamp.rank;
        std::string refusal;
        if (hello.stamp.worldSize != n)
          refusal = "rank " + std::to_string(rank) +
                    " has WORLD_SIZE=" + std::to_string(hello.stamp.worldSize) +
                    ", rank 0 has " + std::to_string(n);
        else if (rank <= 0 || rank >= n || fds[size_t(rank)] >= 0)
          refusal = "two processes have RANK=" + std::to_string(rank);
        if (!refusal.empty()) {
          ::close(fd);
          throw Error("start-up: " + refusal);
        }
        fds[size_t(rank)] = fd;
        Address &a = table[size_t(rank)];
        a.ip = from.sin_addr.s_addr;
        a.port = hello.listenPort;
        std::memcpy(a.host, hello.host, kHostBytes);
        a.host[kHostBytes - 1] = 0;
      }
      std::snprintf(table[0].host, kHostBytes, "%s", hostName().c_str());
      const Stamp stamp = stampOf(n, 0);
      for (int r = 1; r < n; ++r) {
        const std::string what =
            "sending rank " + std::to_string(r) + " the addresses";
        writeOrFail(fds[size_t(r)], &stamp, sizeof stamp, what);
        writeOrFail(fds[size_t(r)], table.data(),
                    table.size() * sizeof(Address), what);
      }
    } else {
      listener = listenOn(0, n);
      const sockaddr_in master = resolve(job.masterAddr, job.masterPort);
      fds[0] =
          connectBefore(master, deadline, "rank 0 (MASTER_ADDR:MASTER_PORT)");
      Hello hello{stampOf(n, me), uint32_t(listeningPort(listener)), {}};
      std::snprintf(hello.host, kHostBytes, "%s", hostName().c_str());
      writeOrFail(fds[0], &hello, sizeof hello, "greeting rank 0");
      readAddresses(fds[0], master, n, table, deadline, startSeconds);
      // Lower ranks listen already: connect to them, then take the higher.
      for (int r = 1; r < me; ++r) {
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_addr.s_addr = table[size_t(r)].ip;
        to.sin_port = htons(uint16_t(table[size_t(r)].port));
        fds[size_t(r)] =
            connectBefore(to, deadline, "rank " + std::to_string(r));
        const Stamp greeting = stampOf(n, me);
        writeOrFail(fds[size_t(r)], &greeting, sizeof greeting,
                    "greeting rank " + std::to_string(r));
      }
      for (int joined = me + 1; joined < n; ++joined) {
        sockaddr_in from{};
        const int fd = acceptBefore(listener, deadline, from,
                                    "a rank above " + std::to_string(me));
        Stamp greeting{};
        if (readAll(fd, &greeting, sizeof greeting, deadline) !=
                ReadEnd::Done ||
            !strangerIn(greeting).empty() || greeting.worldSize != n ||
            greeting.rank <= me || greeting.rank >= n ||
            fds[size_t(greeting.rank)] >= 0) {
          ::close(fd);
          throw Error("start-up: a connection from " + addressText(from) +
                      " is not one of the job's ranks");
        }
        fds[size_t(greeting.rank)] = fd;
      }
    }
    ::close(listener);
    listener = -1;
  } catch (...) {
    if (listener >= 0)
      ::close(listener);
    closeAll();
    throw;
  }
  for (int r = 0; r < n; ++r)
    if (r != me)
      net->links[size_t(r)] = std::make_unique<Link>(fds[size_t(r)], r);
  // The node: LOCAL_RANK / LOCAL_WORLD_SIZE, else the ranks on this host.
  int local = 0, onHost = 0;
  for (int r = 0; r < n; ++r)
    if (std::strncmp(table[size_t(r)].host, table[size_t(me)].host,
                     kHostBytes) == 0) {
      local += r < me;
      ++onHost;
    }
  net->localRank = job.localRank >= 0 ? job.localRank : local;
  net->localSize = job.localSize >= 0 ? job.localSize : onHost;
  return net;
}

/// A group of the job's ranks (the whole job, or one split from it).
class TcpCommunicator final : public Communicator {
public:
  TcpCommunicator(std::shared_ptr<Links> net, std::vector<int> members, int me,
                  uint64_t context)
      : net(std::move(net)), members(std::move(members)), me(me),
        context(context) {
    this->net->contexts.push_back(context);
  }
  ~TcpCommunicator() override {
    if (!std::uncaught_exceptions())
      try {
        waitSends();
      } catch (const Error &) {
      }
  }
  int rank() const override { return me; }
  int size() const override { return int(members.size()); }
  int localRank() const override { return net->localRank; }
  int localSize() const override { return net->localSize; }
  const char *transport() const override { return "TCP"; }

  void allReduce(float *data, int64_t n, ReduceOp op) override {
    if (n < 0)
      throw Error("all_reduce: negative element count");
    const int N = size();
    // Chunk c of the ring: elements [n c / N, n (c + 1) / N).
    auto begin = [&](int c) { return n * c / N; };
    ringReduce(data, begin, (me + 1) % N, op, "all_reduce");
    ringGather(reinterpret_cast<char *>(data), sizeof(float), begin,
               (me + 1) % N, "all_reduce");
    finishMean(op, data, n);
    (*sent)[CollectiveKind::AllReduce] +=
        2 * n * int64_t(sizeof(float)) * (N - 1) / N;
  }

  void reduceScatter(const float *in, float *out, int64_t nPerRank,
                     ReduceOp op) override {
    if (nPerRank < 0)
      throw Error("reduce_scatter: negative element count");
    const int N = size();
    std::vector<float> work(in, in + nPerRank * N);
    ringReduce(
        work.data(), [&](int c) { return c * nPerRank; }, me, op,
        "reduce_scatter");
    std::copy_n(work.data() + me * nPerRank, nPerRank, out);
    finishMean(op, out, nPerRank);
    (*sent)[CollectiveKind::ReduceScatter] +=
        nPerRank * int64_t(sizeof(float)) * (N - 1);
  }

  void allGather(const void *in, void *out, int64_t bytesPerRank) override {
    gatherSlots(in, out, bytesPerRank, "all_gather");
    (*sent)[CollectiveKind::AllGather] += bytesPerRank * (size() - 1);
  }

  void allToAll(const void *in, void *out, int64_t bytesPerPeer) override {
    if (bytesPerPeer < 0)
      throw Error("all_to_all: negative byte count");
    const char *src = static_cast<const char *>(in);
    char *dst = static_cast<char *>(out);
    for (int p = 0; p < size(); ++p)
      if (p != me)
        postTo(p, kCollectiveTag, src + p * bytesPerPeer, size_t(bytesPerPeer));
    std::memcpy(dst + me * bytesPerPeer, src + me * bytesPerPeer,
                size_t(bytesPerPeer));
    for (int p = 0; p < size(); ++p)
      if (p != me)
        takeFrom(p, kCollectiveTag, dst + p * bytesPerPeer,
                 size_t(bytesPerPeer), "all_to_all");
    (*sent)[CollectiveKind::AllToAll] += bytesPerPeer * (size() - 1);
  }

  void broadcast(void *data, int64_t bytes, int root) override {
    if (root < 0 || root >= size())
      throw Error("broadcast: root " + std::to_string(root) +
                  " is not a rank of a group of " + std::to_string(size()));
    if (bytes < 0)
      throw Error("broadcast: negative byte count");
    if (me != root) {
      takeFrom(root, kCollectiveTag, data, size_t(bytes), "broadcast");
      return;
    }
    for (int p = 0; p < size(); ++p)
      if (p != me)
        postTo(p, kCollectiveTag, data, size_t(bytes));
    (*sent)[CollectiveKind::Broadcast] += bytes * (size() - 1);
  }

  // A frame is a copy: `data` may change as soon as a send returns, and
  // only startSend's frames are waited for (waitSends).
  void send(const void *data, int64_t bytes, int to, int tag) override {
    postSend(data, bytes, to, tag);
  }
  void startSend(const void *data, int64_t bytes, int to, int tag) override {
    pending.push_back({members[size_t(to)], postSend(data, bytes, to, tag)});
  }
  void waitSends() override {
    const auto deadline = deadlineAfter(net->timeoutSeconds);
    for (const auto &[peer, number] : pending)
      net->links[size_t(peer)]->waitWritten(number, deadline);
    pending.clear();
  }
  void recv(void *data, int64_t bytes, int from, int tag) override {
    checkPeer("recv", from, tag, bytes);
    takeFrom(from, uint32_t(tag), data, size_t(bytes), "recv");
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    const int N = size();
    const int32_t mine[2] = {color, key};
    std::vector<int32_t> all(static_cast<size_t>(2 * N));
    gatherSlots(mine, all.data(), sizeof mine, "split");
    std::vector<std::pair<int32_t, int>> chosen; // (key, group rank)
    for (int r = 0; r < N; ++r)
      if (all[size_t(2 * r)] == color)
        chosen.push_back({all[size_t(2 * r + 1)], r});
    std::sort(chosen.begin(), chosen.end());
    std::vector<int> group;
    int index = 0;
    for (const auto &[k, r] : chosen) {
      if (r == me)
        index = int(group.size());
      group.push_back(members[size_t(r)]);
    }
    // Every member derives the same context: this one's, the split's
    // number and the color, mixed (FNV-1a).
    uint64_t h = 1469598103934665603ull;
    for (uint64_t v : {context, ++splits, uint64_t(uint32_t(color))})
      for (int b = 0; b < 8; ++b)
        h = (h ^ ((v >> (8 * b)) & 0xff)) * 1099511628211ull;
    auto child =
        std::make_unique<TcpCommunicator>(net, std::move(group), index, h);
    child->sent = sent;
    return child;
  }

  void barrier() override {
    // Ranks wait here for rank 0's writes (a checkpoint can take a while).
    constexpr double kPatience = 10;
    char token = 0;
    if (me != 0) {
      postTo(0, kBarrierTag, &token, 1);
      takeFrom(0, kBarrierTag, &token, 1, "barrier", kPatience);
      return;
    }
    for (int p = 1; p < size(); ++p)
      takeFrom(p, kBarrierTag, &token, 1, "barrier", kPatience);
    for (int p = 1; p < size(); ++p)
      postTo(p, kBarrierTag, &token, 1);
  }

private:
  int next() const { return (me + 1) % size(); }
  int prev() const { return (me - 1 + size()) % size(); }
  void postTo(int groupRank, uint32_t tag, const void *data, size_t bytes) {
    const int peer = members[size_t(groupRank)];
    net->links[size_t(peer)]->post(context, tag, data, bytes);
  }
  void takeFrom(int groupRank, uint32_t tag, void *data, size_t bytes,
                const char *what, double patience = 1) {
    net->take(members[size_t(groupRank)], context, tag, data, bytes, what,
              patience);
  }
  /// A user's send to group rank `to`, checked and counted: the frame's
  /// number on the link to it.
  uint64_t postSend(const void *data, int64_t bytes, int to, int tag) {
    checkPeer("send", to, tag, bytes);
    const uint64_t number = net->links[size_t(members[size_t(to)])]->post(
        context, uint32_t(tag), data, size_t(bytes));
    (*sent)[CollectiveKind::Send] += bytes;
    return number;
  }
  void checkPeer(const char *what, int peer, int tag, int64_t bytes) const {
    if (peer < 0 || peer >= size() || peer == me)
      throw Error(std::string(what) + ": rank " + std::to_string(peer) +
                  " is not another rank of a group of " +
                  std::to_string(size()));
    if (tag < 0 || uint32_t(tag) > kMaxUserTag)
      throw Error(std::string(what) + ": tag " + std::to_string(tag) +
                  " is outside 0.." + std::to_string(kMaxUserTag));
    if (bytes < 0)
      throw Error(std::string(what) + ": negative byte count");
  }
  /// The rings run over N chunks of a buffer, chunk c holding elements
  /// [begin(c), begin(c + 1)). A reduce-scatter: each of N - 1 steps sends
  /// a chunk to the next rank and adds the previous rank's into another,
  /// so that this rank ends holding chunk `owned` reduced over every rank.
  template <typename Begin>
  void ringReduce(float *data, Begin begin, int owned, ReduceOp op,
                  const char *what) {
    const int N = size();
    if (N == 1)
      return;
    auto count = [&](int c) { return begin(c + 1) - begin(c); };
    int64_t largest = 0;
    for (int c = 0; c < N; ++c)
      largest = std::max(largest, count(c));
    std::vector<float> incoming(static_cast<size_t>(largest));
    for (int k = 0; k < N - 1; ++k) {
      const int out = (owned - 1 - k + 2 * N) % N,
                in = (owned - 2 - k + 2 * N) % N;
      postTo(next(), kCollectiveTag, data + begin(out), size_t(count(out)) * 4);
      takeFrom(prev(), kCollectiveTag, incoming.data(), size_t(count(in)) * 4,
               what);
      combine(data + begin(in), incoming.data(), count(in), op);
    }
  }
  /// An all-gather over the same chunks (of `unit` bytes per element),
  /// this rank holding chunk `owned`: after N - 1 steps it holds them all.
  template <typename Begin>
  void ringGather(char *base, size_t unit, Begin begin, int owned,
                  const char *what) {
    const int N = size();
    for (int k = 0; k < N - 1; ++k) {
      const int out = (owned - k + N) % N, in = (owned - k - 1 + N) % N;
      postTo(next(), kCollectiveTag, base + begin(out) * unit,
             size_t(begin(out + 1) - begin(out)) * unit);
      takeFrom(prev(), kCollectiveTag, base + begin(in) * unit,
               size_t(begin(in + 1) - begin(in)) * unit, what);
    }
  }
  /// Every rank's `bytes` bytes of `in`, in rank order, into `out`.
  void gatherSlots(const void *in, void *out, int64_t bytes, const char *what) {
    if (bytes < 0)
      throw Error(std::string(what) + ": negative byte count");
    char *slots = static_cast<char *>(out);
    std::memcpy(slots + me * bytes, in, size_t(bytes));
    ringGather(
        slots, 1, [&](int c) { return c * bytes; }, me, what);
  }
  static void combine(float *acc, const float *add, int64_t n, ReduceOp op) {
    if (op == ReduceOp::Max)
      for (int64_t i = 0; i < n; ++i)
        acc[i] = std::max(acc[i], add[i]);
    else
      for (int64_t i = 0; i < n; ++i)
        acc[i] += add[i];
  }
  void finishMean(ReduceOp op, float *data, int64_t n) const {
    if (op != ReduceOp::Mean)
      return;
    const float inv = 1.0f / float(size());
    for (int64_t i = 0; i < n; ++i)
      data[i] *= inv;
  }

  std::shared_ptr<Links> net;
  std::vector<int> members; ///< job ranks, by group rank
  int me;
  uint64_t context;
  uint64_t splits = 0;
  std::vector<std::pair<int, uint64_t>> pending; ///< startSend's frames
};

std::string requiredVariable(const char *name) {
  const char *v = std::getenv(name);
  if (!v || !*v)
    throw Error(std::string("WORLD_SIZE asks for several ranks and no MPI "
                            "launcher started this process, so they meet "
                            "over TCP: set ") +
                name + " (torchrun sets MASTER_ADDR, MASTER_PORT and RANK)");
  return v;
}

} // namespace

TcpJob tcpJobFromEnvironment(bool connecting) {
  TcpJob job;
  job.worldSize = int(envInteger("WORLD_SIZE", 1, 1, 1 << 20));
  if (const char *rank = std::getenv("RANK");
      rank && !std::getenv("WORLD_SIZE"))
    throw Error(std::string("environment variable RANK='") + rank +
                "' is set but WORLD_SIZE is missing (a launcher that sets "
                "RANK sets WORLD_SIZE too)");
  if (connecting) {
    requiredVariable("MASTER_ADDR");
    requiredVariable("MASTER_PORT");
    requiredVariable("RANK");
  }
  if (const char *addr = std::getenv("MASTER_ADDR"))
    job.masterAddr = addr;
  job.masterPort = int(envInteger("MASTER_PORT", 0, 1, 65535));
  job.rank = int(envInteger("RANK", 0, 0, job.worldSize - 1));
  job.localSize = int(envInteger("LOCAL_WORLD_SIZE", -1, 1, job.worldSize));
  job.localRank =
      int(envInteger("LOCAL_RANK", -1, 0,
                     (job.localSize > 0 ? job.localSize : job.worldSize) - 1));
  job.timeoutSeconds = collectiveTimeoutSeconds();
  return job;
}

std::unique_ptr<Communicator> createTcpCommunicator(const TcpJob &job) {
  std::shared_ptr<Links> net = connectJob(job);
  std::vector<int> everyone(static_cast<size_t>(job.worldSize));
  for (int r = 0; r < job.worldSize; ++r)
    everyone[size_t(r)] = r;
  return std::make_unique<TcpCommunicator>(net, std::move(everyone), job.rank,
                                           /*context=*/1);
}

} // namespace dsc::rt
