//===- CommsLogTest.cpp - comms_logger's records, bandwidths and summary --===//

#include "dsc/Runtime/CommsLog.h"

#include <gtest/gtest.h>

#include <sstream>

using namespace dsc::rt;

// nccl-tests' bus bandwidth: an all-reduce moves 2(n-1)/n of the message
// per rank, gathers, scatters and all-to-alls (n-1)/n, the rest all of it.
TEST(CommsLog, BusBandwidthFactors) {
  // 1e9 bytes in 1 s: 8 Gbit/s.
  auto bw = [](CollectiveKind k, int n) {
    return CommsLog::bandwidthGbps(k, 1000000000, n, 1.0);
  };
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::AllReduce, 4).first, 8.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::AllReduce, 4).second, 12.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::AllGather, 4).second, 6.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::ReduceScatter, 2).second, 4.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::AllToAll, 2).second, 4.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::Send, 2).second, 8.0);
  EXPECT_DOUBLE_EQ(bw(CollectiveKind::Broadcast, 8).second, 8.0);
  EXPECT_EQ(CommsLog::bandwidthGbps(CollectiveKind::Send, 10, 2, 0.0).first,
            0.0);
}

TEST(CommsLog, SummaryByOperationAndSize) {
  std::ostringstream verbose;
  CommsLog::Options o;
  o.verbose = true;
  o.debug = true;
  CommsLog log(o, verbose);
  log.record("all_reduce", CollectiveKind::AllReduce, "apply_step", 4096, 2,
             0.001);
  log.record("all_reduce", CollectiveKind::AllReduce, "apply_step", 4096, 2,
             0.003);
  log.record("all_gather", CollectiveKind::AllGather, "micro_step", 1536, 2,
             0.002);
  EXPECT_EQ(verbose.str().substr(0, 79),
            "comm op: all_reduce | @apply_step | time (ms): 1.00 | msg size: "
            "4.00 KB | algbw");
  const std::string s = log.summary();
  EXPECT_EQ(s.find("all_gather | @micro_step\n"), s.find("Comm. Op") +
                                                      s.find('\n') + 1);
  // 2 all-reduces of 4 KB: 4 ms in all, 2 on average, algbw the mean of
  // 32.77 and 10.92 Gbit/s, busbw (n = 2) the same.
  EXPECT_NE(s.find("4.00 KB         2         4.00                2.00"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("1.50 KB         1         2.00"), std::string::npos) << s;
}

TEST(CommsLog, OperationFilter) {
  std::ostringstream out;
  CommsLog::Options o;
  o.all = false;
  o.ops = {"recv"};
  CommsLog log(o, out);
  EXPECT_TRUE(log.wants("recv"));
  EXPECT_FALSE(log.wants("send"));
  EXPECT_EQ(log.summary(), "");
}
