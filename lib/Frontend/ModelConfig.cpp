//===- ModelConfig.cpp - Hugging Face model configs -----------------------===//
//
// Strict reader of a Hugging Face config.json (GPT-2, BERT, the LLaMA
// family). Keys that carry bookkeeping and do not change the architecture are
// accepted and ignored (the tables below); keys that do change it are
// accepted only at the value dsc implements (e.g. scale_attn_weights must be
// true, is_decoder must be false).
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
namespace config_reader {

namespace {

/// A key accepted and ignored, optionally only at one value (`required`, a
/// JSON literal) because other values would change the architecture.
struct IgnoredKey {
  const char *name;
  const char *required; // nullptr: any value
  const char *why;      // shown when `required` is violated
};

/// PretrainedConfig keys common to all models: serialisation bookkeeping,
/// task heads, tokenizer ids and generation defaults. None changes the
/// pre-training architecture dsc builds (embeddings, blocks, LM/MLM head).
const std::vector<IgnoredKey> kCommonIgnored = {
    {"_name_or_path", nullptr, nullptr},
    {"name_or_path", nullptr, nullptr}, // PretrainedConfig's older spelling
    {"_commit_hash", nullptr, nullptr},
    {"_attn_implementation", nullptr, nullptr},
    {"_attn_implementation_autoset", nullptr, nullptr},
    {"architectures", nullptr, nullptr},
    {"transformers_version", nullptr, nullptr},
    {"torch_dtype", nullptr, nullptr}, // read by readDtype
    {"dtype", nullptr, nullptr},       // transformers >= 4.56's name
    {"use_bfloat16", nullptr, nullptr},
    {"bos_token_id", nullptr, nullptr},
    {"eos_token_id", nullptr, nullptr},
    {"pad_token_id", nullptr, nullptr},
    {"sep_token_id", nullptr, nullptr},
    {"decoder_start_token_id", nullptr, nullptr},
    {"use_cache", nullptr, nullptr},   // inference KV cache
    {"output_past", nullptr, nullptr}, // old name of use_cache
    {"task_specific_params", nullptr, nullptr},
    {"id2label", nullptr, nullptr},
    {"label2id", nullptr, nullptr},
    {"num_labels", nullptr, nullptr},
    {"_num_labels", nullptr, nullptr},
    {"finetuning_task", nullptr, nullptr},
    {"problem_type", nullptr, nullptr},
    {"classifier_dropout", nullptr, nullptr}, // classification heads only
    {"tokenizer_class", nullptr, nullptr},
    {"prefix", nullptr, nullptr},
    {"return_dict", nullptr, nullptr},
    {"output_hidden_states", nullptr, nullptr},
    {"output_attentions", nullptr, nullptr},
    {"torchscript", nullptr, nullptr},
    {"tf_legacy_loss", nullptr, nullptr},
    {"chunk_size_feed_forward", nullptr, nullptr}, // same math, chunked
    {"gradient_checkpointing", nullptr, nullptr},  // HF training switch
    {"tie_encoder_decoder", nullptr, nullptr},
    {"cross_attention_hidden_size", nullptr, nullptr},
    // Generation defaults (inference only).
    {"max_length", nullptr, nullptr},
    {"min_length", nullptr, nullptr},
    {"do_sample", nullptr, nullptr},
    {"early_stopping", nullptr, nullptr},
    {"num_beams", nullptr, nullptr},
    {"num_beam_groups", nullptr, nullptr},
    {"diversity_penalty", nullptr, nullptr},
    {"temperature", nullptr, nullptr},
    {"top_k", nullptr, nullptr},
    {"top_p", nullptr, nullptr},
    {"typical_p", nullptr, nullptr},
    {"repetition_penalty", nullptr, nullptr},
    {"length_penalty", nullptr, nullptr},
    {"no_repeat_ngram_size", nullptr, nullptr},
    {"encoder_no_repeat_ngram_size", nullptr, nullptr},
    {"bad_words_ids", nullptr, nullptr},
    {"num_return_sequences", nullptr, nullptr},
    {"output_scores", nullptr, nullptr},
    {"return_dict_in_generate", nullptr, nullptr},
    {"forced_bos_token_id", nullptr, nullptr},
    {"forced_eos_token_id", nullptr, nullptr},
    {"remove_invalid_values", nullptr, nullptr},
    {"exponential_decay_length_penalty", nullptr, nullptr},
    {"suppress_tokens", nullptr, nullptr},
    {"begin_suppress_tokens", nullptr, nullptr},
    // Accepted only at the value that keeps the plain encoder / decoder.
    {"is_decoder", "false", "a causal BERT decoder is not supported"},
    {"add_cross_attention", "false", "cross-attention is not supported"},
    {"is_encoder_decoder", "false", "encoder-decoder models are not supported"},
    {"pruned_heads", "{}", "pruned attention heads are not supported"},
};

/// GPT2Config keys beyond the architecture ones parsed explicitly.
const std::vector<IgnoredKey> kGpt2Ignored = {
    {"summary_type", nullptr, nullptr}, // GPT2DoubleHeadsModel head only
    {"summary_use_proj", nullptr, nullptr},
    {"summary_activation", nullptr, nullptr},
    {"summary_proj_to_labels", nullptr, nullptr},
    {"summary_first_dropout", nullptr, nullptr},
    {"reorder_and_upcast_attn", nullptr, nullptr}, // fp16 precision detail
    {"predict_special_tokens", nullptr, nullptr},
    {"scale_attn_weights", "true",
     "attention without 1/sqrt(head_dim) scaling is not supported"},
    {"scale_attn_by_inverse_layer_idx", "false",
     "per-layer attention scaling is not supported"},
    {"n_special", "0", "extra special-token embeddings are not supported"},
};

/// BertConfig keys beyond the architecture ones parsed explicitly (legacy
/// keys from the original TF checkpoints' configs, unused by transformers).
const std::vector<IgnoredKey> kBertIgnored = {
    {"directionality", nullptr, nullptr},
    {"pooler_fc_size", nullptr, nullptr},
    {"pooler_num_attention_heads", nullptr, nullptr},
    {"pooler_num_fc_layers", nullptr, nullptr},
    {"pooler_size_per_head", nullptr, nullptr},
    {"pooler_type", nullptr, nullptr},
};

/// Returns true when `key` is an ignored key (checking its required value).
bool handleIgnored(const Ctx &c, const std::string &key, const json &v,
                   const std::vector<IgnoredKey> &table) {
  for (const IgnoredKey &k : table) {
    if (key != k.name)
      continue;
    if (k.required && v != json::parse(k.required))
      c.fail(key + ": " + show(v) + " is not supported; expected " +
             k.required + " (" + k.why + ")");
    return true;
  }
  return false;
}

GeluApprox parseGelu(const Ctx &c, const std::string &key, const json &v) {
  const char *expected = "one of \"gelu_new\", \"gelu_pytorch_tanh\", "
                         "\"gelu_fast\" (tanh approximation), \"gelu\", "
                         "\"gelu_python\" (exact erf)";
  const std::string &s = c.string(key, v, expected);
  // transformers' ACT2FN: gelu_new, gelu_pytorch_tanh and gelu_fast are the
  // same tanh approximation written three ways; gelu / gelu_python are erf.
  if (s == "gelu_new" || s == "gelu_pytorch_tanh" || s == "gelu_fast")
    return GeluApprox::Tanh;
  if (s == "gelu" || s == "gelu_python")
    return GeluApprox::Erf;
  c.bad(key, v, expected);
}

/// Keys transformers' configuration classes read (for some model types)
/// that would change the model dsc builds; dsc does not implement them.
const std::vector<std::pair<const char *, const char *>> kArchitectureKeys = {
    {"quantization_config", "quantized weights are not supported"},
    {"auto_map", "the model is defined by its own code (trust_remote_code), "
                 "which dsc cannot read"},
    {"rope_parameters", "transformers 5's rope settings are not supported "
                        "yet (write rope_theta and rope_scaling)"},
    {"layer_types", "per-layer attention types other than "
                    "\"full_attention\" (sliding windows) are not supported"},
    {"attn_logit_softcapping", "attention logit soft-capping is not "
                               "supported"},
    {"final_logit_softcapping", "final logit soft-capping is not supported"},
    {"query_pre_attn_scalar", "a query scale other than 1/sqrt(head_dim) is "
                              "not supported"},
    {"partial_rotary_factor", "rotary embeddings on part of each head are "
                              "not supported"},
    {"qk_layernorm", "normalised queries and keys are not supported"},
    {"use_qk_norm", "normalised queries and keys are not supported"},
    {"num_experts", "mixture-of-experts layers are not supported"},
    {"num_local_experts", "mixture-of-experts layers are not supported"},
    {"num_experts_per_tok", "mixture-of-experts layers are not supported"},
};

/// The keys dsc reads for each model type (its transformers configuration
/// class's architecture keys).
const std::vector<std::string> kGpt2Keys = {"model_type",
                                            "vocab_size",
                                            "n_positions",
                                            "n_ctx",
                                            "n_embd",
                                            "n_layer",
                                            "n_head",
                                            "n_inner",
                                            "activation_function",
                                            "resid_pdrop",
                                            "embd_pdrop",
                                            "attn_pdrop",
                                            "layer_norm_epsilon",
                                            "initializer_range",
                                            "tie_word_embeddings"};
const std::vector<std::string> kBertKeys = {"model_type",
                                            "vocab_size",
                                            "hidden_size",
                                            "num_hidden_layers",
                                            "num_attention_heads",
                                            "intermediate_size",
                                            "hidden_act",
                                            "hidden_dropout_prob",
                                            "attention_probs_dropout_prob",
                                            "max_position_embeddings",
                                            "type_vocab_size",
                                            "initializer_range",
                                            "layer_norm_eps",
                                            "position_embedding_type",
                                            "tie_word_embeddings"};
const std::vector<std::string> kLlamaKeys = {
    "model_type",          "vocab_size",
    "hidden_size",         "intermediate_size",
    "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "head_dim",
    "hidden_act",          "max_position_embeddings",
    "rms_norm_eps",        "rope_theta",
    "rope_scaling",        "tie_word_embeddings",
    "attention_dropout",   "initializer_range",
    "pretraining_tp"};
const std::vector<std::string> kLlamaOnlyKeys = {"attention_bias", "mlp_bias"};
const std::vector<std::string> kQwen2OnlyKeys = {
    "sliding_window", "use_sliding_window", "max_window_layers"};

/// GPT2Config's attribute_map: transformers stores these under the GPT-2
/// names, overriding them.
const std::pair<const char *, const char *> kGpt2Aliases[] = {
    {"hidden_size", "n_embd"},
    {"max_position_embeddings", "n_positions"},
    {"num_attention_heads", "n_head"},
    {"num_hidden_layers", "n_layer"}};

/// The model type among those dsc reads whose architecture keys include
/// `key` (other than `type`'s own), or nullptr.
const char *otherTypeWithKey(const std::string &key, const std::string &type) {
  auto in = [&](const std::vector<std::string> &keys) {
    return std::find(keys.begin(), keys.end(), key) != keys.end();
  };
  if (type != "gpt2" && in(kGpt2Keys))
    return "gpt2";
  if (type != "bert" && in(kBertKeys))
    return "bert";
  if (type != "llama" && in(kLlamaOnlyKeys))
    return "llama";
  if (type != "qwen2" && in(kQwen2OnlyKeys))
    return "qwen2";
  if ((type == "gpt2" || type == "bert") && in(kLlamaKeys))
    return "llama";
  return nullptr;
}

/// A key the model type's transformers configuration class does not read.
/// transformers keeps it as an attribute that no model code reads, so it
/// cannot change the model: noted once at the end (Ctx::ignoredKeys).
/// Refused when it is within edit distance 2 of a key dsc reads (a
/// misspelling transformers would ignore silently) or when it is an
/// architecture key of another model type dsc does not implement.
void unknownModelKey(const Ctx &c, const std::string &key, const json &v,
                     const std::vector<std::string> &archKeys,
                     const std::string &type) {
  // Newer configs list every layer's attention: all full attention is
  // the model dsc builds.
  if (key == "layer_types" && v.is_array() &&
      std::all_of(v.begin(), v.end(),
                  [](const json &t) { return t == "full_attention"; }))
    return;
  for (const auto &[name, why] : kArchitectureKeys)
    if (key == name)
      c.fail(key + ": not supported: " + why);
  if (type == "gpt2")
    for (const auto &[alias, name] : kGpt2Aliases)
      if (key == alias)
        c.fail("unknown key '" + key +
               "' in model config: GPT2Config "
               "stores it as " +
               name + " (its attribute_map), overriding " + name + "; write " +
               name);
  // Another model's architecture key signals a mixed-up file; a note could
  // go unseen while the model trains at its default size.
  if (const char *other = otherTypeWithKey(key, type))
    c.fail("unknown key '" + key + "' in model config: a key of " + other +
           " configs, which transformers' " + type +
           " configuration does not read");
  const std::string near = suggest(key, archKeys);
  if (!near.empty())
    c.fail("unknown key '" + key + "' in model config" + near +
           "; transformers would keep it unread and build the default");
  c.ignoredKeys.push_back(key);
}

/// dsc ties the output head to the word embeddings; an untied head is not
/// implemented, so `false` is an error rather than silently trained tied.
void requireTiedEmbeddings(const Ctx &c, const std::string &key, const json &v) {
  if (!c.boolean(key, v))
    c.fail(key + ": false (an output head of its own) is not supported yet; "
                 "dsc ties the head to the word embeddings");
}

void checkDivisible(const Ctx &c, const char *hiddenKey, int64_t hidden,
                    const char *headsKey, int64_t heads) {
  if (hidden % heads != 0)
    c.fail(std::string(hiddenKey) + " (" + std::to_string(hidden) +
           ") must be divisible by " + headsKey + " (" +
           std::to_string(heads) + ")");
}

ModelConfig parseGpt2(const Ctx &c, const json &j) {
  // Defaults of transformers' GPT2Config.
  ModelConfig m;
  m.type = ModelType::GPT2;
  m.vocabSize = 50257;
  m.maxPositions = 1024;
  m.hidden = 768;
  m.numLayers = 12;
  m.numHeads = 12;
  m.intermediate = 0; // n_inner null: 4 * n_embd, set below
  m.typeVocabSize = 0;
  m.layerNormEps = 1e-5;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.1;
  m.gelu = GeluApprox::Tanh; // activation_function "gelu_new"
  std::optional<int64_t> nCtx;

  const std::vector<std::string> &archKeys = kGpt2Keys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    else if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "n_positions")
      m.maxPositions = c.dimension(k, v);
    else if (k == "n_ctx")
      nCtx = c.dimension(k, v);
    else if (k == "n_embd")
      m.hidden = c.dimension(k, v);
    else if (k == "n_layer")
      m.numLayers = c.layerCount(k, v);
    else if (k == "n_head")
      m.numHeads = c.dimension(k, v);
    else if (k == "n_inner")
      m.intermediate = v.is_null() ? 0 : c.integer(k, v, 1, kMaxDimension,
                                                   "null or a positive integer "
                                                   "(at most " +
                                                       std::to_string(kMaxDimension) +
                                                       ")");
    else if (k == "activation_function")
      m.gelu = parseGelu(c, k, v);
    else if (k == "resid_pdrop")
      m.residDropout = c.probability(k, v);
    else if (k == "embd_pdrop")
      m.embdDropout = c.probability(k, v);
    else if (k == "attn_pdrop")
      m.attnDropout = c.probability(k, v);
    else if (k == "layer_norm_epsilon")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "tie_word_embeddings")
      requireTiedEmbeddings(c, k, v);
    else if (!handleIgnored(c, k, v, kCommonIgnored) &&
             !handleIgnored(c, k, v, kGpt2Ignored))
      unknownModelKey(c, k, v, archKeys, m.typeName);
  }
  if (m.intermediate == 0)
    m.intermediate = 4 * m.hidden;
  checkDivisible(c, "n_embd", m.hidden, "n_head", m.numHeads);
  // transformers sizes the position table and the causal mask from
  // n_positions and ignores n_ctx; a different n_ctx is almost surely a bug.
  if (nCtx && *nCtx != m.maxPositions)
    c.fail("n_ctx (" + std::to_string(*nCtx) + ") must equal n_positions (" +
           std::to_string(m.maxPositions) +
           "); transformers sizes the model from n_positions");
  return m;
}

ModelConfig parseBert(const Ctx &c, const json &j) {
  // Defaults of transformers' BertConfig.
  ModelConfig m;
  m.type = ModelType::BERT;
  m.typeName = "bert";
  m.vocabSize = 30522;
  m.hidden = 768;
  m.numLayers = 12;
  m.numHeads = 12;
  m.intermediate = 3072;
  m.maxPositions = 512;
  m.typeVocabSize = 2;
  m.layerNormEps = 1e-12;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.1;
  m.gelu = GeluApprox::Erf; // hidden_act "gelu"

  const std::vector<std::string> &archKeys = kBertKeys;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    else if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "hidden_size")
      m.hidden = c.dimension(k, v);
    else if (k == "num_hidden_layers")
      m.numLayers = c.layerCount(k, v);
    else if (k == "num_attention_heads")
      m.numHeads = c.dimension(k, v);
    else if (k == "intermediate_size")
      m.intermediate = c.dimension(k, v);
    else if (k == "hidden_act")
      m.gelu = parseGelu(c, k, v);
    else if (k == "hidden_dropout_prob")
      m.embdDropout = m.residDropout = c.probability(k, v);
    else if (k == "attention_probs_dropout_prob")
      m.attnDropout = c.probability(k, v);
    else if (k == "max_position_embeddings")
      m.maxPositions = c.dimension(k, v);
    else if (k == "type_vocab_size")
      m.typeVocabSize = c.dimension(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "layer_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "position_embedding_type") {
      if (!v.is_string() || v.get_ref<const std::string &>() != "absolute")
        c.bad(k, v, "\"absolute\" (relative position embeddings are not "
                    "supported)");
    } else if (k == "tie_word_embeddings")
      requireTiedEmbeddings(c, k, v);
    else if (!handleIgnored(c, k, v, kCommonIgnored) &&
             !handleIgnored(c, k, v, kBertIgnored))
      unknownModelKey(c, k, v, archKeys, m.typeName);
  }
  checkDivisible(c, "hidden_size", m.hidden, "num_attention_heads",
                 m.numHeads);
  return m;
}

/// rope_scaling: null, or {"rope_type" (or the older "type"): "default" |
/// "linear" | "llama3", "factor", and llama3's low_freq_factor,
/// high_freq_factor and original_max_position_embeddings}.
RopeConfig parseRopeScaling(const Ctx &c, const json &v, RopeConfig rope) {
  if (v.is_null())
    return rope;
  c.object("rope_scaling", v);
  const char *types = "\"default\", \"linear\" or \"llama3\"";
  auto typeIt = v.find("rope_type");
  if (typeIt == v.end())
    typeIt = v.find("type");
  if (typeIt == v.end())
    c.fail(std::string("rope_scaling.rope_type: missing; expected ") + types);
  const std::string &t = c.string("rope_scaling.rope_type", *typeIt, types);
  std::vector<std::string> allowed = {"rope_type", "type"};
  if (t == "default")
    rope.scaling = RopeScaling::None;
  else if (t == "linear")
    rope.scaling = RopeScaling::Linear;
  else if (t == "llama3")
    rope.scaling = RopeScaling::Llama3;
  else
    c.fail("rope_scaling.rope_type: " + show(*typeIt) +
           " is not supported; expected " + types);
  if (rope.scaling != RopeScaling::None)
    allowed.push_back("factor");
  if (rope.scaling == RopeScaling::Llama3)
    allowed.insert(allowed.end(),
                   {"low_freq_factor", "high_freq_factor",
                    "original_max_position_embeddings"});
  c.checkKeys("rope_scaling", v, allowed);
  auto required = [&](const char *key) -> const json & {
    auto it = v.find(key);
    if (it == v.end())
      c.fail(std::string("rope_scaling.") + key + ": missing (rope_type " +
             t + " needs it)");
    return *it;
  };
  if (rope.scaling == RopeScaling::None)
    return rope;
  rope.factor = c.number("rope_scaling.factor", required("factor"),
                         [](double x) { return x >= 1; }, "a number >= 1");
  if (rope.scaling == RopeScaling::Llama3) {
    rope.lowFreqFactor = c.positiveNumber("rope_scaling.low_freq_factor",
                                          required("low_freq_factor"));
    rope.highFreqFactor = c.positiveNumber("rope_scaling.high_freq_factor",
                                           required("high_freq_factor"));
    rope.originalMaxPositions =
        c.dimension("rope_scaling.original_max_position_embeddings",
                    required("original_max_position_embeddings"));
    if (rope.highFreqFactor <= rope.lowFreqFactor)
      c.fail("rope_scaling.high_freq_factor (" +
             show(v["high_freq_factor"]) +
             ") must be greater than low_freq_factor (" +
             show(v["low_freq_factor"]) + ")");
  }
  return rope;
}

/// LlamaForCausalLM and the model types whose keys map onto its graph:
/// MistralForCausalLM (no sliding window shorter than the sequence),
/// Qwen2ForCausalLM (biases on q, k and v; no sliding window) and
/// GemmaForCausalLM (embeddings scaled by sqrt(hidden_size), RMSNorm by
/// 1 + weight, GELU-gated MLP, head_dim 256 and a tied head by default).
ModelConfig parseLlama(const Ctx &c, const json &j, const std::string &type) {
  const bool mistral = type == "mistral", qwen2 = type == "qwen2",
             gemma = type == "gemma";
  // Defaults of transformers' LlamaConfig / MistralConfig / Qwen2Config /
  // GemmaConfig.
  ModelConfig m;
  m.type = ModelType::LLaMA;
  m.typeName = type;
  m.vocabSize = qwen2 ? 151936 : gemma ? 256000 : 32000;
  m.hidden = gemma ? 3072 : 4096;
  m.intermediate = mistral ? 14336 : qwen2 ? 22016 : gemma ? 24576 : 11008;
  m.numLayers = gemma ? 28 : 32;
  m.numHeads = gemma ? 16 : 32;
  m.headDim = gemma ? 256 : 0;
  std::optional<int64_t> kvHeads;
  if (mistral)
    kvHeads = 8;
  m.maxPositions = mistral ? 4096 * 32 : qwen2 ? 32768 : gemma ? 8192 : 2048;
  m.embedScale = m.normPlusOne = m.geluMlp = gemma;
  m.gelu = GeluApprox::Tanh; // Gemma's hidden_activation null
  std::optional<std::string> gemmaHiddenAct;
  bool gemmaActivationGiven = false;
  m.layerNormEps = 1e-6;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.0;
  m.tieEmbeddings = gemma;
  m.qkvBias = qwen2;
  m.slidingWindow = mistral ? 4096 : 0;
  bool qwenSlidingWindow = false;

  std::vector<std::string> archKeys = kLlamaKeys;
  if (mistral)
    archKeys.push_back("sliding_window");
  else if (qwen2)
    archKeys.insert(archKeys.end(), kQwen2OnlyKeys.begin(),
                    kQwen2OnlyKeys.end());
  else if (gemma)
    archKeys.insert(archKeys.end(), {"attention_bias", "hidden_activation"});
  else
    archKeys.insert(archKeys.end(), kLlamaOnlyKeys.begin(),
                    kLlamaOnlyKeys.end());
  auto known = [&](const std::string &k) {
    return std::find(archKeys.begin(), archKeys.end(), k) != archKeys.end();
  };
  json ropeScaling;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    if (!known(k)) {
      if (!handleIgnored(c, k, v, kCommonIgnored))
        unknownModelKey(c, k, v, archKeys, m.typeName);
      continue;
    }
    if (k == "vocab_size")
      m.vocabSize = c.dimension(k, v);
    else if (k == "hidden_size")
      m.hidden = c.dimension(k, v);
    else if (k == "intermediate_size")
      m.intermediate = c.dimension(k, v);
    else if (k == "num_hidden_layers")
      m.numLayers = c.layerCount(k, v);
    else if (k == "num_attention_heads")
      m.numHeads = c.dimension(k, v);
    else if (k == "num_key_value_heads")
      kvHeads = v.is_null() ? std::optional<int64_t>()
                            : std::optional<int64_t>(c.dimension(k, v));
    else if (k == "head_dim")
      m.headDim = v.is_null() ? 0 : c.dimension(k, v);
    else if (k == "hidden_act" && gemma)
      // transformers' Gemma reads hidden_activation instead.
      gemmaHiddenAct = c.string(k, v, "an activation name");
    else if (k == "hidden_activation") {
      if (!v.is_null()) {
        m.gelu = parseGelu(c, k, v);
        gemmaActivationGiven = true;
      }
    } else if (k == "hidden_act") {
      // transformers' ACT2FN: "silu" and "swish" are both SiLU.
      const std::string &act = c.string(k, v, "\"silu\"");
      if (act != "silu" && act != "swish")
        c.fail(k + ": " + show(v) + " is not supported; expected \"silu\" "
                                    "(SwiGLU)");
    } else if (k == "max_position_embeddings")
      m.maxPositions = c.dimension(k, v);
    else if (k == "rms_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "rope_theta")
      m.rope.theta = c.number(k, v, [](double x) { return x > 1; },
                              "a number > 1");
    else if (k == "rope_scaling")
      ropeScaling = v;
    else if (k == "tie_word_embeddings")
      m.tieEmbeddings = c.boolean(k, v);
    else if (k == "attention_dropout")
      m.attnDropout = c.probability(k, v);
    else if (k == "initializer_range")
      m.initializerRange = c.nonNegativeNumber(k, v);
    else if (k == "pretraining_tp") {
      // Only a different (sliced) way to compute the same projections.
      c.integer(k, v, 1, kMaxDimension, "a positive integer");
    } else if (k == "attention_bias")
      m.qkvBias = m.outBias = c.boolean(k, v);
    else if (k == "mlp_bias")
      m.mlpBias = c.boolean(k, v);
    else if (k == "sliding_window")
      m.slidingWindow = v.is_null() ? 0 : c.dimension(k, v);
    else if (k == "use_sliding_window")
      qwenSlidingWindow = c.boolean(k, v);
    else if (k == "max_window_layers")
      c.integer(k, v, 0, kMaxLayers, "an integer >= 0");
  }
  // transformers' (4.46) Gemma rotates with rope_theta alone.
  if (gemma && !ropeScaling.is_null())
    c.fail("rope_scaling: " + show(ropeScaling) +
           " is not supported for model_type \"gemma\" (its rotary "
           "embedding uses rope_theta alone); expected null");
  m.rope = parseRopeScaling(c, ropeScaling, m.rope);
  if (gemma && gemmaHiddenAct && !gemmaActivationGiven &&
      *gemmaHiddenAct != "gelu_pytorch_tanh")
    c.note("hidden_act \"" + *gemmaHiddenAct +
           "\" is not read: transformers' Gemma takes its activation from "
           "hidden_activation, null here, which means gelu_pytorch_tanh");
  // Qwen2 slides its window only when use_sliding_window is true.
  if (qwen2) {
    if (qwenSlidingWindow)
      c.fail("use_sliding_window: true is not supported; dsc attends to the "
             "whole sequence");
    m.slidingWindow = 0;
  }
  m.numKvHeads = kvHeads ? *kvHeads : m.numHeads;
  if (m.numHeads % m.numKvHeads != 0)
    c.fail("num_attention_heads (" + std::to_string(m.numHeads) +
           ") must be divisible by num_key_value_heads (" +
           std::to_string(m.numKvHeads) + ")");
  if (!m.headDim)
    checkDivisible(c, "hidden_size", m.hidden, "num_attention_heads",
                   m.numHeads);
  int64_t headDim = m.headDim ? m.headDim : m.hidden / m.numHeads;
  if (headDim % 2 != 0)
    c.fail("head_dim (" + std::to_string(headDim) +
           ") must be even: rotary embeddings rotate pairs of dimensions");
  m.headDim = headDim;
  return m;
}

/// torch_dtype, or dtype (its name since transformers 4.56): a torch
/// dtype name, "auto" or null. Both may be given only with one value.
std::string readDtype(const Ctx &c, const json &j) {
  std::string dtype;
  for (const char *key : {"torch_dtype", "dtype"}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null())
      continue;
    std::string d = c.string(key, *it, "a torch dtype name such as "
                                       "\"float32\" or \"bfloat16\"");
    if (d.rfind("torch.", 0) == 0)
      d = d.substr(6);
    if (!dtype.empty() && d != dtype)
      c.fail("torch_dtype (\"" + dtype + "\") and dtype (\"" + d +
             "\") are one setting under two names and disagree");
    dtype = d;
  }
  return dtype;
}

/// The model_type of the model classes `architectures` names, when they
/// are classes dsc builds or their backbones ("GPT2LMHeadModel" ->
/// "gpt2"); empty otherwise.
std::string modelTypeFromArchitectures(const json &j) {
  auto it = j.find("architectures");
  if (it == j.end() || !it->is_array() || it->empty())
    return "";
  static const std::pair<const char *, const char *> kClasses[] = {
      {"GPT2LMHeadModel", "gpt2"},       {"GPT2Model", "gpt2"},
      {"BertForMaskedLM", "bert"},       {"BertModel", "bert"},
      {"LlamaForCausalLM", "llama"},     {"LlamaModel", "llama"},
      {"MistralForCausalLM", "mistral"}, {"MistralModel", "mistral"},
      {"Qwen2ForCausalLM", "qwen2"},     {"Qwen2Model", "qwen2"},
      {"GemmaForCausalLM", "gemma"},     {"GemmaModel", "gemma"}};
  std::string type;
  for (const json &a : *it) {
    if (!a.is_string())
      return "";
    std::string found;
    for (const auto &[cls, t] : kClasses)
      if (a.get_ref<const std::string &>() == cls)
        found = t;
    if (found.empty() || (!type.empty() && found != type))
      return "";
    type = found;
  }
  return type;
}

/// architectures: the model classes the checkpoint was saved from. dsc
/// builds the language-model head of each type (a bare backbone trains
/// with it); any other head (sequence classification, question
/// answering...) is refused rather than replaced.
void checkArchitectures(const Ctx &c, const json &j, const std::string &type) {
  auto it = j.find("architectures");
  if (it == j.end() || it->is_null())
    return;
  std::vector<std::string> built;
  if (type == "gpt2")
    built = {"GPT2LMHeadModel", "GPT2Model"};
  else if (type == "bert")
    built = {"BertForMaskedLM", "BertModel"};
  else if (type == "llama")
    built = {"LlamaForCausalLM", "LlamaModel"};
  else if (type == "mistral")
    built = {"MistralForCausalLM", "MistralModel"};
  else if (type == "gemma")
    built = {"GemmaForCausalLM", "GemmaModel"};
  else
    built = {"Qwen2ForCausalLM", "Qwen2Model"};
  const std::string expected = "a list of model class names";
  if (!it->is_array())
    c.bad("architectures", *it, expected);
  for (const json &a : *it) {
    const std::string &name = c.string("architectures", a, expected);
    if (std::find(built.begin(), built.end(), name) == built.end())
      c.fail("architectures: \"" + name + "\" is not supported: for "
             "model_type \"" + type + "\" dsc builds " + built[0] +
             " (" + built[1] + " trains with that head)");
  }
}

} // namespace

} // namespace config_reader

using namespace config_reader;

ModelConfig parseModelConfigText(const std::string &text,
                                 const std::string &origin) {
  Ctx c(origin);
  c.notePrefix = "model config: ";
  json j = parseJson(text, c);
  const char *types =
      "\"gpt2\", \"bert\", \"llama\", \"mistral\", \"qwen2\" or \"gemma\"";
  auto it = j.find("model_type");
  if (it == j.end()) {
    // transformers 2.x wrote no model_type; the model class named in
    // architectures says which configuration class reads the file.
    const std::string inferred = modelTypeFromArchitectures(j);
    if (inferred.empty())
      c.fail(std::string("model_type: missing (and architectures names no "
                         "model class dsc builds); expected ") +
             types);
    c.note("model_type: missing; \"" + inferred +
           "\" taken from "
           "architectures " +
           show(j["architectures"]) +
           " (configs written before transformers 3 have no model_type)");
    it = j.emplace("model_type", inferred).first;
  }
  const std::string &t = c.string("model_type", *it, types);
  ModelConfig m;
  if (t == "gpt2")
    m = parseGpt2(c, j);
  else if (t == "bert")
    m = parseBert(c, j);
  else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "gemma")
    m = parseLlama(c, j, t);
  else
    c.fail("model_type: " + show(*it) + " is not supported; expected " +
           types);
  m.dtype = readDtype(c, j);
  checkArchitectures(c, j, t);
  if (!c.ignoredKeys.empty())
    c.note(join(c.ignoredKeys) + ": not " +
           (c.ignoredKeys.size() == 1 ? "a key" : "keys") +
           " of transformers' " + t +
           " configuration; accepted and ignored (transformers keeps " +
           (c.ignoredKeys.size() == 1 ? "it" : "them") +
           " as attributes no model code reads)");
  m.notes = std::move(c.notes);
  return m;
}

ModelConfig parseModelConfig(const std::string &file) {
  return parseModelConfigText(readFile(file), file);
}

} // namespace dsc
