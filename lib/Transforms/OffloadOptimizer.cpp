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
  using DscOffloadOptimizerBase::DscOffloadOptimizerBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal()) {
      module.emitError("dsc-offload-optimizer: no @apply_step; run "
                       "-dsc-build-train-step and -dsc-zero first");
      return signalPassFailure();
    }
    if (!module->hasAttr(kZeroStageAttrName)) {
      module.emitError("dsc-offload-optimizer: the step is not sharded; "
                       "ZeRO-Offload needs -dsc-zero (stage 1, 2 or 3) first");
      return signalPassFailure();
    }
    if (module->hasAttr(kOffloadOptimizerAttrName)) {
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
    if (params) {
      auto stage = module->getAttrOfType<IntegerAttr>(kZeroStageAttrName);
      if (stage.getInt() != 3) {
        module.emitError("dsc-offload-optimizer: params (parameter offload) "
                         "needs ZeRO stage 3; the step is sharded at stage ")
            << stage.getInt();
        return signalPassFailure();
      }
      for (auto fn : module.getOps<func::FuncOp>())
        offloadParameterShards(fn, fn == apply);
      module->setAttr(kOffloadParamsAttrName, UnitAttr::get(&getContext()));
    }
    module->setAttr(kOffloadOptimizerAttrName, UnitAttr::get(&getContext()));
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

  /// With `params`: the partitioned parameter shards of `fn` live in host
  /// memory; outside @apply_step every use reads a device copy made right
  /// before it.
  void offloadParameterShards(func::FuncOp fn, bool isApply) {
    if (fn.isExternal())
      return;
    for (BlockArgument arg : fn.getArguments()) {
      auto state =
          fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(), kStateAttrName);
      if (!state || state.getKind() != StateKind::param ||
          !fn.getArgAttr(arg.getArgNumber(), kShardOfAttrName))
        continue;
      fn.setArgAttr(arg.getArgNumber(), kHostAttrName, hostAttr());
      if (isApply)
        continue; // the update reads and writes the host shard itself
      const int64_t group = transferGroupOf(state.getName());
      for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
        Operation *user = use.getOwner();
        OpBuilder b(user);
        auto copy = b.create<ToDeviceOp>(arg.getLoc(), arg.getType(), arg,
                                         b.getI64IntegerAttr(group));
        // The copy belongs to its user's pass and layer (memory reports).
        for (StringRef name : {kGradAttrName, kLayerAttrName})
          if (Attribute a = user->getAttr(name))
            copy->setAttr(name, a);
        use.set(copy);
      }
    }
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

  /// Rewrites `update` to run on the host (see Passes.td).
  LogicalResult offload(func::FuncOp apply, OptimizerOpInterface update) {
    Operation *op = update.getOperation();
    BlockArgument paramArg = parameterArgument(update.getParamOperand());
    auto paramState =
        paramArg ? apply.getArgAttrOfType<StateAttr>(paramArg.getArgNumber(),
                                                     kStateAttrName)
                 : StateAttr();
    if (!paramState || paramState.getKind() != StateKind::param)
      return op->emitOpError("dsc-offload-optimizer: the parameter it updates "
                             "is not a step argument or its ZeRO shard");
    for (Value state : update.getStateOperands()) {
      auto arg = dyn_cast<BlockArgument>(state);
      if (!arg || arg.getOwner()->getParentOp() != apply)
        return op->emitOpError("dsc-offload-optimizer: its optimizer state "
                               "is not a step argument");
      apply.setArgAttr(arg.getArgNumber(), kHostAttrName, hostAttr());
    }
    const int64_t group = transferGroupOf(paramState.getName());
    if (apply.getArgAttr(paramArg.getArgNumber(), kHostAttrName)) {
      // An offloaded parameter shard: the master weights themselves.
      hostOperands(update, group);
      markHostResults(apply, op);
      return success();
    }
    DictionaryAttr masterAttrs = masterAttributes(apply, update, paramArg,
                                                  paramState.getName());
    const unsigned masterIndex = apply.getNumArguments();
    Value param = update.getParamOperand();
    apply.insertArgument(masterIndex, param.getType(), masterAttrs,
                         param.getLoc());
    // The parameter operand comes first (OptimizerOpInterface).
    op->setOperand(0, apply.getArgument(masterIndex));
    hostOperands(update, group);
    streamBack(apply, update, masterAttrs, group);
    return success();
  }

  /// Places `update` on the host; everything it reads but its parameter
  /// and state comes over from the device.
  void hostOperands(OptimizerOpInterface update, int64_t group) {
    Operation *op = update.getOperation();
    for (OpOperand &operand : op->getOpOperands())
      if (operand.getOperandNumber() != 0 &&
          !llvm::is_contained(update.getStateOperands(), operand.get()))
        operand.set(onHost(operand.get(), group));
    op->setAttr(kHostAttrName, hostAttr());
  }

  /// The results of @apply_step that `op` computes are host memory.
  void markHostResults(func::FuncOp apply, Operation *op) {
    auto ret = cast<func::ReturnOp>(apply.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands()))
      if (v.getDefiningOp() == op)
        apply.setResultAttr(unsigned(i), kHostAttrName, hostAttr());
  }

  UnitAttr hostAttr() { return UnitAttr::get(&getContext()); }

  /// The attributes of the master weights argument and result of `update`,
  /// whose parameter is `paramArg` (or its shard).
  DictionaryAttr masterAttributes(func::FuncOp apply,
                                  OptimizerOpInterface update,
                                  BlockArgument paramArg, StringRef name) {
    MLIRContext *ctx = &getContext();
    NamedAttrList attrs;
    attrs.set(kStateAttrName, StateAttr::get(ctx, StateKind::master, name));
    attrs.set(kHostAttrName, hostAttr());
    if (update.getParamOperand() != paramArg) // stages 1-2: a shard of it
      attrs.set(kShardOfAttrName,
                DenseI64ArrayAttr::get(
                    ctx, cast<RankedTensorType>(paramArg.getType()).getShape()));
    else if (Attribute shardOf =
                 apply.getArgAttr(paramArg.getArgNumber(), kShardOfAttrName))
      attrs.set(kShardOfAttrName, shardOf); // stage 3: the parameter shard
    return attrs.getDictionary(ctx);
  }

  /// The new master shard goes back to the device, which uses it where it
  /// used the updated parameter; the new state and master weights are host
  /// results of the step.
  void streamBack(func::FuncOp apply, OptimizerOpInterface update,
                  DictionaryAttr masterAttrs, int64_t group) {
    Operation *op = update.getOperation();
    Value newMaster = update.getNewParamResult();
    OpBuilder b(&getContext());
    b.setInsertionPointAfter(op);
    auto toDevice = b.create<ToDeviceOp>(op->getLoc(), newMaster.getType(),
                                         newMaster,
                                         b.getI64IntegerAttr(group));
    newMaster.replaceAllUsesExcept(toDevice, toDevice);
    markHostResults(apply, op);
    auto ret = cast<func::ReturnOp>(apply.getBody().front().getTerminator());
    const unsigned masterResult = ret.getNumOperands();
    ret->insertOperands(masterResult, newMaster);
    apply.insertResult(masterResult, newMaster.getType(), masterAttrs);
    // (Results carry no shard shape: the argument's describes the buffer.)
    apply.removeResultAttr(masterResult,
                           StringAttr::get(&getContext(), kShardOfAttrName));
  }

  DenseMap<Value, Value> hostCopies;
};

} // namespace
