//===- TrainPipeline.cpp - The training pass pipeline ---------------------===//
//
// forward graph -> training step, as one function both tools run: dsc-run
// fills TrainingPipelineOptions from the model and DeepSpeed configs, dsc-opt
// registers it as --dsc-train-pipeline. Order:
//
//   -dsc-tensor-parallel (slices the graph the frontend built, before any
//     fusion changes its shape; nothing to do on a mesh without a tensor
//     axis)
//   -dsc-lora (freezes the model and adds adapters: the fusions see them;
//     on the whole model, where a tied head is recognised by its embedding)
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

// An option that switches a pass on is off only at its documented value
// (lora-rank 0, a freeze step -1, zero-stage 0, bucket sizes 0); any other
// value reaches the pass, which refuses what it cannot take (a negative
// value used to drop the pass silently).
void mlir::dsc::buildTrainingPipeline(OpPassManager &pm,
                                      const TrainingPipelineOptions &o) {
  pm.addPass(createDscTensorParallel());
  if (o.loraRank != 0) {
    DscLoraOptions lora;
    lora.rank = o.loraRank;
    lora.alpha = o.loraAlpha;
    lora.dropout = o.loraDropout;
    // DscLoraOptions holds an ArrayRef; createDscLora copies what it needs.
    std::vector<std::string> targets(o.loraTargetModules.begin(),
                                     o.loraTargetModules.end());
    lora.targetModules = targets;
    lora.targetRegex = o.loraTargetRegex;
    lora.bias = o.loraBias;
    lora.rslora = o.loraRslora;
    pm.addPass(createDscLora(lora));
  }
  DscPipelineStageOptions stage;
  stage.stage = o.pipelineStage;
  stage.partition = o.pipelinePartition;
  stage.chunks = o.pipelineChunks;
  pm.addPass(createDscPipelineStage(stage));
  if (o.fuseQkv)
    pm.addPass(createDscFuseQkv());
  if (o.fuseBiasGelu)
    pm.addPass(createDscFuseBiasGelu());
  if (o.fuseSwiglu)
    pm.addPass(createDscFuseSwiglu());
  if (o.fuseBiasDropoutAdd)
    pm.addPass(createDscFuseBiasDropoutAdd());
  if (o.fuseResidualLayerNorm)
    pm.addPass(createDscFuseResidualLayerNorm());
  if (o.fuseResidualRmsNorm)
    pm.addPass(createDscFuseResidualRmsNorm());
  if (o.fuseAttention)
    pm.addPass(createDscFuseAttention());
  if (o.fuseSoftmaxDropout)
    pm.addPass(createDscFuseSoftmaxDropout());

  pm.addPass(createDscAutodiff());
  DscBuildTrainStepOptions step;
  step.optimizer = o.optimizer;
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
  step.gradClip = o.gradClip;
  step.gradAccum = o.gradAccum;
  step.schedule = o.schedule;
  step.warmupMinLr = o.warmupMinLr;
  step.warmupMaxLr = o.warmupMaxLr;
  step.warmupNumSteps = o.warmupNumSteps;
  step.totalNumSteps = o.totalNumSteps;
  step.warmupType = o.warmupType;
  step.warmupMinRatio = o.warmupMinRatio;
  step.cosMinRatio = o.cosMinRatio;
  step.fp16 = o.fp16;
  step.lossScale = o.lossScale;
  step.initialScalePower = o.initialScalePower;
  step.lossScaleWindow = o.lossScaleWindow;
  step.hysteresis = o.hysteresis;
  step.minLossScale = o.minLossScale;
  step.consecutiveHysteresis = o.consecutiveHysteresis;
  step.returnLogits = o.returnLogits;
  pm.addPass(createDscBuildTrainStep(step));

  if (o.invertible)
    pm.addPass(createDscInvertible());
  if (o.remat != RematPolicy::None) {
    DscRematOptions remat;
    remat.policy = o.remat;
    remat.gelu = o.rematGelu;
    remat.attnDropout = o.rematAttnDropout;
    remat.perLayer = o.rematPerLayer;
    remat.layerInterval = o.rematLayerInterval;
    remat.budgetBytes = o.rematBudgetBytes;
    remat.recomputeCheap = o.rematRecomputeCheap;
    pm.addPass(createDscRemat(remat));
  }
  if (o.mixedPrecision != TrainingPrecision::None) {
    DscMixedPrecisionOptions precision;
    precision.dtype = o.mixedPrecision == TrainingPrecision::F16
                          ? HalfFormat::f16
                          : HalfFormat::bf16;
    pm.addPass(createDscMixedPrecision(precision));
  }
  if (o.onebitAdamFreezeStep != -1) {
    DscOneBitAdamOptions onebit;
    onebit.freezeStep = o.onebitAdamFreezeStep;
    pm.addPass(createDscOneBitAdam(onebit));
  }
  if (o.onebitLambFreezeStep != -1) {
    DscOneBitLambOptions onebit;
    onebit.freezeStep = o.onebitLambFreezeStep;
    onebit.coeffBeta = o.onebitLambCoeffBeta;
    onebit.factorMax = o.onebitLambFactorMax;
    onebit.factorMin = o.onebitLambFactorMin;
    onebit.factorThreshold = o.onebitLambFactorThreshold;
    pm.addPass(createDscOneBitLamb(onebit));
  }
  if (o.zeroOneAdamVarFreezeStep != -1) {
    DscZeroOneAdamOptions zeroOne;
    zeroOne.varFreezeStep = o.zeroOneAdamVarFreezeStep;
    zeroOne.varUpdateScaler = o.zeroOneAdamVarUpdateScaler;
    zeroOne.localStepScaler = o.zeroOneAdamLocalStepScaler;
    zeroOne.localStepClipper = o.zeroOneAdamLocalStepClipper;
    pm.addPass(createDscZeroOneAdam(zeroOne));
  }
  if (o.zeroStage != 0) {
    DscZeroOptions zero;
    zero.stage = o.zeroStage;
    zero.persistenceThreshold = o.zeroPersistenceThreshold;
    pm.addPass(createDscZero(zero));
  }
  if (o.reduceBucketElements != 0 || o.allgatherBucketElements != 0) {
    DscBucketCollectivesOptions bucket;
    bucket.reduceBucketElements = o.reduceBucketElements;
    bucket.allgatherBucketElements = o.allgatherBucketElements;
    pm.addPass(createDscBucketCollectives(bucket));
  }
  pm.addPass(createDscSplitStageStep());
  if (o.fuseCrossEntropy)
    pm.addPass(createDscFuseCrossEntropy());
}

void mlir::dsc::registerTrainingPipeline() {
  PassPipelineRegistration<TrainingPipelineOptions>(
      "dsc-train-pipeline",
      "Build the training step: -dsc-tensor-parallel (for the mesh's "
      "tensor axis), -dsc-lora as chosen, -dsc-pipeline-stage (its "
      "pipeline axis), the fusions as chosen, "
      "-dsc-autodiff, "
      "-dsc-build-train-step, then -dsc-invertible, -dsc-remat, "
      "-dsc-mixed-precision, -dsc-onebit-adam, -dsc-onebit-lamb, "
      "-dsc-zero-one-adam, "
      "-dsc-zero and "
      "-dsc-bucket-collectives as chosen, -dsc-split-stage-step",
      buildTrainingPipeline);
}
