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
#include "dsc/Runtime/IO.h"

#include <set>
#include <string>
#include <vector>

namespace dsc::rt {

/// The bytes of `w` (rows * cols f32, in the parameter's layout:
/// q.fileShape()) stored as `q` says.
std::vector<char> quantizeWeight(const FourBitStorage &q, const float *w);

/// The rows * cols f32 values of the bytes `blob` (q.layout().bytes), in
/// the parameter's layout (q.fileShape()).
std::vector<float> dequantizeWeight(const FourBitStorage &q, const char *blob);

/// Whether `file` holds the weight `name` as bitsandbytes saves a 4-bit
/// weight (its packed codes beside <name>.quant_state.bitsandbytes__nf4 or
/// __fp4, as transformers' save_pretrained writes a model loaded with
/// load_in_4bit).
bool isBitsandbytesWeight(const Safetensors &file, const std::string &name);

/// The bytes of the 4-bit weight `name` that bitsandbytes saved in `file`
/// (its codes, absmaxes and quant state), refused with an error naming
/// `path` where they are not what `q` stores (format, block size, double
/// quantization, shape, code books); adds the names of the tensors it read
/// to `used`.
std::vector<char> fromBitsandbytes(const FourBitStorage &q,
                                   const Safetensors &file,
                                   const std::string &name,
                                   const std::string &path,
                                   std::set<std::string> &used);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_FOURBITWEIGHTS_H
