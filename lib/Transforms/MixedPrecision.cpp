//===- MixedPrecision.cpp - Half-precision activations and GEMM inputs ----===//
//
// -dsc-mixed-precision: in @micro_step, every float activation (forward
// values and the backward's activation gradients) is rounded to f16 or bf16
// by a dsc.round_to_half right after the op that makes it, and every
// parameter a GEMM reads is rounded once at the top of the function. The
// parameter gradients that feed the accumulation (the batch reductions:
// dsc.linear_grad_weight, dsc.embedding_grad, dsc.reduce_to, dgamma/dbeta,
// and the adds that combine them) and the accumulation itself stay f32, as
// do scalars (the loss and its seed) and everything in @apply_step (master
// weights, optimizer state), and dsc.attention's log-sum-exp. The CPU
// backend stores the rounded values in f32 buffers; the numerics are those
// of half storage with f32 accumulation.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCMIXEDPRECISION
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

bool isF32Tensor(Value v, bool allowScalar) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32() && (allowScalar || t.getRank() > 0);
}

/// Values that only carry parameter gradients into the accumulation: the
/// operand of each accumulating dsc.add and, through dsc.add, what it sums.
void collectParamGradients(Value g, DenseSet<Value> &out) {
  if (!out.insert(g).second)
    return;
  if (auto add = g.getDefiningOp<AddOp>())
    for (Value operand : add->getOperands())
      collectParamGradients(operand, out);
}

struct MixedPrecisionPass
    : mlir::dsc::impl::DscMixedPrecisionBase<MixedPrecisionPass> {
  using DscMixedPrecisionBase::DscMixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    HalfFormat format = dtype;
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!micro || micro.isExternal() || !micro.getBody().hasOneBlock()) {
      module.emitError("dsc-mixed-precision: no @micro_step with one block; "
                       "run -dsc-build-train-step first");
      return signalPassFailure();
    }
    Block &body = micro.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());

    // Results 2.. of @micro_step are grad_acc + grad.
    DenseSet<Value> keepF32;
    for (Value v : ret.getOperands().drop_front(2)) {
      keepF32.insert(v);
      if (auto add = v.getDefiningOp<AddOp>())
        for (Value operand : add->getOperands())
          if (!isa<BlockArgument>(operand))
            collectParamGradients(operand, keepF32);
    }

    auto round = [&](OpBuilder &b, Value v) -> Value {
      auto op = b.create<RoundToHalfOp>(v.getLoc(), v.getType(), v, format);
      if (Operation *def = v.getDefiningOp())
        for (StringRef name : {kGradAttrName, kLayerAttrName})
          if (Attribute attr = def->getAttr(name))
            op->setAttr(name, attr);
      return op;
    };

    // GEMM weights: one rounded copy of each parameter, at the top.
    DenseMap<Value, Value> roundedParam;
    OpBuilder top = OpBuilder::atBlockBegin(&body);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (!isa<LinearOp, LinearGradInputOp>(op))
        continue;
      Value w = op->getOperand(1);
      if (!isa<BlockArgument>(w) || !isF32Tensor(w, false))
        continue;
      Value &r = roundedParam[w];
      if (!r)
        r = round(top, w);
      op->setOperand(1, r);
    }

    // The attention's log-sum-exp stays f32, as FlashAttention keeps it: the
    // backward's exp(s - lse) would carry a half-precision error in the
    // exponent otherwise.
    for (Operation *op : ops)
      if (auto attention = dyn_cast<AttentionOp>(op))
        keepF32.insert(attention.getLse());

    // Activations: every f32 tensor result, rounded where it is made.
    for (Operation *op : ops) {
      for (Value result : op->getResults()) {
        if (!isF32Tensor(result, false) || keepF32.contains(result))
          continue;
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        Value r = round(b, result);
        result.replaceAllUsesExcept(r, r.getDefiningOp());
      }
    }
  }
};

} // namespace
