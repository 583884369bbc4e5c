//===- SplitStageStep.cpp - A pipeline stage's forward and backward ------===//
//
// -dsc-split-stage-step (see Passes.td): a pipeline schedule runs a
// micro-batch's forward and backward at different times, with other
// micro-batches' in between, so a stage's @micro_step is cut in two. The
// forward is what its forward results depend on; what the backward reads of
// it is saved (one buffer per value, which the driver keeps per micro-batch
// in flight), as Megatron and DeepSpeed keep a stage's activations between
// its forward and backward passes. An interleaved stage's model chunks are
// cut apart the same way, each op going with the chunk whose boundary
// values or forward it depends on (PipelineChunks.h).
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PipelineChunks.h"

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

/// The chunk whose forward makes a result of @micro_step: the loss and
/// logits the last one's, `stage_output.k` chunk k's; none for a backward
/// result.
std::optional<int64_t> forwardResultChunk(StateAttr state, int64_t chunks) {
  if (!state || state.getKind() != StateKind::output)
    return std::nullopt;
  if (state.getName() == "loss" || state.getName() == "logits")
    return chunks - 1;
  return chunkOfName(state.getName(), "stage_output");
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

private:
  /// Builds chunk `chunk`'s @stage_forward (at the module's end) from its
  /// forward ops `forwardOps`, and its backward @micro_step (before
  /// `micro`) from `micro`'s other ops. `forward` holds every chunk's
  /// forward ops; `isForwardResult` says which results they make.
  LogicalResult splitChunk(func::FuncOp micro, int64_t chunk,
                           const DenseSet<Operation *> &forwardOps,
                           const DenseSet<Operation *> &forward,
                           const DenseMap<Operation *, int64_t> &chunkOf,
                           ArrayRef<int64_t> argChunk,
                           ArrayRef<int64_t> resultChunk,
                           ArrayRef<bool> isForwardResult);
};

} // namespace

void SplitStageStepPass::runOnOperation() {
  ModuleOp module = getOperation();
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
  const int64_t chunks = pipelineChunksOf(module);
  Block &body = micro.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // Each forward result's chunk, and each chunk's forward: every op its
  // forward results depend on.
  SmallVector<int64_t> resultChunk(micro.getNumResults(), kNoChunk);
  SmallVector<bool> isForwardResult(micro.getNumResults(), false);
  SmallVector<DenseSet<Operation *>> chunkForward(static_cast<size_t>(chunks));
  for (unsigned i = 0; i < micro.getNumResults(); ++i) {
    std::optional<int64_t> k = forwardResultChunk(
        micro.getResultAttrOfType<StateAttr>(i, kStateAttrName), chunks);
    if (!k)
      continue;
    if (*k < 0 || *k >= chunks) {
      micro.emitError("dsc-split-stage-step: result #")
          << i << " names chunk " << *k << " of " << chunks;
      return signalPassFailure();
    }
    isForwardResult[i] = true;
    resultChunk[i] = *k;
    SmallVector<Value> work = {ret.getOperand(i)};
    while (!work.empty()) {
      Operation *def = work.pop_back_val().getDefiningOp();
      if (!def || !chunkForward[*k].insert(def).second)
        continue;
      work.append(def->getOperands().begin(), def->getOperands().end());
    }
  }
  if (!llvm::is_contained(isForwardResult, true)) {
    micro.emitError("dsc-split-stage-step: @micro_step returns no forward "
                    "result (loss, logits or stage_output)");
    return signalPassFailure();
  }

  // Label every op with its chunk: a forward op its chunk's (none, if two
  // chunks need it and each can make it again), joined with its operands'.
  SmallVector<int64_t> argChunk;
  for (unsigned i = 0; i < micro.getNumArguments(); ++i)
    argChunk.push_back(pipelineChunkOfArgument(micro, i));
  DenseSet<Operation *> forward;
  DenseMap<Operation *, int64_t> chunkOf =
      labelPipelineChunks(micro, [&](Operation *op) {
        int64_t label = kNoChunk;
        for (int64_t k = 0; k < chunks; ++k)
          if (chunkForward[k].contains(op))
            label = joinPipelineChunks(label, k);
        if (label != kNoChunk)
          forward.insert(op);
        return label == kMixedChunks && recomputable(op) ? kNoChunk : label;
      });
  for (Operation &op : body.without_terminator())
    if (chunkOf.lookup(&op) == kMixedChunks) {
      op.emitOpError("dsc-split-stage-step: reads the values of two model "
                     "chunks; a pipeline stage's chunks must not share work");
      return signalPassFailure();
    }
  // Each backward result belongs to the chunk of the value it returns (a
  // gradient that reads no chunk's value, a zero, goes with chunk 0).
  for (unsigned i = 0; i < micro.getNumResults(); ++i) {
    if (resultChunk[i] != kNoChunk)
      continue;
    Value v = ret.getOperand(i);
    int64_t k = isa<BlockArgument>(v)
                    ? argChunk[cast<BlockArgument>(v).getArgNumber()]
                    : chunkOf.lookup(v.getDefiningOp());
    resultChunk[i] = k == kNoChunk ? 0 : k;
  }

  for (int64_t k = 0; k < chunks; ++k)
    if (failed(splitChunk(micro, k, chunkForward[k], forward, chunkOf,
                          argChunk, resultChunk, isForwardResult)))
      return signalPassFailure();
  // What earlier passes recorded on the step (-dsc-remat's recompute
  // FLOPs) stays on @micro_step.
  auto backward = module.lookupSymbol<func::FuncOp>("micro_step");
  for (NamedAttribute attr : micro->getDiscardableAttrs())
    backward->setAttr(attr.getName(), attr.getValue());
  micro.erase();
}

LogicalResult SplitStageStepPass::splitChunk(
    func::FuncOp micro, int64_t chunk, const DenseSet<Operation *> &forwardOps,
    const DenseSet<Operation *> &forward,
    const DenseMap<Operation *, int64_t> &chunkOf, ArrayRef<int64_t> argChunk,
    ArrayRef<int64_t> resultChunk, ArrayRef<bool> isForwardResult) {
  MLIRContext *ctx = &getContext();
  ModuleOp module = getOperation();
  Block &body = micro.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  auto mine = [&](Operation *op) {
    int64_t k = chunkOf.lookup(op);
    return k == chunk || k == kNoChunk;
  };

  // The chunk's results, and the ops of its backward: the non-forward ops
  // its backward results depend on.
  SmallVector<unsigned> forwardResults, backwardResults;
  for (unsigned i = 0; i < micro.getNumResults(); ++i)
    if (resultChunk[i] == chunk)
      (isForwardResult[i] ? forwardResults : backwardResults).push_back(i);
  DenseSet<Operation *> backwardOps;
  SmallVector<Value> work;
  for (unsigned i : backwardResults)
    work.push_back(ret.getOperand(i));
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || forward.contains(def) || !mine(def) ||
        !backwardOps.insert(def).second)
      continue;
    work.append(def->getOperands().begin(), def->getOperands().end());
  }

  // What the backward reads of the forward: recomputed or saved.
  llvm::SetVector<Value> saved;
  llvm::SetVector<Operation *> recomputed;
  for (Operation &op : body.without_terminator()) {
    if (!backwardOps.contains(&op))
      continue;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !forward.contains(def))
        continue;
      if (recomputable(def))
        recomputed.insert(def);
      else if (forwardOps.contains(def))
        saved.insert(operand);
      else
        return op.emitOpError("dsc-split-stage-step: the backward of chunk ")
               << chunk << " reads a forward value of another chunk";
    }
  }
  for (unsigned i : backwardResults)
    if (Operation *def = ret.getOperand(i).getDefiningOp();
        def && forward.contains(def))
      return micro.emitError("dsc-split-stage-step: result #")
             << i << " is a forward value but not a forward result";

  // @stage_forward: the forward ops, returning the forward results and the
  // saved values.
  auto savedState = [&](unsigned n) {
    return DictionaryAttr::get(
        ctx, {NamedAttribute(
                 StringAttr::get(ctx, kStateAttrName),
                 StateAttr::get(ctx, StateKind::activation,
                                pipelineChunkName(
                                    "saved/" + std::to_string(n), chunk)))});
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
  auto newFunction = [&](OpBuilder &at, StringRef name,
                         ArrayRef<BlockArgument> reads,
                         ArrayRef<Type> extraArgs,
                         ArrayRef<DictionaryAttr> extraAttrs,
                         ArrayRef<Type> results,
                         ArrayRef<DictionaryAttr> resultAttrs) {
    SmallVector<Type> argTypes;
    SmallVector<DictionaryAttr> argAttrs;
    for (BlockArgument arg : reads) {
      argTypes.push_back(arg.getType());
      argAttrs.push_back(micro.getArgAttrDict(arg.getArgNumber()));
    }
    llvm::append_range(argTypes, extraArgs);
    llvm::append_range(argAttrs, extraAttrs);
    auto fn = at.create<func::FuncOp>(
        micro.getLoc(), pipelineChunkName(name, chunk),
        FunctionType::get(ctx, argTypes, results));
    fn.setAllArgAttrs(argAttrs);
    fn.setAllResultAttrs(resultAttrs);
    fn.addEntryBlock();
    return fn;
  };

  // The forward's arguments: those of @micro_step it reads, in order.
  SmallVector<BlockArgument> forwardReads;
  for (BlockArgument arg : body.getArguments())
    if (llvm::any_of(arg.getUsers(),
                     [&](Operation *user) { return forwardOps.contains(user); }))
      forwardReads.push_back(arg);
  OpBuilder atEnd = OpBuilder::atBlockEnd(module.getBody());
  func::FuncOp stageForward =
      newFunction(atEnd, "stage_forward", forwardReads, {}, {}, resultTypes,
                  resultAttrs);
  IRMapping map;
  for (auto [arg, mapped] :
       llvm::zip(forwardReads, stageForward.getArguments()))
    map.map(arg, mapped);
  OpBuilder fb = OpBuilder::atBlockEnd(&stageForward.getBody().front());
  for (Operation &op : body.without_terminator())
    if (forwardOps.contains(&op))
      fb.clone(op, map);
  SmallVector<Value> mappedOuts;
  for (Value v : forwardOuts)
    mappedOuts.push_back(map.lookupOrDefault(v));
  fb.create<func::ReturnOp>(ret.getLoc(), mappedOuts);

  // @micro_step, the backward: @micro_step's arguments but other chunks'
  // boundary values (the driver fills the tokens' buffers whether or not a
  // chunk reads them), then the saved values; the recomputed ones are made
  // again at the top.
  SmallVector<BlockArgument> backwardReads;
  for (BlockArgument arg : body.getArguments())
    if (argChunk[arg.getArgNumber()] == kNoChunk ||
        argChunk[arg.getArgNumber()] == chunk)
      backwardReads.push_back(arg);
  SmallVector<Type> savedTypes, backwardTypes;
  for (Value v : saved)
    savedTypes.push_back(v.getType());
  SmallVector<DictionaryAttr> backwardAttrs;
  for (unsigned i : backwardResults) {
    backwardTypes.push_back(micro.getFunctionType().getResult(i));
    backwardAttrs.push_back(micro.getResultAttrDict(i));
  }
  OpBuilder beforeMicro(micro);
  func::FuncOp backward =
      newFunction(beforeMicro, "micro_step", backwardReads, savedTypes,
                  savedAttrs, backwardTypes, backwardAttrs);
  Block &entry = backward.getBody().front();
  IRMapping bmap;
  for (auto [arg, mapped] : llvm::zip(backwardReads, entry.getArguments()))
    bmap.map(arg, mapped);
  for (auto [v, mapped] : llvm::zip(
           saved, entry.getArguments().drop_front(backwardReads.size())))
    bmap.map(v, mapped);
  OpBuilder bb = OpBuilder::atBlockEnd(&entry);
  for (Operation *def : recomputed)
    bb.clone(*def, bmap);
  for (Operation &op : body.without_terminator())
    if (backwardOps.contains(&op))
      bb.clone(op, bmap);
  SmallVector<Value> backwardOuts;
  for (unsigned i : backwardResults)
    backwardOuts.push_back(bmap.lookupOrDefault(ret.getOperand(i)));
  bb.create<func::ReturnOp>(ret.getLoc(), backwardOuts);
  return success();
}
