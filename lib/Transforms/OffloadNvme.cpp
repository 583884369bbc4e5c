//===- OffloadNvme.cpp - ZeRO-Infinity: offloaded state on NVMe -----------===//
//
// -dsc-offload-nvme (see Passes.td): after -dsc-offload-optimizer, the host
// state each update reads and rewrites (optimizer state, fp32 master
// weights) moves to the NVMe swap file: read by dsc.swap_in one update
// ahead, written back by dsc.swap_out.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCOFFLOADNVME
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The module attribute recording that this pass ran.
constexpr llvm::StringLiteral kOffloadNvmeAttr = "dsc.offload_nvme";

struct OffloadNvmePass
    : mlir::dsc::impl::DscOffloadNvmeBase<OffloadNvmePass> {
  using DscOffloadNvmeBase::DscOffloadNvmeBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal() || !module->hasAttr(kOffloadOptimizerAttrName)) {
      module.emitError("dsc-offload-nvme: the step's optimizer is not "
                       "offloaded; run -dsc-offload-optimizer first");
      return signalPassFailure();
    }
    if (module->hasAttr(kOffloadNvmeAttr)) {
      module.emitError("dsc-offload-nvme: the step is offloaded to NVMe "
                       "already; run -dsc-offload-nvme once");
      return signalPassFailure();
    }
    if (!module->getAttrOfType<StringAttr>(kNvmePathAttrName)) {
      module.emitError("dsc-offload-nvme: the module has no ")
          << kNvmePathAttrName << " (the directory of the swap file)";
      return signalPassFailure();
    }
    module->setAttr(kOffloadNvmeAttr, UnitAttr::get(&getContext()));
    // (The parameters may all be under the persistence threshold, whole on
    // the device: then no shard is in host memory and none is swapped.)
    if (params && !module->hasAttr(kOffloadParamsAttrName)) {
      module.emitError("dsc-offload-nvme: params, but the parameter shards "
                       "are not offloaded; run -dsc-offload-optimizer params");
      return signalPassFailure();
    }
    swapUpdates(apply);
    if (params)
      for (auto fn : module.getOps<func::FuncOp>())
        if (fn != apply && !fn.isExternal())
          swapDeviceCopies(fn);
  }

private:
  /// Whether argument `arg` of `fn` goes to the swap file: host state an
  /// update rewrites; a host parameter shard only with `params`.
  bool onNvme(func::FuncOp fn, BlockArgument arg) {
    if (!fn.getArgAttr(arg.getArgNumber(), kHostAttrName))
      return false;
    auto state =
        fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(), kStateAttrName);
    return state && (state.getKind() != StateKind::param || params);
  }

  /// Reads `operand` (a swap-file argument) through a dsc.swap_in in
  /// transfer group `group`, issued before `before`.
  void swapIn(func::FuncOp fn, OpOperand &operand, Operation *before,
              IntegerAttr group) {
    auto arg = cast<BlockArgument>(operand.get());
    fn.setArgAttr(arg.getArgNumber(), kNvmeAttrName,
                  UnitAttr::get(&getContext()));
    OpBuilder b(before);
    auto in = b.create<SwapInOp>(arg.getLoc(), arg.getType(), arg, group);
    in->setAttr(kHostAttrName, UnitAttr::get(&getContext()));
    operand.set(in);
  }

  /// @apply_step: each host update reads its swap-file state one update
  /// ahead, the first two at the function's start (their reads then run
  /// beside the gradient copies, reductions and norm before the first
  /// update, in host bytes the plan holds at the first update anyway); the
  /// new values go back through dsc.swap_out.
  void swapUpdates(func::FuncOp apply) {
    SmallVector<OptimizerOpInterface> updates;
    apply.walk([&](OptimizerOpInterface u) {
      if (u->hasAttr(kHostAttrName))
        updates.push_back(u);
    });
    DenseSet<StateAttr> swapped;
    Operation *start = &apply.getBody().front().front();
    Operation *previous = nullptr;
    for (auto [k, update] : llvm::enumerate(updates)) {
      Operation *op = update.getOperation();
      const IntegerAttr group = groupOf(op);
      for (OpOperand &operand : op->getOpOperands()) {
        auto arg = dyn_cast<BlockArgument>(operand.get());
        if (!arg || !onNvme(apply, arg))
          continue;
        swapped.insert(apply.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                         kStateAttrName));
        swapIn(apply, operand, k < 2 ? start : previous, group);
      }
      previous = op;
    }
    auto ret = cast<func::ReturnOp>(apply.getBody().front().getTerminator());
    for (OpOperand &operand : ret->getOpOperands()) {
      const unsigned i = operand.getOperandNumber();
      auto state = apply.getResultAttrOfType<StateAttr>(i, kStateAttrName);
      if (!state || !swapped.contains(state))
        continue;
      Value value = operand.get();
      Operation *def = value.getDefiningOp();
      OpBuilder b(ret);
      if (def)
        b.setInsertionPointAfter(def);
      auto out = b.create<SwapOutOp>(value.getLoc(), value.getType(), value,
                                     def ? groupOf(def) : zeroGroup());
      out->setAttr(kHostAttrName, UnitAttr::get(&getContext()));
      operand.set(out);
      apply.setResultAttr(i, kNvmeAttrName, UnitAttr::get(&getContext()));
    }
  }

  /// `params`, outside @apply_step: every dsc.to_device of a swap-file
  /// parameter shard reads it through a dsc.swap_in issued before the
  /// copy before it.
  void swapDeviceCopies(func::FuncOp fn) {
    SmallVector<ToDeviceOp> copies;
    fn.walk([&](ToDeviceOp copy) {
      auto arg = dyn_cast<BlockArgument>(copy.getInput());
      if (arg && arg.getOwner()->getParentOp() == fn && onNvme(fn, arg))
        copies.push_back(copy);
    });
    Operation *previous = nullptr;
    for (ToDeviceOp copy : copies) {
      swapIn(fn, copy->getOpOperand(0), previous ? previous : copy,
             copy.getGroupAttr());
      previous = copy;
    }
  }

  /// The transfer group of an update: that of the copies feeding it.
  IntegerAttr groupOf(Operation *update) {
    for (Value operand : update->getOperands())
      if (auto copy = operand.getDefiningOp<ToHostOp>())
        return copy.getGroupAttr();
    return zeroGroup();
  }
  IntegerAttr zeroGroup() {
    return IntegerAttr::get(IntegerType::get(&getContext(), 64), 0);
  }
};

} // namespace
