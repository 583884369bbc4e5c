//===- Invertible.cpp - LayerNorm backward from its output ----------------===//
//
// Pairs every dsc.layer_norm_grad with the dsc.layer_norm whose input it
// reads, turns the forward op into dsc.invertible_layer_norm (which also
// yields the per-row 1/std) and the gradient into
// dsc.layer_norm_grad_from_output, so the LayerNorm input has no backward use
// left and the memory planner frees it after the forward pass.
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

struct InvertiblePass : mlir::dsc::impl::DscInvertibleBase<InvertiblePass> {
  void runOnOperation() override {
    SmallVector<LayerNormGradOp> grads;
    getOperation().walk([&](LayerNormGradOp op) { grads.push_back(op); });
    DenseMap<Operation *, InvertibleLayerNormOp> inverted;
    for (LayerNormGradOp grad : grads) {
      LayerNormOp ln = forwardOf(grad);
      if (!ln)
        continue;
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
      OpBuilder b(grad);
      auto fromOutput = b.create<LayerNormGradFromOutputOp>(
          grad.getLoc(), grad.getResultTypes(), grad.getGrad(),
          inv.getResult(), inv.getGamma(), inv.getBeta(), inv.getRstd());
      fromOutput->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
      grad.replaceAllUsesWith(fromOutput.getResults());
      grad.erase();
    }
    for (auto &[ln, inv] : inverted)
      ln->erase();
  }
};

} // namespace
