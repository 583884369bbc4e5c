#include "dsc/Program/InstrCheck.h"
#include "dsc/Program/KernelOpcodes.h"

#include <gtest/gtest.h>

using namespace dsc::rt;

namespace {

struct Check {
  Program prog;
  int buf(std::vector<int64_t> shape) {
    prog.buffers.push_back({"b" + std::to_string(prog.buffers.size()),
                            BufferRole::Temp, DType::F32, std::move(shape)});
    return int(prog.buffers.size()) - 1;
  }
  /// The message checkInstr throws ("" if it accepts the instruction).
  std::string error(const Instr &I) {
    try {
      checkInstr(prog, I);
    } catch (const Error &e) {
      return e.what();
    }
    return "";
  }
};

Instr instr(Opcode op, std::vector<int> ins, std::vector<int> outs) {
  Instr I;
  I.op = op;
  I.inputs = std::move(ins);
  I.outputs = std::move(outs);
  return I;
}

} // namespace

TEST(InstrCheck, WrongInputCount) {
  Check c;
  int x = c.buf({2, 4}), y = c.buf({2, 4});
  EXPECT_EQ(c.error(instr(Opcode::LayerNorm, {x}, {y})),
            "LayerNorm: expects 3 inputs, got 1");
  EXPECT_EQ(c.error(instr(Opcode::Linear, {x}, {y})),
            "Linear: expects 2..3 inputs, got 1");
}

TEST(InstrCheck, WrongElementCountAndBadId) {
  Check c;
  int x = c.buf({2, 4}), bad = c.buf({5});
  Instr gelu = instr(Opcode::Gelu, {x}, {bad});
  gelu.attrs["approximation"] = std::string("tanh");
  EXPECT_EQ(c.error(gelu),
            "Gelu: output 'b1' [5] has 5 elements, expected 8");
  gelu.outputs = {7};
  EXPECT_EQ(c.error(gelu),
            "Gelu: buffer id 7 out of range (program has 2 buffers)");
}

TEST(InstrCheck, BadRate) {
  Check c;
  int x = c.buf({8}), y = c.buf({8});
  Instr drop = instr(Opcode::Dropout, {x}, {y});
  drop.attrs["rate"] = 1.0;
  drop.attrs["stream"] = int64_t(3);
  EXPECT_EQ(c.error(drop), "Dropout: rate must be in [0, 1), got 1.000000");
  drop.attrs["rate"] = 0.25;
  EXPECT_EQ(c.error(drop), "");
  EXPECT_DOUBLE_EQ(checkInstr(c.prog, drop).rate, 0.25);
}

TEST(InstrCheck, DerivedSizes) {
  Check c;
  // Linear with a transposed weight [N=3, K=4]: x [2,5,4] -> y [2,5,3].
  int x = c.buf({2, 5, 4}), w = c.buf({3, 4}), bias = c.buf({3}),
      y = c.buf({2, 5, 3});
  Instr lin = instr(Opcode::Linear, {x, w, bias}, {y});
  lin.attrs["transpose_w"] = int64_t(1);
  InstrDims d = checkInstr(c.prog, lin);
  EXPECT_EQ(d.M, 10);
  EXPECT_EQ(d.K, 4);
  EXPECT_EQ(d.N, 3);
  EXPECT_TRUE(d.transW);
  // Attention over q, k, v [B=2, H=3, T=4, D=8].
  int q = c.buf({2, 3, 4, 8}), k = c.buf({2, 3, 4, 8}), v = c.buf({2, 3, 4, 8}),
      o = c.buf({2, 3, 4, 8}), lse = c.buf({2, 3, 4});
  Instr att = instr(Opcode::Attention, {q, k, v}, {o, lse});
  att.attrs = {{"scale", 0.5}, {"causal", int64_t(1)}, {"rate", 0.1},
               {"stream", int64_t(0)}, {"layout", BlockLayout{}}};
  d = checkInstr(c.prog, att);
  EXPECT_EQ(d.BH, 6);
  EXPECT_EQ(d.T, 4);
  EXPECT_EQ(d.D, 8);
  EXPECT_DOUBLE_EQ(d.rate, 0.1);
  Instr wrongLse = instr(Opcode::Attention, {q, k, v}, {o, o});
  wrongLse.attrs = att.attrs;
  EXPECT_EQ(c.error(wrongLse), "Attention: output 'b7' [2,3,4,8] has 192 "
                               "elements, expected 24");
}

TEST(InstrCheck, AttributesAsTheOpTableStatesThem) {
  Check c;
  int x = c.buf({8}), y = c.buf({8});
  Instr drop = instr(Opcode::Dropout, {x}, {y});
  drop.attrs["rate"] = 0.5;
  EXPECT_EQ(c.error(drop), "Dropout: missing attribute 'stream'");
  drop.attrs["stream"] = 0.5;
  EXPECT_EQ(c.error(drop), "Dropout: attribute 'stream' must be an int");
  drop.attrs["stream"] = int64_t(2);
  drop.attrs["scale"] = 2.0;
  EXPECT_EQ(c.error(drop), "Dropout: unknown attribute 'scale'");
  drop.attrs.erase("scale");
  drop.attrs["rate"] = int64_t(0); // a Float attribute accepts an integer
  EXPECT_EQ(c.error(drop), "");
}

TEST(InstrCheck, OperandCountsOfVariadicOpcodes) {
  Check c;
  int x = c.buf({2, 3, 8});
  Instr split = instr(Opcode::SplitHeads, {x}, {});
  split.attrs["num_heads"] = int64_t(2);
  EXPECT_EQ(c.error(split), "SplitHeads: expects at least 1 outputs, got 0");
}

TEST(InstrCheck, EveryOpcodeHasItsTableRow) {
  for (size_t k = 0; k < allOps().size(); ++k) {
    EXPECT_EQ(size_t(allOps()[k].op), k);
    EXPECT_STREQ(opcodeName(Opcode(k)), allOps()[k].name);
  }
}

namespace {
template <class FamilyOpcode>
void expectEnumerator(Opcode op, FamilyOpcode want) {
  EXPECT_EQ(asFamily<FamilyOpcode>(op), want) << opcodeName(op);
}
} // namespace

// Every row of Ops.def is the enumerator of the same name in the enum of
// its family's kernel family (a row whose enum lacks it does not compile).
TEST(KernelOpcodes, EveryOpcodeIsItsFamilysEnumeratorOfTheSameName) {
#define DSC_IN(Kernels, Name)                                                  \
  expectEnumerator(Opcode::Name, Kernels##Opcode::Name);
#define DSC_OP(Name, MlirOp, Family, ...) DSC_FAMILY_##Family(Name)
#include "dsc/Program/Ops.def"
#undef DSC_IN
  // And OpInfo::kernels says the same family.
  EXPECT_EQ(opInfo(Opcode::MoeExchange).kernels, KernelFamily::Collective);
  EXPECT_EQ(opInfo(Opcode::MoeExchange).route, OpRoute::Collective);
  EXPECT_EQ(opInfo(Opcode::MoeRoute).kernels, KernelFamily::Moe);
  EXPECT_EQ(opInfo(Opcode::Adam).route, OpRoute::Optimizer);
  EXPECT_EQ(opInfo(Opcode::Adam8bit).route, OpRoute::Kernel);
  EXPECT_EQ(opInfo(Opcode::Linear).route, OpRoute::Gemm);
}

TEST(KernelOpcodes, AnotherFamilysOpcodeIsAnInternalError) {
  try {
    asFamily<GemmOpcode>(Opcode::RmsNorm);
    FAIL() << "RmsNorm converted into the Gemm family";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("RmsNorm is not in kernel family"),
              std::string::npos)
        << e.what();
  }
}

namespace {
/// A program for a data = 2 x tensor = 3 x pipeline = 2 mesh.
Check meshCheck() {
  Check c;
  c.prog.meta["world_size"] = int64_t(12);
  c.prog.meta["mesh_data"] = int64_t(2);
  c.prog.meta["mesh_tensor"] = int64_t(3);
  c.prog.meta["mesh_pipeline"] = int64_t(2);
  return c;
}
Instr onAxis(Instr I, const char *axis) {
  I.attrs["axis"] = std::string(axis);
  return I;
}
} // namespace

TEST(InstrCheck, CollectivesSizeByTheirAxisGroup) {
  Check c = meshCheck();
  int whole = c.buf({6, 2}), third = c.buf({2, 2}), half = c.buf({3, 2});
  Instr gather = onAxis(instr(Opcode::AllGather, {third}, {whole}), "tensor");
  EXPECT_EQ(c.error(gather), "");
  EXPECT_EQ(checkInstr(c.prog, gather).group, 3);
  EXPECT_EQ(c.error(onAxis(instr(Opcode::AllGather, {half}, {whole}), "data")),
            "");
  EXPECT_EQ(c.error(onAxis(instr(Opcode::AllGather, {third}, {whole}), "data")),
            "AllGather: gathered result 'b0' [6,2] has 12 elements, expected 8");
  Instr toAll = onAxis(instr(Opcode::AllToAll, {half}, {half}), "tensor");
  EXPECT_EQ(c.error(toAll), "");
  EXPECT_EQ(c.error(onAxis(instr(Opcode::AllToAll, {third}, {third}), "tensor")),
            "AllToAll: 'b1' has 4 elements, not a multiple of the tensor "
            "group's 3 ranks");
  EXPECT_EQ(c.error(onAxis(instr(Opcode::Shard, {whole}, {third}), "model")),
            "Shard: axis must be \"data\", \"tensor\", \"pipeline\", "
            "\"data_inner\" or \"data_outer\", got \"model\"");
}

TEST(InstrCheck, BroadcastRootAndPeerOffsets) {
  Check c = meshCheck();
  int x = c.buf({4}), y = c.buf({4}), small = c.buf({3});
  Instr bcast = onAxis(instr(Opcode::Broadcast, {x}, {y}), "tensor");
  bcast.attrs["root"] = int64_t(2);
  EXPECT_EQ(c.error(bcast), "");
  EXPECT_EQ(checkInstr(c.prog, bcast).peer, 2);
  bcast.attrs["root"] = int64_t(3);
  EXPECT_EQ(c.error(bcast),
            "Broadcast: root 3 is not a rank of the tensor group of 3");
  bcast.attrs["root"] = int64_t(0);
  bcast.outputs = {small};
  EXPECT_EQ(c.error(bcast),
            "Broadcast: result 'b2' [3] has 3 elements, expected 4");

  Instr send = onAxis(instr(Opcode::Send, {x}, {}), "pipeline");
  send.attrs["peer"] = int64_t(-1);
  EXPECT_EQ(c.error(send), "");
  EXPECT_EQ(checkInstr(c.prog, send).n, 4);
  send.attrs["peer"] = int64_t(2);
  EXPECT_EQ(c.error(send), "Send: peer offset 2 does not name another rank "
                           "of the pipeline group of 2");
  Instr recv = onAxis(instr(Opcode::Recv, {}, {small}), "tensor");
  recv.attrs["peer"] = int64_t(0);
  EXPECT_EQ(c.error(recv), "Recv: peer offset 0 does not name another rank "
                           "of the tensor group of 3");
  recv.attrs["peer"] = int64_t(-2);
  EXPECT_EQ(c.error(recv), "");
  EXPECT_EQ(c.error(onAxis(instr(Opcode::Recv, {x}, {small}), "tensor")),
            "Recv: expects 0 inputs, got 1");
}

TEST(InstrCheck, MeshThatIsNotTheWorld) {
  Check c = meshCheck();
  c.prog.meta["world_size"] = int64_t(8);
  int x = c.buf({4}), y = c.buf({4});
  Instr reduce = onAxis(instr(Opcode::AllReduce, {x}, {y}), "data");
  reduce.attrs["op"] = std::string("sum");
  EXPECT_EQ(c.error(reduce),
            "compiled step: its mesh (data 2 x tensor 3 x pipeline 2) does "
            "not have world_size 8 ranks");
}

TEST(InstrCheck, MemorySpaces) {
  // ZeRO-Offload: an instruction works in the memory it runs in; ToHost
  // and ToDevice cross from the device to the host and back.
  Check c;
  int d = c.buf({4}), h = c.buf({4}), d2 = c.buf({4});
  c.prog.buffers[size_t(h)].host = true;
  auto copy = [](Opcode op, int in, int out) {
    Instr I = instr(op, {in}, {out});
    I.attrs["group"] = int64_t(1);
    return I;
  };
  EXPECT_EQ(c.error(copy(Opcode::ToHost, d, h)), "");
  EXPECT_EQ(c.error(copy(Opcode::ToDevice, h, d2)), "");
  EXPECT_EQ(c.error(copy(Opcode::ToHost, h, d)),
            "ToHost: input 'b1' is in host memory, but the copy expects "
            "device memory");
  EXPECT_EQ(c.error(instr(Opcode::Copy, {h}, {d})),
            "Copy: input 'b1' is in host memory, but the instruction runs "
            "on the device");
  Instr onHost = instr(Opcode::Copy, {h}, {d});
  onHost.host = true;
  EXPECT_EQ(c.error(onHost), "Copy: output 'b0' is in device memory, but "
                             "the instruction runs on the host");
  Instr copyOnHost = copy(Opcode::ToDevice, h, d);
  copyOnHost.host = true;
  EXPECT_EQ(c.error(copyOnHost),
            "ToDevice: a copy between memories is not placed on the host "
            "itself");
}

TEST(InstrCheck, NvmeSwapFile) {
  // ZeRO-Infinity: only SwapIn reads an NVMe-resident buffer and only
  // SwapOut writes one, both on the host.
  Check c;
  int s = c.buf({4}), h = c.buf({4}), h2 = c.buf({4});
  for (int id : {s, h, h2})
    c.prog.buffers[size_t(id)].host = true;
  c.prog.buffers[size_t(s)].nvme = true;
  auto swap = [](Opcode op, int in, int out) {
    Instr I = instr(op, {in}, {out});
    I.attrs["group"] = int64_t(2);
    I.host = true;
    return I;
  };
  EXPECT_EQ(c.error(swap(Opcode::SwapIn, s, h)), "");
  EXPECT_EQ(c.error(swap(Opcode::SwapOut, h, s)), "");
  EXPECT_EQ(c.error(swap(Opcode::SwapIn, h, h2)),
            "SwapIn: input 'b1' must be in the NVMe swap file (swap_in "
            "reads it)");
  EXPECT_EQ(c.error(swap(Opcode::SwapOut, s, h)),
            "SwapOut: input 'b0' is in the NVMe swap file, which only a "
            "swap_in reads");
  Instr copy = instr(Opcode::Copy, {h}, {s});
  copy.host = true;
  EXPECT_EQ(c.error(copy), "Copy: output 'b0' is in the NVMe swap file, "
                           "which only a swap_out writes");
}
