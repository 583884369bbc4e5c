//===- FlopsProfile.h - dsc-run train's flops_profiler -----------*- C++ -*-===//
//
// DeepSpeed's flops_profiler section, answered from the compiler: the
// imported model's forward FLOPs per micro-batch (the CostOpInterface of
// its ops: a multiply-add counts 2), by op kind and by module, recorded on
// the module at compile time (dsc.flops_profile.*, carried into the
// Program's meta), and the measured time of the profiled step; dsc-run
// train prints the profile after that step.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_FLOPSPROFILE_H
#define DSC_TOOLS_DSCRUN_FLOPSPROFILE_H

#include "dsc/Frontend/Config.h"
#include "dsc/Runtime/Trainer.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>

namespace dsc {

/// Records the profile's settings and the imported model's forward costs
/// and parameters on `module` (before the training pipeline rewrites
/// @forward); nothing unless flops_profiler is enabled.
void annotateFlopsProfile(mlir::ModuleOp module, const TrainConfig &train);
/// After the pipeline: the FLOPs -dsc-remat recomputes per micro-step.
void annotateRecomputeFlops(mlir::ModuleOp module);

/// The profile a compiled step asks for.
class FlopsProfile {
public:
  /// None when the step was compiled without flops_profiler.
  static std::optional<FlopsProfile> of(const rt::Program &program);
  /// The 0-based index of the profiled step.
  int64_t step() const { return profileStep; }
  const std::string &outputFile() const { return output; }
  /// The profile of step `s` (the profiled one).
  std::string report(const rt::StepStats &s) const;

private:
  int64_t profileStep = 1, top = 1, depth = -1;
  bool detailed = true;
  double recomputeFactor = 0.0;
  std::string output;
  // What the compiled step says: its mesh and batch, the model's forward
  // FLOPs per micro-batch, parameters, recomputed FLOPs per micro-step and
  // the forward's costs by op kind and by module ("name=flops;...").
  rt::Mesh mesh;
  int64_t microBatch = 1, seqLen = 1, accumulation = 1;
  double forward = 0, params = 0, recompute = 0;
  std::string byOp, byModule;
};

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_FLOPSPROFILE_H
