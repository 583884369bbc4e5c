//===- ZeroOneAdam.cpp - 0/1 Adam's step policy ---------------------------===//

#include "dsc/Runtime/ZeroOneAdam.h"

#include "dsc/Program/Program.h"

#include <algorithm>
#include <string>

namespace dsc::rt {

ZeroOneAdamPolicy::ZeroOneAdamPolicy(int64_t varFreezeStep,
                                     int64_t varUpdateScaler,
                                     int64_t localStepScaler,
                                     int64_t localStepClipper)
    : varFreeze(varFreezeStep), varScaler(varUpdateScaler),
      localScaler(localStepScaler), localClipper(localStepClipper) {
  if (varFreeze < 0 || varScaler < 1 || localScaler < 1 || localClipper < 1)
    throw Error("0/1 Adam: var_freeze_step must be >= 0 and "
                "var_update_scaler, local_step_scaler and "
                "local_step_clipper >= 1");
}

ZeroOneAdamPolicy::Stage ZeroOneAdamPolicy::next(int64_t k) {
  if (k != taken + 1)
    throw Error("0/1 Adam: optimizer step " + std::to_string(k) +
                " out of order (expected " + std::to_string(taken + 1) + ")");
  taken = k;
  // DeepSpeed counts its first, initialising call as step 1.
  const int64_t s = k + 1;
  if (k <= varFreeze) {
    const bool full = s % varInterval == 0;
    if (full && ++varCounter == varScaler) {
      varCounter = 0;
      varInterval *= 2;
    }
    return full ? Stage::Full : Stage::OnebitGradient;
  }
  const bool sync = s % localInterval == 0;
  if (++localCounter == localScaler) {
    localCounter = 0;
    localInterval = std::min(localClipper, localInterval * 2);
  }
  return sync ? Stage::Sync : Stage::Local;
}

const char *zeroOneStageFunction(ZeroOneAdamPolicy::Stage stage) {
  switch (stage) {
  case ZeroOneAdamPolicy::Stage::Full:
    return "apply_step";
  case ZeroOneAdamPolicy::Stage::OnebitGradient:
    return "apply_step_onebit";
  case ZeroOneAdamPolicy::Stage::Local:
    return "apply_step_local";
  case ZeroOneAdamPolicy::Stage::Sync:
    return "apply_step_sync";
  }
  return "apply_step";
}

} // namespace dsc::rt
