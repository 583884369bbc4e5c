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

#include <optional>
#include <string>
#include <vector>

namespace mlir::dsc {

//===----------------------------------------------------------------------===//
// Choices named by pass options (their spellings are the `llvm::cl::values`
// of Passes.td, so a bad value is rejected by the option parser). Choices
// that ops carry as well are the dialect's enums (LrScheduleKind,
// WarmupType, HalfFormat).
//===----------------------------------------------------------------------===//

/// -dsc-build-train-step `optimizer`.
enum class TrainStepOptimizer { Adam, AdamW, Lamb, Sgd, Adam8bit, AdamW8bit, Adafactor };
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

/// The option-less passes of the training pipeline, each run or not.
struct TrainingSwitches {
  // Forward-graph fusions, in the order the pipeline runs them.
  bool fuseQkv = false;
  bool fuseBiasGelu = false;
  bool fuseSwiglu = false;
  bool fuseBiasDropoutAdd = false;
  /// Fuses the dsc.bias_dropout_add that fuseBiasDropoutAdd makes.
  bool fuseResidualLayerNorm = false;
  bool fuseResidualRmsNorm = false;
  bool fuseAttention = false;
  /// After -dsc-fuse-attention, so it fuses only the attentions that one
  /// left.
  bool fuseSoftmaxDropout = false;
  /// -dsc-invertible (normalize_invertible), after the step is built.
  bool invertible = false;
  /// -dsc-fuse-cross-entropy, last.
  bool fuseCrossEntropy = false;
};

/// -dsc-lora's options with the storage of their target-modules list
/// (DscLoraOptions::targetModules is a reference).
struct TrainingLora {
  DscLoraOptions options;
  std::vector<std::string> targetModules;
};

/// -dsc-quantize-frozen's options with the storage of their skip-modules
/// list.
struct TrainingQuantizeFrozen {
  DscQuantizeFrozenOptions options;
  std::vector<std::string> skipModules;
};

/// The training pipeline as dsc-run fills it from the configs: every pass
/// with its own generated options (Passes.td documents them); an absent
/// optional pass does not run. -dsc-tensor-parallel, -dsc-pipeline-stage,
/// -dsc-autodiff, -dsc-build-train-step and -dsc-split-stage-step always
/// run (each has nothing to do where its mesh axis or stage is absent).
struct TrainingPipeline {
  TrainingSwitches switches;
  std::optional<TrainingLora> lora;
  std::optional<TrainingQuantizeFrozen> quantizeFrozen;
  std::optional<DscPadVocabularyOptions> padVocabulary;
  DscPipelineStageOptions pipelineStage;
  DscBuildTrainStepOptions buildTrainStep;
  std::optional<DscRematOptions> remat;
  std::optional<DscMixedPrecisionOptions> mixedPrecision;
  std::optional<DscOneBitAdamOptions> onebitAdam;
  std::optional<DscOneBitLambOptions> onebitLamb;
  std::optional<DscZeroOneAdamOptions> zeroOneAdam;
  std::optional<DscZeroOptions> zero;
  /// ZeRO-Offload, right after -dsc-zero.
  std::optional<DscOffloadOptimizerOptions> offloadOptimizer;
  std::optional<DscOffloadNvmeOptions> offloadNvme;
  std::optional<DscBucketCollectivesOptions> bucketCollectives;
  std::optional<DscOverlapCollectivesOptions> overlapCollectives;
};

/// Adds the training pipeline to `pm` (anchored on builtin.module):
/// -dsc-tensor-parallel, -dsc-lora, -dsc-quantize-frozen,
/// -dsc-pad-vocabulary, -dsc-pipeline-stage, the fusions,
/// -dsc-autodiff, -dsc-build-train-step, then -dsc-invertible, -dsc-remat,
/// -dsc-mixed-precision, -dsc-onebit-adam, -dsc-onebit-lamb,
/// -dsc-zero-one-adam, -dsc-zero, -dsc-offload-optimizer,
/// -dsc-bucket-collectives, -dsc-overlap-collectives, -dsc-split-stage-step
/// and -dsc-fuse-cross-entropy, as `pipeline` asks.
void buildTrainingPipeline(OpPassManager &pm, const TrainingPipeline &pipeline);

/// `--dsc-train-pipeline`'s options (dsc-opt): a pass with options runs
/// when its option is given, with that text as the pass's own options
/// (`zero={stage=2}`, `build-train-step={optimizer=lamb lr=0.01}`), which
/// the pass parses; the option-less passes are switches.
struct TrainingPipelineOptions
    : public PassPipelineOptions<TrainingPipelineOptions> {
  Option<std::string> lora{*this, "lora",
                           llvm::cl::desc("Run -dsc-lora with these options")};
  Option<std::string> quantizeFrozen{
      *this, "quantize-frozen",
      llvm::cl::desc("Run -dsc-quantize-frozen with these options")};
  Option<std::string> padVocabulary{
      *this, "pad-vocabulary",
      llvm::cl::desc("Run -dsc-pad-vocabulary with these options")};
  Option<std::string> pipelineStage{
      *this, "pipeline-stage",
      llvm::cl::desc("-dsc-pipeline-stage's options")};
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
      llvm::cl::desc("Run -dsc-fuse-residual-layer-norm"),
      llvm::cl::init(false)};
  Option<bool> fuseResidualRmsNorm{
      *this, "fuse-residual-rms-norm",
      llvm::cl::desc("Run -dsc-fuse-residual-rms-norm"),
      llvm::cl::init(false)};
  Option<bool> fuseAttention{*this, "fuse-attention",
                             llvm::cl::desc("Run -dsc-fuse-attention"),
                             llvm::cl::init(false)};
  Option<bool> fuseSoftmaxDropout{
      *this, "fuse-softmax-dropout",
      llvm::cl::desc("Run -dsc-fuse-softmax-dropout"), llvm::cl::init(false)};
  Option<std::string> buildTrainStep{
      *this, "build-train-step",
      llvm::cl::desc("-dsc-build-train-step's options")};
  Option<bool> invertible{*this, "invertible",
                          llvm::cl::desc("Run -dsc-invertible"),
                          llvm::cl::init(false)};
  Option<std::string> remat{*this, "remat",
                            llvm::cl::desc("Run -dsc-remat with these options")};
  Option<std::string> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("Run -dsc-mixed-precision with these options")};
  Option<std::string> onebitAdam{
      *this, "onebit-adam",
      llvm::cl::desc("Run -dsc-onebit-adam with these options")};
  Option<std::string> onebitLamb{
      *this, "onebit-lamb",
      llvm::cl::desc("Run -dsc-onebit-lamb with these options")};
  Option<std::string> zeroOneAdam{
      *this, "zero-one-adam",
      llvm::cl::desc("Run -dsc-zero-one-adam with these options")};
  Option<std::string> zero{*this, "zero",
                           llvm::cl::desc("Run -dsc-zero with these options")};
  Option<std::string> offloadNvme{
      *this, "offload-nvme",
      llvm::cl::desc("Run -dsc-offload-nvme (after -dsc-offload-optimizer) "
                     "with these options")};
  Option<std::string> offloadOptimizer{
      *this, "offload-optimizer",
      llvm::cl::desc("Run -dsc-offload-optimizer (after -dsc-zero) with these "
                     "options")};
  Option<std::string> bucketCollectives{
      *this, "bucket-collectives",
      llvm::cl::desc("Run -dsc-bucket-collectives with these options")};
  Option<std::string> overlapCollectives{
      *this, "overlap-collectives",
      llvm::cl::desc("Run -dsc-overlap-collectives with these options")};
  Option<bool> fuseCrossEntropy{
      *this, "fuse-cross-entropy",
      llvm::cl::desc("Run -dsc-fuse-cross-entropy (last)"),
      llvm::cl::init(false)};
};

/// Registers buildTrainingPipeline as `--dsc-train-pipeline`.
void registerTrainingPipeline();

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PASSES_H
