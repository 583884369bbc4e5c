//===- LowerToProgram.cpp - dsc module -> runtime Program ----------------===//
//
// Every SSA value becomes a buffer; every #dsc.state names a persistent
// buffer shared by all entry functions (a parameter read by @micro_step is
// the one @apply_step updates). A returned value whose state matches an
// argument is computed straight into that argument's buffer when the argument
// is dead afterwards, so optimizer updates and gradient accumulation run in
// place; otherwise a Copy is appended.
//
//===----------------------------------------------------------------------===//

#include "dsc/Codegen/LowerToProgram.h"

#include "dsc/Dialect/DscOps.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::dsc;
using ::dsc::rt::AttrValue;
using ::dsc::rt::BufferRole;
using ::dsc::rt::Opcode;

namespace {

class Lowering {
public:
  explicit Lowering(ModuleOp module) : module(module) {}
  FailureOr<::dsc::rt::Program> run();

private:
  LogicalResult lowerFunction(func::FuncOp fn);
  FailureOr<::dsc::rt::Instr> lowerOp(Operation *op);
  int newBuffer(Value v, BufferRole role, std::string name);
  FailureOr<int> stateBuffer(StateAttr state, Type type, ParamAttr param,
                             Location loc);

  ModuleOp module;
  ::dsc::rt::Program program;
  std::map<std::pair<StateKind, std::string>, int> states;
  DenseMap<Value, int> buffers;
};

FailureOr<::dsc::rt::DType> dtypeOf(Type type, Location loc) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return emitError(loc, "the runtime needs statically shaped tensors, got ")
           << type;
  Type elem = tensor.getElementType();
  if (elem.isF32())
    return ::dsc::rt::DType::F32;
  if (elem.isInteger(32))
    return ::dsc::rt::DType::I32;
  if (elem.isInteger(64))
    return ::dsc::rt::DType::I64;
  return emitError(loc, "the runtime has no buffers of element type ") << elem;
}

int Lowering::newBuffer(Value v, BufferRole role, std::string name) {
  auto type = cast<RankedTensorType>(v.getType());
  ::dsc::rt::Buffer buf;
  buf.name = std::move(name);
  buf.role = role;
  buf.dtype = *dtypeOf(type, v.getLoc());
  buf.shape.assign(type.getShape().begin(), type.getShape().end());
  program.buffers.push_back(std::move(buf));
  return int(program.buffers.size()) - 1;
}

FailureOr<int> Lowering::stateBuffer(StateAttr state, Type type,
                                     ParamAttr param, Location loc) {
  FailureOr<::dsc::rt::DType> dtype = dtypeOf(type, loc);
  if (failed(dtype))
    return failure();
  auto tensor = cast<RankedTensorType>(type);
  auto key = std::make_pair(state.getKind(), state.getName().str());
  if (auto it = states.find(key); it != states.end()) {
    // Every function sees a state through the same buffer.
    const ::dsc::rt::Buffer &buf = program.buffers[it->second];
    if (buf.dtype != *dtype ||
        !llvm::equal(buf.shape, tensor.getShape()))
      return emitError(loc, "state ")
             << state << " is " << type
             << " here but has another type elsewhere in the module";
    return it->second;
  }
  BufferRole role = BufferRole::OptState;
  std::string name = state.getName().str();
  switch (state.getKind()) {
  case StateKind::param:
    role = BufferRole::Param;
    break;
  case StateKind::grad:
    role = BufferRole::GradAcc;
    name = "grad/" + name;
    break;
  case StateKind::input_ids:
  case StateKind::targets:
  case StateKind::step:
    role = BufferRole::Input;
    break;
  case StateKind::output:
    role = BufferRole::Output;
    break;
  default:
    name = stringifyStateKind(state.getKind()).str() + "/" + name;
    break;
  }
  ::dsc::rt::Buffer buf;
  buf.name = name;
  buf.role = role;
  buf.dtype = *dtype;
  buf.shape.assign(tensor.getShape().begin(), tensor.getShape().end());
  if (param) {
    buf.init = param.getInit() == InitKind::normal  ? ::dsc::rt::InitKind::Normal
               : param.getInit() == InitKind::zeros ? ::dsc::rt::InitKind::Zeros
                                                    : ::dsc::rt::InitKind::Ones;
    buf.initStd = param.getStd().getValueAsDouble();
  }
  program.buffers.push_back(std::move(buf));
  int id = int(program.buffers.size()) - 1;
  states[key] = id;
  return id;
}

/// Opcode and attributes of one op, read through its typed accessors so
/// default-valued attributes arrive explicitly.
FailureOr<::dsc::rt::Instr> Lowering::lowerOp(Operation *op) {
  ::dsc::rt::Instr instr{Opcode::Copy, {}, {}, {}};
  auto &a = instr.attrs;
  auto f = [](APFloat v) { return AttrValue(v.convertToDouble()); };
  auto gelu = [](GeluApproximation g) {
    return AttrValue(stringifyGeluApproximation(g).str());
  };
  bool known =
      llvm::TypeSwitch<Operation *, bool>(op)
          .Case([&](FillOp o) {
            instr.op = Opcode::Fill;
            a["value"] = f(o.getValue());
            return true;
          })
          .Case([&](IotaOp o) {
            instr.op = Opcode::Iota;
            a["start"] = int64_t(o.getStart());
            a["step"] = int64_t(o.getStep());
            return true;
          })
          .Case([&](EmbeddingOp) { return instr.op = Opcode::Embedding, true; })
          .Case([&](AddOp) { return instr.op = Opcode::Add, true; })
          .Case([&](LinearOp o) {
            instr.op = Opcode::Linear;
            a["transpose_w"] = int64_t(o.getTransposeW());
            return true;
          })
          .Case([&](LayerNormOp o) {
            instr.op = Opcode::LayerNorm;
            a["epsilon"] = f(o.getEpsilon());
            return true;
          })
          .Case([&](InvertibleLayerNormOp o) {
            instr.op = Opcode::InvertibleLayerNorm;
            a["epsilon"] = f(o.getEpsilon());
            return true;
          })
          .Case([&](LayerNormGradFromOutputOp) {
            return instr.op = Opcode::LayerNormGradFromOutput, true;
          })
          .Case([&](BiasGeluOp o) {
            instr.op = Opcode::BiasGelu;
            a["approximation"] = gelu(o.getApproximation());
            return true;
          })
          .Case([&](BiasGeluGradOp o) {
            instr.op = Opcode::BiasGeluGrad;
            a["approximation"] = gelu(o.getApproximation());
            return true;
          })
          .Case([&](BiasDropoutAddOp o) {
            instr.op = Opcode::BiasDropoutAdd;
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](BiasDropoutAddLayerNormOp o) {
            instr.op = Opcode::BiasDropoutAddLayerNorm;
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            a["epsilon"] = f(o.getEpsilon());
            return true;
          })
          .Case([&](DropoutBiasGradOp o) {
            instr.op = Opcode::DropoutBiasGrad;
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](GeluOp o) {
            instr.op = Opcode::Gelu;
            a["approximation"] = gelu(o.getApproximation());
            return true;
          })
          .Case([&](DropoutOp o) {
            instr.op = Opcode::Dropout;
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](SplitHeadsOp o) {
            instr.op = Opcode::SplitHeads;
            a["num_heads"] = int64_t(o.getNumHeads());
            return true;
          })
          .Case([&](MergeHeadsOp o) {
            instr.op = Opcode::MergeHeads;
            a["num_heads"] = cast<RankedTensorType>(o.getParts()[0].getType())
                                 .getShape()[1];
            return true;
          })
          .Case([&](BiasSplitHeadsOp o) {
            instr.op = Opcode::BiasSplitHeads;
            a["num_heads"] = int64_t(o.getNumHeads());
            return true;
          })
          .Case([&](ConcatOp o) {
            instr.op = Opcode::Concat;
            a["axis"] = int64_t(o.getAxis());
            return true;
          })
          .Case([&](SplitOp o) {
            instr.op = Opcode::Split;
            a["axis"] = int64_t(o.getAxis());
            return true;
          })
          .Case([&](BatchMatmulOp o) {
            instr.op = Opcode::BatchMatmul;
            a["transpose_a"] = int64_t(o.getTransposeA());
            a["transpose_b"] = int64_t(o.getTransposeB());
            a["alpha"] = f(o.getAlpha());
            return true;
          })
          .Case([&](SoftmaxOp o) {
            instr.op = Opcode::Softmax;
            a["scale"] = f(o.getScale());
            a["causal"] = int64_t(o.getCausal());
            return true;
          })
          .Case([&](CrossEntropyOp o) {
            instr.op = Opcode::CrossEntropy;
            a["ignore_index"] = int64_t(o.getIgnoreIndex());
            return true;
          })
          .Case([&](MlmMaskOp o) {
            instr.op = Opcode::MlmMask;
            a["mask_prob"] = f(o.getMaskProb());
            a["mask_token_id"] = int64_t(o.getMaskTokenId());
            a["vocab_size"] = int64_t(o.getVocabSize());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](ReduceToOp) { return instr.op = Opcode::ReduceTo, true; })
          .Case([&](EmbeddingGradOp) {
            return instr.op = Opcode::EmbeddingGrad, true;
          })
          .Case([&](LinearGradInputOp o) {
            instr.op = Opcode::LinearGradInput;
            a["transpose_w"] = int64_t(o.getTransposeW());
            return true;
          })
          .Case([&](LinearGradWeightOp o) {
            instr.op = Opcode::LinearGradWeight;
            a["transpose_w"] = int64_t(o.getTransposeW());
            return true;
          })
          .Case([&](LayerNormGradOp o) {
            instr.op = Opcode::LayerNormGrad;
            a["epsilon"] = f(o.getEpsilon());
            return true;
          })
          .Case([&](GeluGradOp o) {
            instr.op = Opcode::GeluGrad;
            a["approximation"] = gelu(o.getApproximation());
            return true;
          })
          .Case([&](SoftmaxDropoutOp o) {
            instr.op = Opcode::SoftmaxDropout;
            a["scale"] = f(o.getScale());
            a["causal"] = int64_t(o.getCausal());
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](SoftmaxDropoutGradOp o) {
            instr.op = Opcode::SoftmaxDropoutGrad;
            a["scale"] = f(o.getScale());
            a["rate"] = f(o.getRate());
            return true;
          })
          .Case([&](AttentionOp o) {
            instr.op = Opcode::Attention;
            a["scale"] = f(o.getScale());
            a["causal"] = int64_t(o.getCausal());
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](AttentionGradOp o) {
            instr.op = Opcode::AttentionGrad;
            a["scale"] = f(o.getScale());
            a["causal"] = int64_t(o.getCausal());
            a["rate"] = f(o.getRate());
            a["stream"] = int64_t(o.getStream());
            return true;
          })
          .Case([&](SoftmaxGradOp o) {
            instr.op = Opcode::SoftmaxGrad;
            a["scale"] = f(o.getScale());
            return true;
          })
          .Case([&](CrossEntropyGradOp o) {
            instr.op = Opcode::CrossEntropyGrad;
            a["ignore_index"] = int64_t(o.getIgnoreIndex());
            return true;
          })
          .Case([&](AllReduceOp o) {
            instr.op = Opcode::AllReduce;
            a["op"] = o.getOp().str();
            return true;
          })
          .Case([&](GlobalNormOp) { return instr.op = Opcode::GlobalNorm, true; })
          .Case([&](ClipCoefficientOp o) {
            instr.op = Opcode::ClipCoefficient;
            a["max_norm"] = f(o.getMaxNorm());
            return true;
          })
          .Case([&](LrScheduleOp o) {
            instr.op = Opcode::LrSchedule;
            a["kind"] = o.getKind().str();
            a["lr"] = f(o.getLr());
            a["warmup_min_lr"] = f(o.getWarmupMinLr());
            a["warmup_max_lr"] = f(o.getWarmupMaxLr());
            a["warmup_num_steps"] = int64_t(o.getWarmupNumSteps());
            a["total_num_steps"] = int64_t(o.getTotalNumSteps());
            a["warmup_type"] = o.getWarmupType().str();
            a["warmup_min_ratio"] = f(o.getWarmupMinRatio());
            a["cos_min_ratio"] = f(o.getCosMinRatio());
            return true;
          })
          .Case([&](AdamOp o) {
            instr.op = Opcode::Adam;
            a["beta1"] = f(o.getBeta1());
            a["beta2"] = f(o.getBeta2());
            a["eps"] = f(o.getEps());
            a["weight_decay"] = f(o.getWeightDecay());
            a["adamw"] = int64_t(o.getAdamw());
            a["bias_correction"] = int64_t(o.getBiasCorrection());
            return true;
          })
          .Case([&](LambOp o) {
            instr.op = Opcode::Lamb;
            a["beta1"] = f(o.getBeta1());
            a["beta2"] = f(o.getBeta2());
            a["eps"] = f(o.getEps());
            a["weight_decay"] = f(o.getWeightDecay());
            a["bias_correction"] = int64_t(o.getBiasCorrection());
            a["max_coeff"] = f(o.getMaxCoeff());
            a["min_coeff"] = f(o.getMinCoeff());
            return true;
          })
          .Case([&](SgdOp o) {
            instr.op = Opcode::Sgd;
            a["momentum"] = f(o.getMomentum());
            a["dampening"] = f(o.getDampening());
            a["weight_decay"] = f(o.getWeightDecay());
            a["nesterov"] = int64_t(o.getNesterov());
            return true;
          })
          .Case([&](RoundToHalfOp o) {
            instr.op = Opcode::RoundToHalf;
            a["format"] = stringifyHalfFormat(o.getFormat()).str();
            return true;
          })
          .Case([&](CheckFiniteOp) { return instr.op = Opcode::CheckFinite, true; })
          .Case([&](LossScaleOp o) {
            instr.op = Opcode::LossScale;
            a["initial_scale"] = f(o.getInitialScale());
            a["multiplier"] = f(o.getMultiplier());
            return true;
          })
          .Case([&](UnscaleClipOp o) {
            instr.op = Opcode::UnscaleClip;
            a["max_norm"] = f(o.getMaxNorm());
            return true;
          })
          .Case([&](UpdateLossScaleOp o) {
            instr.op = Opcode::UpdateLossScale;
            a["dynamic"] = int64_t(o.getDynamic());
            a["initial_scale"] = f(o.getInitialScale());
            a["scale_window"] = int64_t(o.getScaleWindow());
            a["hysteresis"] = int64_t(o.getHysteresis());
            a["min_scale"] = f(o.getMinScale());
            a["consecutive_hysteresis"] = int64_t(o.getConsecutiveHysteresis());
            return true;
          })
          .Default([](Operation *) { return false; });
  if (!known)
    return op->emitOpError("cannot be executed by the runtime (not lowered)");
  return instr;
}

LogicalResult Lowering::lowerFunction(func::FuncOp fn) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock())
    return fn.emitError("@") << fn.getName()
                             << " must have a body of exactly one block";
  Block &body = fn.getBody().front();
  ::dsc::rt::Function &out = program.functions[fn.getName().str()];
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
        fn.getLoc());
    if (failed(id))
      return failure();
    buffers[arg] = *id;
  }

  auto ret = cast<func::ReturnOp>(body.getTerminator());
  // Results that may be computed in place: value -> persistent buffer.
  DenseMap<Value, int> inPlace;
  SmallVector<std::pair<Value, int>> copies;
  for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
    auto state = fn.getResultAttrOfType<StateAttr>(i, kStateAttrName);
    if (!state)
      return fn.emitError("result #") << i << " of @" << fn.getName()
                                      << " has no #dsc.state";
    FailureOr<int> targetId = stateBuffer(state, v.getType(), {}, fn.getLoc());
    if (failed(targetId))
      return failure();
    int target = *targetId;
    Operation *def = v.getDefiningOp();
    // The argument that currently holds `target` must be dead after `def`.
    bool safe = def && !inPlace.count(v);
    for (BlockArgument arg : body.getArguments())
      if (safe && buffers.lookup(arg) == target)
        for (Operation *user : arg.getUsers())
          if (user != def && !user->isBeforeInBlock(def))
            safe = false;
    if (safe)
      inPlace[v] = target;
    else if (!(isa<BlockArgument>(v) && buffers.lookup(v) == target))
      copies.push_back({v, target});
  }

  for (Operation &op : body.without_terminator()) {
    FailureOr<::dsc::rt::Instr> instr = lowerOp(&op);
    if (failed(instr))
      return failure();
    if (auto layer = op.getAttrOfType<IntegerAttr>(kLayerAttrName))
      instr->layer = int(layer.getInt());
    instr->backward = op.hasAttr(kGradAttrName);
    for (Value operand : op.getOperands())
      instr->inputs.push_back(buffers.lookup(operand));
    for (Value result : op.getResults()) {
      if (failed(dtypeOf(result.getType(), op.getLoc())))
        return failure();
      auto it = inPlace.find(result);
      int id = it != inPlace.end() ? it->second
                                   : newBuffer(result, BufferRole::Temp, "");
      buffers[result] = id;
      instr->outputs.push_back(id);
    }
    out.body.push_back(std::move(*instr));
  }
  for (auto [v, target] : copies)
    out.body.push_back({Opcode::Copy, {buffers.lookup(v)}, {target}, {}});
  return success();
}

FailureOr<::dsc::rt::Program> Lowering::run() {
  for (StringRef name : {"micro_step", "apply_step", "eval_step"}) {
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn && name == "eval_step")
      continue; // Optional: only sampling and evaluation need it.
    if (!fn)
      return module.emitError("not a lowered training step: no @")
             << name << " (run --dsc-train-pipeline first)";
    if (failed(lowerFunction(fn)))
      return failure();
  }
  for (NamedAttribute attr : module->getAttrs()) {
    StringRef name = attr.getName().strref();
    if (!name.consume_front("dsc."))
      continue;
    if (auto i = dyn_cast<IntegerAttr>(attr.getValue()))
      program.meta[name.str()] = int64_t(i.getInt());
    else if (auto s = dyn_cast<StringAttr>(attr.getValue()))
      program.meta[name.str()] = s.str();
  }
  return std::move(program);
}

} // namespace

auto ::dsc::lowerToProgram(ModuleOp module) -> FailureOr<::dsc::rt::Program> {
  return Lowering(module).run();
}
