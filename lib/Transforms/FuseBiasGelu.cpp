//===- FuseBiasGelu.cpp - Fuse a projection's bias into its GELU ----------===//
//
// linear(x, W, b) -> gelu  =>  linear(x, W) -> bias_gelu(., b). The gradient
// of the fused op is one pass that yields both the input and bias gradients.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSEBIASGELU
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct FuseBiasGeluPass
    : mlir::dsc::impl::DscFuseBiasGeluBase<FuseBiasGeluPass> {
  void runOnOperation() override {
    SmallVector<GeluOp> gelus;
    getOperation().walk([&](GeluOp gelu) { gelus.push_back(gelu); });
    for (GeluOp gelu : gelus) {
      auto linear = gelu.getInput().getDefiningOp<LinearOp>();
      if (!linear || !linear.getBias() || !linear.getResult().hasOneUse())
        continue;
      OpBuilder b(gelu);
      LinearOp unbiased = createUnbiased(b, linear);
      auto fused = b.create<BiasGeluOp>(gelu.getLoc(), gelu.getType(),
                                        unbiased, linear.getBias(),
                                        gelu.getApproximationAttr());
      copyLayer(linear, {unbiased, fused});
      gelu.replaceAllUsesWith(fused.getResult());
      gelu.erase();
      linear.erase();
    }
  }
};

} // namespace
