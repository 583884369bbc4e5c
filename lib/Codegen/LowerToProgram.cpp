//===- LowerToProgram.cpp - dsc module -> runtime Program ----------------===//
//
// Every SSA value becomes a buffer; every #dsc.state names a persistent
// buffer shared by all entry functions (a parameter read by @micro_step is
// the one @apply_step updates). A returned value whose state matches an
// argument is computed straight into that argument's buffer when the argument
// is dead afterwards, so optimizer updates and gradient accumulation run in
// place; otherwise a Copy is appended. A result an op may write over an
// operand (InPlaceOpInterface: the fused cross-entropy's dlogits over the
// logits) shares that operand's buffer when nothing else reads it.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/LowerToProgram.h"

#include "dsc/Dialect/DscOps.h"
#include "dsc/Program/InstrCheck.h"
#include "dsc/Program/TensorSlice.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::dsc;
namespace rt = ::dsc::rt;
using rt::AttrValue;
using rt::BufferRole;
using rt::Opcode;

namespace {

class Lowering {
public:
  explicit Lowering(ModuleOp module) : module(module) {}
  /// Lowers `required` (each must exist) and those of `optional` that
  /// exist.
  FailureOr<rt::Program> run(ArrayRef<StringRef> required,
                             ArrayRef<StringRef> optional);
  /// Whether the module must be a training step (its error messages say so).
  bool trainingStep = true;

private:
  LogicalResult lowerFunction(func::FuncOp fn);
  FailureOr<rt::Instr> lowerOp(Operation *op);
  int newBuffer(Value v, BufferRole role, std::string name);
  FailureOr<int> stateBuffer(StateAttr state, Type type, ParamAttr param,
                             DenseI64ArrayAttr shardOf,
                             Location loc);

  ModuleOp module;
  rt::Program program;
  std::map<std::pair<StateKind, std::string>, int> states;
  DenseMap<Value, int> buffers;
};

FailureOr<rt::DType> dtypeOf(Type type, Location loc) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return emitError(loc, "the runtime needs statically shaped tensors, got ")
           << type;
  Type elem = tensor.getElementType();
  if (elem.isF32())
    return rt::DType::F32;
  if (elem.isF16())
    return rt::DType::F16;
  if (elem.isBF16())
    return rt::DType::BF16;
  if (elem.isInteger(32))
    return rt::DType::I32;
  if (elem.isInteger(64))
    return rt::DType::I64;
  if (elem.isSignlessInteger(8))
    return rt::DType::I8;
  if (elem.isUnsignedInteger(8))
    return rt::DType::U8;
  return emitError(loc, "the runtime has no buffers of element type ") << elem;
}

int Lowering::newBuffer(Value v, BufferRole role, std::string name) {
  auto type = cast<RankedTensorType>(v.getType());
  rt::Buffer buf;
  buf.name = std::move(name);
  buf.role = role;
  buf.dtype = *dtypeOf(type, v.getLoc());
  buf.shape.assign(type.getShape().begin(), type.getShape().end());
  program.buffers.push_back(std::move(buf));
  return int(program.buffers.size()) - 1;
}

FailureOr<int> Lowering::stateBuffer(StateAttr state, Type type,
                                     ParamAttr param,
                                     DenseI64ArrayAttr shardOf, Location loc) {
  FailureOr<rt::DType> dtype = dtypeOf(type, loc);
  if (failed(dtype))
    return failure();
  auto tensor = cast<RankedTensorType>(type);
  auto key = std::make_pair(state.getKind(), state.getName().str());
  if (auto it = states.find(key); it != states.end()) {
    // Every function sees a state through the same buffer.
    const rt::Buffer &buf = program.buffers[it->second];
    if (buf.dtype != *dtype ||
        !llvm::equal(buf.shape, tensor.getShape()))
      return emitError(loc, "state ")
             << state << " is " << type
             << " here but has another type elsewhere in the module";
    return it->second;
  }
  BufferRole role = BufferRole::OptState;
  std::string name = state.getName().str();
  std::optional<rt::FourBitStorage> fourBit;
  switch (state.getKind()) {
  case StateKind::param:
    role = BufferRole::Param;
    if (FourBitAttr q = fourBitOf(module, state.getName())) {
      rt::FourBitStorage s;
      if (!::dsc::quant::parseFourBitFormat(q.getFormat().str(), s.format))
        return emitError(loc, "parameter '")
               << state.getName() << "' has 4-bit format '" << q.getFormat()
               << "'; dsc knows nf4 and fp4";
      s.rows = q.getRows();
      s.cols = q.getCols();
      s.block = q.getBlock();
      s.doubleQuant = q.getDoubleQuant();
      s.transposed = q.getTransposed();
      // Under ZeRO-3 the argument is a shard of the bytes.
      ArrayRef<int64_t> whole =
          shardOf ? shardOf.asArrayRef() : tensor.getShape();
      if (s.rows <= 0 || s.cols <= 0 || s.block <= 0 || s.block % 2 ||
          *dtype != rt::DType::U8 || whole.size() != 1 ||
          whole[0] != s.layout().bytes)
        return emitError(loc, "parameter '")
               << state.getName() << "' of type " << type
               << " does not hold its " << q;
      fourBit = s;
    }
    break;
  case StateKind::grad:
    role = BufferRole::GradAcc;
    name = "grad/" + name;
    break;
  case StateKind::input_ids:
  case StateKind::targets:
  case StateKind::step:
  case StateKind::activation: // a pipeline stage's received and saved tensors
    role = BufferRole::Input;
    break;
  case StateKind::output:
    role = BufferRole::Output;
    break;
  default:
    name = stringifyStateKind(state.getKind()).str() + "/" + name;
    break;
  }
  rt::Buffer buf;
  buf.name = name;
  buf.role = role;
  buf.fourBit = fourBit;
  buf.dtype = *dtype;
  buf.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  if (param) {
    switch (param.getInit()) {
    case InitKind::normal:
      buf.init = rt::InitKind::Normal;
      break;
    case InitKind::uniform:
      buf.init = rt::InitKind::Uniform;
      break;
    case InitKind::zeros:
      buf.init = rt::InitKind::Zeros;
      break;
    case InitKind::ones:
      buf.init = rt::InitKind::Ones;
      break;
    }
    buf.initStd = param.getStd().getValueAsDouble();
  }
  if (shardOf)
    buf.wholeShape.assign(shardOf.asArrayRef().begin(),
                          shardOf.asArrayRef().end());
  // A sliced parameter's gradient and optimizer state are sliced with it;
  // not its compression errors (each rank's own, flattened and padded)
  // nor its scalar states (1-bit LAMB's coefficients).
  const bool elementwise = state.getKind() != StateKind::worker_error &&
                           state.getKind() != StateKind::server_error &&
                           tensor.getRank() > 0;
  if (TensorSliceAttr slice = elementwise
                                  ? tensorSliceOf(module, state.getName())
                                  : TensorSliceAttr()) {
    buf.sliceDim = slice.getDim();
    buf.sliceGroups = slice.getGroups();
    buf.sliceSize = slice.getSize();
    // The runtime maps the slice onto the whole tensor with a SliceMap: it
    // must fit (a hand-edited step could say otherwise).
    ArrayRef<int64_t> sliceShape =
        shardOf ? shardOf.asArrayRef() : tensor.getShape();
    const int64_t parts = meshGroupSize(module, MeshAxis::tensor);
    try {
      (void)rt::SliceMap::of(buf, sliceShape.vec(), parts);
    } catch (const ::dsc::Error &e) {
      return emitError(loc, "state ")
             << state << " of shape [" << sliceShape << "] does not fit "
             << slice << " over the tensor axis's " << parts << " ranks ("
             << e.what() << ")";
    }
  }
  program.buffers.push_back(std::move(buf));
  int id = int(program.buffers.size()) - 1;
  states[key] = id;
  return id;
}

/// The opcode of every dsc op Ops.def names, by op name.
const llvm::StringMap<Opcode> &opcodesByOpName() {
  static const llvm::StringMap<Opcode> table = [] {
    llvm::StringMap<Opcode> m;
    for (const rt::OpInfo &info : rt::allOps())
      if (*info.mlirOp)
        m[(DscDialect::getDialectNamespace() + "." + info.mlirOp).str()] =
            info.op;
    return m;
  }();
  return table;
}

/// Ops.def and DscOps.td agree: every op the table names is a registered
/// dsc op whose attributes are exactly the table's. Checked before every
/// lowering (a few dozen lookups), so a table edit that forgets the dialect (or
/// the reverse) fails every lowering instead of dropping an attribute.
LogicalResult verifyOpTable(MLIRContext *ctx) {
  for (const rt::OpInfo &info : rt::allOps()) {
    if (!*info.mlirOp)
      continue;
    std::string name =
        (DscDialect::getDialectNamespace() + "." + info.mlirOp).str();
    std::optional<RegisteredOperationName> op =
        RegisteredOperationName::lookup(name, ctx);
    if (!op)
      return emitError(UnknownLoc::get(ctx), "internal: Ops.def names ")
             << name << " (opcode " << info.name << "), not a dsc op";
    llvm::SmallVector<StringRef> odsNames, tableNames;
    for (StringAttr attr : op->getAttributeNames())
      if (attr != "operandSegmentSizes" && attr != "resultSegmentSizes")
        odsNames.push_back(attr.strref());
    for (const rt::AttrSpec &spec : info.attrs)
      tableNames.push_back(spec.name);
    llvm::sort(odsNames);
    llvm::sort(tableNames);
    if (odsNames != tableNames)
      return emitError(UnknownLoc::get(ctx), "internal: the attributes of ")
             << name << " in DscOps.td (" << llvm::join(odsNames, ", ")
             << ") differ from opcode " << info.name << "'s in Ops.def ("
             << llvm::join(tableNames, ", ") << ")";
  }
  return success();
}

/// The case name of a dialect enum attribute (#dsc<lr_schedule WarmupLR>).
template <typename EnumAttrT> FailureOr<AttrValue> enumName(Attribute attr) {
  if (auto e = dyn_cast<EnumAttrT>(attr))
    return AttrValue(stringifyEnum(e.getValue()).str());
  return failure();
}

/// One attribute as Ops.def types it; failure when the op's attribute is
/// not of that kind (the table and DscOps.td disagree).
FailureOr<AttrValue> convertAttr(Attribute attr, rt::AttrKind kind) {
  switch (kind) {
  case rt::AttrKind::Int:
    if (auto b = dyn_cast<BoolAttr>(attr))
      return AttrValue(int64_t(b.getValue()));
    if (auto i = dyn_cast<IntegerAttr>(attr))
      return AttrValue(int64_t(i.getInt()));
    return failure();
  case rt::AttrKind::Float:
    if (auto f = dyn_cast<FloatAttr>(attr))
      return AttrValue(f.getValueAsDouble());
    return failure();
  case rt::AttrKind::String:
    if (auto str = dyn_cast<StringAttr>(attr))
      return AttrValue(str.str());
    return failure();
  case rt::AttrKind::GeluApproximation:
    if (auto i = dyn_cast<IntegerAttr>(attr))
      if (auto e = symbolizeGeluApproximation(uint32_t(i.getInt())))
        return AttrValue(stringifyGeluApproximation(*e).str());
    return failure();
  case rt::AttrKind::LrScheduleKind:
    return enumName<LrScheduleKindAttr>(attr);
  case rt::AttrKind::WarmupType:
    return enumName<WarmupTypeAttr>(attr);
  case rt::AttrKind::ReduceKind:
    return enumName<ReduceKindAttr>(attr);
  case rt::AttrKind::MeshAxis:
    return enumName<MeshAxisAttr>(attr);
  case rt::AttrKind::RopeScaling:
    return enumName<RopeScalingAttr>(attr);
  case rt::AttrKind::BlockLayout:
    if (auto layout = dyn_cast<BlockLayoutAttr>(attr)) {
      ArrayRef<int32_t> rows = layout.getRows().asArrayRef(),
                        cols = layout.getCols().asArrayRef();
      return AttrValue(rt::BlockLayout{
          layout.getBlock(), layout.getHeads(), layout.getBlocks(),
          std::vector<int32_t>(rows.begin(), rows.end()),
          std::vector<int32_t>(cols.begin(), cols.end())});
    }
    return failure();
  }
  return failure();
}

/// Opcode and attributes of one op from Ops.def; the op's default-valued
/// attributes are filled in from ODS, so every attribute is explicit.
FailureOr<rt::Instr> Lowering::lowerOp(Operation *op) {
  auto it = opcodesByOpName().find(op->getName().getStringRef());
  if (it == opcodesByOpName().end())
    return op->emitOpError("cannot be executed by the runtime (not lowered)");
  rt::Instr instr{it->second, {}, {}, {}};
  NamedAttrList attrs(op->getAttrDictionary());
  if (std::optional<RegisteredOperationName> name = op->getRegisteredInfo())
    name->populateDefaultAttrs(attrs);
  for (const rt::AttrSpec &spec : rt::opInfo(instr.op).attrs) {
    Attribute attr = attrs.get(spec.name);
    // A block layout is optional: without one the instruction is dense.
    FailureOr<AttrValue> value =
        attr ? convertAttr(attr, spec.kind)
        : spec.kind == rt::AttrKind::BlockLayout
            ? FailureOr<AttrValue>(AttrValue(rt::BlockLayout{}))
            : FailureOr<AttrValue>(failure());
    if (failed(value))
      return op->emitOpError("attribute '")
             << spec.name << "' is missing or not of the kind the runtime's "
             << "op table (Ops.def) gives it";
    instr.attrs[spec.name] = std::move(*value);
  }
  return instr;
}

LogicalResult Lowering::lowerFunction(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return fn.emitError("@") << fn.getName()
                             << " must have a body of exactly one block";
  Block &body = fn.getBody().front();
  rt::Function &out = program.functions[fn.getName().str()];
  out.name = fn.getName().str();

  for (BlockArgument arg : body.getArguments()) {
    auto state = fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                kStateAttrName);
    if (!state)
      return fn.emitError("argument #")
             << arg.getArgNumber() << " of @" << fn.getName()
             << " has no #dsc.state";
    FailureOr<int> id = stateBuffer(
        state, arg.getType(),
        fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName),
        fn.getArgAttrOfType<DenseI64ArrayAttr>(arg.getArgNumber(),
                                               kShardOfAttrName),
        fn.getLoc());
    if (failed(id))
      return failure();
    buffers[arg] = *id;
    if (fn.getArgAttr(arg.getArgNumber(), kPerRankAttrName))
      program.buffers[size_t(*id)].perRank = true;
    if (fn.getArgAttr(arg.getArgNumber(), kFrozenAttrName))
      program.buffers[size_t(*id)].frozen = true;
    if (fn.getArgAttr(arg.getArgNumber(), kHostAttrName))
      program.buffers[size_t(*id)].host = true;
    if (fn.getArgAttr(arg.getArgNumber(), kNvmeAttrName))
      program.buffers[size_t(*id)].nvme = true;
  }

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // The arguments by the buffer they live in (so the check below is linear
  // in the function's size, not quadratic in its parameter count).
  DenseMap<int, SmallVector<BlockArgument, 1>> argsInBuffer;
  for (BlockArgument arg : body.getArguments())
    argsInBuffer[buffers.lookup(arg)].push_back(arg);
  // Results that may be computed in place: value -> persistent buffer.
  DenseMap<Value, int> inPlace;
  SmallVector<std::pair<Value, int>> copies;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto state = fn.getResultAttrOfType<StateAttr>(i, kStateAttrName);
    if (!state)
      return fn.emitError("result #") << i << " of @" << fn.getName()
                                      << " has no #dsc.state";
    FailureOr<int> targetId =
        stateBuffer(state, v.getType(), {}, {}, fn.getLoc());
    if (failed(targetId))
      return failure();
    int target = *targetId;
    if (fn.getResultAttr(unsigned(i), kHostAttrName))
      program.buffers[size_t(target)].host = true;
    if (fn.getResultAttr(unsigned(i), kNvmeAttrName))
      program.buffers[size_t(target)].nvme = true;
    Operation *def = v.getDefiningOp();
    // The argument that currently holds `target` must be dead after `def`.
    bool safe = def && !inPlace.count(v);
    for (BlockArgument arg : argsInBuffer.lookup(target))
      for (Operation *user : arg.getUsers())
        if (safe && user != def && !user->isBeforeInBlock(def))
          safe = false;
    if (safe)
      inPlace[v] = target;
    else if (!(isa<BlockArgument>(v) && buffers.lookup(v) == target))
      copies.push_back({v, target});
  }
  // The persistent buffers the function rewrites, by the op that writes
  // their new value (null: the copies after the body), and those written
  // more than once (a state returned twice), which no result may borrow.
  DenseMap<int, Operation *> rewrittenBy;
  DenseSet<int> rewrittenTwice;
  auto rewrites = [&](int target, Operation *writer) {
    if (!rewrittenBy.try_emplace(target, writer).second)
      rewrittenTwice.insert(target);
  };
  for (auto [v, target] : inPlace)
    rewrites(target, v.getDefiningOp());
  for (auto [v, target] : copies)
    rewrites(target, nullptr);
  // Whether `result` may be written over argument `arg` (its only use is
  // `op`): the function rewrites the argument's buffer after every use of
  // `result`, so the old value is dead and the bytes free until then (an
  // all-reduced gradient accumulator, zeroed after the updates).
  auto overArgument = [&](Operation *op, Value result, BlockArgument arg) {
    const int id = buffers.lookup(arg);
    auto writer = rewrittenBy.find(id);
    if (!arg.hasOneUse() || argsInBuffer.lookup(id).size() != 1 ||
        writer == rewrittenBy.end() || rewrittenTwice.contains(id) ||
        arg.getType() != result.getType())
      return false;
    Operation *w = writer->second;
    if (!w) // the copies after the body: none may read the result
      return llvm::none_of(result.getUsers(), [](Operation *user) {
        return isa<func::ReturnOp>(user);
      });
    if (w == op || !op->isBeforeInBlock(w))
      return false;
    return llvm::all_of(result.getUsers(), [&](Operation *user) {
      return user != w && user->isBeforeInBlock(w);
    });
  };

  for (Operation &op : body.without_terminator()) {
    FailureOr<rt::Instr> instr = lowerOp(&op);
    if (failed(instr))
      return failure();
    if (auto layer = op.getAttrOfType<IntegerAttr>(kLayerAttrName))
      instr->layer = int(layer.getInt());
    instr->backward = op.hasAttr(kGradAttrName);
    instr->host = op.hasAttr(kHostAttrName);
    // ZeRO-Offload: what a host op or a copy to the host makes is in host
    // memory.
    const bool hostResults = instr->host || isa<ToHostOp>(op);
    for (Value operand : op.getOperands())
      instr->inputs.push_back(buffers.lookup(operand));
    auto overwritable = dyn_cast<InPlaceOpInterface>(&op);
    for (auto [k, result] : llvm::enumerate(op.getResults())) {
      if (failed(dtypeOf(result.getType(), op.getLoc())))
        return failure();
      auto it = inPlace.find(result);
      int id = it != inPlace.end() ? it->second : -1;
      // A result the op may write over an operand that dies here.
      if (std::optional<unsigned> m =
              overwritable ? overwritable.getInPlaceOperand(unsigned(k))
                           : std::nullopt;
          id < 0 && m) {
        Value operand = op.getOperand(*m);
        const int operandId = buffers.lookup(operand);
        auto arg = dyn_cast<BlockArgument>(operand);
        if ((operand.getDefiningOp() && operand.hasOneUse() &&
             operand.getType() == result.getType() &&
             program.buffers[size_t(operandId)].role == BufferRole::Temp) ||
            (arg && overArgument(&op, result, arg)))
          id = operandId;
      }
      if (id < 0) {
        id = newBuffer(result, BufferRole::Temp, "");
        program.buffers[size_t(id)].host = hostResults;
      }
      buffers[result] = id;
      instr->outputs.push_back(id);
    }
    if (std::string why = rt::memorySpaceError(program, *instr); !why.empty())
      return op.emitOpError(why);
    out.body.push_back(std::move(*instr));
  }
  for (auto [v, target] : copies) {
    rt::Instr copy{Opcode::Copy, {buffers.lookup(v)}, {target}, {}};
    copy.host = program.buffers[size_t(target)].host;
    if (std::string why = rt::memorySpaceError(program, copy); !why.empty())
      return fn.emitError("@") << fn.getName() << ": copying a result into "
                               << "its state: " << why;
    out.body.push_back(std::move(copy));
  }
  return success();
}

FailureOr<rt::Program> Lowering::run(ArrayRef<StringRef> required,
                                     ArrayRef<StringRef> optional) {
  if (failed(verifyOpTable(module.getContext())))
    return failure();
  for (StringRef name : required) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn && trainingStep)
      return module.emitError("not a lowered training step: no @")
             << name << " (run --dsc-train-pipeline first)";
    if (!fn)
      return module.emitError("the module has no function @") << name;
    if (failed(lowerFunction(fn)))
      return failure();
  }
  for (StringRef name : optional)
    if (auto fn = module.lookupSymbol<func::FuncOp>(name))
      if (failed(lowerFunction(fn)))
        return failure();
  for (NamedAttribute attr : module->getAttrs()) {
    StringRef name = attr.getName().strref();
    if (!name.consume_front("dsc."))
      continue;
    if (attr.getName() == kTensorParallelStreamsAttrName) {
      auto streams = cast<DenseI64ArrayAttr>(attr.getValue()).asArrayRef();
      program.tensorParallelStreams.assign(streams.begin(), streams.end());
    } else if (auto mesh = dyn_cast<MeshAttr>(attr.getValue())) {
      program.meta["world_size"] =
          mesh.getData() * mesh.getTensor() * mesh.getPipeline();
      program.meta["mesh_data"] = mesh.getData();
      program.meta["mesh_tensor"] = mesh.getTensor();
      program.meta["mesh_pipeline"] = mesh.getPipeline();
    } else if (auto i = dyn_cast<IntegerAttr>(attr.getValue()))
      program.meta[name.str()] = int64_t(i.getInt());
    else if (auto f = dyn_cast<FloatAttr>(attr.getValue()))
      program.meta[name.str()] = f.getValueAsDouble();
    else if (auto s = dyn_cast<StringAttr>(attr.getValue()))
      program.meta[name.str()] = s.str();
    else if (attr.getName() == kPipelineTiedParamsAttrName ||
             attr.getName() == kExpertParamsAttrName) {
      // Parameter names, comma-separated (no name has a comma).
      std::string names;
      for (auto n : cast<ArrayAttr>(attr.getValue()).getAsRange<StringAttr>())
        names += (names.empty() ? "" : ",") + n.str();
      program.meta[name.str()] = names;
    }
  }
  return std::move(program);
}

} // namespace

auto ::dsc::lowerToProgram(ModuleOp module) -> FailureOr<rt::Program> {
  // Only sampling and evaluation need @eval_step; only 1-bit Adam and
  // 1-bit LAMB have a compression stage (the driver runs it after
  // freeze_step; 1-bit LAMB's freeze function once, first), only 0/1 Adam
  // its 1-bit, local and sync steps.
  // Only a pipeline stage has @stage_forward (-dsc-split-stage-step), and
  // only an interleaved one the other chunks' @stage_forward.k and
  // @micro_step.k.
  SmallVector<std::string> chunkFunctions;
  for (int64_t k = 1, v = pipelineChunksOf(module); k < v; ++k)
    for (StringRef name : {"stage_forward", "micro_step"})
      chunkFunctions.push_back(pipelineChunkName(name, k));
  SmallVector<StringRef> optional = {"eval_step", "stage_forward",
                                     "apply_step_compressed",
                                     "onebit_lamb_freeze",
                                     "apply_step_onebit", "apply_step_local",
                                     "apply_step_sync"};
  optional.append(chunkFunctions.begin(), chunkFunctions.end());
  return Lowering(module).run({"micro_step", "apply_step"}, optional);
}

auto ::dsc::lowerFunctionsToProgram(ModuleOp module,
                                    ArrayRef<StringRef> functions)
    -> FailureOr<rt::Program> {
  Lowering lowering(module);
  lowering.trainingStep = false;
  return lowering.run(functions, {});
}
