//===- Trainer.cpp - The driver loop around a compiled step --------------===//
//
// The Trainer's step: its construction and checks of the step's buffers,
// micro-batches, @micro_step / @apply_step (and the compressed optimizers'
// step functions), inspection and generation. Weights, checkpoints, the
// pipeline-stage driver and LoRA adapters have files of their own
// (TrainerWeights.cpp, TrainerCheckpoint.cpp, TrainerPipeline.cpp,
// Adapters.cpp).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Trainer.h"

#include "TrainerDetail.h"
#include "dsc/Program/Half.h"
#include "dsc/Program/PipelineSchedule.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

using namespace dsc::rt;

namespace dsc::rt::detail {

/// "[128, 32]", as messages about weight files print shapes (rt::shapeStr
/// prints the runtime's "[128,32]").
std::string spacedShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

NonFinite nonFiniteIn(DType dtype, const void *data, size_t bytes) {
  if (dtype == DType::F16 || dtype == DType::BF16) {
    // Exponent all ones: Inf when the mantissa is 0, else NaN.
    const uint16_t *h = static_cast<const uint16_t *>(data);
    const uint16_t exponent = dtype == DType::F16 ? 0x7C00 : 0x7F80;
    NonFinite found = NonFinite::None;
    for (size_t i = 0, n = bytes / 2; i < n; ++i) {
      if ((h[i] & exponent) != exponent)
        continue;
      if (h[i] & uint16_t(~exponent & 0x7FFF))
        return NonFinite::NaN;
      found = NonFinite::Inf;
    }
    return found;
  }
  if (dtype != DType::F32)
    return NonFinite::None;
  const float *v = static_cast<const float *>(data);
  NonFinite found = NonFinite::None;
  for (size_t i = 0, n = bytes / sizeof(float); i < n; ++i) {
    if (std::isnan(v[i]))
      return NonFinite::NaN;
    if (std::isinf(v[i]))
      found = NonFinite::Inf;
  }
  return found;
}

std::vector<char> bytesAs(DType have, const std::vector<char> &bytes,
                          DType want) {
  if (have == want)
    return bytes;
  if (want == DType::F32) {
    const uint16_t *h = reinterpret_cast<const uint16_t *>(bytes.data());
    const size_t n = bytes.size() / 2;
    std::vector<char> out(n * 4);
    float *f = reinterpret_cast<float *>(out.data());
    for (size_t i = 0; i < n; ++i)
      f[i] = have == DType::BF16 ? floatFromBF16(h[i]) : floatFromF16(h[i]);
    return out;
  }
  const float *f = reinterpret_cast<const float *>(bytes.data());
  const size_t n = bytes.size() / 4;
  std::vector<char> out(n * 2);
  uint16_t *h = reinterpret_cast<uint16_t *>(out.data());
  for (size_t i = 0; i < n; ++i)
    h[i] = want == DType::BF16 ? bf16FromFloat(f[i]) : f16FromFloat(f[i]);
  return out;
}

} // namespace dsc::rt::detail

using namespace dsc::rt::detail;

void dsc::rt::requireFiniteToSave(const Safetensors &file,
                                  const std::string &path, int64_t step) {
  for (const auto &[name, t] : file.tensors)
    if (!allFinite(t.dtype, t.bytes.data(), t.bytes.size()))
      throw Error("not writing " + path + ": '" + name +
                  "' holds NaN or infinite values after step " +
                  std::to_string(step) + "; the file is left as it was");
}

Trainer::Trainer(Program program, Backend &backend, Communicator &comm,
                 uint64_t seed)
    : prog(std::move(program)), backend(backend), comm(comm), storage(prog),
      seed(seed) {
  B = prog.metaInt("micro_batch", std::nullopt, 1);
  T = prog.metaInt("seq_len", std::nullopt, 1);
  A = prog.metaInt("grad_accum", std::nullopt, 1);
  V = prog.metaInt("vocab_size", std::nullopt, 1);
  const int64_t compiledFor = prog.metaInt("world_size", 1, 1);
  if (compiledFor != comm.size())
    throw Error("the step was compiled for " + std::to_string(compiledFor) +
                " rank" + (compiledFor == 1 ? "" : "s") +
                " (dsc.mesh) but this job has " +
                std::to_string(comm.size()) +
                "; compile it with --world-size " +
                std::to_string(comm.size()));
  // Batches and ZeRO shards are split over the data axis, parameters
  // sliced over the tensor axis, layers cut into stages along the pipeline
  // axis.
  const Mesh mesh = prog.mesh();
  groups = std::make_unique<MeshGroups>(comm, mesh);
  backend.prepare(prog);
  drawTensorParallelStreamsPerRank(prog, tensorGroup().rank());
  placeExpertShards(prog, groups->group(MeshAxis::DataInner).rank());
  prog.function("micro_step");
  prog.function("apply_step");
  const int64_t stage = pipelineGroup().rank(), stages = mesh.pipeline;
  if (pipelined()) {
    stageBuffers = resolveStage(stage, stages);
    stageComm = comm.split(int(stage), comm.rank()); // collective
  }
  if (prog.functions.count("apply_step_compressed"))
    prog.metaInt("freeze_step", std::nullopt, 0);
  if (prog.functions.count("apply_step_local")) {
    for (const char *fn : {"apply_step_onebit", "apply_step_sync"})
      prog.function(fn);
    zeroOneStart.emplace(prog.metaInt("var_freeze_step", std::nullopt, 0),
                         prog.metaInt("var_update_scaler", std::nullopt, 1),
                         prog.metaInt("local_step_scaler", std::nullopt, 1),
                         prog.metaInt("local_step_clipper", std::nullopt, 1));
    zeroOne = zeroOneStart;
  }
  // The driver writes and reads these buffers directly: their types must be
  // what the module attributes promise, or a hand-edited step would make it
  // write out of bounds.
  expectBuffer(BufferRole::Input, "input_ids", DType::I32, B * T);
  expectBuffer(BufferRole::Input, "targets", DType::I32, B * T);
  expectBuffer(BufferRole::Input, "step", DType::I64, 1);
  expectBuffer(BufferRole::Output, "lr", DType::F32, 1);
  expectBuffer(BufferRole::Output, "grad_norm", DType::F32, 1);
  if (stage == stages - 1) {
    expectBuffer(BufferRole::Output, "loss", DType::F32, 1);
    // @eval_step's, and @micro_step's when compiled with return-logits.
    if (prog.findBuffer(BufferRole::Output, "logits") >= 0)
      expectBuffer(BufferRole::Output, "logits", DType::F32, B * T * V);
  }
}

void Trainer::expectBuffer(BufferRole role, const std::string &name,
                           DType dtype, int64_t elements) const {
  const int id = buffer(role, name);
  const Buffer &buf = prog.buffers[size_t(id)];
  // A sliced buffer (the vocabulary-parallel logits) is checked whole.
  const std::vector<int64_t> whole = wholeShapeOf(id);
  if (buf.dtype != dtype || elementCount(whole) != elements)
    throw Error("compiled step: buffer '" + name + "' is " +
                spacedShape(whole) + " " + dtypeName(buf.dtype) +
                ", expected " + std::to_string(elements) + " elements of " +
                dtypeName(dtype) + " (from dsc.micro_batch, dsc.seq_len, "
                "dsc.vocab_size)");
}

int Trainer::buffer(BufferRole role, const std::string &name) const {
  int id = prog.findBuffer(role, name);
  if (id < 0)
    throw Error("compiled step has no buffer '" + name + "'");
  return id;
}

Tensor Trainer::tensorOf(int id) const {
  const Buffer &buf = prog.buffers[id];
  Tensor t;
  t.dtype = buf.dtype;
  t.shape = buf.shape;
  // A device backend refreshes the host copy first (Storage is the
  // driver's view of the buffers, not the object's logical state).
  Storage &host = const_cast<Storage &>(storage);
  backend.download(host, {id});
  const char *src = static_cast<const char *>(host.data(id));
  t.bytes.assign(src, src + buf.bytes());
  return t;
}

void Trainer::uploadPersistent() {
  deriveMasterWeights();
  backend.upload(storage, prog.persistentBuffers());
}

void Trainer::deriveMasterWeights() {
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &master = prog.buffers[id];
    if (!isMasterWeights(master))
      continue;
    const std::string name = master.name.substr(std::string("master/").size());
    const int param = prog.findBuffer(BufferRole::Param, name);
    if (param < 0)
      throw Error("master weights '" + master.name + "' have no parameter '" +
                  name + "'");
    const Buffer &p = prog.buffers[size_t(param)];
    if (p.dtype != master.dtype)
      throw Error("master weights '" + master.name + "' are " +
                  dtypeName(master.dtype) + " but the parameter is " +
                  dtypeName(p.dtype));
    // The master is the parameter itself (a ZeRO-3 shard, or the whole)
    // or, when only the master is a shard (ZeRO-1/2), this shard rank's
    // part of the flattened, zero-padded parameter.
    const bool part = isShard(int(id)) && !isShard(param);
    const size_t bytes = master.bytes(), have = p.bytes();
    if (!part && bytes != have)
      throw Error("master weights '" + master.name + "' " +
                  shapeStr(master.shape) + " are neither the parameter " +
                  shapeStr(p.shape) + " nor a shard of it");
    const size_t first = part ? bytes * size_t(shardGroup().rank()) : 0;
    const char *src = static_cast<const char *>(storage.data(param));
    char *dst = static_cast<char *>(storage.data(int(id)));
    const size_t copied = first < have ? std::min(bytes, have - first) : 0;
    std::memcpy(dst, src + first, copied);
    std::memset(dst + copied, 0, bytes - copied); // the shard's padding
  }
}

const std::vector<int64_t> &Trainer::sliceShapeOf(int id) const {
  const Buffer &buf = prog.buffers[size_t(id)];
  return isShard(id) ? buf.wholeShape : buf.shape;
}

SliceMap Trainer::sliceMapOf(int id) const {
  return SliceMap::of(prog.buffers[size_t(id)], sliceShapeOf(id),
                      tensorGroup().size());
}

std::vector<int64_t> Trainer::wholeShapeOf(int id) const {
  return isSliced(id) ? sliceMapOf(id).wholeShape() : sliceShapeOf(id);
}

bool Trainer::isShard(int id) const {
  return !prog.buffers[size_t(id)].wholeShape.empty();
}

bool Trainer::isSliced(int id) const {
  return prog.buffers[size_t(id)].sliceDim >= 0;
}

bool Trainer::gatheredOnSave(int id) const {
  return isShard(id) || isSliced(id) || prog.buffers[size_t(id)].perRank;
}

const Function &Trainer::applyFunction(int64_t optimizerStep) {
  if (zeroOne) {
    // The policy's counters depend on the step alone: a resumed run
    // replays the steps before it.
    if (zeroOne->expected() != optimizerStep) {
      zeroOne = zeroOneStart;
      for (int64_t k = 1; k < optimizerStep; ++k)
        zeroOne->next(k);
    }
    if (zeroOne->freezesAt(optimizerStep))
      zeroCompressionErrors();
    return prog.function(zeroOneStageFunction(zeroOne->next(optimizerStep)));
  }
  const bool compressed =
      prog.functions.count("apply_step_compressed") &&
      optimizerStep > prog.metaInt("freeze_step", std::nullopt, 0);
  // 1-bit LAMB: the state the compression stage starts from (momentum
  // scales, fresh variance, factors), from the warm-up's last state.
  if (compressed && prog.functions.count("onebit_lamb_freeze") &&
      optimizerStep == prog.metaInt("freeze_step", std::nullopt, 0) + 1)
    backend.run(prog, prog.function("onebit_lamb_freeze"), storage,
                RngContext{seed, uint64_t(step)});
  if (compressed)
    return prog.function("apply_step_compressed");
  return prog.function("apply_step");
}

void Trainer::zeroCompressionErrors() {
  std::vector<int> errors;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const std::string &name = prog.buffers[id].name;
    if (prog.buffers[id].role == BufferRole::OptState &&
        (name.rfind("worker_error/", 0) == 0 ||
         name.rfind("server_error/", 0) == 0)) {
      std::memset(storage.data(int(id)), 0, prog.buffers[id].bytes());
      errors.push_back(int(id));
    }
  }
  backend.upload(storage, errors);
}

void Trainer::requireValidState(const std::string &source) {
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if ((buf.role == BufferRole::Param || buf.role == BufferRole::OptState) &&
        !allFinite(buf.dtype, storage.data(int(id)), buf.bytes()))
      throw Error(source + ": tensor '" + buf.name +
                  "' holds NaN or infinite values");
    // Second moments (Adam's, Adafactor's factors) and 8-bit Adam's block
    // scales are never negative; a negative one trains to a NaN step later.
    static const char *const kNonNegative[] = {
        "exp_avg_sq/",     "exp_avg_sq_fresh/", "exp_avg_sq_row/",
        "exp_avg_sq_col/", "exp_avg_absmax/",   "exp_avg_sq_absmax/"};
    if (buf.role != BufferRole::OptState || buf.dtype != DType::F32 ||
        std::none_of(std::begin(kNonNegative), std::end(kNonNegative),
                     [&](const char *prefix) {
                       return buf.name.rfind(prefix, 0) == 0;
                     }))
      continue;
    const float *v = storage.f32(int(id));
    for (int64_t i = 0, n = buf.numElements(); i < n; ++i)
      if (v[i] < 0.0f)
        throw Error(source + ": tensor '" + buf.name + "' holds " +
                    std::to_string(v[i]) + " at element " +
                    std::to_string(i) +
                    "; a second moment or quantization scale is never "
                    "negative");
  }
  // The fp16 loss scaler's state [scale, hysteresis used, good steps]:
  // scale 0 means "not set yet" (the initial scale); a negative one would
  // train with flipped gradients.
  const int scaler = prog.findBuffer(BufferRole::OptState, "loss_scaler/state");
  if (scaler >= 0 && prog.buffers[size_t(scaler)].dtype == DType::F32 &&
      prog.buffers[size_t(scaler)].numElements() >= 1 &&
      storage.f32(scaler)[0] < 0.0f)
    throw Error(source + ": tensor 'loss_scaler/state' holds loss scale " +
                std::to_string(storage.f32(scaler)[0]) +
                "; a loss scale must be positive (or 0: not set yet)");
}

RngContext Trainer::loadMicroBatch(const TokenFile &data, int64_t micro) {
  const int ids = buffer(BufferRole::Input, "input_ids");
  const int targets = buffer(BufferRole::Input, "targets");
  // This data rank's rows of the global batch (TokenFile::batch); the ranks
  // of a tensor group and the stages of a pipeline read the same rows. The
  // random stream is keyed by the same slice index, so D data ranks with A
  // micro-batches draw the dropout and masking of one rank with D*A
  // micro-batches.
  const int64_t slices = A * dataGroup().size(),
                slice = dataGroup().rank() * A + micro;
  data.batch(step, slice, slices, B, T, storage.i32(ids),
             storage.i32(targets));
  backend.upload(storage, {ids, targets});
  return RngContext{seed, uint64_t(step * slices + slice)};
}

void Trainer::runMicroStep(const TokenFile &data, int64_t micro) {
  const RngContext rng = loadMicroBatch(data, micro);
  backend.run(prog, prog.function("micro_step"), storage, rng);
}

StepStats Trainer::trainStep(const TokenFile &data) {
  auto start = std::chrono::steady_clock::now();
  StepStats stats;
  stats.step = step;
  const CommTraffic before = comm.traffic();
  if (pipelined()) {
    // Only the last stage has the loss; weighted by the number of stages,
    // the mean over all ranks is the mean over the last stage's.
    const auto scheduleStart = std::chrono::steady_clock::now();
    const ScheduleRun run = runPipelineSchedule(data);
    stats.loss = run.lossSum / double(A) * double(pipelineGroup().size());
    stats.pipelineStashBytes = run.stashPeakBytes;
    float idle[1] = {float(
        run.waitSeconds / std::chrono::duration<double>(
                          std::chrono::steady_clock::now() - scheduleStart)
                          .count())};
    pipelineGroup().allReduce(idle, 1, ReduceOp::Mean);
    stats.pipelineBubble = idle[0];
    sumTiedGradients();
  } else {
    int lossBuf = buffer(BufferRole::Output, "loss");
    for (int64_t m = 0; m < A; ++m) {
      runMicroStep(data, m);
      backend.download(storage, {lossBuf});
      stats.loss += storage.f32(lossBuf)[0] / double(A);
    }
  }
  // The global batch's mean: every rank's micro-batches weigh the same.
  float globalLoss = float(stats.loss);
  comm.allReduce(&globalLoss, 1, ReduceOp::Mean);
  stats.loss = globalLoss;
  // Without fp16 loss scaling (which skips such steps) a non-finite loss
  // ends the run: say where it began while the state is still the step's.
  if (!std::isfinite(stats.loss) &&
      prog.findBuffer(BufferRole::Output, "loss_scale") < 0) {
    const std::string where = whereNonFiniteBegins(data);
    throw Diverged("step " + std::to_string(step) + ": the loss is " +
                       (std::isnan(stats.loss) ? "NaN" : "infinite") + ": " +
                       (where.empty() ? "training diverged (learning rate "
                                        "too high?)"
                                      : where) +
                       "; stopped before saving anything",
                   stats);
  }
  // DeepSpeed advances neither the optimizer's step nor the LR scheduler on
  // a skipped (overflowed) step: the counter is the applied updates + 1.
  const auto optimizerStart = std::chrono::steady_clock::now();
  stats.microSeconds =
      std::chrono::duration<double>(optimizerStart - start).count();
  const int stepBuf = buffer(BufferRole::Input, "step");
  const int64_t optimizerStep = step - skipped + 1;
  *storage.i64(stepBuf) = optimizerStep;
  backend.upload(storage, {stepBuf});
  backend.run(prog, applyFunction(optimizerStep), storage,
              RngContext{seed, uint64_t(step)});
  const int lrBuf = buffer(BufferRole::Output, "lr");
  const int normBuf = buffer(BufferRole::Output, "grad_norm");
  int scaleBuf = prog.findBuffer(BufferRole::Output, "loss_scale");
  int skippedBuf = prog.findBuffer(BufferRole::Output, "skipped");
  backend.download(storage, {lrBuf, normBuf});
  stats.lr = storage.f32(lrBuf)[0];
  stats.gradNorm = storage.f32(normBuf)[0];
  if (scaleBuf >= 0 && skippedBuf >= 0) {
    backend.download(storage, {scaleBuf, skippedBuf});
    stats.hasLossScale = true;
    stats.lossScale = storage.f32(scaleBuf)[0];
    stats.skipped = storage.f32(skippedBuf)[0] != 0.0f;
    skipped += stats.skipped;
  }
  const auto end = std::chrono::steady_clock::now();
  stats.optimizerSeconds =
      std::chrono::duration<double>(end - optimizerStart).count();
  double seconds = std::chrono::duration<double>(end - start).count();
  stats.tokensPerSecond = double(A * B * T * dataGroup().size()) / seconds;
  for (int k = 0; k < int(CollectiveKind::Count); ++k)
    stats.commSent.bytes[k] = comm.traffic().bytes[k] - before.bytes[k];
  // A skipped fp16 step is loss scaling at work; any other non-finite loss
  // or gradient norm means the weights are now poisoned.
  if (!stats.skipped) {
    const bool lossBad = !std::isfinite(stats.loss);
    if (lossBad || !std::isfinite(stats.gradNorm)) {
      const double bad = lossBad ? stats.loss : stats.gradNorm;
      throw Diverged("step " + std::to_string(step) + ": the " +
                         (lossBad ? "loss" : "gradient norm") + " is " +
                         (std::isnan(bad) ? "NaN" : "infinite") +
                         ": training diverged (learning rate too high?); "
                         "stopped before saving anything",
                     stats);
    }
  }
  ++step;
  return stats;
}

Safetensors Trainer::inspectMicroStep(const TokenFile &data,
                                      int64_t repeats) {
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (prog.buffers[id].role == BufferRole::GradAcc)
      std::memset(storage.data(int(id)), 0, prog.buffers[id].bytes());
  uploadPersistent();
  for (int64_t r = 0; r < repeats; ++r)
    runMicroStep(data, 0);
  Safetensors out;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role == BufferRole::GradAcc)
      out.tensors["grad." + buf.name.substr(std::strlen("grad/"))] =
          tensorOf(int(id));
    else if (buf.role == BufferRole::Output &&
             (buf.name == "loss" || buf.name == "logits"))
      out.tensors[buf.name] = tensorOf(int(id));
  }
  out.tensors["input_ids"] = tensorOf(buffer(BufferRole::Input, "input_ids"));
  out.tensors["targets"] = tensorOf(buffer(BufferRole::Input, "targets"));
  // BERT corrupts its inputs in-graph: expose what the model saw.
  for (const Instr &instr : prog.function("micro_step").body)
    if (instr.op == Opcode::MlmMask) {
      out.tensors["mlm_inputs"] = tensorOf(instr.outputs[0]);
      out.tensors["mlm_labels"] = tensorOf(instr.outputs[1]);
    }
  return out;
}

std::vector<std::vector<int32_t>>
Trainer::generate(const std::vector<std::vector<int32_t>> &prompts,
                  int64_t maxNewTokens, int32_t stopToken) {
  const Function &eval = prog.function("eval_step");
  const int idsBuf = buffer(BufferRole::Input, "input_ids");
  const int logitsBuf = buffer(BufferRole::Output, "logits");
  if (isSliced(logitsBuf))
    throw Error("sampling reads whole logits; this step's are sliced over "
                "the tensor axis (sample with a one-process step)");
  int32_t *ids = storage.i32(idsBuf);
  const float *logits = storage.f32(logitsBuf);
  std::vector<std::vector<int32_t>> out(prompts.size());
  // B prompts at a time, one per row: the causal mask makes each row's
  // logits at its last position depend on that row's tokens alone (but for
  // experts' capacity limits, see Trainer.h), and the zero padding after
  // them on nothing.
  for (size_t first = 0; first < prompts.size(); first += size_t(B)) {
    const size_t rows = std::min(prompts.size() - first, size_t(B));
    std::vector<std::vector<int32_t>> tokens(prompts.begin() + first,
                                             prompts.begin() + first + rows);
    std::vector<bool> done(rows, false);
    for (size_t r = 0; r < rows; ++r) {
      if (tokens[r].empty())
        throw Error("generate: prompt " + std::to_string(first + r) +
                    " is empty");
      done[r] = int64_t(tokens[r].size()) >= T;
    }
    for (int64_t n = 0; n < maxNewTokens; ++n) {
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; }))
        break;
      std::fill(ids, ids + B * T, 0);
      for (size_t r = 0; r < rows; ++r)
        if (!done[r])
          std::copy(tokens[r].begin(), tokens[r].end(), ids + r * T);
      backend.upload(storage, {idsBuf});
      backend.run(prog, eval, storage, RngContext{seed, 0});
      backend.download(storage, {logitsBuf});
      for (size_t r = 0; r < rows; ++r) {
        if (done[r])
          continue;
        const float *row = logits + (r * T + tokens[r].size() - 1) * V;
        const int32_t next = int32_t(std::max_element(row, row + V) - row);
        tokens[r].push_back(next);
        done[r] = next == stopToken || int64_t(tokens[r].size()) >= T;
      }
    }
    for (size_t r = 0; r < rows; ++r)
      out[first + r].assign(tokens[r].begin() + prompts[first + r].size(),
                            tokens[r].end());
  }
  return out;
}
