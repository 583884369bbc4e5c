//===- FusionUtils.h - Shared pieces of the fusion passes ------*- C++ -*-===//
//
// The fusion passes all move a projection's bias out of the GEMM into a
// fused epilogue op, and must keep the provenance the memory report reads.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_TRANSFORMS_FUSIONUTILS_H
#define DSC_LIB_TRANSFORMS_FUSIONUTILS_H

#include "dsc/Dialect/DscOps.h"

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

} // namespace mlir::dsc

#endif // DSC_LIB_TRANSFORMS_FUSIONUTILS_H
