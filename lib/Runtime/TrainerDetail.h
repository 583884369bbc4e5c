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
/// What non-finite values a float buffer (f32, f16, bf16) holds (other
/// dtypes hold none):
/// NaN if any, else Inf if any.
enum class NonFinite { None, Inf, NaN };
NonFinite nonFiniteIn(DType dtype, const void *data, size_t bytes);
/// Whether every element of a buffer is finite.
inline bool allFinite(DType dtype, const void *data, size_t bytes) {
  return nonFiniteIn(dtype, data, bytes) == NonFinite::None;
}

/// Whether a file tensor can fill a buffer of dtype `want`: the same dtype,
/// or an F32 tensor for a 16-bit buffer (the reader widens F16 and BF16
/// tensors to F32; LoRA's frozen weights under mixed precision are 16-bit
/// buffers).
inline bool storableAs(DType have, DType want) {
  return have == want || (have == DType::F32 &&
                          (want == DType::F16 || want == DType::BF16));
}
/// The bytes of a float tensor of dtype `have` in dtype `want` (F32 and the
/// 16-bit dtypes): widened exactly, or narrowed to nearest even (exact for
/// values read from a 16-bit file).
std::vector<char> bytesAs(DType have, const std::vector<char> &bytes,
                          DType want);

} // namespace dsc::rt::detail

#endif // DSC_LIB_RUNTIME_TRAINERDETAIL_H
