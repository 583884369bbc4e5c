//===- ZeroOneAdam.cpp - 0/1 Adam's step functions ------------------------===//
//
// -dsc-zero-one-adam (see Passes.td): DeepSpeed's ZeroOneAdam
// (deepspeed/runtime/fp16/onebit/zoadam.py, arXiv:2202.06009) as three
// more step functions beside the warm-up @apply_step; the runtime picks one
// per optimizer step by DeepSpeed's interval policy (rt::ZeroOneAdamPolicy).
//
//===----------------------------------------------------------------------===//

#include "CompressedAllReduce.h"

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCZEROONEADAM
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

enum class Stage { OnebitGradient, Local, Sync };

struct ZeroOneAdamPass : mlir::dsc::impl::DscZeroOneAdamBase<ZeroOneAdamPass> {
  using DscZeroOneAdamBase::DscZeroOneAdamBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (varFreezeStep < 1 || varUpdateScaler < 1 || localStepScaler < 1 ||
        localStepClipper < 1) {
      module.emitError("dsc-zero-one-adam: var-freeze-step, the scalers and "
                       "the clipper must be >= 1");
      return signalPassFailure();
    }
    func::FuncOp apply = findWarmupStep(
        module, "dsc-zero-one-adam",
        {"apply_step_onebit", "apply_step_local", "apply_step_sync"});
    if (!apply || failed(checkAdamWarmup(apply, "dsc-zero-one-adam")))
      return signalPassFailure();
    const int64_t group = meshGroupSize(module, MeshAxis::data);
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(apply);
    for (auto [name, stage] :
         {std::pair<StringRef, Stage>{"apply_step_onebit",
                                      Stage::OnebitGradient},
          {"apply_step_local", Stage::Local},
          {"apply_step_sync", Stage::Sync}}) {
      auto fn = cast<func::FuncOp>(b.clone(*apply));
      fn.setName(name);
      build(fn, stage, group);
      b.setInsertionPointAfter(fn);
    }
    module->setAttr("dsc.var_freeze_step", b.getI64IntegerAttr(varFreezeStep));
    module->setAttr("dsc.var_update_scaler",
                    b.getI64IntegerAttr(varUpdateScaler));
    module->setAttr("dsc.local_step_scaler",
                    b.getI64IntegerAttr(localStepScaler));
    module->setAttr("dsc.local_step_clipper",
                    b.getI64IntegerAttr(localStepClipper));
  }

  /// Rewrites a copy of @apply_step into `stage`:
  ///   OnebitGradient  m = beta1 m + (1 - beta1) * compressed mean of the
  ///                   local gradient; Adam's update with v frozen
  ///   Local           m from the local gradient; the update, also added
  ///                   to the accumulator u; lr_sum += lr
  ///   Sync            a local step, then p -= u, the compressed mean of
  ///                   u * (sqrt(v) + eps) applied (dsc.zero_one_sync),
  ///                   u = 0, lr_sum = 0
  void build(func::FuncOp fn, Stage stage, int64_t group) {
    MLIRContext *ctx = &getContext();
    keepGradientsLocal(fn);
    SmallVector<AdamOp> updates;
    fn.walk([&](AdamOp op) { updates.push_back(op); });
    SmallVector<std::pair<Value, StateAttr>> newState;
    OpBuilder b(ctx);
    auto scalar = RankedTensorType::get({}, Float32Type::get(ctx));
    if (updates.empty())
      return;
    Value lrSum, newLrSum, one;
    b.setInsertionPoint(updates.front());
    if (stage == Stage::OnebitGradient)
      one = b.create<FillOp>(updates.front().getLoc(), scalar,
                             b.getF64FloatAttr(1.0));
    else {
      auto state = StateAttr::get(ctx, StateKind::lr_sum, "lr_sum");
      lrSum = addStateArgument(fn, scalar, state);
      // Every update reads the same learning rate.
      newLrSum = b.create<AddOp>(updates.front().getLoc(), scalar, lrSum,
                                 updates.front().getLr());
      newState.push_back(
          {stage == Stage::Sync
               ? b.create<FillOp>(updates.front().getLoc(), scalar,
                                  b.getF64FloatAttr(0.0))
                     .getResult()
               : newLrSum,
           state});
    }
    for (AdamOp adam : updates) {
      Location loc = adam.getLoc();
      b.setInsertionPoint(adam);
      auto param = cast<BlockArgument>(adam.getParam());
      StringRef name = fn.getArgAttrOfType<StateAttr>(param.getArgNumber(),
                                                      kStateAttrName)
                           .getName();
      Type type = adam.getParam().getType();
      Value newParam, newExpAvg;
      if (stage == Stage::OnebitGradient) {
        // ema_update with beta 0 is exactly grad_scale * grad (0 * g + 1 *
        // (s * g)): the clipped local gradient that is compressed.
        Value grad = b.create<EmaUpdateOp>(loc, type, adam.getGrad(),
                                           adam.getGrad(), adam.getGradScale(),
                                           b.getF64FloatAttr(0.0), Value());
        grad = compressAcrossRanks(b, loc, fn, name, grad, Value(), group,
                                   newState);
        Value momentum =
            b.create<EmaUpdateOp>(loc, type, adam.getExpAvg(), grad, one,
                                  adam.getBeta1Attr(), Value());
        auto frozen = b.create<FrozenAdamOp>(
            loc, TypeRange{type, type}, adam.getParam(), adam.getExpAvg(),
            momentum, adam.getExpAvgSq(), adam.getLr(), adam.getEpsAttr(),
            adam.getWeightDecayAttr(), Value());
        newParam = frozen.getNewParam();
        newExpAvg = frozen.getNewExpAvg();
      } else {
        auto accState =
            StateAttr::get(ctx, StateKind::momentum_accumulator, name);
        // Each rank accumulates its own local updates.
        Value acc = addStateArgument(fn, type, accState, /*perRank=*/true);
        Value momentum = b.create<EmaUpdateOp>(
            loc, type, adam.getExpAvg(), adam.getGrad(), adam.getGradScale(),
            adam.getBeta1Attr(), Value());
        auto local = b.create<LocalAdamOp>(
            loc, TypeRange{type, type, type}, adam.getParam(),
            adam.getExpAvg(), momentum, adam.getExpAvgSq(), acc, adam.getLr(),
            adam.getEpsAttr(), adam.getWeightDecayAttr());
        newParam = local.getNewParam();
        newExpAvg = local.getNewExpAvg();
        Value newAcc = local.getNewAccumulator();
        if (stage == Stage::Sync) {
          auto unwind = b.create<ZeroOneUnwindOp>(
              loc, TypeRange{type, type}, newParam, newAcc,
              adam.getExpAvgSq(), adam.getEpsAttr());
          Value reduced = compressAcrossRanks(
              b, loc, fn, name, unwind.getScaled(), Value(), group, newState);
          auto sync = b.create<ZeroOneSyncOp>(
              loc, TypeRange{type, type}, unwind.getStartParam(), reduced,
              adam.getExpAvgSq(), newLrSum, adam.getEpsAttr());
          newParam = sync.getNewParam();
          newExpAvg = sync.getNewExpAvg();
          newAcc = b.create<FillOp>(loc, type, b.getF64FloatAttr(0.0));
        }
        newState.push_back({newAcc, accState});
      }
      adam.getNewParam().replaceAllUsesWith(newParam);
      adam.getNewExpAvg().replaceAllUsesWith(newExpAvg);
      adam.getNewExpAvgSq().replaceAllUsesWith(adam.getExpAvgSq());
      adam.erase();
    }
    for (auto [value, state] : newState)
      addStateResult(fn, value, state);
  }
};

} // namespace
