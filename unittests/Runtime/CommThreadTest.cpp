//===- CommThreadTest.cpp - overlap_comm's communication thread -----------===//
//
// A queued collective blocks until the test releases it: an instruction on
// other bytes must not wait for it (waitFor returns while it is still
// blocked), one on its bytes must (it sees its result), and a collective's
// error reaches the compute thread.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/CommThread.h"

#include "dsc/Support/Error.h"

#include <gtest/gtest.h>

#include <future>

namespace dsc::rt {
namespace {

ByteRanges rangeOf(const float *p, size_t n) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  return {{b, b + n * sizeof(float)}};
}

TEST(CommThread, WaitsOnlyForTheCollectivesWhoseBytesItTouches) {
  CommThread comm;
  float gathered[4] = {}, other[4] = {};
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  comm.submit(
      [&, go] {
        go.wait();
        for (float &v : gathered)
          v = 7.0f;
      },
      {}, rangeOf(gathered, 4));
  // Disjoint bytes: returns at once, with the collective still blocked.
  comm.waitFor(rangeOf(other, 4), rangeOf(other, 4));
  EXPECT_EQ(gathered[0], 0.0f);
  release.set_value();
  // Reading the gathered bytes waits for the collective.
  comm.waitFor(rangeOf(gathered + 2, 1), {});
  EXPECT_EQ(gathered[2], 7.0f);
  comm.drain();
}

TEST(CommThread, AWriteWaitsForACollectiveReadingTheBytes) {
  CommThread comm;
  float shard[2] = {1.0f, 2.0f}, copy[2] = {};
  std::promise<void> release;
  std::shared_future<void> go = release.get_future().share();
  comm.submit(
      [&, go] {
        go.wait();
        copy[0] = shard[0];
        copy[1] = shard[1];
      },
      rangeOf(shard, 2), rangeOf(copy, 2));
  std::thread later([&] { release.set_value(); });
  // Overwriting the shard must wait until the collective has read it.
  comm.waitFor({}, rangeOf(shard, 2));
  shard[0] = -1.0f;
  later.join();
  comm.drain();
  EXPECT_EQ(copy[0], 1.0f);
}

TEST(CommThread, ACollectivesErrorReachesTheComputeThread) {
  CommThread comm;
  float x[1] = {};
  comm.submit([] { throw Error("AllGather: rank 1 was lost"); }, {},
              rangeOf(x, 1));
  bool ran = false;
  comm.submit([&] { ran = true; }, {}, {});
  try {
    comm.drain();
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_STREQ(e.what(), "AllGather: rank 1 was lost");
  }
  EXPECT_FALSE(ran) << "a collective after the failed one ran";
  EXPECT_THROW(comm.waitFor(rangeOf(x, 1), {}), Error);
}

} // namespace
} // namespace dsc::rt
