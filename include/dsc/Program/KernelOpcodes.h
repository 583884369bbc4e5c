//===- KernelOpcodes.h - Each kernel family's opcodes as an enum -*- C++ -*-===//
//
// Ops.def assigns every opcode one KernelFamily. This header turns that
// column into one enum per family (ElementwiseOpcode, NormsOpcode, ...),
// holding exactly the family's opcodes under their Opcode names, and
// `asFamily<FamilyOpcode>(op)` converting an Opcode into it.
//
// A family's kernels (lib/Kernels/<Family>) switch over their own enum
// with no `default:`, so -Werror=switch makes an opcode added to a family
// without a kernel, or moved to another family, a compile error in the
// family that has to run it. Include it only from kernel families: it is
// the one place that needs the per-family split.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_KERNELOPCODES_H
#define DSC_PROGRAM_KERNELOPCODES_H

#include "dsc/Program/Program.h"

#include <array>
#include <string>

namespace dsc::rt {

// Ops.def's rows expand to DSC_KERNELS_<Family>(Name): empty for every
// family but the one whose enum is being written.
#define DSC_KERNELS_Elementwise(Name)
#define DSC_KERNELS_Norms(Name)
#define DSC_KERNELS_Attention(Name)
#define DSC_KERNELS_EmbeddingLoss(Name)
#define DSC_KERNELS_Optimizers(Name)
#define DSC_KERNELS_Gemm(Name)
#define DSC_KERNELS_Collective(Name)
#define DSC_KERNELS_Compression(Name)
#define DSC_KERNELS_Gated(Name)
#define DSC_KERNELS_Rotary(Name)
#define DSC_KERNELS_Quantized(Name)
#define DSC_KERNELS_Moe(Name)

#define DSC_FAMILY_OP(Name, MlirOp, Family, Kernels, ...)                      \
  DSC_KERNELS_##Kernels(Name)

#undef DSC_KERNELS_Elementwise
#define DSC_KERNELS_Elementwise(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class ElementwiseOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Elementwise
#define DSC_KERNELS_Elementwise(Name)

#undef DSC_KERNELS_Norms
#define DSC_KERNELS_Norms(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class NormsOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Norms
#define DSC_KERNELS_Norms(Name)

#undef DSC_KERNELS_Attention
#define DSC_KERNELS_Attention(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class AttentionOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Attention
#define DSC_KERNELS_Attention(Name)

#undef DSC_KERNELS_EmbeddingLoss
#define DSC_KERNELS_EmbeddingLoss(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class EmbeddingLossOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_EmbeddingLoss
#define DSC_KERNELS_EmbeddingLoss(Name)

#undef DSC_KERNELS_Optimizers
#define DSC_KERNELS_Optimizers(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class OptimizersOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Optimizers
#define DSC_KERNELS_Optimizers(Name)

#undef DSC_KERNELS_Gemm
#define DSC_KERNELS_Gemm(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class GemmOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Gemm
#define DSC_KERNELS_Gemm(Name)

#undef DSC_KERNELS_Collective
#define DSC_KERNELS_Collective(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class CollectiveOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Collective
#define DSC_KERNELS_Collective(Name)

#undef DSC_KERNELS_Compression
#define DSC_KERNELS_Compression(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class CompressionOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Compression
#define DSC_KERNELS_Compression(Name)

#undef DSC_KERNELS_Gated
#define DSC_KERNELS_Gated(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class GatedOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Gated
#define DSC_KERNELS_Gated(Name)

#undef DSC_KERNELS_Rotary
#define DSC_KERNELS_Rotary(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class RotaryOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Rotary
#define DSC_KERNELS_Rotary(Name)

#undef DSC_KERNELS_Quantized
#define DSC_KERNELS_Quantized(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class QuantizedOpcode {
#include "dsc/Program/Ops.def"
};
#undef DSC_KERNELS_Quantized
#define DSC_KERNELS_Quantized(Name)

#undef DSC_KERNELS_Moe
#define DSC_KERNELS_Moe(Name) Name,
#define DSC_OP DSC_FAMILY_OP
enum class MoeOpcode {
#include "dsc/Program/Ops.def"
};

#undef DSC_KERNELS_Elementwise
#undef DSC_KERNELS_Norms
#undef DSC_KERNELS_Attention
#undef DSC_KERNELS_EmbeddingLoss
#undef DSC_KERNELS_Optimizers
#undef DSC_KERNELS_Gemm
#undef DSC_KERNELS_Collective
#undef DSC_KERNELS_Compression
#undef DSC_KERNELS_Gated
#undef DSC_KERNELS_Rotary
#undef DSC_KERNELS_Quantized
#undef DSC_KERNELS_Moe
#undef DSC_FAMILY_OP

/// The KernelFamily of each family enum.
template <class FamilyOpcode> struct FamilyOf;
#define DSC_FAMILY_OF(Family)                                                  \
  template <> struct FamilyOf<Family##Opcode> {                                \
    static constexpr KernelFamily value = KernelFamily::Family;                \
  };
DSC_FAMILY_OF(Elementwise)
DSC_FAMILY_OF(Norms)
DSC_FAMILY_OF(Attention)
DSC_FAMILY_OF(EmbeddingLoss)
DSC_FAMILY_OF(Optimizers)
DSC_FAMILY_OF(Gemm)
DSC_FAMILY_OF(Collective)
DSC_FAMILY_OF(Compression)
DSC_FAMILY_OF(Gated)
DSC_FAMILY_OF(Rotary)
DSC_FAMILY_OF(Quantized)
DSC_FAMILY_OF(Moe)
#undef DSC_FAMILY_OF

namespace detail {
inline constexpr KernelFamily kKernelsOf[] = {
#define DSC_OP(Name, MlirOp, Family, Kernels, ...) KernelFamily::Kernels,
#include "dsc/Program/Ops.def"
};
constexpr size_t kNumOpcodes = sizeof(kKernelsOf) / sizeof(kKernelsOf[0]);

/// Each opcode's position among its family's opcodes: the value of its
/// enumerator in the family enum (both follow Ops.def's order).
inline constexpr std::array<int, kNumOpcodes> kIndexInFamily = [] {
  std::array<int, kNumOpcodes> index{};
  std::array<int, 64> seen{};
  for (size_t i = 0; i < kNumOpcodes; ++i)
    index[i] = seen[size_t(kKernelsOf[i])]++;
  return index;
}();

[[noreturn]] void notInFamily(Opcode op, KernelFamily family);
} // namespace detail

/// `op` as its family's enumerator; an internal error (which the backends
/// never reach: they dispatch by Ops.def's family) when `op` is another
/// family's.
template <class FamilyOpcode> FamilyOpcode asFamily(Opcode op) {
  constexpr KernelFamily family = FamilyOf<FamilyOpcode>::value;
  if (detail::kKernelsOf[size_t(op)] != family)
    detail::notInFamily(op, family);
  return FamilyOpcode(detail::kIndexInFamily[size_t(op)]);
}

} // namespace dsc::rt

#endif // DSC_PROGRAM_KERNELOPCODES_H
