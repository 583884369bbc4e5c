//===- TcpCommunicatorTest.cpp - Collectives over TCP, in threads ---------===//
//
// Each test starts N ranks as threads of this process, each with its own
// TCP communicator over the loopback, and checks every collective against
// the value computed here (sums of small integers are exact in float, so
// the ring's order of addition does not matter).
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "dsc/Runtime/TcpCommunicator.h"

#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace dsc::rt {
namespace {

TEST(TcpCommunicator, CollectivesOnFourRanks) {
  constexpr int N = 4;
  std::mutex checks;
  auto failures = test::onTcpRanks(N, [&](Communicator &c) {
    const int r = c.rank();
    EXPECT_EQ(c.size(), N);
    EXPECT_EQ(c.localSize(), N); // one host
    EXPECT_STREQ(c.transport(), "TCP");
    // Sum, mean and max of 10 elements (chunks of 2 and 3 on 4 ranks).
    std::vector<float> x(10), y(10), z(10);
    for (int i = 0; i < 10; ++i)
      x[size_t(i)] = y[size_t(i)] = z[size_t(i)] = float(r * 100 + i);
    c.allReduce(x.data(), 10, ReduceOp::Sum);
    c.allReduce(y.data(), 10, ReduceOp::Mean);
    c.allReduce(z.data(), 10, ReduceOp::Max);
    // Fewer elements than ranks: empty chunks.
    float one = float(r + 1);
    c.allReduce(&one, 1, ReduceOp::Sum);
    // Each rank's block of the sum.
    std::vector<float> in(size_t(3 * N)), part(3);
    for (int i = 0; i < 3 * N; ++i)
      in[size_t(i)] = float(i + r);
    c.reduceScatter(in.data(), part.data(), 3, ReduceOp::Sum);
    std::vector<int32_t> gathered(N);
    const int32_t mine = 7 * r;
    c.allGather(&mine, gathered.data(), sizeof mine);
    std::vector<int32_t> to(N), from(N);
    for (int p = 0; p < N; ++p)
      to[size_t(p)] = 10 * r + p;
    c.allToAll(to.data(), from.data(), sizeof(int32_t));
    char word[6] = "-----";
    if (r == 2)
      std::snprintf(word, sizeof word, "hello");
    c.broadcast(word, sizeof word, 2);
    c.barrier();

    std::lock_guard<std::mutex> lock(checks);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ(x[size_t(i)], float(600 + 4 * i)) << i;
      EXPECT_EQ(y[size_t(i)], float(150 + i)) << i;
      EXPECT_EQ(z[size_t(i)], float(300 + i)) << i;
    }
    EXPECT_EQ(one, 10.0f);
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(part[size_t(j)], float(4 * (3 * r + j) + 6)) << j;
    for (int p = 0; p < N; ++p) {
      EXPECT_EQ(gathered[size_t(p)], 7 * p);
      EXPECT_EQ(from[size_t(p)], 10 * p + r);
    }
    EXPECT_STREQ(word, "hello");
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

TEST(TcpCommunicator, SendsMatchReceivesByTagAndDoNotWait) {
  auto failures = test::onTcpRanks(2, [](Communicator &c) {
    // Both send 4 MiB first (more than a socket buffer holds): a send that
    // waited for the peer's receive would deadlock here.
    std::vector<float> big(1 << 20, float(c.rank())), got(1 << 20);
    const int peer = 1 - c.rank();
    c.startSend(big.data(), int64_t(big.size() * 4), peer, /*tag=*/5);
    int32_t a = 100 + c.rank(), b = 200 + c.rank();
    c.send(&a, 4, peer, 1);
    c.send(&b, 4, peer, 2);
    // Received out of order: tag 2, then tag 1, then the big one.
    int32_t second = 0, first = 0;
    c.recv(&second, 4, peer, 2);
    c.recv(&first, 4, peer, 1);
    c.recv(got.data(), int64_t(got.size() * 4), peer, 5);
    c.waitSends();
    EXPECT_EQ(first, 100 + peer);
    EXPECT_EQ(second, 200 + peer);
    EXPECT_EQ(got.front(), float(peer));
    EXPECT_EQ(got.back(), float(peer));
    EXPECT_THROW(c.send(&a, 4, c.rank(), 0), Error);
    EXPECT_THROW(c.send(&a, 4, peer, 40000), Error);
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

TEST(TcpCommunicator, SplitGroupsKeepTheirMessagesApart) {
  constexpr int N = 4;
  auto failures = test::onTcpRanks(N, [](Communicator &c) {
    // Even and odd ranks, ranked in reverse.
    auto group = c.split(c.rank() % 2, -c.rank());
    EXPECT_EQ(group->size(), 2);
    EXPECT_EQ(group->rank(), c.rank() < 2 ? 1 : 0);
    float v = float(c.rank());
    group->allReduce(&v, 1, ReduceOp::Sum);
    EXPECT_EQ(v, c.rank() % 2 ? 4.0f : 2.0f);
    // The same tag on the whole job and on the group: not confused.
    if (c.rank() == 0 || c.rank() == 2) {
      const int32_t onJob = 1000 + c.rank(), onGroup = 2000 + c.rank();
      const int jobPeer = 2 - c.rank(), groupPeer = 1 - group->rank();
      group->send(&onGroup, 4, groupPeer, 3);
      c.send(&onJob, 4, jobPeer, 3);
      int32_t fromJob = 0, fromGroup = 0;
      c.recv(&fromJob, 4, jobPeer, 3);
      group->recv(&fromGroup, 4, groupPeer, 3);
      EXPECT_EQ(fromJob, 1000 + jobPeer);
      EXPECT_EQ(fromGroup, 2000 + jobPeer);
    }
    c.barrier();
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

TEST(TcpCommunicator, ALostRankIsNamed) {
  auto failures = test::onTcpRanks(
      3,
      [](Communicator &c) {
        if (c.rank() == 2)
          throw std::runtime_error("stops before the all-reduce");
        float v = 1;
        c.allReduce(&v, 1, ReduceOp::Sum);
      },
      /*timeoutSeconds=*/5);
  ASSERT_EQ(failures.size(), 3u) << test::joined(failures);
  EXPECT_NE(failures[2].find("stops before"), std::string::npos);
  // Rank 0 waits on rank 2 (its ring predecessor), rank 1 on rank 0.
  EXPECT_NE(failures[0].find("all_reduce: rank 2 closed its connection"),
            std::string::npos)
      << failures[0];
}

TEST(TcpCommunicator, AReceiveThatOnlyOtherFramesReachIsNamedSo) {
  auto failures = test::onTcpRanks(
      2,
      [](Communicator &c) {
        int32_t v = 0;
        if (c.rank() == 1) {
          c.recv(&v, 4, 0, /*tag=*/2); // rank 0 sends tag 1 only
          return;
        }
        c.send(&v, 4, 1, /*tag=*/1);
        c.barrier(); // waits 10 timeouts, past rank 1's end
      },
      /*timeoutSeconds=*/1);
  ASSERT_EQ(failures.size(), 2u) << test::joined(failures);
  EXPECT_EQ(failures[1], "rank 1: recv: rank 0 sent nothing for this recv in "
                         "1 s, only 1 frame for other receives (the ranks run "
                         "different steps?; DSC_COMM_TIMEOUT sets the limit)");
}

TEST(TcpCommunicator, ConflictingJobsAreRefusedAtStartUp) {
  const int port = test::freePort();
  std::string rank0, rank1;
  std::thread a([&] {
    try {
      createTcpCommunicator({"127.0.0.1", port, 0, 2, -1, -1, 5});
    } catch (const std::exception &e) {
      rank0 = e.what();
    }
  });
  std::thread b([&] {
    try {
      createTcpCommunicator({"127.0.0.1", port, 1, 3, -1, -1, 5});
    } catch (const std::exception &e) {
      rank1 = e.what();
    }
  });
  a.join();
  b.join();
  EXPECT_EQ(rank0, "start-up: rank 1 has WORLD_SIZE=3, rank 0 has 2");
  EXPECT_NE(rank1.find("rank 0 closed the connection"), std::string::npos)
      << rank1;
}

TEST(TcpCommunicator, AForeignServerOnMasterPortIsRefused) {
  // Another program on MASTER_PORT that answers with zeros without end: a
  // rank that took them for addresses and frames buffered them for ever.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr),
            0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ::getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  std::thread server([listener] {
    const int fd = ::accept(listener, nullptr, nullptr);
    const std::vector<char> zeros(1 << 16);
    // Until the rank closes the connection.
    while (::send(fd, zeros.data(), zeros.size(), MSG_NOSIGNAL) > 0) {
    }
    ::close(fd);
  });
  std::string error;
  try {
    createTcpCommunicator({"127.0.0.1", port, 1, 2, -1, -1, 5});
  } catch (const std::exception &e) {
    error = e.what();
  }
  server.join();
  ::close(listener);
  EXPECT_EQ(error, "start-up: MASTER_ADDR:MASTER_PORT 127.0.0.1:" +
                       std::to_string(port) +
                       " is not a dsc rank 0: it sent 00 00 00 00 00 00 00 00 "
                       "00 00 00 00 00 00 00 00 where a dsc rank sends its "
                       "magic number");
}

} // namespace
} // namespace dsc::rt
