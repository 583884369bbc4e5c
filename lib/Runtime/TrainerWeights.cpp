//===- TrainerWeights.cpp - Trainer: parameters in and out of weight files ===//
//
// The parameter store's side of the Trainer: Hugging Face initialisation,
// whole tensors in and out of this rank's shards and slices, and weight
// files (named as lib/Runtime/WeightFileNames.h says).
//
//===----------------------------------------------------------------------===//

#include "dsc/Runtime/Trainer.h"

#include "TrainerDetail.h"
#include "FourBitWeights.h"
#include "WeightFileNames.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

using namespace dsc::rt;
using namespace dsc::rt::detail;

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
  const size_t first = bytes * size_t(shardGroup().rank());
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

namespace {

/// A 4-bit parameter's bytes from a file's tensor: its full-precision
/// weight quantized (QLoRA loads a Hugging Face checkpoint so), or the bytes
/// themselves (a dsc checkpoint of the same storage).
std::vector<char> fourBitBytes(const Buffer &buf, const std::string &name,
                               const Tensor &t, const std::string &path) {
  const FourBitStorage &q = *buf.fourBit;
  const int64_t bytes = q.layout().bytes;
  if (t.dtype == DType::U8 && t.shape == std::vector<int64_t>{bytes})
    return t.bytes;
  if (t.dtype == DType::F32 && t.shape == q.fileShape()) {
    if (!allFinite(t.dtype, t.bytes.data(), t.bytes.size()))
      throw Error(path + ": tensor '" + name +
                  "' holds NaN or infinite values");
    return quantizeWeight(q, reinterpret_cast<const float *>(t.bytes.data()));
  }
  throw Error(path + ": tensor '" + name + "' has shape " +
              spacedShape(t.shape) + " " + dtypeName(t.dtype) +
              ", the model expects " + spacedShape(q.fileShape()) +
              " (f32, f16 or bf16, quantized to 4 bits as it loads) or its " +
              std::to_string(bytes) + " bytes in 4 bits (u8 [" +
              std::to_string(bytes) + "])");
}

} // namespace

void Trainer::loadWeights(const std::string &path) {
  const bool fourBit =
      std::any_of(prog.buffers.begin(), prog.buffers.end(),
                  [](const Buffer &b) { return b.fourBit.has_value(); });
  Safetensors file = Safetensors::read(path, /*withU8=*/fourBit);
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
    if (buf.fourBit) {
      storeWhole(isBitsandbytesWeight(file, name)
                     ? fromBitsandbytes(*buf.fourBit, file, name, path, used)
                     : fourBitBytes(buf, name, *found, path),
                 int(id));
      continue;
    }
    const std::vector<int64_t> &want = wholeShapeOf(int(id));
    if (found->shape != want || !storableAs(found->dtype, buf.dtype))
      throw Error(path + ": tensor '" + buf.name + "' has shape " +
                  spacedShape(found->shape) + " " + dtypeName(found->dtype) +
                  ", the model expects " + spacedShape(want) + " " +
                  dtypeName(buf.dtype));
    // ZeRO-3: this rank's part.
    storeWhole(bytesAs(found->dtype, found->bytes, buf.dtype), int(id));
  }
  initializeParameters(prog, storage, seed, comm.rank(), &uninitialized);
  requireValidState(path);

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
  requireUsedByARank(names, used, [&](const std::string &name) {
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
  // writer needs (rank 0 without a pipeline). Each expert-parallel rank
  // holds its own experts: the writer takes its group's.
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (std::find(roles.begin(), roles.end(), buf.role) == roles.end() ||
        isMasterWeights(buf)) // the parameter's copy
      continue;
    if (buf.expertShard) {
      for (auto &[name, tensor] : expertTensorsOf(int(id)))
        if (stageWriter())
          file.tensors[name] = std::move(tensor);
      continue;
    }
    if (stageWriter() || gatheredOnSave(int(id)))
      file.tensors[buf.name] = wholeTensorOf(int(id));
  }
  gatherStages(file);
  if (comm.rank() == 0) {
    requireFiniteToSave(file, path, step);
    file.write(path);
  }
  comm.barrier(); // the ranks go on together once the file is written
}

std::vector<std::pair<std::string, Tensor>>
Trainer::expertTensorsOf(int id) const {
  // Every rank of the group holds the same buffer for its own expert.
  Tensor mine = wholeTensorOf(id);
  Communicator &group = groups->group(MeshAxis::DataInner);
  const size_t bytes = mine.bytes.size();
  std::vector<char> all(bytes * size_t(group.size()));
  group.allGather(mine.bytes.data(), all.data(), int64_t(bytes));
  const std::string &name = prog.buffers[size_t(id)].name;
  const int64_t perRank = prog.metaInt("experts_per_rank", std::nullopt, 1);
  const int64_t local = expertIndexOf(name) - group.rank() * perRank;
  std::vector<std::pair<std::string, Tensor>> out;
  for (int64_t g = 0; g < group.size(); ++g) {
    Tensor t = mine;
    t.bytes.assign(all.begin() + std::ptrdiff_t(bytes * size_t(g)),
                   all.begin() + std::ptrdiff_t(bytes * size_t(g + 1)));
    out.emplace_back(withExpertIndex(name, g * perRank + local), std::move(t));
  }
  return out;
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
    // ZeRO: shard rank i holds elements [i*s, (i+1)*s) of the flattened,
    // padded tensor; the padding is cut off.
    Communicator &shards = shardGroup();
    std::vector<char> all(t.bytes.size() * size_t(shards.size()));
    shards.allGather(t.bytes.data(), all.data(), int64_t(t.bytes.size()));
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
