//===- ModelConfig.cpp - Hugging Face model configs -----------------------===//
//
// Strict reader of a Hugging Face config.json (GPT-2, BERT, the LLaMA
// family). Keys that carry bookkeeping and do not change the architecture are
// accepted and ignored (the tables of ModelConfigKeys.cpp); keys that do
// change it are accepted only at the value dsc implements (e.g.
// scale_attn_weights must be true, is_decoder must be false).
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ModelConfigKeys.h"
#include "ConfigSections.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

namespace {

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

/// The keys the LLaMA family's and Phi's configurations read alike (sizes,
/// key/value heads, positions, the rotary base and scaling, tying,
/// initialisation, attention dropout); false when `k` is not one of them.
bool readDecoderKey(const Ctx &c, const std::string &k, const json &v,
                    ModelConfig &m, std::optional<int64_t> &kvHeads,
                    json &ropeScaling) {
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
  else if (k == "max_position_embeddings")
    m.maxPositions = c.dimension(k, v);
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
  else
    return false;
  return true;
}

/// num_key_value_heads (absent or null: as many as the query heads), which
/// must divide the query heads.
void setKvHeads(const Ctx &c, ModelConfig &m, std::optional<int64_t> kvHeads) {
  m.numKvHeads = kvHeads ? *kvHeads : m.numHeads;
  if (m.numHeads % m.numKvHeads != 0)
    c.fail("num_attention_heads (" + std::to_string(m.numHeads) +
           ") must be divisible by num_key_value_heads (" +
           std::to_string(m.numKvHeads) + ")");
}

/// LlamaForCausalLM and the model types whose keys map onto its graph:
/// MistralForCausalLM (no sliding window shorter than the sequence),
/// Qwen2ForCausalLM (biases on q, k and v; no sliding window),
/// Qwen3ForCausalLM (an RMSNorm over each query and key head; head_dim 128
/// by default; no sliding window), GemmaForCausalLM (embeddings scaled by
/// sqrt(hidden_size), RMSNorm by 1 + weight, GELU-gated MLP, head_dim 256 and a
/// tied head by default), Gemma2ForCausalLM (Gemma with soft-capped
/// attention and final logits, the attention scaled by
/// query_pre_attn_scalar, sandwich norms, a sliding window on every other
/// layer that must not be shorter than the sequence), MixtralForCausalLM
/// (Mistral with a sparse mixture-of-experts block in place of each MLP)
/// Qwen2MoeForCausalLM (Qwen2 whose sparse layers add a sigmoid-gated
/// shared expert to the routed ones, dense layers among them) and
/// Qwen3MoeForCausalLM (Qwen3's attention, Qwen2-MoE's sparse layers
/// without the shared expert).
ModelConfig parseLlama(const Ctx &c, const json &j, const std::string &type) {
  const bool mixtral = type == "mixtral", qwen2moe = type == "qwen2_moe",
             qwen3moe = type == "qwen3_moe";
  const bool mistral = type == "mistral" || mixtral,
             qwen2 = type == "qwen2" || qwen2moe,
             qwen3 = type == "qwen3" || qwen3moe, gemma2 = type == "gemma2",
             gemma = type == "gemma" || gemma2;
  // Defaults of transformers' LlamaConfig / MistralConfig / Qwen2Config /
  // Qwen3Config / GemmaConfig.
  ModelConfig m;
  m.type = ModelType::LLaMA;
  m.typeName = type;
  m.vocabSize = qwen2 || qwen3 ? 151936 : gemma ? 256000 : 32000;
  m.hidden = gemma ? 3072 : 4096;
  m.intermediate = mistral          ? 14336
                   : qwen2 || qwen3 ? 22016
                   : gemma          ? 24576
                                    : 11008;
  m.numLayers = gemma ? 28 : 32;
  m.numHeads = gemma ? 16 : 32;
  if (gemma2) { // Gemma2Config's defaults beyond Gemma's
    m.slidingWindow = 4096;
    m.attnSoftcap = 50.0;
    m.finalSoftcap = 30.0;
    m.queryPreAttnScalar = 224;
    m.sandwichNorms = true;
  }
  // Qwen3Config's head_dim is 128; Qwen3MoeConfig's null (hidden / heads).
  m.headDim = gemma ? 256 : qwen3 && !qwen3moe ? 128 : 0;
  std::optional<int64_t> kvHeads;
  if (mistral)
    kvHeads = 8;
  m.maxPositions = mistral          ? 4096 * 32
                   : qwen2 || qwen3 ? 32768
                   : gemma          ? 8192
                                    : 2048;
  std::optional<int64_t> expertIntermediate;
  setMoeDefaults(type, m, kvHeads, expertIntermediate);
  m.embedScale = m.normPlusOne = m.geluMlp = gemma;
  m.gelu = GeluApprox::Tanh; // Gemma's hidden_activation null
  std::optional<std::string> gemmaHiddenAct;
  bool gemmaActivationGiven = false;
  if (!mixtral)
    m.layerNormEps = 1e-6;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.0;
  m.tieEmbeddings = gemma;
  m.qkvBias = qwen2;
  m.qkNorm = qwen3;
  if (!gemma2)
    m.slidingWindow = mistral && !mixtral ? 4096 : 0;
  bool qwenSlidingWindow = false;

  std::vector<std::string> archKeys = mixtral    ? kMixtralKeys
                                      : qwen2moe ? kQwen2MoeKeys
                                      : qwen3moe ? kQwen3MoeKeys
                                                 : kLlamaKeys;
  if (mixtral || qwen2moe || qwen3moe)
    ;
  else if (mistral)
    archKeys.push_back("sliding_window");
  else if (qwen2)
    archKeys.insert(archKeys.end(), kQwen2OnlyKeys.begin(),
                    kQwen2OnlyKeys.end());
  else if (qwen3) {
    // Qwen3Config: LlamaConfig's keys less pretraining_tp and mlp_bias,
    // with Qwen2's sliding-window keys.
    archKeys.erase(
        std::find(archKeys.begin(), archKeys.end(), "pretraining_tp"));
    archKeys.push_back("attention_bias");
    archKeys.insert(archKeys.end(), kQwen2OnlyKeys.begin(),
                    kQwen2OnlyKeys.end());
  } else if (gemma2) {
    // Gemma2Config: LlamaConfig's keys less pretraining_tp and
    // rope_scaling, with Gemma's and its soft-capping and window keys.
    for (const char *k : {"pretraining_tp", "rope_scaling"})
      archKeys.erase(std::find(archKeys.begin(), archKeys.end(), k));
    archKeys.insert(archKeys.end(),
                    {"attention_bias", "hidden_activation",
                     "query_pre_attn_scalar", "sliding_window",
                     "final_logit_softcapping", "attn_logit_softcapping",
                     "cache_implementation"});
  } else if (gemma)
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
    if (readDecoderKey(c, k, v, m, kvHeads, ropeScaling))
      continue;
    if (k == "head_dim")
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
    } else if (k == "rms_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
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
    else if (readMoeKey(c, k, v, m, expertIntermediate))
      continue;
    else if (k == "query_pre_attn_scalar")
      m.queryPreAttnScalar = c.positiveNumber(k, v);
    else if (k == "final_logit_softcapping")
      m.finalSoftcap = v.is_null() ? 0.0 : c.positiveNumber(k, v);
    else if (k == "attn_logit_softcapping")
      m.attnSoftcap = v.is_null() ? 0.0 : c.positiveNumber(k, v);
    else if (k == "cache_implementation")
      c.string(k, v, "an inference cache name"); // inference only
  }
  finishMoe(c, type, m, expertIntermediate);
  // transformers' (4.46) Gemma rotates with rope_theta alone.
  if (gemma && !gemma2 && !ropeScaling.is_null())
    c.fail("rope_scaling: " + show(ropeScaling) +
           " is not supported for model_type \"gemma\" (its rotary "
           "embedding uses rope_theta alone); expected null");
  m.rope = parseRopeScaling(c, ropeScaling, m.rope);
  if (gemma && gemmaHiddenAct && !gemmaActivationGiven &&
      *gemmaHiddenAct != "gelu_pytorch_tanh")
    c.note("hidden_act \"" + *gemmaHiddenAct +
           "\" is not read: transformers' Gemma takes its activation from "
           "hidden_activation, null here, which means gelu_pytorch_tanh");
  // Qwen2 and Qwen3 slide their window only when use_sliding_window is
  // true.
  if (qwen2 || qwen3) {
    if (qwenSlidingWindow)
      c.fail("use_sliding_window: true is not supported; dsc attends to the "
             "whole sequence");
    m.slidingWindow = 0;
  }
  setKvHeads(c, m, kvHeads);
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


/// PhiForCausalLM (phi-1, phi-1.5, phi-2): each layer's attention and MLP
/// read the same LayerNorm of the residual stream and both add to it
/// (parallel blocks); biases on every linear layer and the LM head; the
/// rotary embedding turns the first partial_rotary_factor of each head's
/// dimensions.
ModelConfig parsePhi(const Ctx &c, const json &j) {
  // Defaults of transformers' PhiConfig.
  ModelConfig m;
  m.type = ModelType::Phi;
  m.typeName = "phi";
  m.vocabSize = 51200;
  m.hidden = 2048;
  m.intermediate = 8192;
  m.numLayers = 24;
  m.numHeads = 32;
  m.maxPositions = 2048;
  m.layerNormEps = 1e-5;
  m.initializerRange = 0.02;
  m.embdDropout = m.residDropout = m.attnDropout = 0.0;
  m.gelu = GeluApprox::Tanh; // gelu_new
  m.tieEmbeddings = false;
  m.qkvBias = m.outBias = m.mlpBias = true;
  m.partialRotaryFactor = 0.5;
  std::optional<int64_t> kvHeads;
  json ropeScaling;
  auto known = [&](const std::string &k) {
    return std::find(kPhiKeys.begin(), kPhiKeys.end(), k) != kPhiKeys.end();
  };
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "model_type")
      continue;
    if (!known(k)) {
      if (!handleIgnored(c, k, v, kCommonIgnored))
        unknownModelKey(c, k, v, kPhiKeys, m.typeName);
      continue;
    }
    if (readDecoderKey(c, k, v, m, kvHeads, ropeScaling))
      continue;
    if (k == "resid_pdrop")
      m.residDropout = c.probability(k, v);
    else if (k == "embd_pdrop")
      m.embdDropout = c.probability(k, v);
    else if (k == "hidden_act")
      m.gelu = parseGelu(c, k, v);
    else if (k == "layer_norm_eps")
      m.layerNormEps = c.positiveNumber(k, v);
    else if (k == "partial_rotary_factor")
      m.partialRotaryFactor = c.number(
          k, v, [](double x) { return x > 0 && x <= 1; }, "a number in (0, 1]");
    else if (k == "qk_layernorm") {
      // transformers' PhiAttention applies LayerNorm(head_dim) to the
      // [..., heads * head_dim] projections, which fails for more than one
      // head; no phi checkpoint sets it.
      if (c.boolean(k, v))
        c.fail(k + ": true is not supported: transformers' Phi applies its "
               "per-head LayerNorm to the whole projection (an error there "
               "with more than one head); expected false");
    }
  }
  m.rope = parseRopeScaling(c, ropeScaling, m.rope);
  setKvHeads(c, m, kvHeads);
  checkDivisible(c, "hidden_size", m.hidden, "num_attention_heads",
                 m.numHeads);
  m.headDim = m.hidden / m.numHeads;
  // PhiAttention: rotary_ndims = int(head_dim * partial_rotary_factor).
  const int64_t rotary = m.rotaryDims();
  if (rotary < 2 || rotary % 2 != 0)
    c.fail("partial_rotary_factor (" + show(j.value("partial_rotary_factor",
                                                    json(0.5))) +
           ") turns " + std::to_string(rotary) + " of the head's " +
           std::to_string(m.headDim) +
           " dimensions; the rotary embedding needs an even number >= 2");
  return m;
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
      "\"gpt2\", \"bert\", \"llama\", \"mistral\", \"qwen2\", \"qwen3\", "
      "\"gemma\", \"gemma2\", \"mixtral\", \"qwen2_moe\", \"qwen3_moe\" or "
      "\"phi\"";
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
  // Read apart: it is the same for every model type.
  json quantization;
  if (auto q = j.find("quantization_config"); q != j.end()) {
    quantization = *q;
    j.erase(q);
  }
  ModelConfig m;
  if (t == "gpt2")
    m = parseGpt2(c, j);
  else if (t == "bert")
    m = parseBert(c, j);
  else if (t == "llama" || t == "mistral" || t == "qwen2" || t == "qwen3" ||
           t == "gemma" || t == "gemma2" || t == "mixtral" ||
           t == "qwen2_moe" || t == "qwen3_moe")
    m = parseLlama(c, j, t);
  else if (t == "phi")
    m = parsePhi(c, j);
  else
    c.fail("model_type: " + show(*it) + " is not supported; expected " +
           types);
  m.dtype = readDtype(c, j);
  m.fourBit = parseQuantizationConfig(c, quantization);
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

bool ModelConfig::isMoeLayer(int64_t layer) const {
  return numExperts > 0 && (layer + 1) % sparseStep == 0 &&
         std::find(mlpOnlyLayers.begin(), mlpOnlyLayers.end(), layer) ==
             mlpOnlyLayers.end();
}

int64_t ModelConfig::numMoeLayers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < numLayers; ++l)
    n += isMoeLayer(l);
  return n;
}

} // namespace dsc
