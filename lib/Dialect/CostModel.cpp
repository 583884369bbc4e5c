//===- CostModel.cpp - FLOP and byte costs of dsc ops ---------------------===//
//
// CostOpInterface for the forward ops, as external models: the cost of an op
// is part of what remat needs to know about it, not of its definition, and
// attaching the models here keeps DscOps.td free of it. FLOPs count a
// multiply-add as 2 and an elementwise transcendental as a small constant
// (the numbers below); bytes default to one read of every operand and one
// write of every result (the interface's default methods).
//
// Gradient and optimizer ops have no model: they are never recomputed.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/CostModel.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

int64_t numel(Value v) {
  auto t = dyn_cast<ShapedType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

/// FLOPs per result element of elementwise ops.
constexpr int64_t kAddFlops = 1;
constexpr int64_t kDropoutFlops = 2;  // compare the Philox draw, scale
constexpr int64_t kGeluFlops = 10;    // tanh or erf polynomial
constexpr int64_t kSoftmaxFlops = 5;  // scale, max, exp, sum, divide
constexpr int64_t kLayerNormFlops = 8;
constexpr int64_t kRmsNormFlops = 5; // square, sum, scale, weight
constexpr int64_t kCrossEntropyFlops = 5;
constexpr int64_t kMaskFlops = 4;
constexpr int64_t kSiluFlops = 5;   // exp, add, divide, multiply
constexpr int64_t kRotaryFlops = 6; // sin, cos, two multiply-adds

/// One model class per op, parameterised by the FLOP rule and cheapness.
template <typename OpT, int64_t (*Flops)(OpT), bool Cheap>
struct Model
    : public CostOpInterface::ExternalModel<Model<OpT, Flops, Cheap>, OpT> {
  int64_t getFlops(Operation *op) const { return Flops(cast<OpT>(op)); }
  bool isCheapToRecompute(Operation *) const { return Cheap; }
};

template <typename OpT> int64_t zeroFlops(OpT) { return 0; }
template <typename OpT, int64_t K> int64_t perResult(OpT op) {
  int64_t n = 0;
  for (Value r : op->getResults())
    n += numel(r);
  return K * n;
}
template <typename OpT, int64_t K> int64_t perInput(OpT op) {
  return K * numel(op->getOperand(0));
}

int64_t linearFlops(LinearOp op) {
  auto w = cast<ShapedType>(op.getWeight().getType());
  int64_t k = op.getTransposeW() ? w.getDimSize(1) : w.getDimSize(0);
  int64_t out = numel(op.getResult());
  return 2 * out * k + (op.getBias() ? out : 0);
}

int64_t batchMatmulFlops(BatchMatmulOp op) {
  auto a = cast<ShapedType>(op.getLhs().getType());
  int64_t r = a.getRank();
  int64_t k = op.getTransposeA() ? a.getDimSize(r - 2) : a.getDimSize(r - 1);
  return 2 * numel(op.getResult()) * k;
}

/// Two [T, T] x [T, D] products per head plus softmax and dropout on the
/// [B, H, T, T] probabilities (causal masking is not discounted); with a
/// block layout, on its nonzero blocks only.
int64_t attentionFlops(AttentionOp op) {
  auto q = cast<ShapedType>(op.getQ().getType());
  int64_t t = q.getDimSize(2), d = q.getDimSize(3);
  int64_t heads = numel(op.getQ()) / d / t; // B * H
  int64_t scores = heads * t;
  if (BlockLayoutAttr layout = op.getLayoutAttr())
    scores = heads / layout.getHeads() * layout.getNonzero() *
             layout.getBlock() * layout.getBlock();
  else
    scores *= t;
  return 4 * scores * d + (kSoftmaxFlops + kDropoutFlops) * scores;
}

template <typename OpT, int64_t (*Flops)(OpT), bool Cheap>
void attach(MLIRContext *ctx) {
  OpT::template attachInterface<Model<OpT, Flops, Cheap>>(*ctx);
}

} // namespace

void mlir::dsc::registerCostModel(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, DscDialect *) {
    // Extensions may be applied to a context more than once.
    if (OperationName(AddOp::getOperationName(), ctx)
            .hasInterface<CostOpInterface>())
      return;
    attach<FillOp, zeroFlops<FillOp>, true>(ctx);
    attach<IotaOp, zeroFlops<IotaOp>, true>(ctx);
    attach<EmbeddingOp, zeroFlops<EmbeddingOp>, false>(ctx);
    attach<AddOp, perResult<AddOp, kAddFlops>, true>(ctx);
    attach<LinearOp, linearFlops, false>(ctx);
    attach<LayerNormOp, perInput<LayerNormOp, kLayerNormFlops>, false>(ctx);
    attach<InvertibleLayerNormOp,
           perInput<InvertibleLayerNormOp, kLayerNormFlops>, false>(ctx);
    attach<RmsNormOp, perInput<RmsNormOp, kRmsNormFlops>, false>(ctx);
    attach<InvertibleRmsNormOp,
           perInput<InvertibleRmsNormOp, kRmsNormFlops>, false>(ctx);
    attach<AddRmsNormOp, perInput<AddRmsNormOp, kAddFlops + kRmsNormFlops>,
           false>(ctx);
    attach<GeluOp, perResult<GeluOp, kGeluFlops>, true>(ctx);
    attach<DropoutOp, perResult<DropoutOp, kDropoutFlops>, true>(ctx);
    attach<SplitHeadsOp, zeroFlops<SplitHeadsOp>, true>(ctx);
    attach<MergeHeadsOp, zeroFlops<MergeHeadsOp>, true>(ctx);
    attach<BatchMatmulOp, batchMatmulFlops, false>(ctx);
    attach<SoftmaxOp, perResult<SoftmaxOp, kSoftmaxFlops>, false>(ctx);
    attach<CrossEntropyOp, perInput<CrossEntropyOp, kCrossEntropyFlops>,
           false>(ctx);
    attach<MlmMaskOp, perInput<MlmMaskOp, kMaskFlops>, false>(ctx);
    attach<PaddingMaskOp, perInput<PaddingMaskOp, 1>, true>(ctx);
    attach<ConcatOp, zeroFlops<ConcatOp>, true>(ctx);
    attach<SplitOp, zeroFlops<SplitOp>, true>(ctx);
    attach<BiasSplitHeadsOp, perInput<BiasSplitHeadsOp, kAddFlops>, true>(ctx);
    attach<BiasGeluOp, perResult<BiasGeluOp, kAddFlops + kGeluFlops>, true>(
        ctx);
    attach<BiasDropoutAddOp,
           perResult<BiasDropoutAddOp, 2 * kAddFlops + kDropoutFlops>, true>(
        ctx);
    attach<BiasDropoutAddLayerNormOp,
           perInput<BiasDropoutAddLayerNormOp,
                    2 * kAddFlops + kDropoutFlops + kLayerNormFlops>,
           false>(ctx);
    attach<SoftmaxDropoutOp,
           perInput<SoftmaxDropoutOp, kSoftmaxFlops + kDropoutFlops>, false>(
        ctx);
    attach<AttentionOp, attentionFlops, false>(ctx);
    attach<RotaryOp, perResult<RotaryOp, kRotaryFlops>, true>(ctx);
    attach<RepeatKvOp, zeroFlops<RepeatKvOp>, true>(ctx);
    attach<SiluOp, perResult<SiluOp, kSiluFlops>, true>(ctx);
    attach<MulOp, perResult<MulOp, kAddFlops>, true>(ctx);
    attach<ScaleOp, perResult<ScaleOp, kAddFlops>, true>(ctx);
    attach<SwigluOp, perResult<SwigluOp, kSiluFlops + kAddFlops>, true>(ctx);
    // Entering a tensor-parallel region copies; leaving it communicates
    // (a collective, never recomputed: it has no model).
    attach<TpCopyOp, zeroFlops<TpCopyOp>, true>(ctx);
  });
}

int64_t mlir::dsc::recomputeCost(Operation *op) {
  auto cost = dyn_cast<CostOpInterface>(op);
  if (!cost)
    return -1;
  return cost.getFlops() +
         kCostPerByte * (cost.getBytesRead() + cost.getBytesWritten());
}
