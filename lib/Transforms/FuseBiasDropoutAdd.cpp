//===- FuseBiasDropoutAdd.cpp - Fuse bias, dropout and residual add -------===//
//
// add(res, dropout(linear(x, W, b)))  =>  bias_dropout_add(linear(x, W), b,
// res), in either operand order and with or without the dropout (rate 0).
// Each fused value has a single use, so no intermediate survives.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSEBIASDROPOUTADD
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// `branch` = [dropout(] linear(x, W, b) [)] with single-use intermediates.
struct BiasedBranch {
  LinearOp linear;
  DropoutOp dropout; // null: no dropout on this branch
};

std::optional<BiasedBranch> matchBranch(Value branch) {
  if (!branch.hasOneUse())
    return std::nullopt;
  BiasedBranch m{nullptr, branch.getDefiningOp<DropoutOp>()};
  Value pre = m.dropout ? m.dropout.getInput() : branch;
  m.linear = pre.getDefiningOp<LinearOp>();
  if (!m.linear || !m.linear.getBias() || !pre.hasOneUse())
    return std::nullopt;
  return m;
}

struct FuseBiasDropoutAdd : OpRewritePattern<AddOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add,
                                PatternRewriter &rewriter) const override {
    if (add.getLhs().getType() != add.getRhs().getType())
      return rewriter.notifyMatchFailure(add, "a broadcast add is not a "
                                              "residual connection");
    for (bool branchIsRhs : {true, false}) {
      Value branch = branchIsRhs ? add.getRhs() : add.getLhs();
      Value residual = branchIsRhs ? add.getLhs() : add.getRhs();
      std::optional<BiasedBranch> m = matchBranch(branch);
      if (!m)
        continue;
      LinearOp unbiased = createUnbiased(rewriter, m->linear);
      auto fused = rewriter.create<BiasDropoutAddOp>(
          add.getLoc(), add.getType(), unbiased, m->linear.getBias(), residual,
          m->dropout ? m->dropout.getRateAttr() : rewriter.getF64FloatAttr(0.0),
          m->dropout ? m->dropout.getStreamAttr()
                     : rewriter.getI64IntegerAttr(0));
      copyLayer(m->linear, {unbiased, fused});
      rewriter.replaceOp(add, fused);
      if (m->dropout)
        rewriter.eraseOp(m->dropout);
      rewriter.eraseOp(m->linear);
      return success();
    }
    return rewriter.notifyMatchFailure(add, "no operand is a biased "
                                            "projection [with dropout]");
  }
};

struct FuseBiasDropoutAddPass
    : mlir::dsc::impl::DscFuseBiasDropoutAddBase<FuseBiasDropoutAddPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseBiasDropoutAddPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseBiasDropoutAddPatterns(
    RewritePatternSet &patterns) {
  patterns.add<FuseBiasDropoutAdd>(patterns.getContext());
}
