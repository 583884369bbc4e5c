//===- StepLanesTest.cpp - ZeRO-Offload's lanes on the CUDA backend -------===//
//
// scheduleLanes on hand-made offloaded functions: each step's lane, and the
// waits that keep every conflicting pair of steps in program order while
// the host update overlaps the device's unrelated work.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/StepLanes.h"

#include <gtest/gtest.h>

using namespace dsc;
using namespace dsc::cuda;
using rt::Opcode;

namespace {

/// Buffers of 16 f32 at fixed offsets: device ones in the arena, host ones
/// in the host arena (same offsets in other memories never conflict).
struct Fixture {
  rt::Program program;
  rt::Function fn;
  std::vector<Step> steps;

  Fixture() {
    program.arenaBytes = 1 << 12;
    program.hostArenaBytes = 1 << 12;
    fn.name = "apply_step";
  }
  int buffer(int64_t offset, bool host = false) {
    rt::Buffer b;
    b.name = "b" + std::to_string(program.buffers.size());
    b.dtype = rt::DType::F32;
    b.shape = {16};
    b.offset = offset;
    b.host = host;
    program.buffers.push_back(b);
    return int(program.buffers.size()) - 1;
  }
  /// Appends instruction `op` as one step of `kind`; returns its index.
  size_t step(Step::Kind kind, Opcode op, std::vector<int> in,
              std::vector<int> out, bool host = false) {
    rt::Instr I;
    I.op = op;
    I.inputs = std::move(in);
    I.outputs = std::move(out);
    I.host = host;
    fn.body.push_back(I);
    Step s;
    s.kind = kind;
    s.instrs = {fn.body.size() - 1};
    steps.push_back(s);
    return steps.size() - 1;
  }
  size_t device(std::vector<int> in, std::vector<int> out) {
    return step(Step::Kind::Kernel, Opcode::Add, std::move(in), std::move(out));
  }
  size_t toHost(int from, int to) {
    return step(Step::Kind::HostCopy, Opcode::ToHost, {from}, {to});
  }
  size_t toDevice(int from, int to) {
    return step(Step::Kind::HostCopy, Opcode::ToDevice, {from}, {to});
  }
  size_t update(std::vector<int> in, std::vector<int> out) {
    return step(Step::Kind::Host, Opcode::Adam, std::move(in), std::move(out),
                true);
  }
  StepLanes lanes() { return scheduleLanes(program, fn, steps); }
};

using Waits = std::vector<size_t>;

TEST(StepLanes, WithoutHostStepsEverythingIsOnTheDeviceInProgramOrder) {
  Fixture f;
  const int a = f.buffer(0), b = f.buffer(64);
  f.device({a}, {b});
  f.device({b}, {a});
  const StepLanes l = f.lanes();
  EXPECT_FALSE(l.offDevice());
  EXPECT_EQ(l.lane, std::vector<Lane>(2, Lane::Device));
  EXPECT_EQ(l.waits, std::vector<Waits>(2));
}

TEST(StepLanes, TheUpdateChainWaitsForItsDataAndTheDeviceOverlapsIt) {
  Fixture f;
  const int grad = f.buffer(0), other = f.buffer(64), param = f.buffer(128),
            shard = f.buffer(192);
  const int hostGrad = f.buffer(0, true), master = f.buffer(64, true);
  const size_t reduce = f.device({grad}, {grad});        // the gradient
  const size_t out = f.toHost(grad, hostGrad);           // copied out
  const size_t upd = f.update({master, hostGrad}, {master});
  const size_t back = f.toDevice(master, shard);         // copied back
  const size_t unrelated = f.device({other}, {other});   // overlaps them
  const size_t gather = f.device({shard}, {param});      // reads the copy
  const size_t reuse = f.device({other}, {grad});        // overwrites grad
  const StepLanes l = f.lanes();
  EXPECT_EQ(l.lane[out], Lane::ToHost);
  EXPECT_EQ(l.lane[upd], Lane::Host);
  EXPECT_EQ(l.lane[back], Lane::ToDevice);
  EXPECT_EQ(l.waits[reduce], Waits{});
  EXPECT_EQ(l.waits[out], Waits{reduce});
  EXPECT_EQ(l.waits[upd], Waits{out});
  EXPECT_EQ(l.waits[back], Waits{upd});
  EXPECT_EQ(l.waits[unrelated], Waits{}); // not behind the host update
  EXPECT_EQ(l.waits[gather], Waits{back});
  EXPECT_EQ(l.waits[reuse], Waits{out}); // the copy has read it first
}

TEST(StepLanes, HostArenaReuseOrdersTheNextCopyAfterTheUpdateThatReadIt) {
  Fixture f;
  const int g1 = f.buffer(0), g2 = f.buffer(64);
  const int slot = f.buffer(0, true), alias = f.buffer(0, true),
            m1 = f.buffer(64, true), m2 = f.buffer(128, true);
  f.toHost(g1, slot);
  const size_t u1 = f.update({m1, slot}, {m1});
  const size_t second = f.toHost(g2, alias); // the plan reused the slot
  const size_t u2 = f.update({m2, alias}, {m2});
  const StepLanes l = f.lanes();
  EXPECT_EQ(l.waits[second], Waits{u1});
  EXPECT_EQ(l.waits[u2], Waits{second}); // its own lane orders it after u1
}

TEST(StepLanes, AStepWaitsOnlyForTheLastConflictingStepOfEachLane) {
  Fixture f;
  const int shard = f.buffer(0), param = f.buffer(64);
  const int m = f.buffer(0, true);
  f.toDevice(m, shard);
  const size_t later = f.toDevice(m, shard);
  const size_t read = f.device({shard}, {param});
  const size_t swap =
      f.step(Step::Kind::Host, Opcode::SwapOut, {m}, {f.buffer(0, true)}, true);
  const StepLanes l = f.lanes();
  EXPECT_EQ(l.waits[read], Waits{later});
  EXPECT_EQ(l.lane[swap], Lane::Swap);
}

TEST(StepLanes, ASwapFileWriteAndAHostArenaReadAtOneOffsetDoNotConflict) {
  Fixture f;
  const int inFile = f.buffer(0, true), inArena = f.buffer(0, true);
  f.program.buffers[size_t(inFile)].nvme = true;
  const int state = f.buffer(64, true);
  f.step(Step::Kind::Host, Opcode::SwapOut, {state}, {inFile}, true);
  const size_t upd = f.update({inArena}, {inArena});
  const StepLanes l = f.lanes();
  EXPECT_EQ(l.waits[upd], Waits{}); // memories differ
}

TEST(StepLanes, OverlapCommPutsBulkCollectivesOnTheCommLane) {
  for (bool overlap : {false, true}) {
    Fixture f;
    if (overlap)
      f.program.meta["overlap_comm"] = int64_t(1);
    const int shard = f.buffer(0), full = f.buffer(64), grad = f.buffer(128),
              other = f.buffer(192);
    const size_t gather =
        f.step(Step::Kind::Collective, Opcode::AllGather, {shard}, {full});
    const size_t compute = f.device({other}, {other});
    const size_t use = f.device({full}, {grad});
    const size_t reduce =
        f.step(Step::Kind::Collective, Opcode::ReduceScatter, {grad}, {shard});
    const size_t statistics =
        f.step(Step::Kind::Collective, Opcode::AllReduce, {other}, {other});
    f.steps[statistics].scratchOffset = 0; // on the launcher scratch
    const StepLanes l = f.lanes();
    const Lane comm = overlap ? Lane::Comm : Lane::Device;
    EXPECT_EQ(l.lane[gather], comm);
    EXPECT_EQ(l.lane[reduce], comm);
    EXPECT_EQ(l.lane[statistics], Lane::Device);
    if (!overlap)
      continue;
    EXPECT_EQ(l.waits[compute], Waits{}); // overlaps the gather
    EXPECT_EQ(l.waits[use], Waits{gather});
    EXPECT_EQ(l.waits[reduce], Waits{use});
  }
}

} // namespace
