//===- Program.cpp - Program, Instr and dtype helpers ---------------------===//

#include "dsc/Runtime/Program.h"

namespace dsc::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
    return 4;
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  }
  throw Error("invalid dtype");
}

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string r = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    r += (i ? "," : "") + std::to_string(shape[i]);
  return r + "]";
}

const char *dtypeName(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

const char *opcodeName(Opcode op) {
  switch (op) {
#define DSC_OPNAME(X)                                                          \
  case Opcode::X:                                                              \
    return #X;
    DSC_OPNAME(Fill)
    DSC_OPNAME(Iota)
    DSC_OPNAME(Embedding)
    DSC_OPNAME(Add)
    DSC_OPNAME(Linear)
    DSC_OPNAME(LayerNorm)
    DSC_OPNAME(InvertibleLayerNorm)
    DSC_OPNAME(Gelu)
    DSC_OPNAME(Dropout)
    DSC_OPNAME(BiasGelu)
    DSC_OPNAME(BiasDropoutAdd)
    DSC_OPNAME(BiasDropoutAddLayerNorm)
    DSC_OPNAME(SplitHeads)
    DSC_OPNAME(MergeHeads)
    DSC_OPNAME(BiasSplitHeads)
    DSC_OPNAME(Concat)
    DSC_OPNAME(Split)
    DSC_OPNAME(BatchMatmul)
    DSC_OPNAME(Softmax)
    DSC_OPNAME(SoftmaxDropout)
    DSC_OPNAME(Attention)
    DSC_OPNAME(CrossEntropy)
    DSC_OPNAME(MlmMask)
    DSC_OPNAME(ReduceTo)
    DSC_OPNAME(EmbeddingGrad)
    DSC_OPNAME(LinearGradInput)
    DSC_OPNAME(LinearGradWeight)
    DSC_OPNAME(LayerNormGrad)
    DSC_OPNAME(LayerNormGradFromOutput)
    DSC_OPNAME(GeluGrad)
    DSC_OPNAME(BiasGeluGrad)
    DSC_OPNAME(DropoutBiasGrad)
    DSC_OPNAME(SoftmaxGrad)
    DSC_OPNAME(SoftmaxDropoutGrad)
    DSC_OPNAME(AttentionGrad)
    DSC_OPNAME(CrossEntropyGrad)
    DSC_OPNAME(Copy)
    DSC_OPNAME(GlobalNorm)
    DSC_OPNAME(ClipCoefficient)
    DSC_OPNAME(RoundToHalf)
    DSC_OPNAME(CheckFinite)
    DSC_OPNAME(LossScale)
    DSC_OPNAME(UnscaleClip)
    DSC_OPNAME(UpdateLossScale)
    DSC_OPNAME(LrSchedule)
    DSC_OPNAME(Adam)
    DSC_OPNAME(Lamb)
    DSC_OPNAME(Sgd)
    DSC_OPNAME(AllReduce)
#undef DSC_OPNAME
  }
  return "<invalid opcode>";
}

namespace {
const AttrValue &lookup(const Instr &in, const std::string &name,
                        const char *want) {
  auto it = in.attrs.find(name);
  if (it == in.attrs.end())
    throw Error(std::string(opcodeName(in.op)) + ": missing " + want +
                " attribute '" + name + "'");
  return it->second;
}

const char *kindName(const AttrValue &v) {
  if (std::holds_alternative<int64_t>(v))
    return "int";
  if (std::holds_alternative<double>(v))
    return "float";
  return "string";
}

[[noreturn]] void wrongType(const Instr &in, const std::string &name,
                            const char *want, const AttrValue &v) {
  throw Error(std::string(opcodeName(in.op)) + ": attribute '" + name +
              "' must be " + want + ", got " + kindName(v));
}
} // namespace

int64_t Instr::getInt(const std::string &name) const {
  const AttrValue &v = lookup(*this, name, "int");
  if (const int64_t *i = std::get_if<int64_t>(&v))
    return *i;
  wrongType(*this, name, "an int", v);
}

double Instr::getFloat(const std::string &name) const {
  const AttrValue &v = lookup(*this, name, "float");
  if (const double *d = std::get_if<double>(&v))
    return *d;
  if (const int64_t *i = std::get_if<int64_t>(&v))
    return double(*i);
  wrongType(*this, name, "a float", v);
}

const std::string &Instr::getString(const std::string &name) const {
  const AttrValue &v = lookup(*this, name, "string");
  if (const std::string *s = std::get_if<std::string>(&v))
    return *s;
  wrongType(*this, name, "a string", v);
}

int64_t Program::metaInt(const std::string &key, std::optional<int64_t> dflt,
                         int64_t min) const {
  auto it = meta.find(key);
  if (it == meta.end()) {
    if (!dflt)
      throw Error("compiled step lacks module attribute dsc." + key);
    return *dflt;
  }
  if (!std::holds_alternative<int64_t>(it->second))
    throw Error("compiled step: module attribute dsc." + key +
                " must be an integer" +
                (min == std::numeric_limits<int64_t>::min()
                     ? ""
                     : " >= " + std::to_string(min)));
  int64_t v = std::get<int64_t>(it->second);
  if (v < min)
    throw Error("compiled step: module attribute dsc." + key + " must be >= " +
                std::to_string(min) + ", got " + std::to_string(v));
  return v;
}

int Program::findBuffer(BufferRole role, const std::string &name) const {
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].role == role && buffers[i].name == name)
      return int(i);
  return -1;
}

std::vector<int> Program::persistentBuffers() const {
  std::vector<int> ids;
  for (size_t id = 0; id < buffers.size(); ++id)
    if (buffers[id].role == BufferRole::Param ||
        buffers[id].role == BufferRole::GradAcc ||
        buffers[id].role == BufferRole::OptState)
      ids.push_back(int(id));
  return ids;
}

const Function &Program::function(const std::string &name) const {
  auto it = functions.find(name);
  if (it == functions.end())
    throw Error("program has no function '" + name + "'");
  return it->second;
}

} // namespace dsc::rt
