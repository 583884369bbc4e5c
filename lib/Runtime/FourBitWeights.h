//===- FourBitWeights.h - 4-bit parameters to and from f32 ------*- C++ -*-===//
//
// QLoRA's frozen weights (Buffer::fourBit) as the runtime handles them: the
// full-precision weight a file holds or the initialiser draws, quantized
// into the buffer's bytes (lib/Kernels/Quantized/FourBit.h), and those
// bytes widened back for an exported merge.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_FOURBITWEIGHTS_H
#define DSC_LIB_RUNTIME_FOURBITWEIGHTS_H

#include "dsc/Program/Program.h"

#include <vector>

namespace dsc::rt {

/// The bytes of `w` (rows * cols f32) stored as `q` says.
std::vector<char> quantizeWeight(const FourBitStorage &q, const float *w);

/// The rows * cols f32 values of the bytes `blob` (q.layout().bytes).
std::vector<float> dequantizeWeight(const FourBitStorage &q, const char *blob);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_FOURBITWEIGHTS_H
