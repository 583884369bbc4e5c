//===- ZeroOneAdam.h - 0/1 Adam's step policy -------------------*- C++ -*-===//
//
// DeepSpeed's ZeroOneAdam decides per optimizer step which kind of step to
// take, by counters in its Python code (zoadam.py): until var_freeze_step
// the variance is updated (with fully all-reduced gradients) only when the
// step count is a multiple of an interval that doubles after every
// var_update_scaler such updates, the other steps all-reduce 1-bit
// gradients; after it, the variance is frozen and the step count decides
// between local steps and synchronisations, whose interval doubles every
// local_step_scaler steps up to local_step_clipper. -dsc-zero-one-adam
// compiles the four kinds of step; this policy picks one.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_ZEROONEADAM_H
#define DSC_RUNTIME_ZEROONEADAM_H

#include <cstdint>

namespace dsc::rt {

class ZeroOneAdamPolicy {
public:
  enum class Stage {
    Full,           ///< @apply_step: all-reduced gradient, variance updated
    OnebitGradient, ///< @apply_step_onebit
    Local,          ///< @apply_step_local
    Sync,           ///< @apply_step_sync
  };
  ZeroOneAdamPolicy(int64_t varFreezeStep, int64_t varUpdateScaler,
                    int64_t localStepScaler, int64_t localStepClipper);

  /// The stage of optimizer step k (1-based), advancing the counters.
  /// Steps come in order; a resumed run starts a new policy and replays
  /// the steps it already took (the counters depend on k alone).
  Stage next(int64_t k);
  /// The optimizer step next() expects.
  int64_t expected() const { return taken + 1; }
  /// Whether step k is the first after the variance froze (DeepSpeed zeroes
  /// the compression errors then: they held gradients, now they hold
  /// accumulated updates).
  bool freezesAt(int64_t k) const { return k == varFreeze + 1; }

private:
  int64_t varFreeze, varScaler, localScaler, localClipper;
  int64_t varInterval = 1, varCounter = 0;
  int64_t localInterval = 1, localCounter = 0;
  int64_t taken = 0;
};

const char *zeroOneStageFunction(ZeroOneAdamPolicy::Stage stage);

} // namespace dsc::rt

#endif // DSC_RUNTIME_ZEROONEADAM_H
