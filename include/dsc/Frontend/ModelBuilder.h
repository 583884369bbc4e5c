//===- ModelBuilder.h - Model config -> dsc IR -----------------*- C++ -*-===//
//
// Imports a GPT-2, BERT or LLaMA-family architecture as
//   func.func @forward(params..., %input_ids: tensor<BxTxi32>,
//                      %targets: tensor<BxTxi32>) -> (loss, logits)
// in dsc ops. Every parameter argument carries #dsc.param with its Hugging
// Face name (as save_pretrained writes it), layout and init rule.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTEND_MODELBUILDER_H
#define DSC_FRONTEND_MODELBUILDER_H

#include "dsc/Frontend/Config.h"
#include "dsc/Frontend/SparseLayout.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <optional>

namespace dsc {

struct ImportOptions {
  int64_t microBatch = 1;
  int64_t seqLen = 0;
  double mlmProbability = 0.15; ///< BERT only
  int64_t maskTokenId = 103;    ///< BERT only
  /// Block-sparse attention: every layer's attention masks (and, fused,
  /// visits) only this layout's blocks (makeSparseLayout of the config's
  /// sparse_attention section for seqLen tokens and the query heads).
  std::optional<BlockLayout> attentionLayout;
  /// dsc.pad_token_id (< 0: none): tokens equal to it are padding, masked
  /// as attention keys, and not counted as labels.
  int64_t padTokenId = -1;
  /// Mixture of experts with token dropping (moe.drop_tokens): the most
  /// assignments of a micro-batch each expert takes
  /// (TrainConfig::moeCapacity); 0: dropless.
  int64_t moeCapacity = 0;
};

/// Builds the forward module. The configs must already be validated.
mlir::OwningOpRef<mlir::ModuleOp> importModel(mlir::MLIRContext &ctx,
                                              const ModelConfig &model,
                                              const ImportOptions &opts);

/// Module attribute names recording what the runtime driver needs.
inline constexpr const char *kMicroBatchAttr = "dsc.micro_batch";
inline constexpr const char *kSeqLenAttr = "dsc.seq_len";
inline constexpr const char *kVocabSizeAttr = "dsc.vocab_size";
inline constexpr const char *kModelTypeAttr = "dsc.model_type";
/// How Hugging Face weight files name the model's tensors, for the
/// runtime's loader (which spells no model's names itself): the base-model
/// prefix a file may leave out of a parameter's name ("transformer."), the
/// tensors a file may hold under their own name though dsc ties them to a
/// parameter ("lm_head.weight=transformer.wte.weight", comma-separated),
/// and a NameRegex of tensors a file may hold that are not weights dsc
/// uses (GPT-2's causal-mask buffers, BERT's pooler).
inline constexpr const char *kHfOptionalPrefixAttr = "dsc.hf_optional_prefix";
inline constexpr const char *kHfTiedTensorsAttr = "dsc.hf_tied_tensors";
inline constexpr const char *kHfUnusedTensorsAttr = "dsc.hf_unused_tensors";

} // namespace dsc

#endif // DSC_FRONTEND_MODELBUILDER_H
