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

struct FuseBiasGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp gelu,
                                PatternRewriter &rewriter) const override {
    auto linear = gelu.getInput().getDefiningOp<LinearOp>();
    if (!linear || !linear.getBias() || !linear.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(gelu, "input is not a biased "
                                               "projection used only here");
    LinearOp unbiased = createUnbiased(rewriter, linear);
    auto fused = rewriter.create<BiasGeluOp>(gelu.getLoc(), gelu.getType(),
                                             unbiased, linear.getBias(),
                                             gelu.getApproximationAttr());
    copyLayer(linear, {unbiased, fused});
    rewriter.replaceOp(gelu, fused);
    rewriter.eraseOp(linear);
    return success();
  }
};

struct FuseBiasGeluPass
    : mlir::dsc::impl::DscFuseBiasGeluBase<FuseBiasGeluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseBiasGeluPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseBiasGeluPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseBiasGelu>(patterns.getContext());
}
