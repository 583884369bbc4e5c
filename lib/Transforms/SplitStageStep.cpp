//===- SplitStageStep.cpp - A pipeline stage's forward and backward ------===//
//
// -dsc-split-stage-step (see Passes.td): a pipeline schedule runs a
// micro-batch's forward and backward at different times, with other
// micro-batches' in between, so a stage's @micro_step is cut in two. The
// forward is what its forward results depend on; what the backward reads of
// it is saved (one buffer per value, which the driver keeps per micro-batch
// in flight), as Megatron and DeepSpeed keep a stage's activations between
// its forward and backward passes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCSPLITSTAGESTEP
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

StateAttr resultState(func::FuncOp fn, unsigned i) {
  return fn.getResultAttrOfType<StateAttr>(i, kStateAttrName);
}

/// The step's forward results: the loss and logits (last stage) or the
/// activation the stage sends on.
bool isForwardResult(StateAttr state) {
  return state && state.getKind() == StateKind::output &&
         (state.getName() == "loss" || state.getName() == "logits" ||
          state.getName() == "stage_output");
}

/// Whether the backward can make `op` again instead of saving its results:
/// no effects and only the function's arguments as operands (a parameter's
/// half copy, positions, a fill).
bool recomputable(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
         llvm::all_of(op->getOperands(),
                      [](Value v) { return isa<BlockArgument>(v); });
}

struct SplitStageStepPass
    : mlir::dsc::impl::DscSplitStageStepBase<SplitStageStepPass> {
  using DscSplitStageStepBase::DscSplitStageStepBase;

  void runOnOperation() override;
};

} // namespace

void SplitStageStepPass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  if (pipelineStageOf(module) < 0)
    return;
  if (module.lookupSymbol("stage_forward")) {
    module.emitError("dsc-split-stage-step: the module has a @stage_forward "
                     "already");
    return signalPassFailure();
  }
  auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
  if (!micro || micro.isExternal() || !micro.getBody().hasOneBlock()) {
    module.emitError("dsc-split-stage-step: no @micro_step with one block; "
                     "run -dsc-build-train-step first");
    return signalPassFailure();
  }
  Block &body = micro.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // The forward: every op a forward result depends on.
  SmallVector<unsigned> forwardResults;
  for (unsigned i = 0; i < micro.getNumResults(); ++i)
    if (isForwardResult(resultState(micro, i)))
      forwardResults.push_back(i);
  if (forwardResults.empty()) {
    micro.emitError("dsc-split-stage-step: @micro_step returns no forward "
                    "result (loss, logits or stage_output)");
    return signalPassFailure();
  }
  DenseSet<Operation *> forward;
  SmallVector<Value> work;
  for (unsigned i : forwardResults)
    work.push_back(ret.getOperand(i));
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !forward.insert(def).second)
      continue;
    work.append(def->getOperands().begin(), def->getOperands().end());
  }

  // What the backward reads of the forward: recomputed or saved.
  llvm::SetVector<Value> saved;
  llvm::SetVector<Operation *> recomputed;
  for (Operation &op : body.without_terminator()) {
    if (forward.contains(&op))
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !forward.contains(def))
        continue;
      if (recomputable(def))
        recomputed.insert(def);
      else
        saved.insert(operand);
    }
  }

  // @stage_forward: the forward ops, returning the forward results and the
  // saved values.
  auto savedState = [&](unsigned k) {
    return DictionaryAttr::get(
        ctx, {NamedAttribute(
                 StringAttr::get(ctx, kStateAttrName),
                 StateAttr::get(ctx, StateKind::activation,
                                "saved/" + std::to_string(k)))});
  };
  // Each saved value's state: a forward result's own (the last stage's
  // logits, which its loss gradient reads), else a new activation.
  SmallVector<Type> resultTypes;
  SmallVector<DictionaryAttr> resultAttrs;
  SmallVector<Value> forwardOuts;
  for (unsigned i : forwardResults) {
    resultTypes.push_back(micro.getFunctionType().getResult(i));
    resultAttrs.push_back(micro.getResultAttrDict(i));
    forwardOuts.push_back(ret.getOperand(i));
  }
  SmallVector<DictionaryAttr> savedAttrs;
  for (Value v : saved) {
    auto asResult = llvm::find(forwardOuts, v);
    if (asResult != forwardOuts.end()) {
      savedAttrs.push_back(resultAttrs[asResult - forwardOuts.begin()]);
      continue;
    }
    savedAttrs.push_back(savedState(unsigned(resultTypes.size() -
                                             forwardResults.size())));
    resultTypes.push_back(v.getType());
    resultAttrs.push_back(savedAttrs.back());
    forwardOuts.push_back(v);
  }
  // Its arguments: those the forward reads, in order.
  SmallVector<BlockArgument> reads;
  for (BlockArgument arg : body.getArguments())
    if (llvm::any_of(arg.getUsers(),
                     [&](Operation *user) { return forward.contains(user); }))
      reads.push_back(arg);
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> readAttrs;
  for (BlockArgument arg : reads) {
    argTypes.push_back(arg.getType());
    readAttrs.push_back(micro.getArgAttrDict(arg.getArgNumber()));
  }
  OpBuilder mb = OpBuilder::atBlockEnd(module.getBody());
  auto stageForward = mb.create<func::FuncOp>(
      micro.getLoc(), "stage_forward",
      FunctionType::get(ctx, argTypes, resultTypes));
  stageForward.setAllArgAttrs(readAttrs);
  stageForward.setAllResultAttrs(resultAttrs);
  Block *entry = stageForward.addEntryBlock();
  IRMapping map;
  for (auto [arg, mapped] : llvm::zip(reads, entry->getArguments()))
    map.map(arg, mapped);
  OpBuilder fb = OpBuilder::atBlockEnd(entry);
  for (Operation &op : body.without_terminator())
    if (forward.contains(&op))
      fb.clone(op, map);
  SmallVector<Value> mappedOuts;
  for (Value v : forwardOuts)
    mappedOuts.push_back(map.lookupOrDefault(v));
  fb.create<func::ReturnOp>(ret.getLoc(), mappedOuts);

  // @micro_step becomes the backward: the saved values are arguments, the
  // recomputed ones are made again at the top.
  OpBuilder bb = OpBuilder::atBlockBegin(&body);
  for (Operation *def : recomputed) {
    Operation *copy = bb.clone(*def);
    for (auto [from, to] : llvm::zip(def->getResults(), copy->getResults()))
      from.replaceUsesWithIf(to, [&](OpOperand &use) {
        return !forward.contains(use.getOwner()) && use.getOwner() != ret;
      });
  }
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < micro.getNumArguments(); ++i)
    argAttrs.push_back(micro.getArgAttrDict(i));
  for (auto [savedValue, attrs] : llvm::zip(saved, savedAttrs)) {
    Value v = savedValue;
    BlockArgument arg = body.addArgument(v.getType(), v.getLoc());
    v.replaceUsesWithIf(arg, [&](OpOperand &use) {
      return !forward.contains(use.getOwner()) && use.getOwner() != ret;
    });
    argAttrs.push_back(attrs);
  }
  SmallVector<Value> backwardOuts;
  SmallVector<Type> backwardTypes;
  SmallVector<DictionaryAttr> backwardAttrs;
  for (unsigned i = 0; i < micro.getNumResults(); ++i) {
    if (llvm::is_contained(forwardResults, i))
      continue;
    backwardOuts.push_back(ret.getOperand(i));
    backwardTypes.push_back(micro.getFunctionType().getResult(i));
    backwardAttrs.push_back(micro.getResultAttrDict(i));
  }
  OpBuilder(ret).create<func::ReturnOp>(ret.getLoc(), backwardOuts);
  ret.erase();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (forward.contains(&op)) {
      if (!op.use_empty()) {
        op.emitOpError("dsc-split-stage-step: a forward op is still used by "
                       "the backward");
        return signalPassFailure();
      }
      op.erase();
    }
  micro.setFunctionType(
      FunctionType::get(ctx, body.getArgumentTypes(), backwardTypes));
  micro.setAllArgAttrs(argAttrs);
  micro.setAllResultAttrs(backwardAttrs);
}
