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
/// Whether every element of an f32 buffer is finite (other dtypes are).
bool allFinite(DType dtype, const void *data, size_t bytes);

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_TRAINERDETAIL_H
