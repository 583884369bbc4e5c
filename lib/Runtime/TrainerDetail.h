//===- TrainerDetail.h - Helpers the Trainer's files share ------*- C++ -*-===//
//
// Internal to lib/Runtime: the Trainer's member functions live in
// Trainer.cpp (the step), TrainerWeights.cpp, TrainerCheckpoint.cpp,
// TrainerPipeline.cpp and Adapters.cpp; these helpers serve several.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_TRAINERDETAIL_H
#define DSC_LIB_RUNTIME_TRAINERDETAIL_H

#include "dsc/Program/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dsc::rt::detail {

/// "[128, 32]", as messages about weight files print shapes (rt::shapeStr
/// prints the runtime's "[128,32]").
std::string spacedShape(const std::vector<int64_t> &shape);
/// What non-finite values an f32 buffer holds (other dtypes hold none):
/// NaN if any, else Inf if any.
enum class NonFinite { None, Inf, NaN };
NonFinite nonFiniteIn(DType dtype, const void *data, size_t bytes);
/// Whether every element of a buffer is finite.
inline bool allFinite(DType dtype, const void *data, size_t bytes) {
  return nonFiniteIn(dtype, data, bytes) == NonFinite::None;
}

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_TRAINERDETAIL_H
