//===- BackendCompareTest.cpp - Instruction-by-instruction comparison -----===//
//
// rt::compareInstructionByInstruction with the CPU backend on both sides
// (identical: every error 0) and with a candidate that gets one kernel
// wrong: the report names that instruction alone, since each later one runs
// on the reference's operands.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/BackendCompare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <sstream>

namespace dsc::rt {
namespace {

/// c = a + b; d = 2 c; e = d + a; e = e + b (in place).
Program smallProgram() {
  Program p;
  for (const char *name : {"a", "b", "c", "d", "e"}) {
    Buffer b;
    b.name = name;
    b.role = BufferRole::Temp;
    b.dtype = DType::F32;
    b.shape = {3};
    p.buffers.push_back(b);
  }
  Function f;
  f.name = "f";
  auto add = [&](Opcode op, std::vector<int> ins, std::vector<int> outs,
                 std::map<std::string, AttrValue> attrs = {}) {
    Instr I;
    I.op = op;
    I.inputs = std::move(ins);
    I.outputs = std::move(outs);
    I.attrs = std::move(attrs);
    f.body.push_back(I);
  };
  add(Opcode::Add, {0, 1}, {2});
  add(Opcode::Scale, {2}, {3}, {{"factor", 2.0}});
  add(Opcode::Add, {3, 0}, {4});
  add(Opcode::Add, {4, 1}, {4});
  p.functions["f"] = f;
  return withInstructionFunctions(p, {"f"});
}

/// The CPU backend, except that it adds 1 to buffer `wrong`'s first element
/// whenever it writes that buffer.
class OneWrongKernel : public Backend {
public:
  OneWrongKernel(Communicator &comm, int wrong)
      : cpu(createCpuBackend(comm)), wrong(wrong) {}
  const char *name() const override { return "one-wrong-kernel"; }
  void run(const Program &program, const Function &fn, Storage &storage,
           const RngContext &rng) override {
    cpu->run(program, fn, storage, rng);
    for (const Instr &I : fn.body)
      for (int id : I.outputs)
        if (id == wrong)
          storage.f32(id)[0] += 1.0f;
  }

private:
  std::unique_ptr<Backend> cpu;
  int wrong;
};

void fillInputs(Storage &m) {
  const float a[3] = {1, 2, 3}, b[3] = {0.5f, -1, 4};
  std::memcpy(m.f32(0), a, sizeof a);
  std::memcpy(m.f32(1), b, sizeof b);
}

TEST(BackendCompare, IdenticalBackendsAgreeAndTheReferenceRunsTheFunction) {
  const Program p = smallProgram();
  auto comm = createSingleRankCommunicator();
  auto ref = createCpuBackend(*comm), cand = createCpuBackend(*comm);
  Storage refMem(p), candMem(p);
  fillInputs(refMem);
  std::ostringstream os;
  EXPECT_TRUE(compareInstructionByInstruction(p, "f", *ref, refMem, *cand,
                                              candMem, RngContext{}, 0.0, os))
      << os.str();
  EXPECT_NE(os.str().find("@f: 4 buffers compared"), std::string::npos)
      << os.str();
  // e = 2 (a + b) + a + b = 3 (a + b).
  EXPECT_FLOAT_EQ(refMem.f32(4)[0], 4.5f);
  EXPECT_FLOAT_EQ(refMem.f32(4)[1], 3.0f);
  EXPECT_FLOAT_EQ(refMem.f32(4)[2], 21.0f);
  // The candidate did each instruction from the reference's operands.
  EXPECT_EQ(std::memcmp(candMem.f32(4), refMem.f32(4), 12), 0);
}

TEST(BackendCompare, AWrongKernelIsNamedAndNotBlamedOnLaterOnes) {
  const Program p = smallProgram();
  auto comm = createSingleRankCommunicator();
  auto ref = createCpuBackend(*comm);
  OneWrongKernel cand(*comm, /*wrong=*/2); // the first Add's output c
  Storage refMem(p), candMem(p);
  fillInputs(refMem);
  std::ostringstream os;
  EXPECT_FALSE(compareInstructionByInstruction(
      p, "f", *ref, refMem, cand, candMem, RngContext{}, 1e-6, os));
  const std::string report = os.str();
  EXPECT_NE(report.find("FAIL @f #0 Add: buffer 'c' [3]:f32 differs from the "
                        "reference by 0.143"),
            std::string::npos)
      << report;
  // Scale read the reference's c: its error is 0 (a whole run would have
  // passed the wrong c on).
  EXPECT_NE(report.find("Scale                        0\n"), std::string::npos)
      << report;
  EXPECT_EQ(report.find("FAIL", report.find("FAIL") + 1), std::string::npos)
      << report;
}

TEST(BackendCompare, RelativeErrorOfIntegerAndNaNBuffers) {
  Buffer ints;
  ints.dtype = DType::I32;
  ints.shape = {2};
  const int32_t x[2] = {1, 2}, y[2] = {1, 3};
  EXPECT_EQ(relativeBufferError(ints, x, x), 0.0);
  EXPECT_TRUE(std::isinf(relativeBufferError(ints, x, y)));
  Buffer floats;
  floats.dtype = DType::F32;
  floats.shape = {2};
  const float f[2] = {2, -4}, g[2] = {2, -3}, n[2] = {NAN, -4};
  EXPECT_DOUBLE_EQ(relativeBufferError(floats, f, g), 0.25);
  EXPECT_TRUE(std::isinf(relativeBufferError(floats, f, n)));
}

Tensor floats(std::vector<float> v) {
  Tensor t;
  t.shape = {int64_t(v.size())};
  t.bytes.resize(v.size() * sizeof(float));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

TEST(BackendCompare, GradientsOfAWholeMicroStep) {
  Safetensors ref;
  ref.tensors["loss"] = floats({2.5f});
  ref.tensors["grad.w"] = floats({1, -2, 4});
  ref.tensors["grad.b"] = floats({0.5f, 0.25f});
  ref.tensors["input_ids"] = floats({7, 8}); // not compared
  Safetensors same = ref;
  same.tensors["input_ids"] = floats({0, 0});
  std::ostringstream os;
  EXPECT_TRUE(compareGradients(ref, same, 0.0, os)) << os.str();
  EXPECT_NE(os.str().find("3 tensors compared"), std::string::npos) << os.str();

  // A bias gradient off by a fifth of its largest value: named, with the
  // worst first in the list.
  Safetensors wrong = ref;
  wrong.tensors["grad.b"] = floats({0.4f, 0.25f});
  std::ostringstream bad;
  EXPECT_FALSE(compareGradients(ref, wrong, 1e-1, bad));
  EXPECT_NE(bad.str().find("FAIL grad.b differs from the reference by 0.2 "),
            std::string::npos)
      << bad.str();
  EXPECT_LT(bad.str().find("  grad.b "), bad.str().find("  grad.w "))
      << bad.str();
  EXPECT_TRUE(compareGradients(ref, wrong, 0.25, os));

  // Missing, reshaped, NaN.
  Safetensors missing = ref;
  missing.tensors.erase("grad.w");
  missing.tensors["grad.b"] = floats({0.5f, 0.25f, 0.0f});
  missing.tensors["loss"] = floats({NAN});
  std::ostringstream three;
  EXPECT_FALSE(compareGradients(ref, missing, 1.0, three));
  EXPECT_NE(three.str().find("FAIL grad.w: missing from the candidate's "
                             "micro-step"),
            std::string::npos)
      << three.str();
  EXPECT_NE(three.str().find("FAIL grad.b: [3]:f32 where the reference has "
                             "[2]:f32"),
            std::string::npos)
      << three.str();
  EXPECT_NE(three.str().find("FAIL loss differs from the reference by inf"),
            std::string::npos)
      << three.str();

  // Nothing to compare is not a pass.
  std::ostringstream none;
  EXPECT_FALSE(compareGradients(Safetensors{}, Safetensors{}, 1.0, none));
}

} // namespace
} // namespace dsc::rt
