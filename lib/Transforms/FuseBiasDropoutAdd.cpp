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

struct FuseBiasDropoutAddPass
    : mlir::dsc::impl::DscFuseBiasDropoutAddBase<FuseBiasDropoutAddPass> {
  void runOnOperation() override {
    SmallVector<AddOp> adds;
    getOperation().walk([&](AddOp add) { adds.push_back(add); });
    for (AddOp add : adds) {
      if (add.getLhs().getType() != add.getRhs().getType())
        continue; // a broadcast add is not a residual connection
      for (bool branchIsRhs : {true, false}) {
        Value branch = branchIsRhs ? add.getRhs() : add.getLhs();
        Value residual = branchIsRhs ? add.getLhs() : add.getRhs();
        std::optional<BiasedBranch> m = matchBranch(branch);
        if (!m)
          continue;
        OpBuilder b(add);
        LinearOp unbiased = createUnbiased(b, m->linear);
        auto fused = b.create<BiasDropoutAddOp>(
            add.getLoc(), add.getType(), unbiased, m->linear.getBias(),
            residual,
            m->dropout ? m->dropout.getRateAttr() : b.getF64FloatAttr(0.0),
            m->dropout ? m->dropout.getStreamAttr() : b.getI64IntegerAttr(0));
        copyLayer(m->linear, {unbiased, fused});
        add.replaceAllUsesWith(fused.getResult());
        add.erase();
        if (m->dropout)
          m->dropout.erase();
        m->linear.erase();
        break;
      }
    }
  }
};

} // namespace
