#include "dsc/Runtime/InstrCheck.h"

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
