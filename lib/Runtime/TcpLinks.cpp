//===- TcpLinks.cpp - The TCP communicator's connections ------------------===//
//
// Sockets with deadlines, and the start-up: every rank tells rank 0
// (MASTER_ADDR:MASTER_PORT) where it listens, rank 0 hands the table to
// every rank, and each pair connects; every start-up message opens with a
// stamp (magic number, protocol version, world size, rank), so whatever
// else answers on a port is refused at once.
//
//===----------------------------------------------------------------------===//

#include "TcpLinks.h"

#include "Launcher.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dsc::rt::tcp {

namespace {

constexpr uint32_t kMagic = 0x64736331; // "dsc1"
/// Changes whenever a start-up message or the frame header changes shape.
constexpr uint32_t kProtocolVersion = 2;
constexpr size_t kHostBytes = 64;

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

} // namespace

std::string errnoText() { return std::strerror(errno); }

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
                (port ? " (MASTER_PORT in use: another job, or a second "
                        "process with RANK=0?)"
                     : ""));
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

} // namespace dsc::rt::tcp
