//===- DeepSpeedKeys.cpp - DeepSpeed's config schema, as data -------------===//
//
// Every key DeepSpeed's config parser knows, with its type, DeepSpeed's
// default and what dsc does with it. The readers (DeepSpeedKeyChecks.cpp)
// take the no-effect and not-supported treatments from here; the keys dsc
// implements are listed so that the documentation (deepSpeedKeysMarkdown, printed by
// `dsc-run config-keys` into docs/config.md) covers the whole schema.
// Sources: deepspeed/runtime/config.py and constants.py, zero/config.py,
// zero/offload_config.py, precision_config.py, activation_checkpointing/
// config.py, monitor/config.py, profiling/config.py, comm/config.py,
// compile config, hybrid_engine, data_pipeline, elasticity, autotuning.
//
//===----------------------------------------------------------------------===//

#include "dsc/Frontend/Config.h"

namespace dsc {

namespace {

constexpr KeyTreatment I = KeyTreatment::Implemented;
constexpr KeyTreatment N = KeyTreatment::NoEffect;
constexpr KeyTreatment U = KeyTreatment::NotSupported;
constexpr const char *kEnabledFalse = "{enabled:false}";

const char *kBf16NoScale =
    "DeepSpeed's bf16 mode does not scale the loss and ignores it";
const char *kZeroTuning =
    "tunes how DeepSpeed buckets, overlaps or schedules ZeRO's "
    "collectives; dsc plans its own";
const char *kStage3Tuning =
    "tunes DeepSpeed's stage-3 parameter fetching; dsc's step gathers each "
    "shard where the compiled schedule needs it";
const char *kMonitor =
    "sending training metrics to this service; dsc-run train writes them "
    "to files: --log-json (JSON lines), csv_monitor, tensorboard";
/// A key of a section dsc accepts only switched off: read by DeepSpeed
/// with the section enabled, so its type is checked and nothing else.
const char *kOff = "read only with the section enabled; its type is checked";
/// The `enabled` key of such a section.
const char *kSwitch = "turns the section on";
const char *kTorchCompile =
    "torch.compile of the model, as older DeepSpeed versions passed it; "
    "dsc compiles the whole training step itself, so no torch.compile "
    "setting applies";
const char *kDeepCompileTuning =
    "tunes DeepCompile's graph passes; dsc's compiler plans the step's "
    "collectives and memory itself";

const std::vector<DeepSpeedKey> kKeys = {
    // Batch, clipping, printing.
    {"train_batch_size", "int", "null", I, nullptr,
     "micro-batch * accumulation * data-parallel ranks"},
    {"train_micro_batch_size_per_gpu", "int", "null", I, nullptr,
     "sequences per rank per micro-step"},
    {"gradient_accumulation_steps", "int", "null", I, nullptr,
     "micro-steps per optimizer step"},
    {"gradient_clipping", "number", "1.0", I, nullptr,
     "global-norm clipping; absent: no clipping (dsc's default)"},
    {"steps_per_print", "int", "null", I, nullptr,
     "dsc-run train prints every that many steps"},
    {"optimizer", "object", "null", I, nullptr,
     "Adam, AdamW, Lamb, SGD, OneBitAdam, ZeroOneAdam, OneBitLamb, "
     "Adam8bit, AdamW8bit, Adafactor"},
    {"scheduler", "object", "null", I, nullptr,
     "WarmupLR, WarmupDecayLR, WarmupCosineLR"},
    {"zero_allow_untested_optimizer", "bool", "false", N, nullptr,
     "dsc runs ZeRO with its own optimizers only; there is no untested one "
     "to allow"},
    {"zero_force_ds_cpu_optimizer", "bool", "true", N, nullptr,
     "picks DeepSpeed's CPU optimizer for offload; dsc's offloaded update "
     "always runs on the host"},
    {"prescale_gradients", "bool", "false", N, nullptr,
     "DeepSpeed divides the gradients by the data-parallel size before the "
     "reduction (true) or after it (false); both give the mean, which dsc "
     "computes in fp32, where dividing first to keep fp16 sums in range "
     "changes nothing (true with ZeRO stage 2 or 3 and reduce_scatter is "
     "refused, as DeepSpeed refuses it)"},
    {"gradient_predivide_factor", "number", "1.0", N, nullptr,
     "DeepSpeed divides by it before the reduction and by the data-parallel "
     "size over it after: the mean again, which dsc computes in fp32 (must "
     "be > 0; other than 1 with ZeRO stage 2 or 3 and reduce_scatter is "
     "refused, as DeepSpeed refuses it)"},
    {"gradient_allreduce_op", "string", "\"mean\"", N, "\"mean\"",
     "the default: gradients are averaged over the data-parallel ranks"},
    {"communication_data_type", "string", "null", N, "null|\"fp32\"",
     "dsc reduces gradients in fp32 (16-bit reductions are not supported)"},
    {"seq_parallel_communication_data_type", "string", "\"fp32\"", N,
     "\"fp32\"", "dsc has no sequence parallelism"},
    {"disable_allgather", "bool", "false", N, nullptr,
     "chose broadcasts over all-gathers in DeepSpeed's legacy ZeRO; dsc "
     "plans its own collectives"},
    {"sparse_gradients", "bool", "false", U, "false",
     "sparse embedding gradients"},
    {"wall_clock_breakdown", "bool", "false", I, nullptr,
     "each printed step also gives the time of its micro-steps (forward "
     "and backward) and of its optimizer step"},
    {"memory_breakdown", "bool", "false", N, nullptr,
     "dsc prints no per-step memory breakdown (dsc-run estimate and "
     "--memory-report give the planned memory)"},
    {"dump_state", "bool", "false", N, nullptr,
     "prints DeepSpeed's engine state at start-up"},
    {"log_level", "string", "null", N, nullptr, "DeepSpeed's logger level"},
    {"dataloader_drop_last", "bool", "false", N, nullptr,
     "configures DeepSpeed's data loader; dsc reads --data itself"},
    {"graph_harvesting", "bool", "false", N, nullptr,
     "CUDA-graph capture in DeepSpeed's engine; dsc's CUDA backend captures "
     "its own"},
    {"managed_gradient_accumulation", "bool", "true", N, nullptr,
     "engine bookkeeping of DeepSpeed's accumulation boundaries"},
    {"use_data_before_expert_parallelism", "bool", "false", N, nullptr,
     "orders DeepSpeed-MoE's all-to-all and data-parallel groups; dsc's "
     "expert-parallel groups are consecutive data ranks (moe.ep_size)"},
    {"timers", "object", "{}", N, nullptr,
     "DeepSpeed's throughput timer (dsc-run train prints tokens/s)"},
    {"checkpoint", "object", "{}", N, nullptr,
     "DeepSpeed's checkpoint tag validation and storage options; dsc "
     "writes the files --checkpoint names"},
    {"vocabulary_size", "int", "null", N, nullptr,
     "dsc reads the vocabulary from the model config"},

    // Precision.
    {"fp16", "object", "{}", I, nullptr,
     "loss scaling and f16 rounding (-dsc-mixed-precision)"},
    {"fp16.enabled", "bool", "false", I, nullptr, ""},
    {"fp16.loss_scale", "number", "0", I, nullptr,
     "0: dynamic; else a static scale in (0, 3.4e38]"},
    {"fp16.initial_scale_power", "int", "16", I, nullptr,
     "dynamic scaling starts at 2^this"},
    {"fp16.loss_scale_window", "int", "1000", I, nullptr, ""},
    {"fp16.hysteresis", "int", "2", I, nullptr, ""},
    {"fp16.consecutive_hysteresis", "bool", "false", I, nullptr, ""},
    {"fp16.min_loss_scale", "number", "1", I, nullptr, ""},
    {"fp16.auto_cast", "bool", "false", U, "false",
     "casting the model's inputs to fp16"},
    {"fp16.fp16_master_weights_and_grads", "bool", "false", U, "false",
     "fp16 master weights (dsc keeps fp32 master weights and gradients)"},
    {"bf16", "object", "{}", I, nullptr, "bf16 rounding (no loss scaling)"},
    {"bfloat16", "object", "{}", I, nullptr, "the old name of bf16"},
    {"bf16.enabled", "bool", "false", I, nullptr, ""},
    {"bf16.immediate_grad_update", "bool", "false", N, nullptr,
     "when DeepSpeed's bf16 optimizer applies accumulated gradients; the "
     "step's result is the same"},
    {"bf16.check_grad_overflow", "bool", "true", N, nullptr,
     "dsc checks every step's gradients for non-finite values"},
    {"bf16.bf16_master_weights_and_grads", "bool", "false", U, "false",
     "bf16 master weights (dsc keeps fp32 master weights and gradients)"},
    {"bf16.bf16_optimizer_states", "bool", "false", U, "false",
     "bf16 optimizer states"},
    {"bf16.loss_scale", "number", "", N, nullptr, kBf16NoScale},
    {"bf16.initial_scale_power", "int", "", N, nullptr, kBf16NoScale},
    {"bf16.loss_scale_window", "int", "", N, nullptr, kBf16NoScale},
    {"bf16.hysteresis", "int", "", N, nullptr, kBf16NoScale},
    {"bf16.consecutive_hysteresis", "bool", "", N, nullptr, kBf16NoScale},
    {"bf16.min_loss_scale", "number", "", N, nullptr, kBf16NoScale},
    {"data_types", "object", "{}", I, nullptr, "see its keys"},
    {"data_types.grad_accum_dtype", "string", "null", N, "null|\"fp32\"",
     "dsc accumulates gradients in fp32 (16-bit accumulation is not "
     "supported)"},
    {"data_types.param_dtype", "string", "null", U, "null|\"fp32\"",
     "parameters in 16 bits (use the fp16 or bf16 section)"},
    {"data_types.buffer_dtype", "string", "null", N, "null|\"fp32\"",
     "the models dsc builds have no buffers"},
    {"amp", "object", "{}", U, kEnabledFalse,
     "NVIDIA Apex AMP (use the fp16 or bf16 section); its other keys are "
     "apex.amp.initialize's arguments",
     true},
    {"amp.enabled", "bool", "false", U, "false", kSwitch},
    {"amp.opt_level", "string", "\"O1\"", N, nullptr, kOff},
    {"amp.cast_model_type", "any", "", N, nullptr, kOff},
    {"amp.patch_torch_functions", "bool", "", N, nullptr, kOff},
    {"amp.keep_batchnorm_fp32", "any", "", N, nullptr, kOff},
    {"amp.master_weights", "bool", "", N, nullptr, kOff},
    {"amp.loss_scale", "any", "", N, nullptr, kOff},
    {"amp.cast_model_outputs", "any", "", N, nullptr, kOff},
    {"amp.num_losses", "int", "1", N, nullptr, kOff},
    {"amp.verbosity", "int", "1", N, nullptr, kOff},
    {"amp.min_loss_scale", "number", "", N, nullptr, kOff},
    {"amp.max_loss_scale", "number", "", N, nullptr, kOff},
    {"torch_autocast", "object", "{}", U, kEnabledFalse,
     "torch.autocast (use the fp16 or bf16 section)", true},
    {"torch_autocast.enabled", "bool", "false", U, "false", kSwitch},
    {"torch_autocast.dtype", "string", "null", N, nullptr, kOff},
    {"torch_autocast.lower_precision_safe_modules", "list", "null", N, nullptr,
     kOff},

    // ZeRO.
    {"zero_optimization", "object", "{}", I, nullptr,
     "stages 0-3 (-dsc-zero); a bare boolean means stage 1 or 0"},
    {"zero_optimization.stage", "int", "0", I, nullptr, ""},
    {"zero_optimization.reduce_bucket_size", "int", "500000000", I, nullptr,
     "elements per gradient reduction bucket (-dsc-bucket-collectives)"},
    {"zero_optimization.allgather_bucket_size", "int", "500000000", I, nullptr,
     "elements per gather bucket of updated shards"},
    {"zero_optimization.stage3_param_persistence_threshold", "int", "100000", I,
     nullptr, "stage 3 keeps smaller parameters whole"},
    {"zero_optimization.param_persistence_threshold", "int", "100000", I,
     nullptr, "the same (DeepSpeed's field name)"},
    {"zero_optimization.contiguous_gradients", "bool", "true", N, nullptr,
     "dsc's memory plan places every gradient"},
    {"zero_optimization.reduce_scatter", "bool", "true", N, nullptr,
     kZeroTuning},
    {"zero_optimization.overlap_comm", "bool", "null", I, nullptr,
     "collectives run beside the compute (CPU ranks: a communication "
     "thread; an instruction waits only for those whose memory it touches) "
     "and ZeRO-3's step gathers the next parameters ahead of their use; "
     "null: on for stage 3 only, as DeepSpeed"},
    {"zero_optimization.allgather_partitions", "bool", "true", N, nullptr,
     kZeroTuning},
    {"zero_optimization.use_multi_rank_bucket_allreduce", "bool", "true", N,
     nullptr, kZeroTuning},
    {"zero_optimization.round_robin_gradients", "bool", "false", N, nullptr,
     kZeroTuning},
    {"zero_optimization.sub_group_size", "int>=0", "1000000000", N, nullptr,
     "the optimizer's sub-groups for offload; dsc updates each shard whole"},
    {"zero_optimization.load_from_fp32_weights", "bool", "true", N, nullptr,
     "dsc's checkpoints always hold fp32 weights"},
    {"zero_optimization.elastic_checkpoint", "bool", "false", N, nullptr,
     "dsc's checkpoints hold whole tensors, loadable on any world size"},
    {"zero_optimization.ignore_unused_parameters", "bool", "true", N, nullptr,
     "every parameter of a dsc model is used"},
    {"zero_optimization.legacy_stage1", "bool", "false", N, nullptr,
     "DeepSpeed's old stage-1 implementation"},
    {"zero_optimization.memory_efficient_linear", "bool", "true", N, nullptr,
     "DeepSpeed's stage-3 linear-layer memory saving; dsc plans "
     "its own memory"},
    {"zero_optimization.stage3_prefetch_bucket_size", "int", "50000000", I,
     nullptr,
     "with overlap_comm, the most parameter elements stage 3 gathers ahead "
     "of their use (-dsc-overlap-collectives); 0: none"},
    {"zero_optimization.prefetch_bucket_size", "int", "50000000", I, nullptr,
     "stage3_prefetch_bucket_size's other name"},
    {"zero_optimization.stage3_max_live_parameters", "int>=0", "1000000000", N,
     nullptr, kStage3Tuning},
    {"zero_optimization.max_live_parameters", "int>=0", "1000000000", N, nullptr,
     kStage3Tuning},
    {"zero_optimization.stage3_max_reuse_distance", "int>=0", "1000000000", N,
     nullptr, kStage3Tuning},
    {"zero_optimization.max_reuse_distance", "int>=0", "1000000000", N, nullptr,
     kStage3Tuning},
    {"zero_optimization.stage3_model_persistence_threshold", "int>=0",
     "9223372036854775807", N, nullptr, kStage3Tuning},
    {"zero_optimization.model_persistence_threshold", "int>=0",
     "9223372036854775807", N, nullptr, kStage3Tuning},
    {"zero_optimization.stage3_module_granularity_threshold", "int", "0", N,
     nullptr, kStage3Tuning},
    {"zero_optimization.module_granularity_threshold", "int", "0", N, nullptr,
     kStage3Tuning},
    {"zero_optimization.stage3_use_all_reduce_for_fetch_params", "bool",
     "false", N, nullptr, kStage3Tuning},
    {"zero_optimization.use_all_reduce_for_fetch_params", "bool", "false", N,
     nullptr, kStage3Tuning},
    {"zero_optimization.stage3_allgather_sequential", "bool", "false", N,
     nullptr, kStage3Tuning},
    {"zero_optimization.allgather_sequential", "bool", "false", N, nullptr,
     kStage3Tuning},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "bool",
     "false", N, nullptr, "dsc-run --save always writes whole fp32 weights"},
    {"zero_optimization.gather_16bit_weights_on_model_save", "bool", "false", N,
     nullptr, "dsc-run --save always writes whole fp32 weights"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", "bool",
     "false", N, nullptr, "dsc-run --save always writes whole fp32 weights"},
    {"zero_optimization.mics_hierarchical_params_gather", "bool", "false", N,
     nullptr, kZeroTuning},
    {"zero_optimization.pipeline_loading_checkpoint", "bool", "false", N,
     nullptr, "DeepSpeed's checkpoint loading into pipelines"},
    {"zero_optimization.override_module_apply", "bool", "true", N, nullptr,
     "DeepSpeed's hook on torch.nn.Module.apply"},
    {"zero_optimization.log_trace_cache_warnings", "bool", "false", N, nullptr,
     "DeepSpeed's stage-3 trace warnings"},
    {"zero_optimization.enable_sanity_checks", "bool", "false", N, nullptr,
     "DeepSpeed's stage-3 debugging checks"},
    {"zero_optimization.cpu_offload_use_pin_memory", "bool", "false", N,
     nullptr, "the deprecated cpu_offload's pinning; offload_optimizer."
     "pin_memory sets it"},
    {"zero_optimization.offload_param", "object", "null", I, nullptr,
     "stage 3: device \"cpu\" keeps the parameter shards in host memory "
     "(with offload_optimizer), \"nvme\" in the swap file (with "
     "offload_optimizer on NVMe, the same nvme_path); below stage 3 it is "
     "noted as ignored, as DeepSpeed ignores it there"},
    {"zero_optimization.offload_optimizer", "object", "null", I, nullptr,
     "ZeRO-Offload: device \"cpu\" keeps optimizer state and fp32 master "
     "weights in host memory and updates there (stages 1-3); \"nvme\" "
     "(ZeRO-Infinity) keeps them in a swap file in nvme_path, read and "
     "written around each host update"},
    {"zero_optimization.cpu_offload", "bool", "null", I, nullptr,
     "deprecated: true means offload_optimizer.device \"cpu\""},
    {"zero_optimization.cpu_offload_param", "bool", "null", I, nullptr,
     "deprecated: true means offload_param.device \"cpu\""},
    {"zero_optimization.cpu_offload_params", "bool", "null", I, nullptr,
     "deprecated: true means offload_param.device \"cpu\""},
    {"zero_optimization.zero_hpz_partition_size", "int", "1", I, nullptr,
     "ZeRO++ hpZ at stage 3: after the forward each rank keeps a secondary "
     "shard over groups of this many consecutive ranks (a node), from which "
     "the backward gathers (-dsc-zero hpz)"},
    {"zero_optimization.zero_quantized_weights", "bool", "false", I, nullptr,
     "ZeRO++ qwZ: stage 3's parameter all-gathers in int8 "
     "(-dsc-zero quantized-weights)"},
    {"zero_optimization.zero_quantized_nontrainable_weights", "bool", "false",
     U, "false", "ZeRO++ quantized weights"},
    {"zero_optimization.zero_quantized_gradients", "bool", "false", I, nullptr,
     "ZeRO++ qgZ: stage 3's gradient reduce-scatters as all-to-alls of int4 "
     "codes (-dsc-zero quantized-gradients)"},
    {"zero_optimization.zeropp_loco_param", "object", "null", U, "null",
     "ZeRO++ LoCo error feedback"},
    {"zero_optimization.mics_shard_size", "int", "-1", I, nullptr,
     "hybrid sharding (MiCS, FSDP's HYBRID_SHARD) at stage 3: ZeRO within "
     "groups of this many consecutive ranks, gradients all-reduced across "
     "the groups (-dsc-zero hybrid)"},
    {"zero_optimization.zenflow", "object", "null", U, "null",
     "ZenFlow offloaded updates"},
    {"zero_optimization.leaf_module", "object", "{}", N, nullptr,
     "marks modules DeepSpeed's stage 3 fetches whole"},

    // Parallelism and layers.
    {"activation_checkpointing", "object", "null", I, nullptr,
     "per-layer checkpointing (-dsc-remat)"},
    {"pipeline", "object", "{}", I, nullptr,
     "stages, partition, activation_checkpoint_interval"},
    {"tensor_parallel", "object", "{}", I, nullptr, "autotp_size"},
    {"moe", "object", "{}", I, nullptr,
     "DeepSpeed-MoE's layer arguments as a section: ep_size (expert "
     "parallelism), drop_tokens (false unless given: dropless), "
     "capacity_factor and min_capacity (each expert's capacity when "
     "dropping); eval_capacity_factor and use_rts are checked without "
     "effect"},
    {"sparse_attention", "object", "null", I, nullptr,
     "block-sparse attention"},
    {"hybrid_engine", "object", "{}", U, kEnabledFalse,
     "the RLHF hybrid training/inference engine"},
    {"hybrid_engine.enabled", "bool", "false", U, "false", kSwitch},
    {"hybrid_engine.max_out_tokens", "int", "512", N, nullptr, kOff},
    {"hybrid_engine.inference_tp_size", "int", "1", N, nullptr, kOff},
    {"hybrid_engine.release_inference_cache", "bool", "false", N, nullptr,
     kOff},
    {"hybrid_engine.pin_parameters", "bool", "true", N, nullptr, kOff},
    {"hybrid_engine.tp_gather_partition_size", "int", "8", N, nullptr, kOff},
    {"hybrid_engine.enable_cuda_graph", "bool", "false", N, nullptr, kOff},
    {"compile", "object", "{}", N, nullptr,
     "torch.compile and DeepCompile settings, each below"},
    {"compile.enabled", "bool", "false", N, nullptr, kTorchCompile},
    {"compile.disable", "bool", "false", N, nullptr, kTorchCompile},
    {"compile.backend", "string", "\"inductor\"", N, nullptr, kTorchCompile},
    {"compile.kwargs", "object", "{}", N, nullptr, kTorchCompile},
    {"compile.deepcompile", "bool", "false", N, nullptr,
     "DeepCompile: DeepSpeed's graph passes that schedule ZeRO's gathers, "
     "reductions and frees; dsc's compiler plans the step's collectives and "
     "memory itself"},
    {"compile.free_activation", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.free_activation_threshold", "int", "10485760", N, nullptr,
     kDeepCompileTuning},
    {"compile.offload_activation", "bool", "false", U, "false",
     "DeepCompile's activation offload to host memory"},
    {"compile.offload_activation_pin_memory", "bool", "true", N, nullptr,
     kDeepCompileTuning},
    {"compile.offload_opt_states", "bool", "false", U, "false",
     "DeepCompile's optimizer-state offload to host memory"},
    {"compile.double_buffer", "bool", "true", N, nullptr, kDeepCompileTuning},
    {"compile.symmetric_memory", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.debug_log", "bool", "false", N, nullptr, kDeepCompileTuning},
    {"compile.offload_parameters", "bool", "false", U, "false",
     "DeepCompile's parameter offload to host memory"},
    {"compile.sync_before_reduce", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.sync_after_reduce", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.sync_before_allgather", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.sync_after_allgather", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.keep_int_input_tensors", "bool", "true", N, nullptr,
     kDeepCompileTuning},
    {"compile.keep_all_input_tensors", "bool", "false", N, nullptr,
     kDeepCompileTuning},
    {"compile.passes", "list", "null", N,
     "null|[]|[\"z1\"]|[\"z3\"]|[\"autotp\"]",
     "DeepCompile's passes: z1, z3 and autotp emit collectives dsc plans "
     "itself; autosp (sequence parallelism) is not supported"},
    {"expert_parallel", "object", "null", U, nullptr,
     "DeepSpeed's automatic expert parallelism of its own MoE modules; "
     "dsc shards experts with the moe section (moe.ep_size)"},

    // Features dsc does not have.
    {"curriculum_learning", "object", "{}", U, kEnabledFalse,
     "curriculum learning", true},
    {"curriculum_learning.enabled", "bool", "false", U, "false", kSwitch},
    {"curriculum_learning.curriculum_type", "string", "", N, nullptr, kOff},
    {"curriculum_learning.min_difficulty", "int", "", N, nullptr, kOff},
    {"curriculum_learning.max_difficulty", "int", "", N, nullptr, kOff},
    {"curriculum_learning.schedule_type", "string", "", N, nullptr, kOff},
    {"curriculum_learning.schedule_config", "object", "", N, nullptr, kOff},
    {"data_efficiency", "object", "{}", U, kEnabledFalse,
     "data efficiency (data sampling and routing)", true},
    {"data_efficiency.enabled", "bool", "false", U, "false", kSwitch},
    {"data_efficiency.seed", "int", "1234", N, nullptr, kOff},
    {"data_efficiency.data_sampling", "object", "{}", N, nullptr, kOff},
    {"data_efficiency.data_routing", "object", "{}", N, nullptr, kOff},
    {"progressive_layer_drop", "object", "{}", U, kEnabledFalse,
     "progressive layer dropping", true},
    {"progressive_layer_drop.enabled", "bool", "false", U, "false", kSwitch},
    {"progressive_layer_drop.theta", "number", "1.0", N, nullptr, kOff},
    {"progressive_layer_drop.gamma", "number", "0.001", N, nullptr, kOff},
    {"eigenvalue", "object", "{}", U, kEnabledFalse, "eigenvalue computation",
     true},
    {"eigenvalue.enabled", "bool", "false", U, "false", kSwitch},
    {"eigenvalue.verbose", "bool", "false", N, nullptr, kOff},
    {"eigenvalue.max_iter", "int", "100", N, nullptr, kOff},
    {"eigenvalue.tol", "number", "0.01", N, nullptr, kOff},
    {"eigenvalue.stability", "number", "1e-06", N, nullptr, kOff},
    {"eigenvalue.gas_boundary_resolution", "int", "1", N, nullptr, kOff},
    {"eigenvalue.layer_name", "string", "\"bert.encoder.layer\"", N, nullptr,
     kOff},
    {"eigenvalue.layer_num", "int", "0", N, nullptr, kOff},
    {"compression_training", "object", "{}", U, nullptr,
     "compression training (quantization and pruning)"},
    {"weight_quantization", "object", "null", U, nullptr,
     "weight quantization"},
    {"elasticity", "object", "{}", U, kEnabledFalse, "elastic training", true},
    {"elasticity.enabled", "bool", "false", U, "false", kSwitch},
    {"elasticity.max_train_batch_size", "int", "2000", N, nullptr, kOff},
    {"elasticity.micro_batch_sizes", "list", "[2, 4, 6]", N, nullptr, kOff},
    {"elasticity.min_gpus", "int", "1", N, nullptr, kOff},
    {"elasticity.max_gpus", "int", "10000", N, nullptr, kOff},
    {"elasticity.num_gpus_per_node", "int", "1", N, nullptr, kOff},
    {"elasticity.model_parallel_size", "int", "1", N, nullptr, kOff},
    {"elasticity.min_time", "int", "0", N, nullptr, kOff},
    {"elasticity.prefer_larger_batch", "bool", "true", N, nullptr, kOff},
    {"elasticity.ignore_non_elastic_batch_info", "bool", "false", N, nullptr,
     kOff},
    {"elasticity.version", "number", "0.2", N, nullptr, kOff},
    {"autotuning", "object", "{}", U, kEnabledFalse, "the autotuner", true},
    {"autotuning.enabled", "bool", "false", U, "false", kSwitch},
    {"autotuning.fast", "bool", "true", N, nullptr, kOff},
    {"autotuning.results_dir", "string", "\"autotuning_results\"", N, nullptr,
     kOff},
    {"autotuning.exps_dir", "string", "\"autotuning_exps\"", N, nullptr, kOff},
    {"autotuning.overwrite", "bool", "true", N, nullptr, kOff},
    {"autotuning.start_profile_step", "int", "3", N, nullptr, kOff},
    {"autotuning.end_profile_step", "int", "5", N, nullptr, kOff},
    {"autotuning.metric", "string", "\"throughput\"", N, nullptr, kOff},
    {"autotuning.metric_path", "string", "null", N, nullptr, kOff},
    {"autotuning.tuner_type", "string", "\"gridsearch\"", N, nullptr, kOff},
    {"autotuning.tuner_early_stopping", "int", "5", N, nullptr, kOff},
    {"autotuning.tuner_num_trials", "int", "50", N, nullptr, kOff},
    {"autotuning.arg_mappings", "object", "null", N, nullptr, kOff},
    {"autotuning.model_info", "object", "null", N, nullptr, kOff},
    {"autotuning.model_info_path", "string", "null", N, nullptr, kOff},
    {"autotuning.mp_size", "int", "1", N, nullptr, kOff},
    {"autotuning.max_train_batch_size", "int", "null", N, nullptr, kOff},
    {"autotuning.min_train_batch_size", "int", "1", N, nullptr, kOff},
    {"autotuning.max_train_micro_batch_size_per_gpu", "int", "1024", N, nullptr,
     kOff},
    {"autotuning.min_train_micro_batch_size_per_gpu", "int", "1", N, nullptr,
     kOff},
    {"autotuning.num_tuning_micro_batch_sizes", "int", "3", N, nullptr, kOff},
    {"aio", "object", "{}", I, nullptr,
     "how ZeRO-Infinity's swap file is read and written: O_DIRECT requests "
     "on io_uring rings (pread/pwrite threads where the kernel refuses "
     "io_uring), each through an aligned staging slot"},
    {"aio.block_size", "int", "1048576", I, nullptr,
     "bytes per request, a multiple of 4096 (at most 256 MiB)"},
    {"aio.queue_depth", "int", "8", I, nullptr,
     "requests in flight per thread (1 with pread/pwrite); each thread "
     "stages queue_depth x block_size bytes of host memory"},
    {"aio.thread_count", "int", "1", I, nullptr,
     "threads that split each transfer into contiguous shares (DeepSpeed's "
     "old name of intra_op_parallelism)"},
    {"aio.intra_op_parallelism", "int", "1", I, nullptr,
     "threads that split each transfer into contiguous shares"},
    {"aio.single_submit", "bool", "false", I, nullptr,
     "submit each request on its own instead of a queue's worth at once"},
    {"aio.overlap_events", "bool", "true", I, nullptr,
     "submit the next request as soon as one completes; false: a whole "
     "queue completes first"},
    {"aio.use_gds", "bool", "false", N, nullptr,
     "GPUDirect Storage for DeepSpeed's NVMe reads"},
    {"nebula", "object", "{}", U, kEnabledFalse, "Nebula checkpointing", true},
    {"nebula.enabled", "bool", "false", U, "false", kSwitch},
    {"nebula.persistent_storage_path", "string", "null", N, nullptr, kOff},
    {"nebula.persistent_time_interval", "int", "100", N, nullptr, kOff},
    {"nebula.num_of_version_in_retention", "int", "2", N, nullptr, kOff},
    {"nebula.enable_nebula_load", "bool", "true", N, nullptr, kOff},
    {"nebula.nebula_load_path", "string", "null", N, nullptr, kOff},

    // Monitoring and profiling.
    {"tensorboard", "object", "{}", I, nullptr,
     "rank 0 writes each step's Train/Samples/train_loss, lr (and fp16's "
     "loss_scale) as TensorBoard scalars (an events.out.tfevents file) in "
     "output_path/job_name"},
    {"tensorboard.enabled", "bool", "false", I, nullptr, "turns it on"},
    {"tensorboard.output_path", "string", "\"\"", I, nullptr,
     "the directory of the job's directory"},
    {"tensorboard.job_name", "string", "\"DeepSpeedJobName\"", I, nullptr,
     "the job's directory"},
    {"csv_monitor", "object", "{}", I, nullptr,
     "rank 0 appends each step's Train/Samples/train_loss, lr (and fp16's "
     "loss_scale) to Train_Samples_<name>.csv in output_path/job_name, as "
     "DeepSpeed's CSV monitor does"},
    {"csv_monitor.enabled", "bool", "false", I, nullptr, "turns it on"},
    {"csv_monitor.output_path", "string", "\"\"", I, nullptr,
     "the directory of the job's directory"},
    {"csv_monitor.job_name", "string", "\"DeepSpeedJobName\"", I, nullptr,
     "the job's directory"},
    {"wandb", "object", "{}", U, kEnabledFalse, kMonitor},
    {"wandb.enabled", "bool", "false", U, "false", kSwitch},
    {"wandb.group", "string", "null", N, nullptr, kOff},
    {"wandb.team", "string", "null", N, nullptr, kOff},
    {"wandb.project", "string", "\"deepspeed\"", N, nullptr, kOff},
    {"comet", "object", "{}", U, kEnabledFalse, kMonitor},
    {"comet.enabled", "bool", "false", U, "false", kSwitch},
    {"comet.samples_log_interval", "int", "100", N, nullptr, kOff},
    {"comet.project", "string", "null", N, nullptr, kOff},
    {"comet.workspace", "string", "null", N, nullptr, kOff},
    {"comet.api_key", "string", "null", N, nullptr, kOff},
    {"comet.experiment_name", "string", "null", N, nullptr, kOff},
    {"comet.experiment_key", "string", "null", N, nullptr, kOff},
    {"comet.online", "bool", "null", N, nullptr, kOff},
    {"comet.mode", "string", "null", N, nullptr, kOff},
    {"flops_profiler", "object", "{}", I, nullptr,
     "dsc-run train prints one step's profile: FLOPs from the compiled "
     "model's cost models, its time, FLOP/s (docs/tools.md)",
     true},
    {"flops_profiler.enabled", "bool", "false", I, nullptr,
     "turns the profile on"},
    {"flops_profiler.recompute_fwd_factor", "number", "0.0", I, nullptr,
     "forward passes recomputed in the backward, counted as DeepSpeed "
     "counts them; 0: dsc's own count of its recomputation (-dsc-remat)"},
    {"flops_profiler.profile_step", "int", "1", I, nullptr,
     "the profiled step: the one taken after that many (0: the first)"},
    {"flops_profiler.module_depth", "int", "-1", I, nullptr,
     "0: the model only; otherwise the embedding, each layer and the head "
     "(dsc's modules have one level)"},
    {"flops_profiler.top_modules", "int", "1", I, nullptr,
     "how many of the most expensive op kinds and modules are listed"},
    {"flops_profiler.detailed", "bool", "true", I, nullptr,
     "the per-op-kind and per-module lists (false: the summary only)"},
    {"flops_profiler.output_file", "string", "null", I, nullptr,
     "where the profile is written (null: stdout); checked before training, "
     "written atomically"},
    {"comms_logger", "object", "{}", I, nullptr,
     "the CPU backend times each collective of the step; dsc-run train "
     "prints DeepSpeed's summary table at the end (docs/tools.md)"},
    {"comms_logger.enabled", "bool", "false", I, nullptr,
     "turns the logger on"},
    {"comms_logger.prof_all", "bool", "true", I, nullptr,
     "every operation; false: those of prof_ops"},
    {"comms_logger.prof_ops", "list", "[]", I, nullptr,
     "DeepSpeed's operation names to log with prof_all false; a name of an "
     "operation dsc never runs is refused"},
    {"comms_logger.verbose", "bool", "false", I, nullptr,
     "prints each operation as it completes"},
    {"comms_logger.debug", "bool", "false", I, nullptr,
     "names the step function (@micro_step, @apply_step) in each record"},
};

} // namespace

const std::vector<DeepSpeedKey> &deepSpeedKeys() { return kKeys; }

std::string deepSpeedKeysMarkdown() {
  std::string out =
      "| Key | Type | DeepSpeed default | dsc |\n|---|---|---|---|\n";
  for (const DeepSpeedKey &k : kKeys) {
    std::string treatment;
    const std::string accepts = k.accepts ? k.accepts : "";
    std::string at;
    if (accepts == "{enabled:false}")
      at = "enabled: false";
    else if (accepts == "{device:none}")
      at = "device \"none\"";
    else
      for (size_t i = 0; i < accepts.size(); ++i)
        at += accepts[i] == '|' ? std::string(" or ") : std::string(1, accepts[i]);
    switch (k.treatment) {
    case KeyTreatment::Implemented:
      treatment = "implemented";
      break;
    case KeyTreatment::NoEffect:
      treatment = "accepted" + (at.empty() ? "" : " at " + at) +
                  "; no effect";
      break;
    case KeyTreatment::NotSupported:
      treatment = "not supported" +
                  (at.empty() ? "" : " (accepted at " + at + ")");
      break;
    }
    std::string why = k.why;
    if (!why.empty())
      treatment += ": " + why;
    if (k.ignoresUnknownKeys)
      treatment += " (DeepSpeed ignores keys of this section it does not "
                   "know: dsc names them once)";
    out += std::string("| `") + k.path + "` | " + k.type + " | " +
           (*k.dsDefault ? std::string("`") + k.dsDefault + "`"
                         : std::string("—")) +
           " | " + treatment + " |\n";
  }
  return out;
}

} // namespace dsc
