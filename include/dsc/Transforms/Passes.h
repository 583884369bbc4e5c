//===- Passes.h - dsc passes -----------------------------------*- C++ -*-===//
#ifndef DSC_TRANSFORMS_PASSES_H
#define DSC_TRANSFORMS_PASSES_H

#include "dsc/Dialect/DscOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::dsc {

#define GEN_PASS_DECL
#include "dsc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "dsc/Transforms/Passes.h.inc"

/// Options of `--dsc-train-pipeline`: autodiff then build-train-step.
struct TrainPipelineOptions
    : public PassPipelineOptions<TrainPipelineOptions> {
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adam | adamw | lamb | sgd"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Base learning rate"),
                    llvm::cl::init(1e-3)};
  Option<int64_t> gradAccum{*this, "grad-accum",
                            llvm::cl::desc("Micro-batches per step"),
                            llvm::cl::init(1)};
  Option<double> gradClip{*this, "grad-clip",
                          llvm::cl::desc("Global-norm clipping (0: off)"),
                          llvm::cl::init(0.0)};
};

void buildTrainPipeline(OpPassManager &pm, const TrainPipelineOptions &opts);
void registerTrainPipeline();

} // namespace mlir::dsc

#endif // DSC_TRANSFORMS_PASSES_H
