//===- ValidateConfigs.cpp - model + training config checks ---------------===//
//
// Checks that need both the model config and the training config.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ConfigSections.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace dsc {
using namespace config_reader;

void validateConfigs(const ModelConfig &model, const TrainConfig &train) {
  // Mode dense is plain dense attention (no layout), whatever `attention`.
  if (train.sparseAttention.enabled &&
      train.sparseAttention.mode != SparsityMode::Dense) {
    // Causal language models need a causal layout; BERT attends both ways.
    const bool causal = model.type != ModelType::BERT;
    if (causal != train.sparseAttention.unidirectional)
      throw ConfigError(
          std::string("sparse_attention.attention: ") +
          (causal ? "this causal language model needs \"unidirectional\""
                  : "BERT attends both ways: it needs \"bidirectional\""));
  }
  if (model.fourBit.enabled) {
    if (!train.lora.enabled)
      throw ConfigError(
          "model config: quantization_config.load_in_4bit: 4-bit weights are "
          "frozen, so nothing would train; add a lora section (QLoRA) or "
          "--adapter");
    if (train.parallel.tensor > 1)
      throw ConfigError(
          "model config: quantization_config.load_in_4bit: 4-bit weights "
          "cannot be sliced over tensor_parallel.autotp_size " +
          std::to_string(train.parallel.tensor) +
          " ranks (their blocks of scales span whole rows); use ZeRO or "
          "pipeline stages");
  }
  bool gpt2 = model.type == ModelType::GPT2;
  const char *posKey = gpt2 ? "n_positions" : "max_position_embeddings";
  if (model.vocabSize <= 0 || model.maxPositions <= 0)
    throw ConfigError("model config: vocab_size and " + std::string(posKey) +
                      " must be positive");
  // Every dimension is bounded, but their products are not: refuse a step
  // whose buffers (parameters with gradients and Adam's two moments, each
  // layer's activations and attention scores, the logits) could not be
  // addressed, before building any IR. Doubles: no overflow here.
  const double d = double(model.hidden), V = double(model.vocabSize),
               L = double(model.numLayers), H = double(model.numHeads);
  const double ffn = double(model.intermediate ? model.intermediate
                                               : 4 * model.hidden);
  const double T = double(train.seqLen ? train.seqLen : model.maxPositions);
  const double B = double(train.microBatch);
  // LLaMA-family and Phi projections: separate q, k and v, no position
  // table (Phi's MLP has two matrices, as GPT-2's).
  const bool llama = model.type == ModelType::LLaMA;
  const bool rotaryModel = llama || model.type == ModelType::Phi;
  // Attention projections: q and o over the heads' width, k and v over the
  // key/value heads' (all four d * d without grouped-query attention).
  const double attnWidth = double(model.attentionWidth());
  const double kvWidth =
      rotaryModel ? double(model.numKvHeads * model.headDim) : attnWidth;
  // A mixture-of-experts layer holds E MLPs and a router, and runs K of
  // them per token.
  const double experts = double(std::max<int64_t>(1, model.numExperts)),
               perToken = double(std::max<int64_t>(1, model.expertsPerToken));
  const double mlpWidth =
      model.numExperts ? double(model.expertIntermediate) * experts +
                             double(model.sharedExpertIntermediate)
                       : ffn;
  const double params =
      (V * (model.tieEmbeddings ? 1 : 2) +
       (rotaryModel ? 0.0 : double(model.maxPositions))) * d +
      L * (2 * d * attnWidth + 2 * d * kvWidth +
           (llama ? 3 : 2) * d * std::max(mlpWidth, ffn) +
           (model.numExperts ? d * experts : 0.0));
  const double activations =
      L * B * T * (16 * d + (llama ? 4 : 2) * ffn * perToken + 3 * H * T);
  const double bytes = 4 * (4 * params + activations + 2 * B * T * V);
  if (bytes > kMaxStepBytes) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", bytes);
    throw ConfigError(
        std::string("the model and batch need about ") + text +
        " bytes per training step (" + (gpt2 ? "n_layer" : "num_hidden_layers") +
        " " + str(model.numLayers) + ", " + (gpt2 ? "n_embd" : "hidden_size") +
        " " + str(model.hidden) + ", vocab_size " + str(model.vocabSize) +
        ", sequence " + str(int64_t(T)) + ", micro-batch " +
        str(train.microBatch) + "), over dsc's limit of 2^52 (4 PiB)");
  }
  const ParallelConfig &par = train.parallel;
  const int64_t kvHeads = model.numKvHeads ? model.numKvHeads : model.numHeads;
  if (model.numHeads % par.tensor != 0 || kvHeads % par.tensor != 0)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") must divide the model's attention heads (" +
                      str(model.numHeads) + ", key/value heads " +
                      str(kvHeads) + "): attention is split by heads");
  if (int64_t(ffn) % par.tensor != 0)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") must divide the MLP width (" + str(int64_t(ffn)) +
                      "): its GEMMs are split by columns and rows");
  if (model.sandwichNorms && par.tensor > 1)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") > 1 is not supported for model_type \"" +
                      model.typeName + "\": slicing its soft-capped "
                      "attention and logits is not built");
  if (model.type == ModelType::Phi && par.tensor > 1)
    throw ConfigError("tensor_parallel.autotp_size (" + str(par.tensor) +
                      ") > 1 is not supported for model_type \"phi\": "
                      "slicing its parallel blocks and partial rotary "
                      "embedding is not built");
  if (par.expert > 1 && !model.numMoeLayers())
    throw ConfigError("moe.ep_size (" + str(par.expert) +
                      ") > 1, but model_type \"" + model.typeName +
                      "\" has no mixture-of-experts layers");
  if (par.expert > 1 && model.numExperts % par.expert != 0)
    throw ConfigError("moe.ep_size (" + str(par.expert) +
                      ") must divide " +
                      (model.typeName == "mixtral" ? "num_local_experts"
                                                   : "num_experts") +
                      " (" +
                      str(model.numExperts) + "): each rank holds an equal "
                      "share of every layer's experts");
  if (par.pipeline * par.virtualStages > model.numLayers)
    throw ConfigError("pipeline.stages (" + str(par.pipeline) + ") * " +
                      "dsc.pipeline_virtual_stages (" +
                      str(par.virtualStages) + ") exceeds the model's " +
                      str(model.numLayers) + " layers");
  if (par.schedule == "interleaved" && train.gradAccum % par.pipeline != 0)
    throw ConfigError("the interleaved schedule needs "
                      "gradient_accumulation_steps (" +
                      str(train.gradAccum) +
                      ", the micro-batches) to be a multiple of "
                      "pipeline.stages (" + str(par.pipeline) + ")");
  if (train.seqLen > model.maxPositions)
    throw ConfigError("dsc.seq_len (" + str(train.seqLen) +
                      ") exceeds the model's " + posKey + " (" +
                      str(model.maxPositions) + ")");
  if (train.maskTokenId >= model.vocabSize)
    throw ConfigError("dsc.mask_token_id (" + str(train.maskTokenId) +
                      ") must be less than the model's vocab_size (" +
                      str(model.vocabSize) + ")");
  if (train.padTokenId >= model.vocabSize)
    throw ConfigError("dsc.pad_token_id (" + str(train.padTokenId) +
                      ") must be less than the model's vocab_size (" +
                      str(model.vocabSize) + ")");
  if (model.type == ModelType::BERT && train.padTokenId >= 0 &&
      train.padTokenId == (train.maskTokenId < 0 ? kBertMaskTokenId
                                                 : train.maskTokenId))
    throw ConfigError("dsc.pad_token_id (" + str(train.padTokenId) +
                      ") equals the mask token: a masked position would "
                      "read as padding");
  if (model.slidingWindow && T > double(model.slidingWindow))
    throw ConfigError("model config: sliding_window (" +
                      str(model.slidingWindow) + ") is shorter than the "
                      "sequence (" + str(int64_t(T)) + "); sliding-window "
                      "attention is not supported, so train with dsc.seq_len "
                      "<= sliding_window");
  if (model.type == ModelType::BERT && train.maskTokenId < 0 &&
      model.vocabSize <= kBertMaskTokenId)
    throw ConfigError(
        "dsc.mask_token_id is not set and the default " +
        str(kBertMaskTokenId) + " (bert-base [MASK]) "
        "is outside the model's vocab_size (" +
        str(model.vocabSize) + "); set dsc.mask_token_id in the training "
        "config");
}

} // namespace dsc
