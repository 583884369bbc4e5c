//===- FourBitWeights.cpp - 4-bit parameters to and from f32 --------------===//

#include "FourBitWeights.h"

#include "Quantized/FourBit.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>

namespace dsc::rt {

namespace {

/// [r, c] row-major -> [c, r].
std::vector<float> transposed(const float *w, int64_t r, int64_t c) {
  std::vector<float> t(size_t(r * c));
  for (int64_t i = 0; i < r; ++i)
    for (int64_t j = 0; j < c; ++j)
      t[size_t(j * r + i)] = w[i * c + j];
  return t;
}

} // namespace

std::vector<char> quantizeWeight(const FourBitStorage &q, const float *w) {
  const quant::FourBitLayout l = q.layout();
  std::vector<char> blob(size_t(l.bytes));
  // Quantized as [out, in]: a Conv1D weight [in, out] is transposed first.
  std::vector<float> outIn;
  if (q.transposed)
    outIn = transposed(w, q.cols, q.rows);
  quant::quantizeFourBit(q.format, l, q.transposed ? outIn.data() : w,
                         reinterpret_cast<uint8_t *>(blob.data()));
  return blob;
}

std::vector<float> dequantizeWeight(const FourBitStorage &q,
                                    const char *blob) {
  const quant::FourBitLayout l = q.layout();
  const auto *bytes = reinterpret_cast<const uint8_t *>(blob);
  std::vector<float> absmax(size_t(l.blocks));
  quant::blockAbsmax(l, bytes, absmax.data());
  const std::array<float, 16> code = quant::codebook(q.format);
  std::vector<float> w(size_t(l.n));
  for (int64_t i = 0; i < l.n; ++i)
    w[size_t(i)] =
        quant::dequantizedAt(code, bytes + l.codesAt, absmax.data(), l.block, i);
  return q.transposed ? transposed(w.data(), q.rows, q.cols) : w;
}


namespace {

const char *formatName(quant::FourBitFormat f) {
  return f == quant::FourBitFormat::NF4 ? "nf4" : "fp4";
}

std::string stateName(const std::string &name, quant::FourBitFormat f) {
  return name + ".quant_state.bitsandbytes__" + formatName(f);
}

} // namespace

bool isBitsandbytesWeight(const Safetensors &file, const std::string &name) {
  for (quant::FourBitFormat f :
       {quant::FourBitFormat::NF4, quant::FourBitFormat::FP4})
    if (file.tensors.count(stateName(name, f)))
      return true;
  return false;
}

std::vector<char> fromBitsandbytes(const FourBitStorage &q,
                                   const Safetensors &file,
                                   const std::string &name,
                                   const std::string &path,
                                   std::set<std::string> &used) {
  const quant::FourBitLayout l = q.layout();
  const std::string where = path + ": bitsandbytes weight '" + name + "'";
  auto tensor = [&](const std::string &suffix, DType dtype,
                    int64_t elements) -> const Tensor & {
    auto it = file.tensors.find(name + suffix);
    if (it == file.tensors.end())
      throw Error(where + ": missing tensor '" + name + suffix + "'");
    const Tensor &t = it->second;
    if (t.dtype != dtype || elementCount(t.shape) != elements)
      throw Error(where + ": tensor '" + name + suffix + "' is " +
                  shapeStr(t.shape) + " " + dtypeName(t.dtype) + ", expected " +
                  std::to_string(elements) + " " + dtypeName(dtype) +
                  " elements");
    used.insert(name + suffix);
    return t;
  };
  // The quant state's JSON names the format, block size, shape and the
  // nested quantization's offset.
  quant::FourBitFormat saved = quant::FourBitFormat::NF4;
  if (!file.tensors.count(stateName(name, saved)))
    saved = quant::FourBitFormat::FP4;
  const std::string stateSuffix =
      stateName(name, saved).substr(name.size());
  const Tensor &stateBytes = file.tensors.at(name + stateSuffix);
  used.insert(name + stateSuffix);
  nlohmann::json state = nlohmann::json::parse(
      stateBytes.bytes.begin(), stateBytes.bytes.end(), nullptr,
      /*allow_exceptions=*/false);
  if (!state.is_object())
    throw Error(where + ": '" + name + stateSuffix +
                "' is not a JSON object");
  auto field = [&](const char *key) -> const nlohmann::json & {
    auto it = state.find(key);
    if (it == state.end())
      throw Error(where + ": its quant state has no '" + key + "'");
    return *it;
  };
  if (saved != q.format)
    throw Error(where + " is " + formatName(saved) +
                " but the model config's bnb_4bit_quant_type is " +
                formatName(q.format));
  if (field("quant_type") != formatName(saved) ||
      field("blocksize") != q.block)
    throw Error(where + " has quant_type " + field("quant_type").dump() +
                " and blocksize " + field("blocksize").dump() +
                "; dsc stores " + formatName(q.format) + " in blocks of " +
                std::to_string(q.block));
  if (field("shape") != nlohmann::json::array({q.rows, q.cols}))
    throw Error(where + " has shape " + field("shape").dump() +
                ", the model expects [" + std::to_string(q.rows) + ", " +
                std::to_string(q.cols) + "]");
  const bool nested = state.contains("nested_offset");
  if (nested != q.doubleQuant)
    throw Error(where + " was saved " +
                (nested ? "with" : "without") +
                " double quantization; set the model config's "
                "bnb_4bit_use_double_quant to " +
                (nested ? "true" : "false"));
  // The code books must be the ones dsc decodes with (bitsandbytes' own
  // dynamic map may differ in the last bit of a few entries: linspace).
  auto sameTable = [&](const std::string &suffix, const float *want,
                       int64_t count) {
    const Tensor &t = tensor(suffix, DType::F32, count);
    const float *got = reinterpret_cast<const float *>(t.bytes.data());
    for (int64_t i = 0; i < count; ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-6f * std::fabs(want[i]) + 1e-12f))
        throw Error(where + ": '" + name + suffix + "' entry " +
                    std::to_string(i) + " is " + std::to_string(got[i]) +
                    ", not bitsandbytes' " + std::to_string(want[i]));
  };
  const std::array<float, 16> code = quant::codebook(q.format);
  sameTable(".quant_map", code.data(), 16);
  const Tensor &codes = tensor("", DType::U8, (l.n + 1) / 2);
  std::vector<char> blob(size_t(l.bytes));
  std::memcpy(blob.data() + l.codesAt, codes.bytes.data(),
              size_t((l.n + 1) / 2));
  if (!nested) {
    const Tensor &absmax = tensor(".absmax", DType::F32, l.blocks);
    std::memcpy(blob.data() + l.absmaxAt, absmax.bytes.data(),
                size_t(l.blocks) * 4);
    return blob;
  }
  if (field("nested_blocksize") != quant::kNestedBlock)
    throw Error(where + " has nested_blocksize " +
                field("nested_blocksize").dump() + "; dsc uses " +
                std::to_string(quant::kNestedBlock));
  sameTable(".nested_quant_map", optim::signedMap().data(), 256);
  const nlohmann::json &offsetField = field("nested_offset");
  if (!offsetField.is_number())
    throw Error(where + ": its nested_offset is not a number");
  const float offset = offsetField.get<float>();
  const Tensor &qabsmax = tensor(".absmax", DType::U8, l.blocks);
  const Tensor &scales = tensor(".nested_absmax", DType::F32, l.scales2);
  std::memcpy(blob.data(), &offset, 4);
  std::memcpy(blob.data() + 4, scales.bytes.data(), size_t(l.scales2) * 4);
  std::memcpy(blob.data() + l.absmaxAt, qabsmax.bytes.data(),
              size_t(l.blocks));
  return blob;
}

} // namespace dsc::rt
