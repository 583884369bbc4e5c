//===- Compile.cpp - dsc-run's compiler half ------------------------------===//

#include "Compile.h"

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Frontend/ModelBuilder.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

using mlir::Builder;
using mlir::Diagnostic;
using mlir::DiagnosticSeverity;
using mlir::MLIRContext;
using mlir::ModuleOp;
using mlir::OwningOpRef;
using mlir::PassManager;
using mlir::ScopedDiagnosticHandler;

namespace {

/// Collects the first error diagnostic as "location: message".
class DiagnosticCapture {
public:
  explicit DiagnosticCapture(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &diag) {
          if (diag.getSeverity() == DiagnosticSeverity::Error &&
              message.empty()) {
            std::string loc;
            llvm::raw_string_ostream os(loc);
            if (auto file = mlir::dyn_cast<mlir::FileLineColLoc>(
                    diag.getLocation()))
              os << file.getFilename().strref() << ":" << file.getLine()
                 << ":" << file.getColumn();
            else
              os << diag.getLocation();
            message = os.str() + ": " + diag.str();
          }
          return mlir::success();
        }) {}
  [[noreturn]] void fail(const std::string &what) {
    throw dsc::rt::Error(what + (message.empty() ? "" : ": " + message));
  }

private:
  std::string message;
  ScopedDiagnosticHandler handler;
};

const char *optimizerName(dsc::OptimizerType type) {
  switch (type) {
  case dsc::OptimizerType::Adam:
    return "adam";
  case dsc::OptimizerType::AdamW:
    return "adamw";
  case dsc::OptimizerType::Lamb:
    return "lamb";
  case dsc::OptimizerType::SGD:
    return "sgd";
  }
  return "adamw";
}

const char *scheduleName(dsc::SchedulerType type) {
  switch (type) {
  case dsc::SchedulerType::WarmupLR:
    return "WarmupLR";
  case dsc::SchedulerType::WarmupDecayLR:
    return "WarmupDecayLR";
  case dsc::SchedulerType::WarmupCosineLR:
    return "WarmupCosineLR";
  case dsc::SchedulerType::None:
    break;
  }
  return "constant";
}

} // namespace

OwningOpRef<ModuleOp> dsc::compileStep(MLIRContext &ctx,
                                       const ModelConfig &model,
                                       const TrainConfig &train,
                                       bool buildStep) {
  DiagnosticCapture diags(ctx);
  ImportOptions import;
  import.microBatch = train.microBatch;
  import.seqLen = train.seqLen > 0 ? train.seqLen : model.maxPositions;
  import.mlmProbability = train.mlmProbability;
  import.maskTokenId =
      train.maskTokenId >= 0 ? train.maskTokenId : kBertMaskTokenId;
  OwningOpRef<ModuleOp> module = importModel(ctx, model, import);
  Builder b(&ctx);
  (*module)->setAttr("dsc.seed", b.getI64IntegerAttr(int64_t(train.seed)));
  (*module)->setAttr("dsc.steps_per_print",
                     b.getI64IntegerAttr(train.stepsPerPrint));
  if (!buildStep) {
    if (mlir::failed(mlir::verify(*module)))
      diags.fail("importing the model failed");
    return module;
  }

  const OptimizerConfig &o = train.optimizer;
  const SchedulerConfig &s = train.scheduler;
  mlir::dsc::DscBuildTrainStepOptions step;
  step.optimizer = optimizerName(o.type);
  step.lr = o.lr;
  step.beta1 = o.beta1;
  step.beta2 = o.beta2;
  step.eps = o.eps;
  step.weightDecay = o.weightDecay;
  step.biasCorrection = o.biasCorrection;
  step.maxCoeff = o.maxCoeff;
  step.minCoeff = o.minCoeff;
  step.momentum = o.momentum;
  step.dampening = o.dampening;
  step.nesterov = o.nesterov;
  step.gradClip = train.gradClip;
  step.gradAccum = train.gradAccum;
  step.schedule = scheduleName(s.type);
  step.warmupMinLr = s.warmupMinLr;
  step.warmupMaxLr = s.warmupMaxLr;
  step.warmupNumSteps = s.warmupNumSteps;
  step.totalNumSteps = s.totalNumSteps;
  step.warmupType = s.warmupLog ? "log" : "linear";
  step.warmupMinRatio = s.warmupMinRatio;
  step.cosMinRatio = s.cosMinRatio;
  const MixedPrecisionConfig &mp = train.precision;
  step.fp16 = mp.fp16;
  step.lossScale = mp.lossScale;
  step.initialScalePower = mp.initialScalePower;
  step.lossScaleWindow = mp.lossScaleWindow;
  step.hysteresis = mp.hysteresis;
  step.minLossScale = mp.minLossScale;
  step.consecutiveHysteresis = mp.consecutiveHysteresis;

  PassManager pm(&ctx);
  if (train.fusion.qkv)
    pm.addPass(mlir::dsc::createDscFuseQkv());
  if (train.fusion.biasGelu)
    pm.addPass(mlir::dsc::createDscFuseBiasGelu());
  if (train.fusion.biasDropoutAdd)
    pm.addPass(mlir::dsc::createDscFuseBiasDropoutAdd());
  if (train.fusion.biasDropoutAdd && train.fusion.residualLayerNorm)
    pm.addPass(mlir::dsc::createDscFuseResidualLayerNorm());
  // Attention first: it takes the whole softmax chain, so the softmax +
  // dropout fusion only sees the attentions it left (when it is off). It
  // matches the chain after that fusion too, for dsc-opt pipelines.
  if (train.fusion.attention)
    pm.addPass(mlir::dsc::createDscFuseAttention());
  if (train.fusion.softmaxDropout)
    pm.addPass(mlir::dsc::createDscFuseSoftmaxDropout());
  pm.addPass(mlir::dsc::createDscAutodiff());
  pm.addPass(mlir::dsc::createDscBuildTrainStep(step));
  if (train.kernel.normalizeInvertible)
    pm.addPass(mlir::dsc::createDscInvertible());
  if (train.remat.policy != "none") {
    mlir::dsc::DscRematOptions remat;
    remat.policy = train.remat.policy;
    remat.gelu = train.remat.geluCheckpoint;
    remat.attnDropout = train.remat.attnDropoutCheckpoint;
    remat.perLayer = train.remat.perLayer;
    remat.budgetBytes = train.remat.memoryBudgetBytes;
    remat.recomputeCheap = train.remat.recomputeCheap;
    pm.addPass(mlir::dsc::createDscRemat(remat));
  }
  if (mp.fp16 || mp.bf16) { // last: rounds what the other passes built
    mlir::dsc::DscMixedPrecisionOptions precision;
    precision.dtype = mp.fp16 ? "f16" : "bf16";
    pm.addPass(mlir::dsc::createDscMixedPrecision(precision));
  }
  if (mlir::failed(mlir::verify(*module)) || mlir::failed(pm.run(*module)))
    diags.fail("compiling the training step failed");
  return module;
}

OwningOpRef<ModuleOp> dsc::loadStep(MLIRContext &ctx, const std::string &path) {
  ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  DiagnosticCapture diags(ctx);
  OwningOpRef<ModuleOp> module = mlir::parseSourceFile<ModuleOp>(path, &ctx);
  if (!module)
    diags.fail("cannot load compiled step " + path);
  return module;
}

dsc::rt::Program dsc::lowerStep(ModuleOp module) {
  DiagnosticCapture diags(*module.getContext());
  mlir::FailureOr<rt::Program> program = lowerToProgram(module);
  if (mlir::failed(program))
    diags.fail("cannot lower the training step");
  return std::move(*program);
}
