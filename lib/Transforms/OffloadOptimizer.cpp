//===- OffloadOptimizer.cpp - ZeRO-Offload: the update on the host --------===//
//
// -dsc-offload-optimizer (see Passes.td): after -dsc-zero, every optimizer
// update of @apply_step runs on the host (dsc.host) over host values: its
// state and the new fp32 master weights (#dsc.state<master, ...>) live in
// host memory, the values it reads from the device are copied over by
// dsc.to_host and the updated master shard streams back by dsc.to_device.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "llvm/ADT/StringExtras.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCOFFLOADOPTIMIZER
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The module attribute recording that the step is offloaded.
constexpr llvm::StringLiteral kOffloadAttr = "dsc.offload_optimizer";
/// The module attribute -dsc-zero writes.
constexpr llvm::StringLiteral kZeroStageAttr = "dsc.zero_stage";

/// The transfer group of parameter `name`: its transformer layer + 1 (the
/// first dot-separated component that is a number), 0 outside layers.
int64_t transferGroupOf(StringRef name) {
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  for (StringRef part : parts) {
    unsigned layer = 0;
    if (!part.empty() && !part.getAsInteger(10, layer))
      return int64_t(layer) + 1;
  }
  return 0;
}

/// The step argument a ZeRO update's parameter operand comes from: the
/// argument itself (stage 3, or a parameter kept whole), or the argument
/// flattened and sharded (stages 1-2).
BlockArgument parameterArgument(Value param) {
  while (Operation *def = param.getDefiningOp()) {
    if (!isa<ShardOp, FlatResizeOp>(def))
      return nullptr;
    param = def->getOperand(0);
  }
  return dyn_cast<BlockArgument>(param);
}

struct OffloadOptimizerPass
    : mlir::dsc::impl::DscOffloadOptimizerBase<OffloadOptimizerPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal()) {
      module.emitError("dsc-offload-optimizer: no @apply_step; run "
                       "-dsc-build-train-step and -dsc-zero first");
      return signalPassFailure();
    }
    if (!module->hasAttr(kZeroStageAttr)) {
      module.emitError("dsc-offload-optimizer: the step is not sharded; "
                       "ZeRO-Offload needs -dsc-zero (stage 1, 2 or 3) first");
      return signalPassFailure();
    }
    if (module->hasAttr(kOffloadAttr)) {
      module.emitError("dsc-offload-optimizer: the step is offloaded "
                       "already; run -dsc-offload-optimizer once");
      return signalPassFailure();
    }
    for (StringRef other : {"apply_step_compressed", "apply_step_onebit",
                            "apply_step_local", "apply_step_sync"})
      if (module.lookupSymbol(other)) {
        module.emitError("dsc-offload-optimizer: @")
            << other << " exchanges compressed momenta between ranks; "
            << "compressed optimizers are not offloaded";
        return signalPassFailure();
      }
    module->setAttr(kOffloadAttr, UnitAttr::get(&getContext()));
    hostCopies.clear();
    SmallVector<OptimizerOpInterface> updates;
    apply.walk([&](OptimizerOpInterface u) { updates.push_back(u); });
    for (OptimizerOpInterface update : updates)
      if (failed(offload(apply, update)))
        return signalPassFailure();
    // The shards the updates no longer read.
    // (Last first: a shard's erasure leaves its flat_resize unused.)
    SmallVector<Operation *> ops;
    for (Operation &op : apply.getBody().front().without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops))
      if (isa<ShardOp, FlatResizeOp>(op) && op->use_empty())
        op->erase();
  }

  /// `value` copied to the host right after it is computed (one copy per
  /// value, shared by every update that reads it: a scalar travels in the
  /// group of the first).
  Value onHost(Value value, int64_t group) {
    if (Value copy = hostCopies.lookup(value))
      return copy;
    OpBuilder b(&getContext());
    if (Operation *def = value.getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(cast<BlockArgument>(value).getOwner());
    Value copy = b.create<ToHostOp>(value.getLoc(), value.getType(), value,
                                    b.getI64IntegerAttr(group));
    hostCopies[value] = copy;
    return copy;
  }

  LogicalResult offload(func::FuncOp apply, OptimizerOpInterface update) {
    MLIRContext *ctx = &getContext();
    Operation *op = update.getOperation();
    BlockArgument paramArg = parameterArgument(update.getParamOperand());
    auto paramState =
        paramArg ? apply.getArgAttrOfType<StateAttr>(paramArg.getArgNumber(),
                                                     kStateAttrName)
                 : StateAttr();
    if (!paramState || paramState.getKind() != StateKind::param)
      return op->emitOpError("dsc-offload-optimizer: the parameter it updates "
                             "is not a step argument or its ZeRO shard");
    const int64_t group = transferGroupOf(paramState.getName());
    auto hostAttr = UnitAttr::get(ctx);
    for (Value state : update.getStateOperands()) {
      auto arg = dyn_cast<BlockArgument>(state);
      if (!arg || arg.getOwner()->getParentOp() != apply)
        return op->emitOpError("dsc-offload-optimizer: its optimizer state "
                               "is not a step argument");
      apply.setArgAttr(arg.getArgNumber(), kHostAttrName, hostAttr);
    }

    // The master weights: a new host argument in the parameter operand's
    // (shard) type.
    Value param = update.getParamOperand();
    NamedAttrList masterAttrs;
    auto masterState =
        StateAttr::get(ctx, StateKind::master, paramState.getName());
    masterAttrs.set(kStateAttrName, masterState);
    masterAttrs.set(kHostAttrName, hostAttr);
    if (param != paramArg) // stages 1-2: the shard of the whole parameter
      masterAttrs.set(kShardOfAttrName,
                      DenseI64ArrayAttr::get(
                          ctx, cast<RankedTensorType>(paramArg.getType())
                                   .getShape()));
    else if (Attribute shardOf =
                 apply.getArgAttr(paramArg.getArgNumber(), kShardOfAttrName))
      masterAttrs.set(kShardOfAttrName, shardOf);
    const unsigned masterIndex = apply.getNumArguments();
    apply.insertArgument(masterIndex, param.getType(),
                         masterAttrs.getDictionary(ctx), param.getLoc());
    // The parameter operand comes first (OptimizerOpInterface).
    op->setOperand(0, apply.getArgument(masterIndex));

    // Everything else the update reads comes over from the device.
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (operand.getOperandNumber() == 0 ||
          llvm::is_contained(update.getStateOperands(), v))
        continue;
      operand.set(onHost(v, group));
    }
    op->setAttr(kHostAttrName, hostAttr);

    // The new master shard goes back to the device, which uses it where it
    // used the updated parameter.
    Value newMaster = update.getNewParamResult();
    OpBuilder b(ctx);
    b.setInsertionPointAfter(op);
    auto toDevice = b.create<ToDeviceOp>(op->getLoc(), newMaster.getType(),
                                         newMaster,
                                         b.getI64IntegerAttr(group));
    newMaster.replaceAllUsesExcept(toDevice, toDevice);

    // Results: the new state is host memory, and the new master a result.
    auto ret = cast<func::ReturnOp>(apply.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (v.getDefiningOp() == op)
        apply.setResultAttr(unsigned(i), kHostAttrName, hostAttr);
    const unsigned masterResult = ret.getNumOperands();
    ret->insertOperands(masterResult, newMaster);
    apply.insertResult(masterResult, newMaster.getType(),
                       masterAttrs.getDictionary(ctx));
    apply.removeResultAttr(masterResult, StringAttr::get(ctx, kShardOfAttrName));
    return success();
  }

  DenseMap<Value, Value> hostCopies;
};

} // namespace
