//===- LoraConfig.cpp - LoRA / PEFT configs -------------------------------===//
//
// LoRA settings: the training config's `lora` section and PEFT's
// adapter_config.json, read by one parser.
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

/// PEFT's LoraConfig keys, for the training config's `lora` section and for
/// adapter_config.json alike. Keys that only describe the run (task_type,
/// base_model_name_or_path, ...) are accepted; those asking for what dsc
/// does not do are errors unless they hold PEFT's default.
void parseLora(const Ctx &c, const std::string &prefix, const json &sec,
               LoraConfig &l) {
  c.object(prefix.empty() ? "lora" : prefix, sec);
  static const std::vector<std::string> keys = {
      "r", "lora_alpha", "lora_dropout", "target_modules", "bias",
      "use_rslora", "fan_in_fan_out", "init_lora_weights", "peft_type",
      "task_type", "inference_mode", "base_model_name_or_path", "revision",
      "auto_mapping", "megatron_core", "modules_to_save",
      "layers_to_transform", "layers_pattern", "rank_pattern",
      "alpha_pattern", "use_dora", "lora_bias", "loftq_config",
      "megatron_config", "layer_replication", "exclude_modules",
      "eva_config", "corda_config", "trainable_token_indices"};
  c.checkKeys(prefix, sec, keys);
  l.enabled = true;
  auto p = [&](const std::string &k) { return path(prefix, k); };
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "r")
      l.rank = c.integer(p(k), v, 1, 1 << 16, "an integer in [1, 65536]");
    else if (k == "lora_alpha")
      l.alpha = c.positiveNumber(p(k), v);
    else if (k == "lora_dropout")
      l.dropout = c.probability(p(k), v);
    else if (k == "bias") {
      l.bias = c.string(p(k), v, "\"none\", \"all\" or \"lora_only\"");
      if (l.bias != "none" && l.bias != "all" && l.bias != "lora_only")
        c.bad(p(k), v, "\"none\", \"all\" or \"lora_only\"");
    } else if (k == "use_rslora")
      l.useRslora = c.boolean(p(k), v);
    else if (k == "fan_in_fan_out")
      c.boolean(p(k), v); // dsc knows each layer's layout from the model
    else if (k == "inference_mode")
      c.boolean(p(k), v);
    else if (k == "target_modules") {
      const std::string expected =
          "a list of module names, \"all-linear\" or a regular expression";
      if (v.is_null())
        continue; // PEFT's default for the model type
      if (v.is_string()) {
        const std::string &t = v.get_ref<const std::string &>();
        if (t.empty())
          c.bad(p(k), v, expected);
        if (t == "all-linear")
          l.targetModules = {t};
        else
          l.targetRegex = t;
        continue;
      }
      if (!v.is_array() || v.empty())
        c.bad(p(k), v, expected);
      for (const json &e : v) {
        if (!e.is_string() || e.get_ref<const std::string &>().empty())
          c.bad(p(k), v, expected);
        l.targetModules.push_back(e.get<std::string>());
      }
    } else if (k == "peft_type") {
      if (v != "LORA")
        c.bad(p(k), v, "\"LORA\"");
    } else if (k == "init_lora_weights") {
      if (v != true)
        c.fail(p(k) + ": only PEFT's default initialisation (true) is "
                      "supported");
    } else if (k == "task_type" || k == "base_model_name_or_path" ||
               k == "revision" || k == "megatron_core" ||
               k == "auto_mapping") {
      // Descriptions of the run; nothing to do.
    } else {
      // What PEFT can do and dsc cannot: only its default is accepted.
      const bool isDefault =
          v.is_null() || (v.is_boolean() && !v.get<bool>()) ||
          (v.is_object() && v.empty()) || (v.is_array() && v.empty());
      if (!isDefault)
        c.fail(p(k) + ": " + show(v) + " is not supported (dsc implements "
                      "plain LoRA on the targeted linear layers)");
    }
  }
}

} // namespace config_reader

using namespace config_reader;

std::vector<std::string> defaultLoraTargets(ModelType type) {
  switch (type) {
  case ModelType::GPT2:
    return {"c_attn"};
  case ModelType::BERT:
    return {"query", "value"};
  case ModelType::LLaMA:
    return {"q_proj", "v_proj"};
  case ModelType::Phi: // PEFT's default targets for phi
    return {"q_proj", "v_proj", "fc1", "fc2"};
  }
  return {};
}

LoraConfig parseAdapterConfigText(const std::string &text,
                                  const std::string &origin) {
  Ctx c(origin);
  json j = parseJson(text, c);
  if (!j.contains("peft_type"))
    c.fail("peft_type: missing; expected \"LORA\" (a PEFT "
           "adapter_config.json)");
  LoraConfig l;
  parseLora(c, "", j, l);
  return l;
}

LoraConfig parseAdapterConfig(const std::string &file) {
  return parseAdapterConfigText(readFile(file), file);
}

} // namespace dsc
