//===- MemoryPlanTest.cpp - Static arena planning and the CPU arena -------===//
//
// The planner on hand-made Programs (reuse, in-place, inclusive live ranges,
// functions sharing the temp range, errors), random programs checked by the
// verifier and against the live-bytes lower bound, and the evidence that the
// runtime honours the plan: planned and unplanned runs produce bit-identical
// buffers, and the CPU backend's measured arena peak (both the highest byte
// Storage handed out and the highest byte that actually changed in a
// poisoned arena) equals the planned peak exactly.
//
//===----------------------------------------------------------------------===//

#include "dsc/Program/MemoryPlan.h"
#include "dsc/Runtime/Runtime.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <cstdio>
#include <unistd.h>

using namespace dsc;
using namespace dsc::rt;

namespace {

int addBuffer(Program &p, std::vector<int64_t> shape,
              BufferRole role = BufferRole::Temp, DType t = DType::F32) {
  Buffer b;
  b.name = "b" + std::to_string(p.buffers.size());
  b.role = role;
  b.dtype = t;
  b.shape = std::move(shape);
  p.buffers.push_back(b);
  return int(p.buffers.size()) - 1;
}

Instr instr(Opcode op, std::vector<int> ins, std::vector<int> outs) {
  Instr i;
  i.op = op;
  i.inputs = std::move(ins);
  i.outputs = std::move(outs);
  return i;
}

MemoryPlan plan(Program &p) {
  MemoryPlan mp;
  std::string error;
  EXPECT_TRUE(planMemory(p, mp, error)) << error;
  applyMemoryPlan(p, mp);
  return mp;
}

} // namespace

TEST(MemoryPlan, PersistentBuffersGetTheirOwnAlignedRegion) {
  Program p;
  addBuffer(p, {3}, BufferRole::Param);               // 12 bytes
  addBuffer(p, {}, BufferRole::Input, DType::I64);    // 8
  addBuffer(p, {17}, BufferRole::OptState);           // 68
  addBuffer(p, {2}, BufferRole::Output);              // 8
  p.functions["f"].name = "f";
  MemoryPlan mp = plan(p);
  EXPECT_EQ(p.buffers[0].offset, 0);
  EXPECT_EQ(p.buffers[1].offset, 64);
  EXPECT_EQ(p.buffers[2].offset, 128);
  EXPECT_EQ(p.buffers[3].offset, 256);
  EXPECT_EQ(mp.persistentBytes, 320);
  EXPECT_EQ(p.arenaBytes, 264); // the last buffer's end, unpadded
}

TEST(MemoryPlan, DeadTempsAreReused) {
  // x -> t0 -> t1 -> t2 -> t3 -> y: t0 and t2 (and t1 and t3) can share.
  // (y persists: an accumulator. An Output only f names would be packed
  // with the temps; see OutputsOfOneFunctionArePackedWithItsTemps.)
  Program p;
  int x = addBuffer(p, {16}, BufferRole::Input);
  int t0 = addBuffer(p, {16}), t1 = addBuffer(p, {16});
  int t2 = addBuffer(p, {16}), t3 = addBuffer(p, {16});
  int y = addBuffer(p, {16}, BufferRole::GradAcc);
  Function &f = p.functions["f"];
  f.name = "f";
  f.body = {instr(Opcode::Gelu, {x}, {t0}), instr(Opcode::Gelu, {t0}, {t1}),
            instr(Opcode::Gelu, {t1}, {t2}), instr(Opcode::Gelu, {t2}, {t3}),
            instr(Opcode::Gelu, {t3}, {y})};
  MemoryPlan mp = plan(p);
  EXPECT_EQ(mp.persistentBytes, 128);
  EXPECT_EQ(p.buffers[t0].offset, p.buffers[t2].offset);
  EXPECT_EQ(p.buffers[t1].offset, p.buffers[t3].offset);
  EXPECT_NE(p.buffers[t0].offset, p.buffers[t1].offset);
  EXPECT_EQ(mp.functions[0].tempBytes, 128);
  EXPECT_EQ(mp.functions[0].liveBytes, 128);
  EXPECT_EQ(p.arenaBytes, 256);
}

TEST(MemoryPlan, OverlappedCollectivesKeepTheirInputsUntilTheNext) {
  // b0 = gelu(x); r0 = reduce_scatter(b0); t = gelu(x); u = gelu(t);
  // b1 = gelu(u); r1 = reduce_scatter(b1); v = gelu(x); w = gelu(v).
  // In program order b0 is dead after its collective and t takes its
  // bytes; with overlap_comm the collective still reads b0 while the
  // compute goes on, so b0 stays live until r1 is issued (then v may take
  // it), and b1 until the function's end.
  auto build = [](bool overlap, std::map<std::string, int> &ids) {
    Program p;
    int x = addBuffer(p, {16}, BufferRole::Input);
    auto temp = [&](const char *name, int64_t n) {
      return ids[name] = addBuffer(p, {n});
    };
    int b0 = temp("b0", 16), r0 = temp("r0", 8), t = temp("t", 16),
        u = temp("u", 16), b1 = temp("b1", 16), r1 = temp("r1", 8),
        v = temp("v", 16), w = temp("w", 16);
    int y0 = addBuffer(p, {8}, BufferRole::GradAcc),
        y1 = addBuffer(p, {8}, BufferRole::GradAcc),
        y2 = addBuffer(p, {16}, BufferRole::GradAcc);
    Function &f = p.functions["f"];
    f.name = "f";
    f.body = {instr(Opcode::Gelu, {x}, {b0}),
              instr(Opcode::ReduceScatter, {b0}, {r0}),
              instr(Opcode::Gelu, {x}, {t}),
              instr(Opcode::Gelu, {t}, {u}),
              instr(Opcode::Gelu, {u}, {b1}),
              instr(Opcode::ReduceScatter, {b1}, {r1}),
              instr(Opcode::Gelu, {x}, {v}),
              instr(Opcode::Gelu, {v}, {w}),
              instr(Opcode::Add, {r0, r1}, {y0}),
              instr(Opcode::Add, {r0, r1}, {y1}),
              instr(Opcode::Add, {w, x}, {y2})};
    if (overlap)
      p.meta["overlap_comm"] = int64_t(1);
    plan(p);
    return p;
  };
  auto shares = [](const Program &p, int a, int b) {
    const Buffer &x = p.buffers[size_t(a)], &y = p.buffers[size_t(b)];
    return x.offset < y.offset + int64_t(y.bytes()) &&
           y.offset < x.offset + int64_t(x.bytes());
  };
  std::map<std::string, int> id;
  const Program serial = build(false, id);
  EXPECT_TRUE(shares(serial, id["b0"], id["t"]) ||
              shares(serial, id["b0"], id["u"]))
      << "program order reuses the bytes of the collective's input";
  const Program overlapped = build(true, id);
  for (const char *later : {"t", "u", "b1", "r1"})
    EXPECT_FALSE(shares(overlapped, id["b0"], id[later])) << later;
  for (const char *later : {"v", "w"})
    EXPECT_FALSE(shares(overlapped, id["b1"], id[later])) << later;
}

TEST(MemoryPlan, OutputsNeverShareMemoryWithTheirInputs) {
  // t0 dies at the instruction that produces t1: still disjoint, because a
  // kernel (a GEMM, say) may read its input while writing its output.
  Program p;
  int x = addBuffer(p, {8}, BufferRole::Input);
  int t0 = addBuffer(p, {8}), t1 = addBuffer(p, {8});
  int y = addBuffer(p, {8}, BufferRole::Output);
  Function &f = p.functions["f"];
  f.body = {instr(Opcode::Gelu, {x}, {t0}), instr(Opcode::Gelu, {t0}, {t1}),
            instr(Opcode::Gelu, {t1}, {y})};
  plan(p);
  EXPECT_NE(p.buffers[t0].offset, p.buffers[t1].offset);
}

TEST(MemoryPlan, InPlaceInstructionsExtendTheLiveRange) {
  // t0 is updated in place (output id == input id) at instruction 2, so it
  // is live through instruction 2 and must not share memory with t1.
  Program p;
  int x = addBuffer(p, {8}, BufferRole::Input);
  int t0 = addBuffer(p, {8}), t1 = addBuffer(p, {8});
  int y = addBuffer(p, {8}, BufferRole::Output);
  Function &f = p.functions["f"];
  f.body = {instr(Opcode::Gelu, {x}, {t0}), instr(Opcode::Gelu, {x}, {t1}),
            instr(Opcode::AllReduce, {t0}, {t0}),
            instr(Opcode::Add, {t0, t1}, {y})};
  plan(p);
  EXPECT_NE(p.buffers[t0].offset, p.buffers[t1].offset);
  std::string error;
  EXPECT_TRUE(verifyMemoryPlan(p, error)) << error;
}

TEST(MemoryPlan, FunctionsShareTheTempRange) {
  Program p;
  int x = addBuffer(p, {8}, BufferRole::Input);
  int a = addBuffer(p, {100}), b = addBuffer(p, {50});
  int y = addBuffer(p, {8}, BufferRole::Output);
  p.functions["f"].body = {instr(Opcode::Fill, {}, {a}),
                           instr(Opcode::Add, {x, a}, {y})};
  p.functions["g"].body = {instr(Opcode::Fill, {}, {b}),
                           instr(Opcode::Add, {x, b}, {y})};
  MemoryPlan mp = plan(p);
  EXPECT_EQ(p.buffers[a].offset, mp.persistentBytes);
  EXPECT_EQ(p.buffers[b].offset, mp.persistentBytes);
  EXPECT_EQ(p.arenaBytes, mp.persistentBytes + 400);
}

TEST(MemoryPlan, OutputsOfOneFunctionArePackedWithItsTemps) {
  // y: written by f alone (the driver reads it when f returns), packed with
  // f's temps and live to f's end, so t1, made after y, does not reuse it.
  // z: written by f and read by g, persistent. w: written by f and by g,
  // persistent.
  Program p;
  int x = addBuffer(p, {16}, BufferRole::Input);
  int t0 = addBuffer(p, {16}), t1 = addBuffer(p, {16});
  int y = addBuffer(p, {16}, BufferRole::Output);
  int z = addBuffer(p, {16}, BufferRole::Output);
  int w = addBuffer(p, {16}, BufferRole::Output);
  p.functions["f"].body = {instr(Opcode::Gelu, {x}, {t0}),
                           instr(Opcode::Gelu, {t0}, {y}),
                           instr(Opcode::Gelu, {y}, {z}),
                           instr(Opcode::Gelu, {x}, {t1}),
                           instr(Opcode::Gelu, {t1}, {w})};
  p.functions["g"].body = {instr(Opcode::Gelu, {z}, {w})};
  std::vector<bool> transient = transientOutputs(p);
  EXPECT_EQ(transient, (std::vector<bool>{false, false, false, true, false,
                                          false}));
  MemoryPlan mp = plan(p);
  EXPECT_EQ(mp.persistentBytes, 3 * 64); // x, z, w
  EXPECT_GE(p.buffers[y].offset, mp.persistentBytes);
  EXPECT_NE(p.buffers[y].offset, p.buffers[t1].offset);
  EXPECT_EQ(p.buffers[t0].offset, p.buffers[t1].offset); // t0 dead by then
  EXPECT_EQ(mp.functions[0].tempBytes, 128);
  std::string error;
  EXPECT_TRUE(verifyMemoryPlan(p, error)) << error;
  MemoryReport r = reportMemory(p, mp);
  EXPECT_EQ(r.inputsOutputs, 3 * 64);
  EXPECT_EQ(r.workspace, 128); // y counts in the temp arena
  EXPECT_EQ(r.tempBytes, 128);
}

TEST(MemoryPlan, RejectsATempUsedByTwoFunctions) {
  Program p;
  int t = addBuffer(p, {8});
  p.functions["f"].body = {instr(Opcode::Fill, {}, {t})};
  p.functions["g"].body = {instr(Opcode::Fill, {}, {t})};
  MemoryPlan mp;
  std::string error;
  EXPECT_FALSE(planMemory(p, mp, error));
  EXPECT_NE(error.find("used by both @f and @g"), std::string::npos) << error;
}

TEST(MemoryPlan, VerifierCatchesOverlappingLiveTemps) {
  Program p;
  int x = addBuffer(p, {8}, BufferRole::Input);
  int t0 = addBuffer(p, {8}), t1 = addBuffer(p, {8});
  int y = addBuffer(p, {8}, BufferRole::Output);
  p.functions["f"].body = {instr(Opcode::Gelu, {x}, {t0}),
                           instr(Opcode::Gelu, {x}, {t1}),
                           instr(Opcode::Add, {t0, t1}, {y})};
  plan(p);
  std::string error;
  ASSERT_TRUE(verifyMemoryPlan(p, error)) << error;
  p.buffers[t1].offset = p.buffers[t0].offset;
  EXPECT_FALSE(verifyMemoryPlan(p, error));
  EXPECT_NE(error.find("live at the same time"), std::string::npos) << error;
}

TEST(MemoryPlan, HostBuffersHaveAnArenaOfTheirOwn) {
  // ZeRO-Offload: g (device) -> to_host -> h, updated on the host into the
  // host state s, and back to the device as y. Each memory's buffers are
  // planned on their own: offsets restart at 0, the device arena holds no
  // host byte, and a host temp never shares memory with a live host temp.
  Program p;
  int g = addBuffer(p, {16}, BufferRole::GradAcc);
  int s = addBuffer(p, {16}, BufferRole::OptState);
  int h = addBuffer(p, {16}), u = addBuffer(p, {16});
  int y = addBuffer(p, {16}, BufferRole::Param);
  p.buffers[s].host = p.buffers[h].host = p.buffers[u].host = true;
  Instr toHost = instr(Opcode::ToHost, {g}, {h});
  Instr update = instr(Opcode::Add, {h, s}, {u});
  update.host = true;
  Instr back = instr(Opcode::Add, {u, s}, {s});
  back.host = true;
  Instr toDevice = instr(Opcode::ToDevice, {u}, {y});
  p.functions["apply"].body = {toHost, update, back, toDevice};
  MemoryPlan mp = plan(p);
  EXPECT_EQ(p.buffers[g].offset, 0);
  EXPECT_EQ(p.buffers[y].offset, 64);
  EXPECT_EQ(p.arenaBytes, 128); // g and y alone
  EXPECT_EQ(p.buffers[s].offset, 0);
  EXPECT_EQ(mp.host.persistentBytes, 64);
  EXPECT_NE(p.buffers[h].offset, p.buffers[u].offset);
  EXPECT_EQ(p.hostArenaBytes, 64 + 2 * 64);
  MemoryReport r = reportMemory(p, mp);
  EXPECT_EQ(r.peakBytes, 128);
  EXPECT_EQ(r.optimizerState, 0);
  EXPECT_EQ(r.hostOptimizerState, 64);
  EXPECT_EQ(r.hostPeakBytes, 192);
  EXPECT_EQ(r.hostWorkspace, 128);
  // The verifier checks each arena against its own size.
  std::string error;
  ASSERT_TRUE(verifyMemoryPlan(p, error)) << error;
  p.buffers[u].offset = p.buffers[h].offset;
  EXPECT_FALSE(verifyMemoryPlan(p, error));
  EXPECT_NE(error.find("live at the same time"), std::string::npos) << error;
  p.buffers[u].offset = p.hostArenaBytes;
  EXPECT_FALSE(verifyMemoryPlan(p, error));
  EXPECT_NE(error.find("outside the host arena"), std::string::npos) << error;
}

TEST(MemoryPlan, HostBuffersLiveInTheHostArena) {
  // Storage places a host buffer in its own allocation: writing all of
  // the device arena leaves it untouched.
  Program p;
  int d = addBuffer(p, {16}, BufferRole::Param);
  int h = addBuffer(p, {16}, BufferRole::OptState);
  p.buffers[h].host = true;
  p.functions["f"].name = "f";
  plan(p);
  Storage storage(p);
  EXPECT_EQ(storage.arenaBytes(), 64u);
  EXPECT_EQ(storage.hostArenaBytes(), 64u);
  std::memset(storage.data(d), 0xff, 64);
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(storage.f32(h)[i], 0.0f);
  EXPECT_EQ(storage.totalBytes(), 128u);
}

TEST(MemoryPlan, RandomProgramsAreValidAndWithinBounds) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    Program p;
    int in = addBuffer(p, {4}, BufferRole::Input);
    std::vector<int> values = {in};
    Function &f = p.functions["f"];
    int n = 5 + int(rng() % 40);
    for (int k = 0; k < n; ++k) {
      int t = addBuffer(p, {int64_t(1 + rng() % 300)});
      // Read one or two earlier values (so some stay live for long).
      std::vector<int> ins = {values[rng() % values.size()]};
      if (rng() % 2)
        ins.push_back(values[rng() % values.size()]);
      f.body.push_back(instr(Opcode::Add, ins, {t}));
      values.push_back(t);
    }
    MemoryPlan mp;
    std::string error;
    ASSERT_TRUE(planMemory(p, mp, error)) << error;
    applyMemoryPlan(p, mp);
    ASSERT_TRUE(verifyMemoryPlan(p, error)) << error;
    const FunctionMemory &fm = mp.functions[0];
    EXPECT_GE(fm.tempBytes, fm.liveBytes);
    int64_t sum = 0;
    for (const Buffer &b : p.buffers)
      if (b.role == BufferRole::Temp)
        sum += (int64_t(b.bytes()) + 63) / 64 * 64;
    EXPECT_LE(fm.tempBytes, sum); // never worse than no reuse at all
  }
}

// A function of more Temps than the greedy placement takes (16384) is
// placed in program order: a transformer-like step of 4000 "layers", each
// saving an activation the "backward" reads in reverse, with short-lived
// temps between, is valid, reuses every short-lived temp's memory, and
// meets the live-bytes lower bound within 5%.
TEST(MemoryPlan, LargeFunctionsArePlacedInProgramOrder) {
  Program p;
  int x = addBuffer(p, {16}, BufferRole::Input);
  Function &f = p.functions["f"];
  const int layers = 4000;
  std::vector<int> saved;
  for (int l = 0; l < layers; ++l) { // forward: 3 temps, 1 kept
    int a = addBuffer(p, {64}), b = addBuffer(p, {64}), s = addBuffer(p, {16});
    if (l % 100 == 7) { // an empty tensor now and then takes no memory
      int e = addBuffer(p, {0, 4});
      f.body.push_back(instr(Opcode::Add, {x, x}, {e}));
    }
    f.body.push_back(instr(Opcode::Add, {x, x}, {a}));
    f.body.push_back(instr(Opcode::Add, {a, a}, {b}));
    f.body.push_back(instr(Opcode::Add, {b, x}, {s}));
    saved.push_back(s);
  }
  for (int l = layers - 1; l >= 0; --l) { // backward: reads each in reverse
    int g = addBuffer(p, {64}), h = addBuffer(p, {16});
    f.body.push_back(instr(Opcode::Add, {saved[size_t(l)], x}, {g}));
    f.body.push_back(instr(Opcode::Add, {g, g}, {h}));
  }
  ASSERT_GT(p.buffers.size(), size_t(16384));
  const MemoryPlan mp = plan(p);
  std::string error;
  ASSERT_TRUE(verifyMemoryPlan(p, error)) << error;
  const FunctionMemory &fm = mp.functions[0];
  EXPECT_GE(fm.tempBytes, fm.liveBytes);
  EXPECT_LE(double(fm.tempBytes), 1.05 * double(fm.liveBytes));
}

TEST(MemoryPlan, ReportSplitsForwardAndBackward) {
  Program p;
  int x = addBuffer(p, {16}, BufferRole::Input);
  int w = addBuffer(p, {16}, BufferRole::Param);
  int g = addBuffer(p, {16}, BufferRole::GradAcc);
  int h0 = addBuffer(p, {16}), h1 = addBuffer(p, {32}), tmp = addBuffer(p, {8});
  int dh = addBuffer(p, {16});
  Function &f = p.functions["micro_step"];
  f.body = {instr(Opcode::Add, {x, w}, {h0}), instr(Opcode::Gelu, {h0}, {tmp}),
            instr(Opcode::Fill, {}, {h1}), instr(Opcode::GeluGrad, {h0, h1}, {dh}),
            instr(Opcode::Add, {g, dh}, {g})};
  f.body[0].layer = 0;
  f.body[2].layer = 3;
  f.body[3].backward = true;
  f.body[3].layer = 0;
  MemoryPlan mp = plan(p);
  MemoryReport r = reportMemory(p, mp);
  EXPECT_EQ(r.parameters, 64);
  EXPECT_EQ(r.gradients, 64);
  EXPECT_EQ(r.inputsOutputs, 64);
  EXPECT_EQ(r.parameterCount, 16);
  EXPECT_EQ(r.activations, 64 + 128); // h0 and h1, not tmp (no backward read)
  ASSERT_EQ(r.layers.size(), 4u);
  EXPECT_EQ(r.layers[0], 64);
  EXPECT_EQ(r.layers[3], 128);
  EXPECT_EQ(r.activationsOutsideLayers, 0);
  EXPECT_EQ(r.parameters + r.gradients + r.optimizerState + r.inputsOutputs +
                r.padding + r.activations + r.workspace,
            r.peakBytes);
  std::string json = formatMemoryJson(r);
  EXPECT_NE(json.find("\"layers\": [64, 0, 0, 128]"), std::string::npos)
      << json;
}

//===----------------------------------------------------------------------===//
// The runtime honours the plan
//===----------------------------------------------------------------------===//

namespace {

/// A small MLP-shaped step: linear, gelu, linear, plus an in-place update
/// and a reduction, with temps of different sizes so the arena reuses
/// memory. Returns the program (unplanned).
Program smallStep() {
  Program p;
  int x = addBuffer(p, {6, 10}, BufferRole::Input);
  int w1 = addBuffer(p, {10, 24}, BufferRole::Param);
  int w2 = addBuffer(p, {24, 10}, BufferRole::Param);
  int out = addBuffer(p, {6, 10}, BufferRole::Output);
  int norm = addBuffer(p, {}, BufferRole::Output);
  int h = addBuffer(p, {6, 24}), a = addBuffer(p, {6, 24});
  int y = addBuffer(p, {6, 10}), dy = addBuffer(p, {6, 24});
  int z = addBuffer(p, {6, 24}), s = addBuffer(p, {10});
  Function &f = p.functions["step"];
  f.name = "step";
  Instr lin1 = instr(Opcode::Linear, {x, w1}, {h});
  lin1.attrs["transpose_w"] = int64_t(0);
  Instr gelu = instr(Opcode::Gelu, {h}, {a});
  gelu.attrs["approximation"] = std::string("tanh");
  Instr lin2 = instr(Opcode::Linear, {a, w2}, {y});
  lin2.attrs["transpose_w"] = int64_t(0);
  Instr gg = instr(Opcode::GeluGrad, {a, h}, {dy});
  gg.attrs["approximation"] = std::string("tanh");
  Instr gelu2 = instr(Opcode::Gelu, {dy}, {z}); // can reuse h's memory
  gelu2.attrs["approximation"] = std::string("tanh");
  Instr red = instr(Opcode::ReduceTo, {y}, {s});
  Instr add = instr(Opcode::Add, {y, s}, {out});
  Instr gn = instr(Opcode::GlobalNorm, {z, out}, {norm});
  f.body = {lin1, gelu, gg, lin2, gelu2, red, add, gn};
  return p;
}

void fillInputs(const Program &p, Storage &s) {
  for (size_t id = 0; id < p.buffers.size(); ++id) {
    const Buffer &b = p.buffers[id];
    if (b.role != BufferRole::Input && b.role != BufferRole::Param)
      continue;
    float *v = s.f32(int(id));
    for (int64_t k = 0; k < b.numElements(); ++k)
      v[k] = float((k * 37 + int64_t(id) * 11) % 23) / 23.0f - 0.5f;
  }
}

} // namespace

TEST(MemoryPlanRuntime, PlannedRunIsBitIdenticalAndPeakMatches) {
  auto comm = createSingleRankCommunicator();
  auto backend = createCpuBackend(*comm);

  Program plain = smallStep();
  Storage ps(plain);
  fillInputs(plain, ps);
  backend->run(plain, plain.function("step"), ps, RngContext{});
  EXPECT_EQ(ps.arenaBytes(), 0u);
  EXPECT_EQ(ps.arenaHighWater(), 0u);

  Program planned = smallStep();
  MemoryPlan mp = plan(planned);
  // The temps reuse memory: the arena is smaller than the sum of buffers.
  size_t sum = 0;
  for (const Buffer &b : planned.buffers)
    sum += b.bytes();
  EXPECT_LT(size_t(planned.arenaBytes), sum);

  Storage s(planned);
  ASSERT_EQ(s.arenaBytes(), size_t(planned.arenaBytes));
  // Poison the temp region so that every byte the backend writes shows.
  char *base = static_cast<char *>(s.data(0)) - planned.buffers[0].offset;
  std::memset(base + mp.persistentBytes, 0xA5,
              size_t(planned.arenaBytes - mp.persistentBytes));
  fillInputs(planned, s);
  backend->run(planned, planned.function("step"), s, RngContext{});

  for (size_t id = 0; id < plain.buffers.size(); ++id) {
    if (plain.buffers[id].role == BufferRole::Output) {
      EXPECT_EQ(std::memcmp(ps.data(int(id)), s.data(int(id)),
                            plain.buffers[id].bytes()),
                0)
          << plain.buffers[id].name;
    }
  }

  // Measured peak 1: the highest arena byte handed to the backend.
  EXPECT_EQ(s.arenaHighWater(), size_t(planned.arenaBytes));
  // Measured peak 2: the highest byte that changed in the poisoned arena.
  size_t written = size_t(planned.arenaBytes);
  while (written > size_t(mp.persistentBytes) &&
         static_cast<unsigned char>(base[written - 1]) == 0xA5)
    --written;
  EXPECT_EQ(written, size_t(planned.arenaBytes));
}

TEST(MemoryPlanRuntime, StorageRejectsAPlanOutsideTheArena) {
  Program p = smallStep();
  plan(p);
  p.buffers[3].offset = p.arenaBytes; // past the end
  EXPECT_THROW(Storage s(p), Error);
  p = smallStep();
  plan(p);
  p.buffers[3].offset += 4; // misaligned
  EXPECT_THROW(Storage s(p), Error);
}

namespace {
/// Resident bytes of this process (/proc/self/statm).
size_t residentBytes() {
  FILE *f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (!f || std::fscanf(f, "%ld %ld", &pages, &resident) != 2)
    ADD_FAILURE() << "cannot read /proc/self/statm";
  if (f)
    std::fclose(f);
  return size_t(resident) * size_t(sysconf(_SC_PAGESIZE));
}
} // namespace

// The CUDA backend's driver keeps a Storage that mirrors the device arena
// but touches few of its bytes: the arena costs host memory only where it
// is used, and reads as zeros.
TEST(MemoryPlan, TheArenaCostsHostMemoryOnlyWhereTouched) {
  Program p;
  const int big = addBuffer(p, {64 << 20}, BufferRole::Output); // 256 MiB
  const int small = addBuffer(p, {16}, BufferRole::Param);
  plan(p);
  const size_t before = residentBytes();
  Storage s(p);
  EXPECT_LT(residentBytes() - before, size_t(32) << 20);
  const float *x = s.f32(big);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_EQ(x[(64 << 20) - 1], 0.0f);
  EXPECT_EQ(s.f32(small)[15], 0.0f);
  std::memset(s.data(big), 1, size_t(256) << 20);
  EXPECT_GT(residentBytes() - before, size_t(200) << 20);
}
