//===- Passes.h - dsc passes -----------------------------------*- C++ -*-===//
//
// The dsc passes (declared in Passes.td), the choices their options name, and
// the training pipeline that dsc-run compiles with and dsc-opt registers as
// --dsc-train-pipeline.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TRANSFORMS_PASSES_H
#define DSC_TRANSFORMS_PASSES_H

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/ExactDouble.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::dsc {

//===----------------------------------------------------------------------===//
// Choices named by pass options (their spellings are the `llvm::cl::values`
// of Passes.td, so a bad value is rejected by the option parser). Choices
// that ops carry as well are the dialect's enums (LrScheduleKind,
// WarmupType, HalfFormat).
//===----------------------------------------------------------------------===//

/// -dsc-build-train-step `optimizer`.
enum class TrainStepOptimizer { Adam, AdamW, Lamb, Sgd };
/// -dsc-remat `policy`.
enum class RematPolicy { None, DeepSpeed, Budget };
/// -dsc-memory-report `format`.
enum class MemoryReportFormat { Table, Json };

/// The spelling of a -dsc-remat policy, as the option parser takes it.
inline StringRef stringifyRematPolicy(RematPolicy policy) {
  switch (policy) {
  case RematPolicy::None:
    return "none";
  case RematPolicy::DeepSpeed:
    return "deepspeed";
  case RematPolicy::Budget:
    return "budget";
  }
  llvm_unreachable("unknown RematPolicy");
}

#define GEN_PASS_DECL
#include "dsc/Transforms/Passes.h.inc"

//===----------------------------------------------------------------------===//
// Local fusions as rewrite patterns
//===----------------------------------------------------------------------===//

/// Each local fusion is one rewrite pattern that its -dsc-fuse-* pass applies
/// with the greedy driver; the populate functions let another pass apply
/// them together with its own patterns. -dsc-fuse-qkv and -dsc-remat stay
/// walks: they decide over the whole function.
void populateFuseBiasGeluPatterns(RewritePatternSet &patterns);
void populateFuseSwigluPatterns(RewritePatternSet &patterns);
void populateFuseSoftmaxDropoutPatterns(RewritePatternSet &patterns);
void populateFuseBiasDropoutAddPatterns(RewritePatternSet &patterns);
void populateFuseResidualLayerNormPatterns(RewritePatternSet &patterns);
void populateFuseResidualRmsNormPatterns(RewritePatternSet &patterns);
void populateFuseAttentionPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "dsc/Transforms/Passes.h.inc"

//===----------------------------------------------------------------------===//
// The training pipeline
//===----------------------------------------------------------------------===//

/// -dsc-train-pipeline `mixed-precision`: no rounding, or -dsc-mixed-precision
/// with that dtype.
enum class TrainingPrecision { None, F16, BF16 };

/// Options of buildTrainingPipeline (`--dsc-train-pipeline`): every choice the
/// pipeline makes. The defaults add no fusion, no -dsc-invertible, no
/// -dsc-remat and no -dsc-mixed-precision, so the plain pipeline is
/// -dsc-autodiff then -dsc-build-train-step; the options of
/// -dsc-build-train-step keep its names and defaults (Passes.td documents
/// them), the -dsc-remat ones are prefixed `remat-`.
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  // -dsc-pipeline-stage, after -dsc-tensor-parallel and -dsc-lora (nothing
  // to do on a mesh without a pipeline axis).
  Option<int64_t> pipelineStage{
      *this, "pipeline-stage",
      llvm::cl::desc("-dsc-pipeline-stage stage: the stage to build"),
      llvm::cl::init(0)};
  Option<std::string> pipelinePartition{
      *this, "pipeline-partition",
      llvm::cl::desc("-dsc-pipeline-stage partition: uniform | parameters | "
                     "best"),
      llvm::cl::init("uniform")};
  Option<int64_t> pipelineChunks{
      *this, "pipeline-chunks",
      llvm::cl::desc("-dsc-pipeline-stage chunks: model chunks per stage "
                     "(> 1: the interleaved schedule's virtual stages)"),
      llvm::cl::init(1)};
  // -dsc-lora (lora-rank 0: no LoRA); the other options keep the pass's
  // names with a `lora-` prefix.
  Option<int64_t> loraRank{*this, "lora-rank",
                           llvm::cl::desc("Run -dsc-lora with this rank (r)"),
                           llvm::cl::init(0)};
  Option<ExactDouble> loraAlpha{*this, "lora-alpha",
                                llvm::cl::desc("-dsc-lora alpha"),
                                llvm::cl::init(8.0)};
  Option<ExactDouble> loraDropout{*this, "lora-dropout",
                                  llvm::cl::desc("-dsc-lora dropout"),
                                  llvm::cl::init(0.0)};
  ListOption<std::string> loraTargetModules{
      *this, "lora-target-modules",
      llvm::cl::desc("-dsc-lora target-modules")};
  Option<std::string> loraTargetRegex{
      *this, "lora-target-regex", llvm::cl::desc("-dsc-lora target-regex"),
      llvm::cl::init("")};
  Option<std::string> loraBias{*this, "lora-bias",
                               llvm::cl::desc("-dsc-lora bias"),
                               llvm::cl::init("none")};
  Option<bool> loraRslora{*this, "lora-rslora",
                          llvm::cl::desc("-dsc-lora rslora"),
                          llvm::cl::init(false)};

  // Forward-graph fusions, in the order the pipeline runs them.
  Option<bool> fuseQkv{*this, "fuse-qkv",
                       llvm::cl::desc("Run -dsc-fuse-qkv"),
                       llvm::cl::init(false)};
  Option<bool> fuseBiasGelu{*this, "fuse-bias-gelu",
                            llvm::cl::desc("Run -dsc-fuse-bias-gelu"),
                            llvm::cl::init(false)};
  Option<bool> fuseSwiglu{*this, "fuse-swiglu",
                          llvm::cl::desc("Run -dsc-fuse-swiglu"),
                          llvm::cl::init(false)};
  Option<bool> fuseBiasDropoutAdd{
      *this, "fuse-bias-dropout-add",
      llvm::cl::desc("Run -dsc-fuse-bias-dropout-add"), llvm::cl::init(false)};
  Option<bool> fuseResidualLayerNorm{
      *this, "fuse-residual-layer-norm",
      llvm::cl::desc("Run -dsc-fuse-residual-layer-norm (it fuses the "
                     "dsc.bias_dropout_add that fuse-bias-dropout-add makes)"),
      llvm::cl::init(false)};
  Option<bool> fuseResidualRmsNorm{
      *this, "fuse-residual-rms-norm",
      llvm::cl::desc("Run -dsc-fuse-residual-rms-norm"),
      llvm::cl::init(false)};
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Run -dsc-fuse-attention"),
                             llvm::cl::init(false)};
  Option<bool> fuseCrossEntropy{
      *this, "fuse-cross-entropy",
      llvm::cl::desc("Run -dsc-fuse-cross-entropy (last)"),
      llvm::cl::init(false)};
  Option<bool> fuseSoftmaxDropout{
      *this, "fuse-softmax-dropout",
      llvm::cl::desc("Run -dsc-fuse-softmax-dropout (after -dsc-fuse-attention, "
                     "so it fuses only the attentions that one left)"),
      llvm::cl::init(false)};

  // -dsc-build-train-step.
  Option<TrainStepOptimizer> optimizer{
      *this, "optimizer", llvm::cl::desc("The optimizer"),
      llvm::cl::init(TrainStepOptimizer::AdamW),
      llvm::cl::values(
          clEnumValN(TrainStepOptimizer::Adam, "adam", "Adam (L2 decay)"),
          clEnumValN(TrainStepOptimizer::AdamW, "adamw", "AdamW"),
          clEnumValN(TrainStepOptimizer::Lamb, "lamb", "LAMB"),
          clEnumValN(TrainStepOptimizer::Sgd, "sgd", "SGD"))};
  Option<ExactDouble> lr{*this, "lr", llvm::cl::desc("Base learning rate"),
                    llvm::cl::init(1e-3)};
  Option<ExactDouble> beta1{*this, "beta1", llvm::cl::desc("Adam/LAMB beta1"),
                       llvm::cl::init(0.9)};
  Option<ExactDouble> beta2{*this, "beta2", llvm::cl::desc("Adam/LAMB beta2"),
                       llvm::cl::init(0.999)};
  Option<ExactDouble> eps{*this, "eps", llvm::cl::desc("Adam/LAMB epsilon"),
                     llvm::cl::init(1e-8)};
  Option<ExactDouble> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (rank >= 2 tensors only)"),
      llvm::cl::init(0.0)};
  Option<bool> biasCorrection{*this, "bias-correction",
                              llvm::cl::desc("Adam/LAMB bias correction"),
                              llvm::cl::init(true)};
  Option<ExactDouble> maxCoeff{*this, "max-coeff",
                          llvm::cl::desc("LAMB trust ratio max"),
                          llvm::cl::init(10.0)};
  Option<ExactDouble> minCoeff{*this, "min-coeff",
                          llvm::cl::desc("LAMB trust ratio min"),
                          llvm::cl::init(0.01)};
  Option<ExactDouble> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<ExactDouble> dampening{*this, "dampening",
                           llvm::cl::desc("SGD dampening"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<ExactDouble> gradClip{
      *this, "grad-clip",
      llvm::cl::desc("Global-norm gradient clipping (0: off)"),
      llvm::cl::init(0.0)};
  Option<int64_t> gradAccum{*this, "grad-accum",
                            llvm::cl::desc("Micro-batches per optimizer step"),
                            llvm::cl::init(1)};
  Option<LrScheduleKind> schedule{
      *this, "schedule", llvm::cl::desc("Learning-rate schedule"),
      llvm::cl::init(LrScheduleKind::constant),
      llvm::cl::values(
          clEnumValN(LrScheduleKind::constant, "constant", "lr throughout"),
          clEnumValN(LrScheduleKind::WarmupLR, "WarmupLR", "warm up, hold"),
          clEnumValN(LrScheduleKind::WarmupDecayLR, "WarmupDecayLR",
                     "warm up, linear decay"),
          clEnumValN(LrScheduleKind::WarmupCosineLR, "WarmupCosineLR",
                     "warm up, cosine decay"))};
  Option<ExactDouble> warmupMinLr{*this, "warmup-min-lr",
                             llvm::cl::desc("Learning rate at step 0"),
                             llvm::cl::init(0.0)};
  Option<ExactDouble> warmupMaxLr{
      *this, "warmup-max-lr",
      llvm::cl::desc("Learning rate at the end of the warmup"),
      llvm::cl::init(0.001)};
  Option<int64_t> warmupNumSteps{*this, "warmup-num-steps",
                                 llvm::cl::desc("Steps of the warmup"),
                                 llvm::cl::init(1000)};
  Option<int64_t> totalNumSteps{
      *this, "total-num-steps",
      llvm::cl::desc("Step at which the decay ends"), llvm::cl::init(0)};
  Option<WarmupType> warmupType{
      *this, "warmup-type", llvm::cl::desc("Shape of the warmup"),
      llvm::cl::init(WarmupType::log),
      llvm::cl::values(
          clEnumValN(WarmupType::log, "log", "logarithmic"),
          clEnumValN(WarmupType::linear, "linear", "linear"))};
  Option<ExactDouble> warmupMinRatio{
      *this, "warmup-min-ratio",
      llvm::cl::desc("WarmupCosineLR: learning rate at step 0 / lr"),
      llvm::cl::init(0.0)};
  Option<ExactDouble> cosMinRatio{
      *this, "cos-min-ratio",
      llvm::cl::desc("WarmupCosineLR: final learning rate / lr"),
      llvm::cl::init(0.0001)};
  Option<bool> fp16{
      *this, "fp16",
      llvm::cl::desc("Scale the loss, skip steps whose gradients overflow"),
      llvm::cl::init(false)};
  Option<ExactDouble> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("0: dynamic loss scaling; > 0: this static scale"),
      llvm::cl::init(0.0)};
  Option<int64_t> initialScalePower{
      *this, "initial-scale-power",
      llvm::cl::desc("Dynamic scaling starts at 2^this"), llvm::cl::init(16)};
  Option<int64_t> lossScaleWindow{
      *this, "loss-scale-window",
      llvm::cl::desc("Good steps before the scale doubles"),
      llvm::cl::init(1000)};
  Option<int64_t> hysteresis{
      *this, "hysteresis",
      llvm::cl::desc("Overflows tolerated before the scale halves"),
      llvm::cl::init(2)};
  Option<ExactDouble> minLossScale{
      *this, "min-loss-scale",
      llvm::cl::desc("The scale never drops below this"), llvm::cl::init(1.0)};
  Option<bool> consecutiveHysteresis{
      *this, "consecutive-hysteresis",
      llvm::cl::desc("Restore the hysteresis after every good step"),
      llvm::cl::init(false)};
  Option<bool> returnLogits{
      *this, "return-logits",
      llvm::cl::desc("@micro_step also returns the logits"),
      llvm::cl::init(false)};

  // After the step is built.
  Option<bool> invertible{
      *this, "invertible",
      llvm::cl::desc("Run -dsc-invertible (normalize_invertible)"),
      llvm::cl::init(false)};
  Option<RematPolicy> remat{
      *this, "remat",
      llvm::cl::desc("-dsc-remat policy (none: the pass is not run)"),
      llvm::cl::init(RematPolicy::None),
      llvm::cl::values(
          clEnumValN(RematPolicy::None, "none", "no -dsc-remat"),
          clEnumValN(RematPolicy::DeepSpeed, "deepspeed",
                     "DeepSpeed's switches"),
          clEnumValN(RematPolicy::Budget, "budget",
                     "least recompute cost within remat-budget-bytes"))};
  Option<bool> rematGelu{*this, "remat-gelu",
                         llvm::cl::desc("-dsc-remat gelu"),
                         llvm::cl::init(false)};
  Option<bool> rematAttnDropout{*this, "remat-attn-dropout",
                                llvm::cl::desc("-dsc-remat attn-dropout"),
                                llvm::cl::init(false)};
  Option<bool> rematPerLayer{*this, "remat-per-layer",
                             llvm::cl::desc("-dsc-remat per-layer"),
                             llvm::cl::init(false)};
  Option<int64_t> rematLayerInterval{
      *this, "remat-layer-interval",
      llvm::cl::desc("-dsc-remat layer-interval"), llvm::cl::init(1)};
  Option<int64_t> rematBudgetBytes{
      *this, "remat-budget-bytes", llvm::cl::desc("-dsc-remat budget-bytes"),
      llvm::cl::init(0)};
  Option<bool> rematRecomputeCheap{
      *this, "remat-recompute-cheap",
      llvm::cl::desc("-dsc-remat recompute-cheap"), llvm::cl::init(true)};
  Option<TrainingPrecision> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("Run -dsc-mixed-precision last, with this dtype"),
      llvm::cl::init(TrainingPrecision::None),
      llvm::cl::values(
          clEnumValN(TrainingPrecision::None, "none", "no rounding"),
          clEnumValN(TrainingPrecision::F16, "f16", "IEEE binary16"),
          clEnumValN(TrainingPrecision::BF16, "bf16", "bfloat16"))};
  Option<int64_t> onebitAdamFreezeStep{
      *this, "onebit-adam-freeze-step",
      llvm::cl::desc("Run -dsc-onebit-adam (before -dsc-zero) with this "
                     "freeze-step (-1: not at all)"),
      llvm::cl::init(-1)};
  Option<int64_t> onebitLambFreezeStep{
      *this, "onebit-lamb-freeze-step",
      llvm::cl::desc("Run -dsc-onebit-lamb with this freeze-step (-1: not "
                     "at all)"),
      llvm::cl::init(-1)};
  Option<ExactDouble> onebitLambCoeffBeta{
      *this, "onebit-lamb-coeff-beta",
      llvm::cl::desc("-dsc-onebit-lamb's coeff-beta"), llvm::cl::init(0.9)};
  Option<ExactDouble> onebitLambFactorMax{
      *this, "onebit-lamb-factor-max",
      llvm::cl::desc("-dsc-onebit-lamb's factor-max"), llvm::cl::init(4.0)};
  Option<ExactDouble> onebitLambFactorMin{
      *this, "onebit-lamb-factor-min",
      llvm::cl::desc("-dsc-onebit-lamb's factor-min"), llvm::cl::init(0.5)};
  Option<ExactDouble> onebitLambFactorThreshold{
      *this, "onebit-lamb-factor-threshold",
      llvm::cl::desc("-dsc-onebit-lamb's factor-threshold"),
      llvm::cl::init(0.1)};
  Option<int64_t> zeroOneAdamVarFreezeStep{
      *this, "zero-one-adam-var-freeze-step",
      llvm::cl::desc("Run -dsc-zero-one-adam (before -dsc-zero) with this "
                     "var-freeze-step (-1: not at all)"),
      llvm::cl::init(-1)};
  Option<int64_t> zeroOneAdamVarUpdateScaler{
      *this, "zero-one-adam-var-update-scaler",
      llvm::cl::desc("-dsc-zero-one-adam's var-update-scaler"),
      llvm::cl::init(16)};
  Option<int64_t> zeroOneAdamLocalStepScaler{
      *this, "zero-one-adam-local-step-scaler",
      llvm::cl::desc("-dsc-zero-one-adam's local-step-scaler"),
      llvm::cl::init(32678)};
  Option<int64_t> zeroOneAdamLocalStepClipper{
      *this, "zero-one-adam-local-step-clipper",
      llvm::cl::desc("-dsc-zero-one-adam's local-step-clipper"),
      llvm::cl::init(16)};
  Option<int64_t> zeroStage{
      *this, "zero-stage",
      llvm::cl::desc("Run -dsc-zero after everything else with this stage "
                     "(0: not at all)"),
      llvm::cl::init(0)};
  Option<int64_t> zeroPersistenceThreshold{
      *this, "zero-persistence-threshold",
      llvm::cl::desc("-dsc-zero's persistence-threshold (stage 3: "
                     "parameters of fewer elements stay whole)"),
      llvm::cl::init(0)};
  Option<int64_t> reduceBucketElements{
      *this, "reduce-bucket-elements",
      llvm::cl::desc("-dsc-bucket-collectives' reduce-bucket-elements (it "
                     "runs last when this or allgather-bucket-elements is "
                     "> 0)"),
      llvm::cl::init(0)};
  Option<int64_t> allgatherBucketElements{
      *this, "allgather-bucket-elements",
      llvm::cl::desc("-dsc-bucket-collectives' allgather-bucket-elements"),
      llvm::cl::init(0)};
};

/// Adds the training pipeline to `pm` (anchored on builtin.module): the
/// fusions, -dsc-autodiff, -dsc-build-train-step, then -dsc-invertible,
/// -dsc-remat, -dsc-mixed-precision, -dsc-onebit-adam,
/// -dsc-zero-one-adam, -dsc-zero and -dsc-bucket-collectives as `options`
/// ask. dsc-run compiles
/// with it; dsc-opt registers it as --dsc-train-pipeline.
void buildTrainingPipeline(OpPassManager &pm,
                           const TrainingPipelineOptions &options);

/// Registers buildTrainingPipeline as `--dsc-train-pipeline`.
void registerTrainingPipeline();

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PASSES_H
