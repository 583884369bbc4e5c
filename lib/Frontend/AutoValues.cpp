//===- AutoValues.cpp - "auto" resolution ---------------------------------===//
//
// "auto" values of a ds_config.json, resolved as the Hugging Face
// Trainer resolves them, and the resolved config dsc-run --print-config shows.
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

/// The value at key path `p` ("a.b", "a[1]") of `root`, or null.
json *atPath(json &root, const std::string &p) {
  json *at = &root;
  size_t i = 0;
  while (i < p.size()) {
    if (p[i] == '[') {
      size_t close = p.find(']', i);
      if (close == std::string::npos || !at->is_array())
        return nullptr;
      size_t index = std::stoul(p.substr(i + 1, close - i - 1));
      if (index >= at->size())
        return nullptr;
      at = &(*at)[index];
      i = close + 1;
      if (i < p.size() && p[i] == '.')
        ++i;
      continue;
    }
    size_t end = p.find_first_of(".[", i);
    if (end == std::string::npos)
      end = p.size();
    if (!at->is_object())
      return nullptr;
    auto it = at->find(p.substr(i, end - i));
    if (it == at->end())
      return nullptr;
    at = &*it;
    i = end < p.size() && p[end] == '.' ? end + 1 : end;
  }
  return at;
}

/// Resolves "auto" values as the Hugging Face Trainer's DeepSpeed
/// integration does (transformers' integrations/deepspeed.py,
/// HfTrainerDeepSpeedConfig.trainer_config_process and _finalize), from
/// what dsc knows: the defaults of TrainingArguments, the values the file
/// itself gives (the Trainer requires them to match its arguments), the
/// world size, the model config's hidden_size and dtype, the run's steps.
/// Each resolution becomes a note. "auto" anywhere else is left to fail
/// where the key is read.
void resolveAuto(json &j, const Ctx &c, const TrainConfigInputs &in) {
  auto isAuto = [](const json *v) {
    return v && v->is_string() && v->get_ref<const std::string &>() == "auto";
  };
  auto set = [&](const std::string &p, json value, const std::string &why) {
    json *v = atPath(j, p);
    if (!isAuto(v))
      return;
    c.note(p + " \"auto\" -> " + value.dump() + " (" + why + ")");
    *v = std::move(value);
  };
  // A number the file gives (not "auto"), else `dflt`.
  auto given = [&](const std::string &p, double dflt) {
    json *v = atPath(j, p);
    return v && v->is_number() ? v->get<double>() : dflt;
  };
  set("train_micro_batch_size_per_gpu", 8,
      "Hugging Face Trainer default per_device_train_batch_size");
  set("gradient_accumulation_steps", 1,
      "Hugging Face Trainer default gradient_accumulation_steps");
  if (isAuto(atPath(j, "train_batch_size"))) {
    // world size x micro x accumulation, over the data-parallel ranks
    // (the tensor and pipeline ranks hold one replica).
    const double tp = given("tensor_parallel.autotp_size", 1);
    json *stages = atPath(j, "pipeline.stages");
    const double pp = stages && stages->is_number() ? stages->get<double>() : 1;
    const double mb = given("train_micro_batch_size_per_gpu", 8),
                 ga = given("gradient_accumulation_steps", 1);
    const double dp = tp * pp >= 1 ? std::floor(double(in.worldSize) / (tp * pp))
                                   : double(in.worldSize);
    const double tb = dp * mb * ga;
    if (tb >= 1 && tb <= double(kMaxSize) && tb == std::floor(tb))
      set("train_batch_size", int64_t(tb),
          (tp * pp > 1 ? "data-parallel size " : "world size ") +
              str(int64_t(dp)) + " x micro-batch " + str(int64_t(mb)) +
              " x accumulation " + str(int64_t(ga)) +
              ", as the Hugging Face Trainer computes it");
  }
  set("gradient_clipping", 1.0,
      "Hugging Face Trainer default max_grad_norm");
  set("optimizer.params.lr", 5e-5,
      "Hugging Face Trainer default learning_rate");
  set("optimizer.params.betas", json::array({0.9, 0.999}),
      "Hugging Face Trainer defaults adam_beta1, adam_beta2");
  set("optimizer.params.eps", 1e-8,
      "Hugging Face Trainer default adam_epsilon");
  set("optimizer.params.weight_decay", 0.0,
      "Hugging Face Trainer default weight_decay");
  set("scheduler.params.warmup_min_lr", 0,
      "as the Hugging Face Trainer sets it");
  {
    json *lr = atPath(j, "optimizer.params.lr");
    set("scheduler.params.warmup_max_lr",
        lr && lr->is_number() ? *lr : json(5e-5),
        lr && lr->is_number()
            ? "the learning rate, optimizer.params.lr"
            : "the learning rate, Hugging Face Trainer default learning_rate");
  }
  set("scheduler.params.warmup_num_steps", 0,
      "Hugging Face Trainer defaults warmup_steps 0, warmup_ratio 0");
  // The Trainer sets it to the run's number of steps (max_steps).
  if (isAuto(atPath(j, "scheduler.params.total_num_steps"))) {
    if (in.steps > 0)
      set("scheduler.params.total_num_steps", in.steps,
          in.command + " " + in.stepsOption);
    else if (!in.scheduleUsed)
      c.note("scheduler.params.total_num_steps \"auto\" left unresolved: "
             "it is the run's number of steps, and " +
             in.command +
             " runs none (its plan does not depend on the schedule's "
             "length)");
    else if (!in.stepsOption.empty())
      c.fail("scheduler.params.total_num_steps: \"auto\" is the run's "
             "number of steps; give " +
             in.command + " " + in.stepsOption + " N or write the number");
    else
      c.fail("scheduler.params.total_num_steps: \"auto\" is the run's "
             "number of steps, which " +
             in.command +
             " does not know (the step it builds carries the schedule); "
             "write the number");
  }
  // Mixed precision: the Trainer's --fp16 / --bf16 flags, which dsc does
  // not have; the model config's dtype says how the weights were trained.
  const std::string dtype = in.model ? in.model->dtype : "";
  const std::string from =
      dtype.empty() ? (in.model ? "the model config gives no torch_dtype"
                                : "no model config")
                    : "the model config's dtype is \"" + dtype + "\"";
  set("fp16.enabled", dtype == "float16",
      from + "; the Hugging Face Trainer takes it from --fp16, default off");
  for (const char *bf : {"bf16.enabled", "bfloat16.enabled"})
    set(bf, dtype == "bfloat16",
        from + "; the Hugging Face Trainer takes it from --bf16, default off");
  set("amp.enabled", false,
      "Hugging Face Trainer default: no --fp16 with the apex backend");
  set("amp.opt_level", "O1", "Hugging Face Trainer default fp16_opt_level");
  // accelerate fills it from its DeepSpeedPlugin's zero3_save_16bit_model
  // (ACCELERATE_DEEPSPEED_ZERO3_SAVE_16BIT_MODEL, default false).
  set("zero_optimization.stage3_gather_16bit_weights_on_model_save", false,
      "accelerate default zero3_save_16bit_model");
  // ZeRO sizes from the model's width (trainer_config_finalize).
  for (const char *key : {"zero_optimization.reduce_bucket_size",
                          "zero_optimization.stage3_prefetch_bucket_size",
                          "zero_optimization.stage3_param_persistence_threshold"}) {
    if (!isAuto(atPath(j, key)))
      continue;
    if (!in.model)
      c.fail(std::string(key) + ": \"auto\" is computed from the model's "
             "hidden_size, and no model config was given; write the number");
    const int64_t h = in.model->hidden;
    const std::string k = key;
    if (k == "zero_optimization.reduce_bucket_size")
      set(k, h * h, "hidden_size^2 = " + str(h) + "^2");
    else if (k == "zero_optimization.stage3_prefetch_bucket_size")
      set(k, int64_t(0.9 * double(h) * double(h)),
          "0.9 * hidden_size^2, hidden_size " + str(h));
    else
      set(k, 10 * h, "10 * hidden_size, hidden_size " + str(h));
  }
}

/// The resolved config (TrainConfig::resolvedJson): integer keys written
/// as whole floats become integers, the batch sizes are filled in.
std::string resolvedText(json j, const Ctx &c, const TrainConfig &t) {
  for (const auto &[p, value] : c.wholeFloats)
    if (json *v = atPath(j, p))
      *v = value;
  j["train_batch_size"] = t.trainBatchSize;
  j["train_micro_batch_size_per_gpu"] = t.microBatch;
  j["gradient_accumulation_steps"] = t.gradAccum;
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

} // namespace config_reader

} // namespace dsc
