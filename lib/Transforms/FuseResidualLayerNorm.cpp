//===- FuseResidualLayerNorm.cpp - Fuse the residual add into LayerNorm ---===//
//
// layer_norm(bias_dropout_add(h, b, res))  =>  bias_dropout_add_layer_norm,
// which writes the residual sum and its LayerNorm in one pass per row. The
// sum keeps its other users (GPT-2's next residual add reads it); BERT's
// post-LN blocks read only the LayerNorm output. The op takes the bias-add's
// dsc.layer: its sum is that layer's output, so per-layer checkpointing
// keeps it as the layer boundary (-dsc-remat recomputes the LayerNorm
// output from it, see Remat.cpp).
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSERESIDUALLAYERNORM
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// One LayerNorm per sum: once fused, the sum is the fused op's and a
/// second LayerNorm of it keeps its own op.
struct FuseResidualLayerNorm : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp ln,
                                PatternRewriter &rewriter) const override {
    auto bda = ln.getInput().getDefiningOp<BiasDropoutAddOp>();
    if (!bda || !definedBefore(ln.getGamma(), bda) ||
        !definedBefore(ln.getBeta(), bda))
      return rewriter.notifyMatchFailure(ln, "input is not a bias-dropout-add "
                                             "after gamma and beta");
    // At the bias-add's place: every user of the sum stays below it.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(bda);
    auto rows = cast<RankedTensorType>(ln.getType());
    auto fused = rewriter.create<BiasDropoutAddLayerNormOp>(
        ln.getLoc(),
        TypeRange{bda.getType(), ln.getType(),
                  rows.clone(rows.getShape().drop_back())},
        bda.getInput(), bda.getBias(), bda.getResidual(), ln.getGamma(),
        ln.getBeta(), bda.getRateAttr(), bda.getStreamAttr(),
        ln.getEpsilonAttr());
    copyLayer(bda, {fused});
    rewriter.replaceOp(ln, fused.getResult());
    rewriter.replaceOp(bda, fused.getSum());
    return success();
  }
};

struct FuseResidualLayerNormPass
    : mlir::dsc::impl::DscFuseResidualLayerNormBase<
          FuseResidualLayerNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseResidualLayerNormPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseResidualLayerNormPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseResidualLayerNorm>(patterns.getContext());
}
