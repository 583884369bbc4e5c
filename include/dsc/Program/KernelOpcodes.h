//===- KernelOpcodes.h - Each kernel family's opcodes as an enum -*- C++ -*-===//
//
// Ops.def gives every opcode one OpFamily; this header says which kernel
// family runs each OpFamily (the DSC_FAMILY_<OpFamily> lines below, the
// only place that says it) and turns that into one enum per kernel family
// (ElementwiseOpcode, NormsOpcode, ...), holding exactly the family's
// opcodes under their Opcode names, `asFamily<FamilyOpcode>(op)`
// converting an Opcode into it, and each opcode's KernelFamily
// (OpInfo::kernels).
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

// The kernel family of each OpFamily. An OpFamily missing here does not
// compile (its rows expand to an undefined DSC_FAMILY_ macro).
#define DSC_FAMILY_Init(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Copy(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Convert(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Resize(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Add(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_ReduceTo(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Gelu(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Dropout(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Bias(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Heads(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_ConcatSplit(Name) DSC_IN(Elementwise, Name)
#define DSC_FAMILY_Norm(Name) DSC_IN(Norms, Name)
#define DSC_FAMILY_NormGrad(Name) DSC_IN(Norms, Name)
#define DSC_FAMILY_NormGradFromOutput(Name) DSC_IN(Norms, Name)
#define DSC_FAMILY_ResidualNorm(Name) DSC_IN(Norms, Name)
#define DSC_FAMILY_Softmax(Name) DSC_IN(Attention, Name)
#define DSC_FAMILY_Attention(Name) DSC_IN(Attention, Name)
#define DSC_FAMILY_Embedding(Name) DSC_IN(EmbeddingLoss, Name)
#define DSC_FAMILY_CrossEntropy(Name) DSC_IN(EmbeddingLoss, Name)
#define DSC_FAMILY_TokenMask(Name) DSC_IN(EmbeddingLoss, Name)
#define DSC_FAMILY_Optimizer(Name) DSC_IN(Optimizers, Name)
#define DSC_FAMILY_PerTensorOptimizer(Name) DSC_IN(Optimizers, Name)
#define DSC_FAMILY_Scalar(Name) DSC_IN(Optimizers, Name)
#define DSC_FAMILY_CompressedOptimizer(Name) DSC_IN(Optimizers, Name)
#define DSC_FAMILY_Linear(Name) DSC_IN(Gemm, Name)
#define DSC_FAMILY_BatchMatmul(Name) DSC_IN(Gemm, Name)
#define DSC_FAMILY_Collective(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_Transfer(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_Shard(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_VocabEmbedding(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_VocabCrossEntropy(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_ExpertExchange(Name) DSC_IN(Collective, Name)
#define DSC_FAMILY_Compression(Name) DSC_IN(Compression, Name)
#define DSC_FAMILY_Pointwise(Name) DSC_IN(Gated, Name)
#define DSC_FAMILY_RowGate(Name) DSC_IN(Gated, Name)
#define DSC_FAMILY_Rotary(Name) DSC_IN(Rotary, Name)
#define DSC_FAMILY_RepeatKv(Name) DSC_IN(Rotary, Name)
#define DSC_FAMILY_FourBitLinear(Name) DSC_IN(Quantized, Name)
#define DSC_FAMILY_Moe(Name) DSC_IN(Moe, Name)

// DSC_IN(KernelFamily, Name): while a family's enum is written, Name for
// that family's opcodes and nothing for the others'.
#define DSC_IN(Kernels, Name) DSC_KERNELS_##Kernels(Name)
#define DSC_FAMILY_OP(Name, MlirOp, Family, ...) DSC_FAMILY_##Family(Name)

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
#undef DSC_KERNELS_Moe
#define DSC_KERNELS_Moe(Name)

namespace detail {
/// Each opcode's kernel family, in Opcode order.
#undef DSC_IN
#define DSC_IN(Kernels, Name) KernelFamily::Kernels,
#define DSC_OP DSC_FAMILY_OP
inline constexpr KernelFamily kKernelsOf[] = {
#include "dsc/Program/Ops.def"
};
} // namespace detail

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
#undef DSC_IN
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
