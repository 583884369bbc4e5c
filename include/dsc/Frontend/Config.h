//===- Config.h - Model and training configuration -------------*- C++ -*-===//
//
// The two files a user brings: a Hugging Face `config.json` (ModelConfig) and
// a DeepSpeed-style `ds_config.json` with a `dsc` section (TrainConfig).
// Parsing is strict: malformed JSON, unknown keys, wrong types and values out
// of range throw ConfigError with a one-line message naming the key path, the
// value and what is allowed. This library links no MLIR.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_FRONTEND_CONFIG_H
#define DSC_FRONTEND_CONFIG_H

#include "dsc/Support/AioOptions.h"
#include "dsc/Support/Error.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsc {

struct ConfigError : Error {
  using Error::Error;
};

/// LLaMA covers the Hugging Face model types llama, mistral, qwen2, qwen3,
/// gemma and mixtral (one graph: RMSNorm, rotary embeddings, grouped-query
/// attention, gated MLP).
enum class ModelType { GPT2, BERT, LLaMA, Phi };
enum class GeluApprox { Tanh, Erf };

/// rope_scaling's rope_type: none (null or "default"), "linear" (positions
/// divided by factor) or "llama3" (Llama 3.1's per-frequency blend).
enum class RopeScaling { None, Linear, Llama3 };

/// Rotary position embeddings (LLaMA family): rope_theta and rope_scaling.
struct RopeConfig {
  double theta = 10000.0;
  RopeScaling scaling = RopeScaling::None;
  double factor = 1.0;
  double lowFreqFactor = 1.0;              ///< llama3 only
  double highFreqFactor = 4.0;             ///< llama3 only
  int64_t originalMaxPositions = 8192;     ///< llama3 only
};

/// Architecture hyper-parameters, normalised across GPT-2, BERT and LLaMA
/// key names.
/// A model config's quantization_config (transformers' BitsAndBytesConfig)
/// with load_in_4bit: the frozen linear weights stored in 4 bits (QLoRA).
struct FourBitConfig {
  bool enabled = false;
  std::string format = "fp4";     ///< bnb_4bit_quant_type (nf4 | fp4)
  bool doubleQuant = false;       ///< bnb_4bit_use_double_quant
  std::string computeDtype;       ///< bnb_4bit_compute_dtype as written
  /// llm_int8_skip_modules; empty: transformers' default (the output head).
  std::vector<std::string> skipModules;
};

struct ModelConfig {
  ModelType type = ModelType::GPT2;
  std::string typeName = "gpt2"; ///< model_type as written (llama, qwen2...)
  int64_t vocabSize = 0;
  int64_t maxPositions = 0;   ///< n_positions / max_position_embeddings
  int64_t hidden = 0;         ///< n_embd / hidden_size
  int64_t numLayers = 0;      ///< n_layer / num_hidden_layers
  int64_t numHeads = 0;       ///< n_head / num_attention_heads
  int64_t intermediate = 0;   ///< n_inner (null: 4*hidden) / intermediate_size
  int64_t typeVocabSize = 0;  ///< BERT only (token_type_embeddings rows)
  double layerNormEps = 1e-5; ///< layer_norm_epsilon / layer_norm_eps /
                              ///< rms_norm_eps
  double initializerRange = 0.02;
  double embdDropout = 0.0;   ///< embd_pdrop / hidden_dropout_prob
  double residDropout = 0.0;  ///< resid_pdrop / hidden_dropout_prob
  double attnDropout = 0.0;   ///< attn_pdrop / attention_probs_dropout_prob
  GeluApprox gelu = GeluApprox::Tanh; ///< gelu_new -> Tanh, gelu -> Erf
  // LLaMA family only.
  int64_t numKvHeads = 0;     ///< num_key_value_heads (grouped-query)
  int64_t headDim = 0;        ///< head_dim (default hidden / heads)
  RopeConfig rope;
  bool tieEmbeddings = true;  ///< tie_word_embeddings (LLaMA default false)
  bool qkvBias = false;       ///< attention_bias (llama), always (qwen2)
  bool outBias = false;       ///< attention_bias (llama): o_proj's bias
  /// Qwen3: an RMSNorm over each query and key head (q_norm, k_norm, one
  /// weight of head_dim each) between the projections and the rotation.
  bool qkNorm = false;
  bool mlpBias = false;       ///< mlp_bias
  int64_t slidingWindow = 0;  ///< mistral's sliding_window; 0: none
  // Gemma: the LLaMA graph with three changes.
  /// Phi: the share of each head's dimensions the rotary embedding turns
  /// (partial_rotary_factor; the rest pass through).
  double partialRotaryFactor = 1.0;
  /// Gemma 2: attention logits and final logits soft-capped (cap *
  /// tanh(x / cap); 0: not capped), the attention scale
  /// query_pre_attn_scalar^-1/2 (0: head_dim^-1/2), and "sandwich" norms
  /// (the attention and MLP outputs RMS-normalised before the residual
  /// add, the MLP input by its own pre_feedforward_layernorm).
  double attnSoftcap = 0.0, finalSoftcap = 0.0, queryPreAttnScalar = 0.0;
  bool sandwichNorms = false;
  bool embedScale = false;  ///< embeddings times sqrt(hidden_size)
  bool normPlusOne = false; ///< RMSNorm scales by 1 + weight (weights from 0)
  bool geluMlp = false;     ///< MLP gate through GELU (`gelu`) instead of SiLU
  // Mixtral and Qwen2-MoE: a sparse mixture-of-experts block instead of
  // the MLP.
  int64_t numExperts = 0;      ///< num_local_experts / num_experts; 0: dense
  int64_t expertsPerToken = 0; ///< num_experts_per_tok
  int64_t expertIntermediate = 0; ///< moe_intermediate_size (Mixtral: intermediate)
  /// norm_topk_prob: the chosen experts' weights renormalised to sum to 1
  /// (Mixtral always; Qwen2-MoE's default false).
  bool normTopk = true;
  /// shared_expert_intermediate_size: Qwen2-MoE's shared expert, a SwiGLU
  /// MLP of that width every token runs, gated by a sigmoid; 0: none.
  int64_t sharedExpertIntermediate = 0;
  /// decoder_sparse_step and mlp_only_layers: layer l is sparse when
  /// (l + 1) % step == 0 and l is not listed; the others keep a dense MLP
  /// of `intermediate`.
  int64_t sparseStep = 1;
  std::vector<int64_t> mlpOnlyLayers;
  bool isMoeLayer(int64_t layer) const;
  int64_t numMoeLayers() const;
  /// output_router_logits: the objective adds router_aux_loss_coef times
  /// the load-balancing loss (MixtralForCausalLM's loss with labels).
  bool routerAuxLoss = false;
  double routerAuxLossCoef = 0.001; ///< router_aux_loss_coef
  /// torch_dtype, or transformers >= 4.56's dtype (the same key renamed):
  /// the weights' storage dtype as written ("float32", "bfloat16"...);
  /// empty when absent or null. "auto" in a ds_config's fp16/bf16 reads it.
  std::string dtype;
  /// quantization_config (bitsandbytes' 4-bit weights).
  FourBitConfig fourBit;
  /// What the reader decided that the user should hear ("model config:
  /// model_type missing; ...", keys transformers keeps but no model code
  /// reads), each once. The tools print them on stderr.
  std::vector<std::string> notes;

  /// Width of the attention heads together (heads * head dim).
  /// The head dimensions the rotary embedding turns (Phi: the first
  /// int(head_dim * partial_rotary_factor); every other model: all).
  int64_t rotaryDims() const {
    return int64_t(double(headDim) * partialRotaryFactor);
  }
  int64_t attentionWidth() const {
    return numHeads * (headDim ? headDim : hidden / numHeads);
  }
};

/// How Hugging Face weight files name a model's tensors beyond the model
/// class's own names (the module attributes kHfOptionalPrefixAttr,
/// kHfTiedTensorsAttr and kHfUnusedTensorsAttr of ModelBuilder.h): the
/// base-model prefix a file may leave out, tensors tied to a parameter
/// ("name=parameter", comma-separated) and a NameRegex of tensors dsc does
/// not use; empty: none.
struct HfTensorNames {
  std::string optionalPrefix, tied, unused;
};
HfTensorNames hfTensorNames(ModelType type);

/// Reads and validates a Hugging Face config.json.
ModelConfig parseModelConfig(const std::string &path);
ModelConfig parseModelConfigText(const std::string &text,
                                 const std::string &origin);

/// OneBitAdam: DeepSpeed's 1-bit Adam (Adam without bias correction,
/// AdamW-style decay, compressed momentum after freeze_step). ZeroOneAdam:
/// DeepSpeed's 0/1 Adam (variance updated at exponentially growing
/// intervals with 1-bit gradients between, then frozen; local steps
/// synchronised by a 1-bit all-reduce of their accumulated update).
/// OneBitLamb: DeepSpeed's 1-bit LAMB (LAMB without bias correction until
/// freeze_step, then a compressed momentum, frozen variance and the frozen
/// trust ratio scaled by a factor from a fresh variance estimate).
/// Adam8bit, AdamW8bit: bitsandbytes' block-wise 8-bit Adam (moments as
/// u8 codes with per-256-element scales; tensors below min_8bit_size keep
/// 32-bit state); the two differ in their default weight_decay only.
/// Adafactor: Hugging Face transformers' Adafactor.
enum class OptimizerType {
  Adam, AdamW, Lamb, SGD, OneBitAdam, ZeroOneAdam, OneBitLamb, Adam8bit,
  AdamW8bit, Adafactor
};

struct OptimizerConfig {
  OptimizerType type = OptimizerType::AdamW;
  double lr = 1e-3;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
  bool biasCorrection = true;
  double maxCoeff = 10.0, minCoeff = 0.01; ///< Lamb trust-ratio clamp
  double momentum = 0.0, dampening = 0.0;  ///< SGD
  bool nesterov = false;                   ///< SGD
  int64_t freezeStep = 100000; ///< OneBitAdam, OneBitLamb: warm-up steps
  /// OneBitLamb (DeepSpeed's names and defaults): the moving average of the
  /// warm-up's trust ratios, and the bounds and step-to-step change of the
  /// factor that scales it in the compression stage.
  double coeffBeta = 0.9, factorMax = 4.0, factorMin = 0.5,
         factorThreshold = 0.1;
  /// ZeroOneAdam (DeepSpeed's names and defaults): the last step that may
  /// update the variance, the updates after which its interval doubles,
  /// the steps after which the local-step interval doubles, and that
  /// interval's cap.
  int64_t varFreezeStep = 100000, varUpdateScaler = 16;
  int64_t localStepScaler = 32678, localStepClipper = 16;
  /// The 1-bit optimizers' comm_backend_name: "nccl" or "mpi". dsc's transport
  /// follows the backend (CPU ranks: MPI, CUDA ranks: NCCL).
  std::string commBackend = "nccl";
  /// Adam8bit/AdamW8bit: bitsandbytes' min_8bit_size.
  int64_t min8bitSize = 4096;
  /// Adafactor (transformers' names and defaults): eps = (eps1, eps2),
  /// clip_threshold, decay_rate, beta1 (firstMoment: not None),
  /// scale_parameter, relative_step, warmup_init.
  double adafactorEps1 = 1e-30, adafactorEps2 = 1e-3;
  double clipThreshold = 1.0, decayRate = -0.8;
  bool firstMoment = false, scaleParameter = true, relativeStep = true,
       warmupInit = false;
};

enum class SchedulerType { None, WarmupLR, WarmupDecayLR, WarmupCosineLR };

struct SchedulerConfig {
  SchedulerType type = SchedulerType::None;
  double warmupMinLr = 0.0, warmupMaxLr = 0.001;
  int64_t warmupNumSteps = 1000;
  int64_t totalNumSteps = 0;
  bool warmupLog = true; ///< warmup_type: "log" (default) or "linear"
  double warmupMinRatio = 0.0, cosMinRatio = 0.0001; ///< WarmupCosineLR
};

/// `dsc.mask_token_id` when unset: bert-base-uncased's [MASK].
constexpr int64_t kBertMaskTokenId = 103;

/// Graph fusions of the `dsc.fusion` section (each can be switched off).
struct FusionConfig {
  bool qkv = true;            ///< -dsc-fuse-qkv
  bool biasGelu = true;       ///< -dsc-fuse-bias-gelu
  bool swiglu = true;         ///< -dsc-fuse-swiglu
  bool biasDropoutAdd = true; ///< -dsc-fuse-bias-dropout-add
  bool softmaxDropout = true; ///< -dsc-fuse-softmax-dropout
  bool attention = true;      ///< -dsc-fuse-attention
  /// -dsc-fuse-residual-layer-norm (extends bias_dropout_add's ops)
  bool residualLayerNorm = true;
  bool residualRmsNorm = true; ///< -dsc-fuse-residual-rms-norm
  bool crossEntropy = true;    ///< -dsc-fuse-cross-entropy
};

/// DeepSpeed's `transformer_kernel` switches dsc implements.
struct KernelConfig {
  bool normalizeInvertible = false; ///< -dsc-invertible
};

/// -dsc-remat: `dsc.remat` {policy, memory_budget_bytes, recompute_cheap},
/// DeepSpeed's transformer_kernel.{gelu,attn_dropout}_checkpoint and the
/// activation_checkpointing section (per-layer checkpointing).
struct RematConfig {
  /// none | deepspeed | budget. Unset in the file: budget when
  /// memory_budget_bytes is set, deepspeed when a DeepSpeed switch is on,
  /// else none.
  std::string policy = "none";
  bool geluCheckpoint = false;        ///< transformer_kernel.gelu_checkpoint
  bool attnDropoutCheckpoint = false; ///< ...attn_dropout_checkpoint
  bool perLayer = false;              ///< activation_checkpointing present
  /// Layers per checkpoint with perLayer (pipeline.
  /// activation_checkpoint_interval; 1 otherwise).
  int64_t layerInterval = 1;
  int64_t memoryBudgetBytes = 0;      ///< planned peak, policy budget
  bool recomputeCheap = true;         ///< recompute add/GELU/dropout
};

/// DeepSpeed's `fp16` and `bf16` sections. fp16 adds loss scaling (dynamic
/// when loss_scale is 0) and f16 rounding (-dsc-mixed-precision); bf16 only
/// the bf16 rounding, as DeepSpeed's bf16 mode does not scale the loss.
struct MixedPrecisionConfig {
  bool fp16 = false;
  bool bf16 = false;
  double lossScale = 0.0;        ///< 0: dynamic; > 0: static scale
  int64_t initialScalePower = 16; ///< dynamic scaling starts at 2^this
  int64_t lossScaleWindow = 1000;
  int64_t hysteresis = 2;
  double minLossScale = 1.0;
  bool consecutiveHysteresis = false;
};

/// PEFT's LoraConfig, from the training config's `lora` section or a saved
/// adapter_config.json: -dsc-lora's options.
struct LoraConfig {
  bool enabled = false;
  int64_t rank = 8;            ///< r
  double alpha = 8.0;          ///< lora_alpha
  double dropout = 0.0;        ///< lora_dropout
  /// target_modules as a list (["q_proj", "v_proj"], or "all-linear"
  /// written as a string); empty with targetRegex empty: PEFT's default
  /// for the model type (defaultLoraTargets).
  std::vector<std::string> targetModules;
  std::string targetRegex;     ///< target_modules as any other string
  std::string bias = "none";   ///< none | all | lora_only
  bool useRslora = false;      ///< use_rslora: scale alpha / sqrt(r)
};

/// PEFT's default target_modules for a model type (its
/// TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING).
std::vector<std::string> defaultLoraTargets(ModelType type);

/// Reads a PEFT adapter_config.json (peft_type "LORA").
LoraConfig parseAdapterConfig(const std::string &path);
LoraConfig parseAdapterConfigText(const std::string &text,
                                  const std::string &origin);

/// DeepSpeed's `sparse_attention` section (its keys and JSON defaults, see
/// deepspeed/runtime/constants.py), plus dsc's mode "user" with
/// `layout_file`. The layout itself: SparseLayout.h.
enum class SparsityMode { Dense, Fixed, Variable, BigBird, BSLongformer, User };
struct SparseAttentionConfig {
  bool enabled = false; ///< the section is present
  SparsityMode mode = SparsityMode::Fixed;
  int64_t block = 16;
  bool differentLayoutPerHead = false;
  int64_t numLocalBlocks = 4;              ///< fixed
  int64_t numGlobalBlocks = 1;             ///< fixed, bigbird
  bool unidirectional = false;             ///< `attention`
  bool horizontalGlobalAttention = false;  ///< fixed, variable
  int64_t numDifferentGlobalPatterns = 1;  ///< fixed
  int64_t numRandomBlocks = 0;             ///< variable, bigbird
  std::vector<int64_t> localWindowBlocks = {4};   ///< variable
  std::vector<int64_t> globalBlockIndices = {0};  ///< variable, bslongformer
  std::vector<int64_t> globalBlockEndIndices;     ///< empty: not given
  int64_t numSlidingWindowBlocks = 3;      ///< bigbird, bslongformer
  std::string layoutFile;                  ///< user
};

/// Tensor slicing and pipeline stages (DeepSpeed's `tensor_parallel` and
/// `pipeline` sections, dsc's schedule keys). `dsc-run plan` maps a job
/// with them; training with them is not built yet (refused by name).
struct ParallelConfig {
  int64_t tensor = 1;   ///< tensor_parallel.autotp_size
  int64_t pipeline = 1; ///< pipeline.stages ("auto": 1)
  /// pipeline.partition: "best" (balance the compiler's cost model),
  /// "parameters" (balance parameter counts) or "uniform" (layer counts).
  std::string partition = "best";
  int64_t activationCheckpointInterval = 0; ///< pipeline.*; 0: none
  /// moe.ep_size: the ranks of an expert-parallel group (consecutive data
  /// ranks), over which each MoE layer's experts are sharded; 1: none.
  int64_t expert = 1;
  std::string schedule = "1f1b";  ///< dsc.pipeline_schedule
  int64_t virtualStages = 1;      ///< dsc.pipeline_virtual_stages
  /// activation_checkpointing.partition_activations: checkpoints split
  /// across the tensor-parallel ranks.
  bool partitionActivations = false;
};

struct TrainConfig {
  /// The job's ranks: data-parallel ranks times tensor times pipeline.
  int64_t worldSize = 1;
  ParallelConfig parallel;
  int64_t dataParallel() const {
    return worldSize / (parallel.tensor * parallel.pipeline);
  }
  int64_t zeroStage = 0;      ///< zero_optimization.stage: 0 to 3
  /// moe.drop_tokens (DeepSpeed-MoE's, off here: dsc routes dropless by
  /// default): each expert keeps at most max(ceil(K * tokens *
  /// capacity_factor / E), min_capacity) of a micro-batch's assignments.
  bool moeDropTokens = false;
  double moeCapacityFactor = 1.0; ///< moe.capacity_factor
  int64_t moeMinCapacity = 4;     ///< moe.min_capacity
  /// Each expert's capacity for `tokens` tokens routed to `topK` of
  /// `experts` experts (at most `tokens`), or 0 without moeDropTokens (or
  /// experts).
  int64_t moeCapacity(int64_t tokens, int64_t topK, int64_t experts) const;
  /// zero_optimization.offload_optimizer device "cpu" (or cpu_offload):
  /// ZeRO-Offload, the optimizer state and fp32 master weights in host
  /// memory and the update on the host (-dsc-offload-optimizer).
  bool offloadOptimizer = false;
  /// zero_optimization.offload_optimizer device "nvme" (ZeRO-Infinity):
  /// its nvme_path, where the swap file holding that state goes
  /// (-dsc-offload-nvme); empty: host memory.
  std::string offloadNvmePath;
  /// zero_optimization.offload_param device "nvme": its nvme_path (the
  /// optimizer's too: the parameter shards go in the same swap file);
  /// empty: host memory.
  std::string offloadParamsNvmePath;
  /// zero_optimization.offload_param device "cpu" (or cpu_offload_param)
  /// at stage 3, with offloadOptimizer: the parameter shards in host memory
  /// too (-dsc-offload-optimizer params).
  bool offloadParams = false;
  /// The `aio` section: how ZeRO-Infinity's swap file is read and written
  /// (lib/Runtime/SwapIo.h).
  AioOptions aio;
  /// zero_optimization.stage3_param_persistence_threshold (DeepSpeed's
  /// default 10^5): stage 3 keeps parameters of fewer elements whole.
  int64_t zeroPersistenceThreshold = 100000;
  /// zero_optimization.zero_quantized_weights at stage 3 (ZeRO++ qwZ).
  bool zeroQuantizedWeights = false;
  /// zero_optimization.zero_quantized_gradients at stage 3 (ZeRO++ qgZ).
  bool zeroQuantizedGradients = false;
  /// zero_optimization.mics_shard_size at stage 3 (hybrid sharding): the
  /// ranks of a shard group, fewer than the data-parallel ranks and
  /// dividing them; 0: ZeRO over all of them.
  int64_t zeroShardGroup = 0;
  /// zero_optimization.zero_hpz_partition_size at stage 3 (ZeRO++ hpZ):
  /// the ranks of a secondary partition, fewer than the data-parallel
  /// ranks and dividing them; 0: none.
  int64_t zeroHpzGroup = 0;
  /// qgZ's nodes: the data-parallel ranks of one node (dsc-run train sets
  /// it) when the data axis spans several nodes of several of its ranks
  /// each; 0: one hop.
  int64_t qgzNodeRanks = 0;
  /// The data ranks of one node of `ranksPerNode` ranks over which qgZ
  /// takes two hops, or 0: ranks are numbered tensor-fastest, then data,
  /// so a node of L ranks holds L / autotp_size consecutive data ranks.
  int64_t qgzNodeRanksFor(int64_t ranksPerNode) const {
    const int64_t dp = dataParallel(), t = parallel.tensor;
    if (!zeroQuantizedGradients || ranksPerNode % t != 0)
      return 0;
    const int64_t perNode = ranksPerNode / t;
    return perNode > 1 && perNode < dp && dp % perNode == 0 ? perNode : 0;
  }
  /// Sets qgzNodeRanks from the launcher's `ranksPerNode`.
  void setNodeRanks(int64_t ranksPerNode) {
    qgzNodeRanks = qgzNodeRanksFor(ranksPerNode);
  }
  /// The data_inner groups' ranks (dsc.mesh_data_inner): the
  /// expert-parallel group, hybrid sharding's or hpZ's group, else qgZ's
  /// nodes, 1 without any (ValidateConfigs refuses two that differ).
  int64_t dataInner() const {
    return parallel.expert > 1 ? parallel.expert
           : zeroShardGroup    ? zeroShardGroup
           : zeroHpzGroup      ? zeroHpzGroup
           : qgzNodeRanks      ? qgzNodeRanks
                               : 1;
  }
  /// zero_optimization.reduce_bucket_size / allgather_bucket_size:
  /// elements per bucket of the gradient all-reduces and reduce-scatters,
  /// and of the gathers of updated shards (DeepSpeed's 5e8 each; 0: one
  /// collective per tensor).
  int64_t reduceBucketSize = 500000000;
  int64_t allgatherBucketSize = 500000000;
  /// zero_optimization.overlap_comm: collectives run beside the compute
  /// (CPU ranks: on a communication thread) and ZeRO-3 gathers the next
  /// parameters ahead of their use. Unset: DeepSpeed's default, on for
  /// stage 3 only.
  std::optional<bool> overlapComm;
  bool overlapsComm() const { return overlapComm.value_or(zeroStage == 3); }
  /// zero_optimization.stage3_prefetch_bucket_size (or prefetch_bucket_size):
  /// the most parameter elements ZeRO-3 gathers ahead of their use with
  /// overlap_comm (0: none).
  int64_t prefetchBucketSize = 50000000;
  int64_t trainBatchSize = 0; ///< micro * accumulation * data-parallel ranks
  int64_t microBatch = 1;
  int64_t gradAccum = 1;
  double gradClip = 0.0;      ///< 0: no clipping
  int64_t stepsPerPrint = 1;
  /// wall_clock_breakdown: the printed steps and --log-json records also
  /// give the micro-steps' and the optimizer step's wall-clock time.
  bool wallClockBreakdown = false;
  /// flops_profiler (DeepSpeed's keys): dsc-run train prints the profile of
  /// one step (its FLOPs from the compiled model's cost models, its time).
  struct FlopsProfiler {
    bool enabled = false;
    /// The profiled step, as DeepSpeed counts it: the step taken when
    /// profile_step steps are done (0: the first).
    int64_t profileStep = 1;
    /// Forward passes recomputed in the backward, as DeepSpeed adds them
    /// (0: dsc's own count of its recomputation).
    double recomputeFwdFactor = 0.0;
    int64_t moduleDepth = -1; ///< -1 or >= 1: per layer; 0: the model only
    int64_t topModules = 1;   ///< the most expensive op kinds and modules
    bool detailed = true;     ///< the per-op-kind and per-module tables
    std::string outputFile;   ///< "": stdout
  } flopsProfiler;
  /// comms_logger (DeepSpeed's keys): the CPU backend times each collective
  /// of the step, verbose prints each, and dsc-run train prints DeepSpeed's
  /// summary table at the end (rank 0).
  struct CommsLogger {
    bool enabled = false;
    bool verbose = false;
    bool debug = false; ///< records name the step function
    bool profAll = true;
    std::vector<std::string> profOps; ///< with profAll false
  } commsLogger;
  /// DeepSpeed's csv_monitor and tensorboard sections: rank 0 writes each
  /// step's training loss and learning rate (and fp16's loss scale) under
  /// output_path/job_name.
  struct Monitor {
    bool enabled = false;
    std::string outputPath;
    std::string jobName = "DeepSpeedJobName";
  };
  Monitor csvMonitor, tensorboard;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  // dsc section.
  uint64_t seed = 42;
  int64_t seqLen = 0;          ///< 0: the model's maxPositions
  /// dsc.pad_vocabulary: -dsc-pad-vocabulary's multiple; 0 (unset): the
  /// backend's choice (64 on CUDA, 1 = none on the CPU).
  int64_t padVocabulary = 0;
  double mlmProbability = 0.15;
  int64_t maskTokenId = -1;    ///< -1: kBertMaskTokenId
  int64_t padTokenId = -1;     ///< -1: no padding token
  FusionConfig fusion;
  KernelConfig kernel;
  RematConfig remat;
  MixedPrecisionConfig precision;
  LoraConfig lora;
  SparseAttentionConfig sparseAttention;
  /// What the reader decided that the user should hear, one line each
  /// ("ds_config: gradient_clipping \"auto\" -> 1 (...)", "ds_config:
  /// overlap_comm: accepted; no effect in dsc: ..."), each once, in file
  /// order. The tools print them on stderr.
  std::vector<std::string> notes;
  /// The ds_config as read, with "auto" values resolved, integers written
  /// as floats (5e8) written as integers and the three batch sizes filled
  /// in: indented JSON (dsc-run --print-config).
  std::string resolvedJson;
};

/// What a ds_config's "auto" values are resolved from besides the file
/// (as the Hugging Face Trainer resolves them from its TrainingArguments).
struct TrainConfigInputs {
  /// The job's ranks; divided by the tensor and pipeline sizes it gives
  /// the data-parallel ranks that train_batch_size is checked against.
  int64_t worldSize = 1;
  /// hidden_size (ZeRO bucket sizes) and dtype (fp16/bf16 enabled); null:
  /// those "auto" values are refused.
  const ModelConfig *model = nullptr;
  /// The run's optimizer steps (dsc-run train --steps): total_num_steps.
  /// 0: not known.
  int64_t steps = 0;
  /// Whether the command runs the LR schedule (train, compile, inspect):
  /// false for estimate and plan, whose memory and job plans do not depend
  /// on its length; there an "auto" total_num_steps with `steps` unknown
  /// stays "auto" (noted), elsewhere it is refused.
  bool scheduleUsed = true;
  /// The command and its option that gives `steps` ("dsc-run train",
  /// "--steps"), named when an "auto" total_num_steps is refused; an empty
  /// option: the command has none.
  std::string command = "dsc-run";
  std::string stepsOption;
};

/// Reads and validates a ds_config.json.
TrainConfig parseTrainConfig(const std::string &path,
                             const TrainConfigInputs &inputs);
TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 const TrainConfigInputs &inputs);
/// The same for a job of `worldSize` ranks and no model config.
TrainConfig parseTrainConfig(const std::string &path, int64_t worldSize = 1);
TrainConfig parseTrainConfigText(const std::string &text,
                                 const std::string &origin,
                                 int64_t worldSize = 1);

/// How dsc treats a key of DeepSpeed's config schema.
enum class KeyTreatment {
  Implemented,  ///< read and acted on
  NoEffect,     ///< accepted (at `accepts`), named once: cannot change dsc's result
  NotSupported, ///< refused as "not supported by dsc" (except at `accepts`)
};

/// One key of DeepSpeed's config schema (deepspeed/runtime/config.py,
/// constants.py, zero/config.py, precision_config.py, the monitor,
/// profiling, comm, compile and hybrid-engine configs). The table is the
/// one source of the no-effect and not-supported treatments and of the
/// table in docs/config.md (dsc-run config-keys prints it).
struct DeepSpeedKey {
  const char *path;      ///< "zero_optimization.overlap_comm"
  const char *type;      ///< bool, int, int>=0, number, string, object, list, any
  const char *dsDefault; ///< DeepSpeed's default, as JSON ("" : none)
  KeyTreatment treatment;
  /// The values accepted: nullptr (any of `type`), "{enabled:false}" (a
  /// section whose `enabled` is false or absent), "{device:none}" (null
  /// or a section whose `device` is "none" or absent), or JSON literals
  /// separated by '|'.
  const char *accepts;
  const char *why; ///< the effect, or why it has none / is not supported
  /// For a section: DeepSpeed reads the keys it knows one by one and
  /// ignores the others (get_scalar_param), where its pydantic sections
  /// refuse them. dsc names an ignored key once on stderr and refuses one
  /// within edit distance 2 of a known key as a misspelling.
  bool ignoresUnknownKeys = false;
};

/// Every key of the table, in documentation order.
const std::vector<DeepSpeedKey> &deepSpeedKeys();
/// The table as the Markdown of docs/config.md's "DeepSpeed keys" section.
std::string deepSpeedKeysMarkdown();

/// Cross-checks that need both files (seq_len <= positions, mask token < vocab).
void validateConfigs(const ModelConfig &model, const TrainConfig &train);

} // namespace dsc

#endif // DSC_FRONTEND_CONFIG_H
