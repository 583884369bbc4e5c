//===- FourBitLayout.h - Where a 4-bit quantized tensor's parts lie -*- C++ -*-===//
//
// The byte layout of one tensor quantized to 4 bits (QLoRA's frozen
// weights; lib/Kernels/Quantized/FourBit.h quantizes and dequantizes):
// header-only arithmetic shared by the dialect's verifiers, the
// instruction checks, the kernels and the weight loader. One quantized
// tensor of n elements is one byte buffer (the `blob`):
//   double_quant = false:  absmax   f32[blocks]
//                          codes    u8[ceil(n / 2)]
//   double_quant = true:   offset   f32          (mean of the absmaxes)
//                          scales2  f32[ceil(blocks / 256)]
//                          qabsmax  u8[blocks]
//                          codes    u8[ceil(n / 2)]
// blocks = ceil(n / block). The f32 parts come first so that they are
// aligned.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_FOURBITLAYOUT_H
#define DSC_PROGRAM_FOURBITLAYOUT_H

#include <cstdint>
#include <string>

namespace dsc::quant {

/// NF4: bitsandbytes' 4-bit NormalFloat; FP4: its 4-bit float.
enum class FourBitFormat { NF4, FP4 };

/// "nf4" / "fp4"; false for anything else.
inline bool parseFourBitFormat(const std::string &s, FourBitFormat &f) {
  if (s == "nf4")
    f = FourBitFormat::NF4;
  else if (s == "fp4")
    f = FourBitFormat::FP4;
  else
    return false;
  return true;
}

/// Blocks of 256 absmaxes share one scale under double quantization
/// (bitsandbytes' blocksize of the nested quantization).
inline constexpr int64_t kNestedBlock = 256;

/// Where the parts of one quantized tensor lie in its blob.
struct FourBitLayout {
  int64_t n = 0;          ///< elements
  int64_t block = 64;     ///< elements per absmax
  bool doubleQuant = false;
  int64_t blocks = 0;     ///< ceil(n / block)
  int64_t scales2 = 0;    ///< ceil(blocks / 256) under double quantization
  int64_t absmaxAt = 0;   ///< byte offset of absmax f32[] or qabsmax u8[]
  int64_t codesAt = 0;    ///< byte offset of the codes
  int64_t bytes = 0;      ///< the blob's size

  static FourBitLayout of(int64_t n, int64_t block, bool doubleQuant) {
    FourBitLayout l;
    l.n = n;
    l.block = block;
    l.doubleQuant = doubleQuant;
    l.blocks = (n + block - 1) / block;
    if (doubleQuant) {
      l.scales2 = (l.blocks + kNestedBlock - 1) / kNestedBlock;
      l.absmaxAt = 4 + 4 * l.scales2;
      l.codesAt = l.absmaxAt + l.blocks;
    } else {
      l.absmaxAt = 0;
      l.codesAt = 4 * l.blocks;
    }
    l.bytes = l.codesAt + (n + 1) / 2;
    return l;
  }
};

} // namespace dsc::quant

#endif // DSC_PROGRAM_FOURBITLAYOUT_H
