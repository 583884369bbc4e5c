//===- FuseSwiglu.cpp - SiLU gate times up projection as one op -----------===//
//
// mul(silu(gate), up) (either operand order) => swiglu(gate, up): LLaMA's
// MLP gate in one pass, without the SiLU output as an intermediate; its
// gradient is one dsc.swiglu_grad instead of silu_grad and two products.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSESWIGLU
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct FuseSwiglu : OpRewritePattern<MulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(MulOp mul,
                                PatternRewriter &rewriter) const override {
    Value up = mul.getRhs();
    auto silu = mul.getLhs().getDefiningOp<SiluOp>();
    if (!silu) {
      silu = mul.getRhs().getDefiningOp<SiluOp>();
      up = mul.getLhs();
    }
    if (!silu || !silu.getResult().hasOneUse())
      return rewriter.notifyMatchFailure(mul, "no operand is a SiLU used "
                                              "only here");
    auto fused = rewriter.create<SwigluOp>(mul.getLoc(), mul.getType(),
                                           silu.getInput(), up);
    copyLayer(mul, {fused});
    rewriter.replaceOp(mul, fused);
    rewriter.eraseOp(silu);
    return success();
  }
};

struct FuseSwigluPass : mlir::dsc::impl::DscFuseSwigluBase<FuseSwigluPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseSwigluPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseSwigluPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseSwiglu>(patterns.getContext());
}
