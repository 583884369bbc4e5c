//===- DeepSpeedConfig.cpp - DeepSpeed training config --------------------===//
//
// Strict reader of a DeepSpeed ds_config.json (with dsc's own `dsc`
// section): the top level, precision, ZeRO, parallelism and activation
// checkpointing sections; the others have files of their own.
//
// Batch sizes follow DeepSpeed: any two of train_batch_size,
// train_micro_batch_size_per_gpu, gradient_accumulation_steps determine the
// third; all three must satisfy tb = micro * accum * world size. Where
// DeepSpeed would floor-divide and then fail its own assertion, we report the
// indivisibility directly.
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

/// The largest float32: a loss scale is a float32 on every backend, and a
/// larger one would be inf (every step skipped).
constexpr double kMaxFloat32 = 3.4028234663852886e38;

/// DeepSpeed's fp16 section (deepspeed/runtime/precision_config.py
/// defaults); its other keys come from the table.
void parseFp16(const Ctx &c, const std::string &name, const json &sec,
               MixedPrecisionConfig &mp) {
  c.object(name, sec);
  checkSectionKeys(c, name, sec,
                   {"enabled", "loss_scale", "initial_scale_power",
                    "loss_scale_window", "hysteresis",
                    "consecutive_hysteresis", "min_loss_scale"});
  auto scale = [&](const std::string &p, const json &v, double min,
                   const char *expected) {
    return c.number(p, v,
                    [&](double x) { return x >= min && x <= kMaxFloat32; },
                    expected);
  };
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    const std::string &k = it.key();
    const std::string p = name + "." + k;
    const json &v = it.value();
    if (k == "enabled")
      mp.fp16 = c.boolean(p, v); // DeepSpeed: defaults to false
    else if (k == "loss_scale")
      mp.lossScale = scale(p, v, 0,
                           "0 (dynamic scaling) or a static scale in (0, "
                           "3.4e38], the float32 range");
    else if (k == "initial_scale_power")
      // 2^100 is well inside float32 (2^127 is its largest power of two).
      mp.initialScalePower =
          c.integer(p, v, 0, 100, "an integer in [0, 100]");
    else if (k == "loss_scale_window")
      mp.lossScaleWindow = c.positive(p, v);
    else if (k == "hysteresis")
      mp.hysteresis = c.positive(p, v);
    else if (k == "min_loss_scale") {
      mp.minLossScale = scale(p, v, 0, "a number in (0, 3.4e38]");
      if (mp.minLossScale == 0)
        c.bad(p, v, "a number in (0, 3.4e38]");
    } else if (k == "consecutive_hysteresis")
      mp.consecutiveHysteresis = c.boolean(p, v);
  }
}

void parseBf16(const Ctx &c, const std::string &name, const json &sec,
               MixedPrecisionConfig &mp) {
  c.object(name, sec);
  // bfloat16 is the old name of the same section: the same keys.
  for (auto it = sec.begin(); it != sec.end(); ++it) {
    if (it.key() == "enabled")
      mp.bf16 = c.boolean(name + ".enabled", it.value());
    else if (!handleTableKey(c, "bf16", it.key(), it.value()))
      c.unknownKey(name, it.key(),
                   merged({"enabled"}, deepSpeedKeysIn("bf16")));
  }
}

/// zero_optimization: stage 0 to 3 (-dsc-zero), stage 3's parameter
/// persistence threshold and the bucket sizes of the gradient reductions
/// and shard gathers (-dsc-bucket-collectives). Its other keys are
/// DeepSpeed's tuning knobs, accepted without effect, or requests for what
/// dsc does not do (ZeRO++), refused: both from the key table. Offload is OffloadConfig.cpp's.
void parseZero(const Ctx &c, const json &sec, TrainConfig &t) {
  // Old DeepSpeed accepted a bare boolean (true meaning stage 1).
  if (sec.is_boolean()) {
    t.zeroStage = sec.get<bool>() ? 1 : 0;
    return;
  }
  c.object("zero_optimization", sec);
  const std::string name = "zero_optimization";
  checkSectionKeys(c, name, sec,
                   {"stage", "reduce_bucket_size", "allgather_bucket_size",
                    "stage3_param_persistence_threshold",
                    "param_persistence_threshold", "offload_param",
                    "zero_quantized_weights", "zero_quantized_gradients",
                    "mics_shard_size",
                    "zero_hpz_partition_size", "offload_optimizer",
                    "cpu_offload", "cpu_offload_param", "cpu_offload_params",
                    "overlap_comm", "stage3_prefetch_bucket_size",
                    "prefetch_bucket_size"});
  if (auto it = sec.find("overlap_comm"); it != sec.end() && !it->is_null())
    t.overlapComm = c.boolean(name + ".overlap_comm", *it);
  if (sec.contains("stage3_prefetch_bucket_size") &&
      sec.contains("prefetch_bucket_size"))
    c.fail("zero_optimization.stage3_prefetch_bucket_size and "
           "prefetch_bucket_size are one setting under two names; give one");
  for (const char *key : {"stage3_prefetch_bucket_size", "prefetch_bucket_size"})
    if (auto it = sec.find(key); it != sec.end())
      t.prefetchBucketSize =
          c.integer(name + "." + key, *it, 0,
                    std::numeric_limits<int64_t>::max(), "an integer >= 0");
  // DeepSpeed's field and its stage3_ alias name one setting.
  if (sec.contains("stage3_param_persistence_threshold") &&
      sec.contains("param_persistence_threshold"))
    c.fail("zero_optimization.stage3_param_persistence_threshold and "
           "param_persistence_threshold are one setting under two names; "
           "give one");
  for (const char *key : {"stage3_param_persistence_threshold",
                          "param_persistence_threshold"})
    if (auto it = sec.find(key); it != sec.end())
      t.zeroPersistenceThreshold =
          c.integer(name + "." + key, *it, 0,
                    std::numeric_limits<int64_t>::max(), "an integer >= 0");
  if (auto it = sec.find("reduce_bucket_size"); it != sec.end())
    t.reduceBucketSize =
        c.integer("zero_optimization.reduce_bucket_size", *it, 0,
                  std::numeric_limits<int64_t>::max(), "an integer >= 0");
  if (auto it = sec.find("allgather_bucket_size"); it != sec.end())
    t.allgatherBucketSize =
        c.integer("zero_optimization.allgather_bucket_size", *it, 0,
                  std::numeric_limits<int64_t>::max(), "an integer >= 0");
  if (auto it = sec.find("stage"); it != sec.end()) // default: stage 0
    t.zeroStage =
        c.integer("zero_optimization.stage", *it, 0, 3, "an integer in [0, 3]");
  // ZeRO++'s qwZ and qgZ quantize stage 3's parameter gathers and gradient
  // reduce-scatters; DeepSpeed's other stages do not read them.
  if (auto it = sec.find("zero_quantized_weights"); it != sec.end()) {
    t.zeroQuantizedWeights =
        c.boolean(name + ".zero_quantized_weights", *it) && t.zeroStage == 3;
    if (it->get<bool>() && t.zeroStage != 3)
      c.note(name + ".zero_quantized_weights: stage " +
             std::to_string(t.zeroStage) +
             " gathers no parameters; it applies to stage 3 only");
  }
  if (auto it = sec.find("zero_quantized_gradients"); it != sec.end()) {
    t.zeroQuantizedGradients =
        c.boolean(name + ".zero_quantized_gradients", *it) && t.zeroStage == 3;
    if (it->get<bool>() && t.zeroStage != 3)
      c.note(name + ".zero_quantized_gradients: ZeRO++ quantizes stage 3's "
             "gradient reduce-scatters; it applies to stage 3 only");
  }
  // MiCS / hybrid sharding and hpZ split stage 3's data-parallel ranks
  // into groups (checked against their number in parseTrainConfigText);
  // DeepSpeed's other stages do not read them.
  for (const char *key : {"mics_shard_size", "zero_hpz_partition_size"})
    if (auto it = sec.find(key); it != sec.end()) {
      const bool mics = std::string(key) == "mics_shard_size";
      const int64_t v = c.integer(name + "." + key, *it, mics ? -1 : 0, 1 << 20,
                                  mics ? "an integer in [-1, 1048576]"
                                       : "an integer in [0, 1048576]");
      const bool off = mics ? v <= 0 : v <= 1;
      if (!off && t.zeroStage != 3)
        c.note(name + "." + key + ": stage " + std::to_string(t.zeroStage) +
               " shards no parameters; it applies to stage 3 only");
      else if (!off)
        (mics ? t.zeroShardGroup : t.zeroHpzGroup) = v;
    }
  if (auto it = sec.find("offload_optimizer"); it != sec.end())
    parseOffloadOptimizer(c, *it, t);
  if (auto it = sec.find("cpu_offload"); it != sec.end())
    parseCpuOffload(c, *it, t);
  // DeepSpeed hands offload_param to the stage-3 optimizer alone ("valid
  // only with stage 3") and ignores it below.
  if (auto it = sec.find("offload_param"); it != sec.end()) {
    const std::string p = name + ".offload_param";
    const json device =
        it->is_object() && it->contains("device") ? (*it)["device"] : json();
    if (t.zeroStage < 3 && !device.is_null() && device != "none")
      c.note(p + ".device: " + c.shown(p + ".device", (*it)["device"]) +
             " ignored at zero_optimization.stage " + str(t.zeroStage) +
             ", as DeepSpeed ignores it (it offloads parameters only at "
             "stage 3)");
    else
      parseOffloadParam(c, *it, t);
  }
  // Its deprecated switches, the same way.
  for (const char *key : {"cpu_offload_param", "cpu_offload_params"})
    if (auto it = sec.find(key); it != sec.end()) {
      if (t.zeroStage < 3 && it->is_boolean() && it->get<bool>())
        c.note(name + "." + key + ": true ignored at zero_optimization.stage " +
               str(t.zeroStage) + ", as DeepSpeed ignores it (it offloads "
               "parameters only at stage 3)");
      else
        parseCpuOffloadParam(c, key, *it, t);
    }
}

/// Hybrid sharding's and hpZ's groups against the `data` data-parallel
/// ranks: a group of all of them is plain ZeRO-3 (dropped); otherwise it
/// divides them, and the combinations dsc does not run are refused.
void checkDataInner(const Ctx &c, TrainConfig &t, int64_t data) {
  const std::string z = "zero_optimization.";
  for (auto [group, key] :
       {std::pair(&t.zeroShardGroup, "mics_shard_size"),
        std::pair(&t.zeroHpzGroup, "zero_hpz_partition_size")}) {
    if (*group == 0)
      continue;
    if (*group > data || data % *group != 0)
      c.fail(z + key + " (" + str(*group) +
             ") must divide the data-parallel size (" + str(data) + ")");
    if (*group == data) { // one group of every rank: ZeRO-3 as it is
      *group = 0;
      continue;
    }
    if (t.parallel.tensor > 1 || t.parallel.pipeline > 1)
      c.fail(z + key +
             ": groups of data-parallel ranks are not supported "
             "with tensor_parallel.autotp_size or pipeline.stages > 1");
    if (t.offloadOptimizer)
      c.fail(z + key + ": not supported with offload_optimizer");
  }
  if (t.zeroShardGroup && t.zeroHpzGroup)
    c.fail(z + "mics_shard_size and zero_hpz_partition_size: hybrid "
               "sharding and hpZ's secondary partitions are not supported "
               "together; give one");
  // Expert parallelism's groups are the data_inner groups too.
  const int64_t ep = t.parallel.expert;
  if (ep > 1) {
    if (data % ep != 0)
      c.fail("moe.ep_size (" + str(ep) +
             ") must divide the data-parallel size (" + str(data) + ")");
    if (t.zeroShardGroup || t.zeroHpzGroup)
      c.fail("moe.ep_size (" + str(ep) + ") > 1 with zero_optimization." +
             (t.zeroShardGroup ? "mics_shard_size" : "zero_hpz_partition_size") +
             ": not supported (both group the data-parallel ranks)");
    if (t.offloadOptimizer)
      c.fail("moe.ep_size (" + str(ep) + ") > 1 with offload_optimizer: "
             "not supported (the experts' state stays on the device)");
  }
}

/// tensor_parallel: DeepSpeed's AutoTP training section.
void parseTensorParallel(const Ctx &c, const json &sec, ParallelConfig &p) {
  c.object("tensor_parallel", sec);
  c.checkKeys("tensor_parallel", sec, {"autotp_size"});
  if (auto it = sec.find("autotp_size"); it != sec.end())
    p.tensor = c.integer("tensor_parallel.autotp_size", *it, 1, 1 << 16,
                         "an integer in [1, 65536]");
}

/// moe: DeepSpeed-MoE's layer arguments (deepspeed.moe.layer.MoE) as a
/// section: ep_size shards the experts; drop_tokens (false unless given:
/// Mixtral routes dropless) caps each expert at its capacity
/// (capacity_factor, min_capacity). eval_capacity_factor and use_rts are
/// checked and have no effect (evaluation uses the training capacity; the
/// drops are deterministic, by choice rank then token order).
void parseMoe(const Ctx &c, const json &sec, TrainConfig &t) {
  c.object("moe", sec);
  c.checkKeys("moe", sec,
              {"ep_size", "capacity_factor", "eval_capacity_factor",
               "min_capacity", "drop_tokens", "use_rts"});
  if (auto it = sec.find("ep_size"); it != sec.end())
    t.parallel.expert = c.integer("moe.ep_size", *it, 1, 1 << 16,
                                  "an integer in [1, 65536]");
  auto factor = [&](const char *key) {
    return c.number(std::string("moe.") + key, sec[key],
                    [](double v) { return v > 0 && v <= 1e6; },
                    "a number in (0, 1e6]");
  };
  if (sec.contains("capacity_factor"))
    t.moeCapacityFactor = factor("capacity_factor");
  if (sec.contains("eval_capacity_factor"))
    factor("eval_capacity_factor");
  if (auto it = sec.find("min_capacity"); it != sec.end())
    t.moeMinCapacity = c.nonNegative("moe.min_capacity", *it);
  if (auto it = sec.find("use_rts"); it != sec.end())
    c.boolean("moe.use_rts", *it);
  if (auto it = sec.find("drop_tokens"); it != sec.end())
    t.moeDropTokens = c.boolean("moe.drop_tokens", *it);
}

/// pipeline: DeepSpeed's keys (deepspeed/runtime/pipe, PipelineModule).
/// "auto" stages would come from the user's PipelineModule; dsc has none,
/// so it means one stage.
void parsePipeline(const Ctx &c, const json &sec, ParallelConfig &p) {
  c.object("pipeline", sec);
  c.checkKeys("pipeline", sec,
              {"stages", "partition", "seed_layers",
               "activation_checkpoint_interval", "pipe_partitioned",
               "grad_partitioned"});
  if (auto it = sec.find("stages"); it != sec.end()) {
    if (!(it->is_string() && it->get_ref<const std::string &>() == "auto"))
      p.pipeline = c.integer("pipeline.stages", *it, 1, 1 << 16,
                             "\"auto\" or an integer in [1, 65536]");
  }
  if (auto it = sec.find("partition"); it != sec.end()) {
    const std::string expected = "\"best\", \"parameters\" or \"uniform\"";
    p.partition = c.string("pipeline.partition", *it, expected);
    if (p.partition != "best" && p.partition != "parameters" &&
        p.partition != "uniform")
      c.bad("pipeline.partition", *it, expected);
  }
  if (auto it = sec.find("activation_checkpoint_interval"); it != sec.end())
    p.activationCheckpointInterval = c.nonNegative(
        "pipeline.activation_checkpoint_interval", *it);
  for (const char *k : {"seed_layers", "pipe_partitioned", "grad_partitioned"})
    if (auto it = sec.find(k); it != sec.end())
      c.boolean(std::string("pipeline.") + k, *it);
}

/// activation_checkpointing: DeepSpeed has no on/off key here; a model
/// uses checkpointing by calling deepspeed.checkpointing.checkpoint on its
/// layers, and includes this section exactly when it does. dsc has no model
/// code to call it, so the section's presence turns on per-layer
/// checkpointing (-dsc-remat per-layer: keep each layer's input, recompute
/// the layer in the backward, as Megatron's checkpoint_num_layers = 1).
void parseActivationCheckpointing(const Ctx &c, const json &sec,
                                  TrainConfig &t) {
  const std::string name = "activation_checkpointing";
  c.object(name, sec);
  c.checkKeys(name, sec,
              {"partition_activations", "contiguous_memory_optimization",
               "cpu_checkpointing", "number_checkpoints",
               "synchronize_checkpoint_boundary", "profile"});
  t.remat.perLayer = true;
  // Checkpoints split across the tensor-parallel ranks (nothing to split
  // without tensor slicing).
  if (auto it = sec.find("partition_activations"); it != sec.end())
    t.parallel.partitionActivations =
        c.boolean(name + ".partition_activations", *it);
  if (auto it = sec.find("cpu_checkpointing");
      it != sec.end() && c.boolean(name + ".cpu_checkpointing", *it))
    c.fail(name + ".cpu_checkpointing: true is not supported yet "
           "(offloading checkpoints to CPU memory is not implemented yet)");
  // The static arena already keeps checkpoints in one contiguous region,
  // sized by the planner: these only tune DeepSpeed's buffer.
  auto it = sec.find("number_checkpoints");
  if (it != sec.end() && !it->is_null())
    c.positive(name + ".number_checkpoints", *it);
  for (const char *k : {"contiguous_memory_optimization",
                        "synchronize_checkpoint_boundary", "profile"}) {
    auto jt = sec.find(k);
    if (jt != sec.end())
      c.boolean(name + "." + k, *jt);
  }
}

} // namespace

} // namespace config_reader

using namespace config_reader;

TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 int64_t worldSize) {
  TrainConfigInputs in;
  in.worldSize = worldSize;
  return parseTrainConfigText(text, origin, in);
}

TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 const TrainConfigInputs &in) {
  Ctx c(origin);
  const int64_t worldSize = in.worldSize;
  if (worldSize < 1)
    c.fail("world size " + str(worldSize) + " is not allowed; expected >= 1");
  json j = parseJson(text, c);
  resolveAuto(j, c, in);
  TrainConfig t;
  t.worldSize = worldSize;
  std::optional<int64_t> tb, mb, ga;
  std::string rematPolicy; // dsc.remat.policy; empty: derived

  static const std::vector<std::string> topKeys = {
      "train_batch_size",
      "train_micro_batch_size_per_gpu",
      "gradient_accumulation_steps",
      "gradient_clipping",
      "steps_per_print",
      "wall_clock_breakdown",
      "flops_profiler",
      "comms_logger",
      "csv_monitor",
      "tensorboard",
      "optimizer",
      "scheduler",
      "fp16",
      "bf16",
      "bfloat16",
      "zero_optimization",
      "activation_checkpointing",
      "sparse_attention",
      "transformer_kernel",
      "lora",
      "tensor_parallel",
      "pipeline",
      "moe",
      "dsc"};
  std::vector<std::string> ignoredTop; // keys DeepSpeed does not know
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string &k = it.key();
    const json &v = it.value();
    if (k == "train_batch_size")
      tb = c.positive(k, v);
    else if (k == "train_micro_batch_size_per_gpu")
      mb = c.positive(k, v);
    else if (k == "gradient_accumulation_steps")
      ga = c.positive(k, v);
    else if (k == "gradient_clipping")
      t.gradClip = c.nonNegativeNumber(k, v);
    else if (k == "steps_per_print")
      t.stepsPerPrint = c.positive(k, v);
    else if (k == "wall_clock_breakdown")
      t.wallClockBreakdown = c.boolean(k, v);
    else if (k == "flops_profiler")
      parseFlopsProfiler(c, v, t);
    else if (k == "comms_logger")
      parseCommsLogger(c, v, t);
    else if (k == "aio")
      parseAio(c, v, t.aio);
    else if (k == "csv_monitor")
      parseMonitor(c, k, v, t.csvMonitor);
    else if (k == "tensorboard")
      parseMonitor(c, k, v, t.tensorboard);
    else if (k == "optimizer")
      parseOptimizer(c, v, t.optimizer);
    else if (k == "scheduler")
      parseScheduler(c, v, t.scheduler);
    else if (k == "fp16")
      parseFp16(c, k, v, t.precision);
    else if (k == "bf16" || k == "bfloat16") { // DeepSpeed accepts both names
      // ...and reads bf16 when both are there; neither is dropped silently.
      if (j.contains("bf16") && j.contains("bfloat16"))
        c.fail("bf16 and bfloat16 are the same section under two names; "
               "give one (DeepSpeed would read bf16 and ignore bfloat16)");
      parseBf16(c, k, v, t.precision);
    }
    else if (k == "zero_optimization")
      parseZero(c, v, t);
    else if (k == "activation_checkpointing")
      parseActivationCheckpointing(c, v, t);
    else if (k == "sparse_attention")
      // DeepSpeed has no "enabled" switch here: the section's presence
      // turns block-sparse attention on.
      parseSparseAttention(c, v, t.sparseAttention);
    else if (k == "transformer_kernel")
      parseTransformerKernel(c, v, t);
    else if (k == "dsc")
      parseDsc(c, v, t, rematPolicy);
    else if (k == "lora")
      parseLora(c, "lora", v, t.lora);
    else if (k == "tensor_parallel")
      parseTensorParallel(c, v, t.parallel);
    else if (k == "pipeline")
      parsePipeline(c, v, t.parallel);
    else if (k == "moe")
      parseMoe(c, v, t);
    else if (k == "data_types")
      parseTableSection(c, k, v);
    else if (!handleTableKey(c, "", k, v))
      // DeepSpeedConfig reads the top-level keys it knows one by one.
      unknownOrIgnored(c, "", k, merged(topKeys, deepSpeedKeysIn("")),
                       /*ignores=*/true, ignoredTop);
  }
  noteIgnored(c, "", ignoredTop);
  // DeepSpeed's PipelineModule checkpoints every `interval` layers: dsc's
  // per-layer checkpointing over groups of that many layers.
  if (t.parallel.activationCheckpointInterval >= 1) {
    t.remat.perLayer = true;
    t.remat.layerInterval = t.parallel.activationCheckpointInterval;
  }
  resolveRemat(c, rematPolicy, t.remat);
  // prescale_gradients and gradient_predivide_factor only move where the
  // mean's division happens (noted as without effect by the table);
  // DeepSpeed's ZeRO-2 and ZeRO-3 optimizers assert that they are off
  // when they reduce-scatter (stage_1_and_2.py, stage3.py).
  {
    const bool prescale =
        j.contains("prescale_gradients") && j["prescale_gradients"] == true;
    double predivide = 1.0;
    if (auto it = j.find("gradient_predivide_factor");
        it != j.end() && it->is_number()) {
      predivide = it->get<double>();
      if (!(predivide > 0))
        c.bad("gradient_predivide_factor", *it, "a number > 0");
    }
    bool reduceScatter = true;
    if (auto z = j.find("zero_optimization"); z != j.end() && z->is_object())
      if (auto it = z->find("reduce_scatter");
          it != z->end() && it->is_boolean())
        reduceScatter = it->get<bool>();
    if (t.zeroStage >= 2 && reduceScatter && (prescale || predivide != 1.0))
      c.fail((prescale ? std::string("prescale_gradients: true")
                       : "gradient_predivide_factor: " +
                             c.shown("gradient_predivide_factor",
                                     j["gradient_predivide_factor"])) +
             " with zero_optimization.stage " + str(t.zeroStage) +
             " and reduce_scatter true is refused by DeepSpeed (\"" +
             (prescale ? "pre-scale gradients"
                       : "gradient_predivide_factor "
                         "!= 1.0") +
             " is not yet supported with ZeRO-" + str(t.zeroStage) +
             " with reduce scatter enabled\"); set reduce_scatter false "
             "or drop it");
  }
  // DeepSpeed asserts the same.
  if (t.precision.fp16 && t.precision.bf16)
    c.fail("fp16.enabled and bf16.enabled cannot both be true");
  // 1-bit Adam and 0/1 Adam with ZeRO: meaningless rather than missing.
  // Their compressed steps add each rank's own whole gradient to its own
  // whole momentum before anything is reduced, so neither gradients (stage
  // 2, 3) nor momenta can be sharded; ZeRO-1 could shard only the frozen
  // variance, and its sharded update would all-gather the parameters in
  // fp32 every step: 4 bytes per parameter against the compressed
  // exchange's 1/4 (the signs' all-to-all and all-gather), the 16x the
  // compression exists to save.
  auto compressedWithZero = [&](const char *optimizer) {
    c.fail("zero_optimization.stage " + str(t.zeroStage) +
           " with optimizer " + optimizer +
           ": its compressed steps add each rank's own whole gradient to "
           "its own whole momentum before any reduction, so " +
           (t.zeroStage >= 2
                ? std::string("gradients cannot be sharded")
                : std::string("only the frozen variance could be sharded, "
                              "and the sharded update's fp32 all-gather of "
                              "the parameters would send 16x the bytes the "
                              "compression saves")) +
           "; use stage 0");
  };
  if (t.zeroStage > 0 && t.optimizer.type == OptimizerType::OneBitAdam)
    compressedWithZero("OneBitAdam");
  if (t.optimizer.type == OptimizerType::OneBitLamb) {
    if (t.zeroStage > 0)
      c.fail("zero_optimization.stage " + str(t.zeroStage) +
             " with optimizer OneBitLamb: LAMB's trust ratio needs whole "
             "parameters, which ZeRO shards across ranks");
    if (t.precision.fp16)
      c.fail("fp16 with optimizer OneBitLamb is not supported yet (use "
             "bf16 or fp32: no step is ever skipped there)");
  }
  if (t.optimizer.type == OptimizerType::ZeroOneAdam) {
    if (t.zeroStage > 0)
      compressedWithZero("ZeroOneAdam");
    // A skipped step would have to leave the interval policy where it
    // was, which DeepSpeed's engine does by not calling the optimizer.
    if (t.precision.fp16)
      c.fail("fp16 with optimizer ZeroOneAdam is not supported yet (use "
             "bf16 or fp32: no step is ever skipped there)");
  }
  if (t.zeroStage > 0 && t.optimizer.type == OptimizerType::Lamb)
    c.fail("zero_optimization.stage " + str(t.zeroStage) +
           " with optimizer Lamb: LAMB's trust ratio needs whole "
           "parameters, which ZeRO shards across ranks");

  if (t.zeroStage > 0 && t.optimizer.type == OptimizerType::Adafactor)
    c.fail("zero_optimization.stage " + str(t.zeroStage) +
           " with optimizer Adafactor: its factored second moment and update "
           "RMS need whole parameters, which ZeRO shards across ranks");
  checkOffloadCombination(c, t);
  if (j.contains("aio") && t.offloadNvmePath.empty())
    c.note("aio: it tunes ZeRO-Infinity's swap file; without "
           "zero_optimization.offload_optimizer device \"nvme\" there is "
           "none, so it has no effect");
  if (t.optimizer.type == OptimizerType::Adafactor &&
      t.optimizer.relativeStep && t.scheduler.type != SchedulerType::None)
    c.fail("scheduler with optimizer Adafactor and relative_step true: "
           "Adafactor computes its own learning rate; set relative_step "
           "false and an lr to use a scheduler");

  const ParallelConfig &par = t.parallel;
  if (par.tensor > 1) {
    const std::string tp =
        "tensor_parallel.autotp_size " + str(par.tensor) + " with ";
    if (t.optimizer.type == OptimizerType::Adam8bit ||
        t.optimizer.type == OptimizerType::AdamW8bit ||
        t.optimizer.type == OptimizerType::Adafactor)
      c.fail(tp + "optimizer " +
             (t.optimizer.type == OptimizerType::Adafactor
                  ? "Adafactor: its factored second moment spans whole "
                    "matrices"
                  : std::string(t.optimizer.type == OptimizerType::Adam8bit
                                    ? "Adam8bit"
                                    : "AdamW8bit") +
                        ": its per-block scales span whole parameters") +
             ", which tensor slicing splits across ranks");
    if (t.optimizer.type == OptimizerType::Lamb ||
        t.optimizer.type == OptimizerType::OneBitLamb)
      c.fail(tp + "optimizer " +
             (t.optimizer.type == OptimizerType::Lamb ? "Lamb" : "OneBitLamb") +
             ": LAMB's trust ratio needs whole parameters, which tensor "
             "slicing splits across ranks");
  }
  if ((par.virtualStages > 1) != (par.schedule == "interleaved"))
    c.fail("dsc.pipeline_virtual_stages (" + str(par.virtualStages) +
           ") and dsc.pipeline_schedule (\"" + par.schedule +
           "\"): more than one virtual stage per rank is the interleaved "
           "schedule, and it needs more than one");
  const int64_t modelRanks = par.tensor * par.pipeline;
  if (worldSize % modelRanks != 0)
    c.fail("the world size (" + str(worldSize) +
           ") is not divisible by tensor_parallel.autotp_size (" +
           str(par.tensor) + ") * pipeline.stages (" + str(par.pipeline) +
           ") = " + str(modelRanks));

  checkDataInner(c, t, worldSize / modelRanks);

  // DeepSpeed's rule (DeepSpeedConfig._set_batch_related_parameters), over
  // the data-parallel ranks.
  using i128 = __int128;
  const int64_t w = worldSize / modelRanks;
  const std::string W =
      modelRanks == 1 ? "world size (" + str(w) + ")"
                      : "data-parallel size (" + str(w) + ")";
  auto need = [&](int64_t total, int64_t divisor, const std::string &what) {
    if (total % divisor != 0)
      c.fail("train_batch_size (" + str(total) + ") is not divisible by " +
             what + " = " + str(divisor));
  };
  if (tb && mb && ga) {
    if (i128(*mb) * *ga * w != *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") must equal train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * gradient_accumulation_steps (" + str(*ga) + ") * " + W);
  } else if (tb && mb) {
    if (i128(*mb) * w > *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") is smaller than train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * " + W);
    need(*tb, *mb * w,
         "train_micro_batch_size_per_gpu (" + str(*mb) + ") * " + W);
    ga = *tb / (*mb * w);
  } else if (tb && ga) {
    if (i128(*ga) * w > *tb)
      c.fail("train_batch_size (" + str(*tb) +
             ") is smaller than gradient_accumulation_steps (" + str(*ga) +
             ") * " + W);
    need(*tb, *ga * w,
         "gradient_accumulation_steps (" + str(*ga) + ") * " + W);
    mb = *tb / (*ga * w);
  } else if (mb && ga) {
    i128 total = i128(*mb) * *ga * w;
    if (total > std::numeric_limits<int64_t>::max())
      c.fail("train_micro_batch_size_per_gpu (" + str(*mb) +
             ") * gradient_accumulation_steps (" + str(*ga) + ") * " + W +
             " is too large");
    tb = int64_t(total);
  } else if (tb) {
    ga = 1;
    if (w > *tb)
      c.fail("train_batch_size (" + str(*tb) + ") is smaller than the " + W);
    need(*tb, w, W);
    mb = *tb / w;
  } else if (mb) {
    ga = 1;
    tb = *mb * w;
  } else {
    c.fail("train_batch_size or train_micro_batch_size_per_gpu must be set "
           "(train_batch_size = train_micro_batch_size_per_gpu * "
           "gradient_accumulation_steps * world size)");
  }
  t.trainBatchSize = *tb;
  t.microBatch = *mb;
  t.gradAccum = *ga;
  if (!j.contains("optimizer"))
    c.note("no optimizer section (DeepSpeed leaves the optimizer to the "
           "training script): dsc trains AdamW with lr 0.001, betas [0.9, "
           "0.999], eps 1e-8, weight_decay 0");
  t.resolvedJson = resolvedText(j, c, t);
  t.notes = std::move(c.notes);
  return t;
}

int64_t TrainConfig::moeCapacity(int64_t tokens, int64_t topK,
                                 int64_t experts) const {
  if (!moeDropTokens || experts < 1)
    return 0;
  const auto capacity = int64_t(std::ceil(double(topK * tokens) *
                                          moeCapacityFactor / double(experts)));
  return std::min(tokens, std::max(capacity, moeMinCapacity));
}

TrainConfig parseTrainConfig(const std::string &file, int64_t worldSize) {
  return parseTrainConfigText(readFile(file), file, worldSize);
}

TrainConfig parseTrainConfig(const std::string &file,
                             const TrainConfigInputs &inputs) {
  return parseTrainConfigText(readFile(file), file, inputs);
}

} // namespace dsc
