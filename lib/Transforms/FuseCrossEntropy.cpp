//===- FuseCrossEntropy.cpp - The loss and its gradient in one op ---------===//
//
// cross_entropy(logits, labels) and cross_entropy_grad(seed, logits,
// labels) => cross_entropy_with_grad(seed, logits, labels) at the loss,
// when the seed is available there. Runs on a built step, after every pass
// that moves or clones the forward (remat, mixed precision, the stage
// split): the fused op belongs to neither the forward nor the backward.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSECROSSENTROPY
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The loss of the same logits, labels, ignore_index and classes as `grad`, if
/// `grad`'s seed is available where it is computed.
CrossEntropyOp lossOf(CrossEntropyGradOp grad) {
  Value seed = grad.getGrad();
  for (Operation *user : grad.getLogits().getUsers()) {
    auto loss = dyn_cast<CrossEntropyOp>(user);
    if (!loss || loss.getLabels() != grad.getLabels() ||
        loss.getIgnoreIndex() != grad.getIgnoreIndex() ||
        loss.getClasses() != grad.getClasses() ||
        loss->getBlock() != grad->getBlock())
      continue;
    Operation *def = seed.getDefiningOp();
    const bool seedReady =
        def ? def->getBlock() == loss->getBlock() && def->isBeforeInBlock(loss)
            : cast<BlockArgument>(seed).getOwner() == loss->getBlock();
    if (seedReady)
      return loss;
  }
  return {};
}

struct FuseCrossEntropyPass
    : mlir::dsc::impl::DscFuseCrossEntropyBase<FuseCrossEntropyPass> {
  void runOnOperation() override {
    SmallVector<CrossEntropyGradOp> grads;
    getOperation().walk([&](CrossEntropyGradOp g) { grads.push_back(g); });
    for (CrossEntropyGradOp grad : grads) {
      if (grad.getType() != grad.getLogits().getType())
        continue;
      CrossEntropyOp loss = lossOf(grad);
      if (!loss)
        continue;
      OpBuilder b(loss);
      auto fused = b.create<CrossEntropyWithGradOp>(
          loss.getLoc(), TypeRange{loss.getType(), grad.getType()},
          grad.getGrad(), grad.getLogits(), grad.getLabels(),
          grad.getIgnoreIndexAttr(), grad.getClassesAttr());
      loss.getResult().replaceAllUsesWith(fused.getLoss());
      grad.getResult().replaceAllUsesWith(fused.getLogitsGrad());
      grad.erase();
      loss.erase();
    }
  }
};

} // namespace
