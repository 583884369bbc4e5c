//===- TrainPipeline.cpp - The training pass pipeline ---------------------===//
//
// forward graph -> training step, as one order both tools run: dsc-run
// fills a TrainingPipeline (each pass's generated options) from the model
// and DeepSpeed configs; dsc-opt's --dsc-train-pipeline hands each pass its
// own option text. Order:
//
//   -dsc-tensor-parallel (slices the graph the frontend built, before any
//     fusion changes its shape; nothing to do on a mesh without a tensor
//     axis)
//   -dsc-expert-parallel (shards the experts over expert-parallel groups,
//     on the graph the frontend built; nothing to do without
//     dsc.mesh_expert)
//   -dsc-lora (freezes the model and adds adapters: the fusions see them;
//     on the whole model, where a tied head is recognised by its embedding)
//   -dsc-quantize-frozen (QLoRA: the frozen linear weights in 4 bits; the
//     fusions leave its GEMMs alone)
//   -dsc-pad-vocabulary (the LM head's vocabulary to a multiple of N rows,
//     on the whole model; a LoRA or 4-bit head is left as it is)
//   -dsc-pipeline-stage (keeps this rank's stage of a pipelined mesh;
//     after the slicing, which sees the whole model's embeddings and head)
//   forward-graph fusions (qkv, bias-gelu, swiglu, bias-dropout-add,
//     residual-layer-norm, residual-rms-norm, attention, softmax-dropout)
//   -dsc-autodiff, -dsc-build-train-step
//   -dsc-invertible, -dsc-remat, -dsc-mixed-precision (it rounds what the
//     passes before it built)
//   -dsc-onebit-adam (adds 1-bit Adam's compression stage)
//   -dsc-onebit-lamb (adds 1-bit LAMB's freeze and compression stage)
//   -dsc-zero-one-adam (adds 0/1 Adam's 1-bit, local and sync steps)
//   -dsc-zero (shards the finished step's optimizer state and gradients)
//   -dsc-offload-optimizer (ZeRO-Offload: the sharded update on the host)
//   -dsc-offload-nvme (ZeRO-Infinity: its state in the NVMe swap file)
//   -dsc-bucket-collectives (gradient reductions and gathers of updated
//     shards, in buckets)
//   -dsc-split-stage-step (a pipeline stage's forward and backward, which
//     its schedule runs apart; nothing to do for a whole model)
//
// -dsc-fuse-attention runs before -dsc-fuse-softmax-dropout: it takes the
// whole softmax chain, so the softmax + dropout fusion sees only the
// attentions it left (it matches the chain after that fusion as well).
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The pipeline's passes that take options, each null when it does not
/// run, and its switches: what both forms of the options come to.
struct TrainingPasses {
  TrainingSwitches switches;
  std::unique_ptr<Pass> lora, quantizeFrozen, padVocabulary, pipelineStage,
      buildTrainStep, remat,
      mixedPrecision, onebitAdam, onebitLamb, zeroOneAdam, zero,
      offloadOptimizer, offloadNvme, bucketCollectives, overlapCollectives;
};

/// The order, once for both forms.
void addInOrder(OpPassManager &pm, TrainingPasses p) {
  auto addIfRun = [&](std::unique_ptr<Pass> &pass) {
    if (pass)
      pm.addPass(std::move(pass));
  };
  const TrainingSwitches &on = p.switches;
  pm.addPass(createDscTensorParallel());
  pm.addPass(createDscExpertParallel());
  addIfRun(p.lora);
  addIfRun(p.quantizeFrozen);
  addIfRun(p.padVocabulary);
  pm.addPass(std::move(p.pipelineStage));
  if (on.fuseQkv)
    pm.addPass(createDscFuseQkv());
  if (on.fuseBiasGelu)
    pm.addPass(createDscFuseBiasGelu());
  if (on.fuseSwiglu)
    pm.addPass(createDscFuseSwiglu());
  if (on.fuseBiasDropoutAdd)
    pm.addPass(createDscFuseBiasDropoutAdd());
  if (on.fuseResidualLayerNorm)
    pm.addPass(createDscFuseResidualLayerNorm());
  if (on.fuseResidualRmsNorm)
    pm.addPass(createDscFuseResidualRmsNorm());
  if (on.fuseAttention)
    pm.addPass(createDscFuseAttention());
  if (on.fuseSoftmaxDropout)
    pm.addPass(createDscFuseSoftmaxDropout());
  pm.addPass(createDscAutodiff());
  pm.addPass(std::move(p.buildTrainStep));
  if (on.invertible)
    pm.addPass(createDscInvertible());
  addIfRun(p.remat);
  addIfRun(p.mixedPrecision);
  addIfRun(p.onebitAdam);
  addIfRun(p.onebitLamb);
  addIfRun(p.zeroOneAdam);
  addIfRun(p.zero);
  addIfRun(p.offloadOptimizer);
  addIfRun(p.offloadNvme);
  addIfRun(p.bucketCollectives);
  addIfRun(p.overlapCollectives);
  pm.addPass(createDscSplitStageStep());
  if (on.fuseCrossEntropy)
    pm.addPass(createDscFuseCrossEntropy());
}

/// `create(*options)` when the pass runs.
template <typename Options>
std::unique_ptr<Pass>
ifRun(const std::optional<Options> &options,
      std::unique_ptr<Pass> (*create)(const Options &)) {
  return options ? create(*options) : nullptr;
}

using ErrorHandler = function_ref<LogicalResult(const Twine &)>;

/// `pass` with `option`'s text as its options; null when the option is not
/// given (and the pass not `always` run). A text the pass refuses sets
/// `failed`, through `error`.
std::unique_ptr<Pass>
fromText(std::unique_ptr<Pass> pass,
         const TrainingPipelineOptions::Option<std::string> &option,
         bool always, ErrorHandler error, bool &failed) {
  if (!always && !option.hasValue())
    return nullptr;
  // The pass's option parser may already have printed why (an enum value
  // it does not know) and hand over an empty message.
  auto named = [&](const Twine &msg) {
    std::string why = msg.str();
    return error("--dsc-train-pipeline " + option.getArgStr() + "={" +
                 option.getValue() + "}: " +
                 (why.empty() ? "not accepted by the pass" : why));
  };
  if (mlir::failed(pass->initializeOptions(option.getValue(), named)))
    failed = true;
  return pass;
}

} // namespace

void mlir::dsc::buildTrainingPipeline(OpPassManager &pm,
                                      const TrainingPipeline &t) {
  TrainingPasses p;
  p.switches = t.switches;
  if (t.lora) {
    DscLoraOptions lora = t.lora->options;
    lora.targetModules = t.lora->targetModules;
    p.lora = createDscLora(lora); // copies what it needs
  }
  if (t.quantizeFrozen) {
    DscQuantizeFrozenOptions quantize = t.quantizeFrozen->options;
    quantize.skipModules = t.quantizeFrozen->skipModules;
    p.quantizeFrozen = createDscQuantizeFrozen(quantize);
  }
  p.padVocabulary = ifRun(t.padVocabulary, createDscPadVocabulary);
  p.pipelineStage = createDscPipelineStage(t.pipelineStage);
  p.buildTrainStep = createDscBuildTrainStep(t.buildTrainStep);
  p.remat = ifRun(t.remat, createDscRemat);
  p.mixedPrecision = ifRun(t.mixedPrecision, createDscMixedPrecision);
  p.onebitAdam = ifRun(t.onebitAdam, createDscOneBitAdam);
  p.onebitLamb = ifRun(t.onebitLamb, createDscOneBitLamb);
  p.zeroOneAdam = ifRun(t.zeroOneAdam, createDscZeroOneAdam);
  p.zero = ifRun(t.zero, createDscZero);
  p.offloadOptimizer = ifRun(t.offloadOptimizer, createDscOffloadOptimizer);
  p.offloadNvme = ifRun(t.offloadNvme, createDscOffloadNvme);
  p.bucketCollectives = ifRun(t.bucketCollectives, createDscBucketCollectives);
  p.overlapCollectives = ifRun(t.overlapCollectives, createDscOverlapCollectives);
  addInOrder(pm, std::move(p));
}

/// dsc-opt's form: each pass parses its own option text.
static LogicalResult buildFromText(OpPassManager &pm,
                                   const TrainingPipelineOptions &o,
                                   ErrorHandler error) {
  bool failed = false;
  TrainingPasses p;
  TrainingSwitches &on = p.switches;
  on.fuseQkv = o.fuseQkv;
  on.fuseBiasGelu = o.fuseBiasGelu;
  on.fuseSwiglu = o.fuseSwiglu;
  on.fuseBiasDropoutAdd = o.fuseBiasDropoutAdd;
  on.fuseResidualLayerNorm = o.fuseResidualLayerNorm;
  on.fuseResidualRmsNorm = o.fuseResidualRmsNorm;
  on.fuseAttention = o.fuseAttention;
  on.fuseSoftmaxDropout = o.fuseSoftmaxDropout;
  on.invertible = o.invertible;
  on.fuseCrossEntropy = o.fuseCrossEntropy;
  p.lora = fromText(createDscLora(), o.lora, false, error, failed);
  p.quantizeFrozen = fromText(createDscQuantizeFrozen(), o.quantizeFrozen,
                              false, error, failed);
  p.padVocabulary = fromText(createDscPadVocabulary(), o.padVocabulary, false,
                             error, failed);
  p.pipelineStage =
      fromText(createDscPipelineStage(), o.pipelineStage, true, error, failed);
  p.buildTrainStep =
      fromText(createDscBuildTrainStep(), o.buildTrainStep, true, error, failed);
  p.remat = fromText(createDscRemat(), o.remat, false, error, failed);
  p.mixedPrecision =
      fromText(createDscMixedPrecision(), o.mixedPrecision, false, error, failed);
  p.onebitAdam = fromText(createDscOneBitAdam(), o.onebitAdam, false, error, failed);
  p.onebitLamb = fromText(createDscOneBitLamb(), o.onebitLamb, false, error, failed);
  p.zeroOneAdam =
      fromText(createDscZeroOneAdam(), o.zeroOneAdam, false, error, failed);
  p.zero = fromText(createDscZero(), o.zero, false, error, failed);
  p.offloadOptimizer = fromText(createDscOffloadOptimizer(),
                                o.offloadOptimizer, false, error, failed);
  p.offloadNvme = fromText(createDscOffloadNvme(), o.offloadNvme, false,
                           error, failed);
  p.bucketCollectives = fromText(createDscBucketCollectives(),
                                 o.bucketCollectives, false, error, failed);
  p.overlapCollectives = fromText(createDscOverlapCollectives(), o.overlapCollectives,
                               false, error, failed);
  if (failed)
    return failure();
  addInOrder(pm, std::move(p));
  return success();
}

void mlir::dsc::registerTrainingPipeline() {
  registerPassPipeline(
      "dsc-train-pipeline",
      "Build the training step: -dsc-tensor-parallel, -dsc-lora, "
      "-dsc-quantize-frozen and -dsc-pad-vocabulary as given, "
      "-dsc-pipeline-stage, the fusions as chosen, -dsc-autodiff, "
      "-dsc-build-train-step, then -dsc-invertible, -dsc-remat, "
      "-dsc-mixed-precision, -dsc-onebit-adam, -dsc-onebit-lamb, "
      "-dsc-zero-one-adam, -dsc-zero, -dsc-offload-optimizer, "
      "-dsc-bucket-collectives and -dsc-overlap-collectives as given, "
      "-dsc-split-stage-step, -dsc-fuse-cross-entropy as chosen. A pass with "
      "options runs when its option is given, with that text as its own "
      "options: zero={stage=2}",
      [](OpPassManager &pm, StringRef text, ErrorHandler error) {
        TrainingPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        return buildFromText(pm, options, error);
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> print) {
        print(TrainingPipelineOptions());
      });
}
