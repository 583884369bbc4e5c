//===- Autodiff.cpp - Reverse-mode differentiation of @forward -----------===//
//
// Builds @forward_grad: a copy of the forward function followed by the
// backward graph. The pass is generic: it finds the values that depend on a
// parameter ("active" values), walks the ops backwards from the loss and asks
// each op's GradientOpInterface for its operand gradients, summing the
// contributions of values with several uses.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCAUTODIFF
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct AutodiffPass : mlir::dsc::impl::DscAutodiffBase<AutodiffPass> {
  using DscAutodiffBase::DscAutodiffBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward) {
      module.emitError("dsc-autodiff: no function @") << function;
      return signalPassFailure();
    }
    if (failed(differentiate(forward)))
      signalPassFailure();
  }

  LogicalResult differentiate(func::FuncOp forward);
};

} // namespace

LogicalResult AutodiffPass::differentiate(func::FuncOp forward) {
  if (forward.isExternal() || !forward.getBody().hasOneBlock())
    return forward.emitError("dsc-autodiff: @")
           << forward.getName() << " must have a body of exactly one block";
  FunctionType fnType = forward.getFunctionType();
  // A pipeline stage's forward may end in the activations it sends (one
  // per sending chunk, after the loss and logits if it has them): their
  // gradients, received from the next stage, seed the backward as the
  // loss gradient does.
  const bool holdsLoss = holdsPipelineLoss(forward);
  const unsigned numSent = pipelineSendingChunks(forward).size();
  const unsigned numSeeds = numSent + (holdsLoss ? 1 : 0);
  auto f32 = Float32Type::get(&getContext());
  if (fnType.getNumResults() < numSeeds ||
      (!holdsLoss && fnType.getNumResults() != numSent))
    return forward.emitError("dsc-autodiff: @")
           << forward.getName() << " returns " << fnType.getNumResults()
           << " values; its pipeline stage returns "
           << (holdsLoss ? "the loss and what follows it, then " : "")
           << numSent << " activation" << (numSent == 1 ? "" : "s")
           << " it sends";
  if (holdsLoss && fnType.getResult(0) != RankedTensorType::get({}, f32))
    return forward.emitError("dsc-autodiff: result #0 of @")
           << forward.getName() << " must be the scalar loss tensor<f32>";
  const unsigned firstSent = fnType.getNumResults() - numSent;
  for (unsigned i = firstSent; i < fnType.getNumResults(); ++i) {
    auto sent = dyn_cast<RankedTensorType>(fnType.getResult(i));
    if (!sent || sent.getElementType() != f32)
      return forward.emitError("dsc-autodiff: result #")
             << i << " of @" << forward.getName()
             << " must be an f32 activation its pipeline stage sends";
  }

  // @forward_grad starts as a clone of @forward with trailing seeds: %dloss,
  // then the gradient of each sent activation.
  OpBuilder moduleBuilder(forward);
  moduleBuilder.setInsertionPointAfter(forward);
  func::FuncOp grad = cast<func::FuncOp>(moduleBuilder.clone(*forward));
  std::string gradName = (forward.getName() + "_grad").str();
  if (SymbolTable::lookupSymbolIn(getOperation(), gradName))
    return forward.emitError("dsc-autodiff: @") << gradName
                                                << " already exists";
  grad.setName(gradName);
  Block &body = grad.getBody().front();
  SmallVector<std::pair<unsigned, Value>> seeds; // result, its gradient
  if (holdsLoss)
    seeds.push_back({0u, body.addArgument(fnType.getResult(0),
                                          forward.getLoc())});
  for (unsigned i = firstSent; i < fnType.getNumResults(); ++i)
    seeds.push_back({i, body.addArgument(fnType.getResult(i),
                                         forward.getLoc())});

  // Parameters are the arguments carrying dsc.param; frozen ones (dsc.frozen)
  // are constants here.
  SmallVector<BlockArgument> params;
  for (BlockArgument arg : body.getArguments().drop_back(numSeeds))
    if (grad.getArgAttr(arg.getArgNumber(), kParamAttrName) &&
        !grad.getArgAttr(arg.getArgNumber(), kFrozenAttrName))
      params.push_back(arg);

  // A pipeline stage's received activation (dsc.pipeline_input) is
  // differentiated as well: its gradient goes back to the previous stage.
  SmallVector<BlockArgument> stageInputs;
  for (BlockArgument arg : body.getArguments().drop_back(numSeeds))
    if (grad.getArgAttr(arg.getArgNumber(), kPipelineInputAttrName))
      stageInputs.push_back(arg);

  // Active values: those that depend on a parameter or a received
  // activation.
  llvm::DenseSet<Value> active(params.begin(), params.end());
  active.insert(stageInputs.begin(), stageInputs.end());
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  SmallVector<Operation *> forwardOps;
  for (Operation &op : body.without_terminator()) {
    forwardOps.push_back(&op);
    if (llvm::any_of(op.getOperands(),
                     [&](Value v) { return active.contains(v); }))
      active.insert(op.getResults().begin(), op.getResults().end());
  }

  // Reverse sweep, emitting backward ops just before the return.
  OpBuilder b(ret);
  DenseMap<Value, Value> grads;
  auto accumulate = [&](Value v, Value g, Location loc) {
    auto [it, inserted] = grads.try_emplace(v, g);
    if (!inserted)
      it->second = b.create<AddOp>(loc, v.getType(), it->second, g);
  };
  for (auto [result, seed] : seeds)
    accumulate(ret.getOperand(result), seed, forward.getLoc());
  for (Operation *op : llvm::reverse(forwardOps)) {
    if (!llvm::any_of(op->getOperands(),
                      [&](Value v) { return active.contains(v); }))
      continue;
    SmallVector<Value> resultGrads;
    for (Value r : op->getResults())
      resultGrads.push_back(grads.lookup(r));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;
    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitOpError("lies between the parameters and the loss but "
                             "has no gradient rule");
    SmallVector<Value> operandGrads(op->getNumOperands());
    Operation *last = ret->getPrevNode();
    rule.buildGradient(b, resultGrads, operandGrads);
    for (auto [operand, g] : llvm::zip(op->getOperands(), operandGrads))
      if (g && active.contains(operand))
        accumulate(operand, g, op->getLoc());
    // Provenance for the memory report: backward ops carry dsc.grad and
    // the dsc.layer of the op they differentiate.
    for (Operation *o = last->getNextNode(); o != ret; o = o->getNextNode()) {
      o->setAttr(kGradAttrName, b.getUnitAttr());
      if (Attribute layer = op->getAttr(kLayerAttrName))
        o->setAttr(kLayerAttrName, layer);
    }
  }

  // Return the forward results followed by one gradient per trainable
  // parameter, then one per received activation.
  SmallVector<Value> results(ret.getOperands());
  for (BlockArgument p : llvm::concat<BlockArgument>(params, stageInputs)) {
    Value g = grads.lookup(p);
    if (!g) { // A value that does not reach the loss gets a zero gradient.
      g = b.create<FillOp>(grad.getLoc(), p.getType(),
                           b.getF64FloatAttr(0.0));
      g.getDefiningOp()->setAttr(kGradAttrName, b.getUnitAttr());
    }
    results.push_back(g);
  }
  b.create<func::ReturnOp>(ret.getLoc(), results);
  ret.erase();
  // Rules build every operand gradient; drop the ones no parameter needs
  // (the input gradient of a first layer, say).
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();

  SmallVector<Type> argTypes(body.getArgumentTypes());
  SmallVector<Type> resultTypes;
  for (Value v : results)
    resultTypes.push_back(v.getType());
  grad.setFunctionType(FunctionType::get(&getContext(), argTypes, resultTypes));
  // Keep argument attributes aligned with the new signature.
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    argAttrs.push_back(forward.getArgAttrDict(i));
  argAttrs.append(numSeeds, DictionaryAttr::get(&getContext()));
  grad.setAllArgAttrs(argAttrs);
  grad.removeResAttrsAttr();
  return success();
}
