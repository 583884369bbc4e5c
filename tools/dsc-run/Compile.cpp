//===- Compile.cpp - dsc-run's compiler half ------------------------------===//

#include "Compile.h"
#include "FlopsProfile.h"

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
    throw dsc::Error(what + (message.empty() ? "" : ": " + message));
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
  case dsc::OptimizerType::ZeroOneAdam: // pipelineFor
    return mlir::dsc::TrainStepOptimizer::AdamW;
  case dsc::OptimizerType::Lamb:
  case dsc::OptimizerType::OneBitLamb: // its warm-up (no bias correction)
    return mlir::dsc::TrainStepOptimizer::Lamb;
  case dsc::OptimizerType::SGD:
    return mlir::dsc::TrainStepOptimizer::Sgd;
  case dsc::OptimizerType::Adam8bit:
    return mlir::dsc::TrainStepOptimizer::Adam8bit;
  case dsc::OptimizerType::AdamW8bit:
    return mlir::dsc::TrainStepOptimizer::AdamW8bit;
  case dsc::OptimizerType::Adafactor:
    return mlir::dsc::TrainStepOptimizer::Adafactor;
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

/// The training pipeline `train` asks for.
mlir::dsc::TrainingPipeline pipelineFor(const dsc::ModelConfig &model,
                                        const dsc::TrainConfig &train) {
  mlir::dsc::TrainingPipeline p;
  if (const dsc::LoraConfig &l = train.lora; l.enabled) {
    mlir::dsc::TrainingLora &lora = p.lora.emplace();
    lora.options.rank = l.rank;
    lora.options.alpha = l.alpha;
    lora.options.dropout = l.dropout;
    lora.targetModules = l.targetModules;
    if (lora.targetModules.empty() && l.targetRegex.empty())
      lora.targetModules = dsc::defaultLoraTargets(model.type);
    lora.options.targetRegex = l.targetRegex;
    lora.options.bias = l.bias;
    lora.options.rslora = l.useRslora;
  }
  if (train.padVocabulary > 1)
    p.padVocabulary.emplace().multiple = train.padVocabulary;
  if (const dsc::FourBitConfig &q = model.fourBit; q.enabled) {
    mlir::dsc::TrainingQuantizeFrozen &quantize = p.quantizeFrozen.emplace();
    quantize.options.format = q.format;
    quantize.options.doubleQuant = q.doubleQuant;
    quantize.skipModules = q.skipModules;
  }
  const dsc::FusionConfig &fusion = train.fusion;
  mlir::dsc::TrainingSwitches &on = p.switches;
  on.fuseQkv = fusion.qkv;
  on.fuseBiasGelu = fusion.biasGelu;
  on.fuseSwiglu = fusion.swiglu;
  on.fuseBiasDropoutAdd = fusion.biasDropoutAdd;
  on.fuseResidualLayerNorm = fusion.biasDropoutAdd && fusion.residualLayerNorm;
  on.fuseResidualRmsNorm = fusion.residualRmsNorm;
  on.fuseAttention = fusion.attention;
  on.fuseSoftmaxDropout = fusion.softmaxDropout;
  on.fuseCrossEntropy = fusion.crossEntropy;
  on.invertible = train.kernel.normalizeInvertible;

  const dsc::OptimizerConfig &o = train.optimizer;
  mlir::dsc::DscBuildTrainStepOptions &step = p.buildTrainStep;
  step.optimizer = optimizerChoice(o.type);
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
  step.min8bitSize = o.min8bitSize;
  step.adafactorEps1 = o.adafactorEps1;
  step.adafactorEps2 = o.adafactorEps2;
  step.clipThreshold = o.clipThreshold;
  step.decayRate = o.decayRate;
  step.firstMoment = o.firstMoment;
  step.scaleParameter = o.scaleParameter;
  step.relativeStep = o.relativeStep;
  step.warmupInit = o.warmupInit;
  step.gradClip = train.gradClip;
  step.gradAccum = train.gradAccum;
  const dsc::SchedulerConfig &s = train.scheduler;
  step.schedule = scheduleChoice(s.type);
  step.warmupMinLr = s.warmupMinLr;
  step.warmupMaxLr = s.warmupMaxLr;
  step.warmupNumSteps = s.warmupNumSteps;
  step.totalNumSteps = s.totalNumSteps;
  step.warmupType = s.warmupLog ? mlir::dsc::WarmupType::log
                                : mlir::dsc::WarmupType::linear;
  step.warmupMinRatio = s.warmupMinRatio;
  step.cosMinRatio = s.cosMinRatio;
  const dsc::MixedPrecisionConfig &mp = train.precision;
  step.fp16 = mp.fp16;
  step.lossScale = mp.lossScale;
  step.initialScalePower = mp.initialScalePower;
  step.lossScaleWindow = mp.lossScaleWindow;
  step.hysteresis = mp.hysteresis;
  step.minLossScale = mp.minLossScale;
  step.consecutiveHysteresis = mp.consecutiveHysteresis;

  // dsc.remat.policy, which the config reader has checked ("none": no
  // -dsc-remat).
  const dsc::RematConfig &r = train.remat;
  if (r.policy == "deepspeed" || r.policy == "budget") {
    mlir::dsc::DscRematOptions &remat = p.remat.emplace();
    remat.policy = r.policy == "deepspeed" ? mlir::dsc::RematPolicy::DeepSpeed
                                           : mlir::dsc::RematPolicy::Budget;
    remat.gelu = r.geluCheckpoint;
    remat.attnDropout = r.attnDropoutCheckpoint;
    remat.perLayer = r.perLayer;
    remat.layerInterval = r.layerInterval;
    remat.budgetBytes = r.memoryBudgetBytes;
    remat.recomputeCheap = r.recomputeCheap;
  } else if (r.policy != "none") {
    throw dsc::Error("dsc.remat.policy: unknown policy \"" + r.policy +
                         "\"");
  }
  if (mp.fp16 || mp.bf16)
    p.mixedPrecision.emplace().dtype =
        mp.fp16 ? mlir::dsc::HalfFormat::f16 : mlir::dsc::HalfFormat::bf16;
  // The compressed optimizers' warm-ups are the plain optimizer without
  // bias correction (o.biasCorrection is false for them).
  if (o.type == dsc::OptimizerType::OneBitAdam)
    p.onebitAdam.emplace().freezeStep = o.freezeStep;
  if (o.type == dsc::OptimizerType::OneBitLamb) {
    mlir::dsc::DscOneBitLambOptions &onebit = p.onebitLamb.emplace();
    onebit.freezeStep = o.freezeStep;
    onebit.coeffBeta = o.coeffBeta;
    onebit.factorMax = o.factorMax;
    onebit.factorMin = o.factorMin;
    onebit.factorThreshold = o.factorThreshold;
  }
  if (o.type == dsc::OptimizerType::ZeroOneAdam) {
    mlir::dsc::DscZeroOneAdamOptions &zeroOne = p.zeroOneAdam.emplace();
    zeroOne.varFreezeStep = o.varFreezeStep;
    zeroOne.varUpdateScaler = o.varUpdateScaler;
    zeroOne.localStepScaler = o.localStepScaler;
    zeroOne.localStepClipper = o.localStepClipper;
  }
  if (train.zeroStage != 0) {
    mlir::dsc::DscZeroOptions &zero = p.zero.emplace();
    zero.stage = train.zeroStage;
    zero.persistenceThreshold = train.zeroPersistenceThreshold;
    zero.quantizedWeights = train.zeroQuantizedWeights;
    zero.quantizedGradients = train.zeroQuantizedGradients;
    zero.hybrid = train.zeroShardGroup != 0;
    zero.hpz = train.zeroHpzGroup != 0;
  }
  // ZeRO-Offload (the config reader allows it only with a ZeRO stage, and
  // parameter offload only at stage 3 with the optimizer's).
  if (train.offloadOptimizer)
    p.offloadOptimizer.emplace().params = train.offloadParams;
  // ZeRO-Infinity: that state (and the parameter shards) in the swap file.
  if (!train.offloadNvmePath.empty())
    p.offloadNvme.emplace().params = !train.offloadParamsNvmePath.empty();
  // One rank has nothing to reduce or gather: no bucket copies.
  if (train.dataParallel() > 1 &&
      (train.reduceBucketSize != 0 || train.allgatherBucketSize != 0)) {
    mlir::dsc::DscBucketCollectivesOptions &bucket =
        p.bucketCollectives.emplace();
    bucket.reduceBucketElements = train.reduceBucketSize;
    bucket.allgatherBucketElements = train.allgatherBucketSize;
  }
  // Reductions as soon as their gradients are final, ZeRO-3's gathers
  // ahead of their use: where a communication thread overlaps them.
  if (train.overlapsComm() && train.worldSize > 1)
    p.overlapCollectives.emplace().prefetchElements =
        train.zeroStage == 3 ? train.prefetchBucketSize : 0;
  return p;
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
    throw dsc::Error("pipeline stage " + std::to_string(pipelineStage) +
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
  import.moeCapacity =
      train.moeCapacity(import.microBatch * import.seqLen,
                        model.expertsPerToken, model.numExperts);
  // Mode dense is dense attention: no layout to mask or visit.
  if (train.sparseAttention.enabled &&
      train.sparseAttention.mode != SparsityMode::Dense)
    import.attentionLayout = makeSparseLayout(
        train.sparseAttention, import.seqLen, model.numHeads, train.seed);
  OwningOpRef<ModuleOp> module = importModel(ctx, model, import);
  annotateFlopsProfile(*module, train);
  Builder b(&ctx);
  (*module)->setAttr("dsc.seed", b.getI64IntegerAttr(int64_t(train.seed)));
  (*module)->setAttr("dsc.steps_per_print",
                     b.getI64IntegerAttr(train.stepsPerPrint));
  if (train.wallClockBreakdown)
    (*module)->setAttr("dsc.wall_clock_breakdown", b.getI64IntegerAttr(1));
  if (train.overlapsComm())
    (*module)->setAttr("dsc.overlap_comm", b.getI64IntegerAttr(1));
  // comms_logger: flags, and the logged operations ("": all of them).
  if (const TrainConfig::CommsLogger &l = train.commsLogger; l.enabled) {
    std::string ops;
    for (const std::string &op : l.profOps)
      ops += (ops.empty() ? "" : ",") + op;
    (*module)->setAttr("dsc.comms_logger", b.getI64IntegerAttr(1));
    (*module)->setAttr("dsc.comms_logger_verbose",
                       b.getI64IntegerAttr(l.verbose));
    (*module)->setAttr("dsc.comms_logger_debug", b.getI64IntegerAttr(l.debug));
    (*module)->setAttr("dsc.comms_logger_ops",
                       b.getStringAttr(l.profAll ? "*" : ops));
  }
  // DeepSpeed's monitors write into output_path/job_name.
  for (const auto &[name, monitor] :
       {std::pair{"dsc.csv_monitor_dir", &train.csvMonitor},
        std::pair{"dsc.tensorboard_dir", &train.tensorboard}})
    if (monitor->enabled)
      (*module)->setAttr(
          name, b.getStringAttr(monitor->outputPath.empty()
                                    ? monitor->jobName
                                    : monitor->outputPath + "/" +
                                          monitor->jobName));
  // Tensor slicing over autotp_size ranks, pipeline stages, data
  // parallelism over the rest; the runtime refuses to run the step on a
  // job of another size.
  (*module)->setAttr(mlir::dsc::kMeshAttrName,
                     mlir::dsc::MeshAttr::get(&ctx, train.dataParallel(),
                                              par.tensor, par.pipeline));
  // Expert-parallel groups, hybrid sharding's shard groups, hpZ's
  // secondary partitions, or qgZ's nodes.
  if (train.dataInner() > 1)
    (*module)->setAttr(mlir::dsc::kMeshDataInnerAttrName,
                       b.getI64IntegerAttr(train.dataInner()));
  // Expert parallelism over the data_inner groups (-dsc-expert-parallel).
  if (par.expert > 1)
    (*module)->setAttr(mlir::dsc::kMeshExpertAttrName,
                       b.getI64IntegerAttr(par.expert));
  // ZeRO-Infinity: the swap file's directory (-dsc-offload-nvme) and the
  // aio section's request queues (read by the runtime's SwapIo).
  if (!train.offloadNvmePath.empty()) {
    (*module)->setAttr(mlir::dsc::kNvmePathAttrName,
                       b.getStringAttr(train.offloadNvmePath));
    const AioOptions &aio = train.aio;
    for (auto [name, value] :
         {std::pair{"dsc.aio_block_size", aio.blockSize},
          std::pair{"dsc.aio_queue_depth", aio.queueDepth},
          std::pair{"dsc.aio_threads", aio.threads},
          std::pair{"dsc.aio_single_submit", int64_t(aio.singleSubmit)},
          std::pair{"dsc.aio_overlap_events", int64_t(aio.overlapEvents)}})
      (*module)->setAttr(name, b.getI64IntegerAttr(value));
  }
  if (par.pipeline > 1)
    (*module)->setAttr("dsc.pipeline_schedule",
                       b.getStringAttr(par.schedule));
  mlir::dsc::TrainingPipeline steps = pipelineFor(model, train);
  steps.pipelineStage.stage = pipelineStage;
  steps.pipelineStage.partition = par.partition;
  steps.pipelineStage.chunks = par.pipeline > 1 ? par.virtualStages : 1;
  steps.buildTrainStep.returnLogits = returnLogits;
  auto pm = PassManager::on<ModuleOp>(&ctx);
  mlir::dsc::buildTrainingPipeline(pm, steps);
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
  if (buildStep)
    annotateRecomputeFlops(*module);
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
