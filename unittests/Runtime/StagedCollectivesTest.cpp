//===- StagedCollectivesTest.cpp - Device collectives staged through host -===//
//
// The host-staged device group (what CUDA ranks sharing a GPU run their
// collectives on) and runDeviceCollective (the mapping of a collective
// instruction onto a device group, shared with NCCL), on ranks that are
// threads joined by TCP, with host memory standing in for device memory:
// each result must equal the host communicator's own on the same values,
// and each instruction's the CPU backend's meaning (InstrCheck's). Values
// are small integers, so sums are exact in any order.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "dsc/Runtime/DeviceCollectives.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>

namespace dsc::rt {
namespace {

/// "Device" memory is host memory: copies are memcpy, counted.
class HostCopies final : public DeviceCopies {
public:
  void toHost(void *host, const void *device, size_t bytes, void *) override {
    std::memcpy(host, device, bytes);
    ++staged;
  }
  void toDevice(void *device, const void *host, size_t bytes, void *) override {
    std::memcpy(device, host, bytes);
    ++staged;
  }
  void within(void *to, const void *from, size_t bytes, void *) override {
    std::memmove(to, from, bytes);
  }
  void zero(void *device, size_t bytes, void *) override {
    std::memset(device, 0, bytes);
  }
  int staged = 0;
};

/// Rank r's test tensor: r * 100 + i.
std::vector<float> valuesOf(int rank, size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = float(rank * 100 + int(i));
  return v;
}

constexpr int kRanks = 4;

TEST(StagedCollectives, EqualTheHostCommunicatorsOwn) {
  auto failures = test::onTcpRanks(kRanks, [](Communicator &world) {
    HostCopies copies;
    auto group = createStagedGroup(world, copies);
    EXPECT_EQ(group->rank(), world.rank());
    EXPECT_EQ(group->size(), kRanks);
    EXPECT_FALSE(group->capturable());
    EXPECT_TRUE(group->countsTraffic());
    const int r = world.rank();
    const size_t n = 8;
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      std::vector<float> expect = valuesOf(r, n), device = valuesOf(r, n),
                         out(n, -1.0f);
      world.allReduce(expect.data(), int64_t(n), op);
      group->allReduce(device.data(), out.data(), int64_t(n), op, nullptr);
      EXPECT_EQ(out, expect);
      group->allReduce(device.data(), device.data(), int64_t(n), op, nullptr);
      EXPECT_EQ(device, expect) << "in place";

      std::vector<float> whole = valuesOf(r, n * kRanks), part(n),
                         expectPart(n);
      world.reduceScatter(whole.data(), expectPart.data(), int64_t(n), op);
      group->reduceScatter(whole.data(), part.data(), int64_t(n), op, nullptr);
      EXPECT_EQ(part, expectPart);
    }
    const std::vector<float> mine = valuesOf(r, n);
    std::vector<float> gathered(n * kRanks), expectGathered(n * kRanks);
    world.allGather(mine.data(), expectGathered.data(), int64_t(n * 4));
    group->allGather(mine.data(), gathered.data(), int64_t(n * 4), nullptr);
    EXPECT_EQ(gathered, expectGathered);

    const std::vector<float> blocks = valuesOf(r, n * kRanks);
    std::vector<float> exchanged(n * kRanks), expectExchanged(n * kRanks);
    world.allToAll(blocks.data(), expectExchanged.data(), int64_t(n * 4));
    group->allToAll(blocks.data(), exchanged.data(), int64_t(n * 4), nullptr);
    EXPECT_EQ(exchanged, expectExchanged);

    std::vector<float> cast = valuesOf(r, n);
    group->broadcast(cast.data(), int64_t(n * 4), 2, nullptr);
    EXPECT_EQ(cast, valuesOf(2, n));

    // A ring: each rank sends to the next and receives from the previous.
    std::vector<float> received(n, -1.0f);
    if (r % 2 == 0) {
      group->send(mine.data(), int64_t(n * 4), (r + 1) % kRanks, nullptr);
      group->recv(received.data(), int64_t(n * 4), (r + kRanks - 1) % kRanks,
                  nullptr);
    } else {
      group->recv(received.data(), int64_t(n * 4), (r + kRanks - 1) % kRanks,
                  nullptr);
      group->send(mine.data(), int64_t(n * 4), (r + 1) % kRanks, nullptr);
    }
    EXPECT_EQ(received, valuesOf((r + kRanks - 1) % kRanks, n));

    // sqrt(1 + 4 + 9 + 16) from norms 1, 2, 3, 4, rounded as the CPU does.
    const float norm = float(r + 1);
    float result = -1.0f;
    group->normAllReduce(&norm, &result, nullptr);
    EXPECT_EQ(result, std::sqrt(30.0f));
    EXPECT_GT(copies.staged, 0);
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

/// A collective instruction's descriptor, written out.
DeviceCollective collective(Opcode op, int64_t count, int64_t peer = 0) {
  DeviceCollective c;
  c.op = op;
  c.group = kRanks;
  c.count = count;
  c.peer = peer;
  return c;
}

TEST(StagedCollectives, RunInstructionsAsTheCpuBackendDoes) {
  auto failures = test::onTcpRanks(kRanks, [](Communicator &world) {
    HostCopies copies;
    auto group = createStagedGroup(world, copies);
    const int r = world.rank();
    const size_t n = 6;
    // Shard: this rank's part of a whole tensor, no communication.
    const std::vector<float> whole = valuesOf(7, n * kRanks);
    std::vector<float> part(n);
    const int before = copies.staged;
    runDeviceCollective(*group, copies, collective(Opcode::Shard, int64_t(n)),
                        whole.data(), part.data(), nullptr);
    EXPECT_EQ(copies.staged, before) << "a shard moved data through the host";
    EXPECT_EQ(part, std::vector<float>(whole.begin() + long(r * n),
                                       whole.begin() + long((r + 1) * n)));
    // Broadcast from root 1 into another buffer.
    const std::vector<float> mine = valuesOf(r, n);
    std::vector<float> out(n, -1.0f);
    runDeviceCollective(*group, copies,
                        collective(Opcode::Broadcast, int64_t(n), 1),
                        mine.data(), out.data(), nullptr);
    EXPECT_EQ(out, valuesOf(1, n));
    // Send to the rank 1 step before (wrapping), receive from 1 after:
    // every rank sends before it receives (the host communicator buffers).
    std::vector<float> got(n, -1.0f);
    runDeviceCollective(*group, copies, collective(Opcode::Send, int64_t(n), -1),
                        mine.data(), nullptr, nullptr);
    runDeviceCollective(*group, copies, collective(Opcode::Recv, int64_t(n), 1),
                        nullptr, got.data(), nullptr);
    EXPECT_EQ(got, valuesOf((r + 1) % kRanks, n));
    // A reduce-scatter's count is one rank's part.
    const std::vector<float> grads = valuesOf(r, n * kRanks);
    std::vector<float> reduced(n);
    runDeviceCollective(*group, copies,
                        collective(Opcode::ReduceScatter, int64_t(n)),
                        grads.data(), reduced.data(), nullptr);
    for (size_t i = 0; i < n; ++i)
      EXPECT_EQ(reduced[i], float(600 + kRanks * int(r * n + i)));
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

TEST(StagedCollectives, OneGroupPerMeshAxis) {
  // 4 ranks as data 2 x tensor 2: tensor groups {0,1}, {2,3}; data groups
  // {0,2}, {1,3}.
  auto failures = test::onTcpRanks(kRanks, [](Communicator &world) {
    Mesh mesh;
    mesh.data = 2;
    mesh.tensor = 2;
    MeshGroups host(world, mesh);
    HostCopies copies;
    auto tensor = createStagedGroup(host.group(MeshAxis::Tensor), copies);
    auto data = createStagedGroup(host.group(MeshAxis::Data), copies);
    const int r = world.rank();
    float t = float(r), d = float(r);
    tensor->allReduce(&t, &t, 1, ReduceOp::Sum, nullptr);
    data->allReduce(&d, &d, 1, ReduceOp::Sum, nullptr);
    EXPECT_EQ(t, r < 2 ? 1.0f : 5.0f);
    EXPECT_EQ(d, r % 2 == 0 ? 2.0f : 4.0f);
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

/// Expert parallelism over the 4 ranks, 2 experts each: rank r's rows for
/// expert x, written from the op's definition (not from the CPU kernel).
int32_t expertCount(int r, int x) { return (r * 3 + x * 5) % 4; }
constexpr int64_t kExperts = 8, kPerRank = kExperts / kRanks, kCols = 3;
float rowValue(int r, int64_t x, int64_t k, int64_t c) {
  return float(r * 1000 + x * 100 + k * 10 + c);
}

TEST(StagedCollectives, ExpertExchangeMovesEachRowToItsExpert) {
  auto failures = test::onTcpRanks(kRanks, [](Communicator &world) {
    HostCopies copies;
    auto group = createStagedGroup(world, copies);
    const int me = world.rank();
    // This rank's counts and expert-major rows, then two padding rows.
    std::vector<int32_t> counts(kExperts);
    std::vector<float> rows;
    for (int64_t x = 0; x < kExperts; ++x) {
      counts[size_t(x)] = expertCount(me, int(x));
      for (int64_t k = 0; k < counts[size_t(x)]; ++k)
        for (int64_t c = 0; c < kCols; ++c)
          rows.push_back(rowValue(me, x, k, c));
    }
    rows.resize(rows.size() + 2 * kCols, -1.0f);
    const int64_t sendRows = int64_t(rows.size()) / kCols, recvRows = 40;

    DeviceCollective c;
    c.op = Opcode::MoeExchangeCounts;
    c.group = kRanks;
    c.experts = kExperts;
    c.count = kPerRank;
    c.elementBytes = 4;
    std::vector<int32_t> recvCounts(kRanks * kPerRank, -1),
        localCounts(kPerRank, -1);
    runDeviceExpertExchange(*group, copies, c,
                            {counts.data(), recvCounts.data(),
                             localCounts.data()},
                            nullptr);
    for (int s = 0; s < kRanks; ++s)
      for (int64_t j = 0; j < kPerRank; ++j)
        EXPECT_EQ(recvCounts[size_t(s * kPerRank + j)],
                  expertCount(s, int(me * kPerRank + j)));
    for (int64_t j = 0; j < kPerRank; ++j) {
      int32_t sum = 0;
      for (int s = 0; s < kRanks; ++s)
        sum += expertCount(s, int(me * kPerRank + j));
      EXPECT_EQ(localCounts[size_t(j)], sum);
    }

    // Forward: local expert j's rows, source by source, then zeros.
    const CommTraffic before = world.traffic();
    c.op = Opcode::MoeExchange;
    c.inputRows = sendRows;
    c.outputRows = recvRows;
    c.rowBytes = kCols * 4;
    std::vector<float> received(size_t(recvRows * kCols), -1.0f);
    const int64_t sent = runDeviceExpertExchange(
        *group, copies, c,
        {rows.data(), counts.data(), recvCounts.data(), received.data()},
        nullptr);
    std::vector<float> expect;
    for (int64_t j = 0; j < kPerRank; ++j)
      for (int s = 0; s < kRanks; ++s) {
        const int64_t x = me * kPerRank + j;
        for (int64_t k = 0; k < expertCount(s, int(x)); ++k)
          for (int64_t col = 0; col < kCols; ++col)
            expect.push_back(rowValue(s, x, k, col));
      }
    expect.resize(received.size(), 0.0f);
    EXPECT_EQ(received, expect);
    // What went to the other ranks, counted as one all-to-all.
    int64_t toOthers = 0;
    for (int64_t x = 0; x < kExperts; ++x)
      if (x / kPerRank != me)
        toOthers += expertCount(me, int(x)) * kCols * 4;
    EXPECT_EQ(sent, toOthers);
    const CommTraffic after = world.traffic();
    EXPECT_EQ(after[CollectiveKind::AllToAll] -
                  before[CollectiveKind::AllToAll],
              toOthers);
    EXPECT_EQ(after[CollectiveKind::Send], before[CollectiveKind::Send]);

    // Reverse: every row back where it came from; the padding rows zero.
    c.reverse = true;
    std::swap(c.inputRows, c.outputRows);
    std::vector<float> back(rows.size(), -1.0f);
    runDeviceExpertExchange(
        *group, copies, c,
        {received.data(), counts.data(), recvCounts.data(), back.data()},
        nullptr);
    std::vector<float> original = rows;
    std::fill(original.end() - 2 * kCols, original.end(), 0.0f);
    EXPECT_EQ(back, original);
  });
  EXPECT_TRUE(failures.empty()) << test::joined(failures);
}

TEST(DeviceCollective, TrafficIsTheRingVolume) {
  DeviceCollective c = collective(Opcode::AllReduce, 1000);
  EXPECT_EQ(trafficKind(c), CollectiveKind::AllReduce);
  EXPECT_EQ(sentBytes(c, 0), 2 * 4000 * 3 / 4);
  c.op = Opcode::ReduceScatter; // 1000 floats per rank of 4000
  EXPECT_EQ(sentBytes(c, 0), 4000 * 3);
  c.op = Opcode::Broadcast;
  c.peer = 2;
  EXPECT_EQ(sentBytes(c, 2), 4000 * 3);
  EXPECT_EQ(sentBytes(c, 1), 0);
  c.op = Opcode::Shard;
  EXPECT_EQ(trafficKind(c), CollectiveKind::Count);
  c.op = Opcode::AllReduce;
  c.group = 1;
  EXPECT_EQ(trafficKind(c), CollectiveKind::Count);
}

} // namespace
} // namespace dsc::rt
