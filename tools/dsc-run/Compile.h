//===- Compile.h - dsc-run's compiler half ---------------------*- C++ -*-===//
//
// Config files -> dsc IR -> training-step passes -> rt::Program, and the
// same from a saved step.mlir. MLIR diagnostics become rt::Error messages so
// dsc-run reports them on one line.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_COMPILE_H
#define DSC_TOOLS_DSCRUN_COMPILE_H

#include "dsc/Frontend/Config.h"
#include "dsc/Runtime/Program.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

namespace dsc {

/// Imports the model as @forward; with `buildStep`, also runs autodiff and
/// build-train-step with the optimizer, schedule, clipping and accumulation
/// of `train`.
mlir::OwningOpRef<mlir::ModuleOp> compileStep(mlir::MLIRContext &ctx,
                                              const ModelConfig &model,
                                              const TrainConfig &train,
                                              bool buildStep = true);

/// Parses and verifies a step written by `dsc-run compile` or dsc-opt.
mlir::OwningOpRef<mlir::ModuleOp> loadStep(mlir::MLIRContext &ctx,
                                           const std::string &path);

rt::Program lowerStep(mlir::ModuleOp module);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_COMPILE_H
