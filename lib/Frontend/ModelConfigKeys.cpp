//===- ModelConfigKeys.cpp - Which config.json keys dsc reads -------------===//
//
// The keys of a Hugging Face config.json beside the architecture ones each
// model reader parses: bookkeeping accepted and ignored (some only at the
// value that keeps dsc's architecture), architecture keys dsc does not
// implement, other model types' keys, and keys transformers would keep
// unread (noted once); plus the dtype and the architectures list.
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ModelConfigKeys.h"

#include <algorithm>

namespace dsc {
namespace config_reader {

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
                              "built for model_type \"phi\" only"},
    {"qk_layernorm", "normalised queries and keys are not supported"},
    {"use_qk_norm", "normalised queries and keys are not supported"},
    {"num_experts", "this model's mixture-of-experts layers are not "
                    "supported (dsc builds Mixtral's, Qwen2-MoE's and "
                    "Qwen3-MoE's, model_type \"mixtral\", \"qwen2_moe\" and "
                    "\"qwen3_moe\")"},
    {"num_local_experts", "mixture-of-experts layers are built for "
                          "model_type \"mixtral\", \"qwen2_moe\" and "
                          "\"qwen3_moe\" only"},
    {"num_experts_per_tok", "mixture-of-experts layers are built for "
                            "model_type \"mixtral\", \"qwen2_moe\" and "
                            "\"qwen3_moe\" only"},
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
/// MixtralConfig (4.46): LlamaConfig's keys without head_dim, rope_scaling
/// and pretraining_tp (its attention and rotary embedding do not read
/// them), plus the sliding window and the sparse MoE block's keys.
const std::vector<std::string> kMixtralKeys = {
    "model_type",          "vocab_size",
    "hidden_size",         "intermediate_size",
    "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "hidden_act",
    "max_position_embeddings", "rms_norm_eps",
    "rope_theta",          "tie_word_embeddings",
    "attention_dropout",   "initializer_range",
    "sliding_window",      "num_local_experts",
    "num_experts_per_tok", "output_router_logits",
    "router_aux_loss_coef", "router_jitter_noise"};
/// Qwen2MoeConfig (4.46): Qwen2's keys (no head_dim or pretraining_tp)
/// plus the sparse blocks': routed experts of their own width, the shared
/// expert, the sparse step and dense-only layers.
const std::vector<std::string> kQwen2MoeKeys = {
    "model_type",          "vocab_size",
    "hidden_size",         "intermediate_size",
    "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "hidden_act",
    "max_position_embeddings", "initializer_range",
    "rms_norm_eps",        "tie_word_embeddings",
    "rope_theta",          "rope_scaling",
    "use_sliding_window",  "sliding_window",
    "max_window_layers",   "attention_dropout",
    "decoder_sparse_step", "moe_intermediate_size",
    "shared_expert_intermediate_size", "num_experts_per_tok",
    "num_experts",         "norm_topk_prob",
    "output_router_logits", "router_aux_loss_coef",
    "mlp_only_layers"};
/// Qwen3MoeConfig (4.51): Qwen3's keys (head_dim, attention_bias, the
/// sliding-window keys) plus the sparse blocks' without a shared expert.
const std::vector<std::string> kQwen3MoeKeys = {
    "model_type",          "vocab_size",
    "hidden_size",         "intermediate_size",
    "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "head_dim",
    "hidden_act",          "max_position_embeddings",
    "initializer_range",   "rms_norm_eps",
    "tie_word_embeddings", "rope_theta",
    "rope_scaling",        "attention_bias",
    "use_sliding_window",  "sliding_window",
    "max_window_layers",   "attention_dropout",
    "decoder_sparse_step", "moe_intermediate_size",
    "num_experts_per_tok", "num_experts",
    "norm_topk_prob",      "output_router_logits",
    "router_aux_loss_coef", "mlp_only_layers"};
/// PhiConfig (4.46).
const std::vector<std::string> kPhiKeys = {
    "model_type",          "vocab_size",
    "hidden_size",         "intermediate_size",
    "num_hidden_layers",   "num_attention_heads",
    "num_key_value_heads", "resid_pdrop",
    "embd_pdrop",          "attention_dropout",
    "hidden_act",          "max_position_embeddings",
    "initializer_range",   "layer_norm_eps",
    "tie_word_embeddings", "rope_theta",
    "rope_scaling",        "partial_rotary_factor",
    "qk_layernorm"};
/// Qwen2Config's sliding-window keys (Qwen3Config has them too).
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
  // A checkpoint that once shipped its own code (phi-2's configuration_phi)
  // and whose model_type transformers now builds itself: without
  // trust_remote_code transformers uses its own class, as dsc does.
  if (key == "auto_map") {
    c.note("auto_map: names the checkpoint's own code; dsc builds "
           "transformers' own " + type + " model, as transformers does "
           "without trust_remote_code");
    return;
  }
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
      {"Qwen3ForCausalLM", "qwen3"},     {"Qwen3Model", "qwen3"},
      {"GemmaForCausalLM", "gemma"},     {"GemmaModel", "gemma"},
      {"Gemma2ForCausalLM", "gemma2"},   {"Gemma2Model", "gemma2"},
      {"MixtralForCausalLM", "mixtral"}, {"MixtralModel", "mixtral"},
      {"Qwen2MoeForCausalLM", "qwen2_moe"}, {"Qwen2MoeModel", "qwen2_moe"},
      {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"Qwen3MoeModel", "qwen3_moe"},
      {"PhiForCausalLM", "phi"},         {"PhiModel", "phi"}};
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
  else if (type == "gemma2")
    built = {"Gemma2ForCausalLM", "Gemma2Model"};
  else if (type == "mixtral")
    built = {"MixtralForCausalLM", "MixtralModel"};
  else if (type == "qwen3")
    built = {"Qwen3ForCausalLM", "Qwen3Model"};
  else if (type == "qwen2_moe")
    built = {"Qwen2MoeForCausalLM", "Qwen2MoeModel"};
  else if (type == "qwen3_moe")
    built = {"Qwen3MoeForCausalLM", "Qwen3MoeModel"};
  else if (type == "phi")
    built = {"PhiForCausalLM", "PhiModel"};
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

} // namespace config_reader

HfTensorNames hfTensorNames(ModelType type) {
  switch (type) {
  case ModelType::GPT2:
    // GPT2Model files leave out GPT2LMHeadModel's "transformer."; the
    // causal mask h.N.attn.bias / masked_bias is a buffer (dsc's attention
    // masks by construction).
    return {"transformer.", "lm_head.weight=transformer.wte.weight",
            "(transformer\\.)?h\\.[0-9]+\\.attn\\.(bias|masked_bias)"};
  case ModelType::BERT:
    // BertModel files leave out "bert."; dsc trains BertForMaskedLM, so the
    // position_ids buffer (positions are 0..T-1), the pooler and
    // BertForPreTraining's next-sentence head are not used.
    return {"bert.",
            "cls.predictions.decoder.weight=bert.embeddings.word_embeddings."
            "weight,cls.predictions.decoder.bias=cls.predictions.bias",
            "(bert\\.)?(embeddings\\.position_ids|pooler\\.dense\\.(weight|"
            "bias))|cls\\.seq_relationship\\.(weight|bias)"};
  case ModelType::LLaMA:
  case ModelType::Phi:
    break; // files name every tensor as the model class does
  }
  return {};
}

} // namespace dsc
