//===- Invertible.cpp - Norm backward from its output ---------------------===//
//
// Pairs every dsc.layer_norm_grad (dsc.rms_norm_grad) with the forward norm
// whose input it reads, turns the forward op into dsc.invertible_layer_norm
// (dsc.invertible_rms_norm), which also yields the per-row 1/std (1/rms),
// and the gradient into dsc.layer_norm_grad_from_output
// (dsc.rms_norm_grad_from_output), so the norm's input has no backward use
// left and the memory planner frees it after the forward pass.
//
// A dsc.bias_dropout_add_layer_norm or dsc.add_rms_norm already yields the
// 1/std, so only its gradient changes; its sum stays alive only if
// something else reads it.
//
// Rotary embeddings need nothing here: dsc.rotary's gradient is the inverse
// rotation of the incoming gradient and reads neither its input nor its
// output.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCINVERTIBLE
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The forward norm of type NormOp a gradient op differentiates, if it is
/// in reach: it reads the same input with the same weight and epsilon.
template <typename NormOp, typename GradOp>
NormOp forwardOf(GradOp grad, Value weight) {
  for (Operation *user : grad.getInput().getUsers())
    if (auto norm = dyn_cast<NormOp>(user))
      if (norm->getOperand(1) == weight &&
          norm.getEpsilon() == grad.getEpsilon() &&
          norm->getBlock() == grad->getBlock())
        return norm;
  return {};
}

/// `norm` replaced by its invertible form (made once per forward op).
template <typename InvOp, typename NormOp>
InvOp invertOnce(NormOp norm, DenseMap<Operation *, Operation *> &inverted) {
  if (Operation *done = inverted.lookup(norm))
    return cast<InvOp>(done);
  OpBuilder b(norm);
  auto rowsType = cast<RankedTensorType>(norm.getInput().getType());
  SmallVector<Type> types = {norm.getType(),
                             rowsType.clone(rowsType.getShape().drop_back())};
  auto inv = b.create<InvOp>(norm.getLoc(), types, norm->getOperands(),
                             norm->getAttrs());
  norm.getResult().replaceAllUsesWith(inv.getResult());
  inverted[norm] = inv;
  return inv;
}

struct InvertiblePass : mlir::dsc::impl::DscInvertibleBase<InvertiblePass> {
  void runOnOperation() override {
    SmallVector<Operation *> grads;
    getOperation().walk([&](Operation *op) {
      if (isa<LayerNormGradOp, RmsNormGradOp>(op))
        grads.push_back(op);
    });
    DenseMap<Operation *, Operation *> inverted;
    for (Operation *op : grads) {
      Operation *fromOutput = nullptr;
      if (auto grad = dyn_cast<LayerNormGradOp>(op))
        fromOutput = invertLayerNorm(grad, inverted);
      else
        fromOutput = invertRmsNorm(cast<RmsNormGradOp>(op), inverted);
      if (!fromOutput)
        continue;
      fromOutput->setDiscardableAttrs(op->getDiscardableAttrDictionary());
      op->replaceAllUsesWith(fromOutput->getResults());
      op->erase();
    }
    for (auto &entry : inverted)
      entry.first->erase();
  }

  /// dsc.layer_norm_grad_from_output for `grad`, or null when its forward
  /// op is out of reach.
  static Operation *
  invertLayerNorm(LayerNormGradOp grad,
                  DenseMap<Operation *, Operation *> &inverted) {
    Value y, beta, rstd;
    if (auto fused =
            grad.getInput().getDefiningOp<BiasDropoutAddLayerNormOp>();
        fused && fused.getGamma() == grad.getGamma() &&
        fused.getEpsilon() == grad.getEpsilon()) {
      y = fused.getResult();
      beta = fused.getBeta();
      rstd = fused.getRstd();
    } else if (auto ln = forwardOf<LayerNormOp>(grad, grad.getGamma())) {
      auto inv = invertOnce<InvertibleLayerNormOp>(ln, inverted);
      y = inv.getResult();
      beta = inv.getBeta();
      rstd = inv.getRstd();
    } else {
      return nullptr;
    }
    OpBuilder b(grad);
    return b.create<LayerNormGradFromOutputOp>(
        grad.getLoc(), grad.getResultTypes(), grad.getGrad(), y,
        grad.getGamma(), beta, rstd, grad.getResidualGrad());
  }

  /// dsc.rms_norm_grad_from_output for `grad`, or null when its forward op
  /// is out of reach.
  static Operation *invertRmsNorm(RmsNormGradOp grad,
                                  DenseMap<Operation *, Operation *> &inverted) {
    Value y, rstd;
    if (auto fused = grad.getInput().getDefiningOp<AddRmsNormOp>();
        fused && fused.getWeight() == grad.getWeight() &&
        fused.getEpsilon() == grad.getEpsilon()) {
      y = fused.getResult();
      rstd = fused.getRstd();
    } else if (auto norm = forwardOf<RmsNormOp>(grad, grad.getWeight())) {
      auto inv = invertOnce<InvertibleRmsNormOp>(norm, inverted);
      y = inv.getResult();
      rstd = inv.getRstd();
    } else {
      return nullptr;
    }
    OpBuilder b(grad);
    return b.create<RmsNormGradFromOutputOp>(
        grad.getLoc(), grad.getResultTypes(), grad.getGrad(), y,
        grad.getWeight(), rstd, grad.getResidualGrad());
  }
};

} // namespace
