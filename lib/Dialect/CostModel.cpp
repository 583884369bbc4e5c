//===- CostModel.cpp - FLOP costs of the contractions ----------------------===//
//
// CostOpInterface for the ops whose FLOPs are not a constant per element
// (linear, batch_matmul, attention, grouped_linear), as external models.
// Elementwise ops declare their cost in DscOps.td (Dsc_ElementwiseCost). FLOPs count a
// multiply-add as 2; bytes default to one read of every operand and one
// write of every result (the interface's default methods).
//
// Gradient and optimizer ops have no model: they are never recomputed.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/CostModel.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The FLOP rule of one contraction; none is cheap to recompute.
template <typename OpT, int64_t (*Flops)(OpT)>
struct Model : public CostOpInterface::ExternalModel<Model<OpT, Flops>, OpT> {
  int64_t getFlops(Operation *op) const { return Flops(cast<OpT>(op)); }
  bool isCheapToRecompute(Operation *) const { return false; }
};

int64_t linearFlops(LinearOp op) {
  auto w = cast<ShapedType>(op.getWeight().getType());
  int64_t k = op.getTransposeW() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t out = staticElementCount(op.getResult());
  return 2 * out * k + (op.getBias() ? out : 0);
}

/// The GEMM's; dequantizing the weight's tiles is not counted.
int64_t linear4bitFlops(Linear4bitOp op) {
  int64_t k = op.getTransposeW() ? op.getCols() : op.getRows();
  return 2 * staticElementCount(op.getResult()) * k;
}

int64_t batchMatmulFlops(BatchMatmulOp op) {
  auto a = cast<ShapedType>(op.getLhs().getType());
  int64_t r = a.getRank();
  int64_t k = op.getTransposeA() ? a.getDimSize(r - 2) : a.getDimSize(r - 1);
  return 2 * staticElementCount(op.getResult()) * k;
}

/// Two [T, T] x [T, D] products per head plus softmax and dropout on the
/// [B, H, T, T] probabilities (causal masking is not discounted); with a
/// block layout, on its nonzero blocks only. The per-score cost is the one
/// dsc.softmax_dropout declares.
int64_t attentionFlops(AttentionOp op) {
  auto q = cast<ShapedType>(op.getQ().getType());
  int64_t t = q.getDimSize(2), d = q.getDimSize(3);
  int64_t heads = staticElementCount(op.getQ()) / d / t; // B * H
  int64_t scores = heads * t;
  if (BlockLayoutAttr layout = op.getLayoutAttr())
    scores = heads / layout.getHeads() * layout.getNonzero() *
             layout.getBlock() * layout.getBlock();
  else
    scores *= t;
  return 4 * scores * d + SoftmaxDropoutOp::kFlopsPerElement * scores;
}

/// One GEMM per expert over its rows: every row meets one expert's matrix.
int64_t groupedLinearFlops(GroupedLinearOp op) {
  auto x = cast<ShapedType>(op.getInput().getType());
  return 2 * staticElementCount(op.getResult()) * x.getDimSize(1);
}

} // namespace

void mlir::dsc::registerCostModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, DscDialect *) {
    // Extensions may be applied to a context more than once.
    if (OperationName(LinearOp::getOperationName(), ctx)
            .hasInterface<CostOpInterface>())
      return;
    LinearOp::attachInterface<Model<LinearOp, linearFlops>>(*ctx);
    Linear4bitOp::attachInterface<Model<Linear4bitOp, linear4bitFlops>>(*ctx);
    BatchMatmulOp::attachInterface<Model<BatchMatmulOp, batchMatmulFlops>>(
        *ctx);
    AttentionOp::attachInterface<Model<AttentionOp, attentionFlops>>(*ctx);
    GroupedLinearOp::attachInterface<
        Model<GroupedLinearOp, groupedLinearFlops>>(*ctx);
  });
}

int64_t mlir::dsc::recomputeCost(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost)
    return -1;
  return cost.getFlops() +
         kCostPerByte * (cost.getBytesRead() + cost.getBytesWritten());
}
