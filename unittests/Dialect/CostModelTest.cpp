//===- CostModelTest.cpp - CostOpInterface of the dsc ops -----------------===//
//
// The FLOPs -dsc-remat prices recomputation with: elementwise ops declare a
// constant per element in DscOps.td (of the first operand or of the
// results), the contractions have formulas in CostModel.cpp. Each expected
// number below is worked out by hand from the op's shapes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <map>

using namespace mlir;

namespace {

constexpr const char *kModule = R"mlir(
func.func @f(%x: tensor<2x8x16xf32>, %w: tensor<16xf32>, %b: tensor<16xf32>,
             %lw: tensor<16x32xf32>, %lb: tensor<32xf32>,
             %q: tensor<2x4x8x4xf32>, %rows: tensor<12x16xf32>,
             %ew: tensor<24x16xf32>, %counts: tensor<4xi32>,
             %logits: tensor<6x4xf32>) {
  %gelu = dsc.gelu tanh %x : tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  %rms = dsc.rms_norm %x, %w : (tensor<2x8x16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %ln = dsc.layer_norm %x, %w, %b {epsilon = 1.0e-5 : f64} : (tensor<2x8x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x8x16xf32>
  %lin = dsc.linear %x, %lw, %lb : (tensor<2x8x16xf32>, tensor<16x32xf32>, tensor<32xf32>) -> tensor<2x8x32xf32>
  %att, %lse = dsc.attention %q, %q, %q {scale = 0.5 : f64, rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>, tensor<2x4x8x4xf32>) -> (tensor<2x4x8x4xf32>, tensor<2x4x8xf32>)
  %gl = dsc.grouped_linear %rows, %ew, %counts {transpose_w = true} : (tensor<12x16xf32>, tensor<24x16xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  %tw, %te = dsc.moe_topk %logits {k = 2 : i64} : (tensor<6x4xf32>) -> (tensor<6x2xf32>, tensor<6x2xi32>)
  return
}
)mlir";

struct Cost {
  int64_t flops;
  bool cheap;
};

std::map<std::string, Cost> costsOf(OwningOpRef<ModuleOp> &m) {
  std::map<std::string, Cost> costs;
  m->walk([&](dsc::CostOpInterface op) {
    costs[op->getName().getStringRef().str()] = {op.getFlops(),
                                                 op.isCheapToRecompute()};
  });
  return costs;
}

TEST(CostModel, DeclaredAndModelledFlops) {
  DialectRegistry registry;
  registry.insert<dsc::DscDialect, func::FuncDialect>();
  dsc::registerCostModel(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> m = parseSourceString<ModuleOp>(kModule, &ctx);
  ASSERT_TRUE(m);
  std::map<std::string, Cost> c = costsOf(m);
  const int64_t n = 2 * 8 * 16;
  EXPECT_EQ(c["dsc.gelu"].flops, 10 * n); // per result element
  EXPECT_TRUE(c["dsc.gelu"].cheap);
  EXPECT_EQ(c["dsc.rms_norm"].flops, 5 * n); // per input element
  EXPECT_FALSE(c["dsc.rms_norm"].cheap);
  EXPECT_EQ(c["dsc.layer_norm"].flops, 8 * n);
  // 2 * out * K + bias: out = 2*8*32, K = 16.
  EXPECT_EQ(c["dsc.linear"].flops, 2 * 512 * 16 + 512);
  EXPECT_FALSE(c["dsc.linear"].cheap);
  // 4 * scores * D + (softmax 5 + dropout 2) * scores; scores = B*H*T*T.
  const int64_t scores = 2 * 4 * 8 * 8;
  EXPECT_EQ(c["dsc.attention"].flops, 4 * scores * 4 + 7 * scores);
  // One expert's matrix per row: 2 * rows * N * K = 2 * 12 * 6 * 16.
  EXPECT_EQ(c["dsc.grouped_linear"].flops, 2 * 12 * 6 * 16);
  EXPECT_FALSE(c["dsc.grouped_linear"].cheap);
  // The router: 8 per logit (softmax, selection, renormalisation), cheap.
  EXPECT_EQ(c["dsc.moe_topk"].flops, 8 * 6 * 4);
  EXPECT_TRUE(c["dsc.moe_topk"].cheap);
  // Bytes: every f32 operand read once, every result written once.
  dsc::GeluOp gelu;
  m->walk([&](dsc::GeluOp op) { gelu = op; });
  EXPECT_EQ(dsc::recomputeCost(gelu), 10 * n + dsc::kCostPerByte * 2 * 4 * n);
}

} // namespace
