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

struct FuseSoftmaxDropoutPass
    : mlir::dsc::impl::DscFuseSoftmaxDropoutBase<FuseSoftmaxDropoutPass> {
  void runOnOperation() override {
    SmallVector<DropoutOp> dropouts;
    getOperation().walk([&](DropoutOp op) { dropouts.push_back(op); });
    for (DropoutOp dropout : dropouts) {
      auto softmax = dropout.getInput().getDefiningOp<SoftmaxOp>();
      if (!softmax || !softmax.getResult().hasOneUse())
        continue;
      OpBuilder b(dropout);
      Type type = softmax.getType();
      auto fused = b.create<SoftmaxDropoutOp>(
          dropout.getLoc(), TypeRange{type, type}, softmax.getInput(),
          softmax.getScaleAttr(), softmax.getCausalAttr(),
          dropout.getRateAttr(), dropout.getStreamAttr());
      copyLayer(softmax, {fused});
      dropout.replaceAllUsesWith(fused.getResult());
      dropout.erase();
      softmax.erase();
    }
  }
};

} // namespace
