//===- PipelineStage.cpp - Cut @forward into pipeline stages -------------===//
//
// -dsc-pipeline-stage keeps one of the P stages of @forward (see Passes.td).
// Every rank of a pipelined job compiles its own stage; the cut is the same
// on every rank because it depends on the forward graph and the options
// alone. The units are the memory report's: ops before the first
// `dsc.layer` are the embedding, ops after the last the head, and an
// unlabelled op between layers (a collective a later pass inserted)
// belongs to the layer before it.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/CostModel.h"
#include "dsc/Support/Partition.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <set>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPIPELINESTAGE
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct PipelineStagePass
    : mlir::dsc::impl::DscPipelineStageBase<PipelineStagePass> {
  using DscPipelineStageBase::DscPipelineStageBase;

  // partition=best weighs units by the cost model (an interface the pass
  // attaches, as -dsc-remat does).
  void getDependentDialects(DialectRegistry &registry) const override {
    DscPipelineStageBase::getDependentDialects(registry);
    registerCostModel(registry);
  }

  void runOnOperation() override;

private:
  /// Each op's unit (0: embedding, l + 1: layer l, L + 1: head) and L.
  LogicalResult assignUnits(func::FuncOp forward,
                            DenseMap<Operation *, size_t> &unit,
                            size_t &numLayers);
  /// The weight of each unit by `partition`.
  std::vector<double> unitWeights(func::FuncOp forward,
                                  const DenseMap<Operation *, size_t> &unit,
                                  size_t numUnits);
};

/// The values of `forward` that depend on the tokens alone (no parameter,
/// no activation): any stage can recompute them. One pass in program
/// order, which SSA makes a topological order.
DenseSet<Value> tokenOnlyValues(func::FuncOp forward) {
  DenseSet<Value> tokens;
  for (BlockArgument arg : forward.getArguments())
    if (!forward.getArgAttr(arg.getArgNumber(), kParamAttrName))
      tokens.insert(arg);
  for (Operation &op : forward.getBody().front().without_terminator())
    if (llvm::all_of(op.getOperands(),
                     [&](Value v) { return tokens.contains(v); }))
      tokens.insert(op.getResults().begin(), op.getResults().end());
  return tokens;
}

} // namespace

LogicalResult
PipelineStagePass::assignUnits(func::FuncOp forward,
                               DenseMap<Operation *, size_t> &unit,
                               size_t &numLayers) {
  Block &body = forward.getBody().front();
  int64_t maxLayer = -1;
  Operation *lastLabelled = nullptr;
  for (Operation &op : body.without_terminator())
    if (auto layer = op.getAttrOfType<IntegerAttr>(kLayerAttrName)) {
      maxLayer = std::max(maxLayer, layer.getInt());
      lastLabelled = &op;
    }
  if (maxLayer < 0)
    return forward.emitError("dsc-pipeline-stage: @forward has no "
                             "transformer layers (ops with dsc.layer) to cut");
  numLayers = size_t(maxLayer + 1);
  size_t current = 0;
  bool afterLast = false;
  for (Operation &op : body.without_terminator()) {
    if (auto layer = op.getAttrOfType<IntegerAttr>(kLayerAttrName)) {
      if (size_t(layer.getInt() + 1) < current)
        return op.emitOpError("dsc-pipeline-stage: layer ")
               << layer.getInt() << " follows an op of layer " << current - 1
               << "; a stage must be a contiguous run of layers";
      current = size_t(layer.getInt() + 1);
    } else if (afterLast) {
      current = numLayers + 1;
    }
    unit[&op] = current;
    afterLast |= &op == lastLabelled;
  }
  return success();
}

std::vector<double>
PipelineStagePass::unitWeights(func::FuncOp forward,
                               const DenseMap<Operation *, size_t> &unit,
                               size_t numUnits) {
  std::vector<double> weights(numUnits, partition == "uniform" ? 1.0 : 0.0);
  if (partition == "best") {
    for (auto [op, u] : unit)
      weights[u] += double(std::max<int64_t>(recomputeCost(op), 0));
  } else if (partition == "parameters") {
    // A parameter counts in the unit of its first use.
    for (BlockArgument arg : forward.getArguments()) {
      if (!forward.getArgAttr(arg.getArgNumber(), kParamAttrName))
        continue;
      Operation *first = nullptr;
      for (Operation *user : arg.getUsers())
        if (!first || user->isBeforeInBlock(first))
          first = user;
      if (first)
        weights[unit.lookup(first)] +=
            double(cast<RankedTensorType>(arg.getType()).getNumElements());
    }
  }
  return weights;
}

void PipelineStagePass::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  const int64_t P = meshGroupSize(module, MeshAxis::pipeline);
  if (stage < 0 || stage >= P) {
    module.emitError("dsc-pipeline-stage: stage ")
        << int64_t(stage) << " is not a stage of the mesh's " << P
        << " pipeline rank" << (P == 1 ? "" : "s");
    return signalPassFailure();
  }
  if (chunks < 1 || (P == 1 && chunks > 1)) {
    module.emitError("dsc-pipeline-stage: chunks must be 1, or more with "
                     "more than one stage, not ")
        << int64_t(chunks);
    return signalPassFailure();
  }
  if (P == 1)
    return;
  if (module->hasAttr(kPipelineStageAttrName)) {
    module.emitError("dsc-pipeline-stage: the module is already cut "
                     "(dsc.pipeline_stage)");
    return signalPassFailure();
  }
  if (partition != "uniform" && partition != "parameters" &&
      partition != "best") {
    module.emitError("dsc-pipeline-stage: partition must be uniform, "
                     "parameters or best, not '")
        << partition << "'";
    return signalPassFailure();
  }
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal() || !forward.getBody().hasOneBlock()) {
    module.emitError("dsc-pipeline-stage: no @forward with one block");
    return signalPassFailure();
  }
  Block &body = forward.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());

  // The units are cut into V virtual stages; this rank keeps stage + k*P.
  const int64_t numChunks = chunks, V = numChunks * P;
  DenseMap<Operation *, size_t> unit;
  size_t numLayers = 0;
  if (failed(assignUnits(forward, unit, numLayers)))
    return signalPassFailure();
  std::vector<size_t> bounds = ::dsc::partitionBalanced(
      unitWeights(forward, unit, numLayers + 2), size_t(V));
  if (bounds.empty()) {
    forward.emitError("dsc-pipeline-stage: ")
        << numLayers + 2 << " units (embedding, " << numLayers
        << " layers, head) cannot fill " << V
        << (numChunks > 1 ? " virtual stages" : " stages");
    return signalPassFailure();
  }
  auto stageOfUnit = [&](size_t u) {
    return int64_t(std::upper_bound(bounds.begin() + 1, bounds.end(), u) -
                   bounds.begin() - 1);
  };
  DenseMap<Operation *, int64_t> stageOf;
  for (auto [op, u] : unit)
    stageOf[op] = stageOfUnit(u);

  // What each boundary carries: the values that are not token-only and
  // that a stage after the boundary uses but a stage before it makes. A
  // value made two or more stages back (a MoE layer's router loads, which
  // the head's balance loss reads) passes through the stages between.
  const DenseSet<Value> tokenOnly = tokenOnlyValues(forward);
  auto stageOfValue = [&](Value v) -> int64_t {
    if (isa<BlockArgument>(v))
      return -1;
    return stageOf.lookup(v.getDefiningOp());
  };
  SmallVector<llvm::SetVector<Value>> crossing;
  crossing.resize(size_t(V));
  for (Operation &op : body.without_terminator())
    for (Value operand : op.getOperands()) {
      const int64_t from = stageOfValue(operand), to = stageOf[&op];
      if (from < 0 || from == to || tokenOnly.contains(operand))
        continue;
      for (int64_t b = from + 1; b <= to; ++b)
        crossing[size_t(b)].insert(operand);
    }
  for (int64_t b = 1; b < V; ++b) {
    const auto &values = crossing[size_t(b)];
    auto boundary = [&]() {
      InFlightDiagnostic diag = forward.emitError("dsc-pipeline-stage: ");
      diag << "the boundary before " << (numChunks > 1 ? "virtual " : "")
           << "stage " << b;
      return diag;
    };
    if (values.empty()) {
      boundary() << " carries no activation: the stages after it do not "
                    "depend on the ones before";
      return signalPassFailure();
    }
    // Several values travel packed into one f32 vector.
    for (Value v : values)
      if (values.size() > 1 &&
          !cast<RankedTensorType>(v.getType()).getElementType().isF32()) {
        InFlightDiagnostic diag = boundary();
        diag << " carries " << values.size() << " activations, one of them "
             << v.getType()
             << "; several activations cross a boundary packed into one "
                "f32 vector";
        diag.attachNote(v.getLoc()) << "this activation";
        return signalPassFailure();
      }
  }
  for (Value result : ret.getOperands())
    if (stageOfValue(result) != V - 1 && !tokenOnly.contains(result)) {
      forward.emitError("dsc-pipeline-stage: a result of @forward is not "
                        "made by the last stage");
      return signalPassFailure();
    }

  // This rank's virtual stages, chunk k holding stage + k*P.
  SmallVector<int64_t> mine;
  for (int64_t k = 0; k < numChunks; ++k)
    mine.push_back(stage + k * P);
  auto isMine = [&](int64_t virtualStage) {
    return virtualStage % P == stage;
  };

  // Parameters by the stages that use them: only the first and the last
  // stage may share one (a tied word embedding).
  SmallVector<BlockArgument> params;
  SmallVector<Attribute> tied;
  for (BlockArgument arg : forward.getArguments()) {
    auto param = forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                     kParamAttrName);
    if (!param)
      continue;
    std::set<int64_t> users;
    for (Operation *user : arg.getUsers())
      users.insert(stageOf.lookup(user));
    if (users.size() > 1 && users != std::set<int64_t>{0, V - 1}) {
      forward.emitError("dsc-pipeline-stage: parameter '")
          << param.getName() << "' is used by stages " << *users.begin()
          << " and " << *std::next(users.begin())
          << "; only the first and the last stage may share a parameter "
             "(tied embeddings)";
      return signalPassFailure();
    }
    if (llvm::any_of(users, isMine))
      params.push_back(arg);
    // A frozen copy never changes: only trained ones need their gradients
    // summed.
    if (users.size() > 1 &&
        !forward.getArgAttr(arg.getArgNumber(), kFrozenAttrName))
      tied.push_back(StringAttr::get(ctx, param.getName()));
  }

  // The stage's function: its parameters, the activation each chunk
  // receives, the tokens; the loss and logits (the last virtual stage) and
  // the activation each other chunk sends.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  for (BlockArgument p : params) {
    argTypes.push_back(p.getType());
    argAttrs.push_back(forward.getArgAttrDict(p.getArgNumber()));
  }
  // The type a boundary's values travel as: the value itself, or one f32
  // vector of them all (dsc.pack, in the order the crossing set holds,
  // which is the same on every rank).
  auto boundaryType = [&](int64_t b) -> Type {
    const auto &values = crossing[size_t(b)];
    if (values.size() == 1)
      return values[0].getType();
    int64_t numel = 0;
    for (Value v : values)
      numel += cast<RankedTensorType>(v.getType()).getNumElements();
    return RankedTensorType::get({numel}, Float32Type::get(ctx));
  };
  for (int64_t k = 0; k < numChunks; ++k)
    if (mine[k] > 0) {
      argTypes.push_back(boundaryType(mine[k]));
      argAttrs.push_back(DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, kPipelineInputAttrName),
                               UnitAttr::get(ctx))}));
    }
  SmallVector<BlockArgument> tokens;
  for (BlockArgument arg : forward.getArguments())
    if (!forward.getArgAttr(arg.getArgNumber(), kParamAttrName)) {
      tokens.push_back(arg);
      argTypes.push_back(arg.getType());
      argAttrs.push_back(forward.getArgAttrDict(arg.getArgNumber()));
    }
  const bool last = stage == P - 1;
  SmallVector<Type> resultTypes;
  if (last)
    llvm::append_range(resultTypes, forward.getFunctionType().getResults());
  for (int64_t k = 0; k < numChunks; ++k)
    if (mine[k] + 1 < V)
      resultTypes.push_back(boundaryType(mine[k] + 1));

  OpBuilder mb(forward);
  auto cut = mb.create<func::FuncOp>(forward.getLoc(), "forward_stage",
                                     FunctionType::get(ctx, argTypes,
                                                       resultTypes));
  cut.setAllArgAttrs(argAttrs);
  Block *entry = cut.addEntryBlock();
  OpBuilder b = OpBuilder::atBlockEnd(entry);
  SmallVector<Value> lossResults, sentResults;
  unsigned firstInput = params.size();
  unsigned firstToken = entry->getNumArguments() - tokens.size();
  for (int64_t k = 0; k < numChunks; ++k) {
    // Each chunk maps the shared arguments afresh, so that it recomputes
    // its own token-only values and shares no op with another chunk.
    IRMapping map;
    for (auto [i, p] : llvm::enumerate(params))
      map.map(p, entry->getArgument(i));
    if (mine[k] > 0) {
      const auto &values = crossing[size_t(mine[k])];
      Value arg = entry->getArgument(firstInput++);
      if (values.size() == 1) {
        map.map(values[0], arg);
      } else {
        auto unpack = b.create<UnpackOp>(
            forward.getLoc(), ValueRange(values.getArrayRef()).getTypes(),
            arg);
        map.map(values.getArrayRef(), unpack.getResults());
      }
    }
    for (auto [i, t] : llvm::enumerate(tokens))
      map.map(t, entry->getArgument(firstToken + i));
    // Token-only values of other stages are recomputed here, just before
    // their first use.
    std::function<void(Value)> materialize = [&](Value v) {
      if (map.contains(v))
        return;
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        materialize(operand);
      b.clone(*def, map);
    };
    for (Operation &op : body.without_terminator()) {
      if (stageOf[&op] != mine[k])
        continue;
      for (Value operand : op.getOperands())
        materialize(operand);
      b.clone(op, map);
    }
    if (mine[k] + 1 < V) {
      const auto &values = crossing[size_t(mine[k] + 1)];
      SmallVector<Value> mapped;
      for (Value v : values)
        mapped.push_back(map.lookup(v));
      sentResults.push_back(
          values.size() == 1
              ? mapped[0]
              : b.create<PackOp>(forward.getLoc(), boundaryType(mine[k] + 1),
                                 mapped)
                    .getResult());
      continue;
    }
    for (Value r : ret.getOperands()) {
      materialize(r);
      lossResults.push_back(map.lookup(r));
    }
  }
  b.create<func::ReturnOp>(ret.getLoc(),
                           llvm::to_vector(llvm::concat<Value>(
                               lossResults, sentResults)));

  forward.erase();
  cut.setName("forward");
  module->setAttr(kPipelineStageAttrName,
                  IntegerAttr::get(IntegerType::get(ctx, 64), stage));
  if (numChunks > 1)
    module->setAttr(kPipelineChunksAttrName,
                    IntegerAttr::get(IntegerType::get(ctx, 64), numChunks));
  if (!tied.empty() && (stage == 0 || last))
    module->setAttr(kPipelineTiedParamsAttrName, ArrayAttr::get(ctx, tied));
}
