//===- FuseResidualRmsNorm.cpp - Fuse the residual add into RMSNorm -------===//
//
// rms_norm(add(x, res))  =>  add_rms_norm(x, res), which writes the
// residual sum and its RMSNorm in one pass per row: LLaMA's pre-norm blocks
// add each sublayer's output to the residual stream and normalise the sum
// for the next sublayer (and model.norm for the head). The sum keeps its
// other users (the next residual add). The fused op takes the add's
// dsc.layer: its sum is that layer's output, so per-layer checkpointing
// keeps it as the layer boundary (-dsc-remat recomputes the RMSNorm output
// from it, see Remat.cpp).
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSERESIDUALRMSNORM
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// One RMSNorm per sum: once fused, the sum is the fused op's and a second
/// RMSNorm of it keeps its own op.
struct FuseResidualRmsNorm : OpRewritePattern<RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RmsNormOp norm,
                                PatternRewriter &rewriter) const override {
    auto add = norm.getInput().getDefiningOp<AddOp>();
    // A broadcasting add (a bias) is not a residual connection.
    if (!add || add.getLhs().getType() != add.getType() ||
        add.getRhs().getType() != add.getType())
      return rewriter.notifyMatchFailure(norm, "input is not a same-shape add");
    if (!definedBefore(norm.getWeight(), add))
      return rewriter.notifyMatchFailure(norm, "weight defined after the add");
    // At the add's place: every user of the sum stays below it.
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(add);
    auto rows = cast<RankedTensorType>(norm.getType());
    auto fused = rewriter.create<AddRmsNormOp>(
        norm.getLoc(),
        TypeRange{add.getType(), norm.getType(),
                  rows.clone(rows.getShape().drop_back())},
        add.getLhs(), add.getRhs(), norm.getWeight(), norm.getEpsilonAttr());
    copyLayer(add, {fused});
    rewriter.replaceOp(norm, fused.getResult());
    rewriter.replaceOp(add, fused.getSum());
    return success();
  }
};

struct FuseResidualRmsNormPass
    : mlir::dsc::impl::DscFuseResidualRmsNormBase<FuseResidualRmsNormPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseResidualRmsNormPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseResidualRmsNormPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseResidualRmsNorm>(patterns.getContext());
}
