//===- Checkpoints.h - dsc-run train --checkpoint-every ---------*- C++ -*-===//
//
// Periodic checkpoints, so a long run killed at any moment loses at most N
// steps: after every N-th step the trainer's checkpoint is written to the
// --checkpoint path with the step count in its name (ck.safetensors ->
// ck-step120.safetensors), and only the newest K of those are kept.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUN_CHECKPOINTS_H
#define DSC_RUN_CHECKPOINTS_H

#include "dsc/Runtime/Trainer.h"

#include <string>

namespace dsc {

class PeriodicCheckpoints {
public:
  PeriodicCheckpoints(std::string path, int64_t every, int64_t keep);

  /// Writes a checkpoint when the steps taken are a multiple of `every`,
  /// then removes all but the newest `keep` periodic checkpoints of `path`
  /// up to this step (those of later steps belong to another run and are
  /// left alone).
  void afterStep(const rt::Trainer &trainer) const;

  /// The periodic checkpoint written after `steps` steps.
  std::string pathAfter(int64_t steps) const;

private:
  void removeOlder(int64_t newest) const;

  std::string stem, extension; ///< "dir/ck" and ".safetensors"
  int64_t every, keep;
};

} // namespace dsc

#endif // DSC_RUN_CHECKPOINTS_H
