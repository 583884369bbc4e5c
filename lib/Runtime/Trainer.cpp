//===- Trainer.cpp - The driver loop around a compiled step --------------===//

#include "dsc/Runtime/Trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

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

/// Hugging Face checkpoints name encoder weights with or without the base
/// model prefix; dsc's names always carry it (cls.* belongs to the head).
std::vector<std::string> candidateNames(const std::string &name) {
  std::vector<std::string> names = {name};
  for (const char *prefix : {"transformer.", "bert."})
    if (name.rfind(prefix, 0) == 0)
      names.push_back(name.substr(std::strlen(prefix)));
  return names;
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

/// Refuses to write a weights or checkpoint file holding a NaN or an
/// infinity: the user's previous file is worth more than a poisoned one.
void requireFiniteToSave(const Safetensors &file, const std::string &path,
                         int64_t step) {
  for (const auto &[name, t] : file.tensors)
    if (!allFinite(t.dtype, t.bytes.data(), t.bytes.size()))
      throw Error("not writing " + path + ": '" + name +
                  "' holds NaN or infinite values after step " +
                  std::to_string(step) + "; the file is left as it was");
}

} // namespace

Trainer::Trainer(Program program, Backend &backend, Communicator &comm,
                 uint64_t seed)
    : prog(std::move(program)), backend(backend), comm(comm), storage(prog),
      seed(seed) {
  B = prog.metaInt("micro_batch", std::nullopt, 1);
  T = prog.metaInt("seq_len", std::nullopt, 1);
  A = prog.metaInt("grad_accum", std::nullopt, 1);
  V = prog.metaInt("vocab_size", std::nullopt, 1);
  prog.function("micro_step");
  prog.function("apply_step");
  // The driver writes and reads these buffers directly: their types must be
  // what the module attributes promise, or a hand-edited step would make it
  // write out of bounds.
  expectBuffer(BufferRole::Input, "input_ids", DType::I32, B * T);
  expectBuffer(BufferRole::Input, "targets", DType::I32, B * T);
  expectBuffer(BufferRole::Input, "step", DType::I64, 1);
  expectBuffer(BufferRole::Output, "loss", DType::F32, 1);
  expectBuffer(BufferRole::Output, "lr", DType::F32, 1);
  expectBuffer(BufferRole::Output, "grad_norm", DType::F32, 1);
  expectBuffer(BufferRole::Output, "logits", DType::F32, B * T * V);
}

void Trainer::expectBuffer(BufferRole role, const std::string &name,
                           DType dtype, int64_t elements) const {
  const Buffer &buf = prog.buffers[buffer(role, name)];
  if (buf.dtype != dtype || buf.numElements() != elements)
    throw Error("compiled step: buffer '" + name + "' is " +
                spacedShape(buf.shape) + " " + dtypeName(buf.dtype) +
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

void Trainer::initializeWeights() {
  initializeParameters(prog, storage, seed);
  uploadPersistent();
  step = 0;
  skipped = 0;
}

void Trainer::loadWeights(const std::string &path) {
  Safetensors file = Safetensors::read(path);
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role != BufferRole::Param)
      continue;
    const Tensor *found = nullptr;
    for (const std::string &name : candidateNames(buf.name))
      if (auto it = file.tensors.find(name); it != file.tensors.end()) {
        found = &it->second;
        break;
      }
    if (!found) {
      for (const std::string &name : candidateNames(buf.name))
        if (auto it = file.skipped.find(name); it != file.skipped.end())
          throw Error(path + ": tensor '" + name + "' has dtype " +
                      it->second + ", which dsc cannot load (F32, F16, BF16)");
      throw Error(path + ": missing tensor '" + buf.name + "'");
    }
    if (found->shape != buf.shape || found->dtype != buf.dtype)
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(found->shape) + " " + dtypeName(found->dtype) +
                  ", the model expects " + spacedShape(buf.shape) + " " +
                  dtypeName(buf.dtype));
    std::memcpy(storage.data(int(id)), found->bytes.data(), buf.bytes());
  }
  requireFiniteState(path);
  uploadPersistent();
}

void Trainer::saveWeights(const std::string &path) const {
  Safetensors file;
  file.metadata["format"] = "pt";
  for (size_t id = 0; id < prog.buffers.size(); ++id)
    if (prog.buffers[id].role == BufferRole::Param)
      file.tensors[prog.buffers[id].name] = tensorOf(int(id));
  requireFiniteToSave(file, path, step);
  file.write(path);
}

void Trainer::saveCheckpoint(const std::string &path) const {
  Safetensors file;
  file.metadata["format"] = "dsc-checkpoint";
  file.metadata["step"] = std::to_string(step);
  file.metadata["seed"] = std::to_string(seed);
  file.metadata["skipped_steps"] = std::to_string(skipped);
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    BufferRole role = prog.buffers[id].role;
    // Accumulators are zero between steps, so they are not stored.
    if (role == BufferRole::Param || role == BufferRole::OptState)
      file.tensors[prog.buffers[id].name] = tensorOf(int(id));
  }
  requireFiniteToSave(file, path, step);
  file.write(path);
}

void Trainer::loadCheckpoint(const std::string &path) {
  Safetensors file = Safetensors::read(path);
  auto meta = [&](const std::string &key) -> const std::string & {
    auto it = file.metadata.find(key);
    if (it == file.metadata.end())
      throw Error(path + ": not a dsc checkpoint (no '" + key +
                  "' in its metadata)");
    return it->second;
  };
  if (meta("format") != "dsc-checkpoint")
    throw Error(path + ": not a dsc checkpoint");
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role != BufferRole::Param && buf.role != BufferRole::OptState)
      continue;
    auto it = file.tensors.find(buf.name);
    if (it == file.tensors.end())
      throw Error(path + ": missing tensor '" + buf.name +
                  "' (checkpoint of a different model or optimizer?)");
    if (it->second.shape != buf.shape || it->second.dtype != buf.dtype)
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(it->second.shape) + ", expected " +
                  spacedShape(buf.shape));
    std::memcpy(storage.data(int(id)), it->second.bytes.data(), buf.bytes());
  }
  try {
    step = std::stoll(meta("step"));
    seed = std::stoull(meta("seed"));
    // Absent in checkpoints written before fp16 support: nothing skipped.
    auto it = file.metadata.find("skipped_steps");
    skipped = it == file.metadata.end() ? 0 : std::stoll(it->second);
  } catch (const std::logic_error &) {
    throw Error(path + ": malformed step or seed in checkpoint metadata");
  }
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
}

void Trainer::runMicroStep(const TokenFile &data, int64_t micro) {
  const int ids = buffer(BufferRole::Input, "input_ids");
  const int targets = buffer(BufferRole::Input, "targets");
  data.batch(step, micro, A, B, T, storage.i32(ids), storage.i32(targets));
  backend.upload(storage, {ids, targets});
  RngContext rng{seed, uint64_t(step * A + micro)};
  backend.run(prog, prog.function("micro_step"), storage, rng);
}

StepStats Trainer::trainStep(const TokenFile &data) {
  auto start = std::chrono::steady_clock::now();
  StepStats stats;
  stats.step = step;
  int lossBuf = buffer(BufferRole::Output, "loss");
  for (int64_t m = 0; m < A; ++m) {
    runMicroStep(data, m);
    backend.download(storage, {lossBuf});
    stats.loss += storage.f32(lossBuf)[0] / double(A);
  }
  // DeepSpeed advances neither the optimizer's step nor the LR scheduler on
  // a skipped (overflowed) step: the counter is the applied updates + 1.
  const int stepBuf = buffer(BufferRole::Input, "step");
  *storage.i64(stepBuf) = step - skipped + 1;
  backend.upload(storage, {stepBuf});
  backend.run(prog, prog.function("apply_step"), storage,
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
  stats.tokensPerSecond = double(A * B * T * comm.size()) / seconds;
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
