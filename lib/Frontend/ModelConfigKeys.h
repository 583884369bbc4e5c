//===- ModelConfigKeys.h - Which config.json keys dsc reads -----*- C++ -*-===//
//
// Internal to lib/Frontend (ModelConfig.cpp, ModelConfigKeys.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_FRONTEND_MODELCONFIGKEYS_H
#define DSC_LIB_FRONTEND_MODELCONFIGKEYS_H

#include "ConfigReader.h"

#include <optional>
#include <string>
#include <vector>

namespace dsc {
namespace config_reader {

/// A key accepted and ignored, optionally only at one value (`required`, a
/// JSON literal) because other values would change the architecture.
struct IgnoredKey {
  const char *name;
  const char *required; // nullptr: any value
  const char *why;      // shown when `required` is violated
};

/// PretrainedConfig keys common to all models; GPT2Config's and
/// BertConfig's own bookkeeping keys.
extern const std::vector<IgnoredKey> kCommonIgnored, kGpt2Ignored,
    kBertIgnored;
/// The architecture keys each reader parses (kLlamaKeys: the whole LLaMA
/// family's; the LLaMA-only and Qwen2-only ones apart).
extern const std::vector<std::string> kGpt2Keys, kBertKeys, kLlamaKeys,
    kLlamaOnlyKeys, kQwen2OnlyKeys, kMixtralKeys, kQwen2MoeKeys, kQwen3MoeKeys,
    kPhiKeys;

/// Returns true when `key` is an ignored key of `table` (checking its
/// required value).
bool handleIgnored(const Ctx &c, const std::string &key, const json &v,
                   const std::vector<IgnoredKey> &table);
/// The mixture-of-experts part of the LLaMA family's reader
/// (MoeModelConfig.cpp): Mixtral's, Qwen2-MoE's and Qwen3-MoE's defaults
/// beyond their dense family's (`kvHeads` and the experts' width
/// included), one config.json key when it is an MoE key (returns whether
/// it was), and the checks and derived sizes once every key is read.
void setMoeDefaults(const std::string &type, ModelConfig &m,
                    std::optional<int64_t> &kvHeads,
                    std::optional<int64_t> &expertIntermediate);
bool readMoeKey(const Ctx &c, const std::string &k, const json &v,
                ModelConfig &m, std::optional<int64_t> &expertIntermediate);
void finishMoe(const Ctx &c, const std::string &type, ModelConfig &m,
               std::optional<int64_t> expertIntermediate);

/// hidden_act / activation_function: the GELU approximation it names.
GeluApprox parseGelu(const Ctx &c, const std::string &key, const json &v);
/// A key `type`'s transformers configuration class does not read: noted,
/// or refused when it is a misspelling of `archKeys`, an architecture key
/// dsc does not implement or another model type's key.
void unknownModelKey(const Ctx &c, const std::string &key, const json &v,
                     const std::vector<std::string> &archKeys,
                     const std::string &type);
/// torch_dtype, or dtype (its name since transformers 4.56).
std::string readDtype(const Ctx &c, const json &j);
/// quantization_config (QuantizationConfig.cpp): transformers'
/// BitsAndBytesConfig; null or absent: none.
FourBitConfig parseQuantizationConfig(const Ctx &c, const json &v);
/// The model_type a config without one implies by its architectures
/// (GPT2LMHeadModel: gpt2), or "".
std::string modelTypeFromArchitectures(const json &j);
/// Refuses a head dsc does not build for `type`.
void checkArchitectures(const Ctx &c, const json &j, const std::string &type);

} // namespace config_reader
} // namespace dsc

#endif // DSC_LIB_FRONTEND_MODELCONFIGKEYS_H
