//===- Communicator.cpp - Picking the communicator; the single rank -------===//

#include "Launcher.h"
#include "dsc/Runtime/TcpCommunicator.h"

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
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::Send:
    return "send";
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
  void broadcast(void *, int64_t bytes, int root) override {
    if (bytes < 0 || root != 0)
      throw Error("broadcast: negative byte count or a root other than 0");
  }
  void send(const void *, int64_t, int to, int) override {
    throw Error("send: one rank has no rank " + std::to_string(to) +
                " to send to");
  }
  void recv(void *, int64_t, int from, int) override {
    throw Error("recv: one rank has no rank " + std::to_string(from) +
                " to receive from");
  }
  std::unique_ptr<Communicator> split(int, int) override {
    auto one = std::make_unique<SingleRankCommunicator>();
    one->sent = sent;
    return one;
  }
  void barrier() override {}
};
} // namespace

MeshGroups::MeshGroups(Communicator &world, const Mesh &mesh) : shape(mesh) {
  if (mesh.size() != world.size())
    throw Error("the step's mesh has " + std::to_string(mesh.size()) +
                " ranks but this job has " + std::to_string(world.size()));
  const int rank = world.rank();
  for (MeshAxis axis : kMeshAxes) {
    const int64_t g = mesh.groupSize(axis);
    if (mesh.dataInner == 1 && axis == MeshAxis::DataOuter) {
      groups[int(axis)] = groups[int(MeshAxis::Data)];
      continue;
    }
    Communicator *&group = groups[int(axis)];
    if (g == world.size()) {
      group = &world;
      continue;
    }
    // A group is named by its member at coordinate 0 along the axis.
    owned[int(axis)] =
        g == 1 ? world.split(rank, 0)
               : world.split(int(mesh.rankAlong(rank, axis, 0)),
                             int(mesh.coordinate(rank, axis)));
    group = owned[int(axis)].get();
  }
}

std::unique_ptr<Communicator> createSingleRankCommunicator() {
  return std::make_unique<SingleRankCommunicator>();
}

int launchedWorldSize() { return readLaunchEnvironment().worldSize; }

int launchedRank() {
  const LaunchEnvironment env = readLaunchEnvironment();
  return env.worldSize > 1 ? env.rank : -1;
}

std::unique_ptr<Communicator> createCommunicator() {
  const LaunchEnvironment env = readLaunchEnvironment();
  if (!env.mpiLauncher.empty())
    return createMpiCommunicator(env);
  // torchrun and the like: WORLD_SIZE, RANK, MASTER_ADDR, MASTER_PORT,
  // checked even when they describe a job of one rank.
  const TcpJob job = tcpJobFromEnvironment(/*connecting=*/env.worldSize > 1);
  if (env.worldSize > 1)
    return createTcpCommunicator(job);
  return createSingleRankCommunicator();
}

} // namespace dsc::rt
