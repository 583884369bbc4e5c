//===- DscSection.cpp - dsc and transformer_kernel sections ---------------===//
//
// dsc's own `dsc` section of the training config, and DeepSpeed's
// transformer_kernel section, whose switches select dsc passes (remat,
// invertible normalisation).
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

/// transformer_kernel: normalize_invertible runs -dsc-invertible;
/// stochastic_mode may only be false (no non-deterministic kernels exist);
/// gelu_checkpoint and attn_dropout_checkpoint select -dsc-remat's
/// recomputations.
void parseTransformerKernel(const Ctx &c, const json &sec, TrainConfig &t) {
  const std::string name = "transformer_kernel";
  c.object(name, sec);
  const std::vector<std::string> keys = {"stochastic_mode",
                                         "normalize_invertible",
                                         "gelu_checkpoint",
                                         "attn_dropout_checkpoint"};
  c.checkKeys(name, sec, keys);
  for (const std::string &k : keys) {
    auto it = sec.find(k);
    if (it == sec.end())
      continue;
    bool on = c.boolean(name + "." + k, *it);
    if (k == "normalize_invertible")
      t.kernel.normalizeInvertible = on;
    else if (k == "stochastic_mode") {
      if (on)
        c.fail(name + ".stochastic_mode: true is not supported: every dsc "
                      "kernel reduces in a fixed order (runs are "
                      "bit-identical) and no faster non-deterministic "
                      "variant is built; set it to false or remove it");
    } else if (k == "gelu_checkpoint")
      t.remat.geluCheckpoint = on;
    else
      t.remat.attnDropoutCheckpoint = on;
  }
}

/// dsc.remat: the -dsc-remat policy. An explicit policy is resolved against
/// the DeepSpeed switches in resolveRemat once the whole file is read.
void parseRemat(const Ctx &c, const json &sec, TrainConfig &t,
                std::string &policy) {
  const std::string name = "dsc.remat";
  c.object(name, sec);
  c.checkKeys(name, sec, {"policy", "memory_budget_bytes", "recompute_cheap"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string p = name + "." + it.key();
    if (it.key() == "policy") {
      policy = c.string(p, it.value(), "\"none\", \"deepspeed\" or \"budget\"");
      if (policy != "none" && policy != "deepspeed" && policy != "budget")
        c.bad(p, it.value(), "\"none\", \"deepspeed\" or \"budget\"");
    } else if (it.key() == "memory_budget_bytes")
      t.remat.memoryBudgetBytes =
          c.integer(p, it.value(), 1, std::numeric_limits<int64_t>::max(),
                    "a positive integer (bytes)");
    else
      t.remat.recomputeCheap = c.boolean(p, it.value());
  }
}

void resolveRemat(const Ctx &c, const std::string &policy, RematConfig &r) {
  bool ds = r.geluCheckpoint || r.attnDropoutCheckpoint || r.perLayer;
  if (policy.empty())
    r.policy = r.memoryBudgetBytes > 0 ? "budget" : ds ? "deepspeed" : "none";
  else
    r.policy = policy;
  if (r.policy == "budget" && r.memoryBudgetBytes == 0)
    c.fail("dsc.remat.policy: \"budget\" needs dsc.remat.memory_budget_bytes");
  if (r.policy != "budget" && r.memoryBudgetBytes > 0)
    c.fail("dsc.remat.memory_budget_bytes: only used by policy \"budget\", "
           "but the policy is \"" + r.policy + "\"");
  if (r.policy != "deepspeed" && ds)
    c.fail("dsc.remat.policy: \"" + r.policy +
           "\" conflicts with transformer_kernel.gelu_checkpoint / "
           "attn_dropout_checkpoint / activation_checkpointing / "
           "pipeline.activation_checkpoint_interval, which select policy "
           "\"deepspeed\"");
}

/// dsc.fusion: one switch per graph fusion, all on by default.
void parseFusion(const Ctx &c, const json &sec, FusionConfig &f) {
  const std::string name = "dsc.fusion";
  c.object(name, sec);
  c.checkKeys(name, sec,
              {"qkv", "bias_gelu", "swiglu", "bias_dropout_add",
               "softmax_dropout", "residual_layer_norm", "residual_rms_norm",
               "attention", "cross_entropy"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    bool on = c.boolean(name + "." + it.key(), it.value());
    if (it.key() == "qkv")
      f.qkv = on;
    else if (it.key() == "bias_gelu")
      f.biasGelu = on;
    else if (it.key() == "swiglu")
      f.swiglu = on;
    else if (it.key() == "softmax_dropout")
      f.softmaxDropout = on;
    else if (it.key() == "residual_layer_norm")
      f.residualLayerNorm = on;
    else if (it.key() == "residual_rms_norm")
      f.residualRmsNorm = on;
    else if (it.key() == "attention")
      f.attention = on;
    else if (it.key() == "cross_entropy")
      f.crossEntropy = on;
    else
      f.biasDropoutAdd = on;
  }
}

void parseDsc(const Ctx &c, const json &sec, TrainConfig &t,
              std::string &rematPolicy) {
  c.object("dsc", sec);
  c.checkKeys("dsc", sec,
              {"seed", "seq_len", "mlm_probability", "mask_token_id",
               "pad_token_id", "fusion", "remat", "pipeline_schedule",
               "pipeline_virtual_stages", "pad_vocabulary"});
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    std::string p = "dsc." + k;
    if (k == "seed") {
      if (!v.is_number_unsigned())
        c.bad(p, v, "an integer in [0, 2^64)");
      t.seed = v.get<uint64_t>();
    } else if (k == "seq_len")
      t.seqLen = c.positive(p, v);
    else if (k == "mlm_probability")
      t.mlmProbability = c.number(p, v,
                                  [](double x) { return x > 0 && x < 1; },
                                  "a number in (0, 1)");
    else if (k == "mask_token_id")
      t.maskTokenId = c.nonNegative(p, v);
    else if (k == "pad_token_id")
      t.padTokenId = c.nonNegative(p, v);
    else if (k == "fusion")
      parseFusion(c, v, t.fusion);
    else if (k == "remat")
      parseRemat(c, v, t, rematPolicy);
    else if (k == "pipeline_schedule") {
      const std::string expected = "\"1f1b\", \"interleaved\" or \"gpipe\"";
      t.parallel.schedule = c.string(p, v, expected);
      if (t.parallel.schedule != "1f1b" &&
          t.parallel.schedule != "interleaved" &&
          t.parallel.schedule != "gpipe")
        c.bad(p, v, expected);
    } else if (k == "pipeline_virtual_stages")
      t.parallel.virtualStages = c.integer(p, v, 1, 1024,
                                           "an integer in [1, 1024]");
    else if (k == "pad_vocabulary")
      t.padVocabulary = c.integer(p, v, 1, 4096, "an integer in [1, 4096]");
  }
}

} // namespace config_reader

} // namespace dsc
