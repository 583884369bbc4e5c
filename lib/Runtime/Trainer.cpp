//===- Trainer.cpp - The driver loop around a compiled step --------------===//

#include "dsc/Runtime/Trainer.h"

#include "WeightFileNames.h"
#include "dsc/Program/PipelineSchedule.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>

using namespace dsc::rt;

namespace {

/// "[128, 32]", as messages about weight files print shapes (rt::shapeStr
/// prints the runtime's "[128,32]").
std::string spacedShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// Whether every element of an f32 buffer is finite (other dtypes are).
bool allFinite(DType dtype, const void *data, size_t bytes) {
  if (dtype != DType::F32)
    return true;
  const float *v = static_cast<const float *>(data);
  for (size_t i = 0, n = bytes / sizeof(float); i < n; ++i)
    if (!std::isfinite(v[i]))
      return false;
  return true;
}

/// The optimizers `prog` updates with, by their dsc op ("adam", "lamb",
/// "sgd"; sorted, comma-joined). Checkpoints record it: AdamW's and LAMB's
/// states have the same tensor names, so only this tells them apart.
std::string optimizerSignature(const Program &prog) {
  std::set<std::string> names;
  for (const auto &[name, fn] : prog.functions)
    for (const Instr &I : fn.body)
      if (opInfo(I.op).family == OpFamily::Optimizer)
        names.insert(opInfo(I.op).mlirOp);
  std::string joined;
  for (const std::string &n : names)
    joined += (joined.empty() ? "" : ",") + n;
  return joined;
}

} // namespace

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

Trainer::StageBuffers Trainer::resolveStage(int64_t stage,
                                            int64_t stages) const {
  if (prog.metaInt("pipeline_stage", -1, -1) != stage)
    throw Error("rank " + std::to_string(comm.rank()) + " holds pipeline "
                "stage " + std::to_string(stage) + " but its step is " +
                (prog.meta.count("pipeline_stage")
                     ? "stage " + std::to_string(
                                      prog.metaInt("pipeline_stage", -1, -1))
                     : std::string("not cut into stages")) +
                " (each rank compiles its own stage)");
  const bool first = stage == 0, last = stage == stages - 1;
  StageBuffers b;
  b.shape.kind = pipelineScheduleNamed(prog.metaString("pipeline_schedule"));
  b.shape.stages = stages;
  b.shape.microBatches = A;
  b.shape.chunks = prog.metaInt("pipeline_chunks", 1, 1);
  checkPipelineShape(b.shape);
  // The driver's message tags name each virtual-stage boundary and
  // direction (runPipelineSchedule); MPI promises tags up to 32767.
  if (2 * b.shape.stages * b.shape.chunks + 1 > 32767)
    throw Error("pipeline: " + std::to_string(b.shape.stages) + " stages x " +
                std::to_string(b.shape.chunks) +
                " model chunks are more virtual stages than the driver's "
                "message tags can name (at most 16383)");
  // A stage's activations travel as bytes: what it receives and the
  // gradient it sends back have one shape, as do what it sends and the
  // gradient it gets back.
  auto samePair = [&](int x, int y) {
    const Buffer &a = prog.buffers[size_t(x)], &c = prog.buffers[size_t(y)];
    if (a.dtype != DType::F32 || a.dtype != c.dtype || a.shape != c.shape)
      throw Error("compiled step: pipeline buffers '" + a.name + "' and '" +
                  c.name + "' must be f32 of one shape");
  };
  const int64_t v = b.shape.chunks;
  for (int64_t k = 0; k < v; ++k) {
    auto named = [&](const std::string &name) {
      return pipelineChunkName(name, k);
    };
    ChunkBuffers c;
    c.forward = named("stage_forward");
    c.backward = named("micro_step");
    if (!(first && k == 0)) {
      c.input = buffer(BufferRole::Input, named("stage_input"));
      c.inputGrad = buffer(BufferRole::Output, named("stage_input_grad"));
      samePair(c.input, c.inputGrad);
    }
    if (!(last && k == v - 1)) {
      c.output = buffer(BufferRole::Output, named("stage_output"));
      c.outputGrad = buffer(BufferRole::Input, named("stage_output_grad"));
      samePair(c.output, c.outputGrad);
    } else {
      c.loss = buffer(BufferRole::Output, "loss");
    }
    prog.function(c.forward); // throws naming a missing one
    prog.function(c.backward);
    c.kept = pipelineStashBuffers(prog, k);
    b.chunks.push_back(std::move(c));
  }
  // The first and the last stage add their gradients of the parameters
  // both hold (comma-separated names).
  if (first || last) {
    const std::string names = prog.metaString("pipeline_tied_params", "");
    for (size_t at = 0; at < names.size();) {
      size_t end = names.find(',', at);
      if (end == std::string::npos)
        end = names.size();
      const int id = buffer(BufferRole::GradAcc,
                            "grad/" + names.substr(at, end - at));
      if (prog.buffers[size_t(id)].dtype != DType::F32)
        throw Error("compiled step: tied gradient '" +
                    prog.buffers[size_t(id)].name + "' must be f32");
      b.tiedGrads.push_back(id);
      at = end + 1;
    }
  }
  return b;
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
  backend.upload(storage, prog.persistentBuffers());
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

void Trainer::storeWhole(const std::vector<char> &wholeTensor, int id) {
  const Buffer &buf = prog.buffers[size_t(id)];
  // This rank's slice (both arms lvalues: the unsliced tensor is not
  // copied).
  std::vector<char> slice;
  if (isSliced(id))
    slice = sliceMapOf(id).extract(wholeTensor, tensorGroup().rank(),
                                   dtypeSize(buf.dtype));
  const std::vector<char> &whole = isSliced(id) ? slice : wholeTensor;
  char *dst = static_cast<char *>(storage.data(id));
  const size_t bytes = buf.bytes();
  if (!isShard(id)) {
    std::memcpy(dst, whole.data(), bytes);
    return;
  }
  const size_t first = bytes * size_t(dataGroup().rank());
  const size_t have =
      first < whole.size() ? std::min(bytes, whole.size() - first) : 0;
  std::memcpy(dst, whole.data() + first, have);
  std::memset(dst + have, 0, bytes - have); // the padding
}

void Trainer::initializeWeights() {
  initializeParameters(prog, storage, seed, comm.rank());
  uploadPersistent();
  step = 0;
  skipped = 0;
}

void Trainer::loadWeights(const std::string &path) {
  Safetensors file = Safetensors::read(path);
  const WeightFileNames fileNames = WeightFileNames::of(prog);
  auto inFile = [&](const std::string &name) {
    return file.tensors.count(name) || file.skipped.count(name);
  };
  std::set<std::string> used;
  std::vector<int> uninitialized; // LoRA adapters a base file does not have
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role != BufferRole::Param)
      continue;
    std::vector<std::string> present;
    for (const std::string &name : fileNames.candidates(buf.name))
      if (inFile(name))
        present.push_back(name);
    // Both spellings of one weight: which one is meant is a guess, so the
    // file is refused even when the two are equal.
    if (present.size() > 1)
      throw Error(path + ": both '" + present[0] + "' and '" + present[1] +
                  "' are present for the model's '" + buf.name +
                  "'; a file must name each weight once");
    // A base model's file has no LoRA adapters: they get their
    // initialisation (A uniform, B zero; loadAdapter may replace them).
    if (present.empty() && !buf.frozen && isLoraAdapterName(buf.name)) {
      uninitialized.push_back(int(id));
      continue;
    }
    if (present.empty())
      throw Error(path + ": missing tensor '" + buf.name + "'");
    const std::string &name = present[0];
    used.insert(name);
    auto it = file.tensors.find(name);
    if (it == file.tensors.end())
      throw Error(path + ": tensor '" + name + "' has dtype " +
                  file.skipped.at(name) +
                  ", which dsc cannot load (F32, F16, BF16)");
    const Tensor *found = &it->second;
    const std::vector<int64_t> &want = wholeShapeOf(int(id));
    if (found->shape != want || found->dtype != buf.dtype)
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(found->shape) + " " + dtypeName(found->dtype) +
                  ", the model expects " + spacedShape(want) + " " +
                  dtypeName(buf.dtype));
    storeWhole(found->bytes, int(id)); // ZeRO-3: this rank's part
  }
  initializeParameters(prog, storage, seed, comm.rank(), &uninitialized);
  requireFiniteState(path);

  // Hugging Face files may also hold the tied output weights under their own
  // names. dsc ties them, so such a tensor is accepted only if it is exactly
  // the weight it is tied to (same shape, same bytes after widening).
  for (const auto &[tied, to] : fileNames.tied) {
    if (!inFile(tied) || prog.findBuffer(BufferRole::Param, to) < 0)
      continue;
    std::string toName;
    for (const std::string &n : fileNames.candidates(to))
      if (used.count(n))
        toName = n;
    if (auto sk = file.skipped.find(tied); sk != file.skipped.end())
      throw Error(path + ": tensor '" + tied + "' has dtype " + sk->second +
                  ", which dsc cannot compare with '" + toName +
                  "', to which the model ties it");
    auto a = file.tensors.find(tied), b = file.tensors.find(toName);
    if (a == file.tensors.end() || b == file.tensors.end() ||
        a->second.shape != b->second.shape ||
        a->second.bytes != b->second.bytes)
      throw Error(path + ": tensor '" + tied + "' differs from '" + toName +
                  "', to which the model ties it");
    used.insert(tied);
  }
  // Anything else in the file is refused (a checkpoint of a larger or
  // different model would otherwise load in part), except the buffers
  // Hugging Face checkpoints carry that dsc does not need.
  // A pipeline stage's model is a part of the whole: a tensor must be used
  // by some stage.
  std::set<std::string> names;
  for (const auto &[name, t] : file.tensors)
    names.insert(name);
  for (const auto &[name, dtype] : file.skipped)
    names.insert(name);
  for (const std::string &name : names)
    if (fileNames.isUnused(name))
      used.insert(name);
  requireUsedByAStage(names, used, [&](const std::string &name) {
    return path + ": tensor '" + name +
           "' is not used by the model (weights of a different model or "
           "size?)";
  });
  uploadPersistent();
}

void Trainer::saveWeights(const std::string &path) const {
  Safetensors file;
  file.metadata["format"] = "pt";
  writeFromAllRanks(file, path, {BufferRole::Param});
}

void Trainer::writeFromAllRanks(Safetensors &file, const std::string &path,
                                std::initializer_list<BufferRole> roles) const {
  // Shards are gathered by every rank; other tensors only each stage's
  // writer needs (rank 0 without a pipeline).
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (std::find(roles.begin(), roles.end(), prog.buffers[id].role) !=
            roles.end() &&
        (stageWriter() || gatheredOnSave(int(id))))
      file.tensors[prog.buffers[id].name] = wholeTensorOf(int(id));
  gatherStages(file);
  if (comm.rank() == 0) {
    requireFiniteToSave(file, path, step);
    file.write(path);
  }
  comm.barrier(); // the ranks go on together once the file is written
}

void Trainer::gatherStages(Safetensors &file) const {
  if (!pipelined() || !stageWriter())
    return;
  // The writers form the pipeline group of rank 0.
  Communicator &pipe = pipelineGroup();
  if (pipe.rank() != 0) {
    Safetensors part;
    part.tensors = std::move(file.tensors);
    const std::string bytes = part.serialize("pipeline stage");
    int64_t size = int64_t(bytes.size());
    pipe.send(&size, sizeof size, 0);
    pipe.send(bytes.data(), size, 0);
    return;
  }
  for (int s = 1; s < pipe.size(); ++s) {
    int64_t size = 0;
    pipe.recv(&size, sizeof size, s);
    std::string bytes(size_t(size), '\0');
    pipe.recv(bytes.data(), size, s);
    Safetensors part = Safetensors::parse(
        bytes, "pipeline stage " + std::to_string(s) + "'s tensors");
    // A tied parameter is on two stages with equal values: the first
    // stage's copy is kept (and so is its optimizer state).
    for (auto &[name, tensor] : part.tensors)
      file.tensors.emplace(name, std::move(tensor));
  }
}

void Trainer::requireUsedByAStage(
    const std::set<std::string> &names, const std::set<std::string> &used,
    const std::function<std::string(const std::string &)> &message) const {
  // Per name, whether this stage used it; the maximum over the stages.
  std::vector<float> usedHere;
  for (const std::string &name : names)
    usedHere.push_back(used.count(name) ? 1.0f : 0.0f);
  if (pipelined() && !usedHere.empty())
    pipelineGroup().allReduce(usedHere.data(), int64_t(usedHere.size()),
                              ReduceOp::Max);
  size_t i = 0;
  for (const std::string &name : names)
    if (usedHere[i++] == 0.0f)
      throw Error(message(name));
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

bool Trainer::keepsRankCopies(int id) const {
  const Buffer &b = prog.buffers[size_t(id)];
  return zeroOne && !b.perRank &&
         (b.role == BufferRole::Param ||
          (b.role == BufferRole::OptState && b.name.rfind("exp_avg/", 0) == 0));
}

Tensor Trainer::wholeTensorOf(int id, bool rankCopies) const {
  Tensor t = tensorOf(id);
  const Buffer &buf = prog.buffers[size_t(id)];
  if (buf.perRank || rankCopies) {
    // One row per rank of the stage (the job without a pipeline).
    Communicator &ranks = stageRanks();
    std::vector<char> all(t.bytes.size() * size_t(ranks.size()));
    ranks.allGather(t.bytes.data(), all.data(), int64_t(t.bytes.size()));
    t.shape.insert(t.shape.begin(), ranks.size());
    t.bytes = std::move(all);
    return t;
  }
  if (isShard(id)) {
    // ZeRO: data rank i holds elements [i*s, (i+1)*s) of the flattened,
    // padded tensor; the padding is cut off.
    Communicator &data = dataGroup();
    std::vector<char> all(t.bytes.size() * size_t(data.size()));
    data.allGather(t.bytes.data(), all.data(), int64_t(t.bytes.size()));
    t.shape = buf.wholeShape;
    all.resize(size_t(elementCount(t.shape)) * dtypeSize(t.dtype));
    t.bytes = std::move(all);
  }
  if (isSliced(id)) {
    // Tensor slicing: the tensor group's slices, put back in place.
    Communicator &tensor = tensorGroup();
    std::vector<char> slices(t.bytes.size() * size_t(tensor.size()));
    tensor.allGather(t.bytes.data(), slices.data(), int64_t(t.bytes.size()));
    const SliceMap map = sliceMapOf(id);
    t.bytes = map.assemble(slices, dtypeSize(t.dtype));
    t.shape = map.wholeShape();
  }
  return t;
}

void Trainer::saveCheckpoint(const std::string &path) const {
  Safetensors file;
  file.metadata["format"] = "dsc-checkpoint";
  file.metadata["step"] = std::to_string(step);
  file.metadata["seed"] = std::to_string(seed);
  file.metadata["skipped_steps"] = std::to_string(skipped);
  file.metadata["optimizer"] = optimizerSignature(prog);
  // 0/1 Adam's local steps let the ranks' parameters and momenta drift
  // apart until the next synchronisation: every rank's copy is kept beside
  // rank 0's (which a weights reader takes).
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (keepsRankCopies(int(id))) {
      Tensor copies = wholeTensorOf(int(id), /*rankCopies=*/true);
      if (stageWriter())
        file.tensors[kRankCopiesPrefix + prog.buffers[id].name] =
            std::move(copies);
    }
  // Accumulators are zero between steps, so they are not stored.
  writeFromAllRanks(file, path, {BufferRole::Param, BufferRole::OptState});
}

void Trainer::loadCheckpoint(const std::string &path) {
  Safetensors file = Safetensors::read(path);
  checkCheckpointFormat(file.metadata, path);
  // (Checkpoints written before the key existed do not say.)
  auto optimizer = file.metadata.find("optimizer");
  if (const std::string ours = optimizerSignature(prog);
      optimizer != file.metadata.end() && optimizer->second != ours)
    throw Error(path + ": a checkpoint of optimizer '" + optimizer->second +
                "', but this step trains with '" + ours + "'");
  std::set<std::string> stored;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role != BufferRole::Param && buf.role != BufferRole::OptState)
      continue;
    stored.insert(buf.name);
    auto it = file.tensors.find(buf.name);
    if (it == file.tensors.end())
      throw Error(path + ": missing tensor '" + buf.name +
                  "' (checkpoint of a different model or optimizer?)");
    char *dst = static_cast<char *>(storage.data(int(id)));
    // Per-rank state is one row per rank of the stage (of the job without
    // a pipeline).
    Communicator &ranks = stageRanks();
    const std::string perStage = pipelined() ? " per pipeline stage" : "";
    if (buf.perRank) {
      // Each rank's own compression errors: only the same world size can
      // continue them.
      const Tensor &t = it->second;
      std::vector<int64_t> want = buf.shape;
      want.insert(want.begin(), ranks.size());
      if (!t.shape.empty() && t.shape[0] != ranks.size() &&
          std::vector<int64_t>(t.shape.begin() + 1, t.shape.end()) ==
              buf.shape)
        throw Error(path + ": tensor '" + buf.name + "' holds the 1-bit "
                    "compression errors of " + std::to_string(t.shape[0]) +
                    " ranks; resume this checkpoint with " +
                    std::to_string(t.shape[0]) + " ranks" + perStage);
      if (t.shape != want || t.dtype != buf.dtype)
        throw Error(path + ": tensor '" + buf.name + "' has shape " +
                    spacedShape(t.shape) + ", expected " + spacedShape(want));
      std::memcpy(dst, t.bytes.data() + buf.bytes() * size_t(ranks.rank()),
                  buf.bytes());
      continue;
    }
    // Checkpoints hold whole tensors whatever the ZeRO stage and world
    // size; a sharded buffer takes this rank's part.
    const std::vector<int64_t> &want = wholeShapeOf(int(id));
    if (it->second.shape != want || it->second.dtype != buf.dtype)
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(it->second.shape) + ", expected " +
                  spacedShape(want));
    storeWhole(it->second.bytes, int(id));
  }
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    if (!keepsRankCopies(int(id)))
      continue;
    const Buffer &buf = prog.buffers[id];
    const std::string name = kRankCopiesPrefix + buf.name;
    stored.insert(name);
    auto it = file.tensors.find(name);
    Communicator &ranks = stageRanks();
    std::vector<int64_t> want = buf.shape;
    want.insert(want.begin(), ranks.size());
    if (it == file.tensors.end() || it->second.shape != want ||
        it->second.dtype != buf.dtype)
      throw Error(path + ": tensor '" + name + "' " +
                  (it == file.tensors.end()
                       ? std::string("is missing")
                       : "has shape " + spacedShape(it->second.shape)) +
                  ", expected " + spacedShape(want) +
                  " (0/1 Adam's ranks hold their own parameters and momenta "
                  "between synchronisations: resume with the world size "
                  "that wrote the checkpoint)");
    std::memcpy(storage.data(int(id)),
                it->second.bytes.data() + buf.bytes() * size_t(ranks.rank()),
                buf.bytes());
  }
  const CheckpointCounters counters =
      parseCheckpointCounters(file.metadata, path);
  step = counters.step;
  seed = counters.seed;
  skipped = counters.skipped;
  // A tensor the step does not have (no stage's, in a pipeline): a
  // checkpoint of a larger model or of another optimizer, which would
  // otherwise resume in part.
  std::set<std::string> names;
  for (const auto &[name, tensor] : file.tensors)
    names.insert(name);
  requireUsedByAStage(names, stored, [&](const std::string &name) {
    return path + ": tensor '" + name +
           "' is not part of this model and optimizer (checkpoint of a "
           "different model or optimizer?)";
  });
  if (!file.skipped.empty())
    throw Error(path + ": tensor '" + file.skipped.begin()->first +
                "' has dtype " + file.skipped.begin()->second +
                ", which a dsc checkpoint never holds");
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (prog.buffers[id].role == BufferRole::GradAcc)
      std::memset(storage.data(int(id)), 0, prog.buffers[id].bytes());
  requireFiniteState(path);
  uploadPersistent();
}

void Trainer::requireFiniteState(const std::string &source) {
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if ((buf.role == BufferRole::Param || buf.role == BufferRole::OptState) &&
        !allFinite(buf.dtype, storage.data(int(id)), buf.bytes()))
      throw Error(source + ": tensor '" + buf.name +
                  "' holds NaN or infinite values");
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

Trainer::ScheduleRun Trainer::runPipelineSchedule(const TokenFile &data) {
  using Clock = std::chrono::steady_clock;
  ScheduleRun run;
  auto waited = [&](Clock::time_point since) {
    run.waitSeconds +=
        std::chrono::duration<double>(Clock::now() - since).count();
  };
  Communicator &pipe = pipelineGroup();
  const int s = pipe.rank(), P = pipe.size();
  const StageBuffers &b = *stageBuffers;
  // Chunk k holds virtual stage s + k*P: its activations come from the
  // rank before (chunk k - 1 of the last rank, for rank 0) and go to the
  // rank after. A message's tag names the boundary it crosses and its
  // direction, so the two that two ranks may exchange (an activation one
  // way, a gradient the other, or several chunks') never mix; per tag, MPI
  // keeps the order, which is the micro-batches' on both ends.
  const int before = (s + P - 1) % P, after = (s + 1) % P;
  auto tag = [&](int64_t boundary, bool gradient) {
    return int(2 * boundary + (gradient ? 1 : 0) + 1);
  };
  // The kept buffers of the micro-batch chunks whose backward has not run,
  // and every send of the step until it has completed.
  std::vector<std::vector<char>> inFlight(
      static_cast<size_t>(A * b.shape.chunks));
  std::vector<std::vector<char>> outbox;
  outbox.reserve(size_t(2 * A * b.shape.chunks));
  auto sendBuffer = [&](int id, int to, int tag) {
    backend.download(storage, {id});
    const char *bytes = static_cast<const char *>(storage.data(id));
    outbox.emplace_back(bytes, bytes + prog.buffers[size_t(id)].bytes());
    pipe.startSend(outbox.back().data(), int64_t(outbox.back().size()), to,
                   tag);
  };
  auto receive = [&](int id, int from, int tag) {
    const auto since = Clock::now();
    pipe.recv(storage.data(id), int64_t(prog.buffers[size_t(id)].bytes()),
              from, tag);
    waited(since);
    backend.upload(storage, {id});
  };
  int64_t stashBytes = 0;
  for (const PipelineAction &action : pipelineOrder(b.shape, s)) {
    const int64_t m = action.microBatch;
    const ChunkBuffers &c = b.chunks[size_t(action.chunk)];
    const int64_t virtualStage = s + action.chunk * P;
    std::vector<char> &stash = inFlight[size_t(action.chunk * A + m)];
    const RngContext rng = loadMicroBatch(data, m);
    if (action.kind == PipelineAction::Forward) {
      if (c.input >= 0)
        receive(c.input, before, tag(virtualStage, false));
      backend.run(prog, prog.function(c.forward), storage, rng);
      backend.download(storage, c.kept);
      for (int id : c.kept) {
        const char *bytes = static_cast<const char *>(storage.data(id));
        stash.insert(stash.end(), bytes,
                     bytes + prog.buffers[size_t(id)].bytes());
      }
      stashBytes += int64_t(stash.size());
      run.stashPeakBytes = std::max(run.stashPeakBytes, stashBytes);
      if (c.loss >= 0) {
        backend.download(storage, {c.loss});
        run.lossSum += storage.f32(c.loss)[0];
      } else {
        sendBuffer(c.output, after, tag(virtualStage + 1, false));
      }
      continue;
    }
    size_t at = 0;
    for (int id : c.kept) {
      const size_t bytes = prog.buffers[size_t(id)].bytes();
      std::memcpy(storage.data(id), stash.data() + at, bytes);
      at += bytes;
    }
    stashBytes -= int64_t(stash.size());
    stash = {};
    backend.upload(storage, c.kept);
    if (c.outputGrad >= 0)
      receive(c.outputGrad, after, tag(virtualStage + 1, true));
    backend.run(prog, prog.function(c.backward), storage, rng);
    if (c.inputGrad >= 0)
      sendBuffer(c.inputGrad, before, tag(virtualStage, true));
  }
  const auto since = Clock::now();
  pipe.waitSends();
  waited(since);
  return run;
}

void Trainer::sumTiedGradients() {
  Communicator &pipe = pipelineGroup();
  const int s = pipe.rank(), P = pipe.size();
  const int peer = s == 0 ? P - 1 : 0;
  for (int id : stageBuffers->tiedGrads) {
    backend.download(storage, {id});
    float *mine = storage.f32(id);
    const int64_t n = prog.buffers[size_t(id)].numElements();
    std::vector<float> sent(mine, mine + n), theirs(static_cast<size_t>(n));
    pipe.startSend(sent.data(), n * int64_t(sizeof(float)), peer);
    pipe.recv(theirs.data(), n * int64_t(sizeof(float)), peer);
    pipe.waitSends();
    // Both stages add the same two numbers: the copies stay equal.
    for (int64_t i = 0; i < n; ++i)
      mine[i] += theirs[size_t(i)];
    backend.upload(storage, {id});
  }
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
  // DeepSpeed advances neither the optimizer's step nor the LR scheduler on
  // a skipped (overflowed) step: the counter is the applied updates + 1.
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
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
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

Safetensors Trainer::inspectMicroStep(const TokenFile &data) {
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (prog.buffers[id].role == BufferRole::GradAcc)
      std::memset(storage.data(int(id)), 0, prog.buffers[id].bytes());
  uploadPersistent();
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

std::vector<int32_t> Trainer::generate(const std::vector<int32_t> &prompt,
                                       int64_t maxNewTokens,
                                       int32_t stopToken) {
  const Function &eval = prog.function("eval_step");
  const int idsBuf = buffer(BufferRole::Input, "input_ids");
  const int logitsBuf = buffer(BufferRole::Output, "logits");
  if (isSliced(logitsBuf))
    throw Error("sampling reads whole logits; this step's are sliced over "
                "the tensor axis (sample with a one-process step)");
  int32_t *ids = storage.i32(idsBuf);
  const float *logits = storage.f32(logitsBuf);
  std::vector<int32_t> tokens = prompt;
  for (int64_t n = 0; n < maxNewTokens && int64_t(tokens.size()) < T; ++n) {
    // Row 0 holds the sequence; the causal mask makes the padding after it
    // irrelevant to the logits at its last position.
    std::fill(ids, ids + B * T, 0);
    std::copy(tokens.begin(), tokens.end(), ids);
    backend.upload(storage, {idsBuf});
    backend.run(prog, eval, storage, RngContext{seed, 0});
    backend.download(storage, {logitsBuf});
    const float *row = logits + (tokens.size() - 1) * V;
    int32_t next = int32_t(std::max_element(row, row + V) - row);
    tokens.push_back(next);
    if (next == stopToken)
      break;
  }
  return {tokens.begin() + prompt.size(), tokens.end()};
}
