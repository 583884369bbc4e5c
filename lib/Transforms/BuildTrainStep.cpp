//===- BuildTrainStep.cpp - Accumulation, clipping and the optimizer -----===//
//
// Turns @forward_grad into the two entry points the runtime drives, the way
// DeepSpeed's engine splits a step into backward() per micro-batch and step()
// at the accumulation boundary:
//
//   @micro_step(params, grad_accs, input_ids, targets)
//       -> (loss, grad_accs + grads / A)
//       (the logits only with return-logits: a [B, T, V] f32 result that
//       training never reads would be written every micro-step and kept
//       out of the memory planner's reuse)
//       (frozen parameters, dsc.frozen, are read but have no accumulator;
//       @apply_step neither takes nor updates them)
//   @apply_step(params, grad_accs, optimizer state, step)
//       -> (params', optimizer state', zeroed grad_accs, grad_norm, lr)
//
//   @eval_step(params, input_ids, targets) -> (loss, logits)
//       the forward alone, for evaluation and sampling
//
// A pipeline stage (-dsc-pipeline-stage) differs: @micro_step also takes
// the activation the stage receives (`stage_input`, stages after the
// first) and, before the last stage, the gradient of the one it sends
// (`stage_output_grad`, which seeds its backward in place of the loss);
// it returns the gradient of its received activation
// (`stage_input_grad`) and, before the last stage, the activation it sends
// (`stage_output`) instead of the loss; -dsc-split-stage-step
// later cuts it into the stage's forward and backward. An interleaved
// stage holds several model chunks: one boundary value of each kind per
// chunk that has it, chunk k's named with ".k" (`stage_input.1`), the loss
// (and logits) before the sent activations. No @eval_step:
// evaluation needs the whole pipeline. @apply_step's gradient
// norm sums its squares over the pipeline ranks too, a tied copy on the
// last stage left out (the first stage counts it).
//
// With `fp16`, both steps also take the loss scaler's state: @micro_step
// seeds the loss gradient with scale / A; @apply_step checks the gradients
// for inf/NaN, unscales them together with clipping, skips the optimizer
// update on overflow and updates the scale as DeepSpeed's DynamicLossScaler
// (extra results: the scaler state, `loss_scale` and `skipped`).
//
// Every argument and result carries #dsc.state; a result with the same state
// as an argument overwrites that argument's buffer.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"

#include <cmath>
#include <limits>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCBUILDTRAINSTEP
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct Param {
  StringRef name;
  RankedTensorType type;
  ParamAttr attr;
  bool frozen;
};

/// Collects argument/result types and their #dsc.state attributes.
struct Signature {
  SmallVector<Type> types;
  SmallVector<DictionaryAttr> attrs;
  void add(MLIRContext *ctx, Type type, StateKind kind, StringRef name) {
    types.push_back(type);
    attrs.push_back(DictionaryAttr::get(ctx, {stateEntry(ctx, kind, name)}));
  }
  /// A parameter with its dsc.param (and dsc.frozen, if frozen).
  void addParam(MLIRContext *ctx, const Param &p) {
    types.push_back(p.type);
    SmallVector<NamedAttribute> entries = {
        stateEntry(ctx, StateKind::param, p.name),
        NamedAttribute(StringAttr::get(ctx, kParamAttrName), p.attr)};
    if (p.frozen)
      entries.push_back(NamedAttribute(StringAttr::get(ctx, kFrozenAttrName),
                                       UnitAttr::get(ctx)));
    attrs.push_back(DictionaryAttr::get(ctx, entries));
  }
  static NamedAttribute stateEntry(MLIRContext *ctx, StateKind kind,
                                   StringRef name) {
    return NamedAttribute(StringAttr::get(ctx, kStateAttrName),
                          StateAttr::get(ctx, kind, name));
  }
};

struct BuildTrainStepPass : mlir::dsc::impl::DscBuildTrainStepBase<BuildTrainStepPass> {
  using DscBuildTrainStepBase::DscBuildTrainStepBase;

  void runOnOperation() override;
  LogicalResult checkOptions(Operation *anchor);
  func::FuncOp buildMicroStep(func::FuncOp fwdGrad, ArrayRef<Param> params,
                              ArrayRef<Param> trainable);
  func::FuncOp buildApplyStep(ModuleOp module, ArrayRef<Param> trainable);
  func::FuncOp buildEvalStep(ModuleOp module, unsigned numParams);
  /// fp16: the scale before any update (2^initial-scale-power or static).
  double initialScale() const {
    return lossScale > 0 ? double(lossScale)
                         : std::ldexp(1.0, int(initialScalePower));
  }
  RankedTensorType scalerType() {
    return RankedTensorType::get({3}, Float32Type::get(&getContext()));
  }
  /// 8-bit Adam quantizes this parameter's state (else bitsandbytes keeps
  /// it in 32 bits).
  bool quantized(const Param &p) const {
    return (optimizer == TrainStepOptimizer::Adam8bit ||
            optimizer == TrainStepOptimizer::AdamW8bit) &&
           p.type.getNumElements() >= min8bitSize;
  }
  /// The kinds and types of one parameter's optimizer state, in the order
  /// its update op takes them.
  SmallVector<std::pair<StateKind, RankedTensorType>>
  stateOf(const Param &p) const {
    MLIRContext *ctx = p.type.getContext();
    auto f32 = [&](ArrayRef<int64_t> shape) {
      return RankedTensorType::get(shape, Float32Type::get(ctx));
    };
    SmallVector<std::pair<StateKind, RankedTensorType>> states;
    auto like = [&](ArrayRef<StateKind> kinds) {
      for (StateKind k : kinds)
        states.push_back({k, p.type});
    };
    switch (optimizer) {
    case TrainStepOptimizer::Sgd:
      like(SgdOp::getStateKinds());
      break;
    case TrainStepOptimizer::Lamb:
      like(LambOp::getStateKinds());
      break;
    case TrainStepOptimizer::Adam:
    case TrainStepOptimizer::AdamW:
      like(AdamOp::getStateKinds());
      break;
    case TrainStepOptimizer::Adam8bit:
    case TrainStepOptimizer::AdamW8bit: {
      if (!quantized(p)) {
        like(AdamOp::getStateKinds());
        break;
      }
      auto u8 = RankedTensorType::get(
          p.type.getShape(), IntegerType::get(ctx, 8, IntegerType::Unsigned));
      const int64_t blocks =
          (p.type.getNumElements() + Adam8bitOp::kBlockSize - 1) /
          Adam8bitOp::kBlockSize;
      SmallVector<StateKind> kinds = Adam8bitOp::getStateKinds();
      states = {{kinds[0], u8}, {kinds[1], u8}, {kinds[2], f32({blocks})},
                {kinds[3], f32({blocks})}};
      break;
    }
    case TrainStepOptimizer::Adafactor:
      for (StateKind k : adafactorStateKinds(p.type.getRank(), firstMoment))
        states.push_back(
            {k, k == StateKind::exp_avg_sq_row
                    ? f32(adafactorRowShape(p.type.getShape()))
                : k == StateKind::exp_avg_sq_col
                    ? f32(adafactorColShape(p.type.getShape()))
                    : p.type});
      break;
    }
    return states;
  }
  /// The optimizer op of the `optimizer` option for one parameter.
  OptimizerOpInterface createOptimizerUpdate(OpBuilder &b, Location loc,
                                             Value param, Value grad,
                                             ValueRange state, Value lr,
                                             Value step, Value gradScale,
                                             double weightDecay, Value skip,
                                             const Param &p);
};

} // namespace

LogicalResult BuildTrainStepPass::checkOptions(Operation *anchor) {
  // The ranges the training config (lib/Frontend) enforces, so
  // dsc-opt accepts no step that dsc-run would refuse to build.
  struct Range {
    const char *name;
    double value, min;
    bool minIncluded;
    double max; // excluded
  };
  const double inf = std::numeric_limits<double>::infinity();
  const Range ranges[] = {
      {"lr", lr, 0, true, inf},
      {"beta1", beta1, 0, true, 1},
      {"beta2", beta2, 0, true, 1},
      {"eps", eps, 0, false, inf},
      {"weight-decay", weightDecay, 0, true, inf},
      {"max-coeff", maxCoeff, 0, false, inf},
      {"min-coeff", minCoeff, 0, true, inf},
      {"momentum", momentum, 0, true, inf},
      {"dampening", dampening, 0, true, inf},
      {"warmup-min-lr", warmupMinLr, 0, true, inf},
      {"warmup-max-lr", warmupMaxLr, 0, true, inf},
      {"warmup-min-ratio", warmupMinRatio, 0, true, inf},
      {"cos-min-ratio", cosMinRatio, 0, true, inf},
      // NaN passed "< 0" checks: clipping silently off, loss scaling
      // dynamic, or every step skipped at an infinite scale.
      {"grad-clip", gradClip, 0, true, inf},
      {"loss-scale", lossScale, 0, true, inf},
      {"min-loss-scale", minLossScale, 0, false, inf},
      {"adafactor-eps1", adafactorEps1, 0, true, inf},
      {"adafactor-eps2", adafactorEps2, 0, true, inf},
      {"clip-threshold", clipThreshold, 0, false, inf},
  };
  for (const Range &r : ranges) {
    const bool aboveMin = r.minIncluded ? r.value >= r.min : r.value > r.min;
    if (!std::isfinite(r.value) || !aboveMin || !(r.value < r.max)) {
      std::string bound = std::string(r.minIncluded ? ">= " : "> ") +
                          std::to_string(int(r.min));
      if (r.max != inf)
        bound += " and < " + std::to_string(int(r.max));
      std::string value;
      llvm::raw_string_ostream(value) << ExactDouble(r.value);
      return anchor->emitError("dsc-build-train-step: ")
             << r.name << " is " << value << "; it must be finite, " << bound;
    }
  }
  if (!(double(decayRate) <= 0) || !std::isfinite(double(decayRate))) {
    std::string value;
    llvm::raw_string_ostream(value) << ExactDouble(decayRate);
    return anchor->emitError("dsc-build-train-step: decay-rate is ")
           << value << "; it must be finite and <= 0";
  }
  if (min8bitSize < 0)
    return anchor->emitError("dsc-build-train-step: min-8bit-size must be "
                             ">= 0, got ")
           << int64_t(min8bitSize);
  if (optimizer == TrainStepOptimizer::Adafactor && warmupInit &&
      !relativeStep)
    return anchor->emitError("dsc-build-train-step: warmup-init requires "
                             "relative-step (as transformers' Adafactor)");
  if (warmupNumSteps < 0 || totalNumSteps < 0)
    return anchor->emitError("dsc-build-train-step: warmup-num-steps and "
                             "total-num-steps must be >= 0");
  // The config's bound on counts: a larger one overflowed the batch size.
  if (gradAccum < 1 || gradAccum > (int64_t(1) << 31) - 1)
    return anchor->emitError(
        "dsc-build-train-step: grad-accum must be in [1, 2^31-1]");
  if (fp16 && (initialScalePower < 0 || initialScalePower > 100 ||
               lossScaleWindow < 1 || hysteresis < 1))
    return anchor->emitError(
        "dsc-build-train-step: fp16 needs 0 <= initial-scale-power <= 100, "
        "loss-scale-window >= 1 and hysteresis >= 1");
  return success();
}

void BuildTrainStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
  auto fwdGrad = module.lookupSymbol<func::FuncOp>("forward_grad");
  if (!fwdGrad) {
    module.emitError("dsc-build-train-step: no @forward_grad; run "
                     "-dsc-autodiff first");
    return signalPassFailure();
  }
  SmallVector<Param> params, trainable;
  for (unsigned i = 0, e = fwdGrad.getNumArguments(); i < e; ++i)
    if (auto attr = fwdGrad.getArgAttrOfType<ParamAttr>(i, kParamAttrName)) {
      params.push_back(
          {attr.getName(),
           cast<RankedTensorType>(fwdGrad.getArgument(i).getType()), attr,
           bool(fwdGrad.getArgAttr(i, kFrozenAttrName))});
      if (!params.back().frozen)
        trainable.push_back(params.back());
    }
  if (trainable.empty()) {
    fwdGrad.emitError("dsc-build-train-step: every parameter is frozen; "
                      "there is nothing to train");
    return signalPassFailure();
  }
  // 8-bit Adam's block scales and Adafactor's factors and RMS span whole
  // parameters; a tensor-parallel rank holds a slice.
  if (optimizer == TrainStepOptimizer::Adam8bit ||
      optimizer == TrainStepOptimizer::AdamW8bit ||
      optimizer == TrainStepOptimizer::Adafactor)
    for (const Param &p : trainable)
      if (tensorSliceOf(module, p.name)) {
        module.emitError("dsc-build-train-step: ")
            << (optimizer == TrainStepOptimizer::Adafactor ? "adafactor"
                                                           : "8-bit Adam")
            << " needs whole parameters; '" << p.name
            << "' is sliced over the tensor axis";
        return signalPassFailure();
      }
  const bool stage = pipelineStageOf(module) >= 0;
  if (!buildMicroStep(fwdGrad, params, trainable) ||
      !buildApplyStep(module, trainable) ||
      (!stage && !buildEvalStep(module, params.size())))
    return signalPassFailure();
  fwdGrad.erase();
  // The driver runs @micro_step this many times per @apply_step.
  module->setAttr("dsc.grad_accum",
                  IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                   int64_t(gradAccum)));
}

func::FuncOp BuildTrainStepPass::buildMicroStep(func::FuncOp fwdGrad,
                                                ArrayRef<Param> params,
                                                ArrayRef<Param> trainable) {
  MLIRContext *ctx = &getContext();
  if (fwdGrad.isExternal() || !fwdGrad.getBody().hasOneBlock()) {
    fwdGrad.emitError("dsc-build-train-step: @forward_grad must have a body "
                      "of exactly one block");
    return {};
  }
  Block &src = fwdGrad.getBody().front();
  unsigned numParams = params.size(), numTrainable = trainable.size();
  // A pipeline stage: the activations its chunks receive (arguments after
  // the parameters, their gradients the last results) and those they send
  // (forward results after the loss and logits, if it has them, each seeded
  // by the gradient it gets back).
  SmallVector<int64_t> receiving = pipelineReceivingChunks(fwdGrad),
                       sending = pipelineSendingChunks(fwdGrad);
  const bool holdsLoss = holdsPipelineLoss(fwdGrad);
  const unsigned numReceived = receiving.size(), numSent = sending.size();
  const unsigned numSeeds = numSent + (holdsLoss ? 1u : 0u);
  const unsigned numForwardResults = numSent + (holdsLoss ? 2u : 0u);
  const bool shapeOk =
      src.getNumArguments() == numParams + numReceived + 2 + numSeeds &&
      fwdGrad.getFunctionType().getNumResults() ==
          numForwardResults + numTrainable + numReceived &&
      llvm::all_of(llvm::seq(numParams, numParams + numReceived),
                   [&](unsigned i) {
                     return bool(
                         fwdGrad.getArgAttr(i, kPipelineInputAttrName));
                   });
  if (!shapeOk) {
    fwdGrad.emitError("dsc-build-train-step: expected @forward_grad(params, ")
        << (numReceived ? "stage_input, " : "") << "input_ids, targets, "
        << (holdsLoss ? "dloss" : "") << (holdsLoss && numSent ? ", " : "")
        << (numSent ? "stage_output_grad" : "") << ") -> ("
        << (holdsLoss ? "loss, logits" : "")
        << (holdsLoss && numSent ? ", " : "")
        << (numSent ? "stage_output" : "") << ", grads"
        << (numReceived ? ", stage_input_grad" : "") << ")"
        << (numReceived + numSent > 2 ? ", one boundary value per chunk"
                                      : "");
    return {};
  }
  // Parameters must come first, as the frontend emits them.
  for (unsigned i = 0; i < numParams; ++i)
    if (!fwdGrad.getArgAttr(i, kParamAttrName)) {
      fwdGrad.emitError("dsc-build-train-step: parameters must precede the "
                        "inputs in @forward_grad");
      return {};
    }

  const unsigned firstToken = numParams + numReceived;
  const unsigned firstSeed = firstToken + 2;
  FunctionType srcType = fwdGrad.getFunctionType();
  Signature args, results;
  for (const Param &p : params)
    args.addParam(ctx, p);
  for (const Param &p : trainable)
    args.add(ctx, p.type, StateKind::grad, p.name);
  for (auto [i, k] : llvm::enumerate(receiving))
    args.add(ctx, src.getArgument(numParams + i).getType(),
             StateKind::activation, pipelineChunkName("stage_input", k));
  args.add(ctx, src.getArgument(firstToken).getType(), StateKind::input_ids,
           "input_ids");
  args.add(ctx, src.getArgument(firstToken + 1).getType(), StateKind::targets,
           "targets");
  const unsigned firstSentSeed = firstSeed + (holdsLoss ? 1 : 0);
  for (auto [i, k] : llvm::enumerate(sending))
    args.add(ctx, src.getArgument(firstSentSeed + i).getType(),
             StateKind::activation, pipelineChunkName("stage_output_grad", k));
  if (holdsLoss) {
    results.add(ctx, srcType.getResult(0), StateKind::output, "loss");
    if (returnLogits)
      results.add(ctx, srcType.getResult(1), StateKind::output, "logits");
  }
  const unsigned firstSent = numForwardResults - numSent;
  for (auto [i, k] : llvm::enumerate(sending))
    results.add(ctx, srcType.getResult(firstSent + i), StateKind::output,
                pipelineChunkName("stage_output", k));
  for (const Param &p : trainable)
    results.add(ctx, p.type, StateKind::grad, p.name);
  for (auto [i, k] : llvm::enumerate(receiving))
    results.add(ctx, src.getArgument(numParams + i).getType(),
                StateKind::output, pipelineChunkName("stage_input_grad", k));
  // The loss scale seeds the last stage's backward; the stages before it
  // receive gradients scaled already.
  if (fp16 && holdsLoss)
    args.add(ctx, scalerType(), StateKind::loss_scaler, "state");

  OpBuilder mb(fwdGrad);
  auto micro = mb.create<func::FuncOp>(
      fwdGrad.getLoc(), "micro_step",
      FunctionType::get(ctx, args.types, results.types));
  micro.setAllArgAttrs(args.attrs);
  micro.setAllResultAttrs(results.attrs);
  Block *body = micro.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(body);
  Location loc = fwdGrad.getLoc();

  IRMapping map;
  for (unsigned i = 0; i < numParams; ++i)
    map.map(src.getArgument(i), body->getArgument(i));
  // Received activations and tokens, in the same order after the
  // accumulators.
  for (unsigned i = numParams; i < firstSeed; ++i)
    map.map(src.getArgument(i), body->getArgument(i + numTrainable));
  // DeepSpeed scales each micro-batch loss by 1/A; the accumulated gradient
  // is then the mean over the step's micro-batches.
  // With fp16 the seed is scale / A (DeepSpeed's backward(loss * scale)).
  // A sent activation is seeded by the gradient it gets back, which
  // carries both factors already.
  if (holdsLoss) {
    Type seedType = src.getArgument(firstSeed).getType();
    Value seed =
        fp16 ? b.create<LossScaleOp>(
                    loc, seedType, body->getArguments().back(),
                    b.getF64FloatAttr(initialScale()),
                    b.getF64FloatAttr(1.0 / double(gradAccum)))
                   .getResult()
             : b.create<FillOp>(loc, seedType,
                                b.getF64FloatAttr(1.0 / double(gradAccum)))
                   .getResult();
    seed.getDefiningOp()->setAttr(kGradAttrName, b.getUnitAttr()); // dloss
    map.map(src.getArgument(firstSeed), seed);
  }
  for (unsigned i = 0; i < numSent; ++i)
    map.map(src.getArgument(firstSentSeed + i),
            body->getArgument(firstSeed + numTrainable + i));
  for (Operation &op : src.without_terminator())
    b.clone(op, map);

  auto ret = cast<func::ReturnOp>(src.getTerminator());
  SmallVector<Value> outs;
  for (unsigned i = 0; i < numForwardResults; ++i)
    if (!(holdsLoss && i == 1 && !returnLogits))
      outs.push_back(map.lookup(ret.getOperand(i)));
  for (unsigned i = 0; i < numTrainable; ++i) {
    Value acc = body->getArgument(numParams + i);
    Value g = map.lookup(ret.getOperand(numForwardResults + i));
    outs.push_back(b.create<AddOp>(loc, acc.getType(), acc, g));
  }
  for (unsigned i = 0; i < numReceived; ++i)
    outs.push_back(
        map.lookup(ret.getOperand(numForwardResults + numTrainable + i)));
  b.create<func::ReturnOp>(loc, outs);
  // Logits the micro-step does not return: the dsc.split that cut a padded
  // vocabulary's real columns for the return (-dsc-pad-vocabulary) goes
  // too, or it would copy them and keep the loss from overwriting them.
  if (holdsLoss && !returnLogits)
    if (Operation *def = map.lookup(ret.getOperand(1)).getDefiningOp();
        def && isa<SplitOp>(def) && def->use_empty())
      def->erase();
  return micro;
}

func::FuncOp BuildTrainStepPass::buildApplyStep(ModuleOp module,
                                                ArrayRef<Param> params) {
  MLIRContext *ctx = &getContext();
  auto f32Scalar = RankedTensorType::get({}, Float32Type::get(ctx));
  auto stepType = RankedTensorType::get({}, IntegerType::get(ctx, 64));
  unsigned n = params.size();
  // Each parameter's state; the step takes them grouped by kind (in the
  // order the kinds first appear), each group in parameter order.
  SmallVector<SmallVector<std::pair<StateKind, RankedTensorType>>> stateTypes;
  SmallVector<StateKind> kinds;
  for (const Param &p : params) {
    stateTypes.push_back(stateOf(p));
    for (auto [kind, type] : stateTypes.back())
      if (!llvm::is_contained(kinds, kind))
        kinds.push_back(kind);
  }
  // stateArg[i][k]: the argument index of state k of parameter i.
  SmallVector<SmallVector<unsigned>> stateArg(n);
  for (unsigned i = 0; i < n; ++i)
    stateArg[i].resize(stateTypes[i].size());

  Signature args, results;
  for (const Param &p : params)
    args.addParam(ctx, p);
  for (const Param &p : params)
    args.add(ctx, p.type, StateKind::grad, p.name);
  auto addStates = [&](Signature &sig, bool recordArgs) {
    for (StateKind kind : kinds)
      for (unsigned i = 0; i < n; ++i)
        for (auto [k, state] : llvm::enumerate(stateTypes[i]))
          if (state.first == kind) {
            if (recordArgs)
              stateArg[i][k] = sig.types.size();
            sig.add(ctx, state.second, kind, params[i].name);
          }
  };
  addStates(args, true);
  const unsigned stepArg = args.types.size();
  args.add(ctx, stepType, StateKind::step, "step");
  if (fp16)
    args.add(ctx, scalerType(), StateKind::loss_scaler, "state");

  for (const Param &p : params)
    results.addParam(ctx, p);
  addStates(results, false);
  for (const Param &p : params)
    results.add(ctx, p.type, StateKind::grad, p.name);
  results.add(ctx, f32Scalar, StateKind::output, "grad_norm");
  results.add(ctx, f32Scalar, StateKind::output, "lr");
  if (fp16) {
    results.add(ctx, scalerType(), StateKind::loss_scaler, "state");
    results.add(ctx, f32Scalar, StateKind::output, "loss_scale");
    results.add(ctx, f32Scalar, StateKind::output, "skipped");
  }

  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  Location loc = module.getLoc();
  auto apply = mb.create<func::FuncOp>(
      loc, "apply_step", FunctionType::get(ctx, args.types, results.types));
  apply.setAllArgAttrs(args.attrs);
  apply.setAllResultAttrs(results.attrs);
  Block *body = apply.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(body);
  auto arg = [&](unsigned group, unsigned i) {
    return body->getArgument(group * n + i);
  };
  Value step = body->getArgument(stepArg);

  // Average over data-parallel ranks, then clip by the global norm. An
  // expert-parallel parameter (-dsc-expert-parallel) is held by the
  // data_outer ranks at one data_inner position, and its gradient already
  // sums the whole data_inner group's tokens: averaged over data_outer and
  // divided by the group's G ranks, it is the mean over all data ranks.
  const int64_t expertGroup = meshGroupSize(module, MeshAxis::data_inner);
  auto mean = ReduceKindAttr::get(ctx, ReduceKind::mean);
  SmallVector<Value> grads;
  for (unsigned i = 0; i < n; ++i) {
    if (!isExpertParam(module, params[i].name)) {
      grads.push_back(
          b.create<AllReduceOp>(loc, params[i].type, arg(1, i), mean));
      continue;
    }
    Value g = b.create<AllReduceOp>(
        loc, params[i].type, arg(1, i), mean,
        MeshAxisAttr::get(ctx, MeshAxis::data_outer));
    grads.push_back(b.create<ScaleOp>(loc, params[i].type, g,
                                      b.getF64FloatAttr(1.0 / expertGroup)));
  }
  // A gradient sliced over the tensor axis (-dsc-tensor-parallel) has its
  // squares summed over that group; a replicated one counts once. A
  // pipeline stage's norm sums its squares with the other stages'; the
  // last stage leaves out its copy of a tied parameter, which the first
  // stage counts (the driver has summed the two copies' gradients).
  const int64_t pipelineStage = pipelineStageOf(module);
  DenseSet<StringRef> tiedCopies;
  if (pipelineStage > 0)
    if (auto tied =
            module->getAttrOfType<ArrayAttr>(kPipelineTiedParamsAttrName))
      for (auto name : tied.getAsRange<StringAttr>())
        tiedCopies.insert(name.getValue());
  // Likewise each expert-parallel rank's experts count on that rank alone.
  SmallVector<Value> replicated, sliced, experts;
  for (unsigned i = 0; i < n; ++i)
    if (!tiedCopies.contains(params[i].name))
      (tensorSliceOf(module, params[i].name) ? sliced
       : isExpertParam(module, params[i].name) ? experts
                                               : replicated)
          .push_back(grads[i]);
  auto tensorAxis = MeshAxisAttr::get(ctx, MeshAxis::tensor);
  auto pipelineAxis = MeshAxisAttr::get(ctx, MeshAxis::pipeline);
  Value norm = b.create<GlobalNormOp>(loc, f32Scalar, replicated);
  if (!sliced.empty()) {
    Value part = b.create<NormAllReduceOp>(
        loc, f32Scalar, b.create<GlobalNormOp>(loc, f32Scalar, sliced),
        tensorAxis);
    norm = b.create<GlobalNormOp>(loc, f32Scalar, ValueRange{norm, part});
  }
  if (!experts.empty()) {
    Value part = b.create<NormAllReduceOp>(
        loc, f32Scalar, b.create<GlobalNormOp>(loc, f32Scalar, experts),
        MeshAxisAttr::get(ctx, MeshAxis::data_inner));
    norm = b.create<GlobalNormOp>(loc, f32Scalar, ValueRange{norm, part});
  }
  if (pipelineStage >= 0)
    norm = b.create<NormAllReduceOp>(loc, f32Scalar, norm, pipelineAxis);
  // fp16: overflow check, then DeepSpeed's unscale_and_clip_grads (the
  // clipping sees the unscaled norm; grad_norm reports it).
  Value skip, lossScaleValue, scale;
  if (fp16) {
    Value scalerState = body->getArguments().back();
    skip = b.create<CheckFiniteOp>(loc, f32Scalar, grads);
    // Every rank skips if any rank's slice or stage overflowed.
    if (!sliced.empty())
      skip = b.create<AllReduceOp>(loc, f32Scalar, skip,
                                   ReduceKindAttr::get(ctx, ReduceKind::max),
                                   tensorAxis);
    if (pipelineStage >= 0)
      skip = b.create<AllReduceOp>(loc, f32Scalar, skip,
                                   ReduceKindAttr::get(ctx, ReduceKind::max),
                                   pipelineAxis);
    lossScaleValue = b.create<LossScaleOp>(
        loc, f32Scalar, scalerState, b.getF64FloatAttr(initialScale()),
        b.getF64FloatAttr(1.0));
    auto unscale = b.create<UnscaleClipOp>(
        loc, TypeRange{f32Scalar, f32Scalar}, norm, lossScaleValue,
        b.getF64FloatAttr(gradClip));
    scale = unscale.getGradScale();
    norm = unscale.getNorm();
  } else {
    scale = gradClip > 0
                ? b.create<ClipCoefficientOp>(loc, f32Scalar, norm,
                                              b.getF64FloatAttr(gradClip))
                      .getResult()
                : b.create<FillOp>(loc, f32Scalar, b.getF64FloatAttr(1.0))
                      .getResult();
  }
  auto f = [&](double v) { return b.getF64FloatAttr(v); };
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  Value lrValue = b.create<LrScheduleOp>(
      loc, f32Scalar, step,
      LrScheduleKindAttr::get(ctx, schedule), f(lr),
      f(warmupMinLr), f(warmupMaxLr), i64(warmupNumSteps), i64(totalNumSteps),
      WarmupTypeAttr::get(ctx, warmupType), f(warmupMinRatio),
      f(cosMinRatio));

  SmallVector<Value> newParams;
  SmallVector<SmallVector<Value>> newState(n);
  for (unsigned i = 0; i < n; ++i) {
    // Biases and norm weights are not decayed.
    double wd = params[i].type.getRank() >= 2 ? double(weightDecay) : 0.0;
    SmallVector<Value> state;
    for (unsigned a : stateArg[i])
      state.push_back(body->getArgument(a));
    OptimizerOpInterface update =
        createOptimizerUpdate(b, loc, arg(0, i), grads[i], state, lrValue,
                              step, scale, wd, skip, params[i]);
    newParams.push_back(update.getNewParamResult());
    newState[i].append(update.getNewStateResults().begin(),
                       update.getNewStateResults().end());
  }

  SmallVector<Value> outs(newParams);
  for (StateKind kind : kinds) // as the arguments
    for (unsigned i = 0; i < n; ++i)
      for (auto [k, state] : llvm::enumerate(stateTypes[i]))
        if (state.first == kind)
          outs.push_back(newState[i][k]);
  for (const Param &p : params) // Accumulators restart at zero.
    outs.push_back(b.create<FillOp>(loc, p.type, b.getF64FloatAttr(0.0)));
  outs.append({norm, lrValue});
  if (fp16) {
    Value next = b.create<UpdateLossScaleOp>(
        loc, scalerType(), body->getArguments().back(), skip,
        b.getBoolAttr(lossScale == 0), b.getF64FloatAttr(initialScale()),
        b.getI64IntegerAttr(lossScaleWindow), b.getI64IntegerAttr(hysteresis),
        b.getF64FloatAttr(minLossScale),
        b.getBoolAttr(consecutiveHysteresis));
    outs.append({next, lossScaleValue, skip});
  }
  b.create<func::ReturnOp>(loc, outs);
  return apply;
}

OptimizerOpInterface BuildTrainStepPass::createOptimizerUpdate(
    OpBuilder &b, Location loc, Value param, Value grad, ValueRange state,
    Value lr, Value step, Value gradScale, double weightDecay, Value skip,
    const Param &p) {
  auto f = [&](double v) { return b.getF64FloatAttr(v); };
  SmallVector<Type> types(1 + state.size(), param.getType());
  for (auto [k, s] : llvm::enumerate(state))
    types[k + 1] = s.getType();
  switch (optimizer) {
  case TrainStepOptimizer::Adam8bit:
  case TrainStepOptimizer::AdamW8bit:
    // bitsandbytes' two classes differ only in their default weight decay,
    // which is decoupled in both. Small tensors keep 32-bit state: AdamW.
    if (quantized(p))
      return b.create<Adam8bitOp>(loc, types, param, grad, state[0], state[1],
                                  state[2], state[3], lr, step, gradScale,
                                  f(beta1), f(beta2), f(eps), f(weightDecay),
                                  skip);
    return b.create<AdamOp>(loc, types, param, grad, state[0], state[1], lr,
                            step, gradScale, f(beta1), f(beta2), f(eps),
                            f(weightDecay), b.getBoolAttr(true),
                            b.getBoolAttr(true), skip);
  case TrainStepOptimizer::Adafactor:
    return b.create<AdafactorOp>(
        loc, param.getType(), ArrayRef<Type>(types).drop_front(), param, grad,
        state, lr, step, gradScale, f(adafactorEps1), f(adafactorEps2),
        f(clipThreshold), f(decayRate), b.getBoolAttr(firstMoment), f(beta1),
        f(weightDecay), b.getBoolAttr(scaleParameter),
        b.getBoolAttr(relativeStep), b.getBoolAttr(warmupInit), skip);
  case TrainStepOptimizer::Sgd:
    return b.create<SgdOp>(loc, types, param, grad, state[0], lr, step,
                           gradScale, f(momentum), f(dampening), f(weightDecay),
                           b.getBoolAttr(nesterov), skip);
  case TrainStepOptimizer::Lamb:
    return b.create<LambOp>(loc, types, param, grad, state[0], state[1], lr,
                            step, gradScale, f(beta1), f(beta2), f(eps),
                            f(weightDecay), b.getBoolAttr(biasCorrection),
                            f(maxCoeff), f(minCoeff), skip);
  case TrainStepOptimizer::Adam:
  case TrainStepOptimizer::AdamW:
    return b.create<AdamOp>(
        loc, types, param, grad, state[0], state[1], lr, step, gradScale,
        f(beta1), f(beta2), f(eps), f(weightDecay),
        b.getBoolAttr(optimizer == TrainStepOptimizer::AdamW),
        b.getBoolAttr(biasCorrection), skip);
  }
  llvm_unreachable("unknown optimizer");
}

func::FuncOp BuildTrainStepPass::buildEvalStep(ModuleOp module,
                                               unsigned numParams) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward) {
    module.emitError("dsc-build-train-step: no @forward to evaluate");
    return {};
  }
  // @eval_step shares the parameters of @micro_step: @forward must still
  // have the signature @forward_grad was built from.
  FunctionType type = forward.getFunctionType();
  bool matches = !forward.isExternal() &&
                 type.getNumInputs() == numParams + 2 &&
                 type.getNumResults() == 2;
  for (unsigned i = 0; matches && i < numParams; ++i)
    matches = bool(forward.getArgAttrOfType<ParamAttr>(i, kParamAttrName));
  if (!matches) {
    forward.emitError("dsc-build-train-step: @forward must take the ")
        << numParams << " parameters of @forward_grad, then input_ids and "
        << "targets, and return (loss, logits)";
    return {};
  }
  MLIRContext *ctx = &getContext();
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto eval = cast<func::FuncOp>(mb.clone(*forward));
  eval.setName("eval_step");
  // Evaluation runs without dropout.
  SmallVector<StochasticOpInterface> stochastic;
  eval.walk([&](StochasticOpInterface op) { stochastic.push_back(op); });
  IRRewriter rewriter(ctx);
  for (StochasticOpInterface op : stochastic) {
    rewriter.setInsertionPoint(op);
    op.disableDropout(rewriter);
  }
  auto stateAttr = [&](StateKind kind, StringRef name) {
    return StateAttr::get(ctx, kind, name);
  };
  // All arguments' attributes at once (per-argument setArgAttr is
  // quadratic in the parameter count).
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < eval.getNumArguments(); ++i) {
    NamedAttrList attrs(eval.getArgAttrDict(i));
    if (i < numParams)
      attrs.set(kStateAttrName,
                stateAttr(StateKind::param,
                          eval.getArgAttrOfType<ParamAttr>(i, kParamAttrName)
                              .getName()));
    else if (i == numParams)
      attrs.set(kStateAttrName, stateAttr(StateKind::input_ids, "input_ids"));
    else if (i == numParams + 1)
      attrs.set(kStateAttrName, stateAttr(StateKind::targets, "targets"));
    argAttrs.push_back(attrs.getDictionary(ctx));
  }
  eval.setAllArgAttrs(argAttrs);
  eval.setResultAttr(0, kStateAttrName, stateAttr(StateKind::output, "loss"));
  eval.setResultAttr(1, kStateAttrName,
                     stateAttr(StateKind::output, "logits"));
  return eval;
}
