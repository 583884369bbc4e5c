//===- TrainerCheckpoint.cpp - Trainer: checkpoints -----------------------===//
//
// Checkpoints: weights, optimizer state, step and seed in one safetensors
// file of whole tensors, which resumes on any number of ranks.
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Trainer.h"

#include "TrainerDetail.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::detail;

namespace {

/// The optimizers `prog` updates with, by their dsc op ("adam", "lamb",
/// "sgd"; sorted, comma-joined). Checkpoints record it: AdamW's and LAMB's
/// states have the same tensor names, so only this tells them apart.
std::string optimizerSignature(const Program &prog) {
  std::set<std::string> names;
  for (const auto &[name, fn] : prog.functions)
    for (const Instr &I : fn.body)
      if (opInfo(I.op).family == OpFamily::Optimizer ||
          opInfo(I.op).family == OpFamily::PerTensorOptimizer)
        names.insert(opInfo(I.op).mlirOp);
  std::string joined;
  for (const std::string &n : names)
    joined += (joined.empty() ? "" : ",") + n;
  return joined;
}

} // namespace

void Trainer::saveCheckpoint(const std::string &path) const {
  Safetensors file;
  file.metadata["format"] = "dsc-checkpoint";
  file.metadata["step"] = std::to_string(step);
  file.metadata["seed"] = std::to_string(seed);
  file.metadata["skipped_steps"] = std::to_string(skipped);
  file.metadata["optimizer"] = optimizerSignature(prog);
  // The ranks whose own state (1-bit compression errors, 0/1 Adam's rank
  // copies) the file holds: a resume elsewhere is told so by name.
  for (const Buffer &buf : prog.buffers)
    if (buf.perRank) {
      file.metadata["per_rank_state_ranks"] =
          std::to_string(stageRanks().size());
      break;
    }
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
  // 8-bit Adam keeps its moments as U8 codes.
  Safetensors file = Safetensors::read(path, /*withU8=*/true);
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
    if (isMasterWeights(buf)) // derived from the parameter (uploadPersistent)
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
    if (it->second.shape != want ||
        !storableAs(it->second.dtype, buf.dtype))
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(it->second.shape) + ", expected " +
                  spacedShape(want));
    storeWhole(bytesAs(it->second.dtype, it->second.bytes, buf.dtype),
               int(id));
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
  auto perRank = file.metadata.find("per_rank_state_ranks");
  const std::string perRankRanks =
      perRank == file.metadata.end() ? "" : perRank->second;
  requireUsedByARank(names, stored, [&](const std::string &name) {
    // This world size's step has no per-rank state (one rank compresses
    // nothing), or other ranks' than the file's.
    if (!perRankRanks.empty() &&
        perRankRanks != std::to_string(stageRanks().size()))
      return path + ": tensor '" + name + "' belongs to the per-rank state "
             "of the " + perRankRanks + " ranks" +
             (pipelined() ? " per pipeline stage" : "") +
             " that wrote the checkpoint; resume it with " + perRankRanks +
             " ranks";
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
  requireValidState(path);
  uploadPersistent();
}
