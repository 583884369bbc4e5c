//===- NcclTest.cpp - NCCL's loading and unique-id bootstrap --------------===//
//
// What of the multi-rank CUDA path runs without a GPU: NCCL loads, and
// rank 0's unique id reaches every rank of the job through the host
// communicator. Run alone (one rank) by ctest and on 2 ranks by
// test/tools/nccl-bootstrap.test.
//
//===----------------------------------------------------------------------===//

#include "Nccl.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace dsc::rt;

TEST(Nccl, LoadsAndIsRecentEnough) {
  const NcclLibrary &nccl = NcclLibrary::get();
  EXPECT_GE(nccl.version, 21000);
  EXPECT_STREQ(nccl.getErrorString(ncclSuccess), "no error");
}

TEST(Nccl, EveryRankGetsRankZerosUniqueId) {
  auto comm = createCommunicator();
  const ncclUniqueId id = shareUniqueId(NcclLibrary::get(), *comm);
  const ncclUniqueId zero{};
  EXPECT_NE(std::memcmp(&id, &zero, sizeof id), 0) << "an all-zero id";
  std::vector<ncclUniqueId> all(size_t(comm->size()));
  comm->allGather(&id, all.data(), int64_t(sizeof id));
  for (int r = 0; r < comm->size(); ++r)
    EXPECT_EQ(std::memcmp(&all[size_t(r)], &all[0], sizeof id), 0)
        << "rank " << r << " holds another id";
  // A second id differs: the bootstrap does not hand out a constant.
  if (comm->rank() == 0) {
    ncclUniqueId again;
    NcclLibrary::get().check(NcclLibrary::get().getUniqueId(&again), "again");
    EXPECT_NE(std::memcmp(&again, &id, sizeof id), 0);
  }
}
