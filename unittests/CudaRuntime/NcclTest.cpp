//===- NcclTest.cpp - NCCL's loading, bootstrap and one-GPU collectives ---===//
//
// What of the multi-rank CUDA path runs without a GPU: NCCL loads, and
// rank 0's unique id reaches every rank of the job through the host
// communicator. Run alone (one rank) by ctest and on 2 ranks by
// test/tools/nccl-bootstrap.test. With a GPU (the GPU bundle's `nccl`
// step), a one-rank NCCL communicator runs every collective dsc issues on
// device buffers; several ranks need several GPUs (NCCL refuses two ranks
// on one device).
//
//===----------------------------------------------------------------------===//

#include "Nccl.h"

#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
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

namespace {

/// Device memory holding `values`, freed at the end of the scope.
struct DeviceFloats {
  explicit DeviceFloats(const std::vector<float> &values) : n(values.size()) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&ptr), n * sizeof(float)),
              cudaSuccess);
    EXPECT_EQ(cudaMemcpy(ptr, values.data(), n * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  ~DeviceFloats() { cudaFree(ptr); }
  std::vector<float> read() const {
    std::vector<float> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr, n * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return out;
  }
  float *ptr = nullptr;
  size_t n;
};

} // namespace

TEST(Nccl, OneRankCollectivesOnTheGpu) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    cudaGetLastError();
    GTEST_SKIP() << "no GPU";
  }
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  auto host = createSingleRankCommunicator();
  NcclGroup nccl(*host);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const std::vector<float> x = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
  // One rank: sum, mean and max are the tensor itself, in place or not.
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
    DeviceFloats in(x), out(std::vector<float>(x.size(), -1.0f)),
        scattered(std::vector<float>(x.size(), -1.0f));
    nccl.allReduce(in.ptr, out.ptr, int64_t(x.size()), op, stream);
    nccl.reduceScatter(in.ptr, scattered.ptr, int64_t(x.size()), op, stream);
    nccl.allReduce(in.ptr, in.ptr, int64_t(x.size()), op, stream);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(out.read(), x);
    EXPECT_EQ(scattered.read(), x);
    EXPECT_EQ(in.read(), x);
  }
  DeviceFloats in(x), gathered(std::vector<float>(x.size(), 0.0f)),
      exchanged(std::vector<float>(x.size(), 0.0f));
  const int64_t bytes = int64_t(x.size() * sizeof(float));
  nccl.allGather(in.ptr, gathered.ptr, bytes, stream);
  nccl.allToAll(in.ptr, exchanged.ptr, bytes, stream);
  nccl.broadcast(in.ptr, bytes, 0, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(gathered.read(), x);
  EXPECT_EQ(exchanged.read(), x);
  EXPECT_EQ(in.read(), x);
  // An exchange (expert parallelism's) of two messages to itself, which
  // match the receives in order: x[0, 2) lands at 3, x[2, 5) at 0.
  DeviceFloats swapped(std::vector<float>(x.size(), 0.0f));
  nccl.exchange({{in.ptr, 8, 0}, {in.ptr + 2, 12, 0}},
                {{swapped.ptr + 3, 8, 0}, {swapped.ptr, 12, 0}}, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(swapped.read(), (std::vector<float>{x[2], x[3], x[4], x[0], x[1]}));
  // A split of the one-rank world is a one-rank group that works.
  NcclGroup part(nccl, 0, *host);
  DeviceFloats sum(x);
  part.allReduce(sum.ptr, sum.ptr, int64_t(x.size()), ReduceOp::Sum, stream);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(sum.read(), x);
  std::printf("NCCL %d: group made with %s\n", NcclLibrary::get().version,
              part.origin());
  cudaStreamDestroy(stream);
}
