//===- Trainer.h - The driver loop around a compiled step ------*- C++ -*-===//
//
// Owns the storage of a Program and drives it: A calls of @micro_step on
// consecutive micro-batches, one @apply_step, logging, weights and
// checkpoints. Counter-based randomness keyed by (seed, step) makes a resumed
// run continue bit-identically. Links no MLIR.
//
// A pipeline stage's program (-dsc-pipeline-stage) is driven by its
// schedule (PipelineSchedule.h): a forward runs @stage_forward on the
// activation received from the previous stage, keeps what the backward
// reads (-dsc-split-stage-step's saved activations) and sends its own
// activation on; a backward puts the micro-batch's kept buffers back, runs
// @micro_step (the backward) on the gradient the next stage sent back and
// sends its input's gradient to the previous stage; an interleaved stage
// does so per model chunk (@stage_forward.k, @micro_step.k), its chunks'
// neighbours on the ranks before and after it. Weights and
// checkpoints hold the whole model: the stages' tensors meet on rank 0.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_TRAINER_H
#define DSC_RUNTIME_TRAINER_H

#include "dsc/Runtime/IO.h"
#include "dsc/Program/PipelineSchedule.h"
#include "dsc/Runtime/Runtime.h"
#include "dsc/Program/TensorSlice.h"
#include "dsc/Runtime/ZeroOneAdam.h"

#include <functional>
#include <optional>
#include <set>

namespace dsc::rt {

struct StepStats {
  int64_t step = 0;       ///< 0-based index of the step just taken
  double loss = 0.0;      ///< mean micro-batch loss, before the update
  double lr = 0.0;
  double gradNorm = 0.0;  ///< global norm before clipping
  /// fp16 only (the step has a `loss_scale` output): the loss scale this
  /// step's gradients were computed with, and whether an inf/NaN gradient
  /// made it skip the update.
  bool hasLossScale = false;
  double lossScale = 1.0;
  bool skipped = false;
  double tokensPerSecond = 0.0; ///< of the whole job (every rank's tokens)
  /// This rank's wall-clock seconds in the step's micro-steps (forward and
  /// backward, or the pipeline schedule) and in its optimizer step
  /// (gradient reduction, clipping, update).
  double microSeconds = 0.0, optimizerSeconds = 0.0;
  /// Bytes this rank sent in the step's collectives, per kind.
  CommTraffic commSent;
  /// Pipeline stages only (else -1): the measured bubble, the mean over
  /// the stages of the fraction of the micro-batch phase each spent
  /// waiting for an activation, a gradient or its sends.
  double pipelineBubble = -1;
  /// Pipeline stages only: the most bytes this stage's driver held in its
  /// stash of in-flight micro-batches (what `estimate` predicts as the
  /// pipeline stash).
  int64_t pipelineStashBytes = 0;
};

/// Thrown by trainStep when a step's loss or gradient norm is NaN or
/// infinite; carries the step's numbers so the caller can still log them.
struct Diverged : Error {
  Diverged(const std::string &message, const StepStats &stats)
      : Error(message), stats(stats) {}
  StepStats stats;
};

/// Refuses to write a weights, adapter or checkpoint file holding a NaN or
/// an infinity (after step `step`): the user's previous file is worth more
/// than a poisoned one.
void requireFiniteToSave(const Safetensors &file, const std::string &path,
                         int64_t step);

/// PEFT's names of LoRA's matrices: "<module>.lora_A.weight" and
/// "<module>.lora_B.weight".
bool isLoraAdapterName(const std::string &name);

class Trainer {
public:
  Trainer(Program program, Backend &backend, Communicator &comm,
          uint64_t seed);

  const Program &program() const { return prog; }
  int64_t microBatch() const { return B; }
  int64_t seqLen() const { return T; }
  int64_t gradAccum() const { return A; }
  int64_t vocabSize() const { return V; }
  int worldSize() const { return comm.size(); }
  int rank() const { return comm.rank(); }
  int64_t currentStep() const { return step; }
  /// Steps whose update was skipped (fp16 overflow). The optimizer and the
  /// LR schedule count applied updates only: step - skippedSteps.
  int64_t skippedSteps() const { return skipped; }
  /// The buffers (and, for a planned program, the arena's measured peak).
  const Storage &memory() const { return storage; }

  /// Hugging Face initialisation from the seeded Philox stream.
  void initializeWeights();
  /// Loads every parameter (ZeRO-3: this rank's part of each) from a
  /// safetensors file, named as the frontend recorded for the model
  /// (lib/Runtime/WeightFileNames.h: a base-model prefix a file may leave
  /// out, tied tensors, tensors that are not weights). Missing or mis-shaped tensors are
  /// errors naming the file and tensor, except LoRA adapters: a base
  /// model's file has none, so they get their initialisation.
  void loadWeights(const std::string &path);
  /// LoRA (a step built by -dsc-lora; see lib/Runtime/Adapters.cpp):
  /// whether the step has adapters.
  bool hasAdapter() const;
  /// Loads the trainable parameters from a PEFT adapter_model.safetensors
  /// (`<dsc.lora_file_prefix><name>`, PEFT's names): every LoRA matrix must be there with its
  /// shape, a trained bias may be (else it keeps its loaded value), and
  /// nothing else may be.
  void loadAdapter(const std::string &path);
  /// Writes what PEFT's save_pretrained writes for a LoRA model into the
  /// directory `dir` (created if missing): adapter_model.safetensors with
  /// the trainable parameters and adapter_config.json. Every rank calls it;
  /// rank 0 writes.
  void saveAdapter(const std::string &dir) const;
  /// Writes the base model's weights (Hugging Face names, as saveWeights)
  /// with each adapter merged: W + scale * B A (transposed for [in, out]
  /// weights), what PEFT's merge_and_unload gives. Every rank calls it.
  void saveMergedWeights(const std::string &path) const;

  /// Writes what save_pretrained writes: every parameter, Hugging Face names.
  /// Refuses (leaving the file as it was) if a weight is NaN or infinite,
  /// as loadWeights and loadCheckpoint refuse such files. Every rank of the
  /// job calls it; rank 0 writes.
  void saveWeights(const std::string &path) const;
  /// Weights + optimizer state + step + seed, in one atomic safetensors
  /// file of whole tensors whatever the ZeRO stage and world size (sharded
  /// state is all-gathered), so it resumes on any number of ranks. Every
  /// rank of the job calls it; rank 0 writes.
  void saveCheckpoint(const std::string &path) const;
  void loadCheckpoint(const std::string &path);

  /// One optimizer step on the batches of `data` for the current step.
  /// Throws Diverged, naming the step, when its loss or gradient norm is NaN
  /// or infinite (unless fp16 loss scaling skipped the update): the weights
  /// are poisoned and nothing should be saved.
  StepStats trainStep(const TokenFile &data);
  /// Runs @micro_step on (step, micro) = (current, 0) from zeroed gradient
  /// accumulators and returns the named buffers a reference test
  /// compares: input_ids, targets, logits, loss, and grad.<param> for every
  /// parameter. `repeats` > 1 runs it that many times on the same batch,
  /// each adding into the accumulators the one before left (the gradients
  /// are then `repeats` times one micro-step's).
  Safetensors inspectMicroStep(const TokenFile &data, int64_t repeats = 1);
  /// Greedy continuations of `prompts` by @eval_step (needs a causal
  /// model), one per prompt, each ending after `stopToken`, at
  /// `maxNewTokens` or at the sequence length. The prompts share the
  /// micro-batch's rows, so a batch of B costs what one prompt does. Rows
  /// are independent in a dense causal model; with mixture-of-experts
  /// capacity limits, rows (and their zero padding) compete for experts,
  /// as the padding of a single prompt did.
  std::vector<std::vector<int32_t>>
  generate(const std::vector<std::vector<int32_t>> &prompts,
           int64_t maxNewTokens, int32_t stopToken);

private:
  /// What the driver of a pipeline stage moves, found once: the schedule,
  /// per model chunk (one unless interleaved) its functions, the buffers
  /// that cross its boundaries (-1 where it has none) and those a
  /// micro-batch's backward reads of its forward (kept per micro-batch in
  /// flight), and the accumulators of the parameters the first and last
  /// stage share.
  struct ChunkBuffers {
    std::string forward, backward; ///< @stage_forward(.k), @micro_step(.k)
    int input = -1, inputGrad = -1, output = -1, outputGrad = -1, loss = -1;
    std::vector<int> kept;
  };
  struct StageBuffers {
    PipelineShape shape;
    std::vector<ChunkBuffers> chunks;
    std::vector<int> tiedGrads;
  };
  /// Checks the stage's step (its stage, schedule and boundary buffers)
  /// and resolves its StageBuffers.
  StageBuffers resolveStage(int64_t stage, int64_t stages) const;
  void runMicroStep(const TokenFile &data, int64_t micro);
  /// Writes micro-batch `micro` of the current step into input_ids and
  /// targets and returns its random stream.
  RngContext loadMicroBatch(const TokenFile &data, int64_t micro);
  /// The step's micro-batches through this rank's pipeline stage, in its
  /// schedule's order.
  struct ScheduleRun {
    double lossSum = 0;     ///< of the micro-batches (the last stage's; 0
                            ///< elsewhere)
    double waitSeconds = 0; ///< waiting for the other stages
    int64_t stashPeakBytes = 0; ///< most bytes of kept buffers held at once
  };
  ScheduleRun runPipelineSchedule(const TokenFile &data);
  /// Pipeline: the first and the last stage add their gradients of the
  /// parameters they both hold (tied embeddings) before the update.
  void sumTiedGradients();
  /// Pipeline: the writer of each stage (data and tensor coordinate 0)
  /// sends its tensors of `file` to the first stage's, which merges them.
  void gatherStages(Safetensors &file) const;
  /// Throws `message(name)` for the first of `names` that no rank marked
  /// in `used`: no stage of the pipeline, no rank of the expert-parallel
  /// group (which hold different experts); every rank of those groups
  /// calls it with the same `names`. Alone, just checks `used`.
  void requireUsedByARank(
      const std::set<std::string> &names, const std::set<std::string> &used,
      const std::function<std::string(const std::string &)> &message) const;
  bool pipelined() const { return groups->mesh().pipeline > 1; }
  /// Whether this rank writes its stage's part of a file: data and tensor
  /// coordinate 0 (rank 0 without a pipeline).
  bool stageWriter() const {
    return dataGroup().rank() == 0 && tensorGroup().rank() == 0;
  }
  /// Hands every parameter, accumulator and optimizer state to the backend
  /// after the driver wrote them in Storage.
  void uploadPersistent();
  /// ZeRO-Offload: each master-weights buffer from its parameter (this
  /// rank's shard of it, or the parameter shard itself at ZeRO-3).
  void deriveMasterWeights();
  /// Throws naming `source` and the tensor if a parameter or optimizer
  /// state in host storage is NaN or infinite, or a second moment or 8-bit
  /// scale is negative.
  void requireValidState(const std::string &source);
  /// Where this step's non-finite loss began (TrainerDiagnosis.cpp): a
  /// parameter or optimizer state already NaN or infinite before the step
  /// (naming what made it), else, on the CPU backend without pipeline
  /// stages, the first instruction of @micro_step on micro-batch 0 whose
  /// output is not finite. Empty when it cannot tell. Every rank calls it.
  std::string whereNonFiniteBegins(const TokenFile &data);
  int buffer(BufferRole role, const std::string &name) const;
  /// ZeRO: whether the buffer holds this rank's shard of a whole tensor
  /// (Buffer::wholeShape).
  bool isShard(int buffer) const;
  /// Whether saving the buffer needs every rank's bytes: a ZeRO shard or
  /// a per-rank buffer (Buffer::perRank).
  bool gatheredOnSave(int buffer) const;
  /// tensorOf, with a shard all-gathered into its whole tensor and a
  /// per-rank buffer into [world size, shape...] (every rank must call it
  /// for the same buffers).
  /// With `rankCopies`, every rank's copy of any buffer as [world size,
  /// shape...].
  Tensor wholeTensorOf(int buffer, bool rankCopies = false) const;
  /// An expert-parallel buffer (Buffer::expertShard) of every rank of this
  /// rank's data_inner group, each under its expert's name (collective
  /// over the group).
  std::vector<std::pair<std::string, Tensor>> expertTensorsOf(int buffer) const;
  /// 0/1 Adam: whether checkpoints keep every rank's copy of the buffer
  /// (parameters and momenta, which local steps let drift apart), as
  /// `rank_copies/<name>` beside rank 0's.
  bool keepsRankCopies(int buffer) const;
  static constexpr const char *kRankCopiesPrefix = "rank_copies/";
  /// The function that applies optimizer step `optimizerStep` (1-based):
  /// @apply_step, 1-bit Adam's @apply_step_compressed after its
  /// freeze_step, or the one 0/1 Adam's policy picks (zeroing the
  /// compression errors when the variance freezes).
  const Function &applyFunction(int64_t optimizerStep);
  /// 0/1 Adam: zeroes every worker_error and server_error buffer.
  void zeroCompressionErrors();
  /// Puts the buffers of `roles` into `file` as whole tensors (every rank
  /// gathers the shards), writes it from rank 0 (refusing non-finite
  /// values) and returns on every rank once it is written.
  void writeFromAllRanks(Safetensors &file, const std::string &path,
                         std::initializer_list<BufferRole> roles) const;
  /// The shape of the whole tensor buffer `id` holds (or holds a shard of).
  std::vector<int64_t> wholeShapeOf(int id) const;
  /// The shape of this rank's tensor slice (the whole tensor when the
  /// buffer is not sliced), before any ZeRO sharding.
  const std::vector<int64_t> &sliceShapeOf(int id) const;
  /// Whether the buffer is sliced over the tensor axis (Buffer::sliceDim),
  /// and where its slice sits in the whole tensor.
  bool isSliced(int buffer) const;
  SliceMap sliceMapOf(int buffer) const;
  Communicator &dataGroup() const { return groups->group(MeshAxis::Data); }
  /// The ranks ZeRO's shards divide a tensor among (Program::zeroAxis: the
  /// data group, or with hybrid sharding this rank's data_inner group).
  Communicator &shardGroup() const { return groups->group(prog.zeroAxis()); }
  Communicator &tensorGroup() const {
    return groups->group(MeshAxis::Tensor);
  }
  Communicator &pipelineGroup() const {
    return groups->group(MeshAxis::Pipeline);
  }
  /// The ranks that hold this rank's pipeline stage (data x tensor; the
  /// whole job without a pipeline): per-rank state (compression errors,
  /// 0/1 Adam's copies) is gathered over them.
  Communicator &stageRanks() const { return stageComm ? *stageComm : comm; }
  /// Stores `whole` (a whole tensor's bytes, of wholeShapeOf(id)) in buffer
  /// `id`: all of it, or for a ZeRO shard this rank's part with the padding
  /// zeroed.
  void storeWhole(const std::vector<char> &whole, int id);
  void expectBuffer(BufferRole role, const std::string &name, DType dtype,
                    int64_t elements) const;
  Tensor tensorOf(int buffer) const;

  Program prog;
  Backend &backend;
  Communicator &comm;
  /// The data and tensor groups of the step's mesh (built by every rank).
  std::unique_ptr<MeshGroups> groups;
  /// Pipelines only: the ranks of this rank's stage (see stageRanks), and
  /// what its driver moves.
  std::unique_ptr<Communicator> stageComm;
  std::optional<StageBuffers> stageBuffers;
  Storage storage;
  uint64_t seed;
  int64_t B, T, A, V;
  int64_t step = 0;
  int64_t skipped = 0;
  /// 0/1 Adam's step policy, and its state before step 1 (a resumed run
  /// replays from it).
  std::optional<ZeroOneAdamPolicy> zeroOne, zeroOneStart;
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_TRAINER_H
