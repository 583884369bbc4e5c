//===- TrainPipeline.cpp - The --dsc-train-pipeline pass pipeline ---------===//
//
// forward graph -> training step: autodiff, then build-train-step.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::dsc;

void mlir::dsc::buildTrainPipeline(OpPassManager &pm,
                                   const TrainPipelineOptions &opts) {
  pm.addPass(createDscAutodiff());
  DscBuildTrainStepOptions step;
  step.optimizer = opts.optimizer;
  step.lr = opts.lr;
  step.gradAccum = opts.gradAccum;
  step.gradClip = opts.gradClip;
  pm.addPass(createDscBuildTrainStep(step));
}

void mlir::dsc::registerTrainPipeline() {
  PassPipelineRegistration<TrainPipelineOptions>(
      "dsc-train-pipeline",
      "Build the training step: -dsc-autodiff, -dsc-build-train-step",
      buildTrainPipeline);
}
