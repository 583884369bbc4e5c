//===- Adapters.cpp - LoRA adapters in PEFT's format ----------------------===//
//
// A step built by -dsc-lora holds the base model's parameters (frozen) and
// the adapters' (trainable), and records its LoRA settings as module
// attributes (dsc.lora_*). This file moves adapters in and out in the files
// PEFT reads and writes: adapter_model.safetensors, whose tensors are named
// "<dsc.lora_file_prefix><parameter>" (the prefix -dsc-lora records, PEFT's),
// beside adapter_config.json; and merges
// them into the base weights for export (PEFT's merge_and_unload).
//
//===----------------------------------------------------------------------===//

#include "dsc/Support/OutputFile.h"
#include "dsc/Runtime/Trainer.h"

#include "FourBitWeights.h"
#include "TrainerDetail.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <sys/stat.h>

using namespace dsc::rt;

namespace {

constexpr const char kAdapterWeights[] = "adapter_model.safetensors";
constexpr const char kAdapterConfig[] = "adapter_config.json";

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The settings -dsc-lora recorded (module attributes dsc.lora_*).
struct LoraSettings {
  int64_t rank = 0;
  double alpha = 0, dropout = 0;
  std::vector<std::string> targetModules;
  std::string targetRegex, bias;
  bool rslora = false, fanInFanOut = false;
  /// What adapter files put before a parameter's name.
  std::string filePrefix;

  double scale() const {
    return alpha / (rslora ? std::sqrt(double(rank)) : double(rank));
  }
};

LoraSettings loraSettings(const Program &prog) {
  auto get = [&](const std::string &key) -> const AttrValue & {
    auto it = prog.meta.find("lora_" + key);
    if (it == prog.meta.end())
      throw Error("compiled step lacks module attribute dsc.lora_" + key +
                  " (was it built by -dsc-lora?)");
    return it->second;
  };
  auto number = [&](const std::string &key) {
    const AttrValue &v = get(key);
    if (const double *d = std::get_if<double>(&v))
      return *d;
    if (const int64_t *i = std::get_if<int64_t>(&v))
      return double(*i);
    throw Error("compiled step: module attribute dsc.lora_" + key +
                " must be a number");
  };
  auto text = [&](const std::string &key) {
    const AttrValue &v = get(key);
    if (const std::string *s = std::get_if<std::string>(&v))
      return *s;
    throw Error("compiled step: module attribute dsc.lora_" + key +
                " must be a string");
  };
  LoraSettings l;
  l.rank = prog.metaInt("lora_rank", std::nullopt, 1);
  l.alpha = number("alpha");
  l.dropout = number("dropout");
  if (prog.meta.count("lora_target_regex"))
    l.targetRegex = text("target_regex");
  else {
    std::string list = text("target_modules");
    for (size_t start = 0; start <= list.size();) {
      size_t comma = std::min(list.find(',', start), list.size());
      l.targetModules.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
  }
  l.bias = text("bias");
  l.rslora = prog.metaInt("lora_rslora", 0, 0) != 0;
  l.fanInFanOut = prog.metaInt("lora_fan_in_fan_out", 0, 0) != 0;
  l.filePrefix = prog.metaString("lora_file_prefix", "");
  if (!(l.alpha > 0) || !std::isfinite(l.alpha))
    throw Error("compiled step: dsc.lora_alpha must be a finite number > 0");
  return l;
}

/// PEFT's adapter_config.json for these settings (LoraConfig's fields;
/// those dsc does not implement hold PEFT's defaults).
std::string adapterConfigJson(const LoraSettings &l, const Program &prog) {
  nlohmann::ordered_json j;
  j["peft_type"] = "LORA";
  auto type = prog.meta.find("model_type");
  const std::string *model =
      type == prog.meta.end() ? nullptr
                              : std::get_if<std::string>(&type->second);
  // dsc trains GPT-2 and LLaMA as causal LMs, BERT as a masked LM (which
  // PEFT has no task type for).
  if (model && *model != "bert")
    j["task_type"] = "CAUSAL_LM";
  else
    j["task_type"] = nullptr;
  j["base_model_name_or_path"] = nullptr;
  j["revision"] = nullptr;
  j["inference_mode"] = true;
  j["r"] = l.rank;
  j["lora_alpha"] = l.alpha;
  j["lora_dropout"] = l.dropout;
  if (!l.targetRegex.empty())
    j["target_modules"] = l.targetRegex;
  else if (l.targetModules.size() == 1 && l.targetModules[0] == "all-linear")
    j["target_modules"] = "all-linear";
  else
    j["target_modules"] = l.targetModules;
  j["bias"] = l.bias;
  j["use_rslora"] = l.rslora;
  j["fan_in_fan_out"] = l.fanInFanOut;
  j["init_lora_weights"] = true;
  j["modules_to_save"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["layers_pattern"] = nullptr;
  j["rank_pattern"] = nlohmann::ordered_json::object();
  j["alpha_pattern"] = nlohmann::ordered_json::object();
  j["use_dora"] = false;
  return j.dump(2) + "\n";
}

/// W += scale * B A, over a weight stored [out, in] (nn.Linear) or, with
/// `fanInFanOut`, [in, out] (GPT-2's Conv1D). A is [r, in], B [out, r].
void mergeInto(Tensor &w, const Tensor &a, const Tensor &b, double scale,
               bool fanInFanOut) {
  const int64_t r = a.shape[0], in = a.shape[1], out = b.shape[0];
  float *W = reinterpret_cast<float *>(w.bytes.data());
  const float *A = reinterpret_cast<const float *>(a.bytes.data());
  const float *B = reinterpret_cast<const float *>(b.bytes.data());
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double delta = 0;
      for (int64_t k = 0; k < r; ++k)
        delta += double(B[o * r + k]) * double(A[k * in + i]);
      float &dst = fanInFanOut ? W[i * out + o] : W[o * in + i];
      dst = float(double(dst) + scale * delta);
    }
}

/// mkdir `dir` unless it is a directory already; "<option>: <why>" on error.
void makeDirectory(const std::string &dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode))
      throw Error(dir + " exists and is not a directory");
    return;
  }
  if (mkdir(dir.c_str(), 0777) != 0)
    throw Error("cannot create directory " + dir + ": " +
                std::strerror(errno));
}

} // namespace

bool dsc::rt::isLoraAdapterName(const std::string &name) {
  return endsWith(name, ".lora_A.weight") || endsWith(name, ".lora_B.weight");
}

bool Trainer::hasAdapter() const { return prog.meta.count("lora_rank") != 0; }

void Trainer::loadAdapter(const std::string &path) {
  if (!hasAdapter())
    throw Error(path + ": the model has no LoRA adapters to load (add a "
                "\"lora\" section to the training config)");
  Safetensors file = Safetensors::read(path);
  if (!file.skipped.empty())
    throw Error(path + ": tensor '" + file.skipped.begin()->first +
                "' has dtype " + file.skipped.begin()->second +
                ", which dsc cannot load (F32, F16, BF16)");
  const std::string prefix = loraSettings(prog).filePrefix;
  std::set<std::string> used;
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role != BufferRole::Param || buf.frozen)
      continue;
    const std::string name = prefix + buf.name;
    auto it = file.tensors.find(name);
    // A trainable bias may be absent: PEFT 0.13's save_pretrained leaves out
    // the biases bias="lora_only" trains; they keep the base file's values.
    if (it == file.tensors.end() && !isLoraAdapterName(buf.name))
      continue;
    if (it == file.tensors.end())
      throw Error(path + ": missing tensor '" + name +
                  "' (an adapter for other target modules or model?)");
    const std::vector<int64_t> &want = wholeShapeOf(int(id));
    if (it->second.shape != want || it->second.dtype != buf.dtype)
      throw Error(path + ": tensor '" + name + "' has shape " +
                  shapeStr(it->second.shape) + ", the model expects " +
                  shapeStr(want) + " (an adapter of another rank r?)");
    storeWhole(it->second.bytes, int(id));
    used.insert(name);
  }
  std::set<std::string> names;
  for (const auto &[name, t] : file.tensors)
    names.insert(name);
  requireUsedByARank(names, used, [&](const std::string &name) {
    return path + ": tensor '" + name + "' is not a trainable parameter of "
           "this model and LoRA configuration";
  });
  requireValidState(path);
  uploadPersistent();
}

void Trainer::saveAdapter(const std::string &dir) const {
  const LoraSettings lora = loraSettings(prog);
  Safetensors file;
  file.metadata["format"] = "pt";
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role == BufferRole::Param && !buf.frozen &&
        (stageWriter() || gatheredOnSave(int(id))))
      file.tensors[lora.filePrefix + buf.name] = wholeTensorOf(int(id));
  }
  gatherStages(file);
  if (comm.rank() == 0) {
    makeDirectory(dir);
    const std::string weights = dir + "/" + kAdapterWeights;
    requireFiniteToSave(file, weights, step);
    file.write(weights);
    writeFileAtomic(dir + "/" + kAdapterConfig,
                    adapterConfigJson(lora, prog));
  }
  comm.barrier();
}

void Trainer::saveMergedWeights(const std::string &path) const {
  const LoraSettings lora = loraSettings(prog);
  Safetensors file;
  file.metadata["format"] = "pt";
  for (size_t id = 0; id < prog.buffers.size(); ++id) {
    const Buffer &buf = prog.buffers[id];
    if (buf.role == BufferRole::Param &&
        (stageWriter() || gatheredOnSave(int(id))))
      file.tensors[buf.name] = wholeTensorOf(int(id)); // every rank: shards
  }
  gatherStages(file);
  if (comm.rank() == 0) {
    std::map<std::string, Tensor> adapters;
    for (auto it = file.tensors.begin(); it != file.tensors.end();)
      if (isLoraAdapterName(it->first)) {
        adapters[it->first] = std::move(it->second);
        it = file.tensors.erase(it);
      } else {
        ++it;
      }
    // Exported in f32: 16-bit frozen weights (mixed precision) widened,
    // 4-bit ones (QLoRA) dequantized, as PEFT's merge_and_unload computes
    // with them.
    for (auto &[name, w] : file.tensors) {
      if (w.dtype == DType::F16 || w.dtype == DType::BF16) {
        w.bytes = detail::bytesAs(w.dtype, w.bytes, DType::F32);
        w.dtype = DType::F32;
        continue;
      }
      const int id = prog.findBuffer(BufferRole::Param, name);
      if (id < 0 || !prog.buffers[size_t(id)].fourBit)
        continue;
      const FourBitStorage &q = *prog.buffers[size_t(id)].fourBit;
      const std::vector<float> values = dequantizeWeight(q, w.bytes.data());
      w.dtype = DType::F32;
      w.shape = q.fileShape();
      w.bytes.assign(reinterpret_cast<const char *>(values.data()),
                     reinterpret_cast<const char *>(values.data() +
                                                    values.size()));
    }
    const std::string suffix = ".weight";
    for (auto &[name, w] : file.tensors) {
      if (!endsWith(name, suffix))
        continue;
      const std::string module = name.substr(0, name.size() - suffix.size());
      auto a = adapters.find(module + ".lora_A.weight");
      auto b = adapters.find(module + ".lora_B.weight");
      if (a == adapters.end() || b == adapters.end())
        continue;
      mergeInto(w, a->second, b->second, lora.scale(), lora.fanInFanOut);
    }
    requireFiniteToSave(file, path, step);
    file.write(path);
  }
  comm.barrier();
}
