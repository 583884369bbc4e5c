//===- FuseAttention.cpp - The attention core as one op -------------------===//
//
// batch_matmul(q, k^T) -> softmax [-> dropout] -> batch_matmul(., v), or the
// same with -dsc-fuse-softmax-dropout's fused op in the middle, becomes one
// dsc.attention. The backward then recomputes the probabilities per tile
// from q, k and the saved log-sum-exp instead of keeping the [B, H, T, T]
// probabilities (and their dropout) alive from the forward to the backward.
// The softmax's block layout (block-sparse attention) goes onto the fused
// op, whose kernels then visit only the layout's blocks, and so does its
// key padding mask.
// Keys and values repeated for grouped-query attention (dsc.repeat_kv) are
// read from their shared heads: the fused kernels never copy them.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSEATTENTION
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The ops of one matched attention core, from the scores to the context.
struct Chain {
  BatchMatmulOp scores;
  Operation *softmax = nullptr; ///< SoftmaxOp or SoftmaxDropoutOp
  DropoutOp dropout;            ///< only after a plain SoftmaxOp
  double scale = 1.0;
  bool causal = false;
  FloatAttr rate;
  IntegerAttr stream;
  BlockLayoutAttr layout;
  Value keyMask; ///< null: no key padding
};

bool isOne(FloatAttr a) { return a.getValueAsDouble() == 1.0; }

/// Matches the probabilities feeding the context product `ctx`.
std::optional<Chain> matchAttentionCore(BatchMatmulOp ctx) {
  if (ctx.getTransposeA() || ctx.getTransposeB() || !isOne(ctx.getAlphaAttr()))
    return std::nullopt;
  Chain c;
  Value probs = ctx.getLhs();
  if (!probs.hasOneUse())
    return std::nullopt;
  Value scores;
  if (auto sd = probs.getDefiningOp<SoftmaxDropoutOp>()) {
    if (!sd.getProbs().use_empty())
      return std::nullopt;
    c.softmax = sd;
    scores = sd.getInput();
    c.scale = sd.getScale().convertToDouble();
    c.causal = sd.getCausal();
    c.rate = sd.getRateAttr();
    c.stream = sd.getStreamAttr();
    c.layout = sd.getLayoutAttr();
    c.keyMask = sd.getKeyMask();
  } else {
    if ((c.dropout = probs.getDefiningOp<DropoutOp>())) {
      probs = c.dropout.getInput();
      if (!probs.hasOneUse())
        return std::nullopt;
      c.rate = c.dropout.getRateAttr();
      c.stream = c.dropout.getStreamAttr();
    }
    auto softmax = probs.getDefiningOp<SoftmaxOp>();
    if (!softmax)
      return std::nullopt;
    c.softmax = softmax;
    scores = softmax.getInput();
    c.scale = softmax.getScale().convertToDouble();
    c.causal = softmax.getCausal();
    c.layout = softmax.getLayoutAttr();
    c.keyMask = softmax.getKeyMask();
  }
  c.scores = scores.getDefiningOp<BatchMatmulOp>();
  if (!c.scores || !scores.hasOneUse() || c.scores.getTransposeA() ||
      !c.scores.getTransposeB())
    return std::nullopt;
  c.scale *= c.scores.getAlpha().convertToDouble();
  // dsc.attention takes one [B, H, T, D] shape for q, k, v and the result.
  Type type = c.scores.getLhs().getType();
  if (cast<RankedTensorType>(type).getRank() != 4 ||
      c.scores.getRhs().getType() != type || ctx.getRhs().getType() != type ||
      ctx.getType() != type)
    return std::nullopt;
  return c;
}

/// The shared key/value heads behind a dsc.repeat_kv, else `v` itself.
Value unrepeated(Value v) {
  if (auto repeat = v.getDefiningOp<RepeatKvOp>())
    return repeat.getInput();
  return v;
}

struct FuseAttention : OpRewritePattern<BatchMatmulOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BatchMatmulOp ctx,
                                PatternRewriter &rewriter) const override {
    std::optional<Chain> c = matchAttentionCore(ctx);
    if (!c)
      return rewriter.notifyMatchFailure(ctx, "not the context product of "
                                              "an attention core");
    auto type = cast<RankedTensorType>(ctx.getType());
    // Read before the rewrite erases the products that use them.
    Value keys = c->scores.getRhs(), values = ctx.getRhs();
    auto lseType = RankedTensorType::get(type.getShape().drop_back(),
                                         type.getElementType());
    auto fused = rewriter.create<AttentionOp>(
        ctx.getLoc(), TypeRange{type, lseType}, c->scores.getLhs(),
        unrepeated(keys), unrepeated(values), c->keyMask,
        rewriter.getF64FloatAttr(c->scale),
        rewriter.getBoolAttr(c->causal),
        c->rate ? c->rate : rewriter.getF64FloatAttr(0.0),
        c->stream ? c->stream : rewriter.getI64IntegerAttr(0), c->layout);
    copyLayer(ctx, {fused});
    rewriter.replaceOp(ctx, fused.getResult());
    if (c->dropout)
      rewriter.eraseOp(c->dropout);
    rewriter.eraseOp(c->softmax);
    rewriter.eraseOp(c->scores);
    for (Value repeated : {keys, values})
      if (auto repeat = repeated.getDefiningOp<RepeatKvOp>())
        if (repeat->use_empty())
          rewriter.eraseOp(repeat);
    return success();
  }
};

struct FuseAttentionPass
    : mlir::dsc::impl::DscFuseAttentionBase<FuseAttentionPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateFuseAttentionPatterns(patterns);
    if (failed(applyFusionPatterns(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace

void mlir::dsc::populateFuseAttentionPatterns(RewritePatternSet &patterns) {
  patterns.add<FuseAttention>(patterns.getContext());
}
