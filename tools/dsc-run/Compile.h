//===- Compile.h - dsc-run's compiler half ---------------------*- C++ -*-===//
//
// Config files -> dsc IR -> training-step passes -> rt::Program, and the
// same from a saved step.mlir. MLIR diagnostics become dsc::Error messages so
// dsc-run reports them on one line.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_COMPILE_H
#define DSC_TOOLS_DSCRUN_COMPILE_H

#include "dsc/Frontend/Config.h"
#include "dsc/Program/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace dsc {

/// Imports the model as @forward, with the module attributes dsc.seed,
/// dsc.steps_per_print and dsc.mesh (data parallel over train.worldSize
/// ranks) from `train`; with `buildStep`, also runs the training
/// pipeline (mlir::dsc::buildTrainingPipeline) with the options `train` asks
/// for. `pipeline`, if given, receives that pipeline as text
/// (`builtin.module(...)`, as --pass-pipeline takes it), whether or not it
/// runs: applied to the imported module it gives the step.
/// A pipelined job's ranks each compile their own stage, `pipelineStage`
/// (0 .. pipeline.stages - 1). `returnLogits`: @micro_step also returns
/// the logits (`dsc-run inspect`; training never reads them).
mlir::OwningOpRef<mlir::ModuleOp>
compileStep(mlir::MLIRContext &ctx, const ModelConfig &model,
            const TrainConfig &train, bool buildStep = true,
            std::string *pipeline = nullptr, int64_t pipelineStage = 0,
            bool returnLogits = false);

/// Parses and verifies a step written by `dsc-run compile` or dsc-opt.
mlir::OwningOpRef<mlir::ModuleOp> loadStep(mlir::MLIRContext &ctx,
                                           const std::string &path);

rt::Program lowerStep(mlir::ModuleOp module);

/// Block-sparse attention in the step's @micro_step: the scores (element
/// pairs not masked, over batch rows, heads and layers) its forward
/// attention attends with the block layouts, and dense (causal where the
/// op is); {0, 0} when no op has a layout.
std::pair<int64_t, int64_t> attendedScores(mlir::ModuleOp module);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_COMPILE_H
