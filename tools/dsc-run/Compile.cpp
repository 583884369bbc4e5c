//===- Compile.cpp - dsc-run's compiler half ------------------------------===//

#include "Compile.h"

#include "dsc/Codegen/LowerToProgram.h"
#include "dsc/Frontend/ModelBuilder.h"
#include "dsc/Support/Files.h"
#include "dsc/Support/IRNesting.h"
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

mlir::dsc::TrainStepOptimizer optimizerChoice(dsc::OptimizerType type) {
  switch (type) {
  case dsc::OptimizerType::Adam:
    return mlir::dsc::TrainStepOptimizer::Adam;
  case dsc::OptimizerType::AdamW:
  case dsc::OptimizerType::OneBitAdam:  // its warm-up; see
  case dsc::OptimizerType::ZeroOneAdam: // fillPipelineOptions
    return mlir::dsc::TrainStepOptimizer::AdamW;
  case dsc::OptimizerType::Lamb:
  case dsc::OptimizerType::OneBitLamb: // its warm-up (no bias correction)
    return mlir::dsc::TrainStepOptimizer::Lamb;
  case dsc::OptimizerType::SGD:
    return mlir::dsc::TrainStepOptimizer::Sgd;
  }
  llvm_unreachable("unknown optimizer type");
}

mlir::dsc::LrScheduleKind scheduleChoice(dsc::SchedulerType type) {
  switch (type) {
  case dsc::SchedulerType::WarmupLR:
    return mlir::dsc::LrScheduleKind::WarmupLR;
  case dsc::SchedulerType::WarmupDecayLR:
    return mlir::dsc::LrScheduleKind::WarmupDecayLR;
  case dsc::SchedulerType::WarmupCosineLR:
    return mlir::dsc::LrScheduleKind::WarmupCosineLR;
  case dsc::SchedulerType::None:
    return mlir::dsc::LrScheduleKind::constant;
  }
  llvm_unreachable("unknown scheduler type");
}

/// dsc.remat.policy, which the config reader has checked.
mlir::dsc::RematPolicy rematChoice(const std::string &policy) {
  if (policy == "deepspeed")
    return mlir::dsc::RematPolicy::DeepSpeed;
  if (policy == "budget")
    return mlir::dsc::RematPolicy::Budget;
  if (policy == "none")
    return mlir::dsc::RematPolicy::None;
  throw dsc::rt::Error("dsc.remat.policy: unknown policy \"" + policy + "\"");
}

/// The training pipeline `train` asks for.
void fillPipelineOptions(const dsc::ModelConfig &model,
                         const dsc::TrainConfig &train,
                         mlir::dsc::TrainingPipelineOptions &p) {
  if (const dsc::LoraConfig &l = train.lora; l.enabled) {
    p.loraRank = l.rank;
    p.loraAlpha = l.alpha;
    p.loraDropout = l.dropout;
    std::vector<std::string> targets = l.targetModules;
    if (targets.empty() && l.targetRegex.empty())
      targets = dsc::defaultLoraTargets(model.type);
    p.loraTargetModules = targets;
    p.loraTargetRegex = l.targetRegex;
    p.loraBias = l.bias;
    p.loraRslora = l.useRslora;
  }
  const dsc::FusionConfig &fusion = train.fusion;
  p.fuseQkv = fusion.qkv;
  p.fuseBiasGelu = fusion.biasGelu;
  p.fuseSwiglu = fusion.swiglu;
  p.fuseBiasDropoutAdd = fusion.biasDropoutAdd;
  p.fuseResidualLayerNorm = fusion.biasDropoutAdd && fusion.residualLayerNorm;
  p.fuseResidualRmsNorm = fusion.residualRmsNorm;
  p.fuseAttention = fusion.attention;
  p.fuseSoftmaxDropout = fusion.softmaxDropout;
  p.fuseCrossEntropy = fusion.crossEntropy;

  const dsc::OptimizerConfig &o = train.optimizer;
  p.optimizer = optimizerChoice(o.type);
  p.lr = o.lr;
  p.beta1 = o.beta1;
  p.beta2 = o.beta2;
  p.eps = o.eps;
  p.weightDecay = o.weightDecay;
  p.biasCorrection = o.biasCorrection;
  p.maxCoeff = o.maxCoeff;
  p.minCoeff = o.minCoeff;
  p.momentum = o.momentum;
  p.dampening = o.dampening;
  p.nesterov = o.nesterov;
  p.gradClip = train.gradClip;
  p.gradAccum = train.gradAccum;
  const dsc::SchedulerConfig &s = train.scheduler;
  p.schedule = scheduleChoice(s.type);
  p.warmupMinLr = s.warmupMinLr;
  p.warmupMaxLr = s.warmupMaxLr;
  p.warmupNumSteps = s.warmupNumSteps;
  p.totalNumSteps = s.totalNumSteps;
  p.warmupType = s.warmupLog ? mlir::dsc::WarmupType::log
                             : mlir::dsc::WarmupType::linear;
  p.warmupMinRatio = s.warmupMinRatio;
  p.cosMinRatio = s.cosMinRatio;
  const dsc::MixedPrecisionConfig &mp = train.precision;
  p.fp16 = mp.fp16;
  p.lossScale = mp.lossScale;
  p.initialScalePower = mp.initialScalePower;
  p.lossScaleWindow = mp.lossScaleWindow;
  p.hysteresis = mp.hysteresis;
  p.minLossScale = mp.minLossScale;
  p.consecutiveHysteresis = mp.consecutiveHysteresis;

  p.invertible = train.kernel.normalizeInvertible;
  const dsc::RematConfig &r = train.remat;
  p.remat = rematChoice(r.policy);
  p.rematGelu = r.geluCheckpoint;
  p.rematAttnDropout = r.attnDropoutCheckpoint;
  p.rematPerLayer = r.perLayer;
  p.rematLayerInterval = r.layerInterval;
  p.rematBudgetBytes = r.memoryBudgetBytes;
  p.rematRecomputeCheap = r.recomputeCheap;
  p.mixedPrecision = mp.fp16   ? mlir::dsc::TrainingPrecision::F16
                     : mp.bf16 ? mlir::dsc::TrainingPrecision::BF16
                               : mlir::dsc::TrainingPrecision::None;
  if (o.type == dsc::OptimizerType::OneBitAdam)
    p.onebitAdamFreezeStep = o.freezeStep; // o.biasCorrection is false
  if (o.type == dsc::OptimizerType::OneBitLamb) { // likewise
    p.onebitLambFreezeStep = o.freezeStep;
    p.onebitLambCoeffBeta = o.coeffBeta;
    p.onebitLambFactorMax = o.factorMax;
    p.onebitLambFactorMin = o.factorMin;
    p.onebitLambFactorThreshold = o.factorThreshold;
  }
  if (o.type == dsc::OptimizerType::ZeroOneAdam) { // likewise
    p.zeroOneAdamVarFreezeStep = o.varFreezeStep;
    p.zeroOneAdamVarUpdateScaler = o.varUpdateScaler;
    p.zeroOneAdamLocalStepScaler = o.localStepScaler;
    p.zeroOneAdamLocalStepClipper = o.localStepClipper;
  }
  p.zeroStage = train.zeroStage;
  p.zeroPersistenceThreshold = train.zeroPersistenceThreshold;
  // One rank has nothing to reduce or gather: no bucket copies.
  const bool ranks = train.dataParallel() > 1;
  p.reduceBucketElements = ranks ? train.reduceBucketSize : 0;
  p.allgatherBucketElements = ranks ? train.allgatherBucketSize : 0;
}

} // namespace

OwningOpRef<ModuleOp> dsc::compileStep(MLIRContext &ctx,
                                       const ModelConfig &model,
                                       const TrainConfig &train,
                                       bool buildStep, std::string *pipeline,
                                       int64_t pipelineStage,
                                       bool returnLogits) {
  const ParallelConfig &par = train.parallel;
  if (pipelineStage < 0 || pipelineStage >= par.pipeline)
    throw rt::Error("pipeline stage " + std::to_string(pipelineStage) +
                    " is not one of the " + std::to_string(par.pipeline) +
                    " stages");
  DiagnosticCapture diags(ctx);
  ImportOptions import;
  import.microBatch = train.microBatch;
  import.seqLen = train.seqLen > 0 ? train.seqLen : model.maxPositions;
  import.mlmProbability = train.mlmProbability;
  import.maskTokenId =
      train.maskTokenId >= 0 ? train.maskTokenId : kBertMaskTokenId;
  import.padTokenId = train.padTokenId;
  // Mode dense is dense attention: no layout to mask or visit.
  if (train.sparseAttention.enabled &&
      train.sparseAttention.mode != SparsityMode::Dense)
    import.attentionLayout = makeSparseLayout(
        train.sparseAttention, import.seqLen, model.numHeads, train.seed);
  OwningOpRef<ModuleOp> module = importModel(ctx, model, import);
  Builder b(&ctx);
  (*module)->setAttr("dsc.seed", b.getI64IntegerAttr(int64_t(train.seed)));
  (*module)->setAttr("dsc.steps_per_print",
                     b.getI64IntegerAttr(train.stepsPerPrint));
  // Tensor slicing over autotp_size ranks, pipeline stages, data
  // parallelism over the rest; the runtime refuses to run the step on a
  // job of another size.
  (*module)->setAttr(mlir::dsc::kMeshAttrName,
                     mlir::dsc::MeshAttr::get(&ctx, train.dataParallel(),
                                              par.tensor, par.pipeline));
  if (par.pipeline > 1)
    (*module)->setAttr("dsc.pipeline_schedule",
                       b.getStringAttr(par.schedule));
  mlir::dsc::TrainingPipelineOptions options;
  fillPipelineOptions(model, train, options);
  options.pipelineStage = pipelineStage;
  options.pipelinePartition = par.partition;
  options.pipelineChunks = par.pipeline > 1 ? par.virtualStages : 1;
  options.returnLogits = returnLogits;
  auto pm = PassManager::on<ModuleOp>(&ctx);
  mlir::dsc::buildTrainingPipeline(pm, options);
  if (pipeline) {
    pipeline->clear();
    llvm::raw_string_ostream os(*pipeline);
    pm.printAsTextualPipeline(os);
  }
  if (mlir::failed(mlir::verify(*module)))
    diags.fail(buildStep ? "compiling the training step failed"
                         : "importing the model failed");
  if (buildStep && mlir::failed(pm.run(*module)))
    diags.fail("compiling the training step failed");
  return module;
}

OwningOpRef<ModuleOp> dsc::loadStep(MLIRContext &ctx, const std::string &path) {
  ctx.loadDialect<mlir::dsc::DscDialect, mlir::func::FuncDialect>();
  DiagnosticCapture diags(ctx);
  // Read through the shared reader (a FIFO or device is refused, not read
  // forever); locations still name `path`.
  std::string text = readRegularFile(path);
  checkIRNesting(text, path); // MLIR's parser would overflow the stack
  OwningOpRef<ModuleOp> module =
      mlir::parseSourceString<ModuleOp>(text, &ctx, path);
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

std::pair<int64_t, int64_t> dsc::attendedScores(ModuleOp module) {
  int64_t sparse = 0, dense = 0;
  auto fn = module.lookupSymbol<mlir::func::FuncOp>("micro_step");
  if (!fn)
    return {0, 0};
  fn.walk([&](mlir::Operation *op) {
    // The forward ops that carry a layout: attention, or the unfused
    // softmax (attention_grad attends what its forward did).
    if (!mlir::isa<mlir::dsc::AttentionOp, mlir::dsc::SoftmaxOp,
                   mlir::dsc::SoftmaxDropoutOp>(op))
      return;
    auto layout = op->getAttrOfType<mlir::dsc::BlockLayoutAttr>("layout");
    if (!layout)
      return;
    auto causalAttr = op->getAttrOfType<mlir::BoolAttr>("causal");
    const bool causal = causalAttr && causalAttr.getValue();
    auto shape =
        mlir::cast<mlir::ShapedType>(op->getOperand(0).getType()).getShape();
    int64_t rows = 1; // B * H of q [B, H, T, D] or scores [B, H, T, T]
    for (size_t d = 0; d + 2 < shape.size(); ++d)
      rows *= shape[d];
    const int64_t t = layout.getTokens(), b = layout.getBlock();
    dense += rows * (causal ? t * (t + 1) / 2 : t * t);
    llvm::ArrayRef<int32_t> r = layout.getRows().asArrayRef(),
                            c = layout.getCols().asArrayRef();
    int64_t perLayout = 0; // over all layout heads
    for (int64_t row = 0; row + 1 < int64_t(r.size()); ++row)
      for (int32_t k = r[row]; k < r[row + 1]; ++k)
        perLayout += causal && c[k] == row % layout.getBlocks()
                         ? b * (b + 1) / 2
                         : b * b;
    sparse += rows / layout.getHeads() * perLayout;
  });
  return {sparse, dense};
}
