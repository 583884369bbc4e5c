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

std::optional<StateKind> argKind(func::FuncOp fn, unsigned i) {
  if (auto state = fn.getArgAttrOfType<StateAttr>(i, kStateAttrName))
    return state.getKind();
  return std::nullopt;
}

struct OneBitAdamPass : mlir::dsc::impl::DscOneBitAdamBase<OneBitAdamPass> {
  using DscOneBitAdamBase::DscOneBitAdamBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (freezeStep < 0) {
      module.emitError("dsc-onebit-adam: freeze-step must be >= 0, got ")
          << int64_t(freezeStep);
      return signalPassFailure();
    }
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal()) {
      module.emitError("dsc-onebit-adam: no @apply_step; run "
                       "-dsc-build-train-step first");
      return signalPassFailure();
    }
    if (module.lookupSymbol("apply_step_compressed")) {
      module.emitError("dsc-onebit-adam: @apply_step_compressed exists "
                       "already");
      return signalPassFailure();
    }
    if (failed(checkWarmup(apply)))
      return signalPassFailure();
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(apply);
    auto compressed = cast<func::FuncOp>(b.clone(*apply));
    compressed.setName("apply_step_compressed");
    buildCompressionStage(compressed, meshGroupSize(module, MeshAxis::data));
    module->setAttr("dsc.freeze_step", b.getI64IntegerAttr(freezeStep));
  }

  /// The warm-up must be what DeepSpeed's OnebitAdam runs before it
  /// freezes: AdamW-style decay, no bias correction, whole tensors.
  LogicalResult checkWarmup(func::FuncOp apply) {
    for (unsigned i = 0; i < apply.getNumArguments(); ++i)
      if (apply.getArgAttr(i, kShardOfAttrName))
        return apply.emitError("dsc-onebit-adam: @apply_step is sharded "
                               "(-dsc-zero); 1-bit Adam runs on whole "
                               "tensors, before ZeRO");
    WalkResult walk = apply.walk([&](OptimizerOpInterface op) {
      auto adam = dyn_cast<AdamOp>(op.getOperation());
      if (!adam) {
        op->emitOpError("dsc-onebit-adam: 1-bit Adam compresses Adam's "
                        "momentum; this step updates with ")
            << op->getName();
        return WalkResult::interrupt();
      }
      if (!adam.getAdamw() || adam.getBiasCorrection()) {
        adam.emitOpError("dsc-onebit-adam: the warm-up must be Adam with "
                         "decoupled weight decay and no bias correction "
                         "(DeepSpeed's OnebitAdam; -dsc-build-train-step "
                         "optimizer=adamw bias-correction=false)");
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  void buildCompressionStage(func::FuncOp fn, int64_t groupSize) {
    MLIRContext *ctx = &getContext();
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(ctx);
    auto data = MeshAxisAttr::get(ctx, MeshAxis::data);

    // The gradients stay local: what is reduced is the momentum.
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        auto acc = dyn_cast<BlockArgument>(reduce.getInput());
        if (acc && argKind(fn, acc.getArgNumber()) == StateKind::grad) {
          reduce.replaceAllUsesWith(reduce.getInput());
          reduce.erase();
        }
      } else if (isa<CheckFiniteOp>(op)) {
        // fp16: every rank skips if any rank's local gradients overflowed.
        b.setInsertionPointAfter(&op);
        auto any = b.create<AllReduceOp>(
            op.getLoc(), op.getResult(0).getType(), op.getResult(0),
            ReduceKindAttr::get(ctx, ReduceKind::max), data);
        op.getResult(0).replaceAllUsesExcept(any, any);
      }

    SmallVector<AdamOp> updates;
    fn.walk([&](AdamOp op) { updates.push_back(op); });
    // The updated errors, returned with their states once all are built.
    SmallVector<std::pair<Value, StateAttr>> newErrors;
    for (AdamOp adam : updates) {
      Location loc = adam.getLoc();
      b.setInsertionPoint(adam);
      Value skip = adam.getSkip();
      Value momentum = b.create<EmaUpdateOp>(
          loc, adam.getExpAvg().getType(), adam.getExpAvg(), adam.getGrad(),
          adam.getGradScale(), adam.getBeta1Attr(), skip);
      // One rank: DeepSpeed does not compress (nothing to send).
      if (groupSize > 1) {
        auto param = cast<BlockArgument>(adam.getParam());
        StringRef name = fn.getArgAttrOfType<StateAttr>(param.getArgNumber(),
                                                        kStateAttrName)
                             .getName();
        const int64_t p = compressedSize(
            cast<RankedTensorType>(param.getType()).getNumElements(),
            groupSize);
        auto workerState = StateAttr::get(ctx, StateKind::worker_error, name);
        auto serverState = StateAttr::get(ctx, StateKind::server_error, name);
        BlockArgument workerError = addErrorArgument(fn, p, workerState);
        BlockArgument serverError =
            addErrorArgument(fn, p / groupSize, serverState);
        CompressedAllReduce reduced = buildCompressedAllReduce(
            b, loc, momentum, workerError, serverError, skip, groupSize);
        momentum = reduced.result;
        newErrors.push_back({reduced.newWorkerError, workerState});
        newErrors.push_back({reduced.newServerError, serverState});
      }
      auto frozen = b.create<FrozenAdamOp>(
          loc, TypeRange{adam.getParam().getType(), adam.getExpAvg().getType()},
          adam.getParam(), adam.getExpAvg(), momentum, adam.getExpAvgSq(),
          adam.getLr(), adam.getEpsAttr(), adam.getWeightDecayAttr(), skip);
      adam.getNewParam().replaceAllUsesWith(frozen.getNewParam());
      adam.getNewExpAvg().replaceAllUsesWith(frozen.getNewExpAvg());
      adam.getNewExpAvgSq().replaceAllUsesWith(adam.getExpAvgSq());
      adam.erase();
    }
    for (auto [value, state] : newErrors) {
      const unsigned r = ret.getNumOperands();
      ret->insertOperands(r, value);
      NamedAttrList attrs;
      attrs.set(kStateAttrName, state);
      fn.insertResult(r, value.getType(), attrs.getDictionary(ctx));
    }
  }

  /// Appends a per-rank f32 argument of `elements` elements holding
  /// `state` (a compression error).
  BlockArgument addErrorArgument(func::FuncOp fn, int64_t elements,
                                 StateAttr state) {
    MLIRContext *ctx = &getContext();
    NamedAttrList attrs;
    attrs.set(kStateAttrName, state);
    attrs.set(kPerRankAttrName, UnitAttr::get(ctx));
    const unsigned index = fn.getNumArguments();
    fn.insertArgument(index,
                      RankedTensorType::get({elements}, Float32Type::get(ctx)),
                      attrs.getDictionary(ctx), fn.getLoc());
    return fn.getArgument(index);
  }
};

} // namespace
