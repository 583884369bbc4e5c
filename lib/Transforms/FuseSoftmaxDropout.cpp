//===- FuseSoftmaxDropout.cpp - Fuse the attention softmax and dropout ----===//
//
// softmax(scores) -> dropout  =>  softmax_dropout(scores), which yields the
// dropped probabilities for the next GEMM and the probabilities the
// backward reads; the gradient is one pass per row as well.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSESOFTMAXDROPOUT
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct FuseSoftmaxDropout : OpRewritePattern<DropoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(DropoutOp dropout,
                                PatternRewriter &rewriter) const override {
    auto softmax = dropout.getInput().getDefiningOp<SoftmaxOp>();
    if (!softmax || !softmax.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(dropout, "input is not a softmax "
                                                  "used only here");
    Type type = softmax.getType();
    auto fused = rewriter.create<SoftmaxDropoutOp>(
        dropout.getLoc(), TypeRange{type, type}, softmax.getInput(),
        softmax.getKeyMask(), softmax.getScaleAttr(), softmax.getCausalAttr(), dropout.getRateAttr(),
        dropout.getStreamAttr(), softmax.getLayoutAttr());
    copyLayer(softmax, {fused});
    rewriter.replaceOp(dropout, fused.getResult());
    rewriter.eraseOp(softmax);
    return success();
  }
};

struct FuseSoftmaxDropoutPass
    : mlir::dsc::impl::DscFuseSoftmaxDropoutBase<FuseSoftmaxDropoutPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseSoftmaxDropoutPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseSoftmaxDropoutPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseSoftmaxDropout>(patterns.getContext());
}
