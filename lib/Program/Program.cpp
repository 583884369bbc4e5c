//===- Program.cpp - Program, Instr and dtype helpers ---------------------===//

#include "dsc/Program/Program.h"
#include "dsc/Program/KernelOpcodes.h"

#include <cctype>
#include <optional>
#include <set>

namespace dsc::rt {

size_t dtypeSize(DType t) {
  switch (t) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I64:
    return 8;
  case DType::I8:
  case DType::U8:
    return 1;
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
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  case DType::I8:
    return "i8";
  case DType::U8:
    return "u8";
  }
  return "?";
}

namespace {
/// How the CUDA backend runs each OpFamily.
OpRoute opRouteOf(OpFamily family) {
  switch (family) {
  case OpFamily::Linear:
  case OpFamily::BatchMatmul:
    return OpRoute::Gemm;
  case OpFamily::Copy:
    return OpRoute::Copy;
  case OpFamily::Collective:
  case OpFamily::Transfer:
  case OpFamily::Shard:
  case OpFamily::VocabEmbedding:
  case OpFamily::VocabCrossEntropy:
  case OpFamily::ExpertExchange:
    return OpRoute::Collective;
  case OpFamily::Optimizer: // multi-tensor launches
    return OpRoute::Optimizer;
  case OpFamily::Init:
  case OpFamily::Convert:
  case OpFamily::Resize:
  case OpFamily::Embedding:
  case OpFamily::Add:
  case OpFamily::ReduceTo:
  case OpFamily::Norm:
  case OpFamily::NormGrad:
  case OpFamily::NormGradFromOutput:
  case OpFamily::ResidualNorm:
  case OpFamily::Gelu:
  case OpFamily::Dropout:
  case OpFamily::Bias:
  case OpFamily::Heads:
  case OpFamily::ConcatSplit:
  case OpFamily::Softmax:
  case OpFamily::Attention:
  case OpFamily::CrossEntropy:
  case OpFamily::TokenMask:
  case OpFamily::PerTensorOptimizer:
  case OpFamily::Scalar:
  case OpFamily::Compression:
  case OpFamily::CompressedOptimizer:
  case OpFamily::Pointwise:
  case OpFamily::RowGate:
  case OpFamily::Rotary:
  case OpFamily::RepeatKv:
  case OpFamily::FourBitLinear:
  case OpFamily::Moe:
    return OpRoute::Kernel;
  }
  throw Error("invalid op family " + std::to_string(int(family)));
}

std::vector<OpInfo> buildOpTable() {
  std::vector<OpInfo> table;
#define DSC_OP(Name, MlirOp, Family, MinIns, MaxIns, MinOuts, MaxOuts)        \
  table.push_back({Opcode::Name, #Name, MlirOp, OpFamily::Family,              \
                   detail::kKernelsOf[size_t(Opcode::Name)],                   \
                   opRouteOf(OpFamily::Family), MinIns, MaxIns, MinOuts,       \
                   MaxOuts, {}});
#define DSC_ATTR(Name, Attr, Kind)                                             \
  table.back().attrs.push_back({#Attr, AttrKind::Kind});
#include "dsc/Program/Ops.def"
  return table;
}
} // namespace

const std::vector<OpInfo> &allOps() {
  static const std::vector<OpInfo> table = buildOpTable();
  return table;
}

const OpInfo &opInfo(Opcode op) {
  const std::vector<OpInfo> &table = allOps();
  if (size_t(op) >= table.size())
    throw Error("invalid opcode " + std::to_string(int(op)));
  return table[size_t(op)];
}

bool runsBesideCompute(Opcode op) {
  switch (op) {
  case Opcode::AllReduce:
  case Opcode::ReduceScatter:
  case Opcode::AllGather:
  case Opcode::AllToAll:
  case Opcode::Broadcast:
    return true;
  default:
    return false;
  }
}

void detail::notInFamily(Opcode op, KernelFamily family) {
  throw Error(std::string("internal: opcode ") + opcodeName(op) +
              " is not in kernel family " + std::to_string(int(family)));
}

const char *opcodeName(Opcode op) {
  return size_t(op) < allOps().size() ? opInfo(op).name : "<invalid opcode>";
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
  if (std::holds_alternative<BlockLayout>(v))
    return "block layout";
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

const BlockLayout &Instr::getLayout(const std::string &name) const {
  const AttrValue &v = lookup(*this, name, "block layout");
  if (const BlockLayout *l = std::get_if<BlockLayout>(&v))
    return *l;
  wrongType(*this, name, "a block layout", v);
}

BlockLayout BlockLayout::transposed() const {
  BlockLayout t{block, heads, blocks, {}, {}};
  if (empty())
    return t;
  // Count each column's blocks, then place rows in ascending order.
  t.rows.assign(size_t(heads * blocks + 1), 0);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < blocks; ++i)
      for (int32_t k = rows[size_t(h * blocks + i)];
           k < rows[size_t(h * blocks + i + 1)]; ++k)
        ++t.rows[size_t(h * blocks + cols[size_t(k)] + 1)];
  for (size_t r = 1; r < t.rows.size(); ++r)
    t.rows[r] += t.rows[r - 1];
  t.cols.resize(cols.size());
  std::vector<int32_t> next(t.rows.begin(), t.rows.end() - 1);
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < blocks; ++i)
      for (int32_t k = rows[size_t(h * blocks + i)];
           k < rows[size_t(h * blocks + i + 1)]; ++k)
        t.cols[size_t(next[size_t(h * blocks + cols[size_t(k)])]++)] =
            int32_t(i);
  return t;
}

BlockLayout BlockLayout::refined(int64_t factor, bool causal) const {
  if (empty() || factor == 1)
    return *this;
  BlockLayout f{block / factor, heads, blocks * factor, {0}, {}};
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < f.blocks; ++i) {
      const int64_t row = h * blocks + i / factor;
      for (int32_t k = rows[size_t(row)]; k < rows[size_t(row + 1)]; ++k)
        for (int64_t s = 0; s < factor; ++s)
          if (!causal || cols[size_t(k)] * factor + s <= i)
            f.cols.push_back(int32_t(cols[size_t(k)] * factor + s));
      f.rows.push_back(int32_t(f.cols.size()));
    }
  return f;
}

bool BlockLayout::isBlockCausal() const {
  for (int64_t r = 0; r < heads * blocks; ++r)
    if (cols[size_t(rows[size_t(r + 1)] - 1)] > r % blocks)
      return false;
  return true;
}

std::string BlockLayout::invalidReason() const {
  if (empty())
    return rows.empty() && cols.empty() ? "" : "an empty layout has blocks";
  if (block < 1 || heads < 1 || blocks < 1)
    return "block, heads and blocks must be >= 1";
  const int64_t numRows = heads * blocks;
  if (int64_t(rows.size()) != numRows + 1 || rows.front() != 0 ||
      rows.back() != int64_t(cols.size()))
    return "rows must be heads * blocks + 1 offsets from 0 to the number of "
           "cols";
  for (int64_t r = 0; r < numRows; ++r) {
    if (rows[size_t(r + 1)] <= rows[size_t(r)])
      return "query block " + std::to_string(r % blocks) + " of head " +
             std::to_string(r / blocks) + " attends to no key block";
    for (int32_t k = rows[size_t(r)]; k < rows[size_t(r + 1)]; ++k)
      if (cols[size_t(k)] < 0 || cols[size_t(k)] >= blocks ||
          (k > rows[size_t(r)] && cols[size_t(k)] <= cols[size_t(k - 1)]))
        return "the key blocks of each query block must ascend within "
               "[0, blocks)";
  }
  return "";
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

std::string Program::metaString(const std::string &key,
                                std::optional<std::string> dflt) const {
  auto it = meta.find(key);
  if (it == meta.end()) {
    if (!dflt)
      throw Error("compiled step lacks module attribute dsc." + key);
    return *dflt;
  }
  if (!std::holds_alternative<std::string>(it->second))
    throw Error("compiled step: module attribute dsc." + key +
                " must be a string");
  return std::get<std::string>(it->second);
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

MeshAxis meshAxisNamed(const std::string &name) {
  for (MeshAxis axis : kMeshAxes)
    if (name == meshAxisName(axis))
      return axis;
  throw Error("axis must be \"data\", \"tensor\", \"pipeline\", "
              "\"data_inner\" or \"data_outer\", got \"" +
              name + "\"");
}

const char *meshAxisName(MeshAxis axis) {
  switch (axis) {
  case MeshAxis::Data:
    return "data";
  case MeshAxis::Tensor:
    return "tensor";
  case MeshAxis::Pipeline:
    return "pipeline";
  case MeshAxis::DataInner:
    return "data_inner";
  case MeshAxis::DataOuter:
    return "data_outer";
  }
  return "?";
}

int64_t Mesh::groupSize(MeshAxis axis) const {
  switch (axis) {
  case MeshAxis::Data:
    return data;
  case MeshAxis::Tensor:
    return tensor;
  case MeshAxis::Pipeline:
    return pipeline;
  case MeshAxis::DataInner:
    return dataInner;
  case MeshAxis::DataOuter:
    return data / dataInner;
  }
  return 1;
}

/// Ranks count tensor fastest, then data (within a data_inner group first),
/// then pipeline: the stride of an axis is the product of the sizes of the
/// faster ones.
static int64_t strideOf(const Mesh &m, MeshAxis axis) {
  switch (axis) {
  case MeshAxis::Tensor:
    return 1;
  case MeshAxis::Data:
  case MeshAxis::DataInner:
    return m.tensor;
  case MeshAxis::DataOuter:
    return m.tensor * m.dataInner;
  case MeshAxis::Pipeline:
    return m.tensor * m.data;
  }
  return 1;
}

int64_t Mesh::coordinate(int64_t rank, MeshAxis axis) const {
  return rank / strideOf(*this, axis) % groupSize(axis);
}

int64_t Mesh::rankAlong(int64_t rank, MeshAxis axis, int64_t c) const {
  const int64_t g = groupSize(axis);
  const int64_t wrapped = ((c % g) + g) % g;
  return rank + (wrapped - coordinate(rank, axis)) * strideOf(*this, axis);
}

Mesh Program::mesh() const {
  const int64_t world = metaInt("world_size", 1, 1);
  if (!meta.count("mesh_data") && !meta.count("mesh_tensor") &&
      !meta.count("mesh_pipeline"))
    return Mesh{world, 1, 1};
  Mesh m{metaInt("mesh_data", 1, 1), metaInt("mesh_tensor", 1, 1),
         metaInt("mesh_pipeline", 1, 1), metaInt("mesh_data_inner", 1, 1)};
  if (m.size() != world)
    throw Error("compiled step: its mesh (data " + std::to_string(m.data) +
                " x tensor " + std::to_string(m.tensor) + " x pipeline " +
                std::to_string(m.pipeline) + ") does not have world_size " +
                std::to_string(world) + " ranks");
  if (m.data % m.dataInner != 0)
    throw Error("compiled step: dsc.mesh_data_inner (" +
                std::to_string(m.dataInner) +
                ") does not divide the mesh's data axis (" +
                std::to_string(m.data) + " ranks)");
  return m;
}

MeshAxis Program::zeroAxis() const {
  return meshAxisNamed(metaString("zero_axis", "data"));
}

namespace {

/// The position and length of the index in `name`'s last `experts.<i>.`.
std::optional<std::pair<size_t, size_t>> expertIndexSpan(
    const std::string &name) {
  const std::string key = "experts.";
  for (size_t at = name.rfind(key); at != std::string::npos;
       at = at == 0 ? std::string::npos : name.rfind(key, at - 1)) {
    const size_t first = at + key.size();
    size_t end = first;
    while (end < name.size() && std::isdigit((unsigned char)name[end]))
      ++end;
    if (end > first && end < name.size() && name[end] == '.' &&
        (at == 0 || name[at - 1] == '.' || name[at - 1] == '/'))
      return std::make_pair(first, end - first);
  }
  return std::nullopt;
}

} // namespace

int64_t expertIndexOf(const std::string &name) {
  auto span = expertIndexSpan(name);
  return span ? std::stoll(name.substr(span->first, span->second)) : -1;
}

std::string withExpertIndex(const std::string &name, int64_t expert) {
  auto span = expertIndexSpan(name);
  if (!span)
    throw Error("'" + name + "' names no expert (experts.<i>.)");
  return name.substr(0, span->first) + std::to_string(expert) +
         name.substr(span->first + span->second);
}

void placeExpertShards(Program &program, int64_t expertRank) {
  const std::string joined = program.metaString("expert_params", "");
  if (joined.empty())
    return;
  const int64_t perRank = program.metaInt("experts_per_rank", std::nullopt, 1);
  std::set<std::string> params;
  for (size_t at = 0; at <= joined.size();) {
    const size_t comma = std::min(joined.find(',', at), joined.size());
    params.insert(joined.substr(at, comma - at));
    at = comma + 1;
  }
  for (Buffer &b : program.buffers) {
    // A parameter, or a state or accumulator named "<kind>/<parameter>".
    const size_t slash = b.name.rfind('/');
    const std::string param =
        slash == std::string::npos ? b.name : b.name.substr(slash + 1);
    if (!params.count(param))
      continue;
    const int64_t local = expertIndexOf(param);
    if (local < 0 || local >= perRank)
      throw Error("expert parameter '" + param + "' is not one of the " +
                  std::to_string(perRank) + " local experts");
    b.name = b.name.substr(0, slash == std::string::npos ? 0 : slash + 1) +
             withExpertIndex(param, expertRank * perRank + local);
    b.expertShard = true;
  }
}

void drawTensorParallelStreamsPerRank(Program &program, int64_t tensorRank) {
  if (tensorRank == 0 || program.tensorParallelStreams.empty())
    return;
  const std::set<int64_t> sliced(program.tensorParallelStreams.begin(),
                                 program.tensorParallelStreams.end());
  for (auto &[name, fn] : program.functions)
    for (Instr &instr : fn.body) {
      auto it = instr.attrs.find("stream");
      if (it != instr.attrs.end() && sliced.count(instr.getInt("stream")))
        it->second = instr.getInt("stream") +
                     tensorRank * kTensorRankStreamStride;
    }
}

} // namespace dsc::rt
