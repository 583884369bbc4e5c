//===- VocabularyHead.h - The LM head and its vocabulary tables -*- C++ -*-===//
//
// Internal to lib/Transforms: what -dsc-tensor-parallel slices and
// -dsc-pad-vocabulary pads, found in @forward the same way for both.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_TRANSFORMS_VOCABULARYHEAD_H
#define DSC_LIB_TRANSFORMS_VOCABULARYHEAD_H

#include "dsc/Dialect/DscOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <optional>

namespace mlir::dsc {

/// The parameter argument of `fn` that `v` is, or null.
BlockArgument paramArg(func::FuncOp fn, Value v);

/// The loss's LM head: the one dsc.cross_entropy's logits from a [V, C]
/// parameter (transpose_w) whose every other use is an embedding lookup,
/// and its bias, if any, a parameter used only there.
struct VocabularyHead {
  CrossEntropyOp loss;
  LinearOp head;
  int64_t vocab = 0;
  BlockArgument weight, bias; ///< bias: null without one
  /// Every table of V rows: the head's weight first (tied or not), then
  /// each other parameter of V rows used only by embedding lookups
  /// (LLaMA's untied embed_tokens).
  SmallVector<BlockArgument> tables;
};

/// `forward`'s head, or nothing without one (no loss, several, a head that
/// is not a plain linear of a parameter: LoRA's, a 4-bit one).
std::optional<VocabularyHead> findVocabularyHead(func::FuncOp forward);

} // namespace mlir::dsc

#endif // DSC_LIB_TRANSFORMS_VOCABULARYHEAD_H
