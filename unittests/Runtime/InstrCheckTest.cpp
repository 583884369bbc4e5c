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
  EXPECT_EQ(c.error(gelu),
            "Gelu: output 'b1' [5] has 5 elements, expected 8");
  EXPECT_EQ(c.error(instr(Opcode::Gelu, {x}, {7})),
            "Gelu: buffer id 7 out of range (program has 2 buffers)");
}

TEST(InstrCheck, BadRate) {
  Check c;
  int x = c.buf({8}), y = c.buf({8});
  Instr drop = instr(Opcode::Dropout, {x}, {y});
  drop.attrs["rate"] = 1.0;
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
  att.attrs["rate"] = 0.1;
  d = checkInstr(c.prog, att);
  EXPECT_EQ(d.BH, 6);
  EXPECT_EQ(d.T, 4);
  EXPECT_EQ(d.D, 8);
  EXPECT_DOUBLE_EQ(d.rate, 0.1);
  Instr wrongLse = instr(Opcode::Attention, {q, k, v}, {o, o});
  wrongLse.attrs["rate"] = 0.0;
  EXPECT_EQ(c.error(wrongLse), "Attention: output 'b7' [2,3,4,8] has 192 "
                               "elements, expected 24");
}
