//===- Invertible.cpp - LayerNorm backward from its output ----------------===//
//
// Pairs every dsc.layer_norm_grad with the dsc.layer_norm whose input it
// reads, turns the forward op into dsc.invertible_layer_norm (which also
// yields the per-row 1/std) and the gradient into
// dsc.layer_norm_grad_from_output, so the LayerNorm input has no backward use
// left and the memory planner frees it after the forward pass.
//
// A dsc.bias_dropout_add_layer_norm already yields the 1/std, so only its
// gradient changes; its sum stays alive only if something else reads it.
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

/// The forward LayerNorm a gradient op differentiates, if it is in reach.
LayerNormOp forwardOf(LayerNormGradOp grad) {
  for (Operation *user : grad.getInput().getUsers())
    if (auto ln = dyn_cast<LayerNormOp>(user))
      if (ln.getGamma() == grad.getGamma() &&
          ln.getEpsilon() == grad.getEpsilon() &&
          ln->getBlock() == grad->getBlock())
        return ln;
  return {};
}

/// The forward op's LayerNorm output, gamma, beta and 1/std.
struct ForwardOutputs {
  Value result, gamma, beta, rstd;
};

struct InvertiblePass : mlir::dsc::impl::DscInvertibleBase<InvertiblePass> {
  void runOnOperation() override {
    SmallVector<LayerNormGradOp> grads;
    getOperation().walk([&](LayerNormGradOp op) { grads.push_back(op); });
    DenseMap<Operation *, InvertibleLayerNormOp> inverted;
    for (LayerNormGradOp grad : grads) {
      std::optional<ForwardOutputs> fwd = invert(grad, inverted);
      if (!fwd)
        continue;
      OpBuilder b(grad);
      auto fromOutput = b.create<LayerNormGradFromOutputOp>(
          grad.getLoc(), grad.getResultTypes(), grad.getGrad(), fwd->result,
          fwd->gamma, fwd->beta, fwd->rstd, grad.getResidualGrad());
      fromOutput->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
      grad.replaceAllUsesWith(fromOutput.getResults());
      grad.erase();
    }
    for (auto &[ln, inv] : inverted)
      ln->erase();
  }

  /// The outputs the backward of `grad` can use instead of the input, or
  /// nullopt when its forward op is out of reach.
  static std::optional<ForwardOutputs>
  invert(LayerNormGradOp grad,
         DenseMap<Operation *, InvertibleLayerNormOp> &inverted) {
    if (auto fused =
            grad.getInput().getDefiningOp<BiasDropoutAddLayerNormOp>();
        fused && fused.getGamma() == grad.getGamma() &&
        fused.getEpsilon() == grad.getEpsilon())
      return ForwardOutputs{fused.getResult(), fused.getGamma(),
                            fused.getBeta(), fused.getRstd()};
    LayerNormOp ln = forwardOf(grad);
    if (!ln)
      return std::nullopt;
    InvertibleLayerNormOp inv = inverted.lookup(ln);
    if (!inv) {
      OpBuilder b(ln);
      auto rowsType = cast<RankedTensorType>(ln.getInput().getType());
      inv = b.create<InvertibleLayerNormOp>(
          ln.getLoc(), ln.getType(),
          rowsType.clone(rowsType.getShape().drop_back()), ln.getInput(),
          ln.getGamma(), ln.getBeta(), ln.getEpsilonAttr());
      inv->setDiscardableAttrs(ln->getDiscardableAttrDictionary());
      ln.getResult().replaceAllUsesWith(inv.getResult());
      inverted[ln] = inv;
    }
    return ForwardOutputs{inv.getResult(), inv.getGamma(), inv.getBeta(),
                          inv.getRstd()};
  }
};

} // namespace
