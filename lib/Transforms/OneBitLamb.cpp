//===- OneBitLamb.cpp - 1-bit LAMB's warm-up and compression stage --------===//
//
// -dsc-onebit-lamb (see Passes.td), DeepSpeed's OnebitLamb
// (deepspeed/runtime/fp16/onebit/lamb.py) as three functions:
//   @apply_step             the warm-up: LAMB without bias correction over
//                           all-reduced gradients, plus the moving average
//                           of each parameter's trust ratio
//                           (dsc.lamb_coeff_ema -> lamb_coeff_freeze);
//   @onebit_lamb_freeze     run once when the compression stage starts: the
//                           momentum scales (dsc.momentum_scales), the
//                           fresh variance (a copy of the frozen one) and
//                           the factors' start (1);
//   @apply_step_compressed  the compression stage: the local momentum,
//                           scaled, error-compensated 1-bit all-reduce,
//                           dsc.onebit_lamb_update.
//
//===----------------------------------------------------------------------===//

#include "CompressedAllReduce.h"

#include "dsc/Transforms/Passes.h"

#include <cmath>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCONEBITLAMB
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The parameter name of a LAMB update in `fn`.
StringRef paramName(func::FuncOp fn, LambOp lamb) {
  auto param = cast<BlockArgument>(lamb.getParam());
  return fn.getArgAttrOfType<StateAttr>(param.getArgNumber(), kStateAttrName)
      .getName();
}

struct OneBitLambPass : mlir::dsc::impl::DscOneBitLambBase<OneBitLambPass> {
  using DscOneBitLambBase::DscOneBitLambBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (freezeStep < 1 || !(factorMin > 0) || factorMin > factorMax ||
        !(coeffBeta >= 0 && coeffBeta < 1) || !(factorThreshold >= 0) ||
        !std::isfinite(double(factorMax)) ||
        !std::isfinite(double(factorThreshold))) {
      module.emitError("dsc-onebit-lamb: needs freeze-step >= 1, 0 < "
                       "factor-min <= factor-max, coeff-beta in [0, 1) and "
                       "factor-threshold >= 0");
      return signalPassFailure();
    }
    func::FuncOp apply =
        findWarmupStep(module, "dsc-onebit-lamb",
                       {"apply_step_compressed", "onebit_lamb_freeze"});
    if (!apply)
      return signalPassFailure();
    SmallVector<LambOp> updates;
    WalkResult walk = apply.walk([&](OptimizerOpInterface op) {
      auto lamb = dyn_cast<LambOp>(op.getOperation());
      if (!lamb || lamb.getBiasCorrection() || lamb.getSkip() ||
          !isa<BlockArgument>(lamb.getParam())) {
        op->emitOpError("dsc-onebit-lamb: the warm-up must be LAMB without "
                        "bias correction or fp16 skips on whole parameters "
                        "(DeepSpeed's OnebitLamb; -dsc-build-train-step "
                        "optimizer=lamb bias-correction=false)");
        return WalkResult::interrupt();
      }
      updates.push_back(lamb);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted() || updates.empty()) {
      if (!walk.wasInterrupted())
        apply.emitError("dsc-onebit-lamb: @apply_step updates nothing");
      return signalPassFailure();
    }
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(apply);
    auto compressed = cast<func::FuncOp>(b.clone(*apply));
    compressed.setName("apply_step_compressed");
    buildFreeze(module, apply, updates);
    buildCompressionStage(compressed, meshGroupSize(module, MeshAxis::data));
    buildWarmup(apply, updates);
    module->setAttr("dsc.freeze_step", b.getI64IntegerAttr(freezeStep));
  }

  StateAttr state(StateKind kind, StringRef name) {
    return StateAttr::get(&getContext(), kind, name);
  }
  RankedTensorType scalarType() {
    return RankedTensorType::get({}, Float32Type::get(&getContext()));
  }

  /// The warm-up also averages each parameter's trust ratio.
  void buildWarmup(func::FuncOp fn, ArrayRef<LambOp> updates) {
    OpBuilder b(&getContext());
    SmallVector<std::pair<Value, StateAttr>> results;
    for (LambOp lamb : updates) {
      StateAttr coeffState =
          state(StateKind::lamb_coeff_freeze, paramName(fn, lamb));
      Value coeff = addStateArgument(fn, scalarType(), coeffState);
      b.setInsertionPointAfter(lamb);
      Value next = b.create<LambCoeffEmaOp>(
          lamb.getLoc(), scalarType(), lamb.getParam(), lamb.getNewExpAvg(),
          lamb.getNewExpAvgSq(), coeff, lamb.getEpsAttr(),
          lamb.getWeightDecayAttr(), lamb.getMaxCoeffAttr(),
          lamb.getMinCoeffAttr(), b.getF64FloatAttr(coeffBeta));
      results.push_back({next, coeffState});
    }
    for (auto [value, s] : results)
      addStateResult(fn, value, s);
  }

  /// @onebit_lamb_freeze(exp_avg..., exp_avg_sq...) -> (scaling_coeff...,
  /// exp_avg_sq_fresh..., last_factor...).
  void buildFreeze(ModuleOp module, func::FuncOp apply,
                   ArrayRef<LambOp> updates) {
    MLIRContext *ctx = &getContext();
    OpBuilder b = OpBuilder::atBlockEnd(module.getBody());
    auto fn = b.create<func::FuncOp>(apply.getLoc(), "onebit_lamb_freeze",
                                     FunctionType::get(ctx, {}, {}));
    Block *body = fn.addEntryBlock();
    b.setInsertionPointToEnd(body);
    b.create<func::ReturnOp>(apply.getLoc());
    SmallVector<Value> momenta, variances;
    for (LambOp lamb : updates)
      momenta.push_back(addStateArgument(
          fn, lamb.getExpAvg().getType(),
          state(StateKind::exp_avg, paramName(apply, lamb))));
    for (LambOp lamb : updates)
      variances.push_back(addStateArgument(
          fn, lamb.getExpAvgSq().getType(),
          state(StateKind::exp_avg_sq, paramName(apply, lamb))));
    b.setInsertionPoint(body->getTerminator());
    auto scales = b.create<MomentumScalesOp>(
        apply.getLoc(), SmallVector<Type>(updates.size(), scalarType()),
        momenta);
    Value one = b.create<FillOp>(apply.getLoc(), scalarType(),
                                 b.getF64FloatAttr(1.0));
    for (auto [k, lamb] : llvm::enumerate(updates)) {
      StringRef name = paramName(apply, lamb);
      addStateResult(fn, scales.getScales()[k],
                     state(StateKind::scaling_coeff, name));
      addStateResult(fn, variances[k],
                     state(StateKind::exp_avg_sq_fresh, name));
      addStateResult(fn, one, state(StateKind::last_factor, name));
    }
  }

  void buildCompressionStage(func::FuncOp fn, int64_t groupSize) {
    // The gradients stay local: what is reduced is the momentum.
    keepGradientsLocal(fn);
    SmallVector<LambOp> updates;
    fn.walk([&](LambOp op) { updates.push_back(op); });
    SmallVector<std::pair<Value, StateAttr>> results;
    OpBuilder b(&getContext());
    for (LambOp lamb : updates) {
      Location loc = lamb.getLoc();
      StringRef name = paramName(fn, lamb);
      Value scaling = addStateArgument(
          fn, scalarType(), state(StateKind::scaling_coeff, name));
      Value coeff = addStateArgument(
          fn, scalarType(), state(StateKind::lamb_coeff_freeze, name));
      StateAttr factorState = state(StateKind::last_factor, name);
      Value lastFactor = addStateArgument(fn, scalarType(), factorState);
      StateAttr freshState = state(StateKind::exp_avg_sq_fresh, name);
      Value fresh =
          addStateArgument(fn, lamb.getExpAvgSq().getType(), freshState);
      b.setInsertionPoint(lamb);
      Value momentum = b.create<EmaUpdateOp>(
          loc, lamb.getExpAvg().getType(), lamb.getExpAvg(), lamb.getGrad(),
          lamb.getGradScale(), lamb.getBeta1Attr(), Value());
      momentum = b.create<ScaleByOp>(loc, momentum.getType(), momentum,
                                     scaling);
      SmallVector<std::pair<Value, StateAttr>> errors;
      momentum = compressAcrossRanks(b, loc, fn, name, momentum, Value(),
                                     groupSize, errors);
      results.append(errors);
      auto update = b.create<OnebitLambUpdateOp>(
          loc,
          TypeRange{lamb.getParam().getType(), lamb.getExpAvg().getType(),
                    fresh.getType(), scalarType()},
          lamb.getParam(), momentum, lamb.getExpAvg(), lamb.getExpAvgSq(),
          fresh, scaling, coeff, lastFactor, lamb.getLr(),
          lamb.getBeta1Attr(), lamb.getBeta2Attr(), lamb.getEpsAttr(),
          lamb.getWeightDecayAttr(), b.getF64FloatAttr(factorMax),
          b.getF64FloatAttr(factorMin), b.getF64FloatAttr(factorThreshold));
      lamb.getNewParam().replaceAllUsesWith(update.getNewParam());
      lamb.getNewExpAvg().replaceAllUsesWith(update.getNewExpAvg());
      lamb.getNewExpAvgSq().replaceAllUsesWith(lamb.getExpAvgSq());
      lamb.erase();
      results.push_back({update.getNewExpAvgSqFresh(), freshState});
      results.push_back({update.getNewLastFactor(), factorState});
    }
    for (auto [value, s] : results)
      addStateResult(fn, value, s);
  }
};

} // namespace
