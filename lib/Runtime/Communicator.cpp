//===- Communicator.cpp - Picking the communicator; the single rank -------===//

#include "Launcher.h"

#include "dsc/Runtime/Runtime.h"

#include <algorithm>

namespace dsc::rt {

const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  case CollectiveKind::Count:
    break;
  }
  return "?";
}

namespace {
/// One process: every collective leaves the data as it is.
class SingleRankCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int localRank() const override { return 0; }
  int localSize() const override { return 1; }
  const char *transport() const override { return "single process"; }
  void allReduce(float *, int64_t n, ReduceOp) override {
    if (n < 0)
      throw Error("all_reduce: negative element count");
  }
  void reduceScatter(const float *in, float *out, int64_t nPerRank,
                     ReduceOp) override {
    if (nPerRank < 0)
      throw Error("reduce_scatter: negative element count");
    std::copy_n(in, nPerRank, out);
  }
  void allGather(const void *in, void *out, int64_t bytesPerRank) override {
    if (bytesPerRank < 0)
      throw Error("all_gather: negative byte count");
    std::copy_n(static_cast<const char *>(in), bytesPerRank,
                static_cast<char *>(out));
  }
  void allToAll(const void *in, void *out, int64_t bytesPerPeer) override {
    allGather(in, out, bytesPerPeer); // one rank: the one chunk stays
  }
  void barrier() override {}
};
} // namespace

std::unique_ptr<Communicator> createSingleRankCommunicator() {
  return std::make_unique<SingleRankCommunicator>();
}

int launchedWorldSize() { return readLaunchEnvironment().worldSize; }

std::unique_ptr<Communicator> createCommunicator() {
  const LaunchEnvironment env = readLaunchEnvironment();
  if (env.mpiLauncher.empty()) {
    if (env.worldSize > 1)
      throw Error(env.worldSizeVariable + "=" + std::to_string(env.worldSize) +
                  " asks for " + std::to_string(env.worldSize) +
                  " ranks, but no MPI launcher started this process: "
                  "start CPU ranks with 'mpirun -np N' or 'srun' (a "
                  "torchrun-style launch without MPI is not supported)");
    return createSingleRankCommunicator();
  }
  return createMpiCommunicator(env);
}

} // namespace dsc::rt
