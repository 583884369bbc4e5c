//===- DeepSpeedOptimizer.cpp - optimizer and scheduler -------------------===//
//
// The optimizer and scheduler sections of a ds_config.json.
//
// Optimizer "Adam" follows DeepSpeed, not PyTorch: DeepSpeed builds Adam with
// params.adam_w_mode defaulting to true, i.e. decoupled weight decay (AdamW).
// A ds_config written for DeepSpeed must train the same here, so type "Adam"
// resolves to OptimizerType::AdamW unless params.adam_w_mode is false, which
// gives OptimizerType::Adam (torch.optim.Adam: L2 decay added to the
// gradient). "AdamW" is always AdamW; "AdamW" with adam_w_mode false is
// rejected as contradictory. The enum holds the resolved semantics.
//
// warmup_num_steps is stored as max(2, value), as DeepSpeed's WarmupLR /
// WarmupDecayLR / WarmupCosineLR do in their constructors, so a consumer that
// implements DeepSpeed's formulas reproduces its learning rates.
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

void parseOptimizer(const Ctx &c, const json &sec, OptimizerConfig &o) {
  c.object("optimizer", sec);
  c.checkKeys("optimizer", sec, {"type", "params"});
  const char *types = "one of \"Adam\", \"AdamW\", \"Lamb\", \"SGD\", "
                      "\"OneBitAdam\", \"ZeroOneAdam\", \"OneBitLamb\", "
                      "\"Adam8bit\", \"AdamW8bit\", \"Adafactor\" "
                      "(case-insensitive)";
  auto typeIt = sec.find("type");
  if (typeIt == sec.end())
    c.fail(std::string("optimizer.type: missing; expected ") + types);
  const std::string &typeName = c.string("optimizer.type", *typeIt, types);
  // DeepSpeed lower-cases the names of its own optimizers.
  std::string t = lower(typeName);
  bool adamLike = t == "adam" || t == "adamw";
  if (adamLike)
    o.type = OptimizerType::AdamW; // refined by adam_w_mode below
  else if (t == "onebitadam")
    o.type = OptimizerType::OneBitAdam;
  else if (t == "zerooneadam")
    o.type = OptimizerType::ZeroOneAdam;
  else if (t == "onebitlamb")
    o.type = OptimizerType::OneBitLamb;
  else if (t == "lamb")
    o.type = OptimizerType::Lamb;
  else if (t == "sgd")
    o.type = OptimizerType::SGD;
  else if (t == "adam8bit")
    o.type = OptimizerType::Adam8bit;
  else if (t == "adamw8bit") {
    o.type = OptimizerType::AdamW8bit;
    o.weightDecay = 1e-2; // bitsandbytes' AdamW8bit default
  } else if (t == "adafactor")
    o.type = OptimizerType::Adafactor;
  else
    c.bad("optimizer.type", *typeIt, types);
  const bool adafactor = o.type == OptimizerType::Adafactor;

  std::vector<std::string> allowed = {"lr", "weight_decay"};
  if (adamLike)
    allowed.insert(allowed.end(), {"betas", "eps", "bias_correction",
                                   "adam_w_mode", "torch_adam", "amsgrad"});
  else if (o.type == OptimizerType::Lamb)
    allowed.insert(allowed.end(), {"betas", "eps", "bias_correction",
                                   "max_coeff", "min_coeff"});
  else if (o.type == OptimizerType::OneBitAdam)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "freeze_step", "cuda_aware", "comm_backend_name",
                    "eps_inside_sqrt", "max_grad_norm"});
  else if (o.type == OptimizerType::OneBitLamb)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "freeze_step", "max_coeff", "min_coeff", "coeff_beta",
                    "factor_max", "factor_min", "factor_threshold",
                    "cuda_aware", "comm_backend_name", "eps_inside_sqrt",
                    "max_grad_norm"});
  else if (o.type == OptimizerType::ZeroOneAdam)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "bias_correction", "amsgrad",
                    "var_freeze_step", "var_update_scaler",
                    "local_step_scaler", "local_step_clipper", "cuda_aware",
                    "comm_backend_name", "eps_inside_sqrt", "max_grad_norm"});
  else if (o.type == OptimizerType::Adam8bit ||
           o.type == OptimizerType::AdamW8bit)
    allowed.insert(allowed.end(),
                   {"betas", "eps", "amsgrad", "min_8bit_size"});
  else if (adafactor)
    allowed.insert(allowed.end(),
                   {"eps", "clip_threshold", "decay_rate", "beta1",
                    "scale_parameter", "relative_step", "warmup_init"});
  else
    allowed.insert(allowed.end(), {"momentum", "dampening", "nesterov"});
  static const std::vector<std::string> allKnown = {
      "lr",        "weight_decay", "betas",      "eps",      "bias_correction",
      "adam_w_mode", "torch_adam", "amsgrad",    "max_coeff", "min_coeff",
      "momentum",  "dampening",    "nesterov",   "freeze_step", "cuda_aware",
      "comm_backend_name", "eps_inside_sqrt", "max_grad_norm",
      "var_freeze_step", "var_update_scaler", "local_step_scaler",
      "local_step_clipper", "coeff_beta", "factor_max", "factor_min",
      "factor_threshold", "min_8bit_size", "clip_threshold", "decay_rate",
      "beta1", "scale_parameter", "relative_step", "warmup_init"};
  bool lrGiven = false;

  std::optional<bool> adamWMode;
  auto paramsIt = sec.find("params");
  if (paramsIt != sec.end()) {
    const json &params = c.object("optimizer.params", *paramsIt);
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string &k = it.key();
      const json &v = it.value();
      std::string p = "optimizer.params." + k;
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        if (std::find(allKnown.begin(), allKnown.end(), k) != allKnown.end())
          c.fail(p + ": not a parameter of optimizer type '" + typeName +
                 "'; allowed: " + join(allowed));
        c.unknownKey("optimizer.params", k, allowed);
      }
      if (k == "lr" && adafactor && v.is_null())
        ; // transformers' default: no lr (the relative step)
      else if (k == "lr") {
        o.lr = c.nonNegativeNumber(p, v);
        lrGiven = true;
      } else if (k == "eps" && adafactor) {
        const char *exp = "an array of two numbers >= 0 (eps1 added to the "
                          "squared gradient, eps2 the smallest parameter "
                          "scale)";
        if (!v.is_array() || v.size() != 2)
          c.bad(p, v, exp);
        o.adafactorEps1 = c.nonNegativeNumber(p + "[0]", v[0]);
        o.adafactorEps2 = c.nonNegativeNumber(p + "[1]", v[1]);
      } else if (k == "clip_threshold")
        o.clipThreshold = c.positiveNumber(p, v);
      else if (k == "decay_rate")
        o.decayRate = c.number(
            p, v, [](double x) { return x <= 0; },
            "a number <= 0 (beta2 of step t is 1 - t^decay_rate)");
      else if (k == "beta1") {
        o.firstMoment = !v.is_null();
        if (o.firstMoment)
          o.beta1 = c.number(p, v, [](double x) { return x >= 0 && x < 1; },
                             "null or a number in [0, 1)");
      } else if (k == "scale_parameter")
        o.scaleParameter = c.boolean(p, v);
      else if (k == "relative_step")
        o.relativeStep = c.boolean(p, v);
      else if (k == "warmup_init")
        o.warmupInit = c.boolean(p, v);
      else if (k == "min_8bit_size")
        o.min8bitSize = c.nonNegative(p, v);
      else if (k == "weight_decay")
        o.weightDecay = c.nonNegativeNumber(p, v);
      else if (k == "betas") {
        const char *exp = "an array of two numbers in [0, 1)";
        if (!v.is_array() || v.size() != 2)
          c.bad(p, v, exp);
        auto ok = [](double x) { return x >= 0 && x < 1; };
        o.beta1 = c.number(p + "[0]", v[0], ok, "a number in [0, 1)");
        o.beta2 = c.number(p + "[1]", v[1], ok, "a number in [0, 1)");
      } else if (k == "eps")
        o.eps = c.positiveNumber(p, v);
      else if (k == "bias_correction")
        o.biasCorrection = c.boolean(p, v);
      else if (k == "adam_w_mode")
        adamWMode = c.boolean(p, v);
      else if (k == "torch_adam")
        c.boolean(p, v); // picks DeepSpeed's implementation; same math
      else if (k == "amsgrad") {
        if (c.boolean(p, v))
          c.fail(p + ": true is not supported yet (AMSGrad)");
      } else if (k == "max_coeff")
        o.maxCoeff = c.positiveNumber(p, v);
      else if (k == "min_coeff")
        o.minCoeff = c.nonNegativeNumber(p, v);
      else if (k == "momentum")
        o.momentum = c.nonNegativeNumber(p, v);
      else if (k == "dampening")
        o.dampening = c.nonNegativeNumber(p, v);
      else if (k == "nesterov")
        o.nesterov = c.boolean(p, v);
      // At least one full step: frozen at zero, the variance would hold
      // every weight still (DeepSpeed's would divide by eps instead).
      else if (k == "freeze_step" || k == "var_freeze_step")
        (k == "freeze_step" ? o.freezeStep : o.varFreezeStep) =
            c.integer(p, v, 1, kMaxSize,
                      "an integer >= 1 (the variance freezes after that many "
                      "full-precision steps) and at most 2^31-1");
      else if (k == "var_update_scaler")
        o.varUpdateScaler = c.positive(p, v);
      else if (k == "local_step_scaler")
        o.localStepScaler = c.positive(p, v);
      else if (k == "local_step_clipper")
        o.localStepClipper = c.positive(p, v);
      else if (k == "coeff_beta")
        o.coeffBeta = c.number(p, v, [](double x) { return x >= 0 && x < 1; },
                               "a number in [0, 1)");
      else if (k == "factor_max")
        o.factorMax = c.positiveNumber(p, v);
      else if (k == "factor_min")
        o.factorMin = c.positiveNumber(p, v);
      else if (k == "factor_threshold")
        o.factorThreshold = c.nonNegativeNumber(p, v);
      else if (k == "cuda_aware")
        c.boolean(p, v); // GPU buffers go to NCCL directly either way
      else if (k == "comm_backend_name") {
        const char *backends = "\"nccl\" or \"mpi\"";
        o.commBackend = c.string(p, v, backends);
        if (o.commBackend != "nccl" && o.commBackend != "mpi")
          c.bad(p, v, backends);
      } else if (k == "eps_inside_sqrt") {
        if (c.boolean(p, v))
          c.fail(p + ": true is not supported (DeepSpeed's 1-bit "
                 "optimizers ignore it; dsc adds eps outside the square "
                 "root)");
      } else if (k == "max_grad_norm") {
        if (c.nonNegativeNumber(p, v) != 0)
          c.fail(p + ": not supported (DeepSpeed's 1-bit optimizers "
                 "ignore it); clip with the top-level gradient_clipping");
      }
    }
  }

  if (adamLike) {
    // DeepSpeed: effective_adam_w_mode = (type == "adamw") || adam_w_mode,
    // with adam_w_mode defaulting to true. So "Adam" is AdamW unless
    // adam_w_mode is false; see the file comment.
    if (t == "adamw" && adamWMode && !*adamWMode)
      c.fail("optimizer.params.adam_w_mode: false contradicts optimizer.type '" +
             typeName + "'; use type \"Adam\" with adam_w_mode false for "
             "L2-coupled weight decay (torch.optim.Adam)");
    o.type = (t == "adam" && adamWMode && !*adamWMode) ? OptimizerType::Adam
                                                         : OptimizerType::AdamW;
  }
  // DeepSpeed's OnebitAdam, ZeroOneAdam and OnebitLamb accept
  // bias_correction and never correct.
  if (o.type == OptimizerType::OneBitAdam ||
      o.type == OptimizerType::ZeroOneAdam ||
      o.type == OptimizerType::OneBitLamb)
    o.biasCorrection = false;
  if (o.type == OptimizerType::OneBitLamb && o.factorMin > o.factorMax)
    c.fail("optimizer.params.factor_min (" + show(json(o.factorMin)) +
           ") must not exceed factor_max (" + show(json(o.factorMax)) + ")");
  if ((o.type == OptimizerType::Lamb || o.type == OptimizerType::OneBitLamb) &&
      o.minCoeff > o.maxCoeff)
    c.fail("optimizer.params.min_coeff (" + show(json(o.minCoeff)) +
           ") must not exceed max_coeff (" + show(json(o.maxCoeff)) + ")");
  // transformers' Adafactor refuses these in its constructor (and fails
  // at its first step without an lr when relative_step is off).
  if (adafactor && lrGiven && o.relativeStep)
    c.fail("optimizer.params.lr: cannot combine a manual lr with "
           "relative_step true (transformers' Adafactor refuses it); set "
           "relative_step false or drop lr");
  if (adafactor && o.warmupInit && !o.relativeStep)
    c.fail("optimizer.params.warmup_init: true requires relative_step true "
           "(as transformers' Adafactor)");
  if (adafactor && !lrGiven && !o.relativeStep)
    c.fail("optimizer.params.relative_step: false needs an explicit lr "
           "(transformers' Adafactor has no default lr)");
  // torch.optim.SGD's rule.
  if (o.type == OptimizerType::SGD && o.nesterov &&
      (o.momentum <= 0 || o.dampening != 0))
    c.fail("optimizer.params.nesterov: true requires momentum > 0 and "
           "dampening 0 (got momentum " + show(json(o.momentum)) +
           ", dampening " + show(json(o.dampening)) + ")");
}

void parseScheduler(const Ctx &c, const json &sec, SchedulerConfig &s) {
  c.object("scheduler", sec);
  c.checkKeys("scheduler", sec, {"type", "params"});
  const char *types = "one of \"WarmupLR\", \"WarmupDecayLR\", "
                      "\"WarmupCosineLR\"";
  auto typeIt = sec.find("type");
  if (typeIt == sec.end())
    c.fail(std::string("scheduler.type: missing; expected ") + types);
  const std::string &t = c.string("scheduler.type", *typeIt, types);
  std::vector<std::string> allowed;
  if (t == "WarmupLR") {
    s.type = SchedulerType::WarmupLR;
    allowed = {"warmup_min_lr", "warmup_max_lr", "warmup_num_steps",
               "warmup_type"};
  } else if (t == "WarmupDecayLR") {
    s.type = SchedulerType::WarmupDecayLR;
    allowed = {"total_num_steps", "warmup_min_lr", "warmup_max_lr",
               "warmup_num_steps", "warmup_type"};
  } else if (t == "WarmupCosineLR") {
    s.type = SchedulerType::WarmupCosineLR;
    allowed = {"total_num_steps", "warmup_min_ratio", "warmup_num_steps",
               "cos_min_ratio", "warmup_type"};
  } else if (t == "OneCycle" || t == "LRRangeTest") {
    c.fail("scheduler.type '" + t + "' is not supported yet");
  } else {
    // DeepSpeed looks scheduler classes up by exact name.
    std::string hint;
    for (const char *n : {"WarmupLR", "WarmupDecayLR", "WarmupCosineLR"})
      if (lower(t) == lower(n))
        hint = std::string(" (names are case-sensitive: '") + n + "')";
    c.fail("scheduler.type: " + show(*typeIt) + " is not allowed; expected " +
           types + hint);
  }

  // DeepSpeed defaults (deepspeed/runtime/lr_schedules.py); the struct's
  // initial values are those defaults.
  bool haveTotal = false;
  int64_t warmupSteps = s.warmupNumSteps;
  auto paramsIt = sec.find("params");
  if (paramsIt != sec.end()) {
    const json &params = c.object("scheduler.params", *paramsIt);
    c.checkKeys("scheduler.params", params, allowed);
    for (auto it = params.begin(); it != params.end(); ++it) {
      const std::string &k = it.key();
      const json &v = it.value();
      std::string p = "scheduler.params." + k;
      if (k == "warmup_min_lr")
        s.warmupMinLr = c.nonNegativeNumber(p, v);
      else if (k == "warmup_max_lr")
        s.warmupMaxLr = c.nonNegativeNumber(p, v);
      else if (k == "warmup_num_steps")
        warmupSteps = c.nonNegative(p, v);
      else if (k == "total_num_steps") {
        // "auto" reaches here only where the command runs no schedule
        // (resolveAuto refuses it elsewhere): its length stays unknown.
        if (!(v.is_string() && v.get_ref<const std::string &>() == "auto"))
          s.totalNumSteps = c.positive(p, v);
        haveTotal = true;
      } else if (k == "warmup_type") {
        const char *exp = "\"log\" or \"linear\"";
        const std::string &w = c.string(p, v, exp);
        if (w != "log" && w != "linear")
          c.bad(p, v, exp);
        s.warmupLog = w == "log";
      } else if (k == "warmup_min_ratio")
        s.warmupMinRatio = c.number(
            p, v, [](double x) { return x >= 0 && x <= 1; },
            "a number in [0, 1]");
      else if (k == "cos_min_ratio")
        s.cosMinRatio = c.number(
            p, v, [](double x) { return x >= 0 && x <= 1; },
            "a number in [0, 1]");
    }
  }
  if ((s.type == SchedulerType::WarmupDecayLR ||
       s.type == SchedulerType::WarmupCosineLR) &&
      !haveTotal)
    c.fail("scheduler.params.total_num_steps: missing; required by " + t);
  if (haveTotal && s.totalNumSteps == 0) // unknown: nothing to check
    haveTotal = false;
  else if (haveTotal && s.totalNumSteps < warmupSteps)
    c.fail("scheduler.params.total_num_steps (" +
           std::to_string(s.totalNumSteps) +
           ") must be at least warmup_num_steps (" +
           std::to_string(warmupSteps) + ")");
  // The cosine phase divides by total - warmup (DeepSpeed would raise
  // ZeroDivisionError at the first step after warmup).
  if (s.type == SchedulerType::WarmupCosineLR && haveTotal &&
      s.totalNumSteps == warmupSteps)
    c.fail("scheduler.params.total_num_steps (" +
           std::to_string(s.totalNumSteps) +
           ") must exceed warmup_num_steps (" + std::to_string(warmupSteps) +
           ", at least 2) for WarmupCosineLR");
  if (s.type != SchedulerType::WarmupCosineLR &&
      s.warmupMinLr > s.warmupMaxLr)
    c.fail("scheduler.params.warmup_min_lr (" + show(json(s.warmupMinLr)) +
           ") must not exceed warmup_max_lr (" + show(json(s.warmupMaxLr)) +
           ")");
  // DeepSpeed's schedulers clamp the warmup length to at least 2 steps.
  s.warmupNumSteps = std::max<int64_t>(2, warmupSteps);
}

} // namespace config_reader

} // namespace dsc
