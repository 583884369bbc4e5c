//===- FusionUtils.h - Shared pieces of the fusion passes ------*- C++ -*-===//
//
// The local fusions are rewrite patterns (populateFuse*Patterns, declared
// in Passes.h) that their passes apply with the greedy driver. Most move a
// projection's bias out of the GEMM into a fused epilogue op, and all must
// keep the provenance the memory report reads.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_TRANSFORMS_FUSIONUTILS_H
#define DSC_LIB_TRANSFORMS_FUSIONUTILS_H

#include "dsc/Dialect/DscOps.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::dsc {

/// `linear` without its bias, created just before it.
inline LinearOp createUnbiased(OpBuilder &b, LinearOp linear) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(linear);
  return b.create<LinearOp>(linear.getLoc(), linear.getResult().getType(),
                            linear.getInput(), linear.getWeight(), Value(),
                            linear.getTransposeWAttr());
}

/// Copies `from`'s dsc.layer (if any) onto `to`: the memory report
/// attributes saved activations to layers by it.
inline void copyLayer(Operation *from, ArrayRef<Operation *> to) {
  if (Attribute layer = from->getAttr(kLayerAttrName))
    for (Operation *op : to)
      op->setAttr(kLayerAttrName, layer);
}

/// Whether `v` is available at `op` (a block argument or an earlier op's
/// result in the same block): a fusion that moves an op's work up to
/// another's place checks its other operands with it.
inline bool definedBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

/// Runs a fusion pass's patterns over `root` to a fixed point, top-down,
/// without region simplification (the step functions are single blocks).
inline LogicalResult applyFusionPatterns(Operation *root,
                                         RewritePatternSet &&patterns) {
  GreedyRewriteConfig config;
  config.useTopDownTraversal = true;
  config.enableRegionSimplification = GreedySimplifyRegionLevel::Disabled;
  return applyPatternsAndFoldGreedily(root, std::move(patterns), config);
}

} // namespace mlir::dsc

#endif // DSC_LIB_TRANSFORMS_FUSIONUTILS_H
