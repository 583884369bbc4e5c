//===- OneBitAdam.cpp - 1-bit Adam's compression stage --------------------===//
//
// -dsc-onebit-adam (see Passes.td): @apply_step stays the warm-up (Adam
// without bias correction over fully all-reduced gradients, as DeepSpeed's
// OnebitAdam before freeze_step); a copy, @apply_step_compressed, becomes
// the compression stage: local momentum, error-compensated 1-bit
// all-reduce of the momentum, frozen variance.
//
//===----------------------------------------------------------------------===//

#include "CompressedAllReduce.h"

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCONEBITADAM
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct OneBitAdamPass : mlir::dsc::impl::DscOneBitAdamBase<OneBitAdamPass> {
  using DscOneBitAdamBase::DscOneBitAdamBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (freezeStep < 1) {
      module.emitError("dsc-onebit-adam: freeze-step must be >= 1 (the "
                       "variance freezes after that many full steps), got ")
          << int64_t(freezeStep);
      return signalPassFailure();
    }
    func::FuncOp apply = findWarmupStep(module, "dsc-onebit-adam",
                                        {"apply_step_compressed"});
    if (!apply || failed(checkAdamWarmup(apply, "dsc-onebit-adam")))
      return signalPassFailure();
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(apply);
    auto compressed = cast<func::FuncOp>(b.clone(*apply));
    compressed.setName("apply_step_compressed");
    buildCompressionStage(compressed, meshGroupSize(module, MeshAxis::data));
    module->setAttr("dsc.freeze_step", b.getI64IntegerAttr(freezeStep));
  }

  void buildCompressionStage(func::FuncOp fn, int64_t groupSize) {
    // The gradients stay local: what is reduced is the momentum.
    keepGradientsLocal(fn);
    SmallVector<AdamOp> updates;
    fn.walk([&](AdamOp op) { updates.push_back(op); });
    // The updated errors, returned with their states once all are built.
    SmallVector<std::pair<Value, StateAttr>> newErrors;
    OpBuilder b(&getContext());
    for (AdamOp adam : updates) {
      Location loc = adam.getLoc();
      b.setInsertionPoint(adam);
      Value skip = adam.getSkip();
      Value momentum = b.create<EmaUpdateOp>(
          loc, adam.getExpAvg().getType(), adam.getExpAvg(), adam.getGrad(),
          adam.getGradScale(), adam.getBeta1Attr(), skip);
      auto param = cast<BlockArgument>(adam.getParam());
      StringRef name = fn.getArgAttrOfType<StateAttr>(param.getArgNumber(),
                                                      kStateAttrName)
                           .getName();
      momentum = compressAcrossRanks(b, loc, fn, name, momentum, skip,
                                     groupSize, newErrors);
      auto frozen = b.create<FrozenAdamOp>(
          loc, TypeRange{adam.getParam().getType(), adam.getExpAvg().getType()},
          adam.getParam(), adam.getExpAvg(), momentum, adam.getExpAvgSq(),
          adam.getLr(), adam.getEpsAttr(), adam.getWeightDecayAttr(), skip);
      adam.getNewParam().replaceAllUsesWith(frozen.getNewParam());
      adam.getNewExpAvg().replaceAllUsesWith(frozen.getNewExpAvg());
      adam.getNewExpAvgSq().replaceAllUsesWith(adam.getExpAvgSq());
      adam.erase();
    }
    for (auto [value, state] : newErrors)
      addStateResult(fn, value, state);
  }
};

} // namespace
