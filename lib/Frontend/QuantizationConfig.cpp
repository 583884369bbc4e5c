//===- QuantizationConfig.cpp - A model config's quantization_config ------===//
//
// transformers' BitsAndBytesConfig as `save_pretrained` writes it into
// config.json (or as a user adds it, to fine-tune with QLoRA): 4-bit
// weights are what dsc implements (-dsc-quantize-frozen); LLM.int8 and the
// other quantization methods are refused, naming the key.
//
//===----------------------------------------------------------------------===//

#include "ModelConfigKeys.h"

namespace dsc {
namespace config_reader {

namespace {

/// The torch dtype names bnb_4bit_compute_dtype takes ("torch." optional).
std::string computeDtype(const Ctx &c, const std::string &key,
                         const json &v) {
  const char *expected = "\"float32\", \"bfloat16\" or \"float16\"";
  if (v.is_null())
    return "float32"; // BitsAndBytesConfig's default
  std::string d = c.string(key, v, expected);
  if (d.rfind("torch.", 0) == 0)
    d = d.substr(6);
  if (d == "float" || d == "fp32")
    d = "float32";
  if (d == "half" || d == "fp16")
    d = "float16";
  if (d == "bf16")
    d = "bfloat16";
  if (d != "float32" && d != "bfloat16" && d != "float16")
    c.bad(key, v, expected);
  return d;
}

} // namespace

FourBitConfig parseQuantizationConfig(const Ctx &c, const json &v) {
  FourBitConfig q;
  if (v.is_null())
    return q;
  c.object("quantization_config", v);
  const std::string p = "quantization_config.";
  if (auto m = v.find("quant_method"); m != v.end()) {
    const std::string &method =
        c.string(p + "quant_method", *m, "\"bitsandbytes\"");
    if (method != "bitsandbytes")
      c.fail(p + "quant_method: \"" + method +
             "\" is not supported; dsc stores weights in 4 bits as "
             "bitsandbytes does (quant_method \"bitsandbytes\", "
             "load_in_4bit)");
  }
  bool in4 = false, in8 = false;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string &k = it.key();
    const json &x = it.value();
    if (k == "quant_method")
      continue;
    if (k == "load_in_4bit" || k == "_load_in_4bit")
      in4 = c.boolean(p + k, x) || in4;
    else if (k == "load_in_8bit" || k == "_load_in_8bit")
      in8 = c.boolean(p + k, x) || in8;
    else if (k == "bnb_4bit_quant_type") {
      q.format = c.string(p + k, x, "\"nf4\" or \"fp4\"");
      if (q.format != "nf4" && q.format != "fp4")
        c.bad(p + k, x, "\"nf4\" or \"fp4\"");
    } else if (k == "bnb_4bit_use_double_quant")
      q.doubleQuant = c.boolean(p + k, x);
    else if (k == "bnb_4bit_compute_dtype")
      q.computeDtype = computeDtype(c, p + k, x);
    else if (k == "bnb_4bit_quant_storage") {
      if (!x.is_null() &&
          c.string(p + k, x, "\"uint8\"") != "uint8" &&
          x.get<std::string>() != "torch.uint8")
        c.fail(p + k + ": " + show(x) +
               " is not supported; dsc packs two 4-bit codes per uint8");
    } else if (k == "llm_int8_skip_modules") {
      if (!x.is_null()) {
        if (!x.is_array())
          c.bad(p + k, x, "a list of module names, or null");
        for (const json &name : x)
          q.skipModules.push_back(c.string(p + k, name, "a module name"));
      }
    } else if (k == "llm_int8_threshold" || k == "llm_int8_has_fp16_weight" ||
               k == "llm_int8_enable_fp32_cpu_offload") {
      // LLM.int8's settings: 4-bit weights do not read them.
    } else {
      c.fail(p + k + ": unknown key; allowed here: quant_method, "
                     "load_in_4bit, load_in_8bit, bnb_4bit_quant_type, "
                     "bnb_4bit_use_double_quant, bnb_4bit_compute_dtype, "
                     "bnb_4bit_quant_storage, llm_int8_skip_modules, "
                     "llm_int8_threshold, llm_int8_has_fp16_weight, "
                     "llm_int8_enable_fp32_cpu_offload");
    }
  }
  if (in8)
    c.fail(p + "load_in_8bit: LLM.int8 weights are not supported; dsc "
               "stores frozen weights in 4 bits (load_in_4bit)");
  if (!in4) {
    c.note(p + "load_in_4bit is not true: the weights are not quantized");
    return q;
  }
  q.enabled = true;
  return q;
}

} // namespace config_reader
} // namespace dsc
