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

/// The module attributes -dsc-offload-optimizer and this pass write.
constexpr llvm::StringLiteral kOffloadAttr = "dsc.offload_optimizer";
constexpr llvm::StringLiteral kOffloadNvmeAttr = "dsc.offload_nvme";
/// The directory of the swap file (the config's nvme_path).
constexpr llvm::StringLiteral kNvmePathAttr = "dsc.nvme_path";

struct OffloadNvmePass
    : mlir::dsc::impl::DscOffloadNvmeBase<OffloadNvmePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal() || !module->hasAttr(kOffloadAttr)) {
      module.emitError("dsc-offload-nvme: the step's optimizer is not "
                       "offloaded; run -dsc-offload-optimizer first");
      return signalPassFailure();
    }
    if (module->hasAttr(kOffloadNvmeAttr)) {
      module.emitError("dsc-offload-nvme: the step is offloaded to NVMe "
                       "already; run -dsc-offload-nvme once");
      return signalPassFailure();
    }
    if (!module->getAttrOfType<StringAttr>(kNvmePathAttr)) {
      module.emitError("dsc-offload-nvme: the module has no ")
          << kNvmePathAttr << " (the directory of the swap file)";
      return signalPassFailure();
    }
    module->setAttr(kOffloadNvmeAttr, UnitAttr::get(&getContext()));

    SmallVector<OptimizerOpInterface> updates;
    apply.walk([&](OptimizerOpInterface u) {
      if (u->hasAttr(kHostAttrName))
        updates.push_back(u);
    });
    DenseSet<StateAttr> onNvme;
    Operation *previous = nullptr;
    for (OptimizerOpInterface update : updates) {
      Operation *op = update.getOperation();
      // The state is read while the update before computes.
      OpBuilder b(previous ? previous : op);
      for (OpOperand &operand : op->getOpOperands()) {
        auto arg = dyn_cast<BlockArgument>(operand.get());
        if (!arg || !apply.getArgAttr(arg.getArgNumber(), kHostAttrName))
          continue;
        auto state = apply.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                       kStateAttrName);
        // An offloaded parameter shard is read by the forward too.
        if (!state || state.getKind() == StateKind::param)
          continue;
        apply.setArgAttr(arg.getArgNumber(), kNvmeAttrName,
                         UnitAttr::get(&getContext()));
        auto in = b.create<SwapInOp>(arg.getLoc(), arg.getType(), arg,
                                     groupOf(op));
        in->setAttr(kHostAttrName, UnitAttr::get(&getContext()));
        operand.set(in);
        onNvme.insert(state);
      }
      previous = op;
    }
    // The new values go back to the swap file.
    auto ret = cast<func::ReturnOp>(apply.getBody().front().getTerminator());
    for (OpOperand &operand : ret->getOpOperands()) {
      const unsigned i = operand.getOperandNumber();
      auto state = apply.getResultAttrOfType<StateAttr>(i, kStateAttrName);
      if (!state || !onNvme.contains(state))
        continue;
      Value value = operand.get();
      OpBuilder b(ret);
      if (Operation *def = value.getDefiningOp())
        b.setInsertionPointAfter(def);
      Operation *def = value.getDefiningOp();
      auto out = b.create<SwapOutOp>(value.getLoc(), value.getType(), value,
                                     def ? groupOf(def) : b.getI64IntegerAttr(0));
      out->setAttr(kHostAttrName, UnitAttr::get(&getContext()));
      operand.set(out);
      apply.setResultAttr(i, kNvmeAttrName, UnitAttr::get(&getContext()));
    }
  }

  /// The transfer group of an update: that of the copies feeding it.
  IntegerAttr groupOf(Operation *update) {
    for (Value operand : update->getOperands())
      if (auto copy = operand.getDefiningOp<ToHostOp>())
        return copy.getGroupAttr();
    return IntegerAttr::get(IntegerType::get(&getContext(), 64), 0);
  }
};

} // namespace
