//===- MoeModelConfig.cpp - Mixture-of-experts keys of config.json --------===//
//
// The mixture-of-experts part of the LLaMA family's config.json reader
// (ModelConfig.cpp's parseLlama): MixtralConfig's, Qwen2MoeConfig's and
// Qwen3MoeConfig's defaults and keys, as transformers names them.
//
//===----------------------------------------------------------------------===//

#include "ModelConfigKeys.h"

namespace dsc {
namespace config_reader {

void setMoeDefaults(const std::string &type, ModelConfig &m,
                    std::optional<int64_t> &kvHeads,
                    std::optional<int64_t> &expertIntermediate) {
  if (type == "mixtral") { // MixtralConfig's beyond MistralConfig's
    m.layerNormEps = 1e-5;
    m.rope.theta = 1e6;
    m.numExperts = 8;
    m.expertsPerToken = 2;
  } else if (type == "qwen2_moe") { // Qwen2MoeConfig's beyond Qwen2's
    m.hidden = 2048;
    m.intermediate = 5632;
    m.numLayers = 24;
    m.numHeads = 16;
    m.numExperts = 60;
    m.expertsPerToken = 4;
    expertIntermediate = 1408;
    m.sharedExpertIntermediate = 5632;
    m.normTopk = false;
  } else if (type == "qwen3_moe") { // Qwen3MoeConfig's (transformers 4.51)
    m.hidden = 2048;
    m.intermediate = 6144;
    m.numLayers = 24;
    m.numHeads = 32;
    kvHeads = 4;
    m.numExperts = 128;
    m.expertsPerToken = 8;
    expertIntermediate = 768;
    m.normTopk = false;
  }
}

bool readMoeKey(const Ctx &c, const std::string &k, const json &v,
                ModelConfig &m, std::optional<int64_t> &expertIntermediate) {
  if (k == "num_local_experts" || k == "num_experts")
    m.numExperts = c.integer(k, v, 1, kMaxExperts, "an integer >= 1");
  else if (k == "moe_intermediate_size")
    expertIntermediate = c.dimension(k, v);
  else if (k == "shared_expert_intermediate_size")
    m.sharedExpertIntermediate = c.dimension(k, v);
  else if (k == "norm_topk_prob")
    m.normTopk = c.boolean(k, v);
  else if (k == "decoder_sparse_step")
    m.sparseStep = c.integer(k, v, 1, kMaxLayers, "an integer >= 1");
  else if (k == "mlp_only_layers") {
    if (!v.is_null() && !v.is_array())
      c.fail(k + ": " + show(v) + " is not a list of layer indices");
    m.mlpOnlyLayers.clear();
    for (const json &x : v.is_null() ? json::array() : v)
      m.mlpOnlyLayers.push_back(
          c.integer(k, x, 0, kMaxLayers, "a layer index >= 0"));
  } else if (k == "num_experts_per_tok")
    m.expertsPerToken = c.integer(k, v, 1, kMaxExperts, "an integer >= 1");
  else if (k == "output_router_logits")
    m.routerAuxLoss = c.boolean(k, v);
  else if (k == "router_aux_loss_coef")
    m.routerAuxLossCoef = c.nonNegativeNumber(k, v);
  else if (k == "router_jitter_noise") {
    if (c.nonNegativeNumber(k, v) != 0.0)
      c.fail(k + ": " + show(v) + " is not supported; expected 0 (dsc "
             "routes the tokens as they are)");
  } else
    return false;
  return true;
}

void finishMoe(const Ctx &c, const std::string &type, ModelConfig &m,
               std::optional<int64_t> expertIntermediate) {
  const char *expertsKey = type == "qwen2_moe" || type == "qwen3_moe"
                               ? "num_experts"
                               : "num_local_experts";
  if (m.expertsPerToken > m.numExperts)
    c.fail("num_experts_per_tok (" + std::to_string(m.expertsPerToken) +
           ") exceeds " + expertsKey + " (" + std::to_string(m.numExperts) +
           "): each token picks that many distinct experts");
  m.expertIntermediate =
      m.numExperts ? expertIntermediate.value_or(m.intermediate) : 0;
  for (int64_t l : m.mlpOnlyLayers)
    if (l >= m.numLayers)
      c.fail("mlp_only_layers: layer " + std::to_string(l) +
             " is not one of the " + std::to_string(m.numLayers) +
             " layers (num_hidden_layers)");
  if (m.numExperts && !m.numMoeLayers())
    c.note("no layer is sparse (decoder_sparse_step " +
           std::to_string(m.sparseStep) + ", mlp_only_layers): every layer "
           "is a dense MLP");
}

} // namespace config_reader
} // namespace dsc
