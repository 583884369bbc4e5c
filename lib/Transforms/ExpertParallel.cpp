//===- ExpertParallel.cpp - Experts sharded over expert-parallel groups ---===//
//
// DeepSpeed-MoE's and Megatron's expert parallelism as a rewrite of the
// forward graph: the G ranks of a data_inner group (dsc.mesh_expert) hold
// E / G of each MoE layer's experts, and each layer's rows move to their
// experts and back:
//
//   slots, counts = moe_route ...
//   rows = moe_dispatch x, slots              [N*K, C], expert-major
//   recv_counts, local_counts = moe_exchange_counts counts
//   recv = moe_exchange rows, counts, recv_counts          [R, C]
//   ... grouped_linear(recv, concat(local experts' weights), local_counts),
//       silu, mul ...                                      [R, F]
//   out = grouped_linear(..., w2 of local experts)         [R, C]
//   back = moe_exchange out, counts, recv_counts {reverse} [N*K, C]
//   y = moe_combine back, slots, weights
//
// R = G * N * min(K, E / G) bounds what any routing sends one rank (with
// token dropping, also G * (E / G) * capacity), so the shapes stay static;
// the exchanges move only the rows that exist.
// Parameters: the concatenations keep their first E / G operands (local
// slot j is named as expert j of group rank 0; the runtime renames it per
// rank) and the other experts' arguments leave @forward.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/BitVector.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCEXPERTPARALLEL
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

RankedTensorType withRows(Type type, int64_t rows) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[0] = rows;
  return RankedTensorType::get(shape, t.getElementType());
}

class ExpertParallelPass
    : public mlir::dsc::impl::DscExpertParallelBase<ExpertParallelPass> {
public:
  void runOnOperation() override;

private:
  LogicalResult shardLayer(MoeRouteOp route, int64_t groupSize);
  /// The concatenation of `experts` parameters feeding a grouped GEMM,
  /// replaced by one of its first `keep`; the dropped arguments are marked
  /// in `dropped`.
  LogicalResult keepLocalExperts(GroupedLinearOp gemm, int64_t experts,
                                 int64_t keep);

  func::FuncOp forward;
  llvm::BitVector dropped;
  SmallVector<Attribute> expertParams;
};

LogicalResult ExpertParallelPass::keepLocalExperts(GroupedLinearOp gemm,
                                                   int64_t experts,
                                                   int64_t keep) {
  auto concat = gemm.getWeight().getDefiningOp<ConcatOp>();
  if (!concat || int64_t(concat.getInputs().size()) != experts ||
      concat.getAxis() != 0 || !concat->hasOneUse())
    return gemm.emitOpError("dsc-expert-parallel: the experts' weight must be "
                            "the concatenation (dim 0) of its ")
           << experts << " experts' parameters, used once";
  SmallVector<Value> local;
  for (auto [i, operand] : llvm::enumerate(concat.getInputs())) {
    auto arg = dyn_cast<BlockArgument>(operand);
    auto param = arg ? forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                           kParamAttrName)
                     : ParamAttr();
    if (!param || !arg.hasOneUse())
      return gemm.emitOpError("dsc-expert-parallel: expert ")
             << i << "'s weight is not a parameter used only here";
    if (forward.getArgAttr(arg.getArgNumber(), kFrozenAttrName))
      return gemm.emitOpError("dsc-expert-parallel: expert ")
             << i << "'s weight is frozen (adapters on experts are not "
                     "supported)";
    if (int64_t(i) < keep) {
      local.push_back(operand);
      expertParams.push_back(StringAttr::get(&getContext(), param.getName()));
    } else {
      dropped.set(arg.getArgNumber());
    }
  }
  auto whole = cast<RankedTensorType>(concat.getType());
  OpBuilder b(concat);
  auto sharded = b.create<ConcatOp>(
      concat.getLoc(), withRows(whole, whole.getDimSize(0) / experts * keep),
      local, concat.getAxisAttr());
  gemm.getWeightMutable().assign(sharded);
  // The dropped experts' uses go with the old concatenation.
  concat.erase();
  return success();
}

LogicalResult ExpertParallelPass::shardLayer(MoeRouteOp route,
                                             int64_t groupSize) {
  const int64_t experts = route.getNumExperts();
  if (experts % groupSize != 0)
    return route.emitOpError("dsc-expert-parallel: the ")
           << experts << " experts do not divide over the " << groupSize
           << " ranks of an expert-parallel group";
  const int64_t perRank = experts / groupSize;
  Value counts = route.getCounts();
  MoeDispatchOp dispatch;
  for (Operation *user : route.getSlots().getUsers())
    if (auto d = dyn_cast<MoeDispatchOp>(user)) {
      if (dispatch)
        return route.emitOpError(
            "dsc-expert-parallel: the layout feeds more than one dispatch");
      dispatch = d;
    }
  if (!dispatch)
    return route.emitOpError("dsc-expert-parallel: no dsc.moe_dispatch reads "
                             "the layout");
  auto rowsType = cast<RankedTensorType>(dispatch.getType());
  const int64_t topK =
      cast<RankedTensorType>(route.getSlots().getType()).getShape().back();
  const int64_t tokens = rowsType.getDimSize(0) / topK;
  // With token dropping each source sends an expert at most its capacity.
  int64_t received = groupSize * tokens * std::min(topK, perRank);
  if (const int64_t capacity = int64_t(route.getCapacity()); capacity > 0)
    received = std::min(received, groupSize * perRank * capacity);

  OpBuilder b(&getContext());
  b.setInsertionPointAfter(dispatch);
  Location loc = dispatch.getLoc();
  auto axis = MeshAxisAttr::get(&getContext(), MeshAxis::data_inner);
  auto i32 = b.getIntegerType(32);
  auto exchangeCounts = b.create<MoeExchangeCountsOp>(
      loc,
      TypeRange{RankedTensorType::get({groupSize, perRank}, i32),
                RankedTensorType::get({perRank}, i32)},
      counts, axis);
  Value recvCounts = exchangeCounts.getRecvCounts();
  auto recv = b.create<MoeExchangeOp>(
      loc, withRows(rowsType, received), dispatch.getResult(), counts,
      recvCounts, b.getBoolAttr(false), axis);

  // The values in the receiver's row space: the received rows, the
  // grouped GEMMs' results and the silu / mul between them.
  DenseSet<Value> inReceiverLayout;
  inReceiverLayout.insert(recv.getResult());
  // (The ops after the exchange as they were: the reverse exchanges this
  // loop adds are not visited.)
  SmallVector<Operation *> after;
  for (Operation *op = recv->getNextNode(); op; op = op->getNextNode())
    after.push_back(op);
  DenseMap<Value, Value> returned; ///< receiver-layout value -> sent back
  for (Operation *op : after) {
    if (auto gemm = dyn_cast<GroupedLinearOp>(op);
        gemm && gemm.getCounts() == counts) {
      if (gemm.getInput() == dispatch.getResult())
        gemm.getInputMutable().assign(recv.getResult());
      if (!inReceiverLayout.contains(gemm.getInput()))
        return gemm.emitOpError("dsc-expert-parallel: the grouped GEMM's rows "
                                "do not come from the layer's dispatch");
      if (failed(keepLocalExperts(gemm, experts, perRank)))
        return failure();
      gemm.getCountsMutable().assign(exchangeCounts.getLocalCounts());
      gemm.getResult().setType(withRows(gemm.getType(), received));
      inReceiverLayout.insert(gemm.getResult());
      continue;
    }
    const bool reads = llvm::any_of(op->getOperands(), [&](Value v) {
      return inReceiverLayout.contains(v);
    });
    if (!reads)
      continue;
    if (isa<SiluOp, MulOp>(op) &&
        llvm::all_of(op->getOperands(),
                     [&](Value v) { return inReceiverLayout.contains(v); })) {
      op->getResult(0).setType(withRows(op->getResult(0).getType(), received));
      inReceiverLayout.insert(op->getResult(0));
      continue;
    }
    // Anything else reads the rows in this rank's own layout: they come
    // back first (once per value).
    for (OpOperand &operand : op->getOpOperands()) {
      Value v = operand.get();
      if (!inReceiverLayout.contains(v) || v == recv.getResult())
        continue;
      Value &back = returned[v];
      if (!back) {
        OpBuilder builder(v.getContext());
        builder.setInsertionPointAfterValue(v);
        back = builder.create<MoeExchangeOp>(
            v.getLoc(), withRows(v.getType(), rowsType.getDimSize(0)), v,
            counts, recvCounts, builder.getBoolAttr(true), axis);
      }
      operand.set(back);
    }
  }
  if (llvm::any_of(dispatch.getResult().getUsers(), [&](Operation *user) {
        return user != recv.getOperation();
      }))
    return dispatch.emitOpError("dsc-expert-parallel: the expert rows have a "
                                "use other than the experts' GEMMs");
  return success();
}

void ExpertParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  auto attr = module->getAttrOfType<IntegerAttr>(kMeshExpertAttrName);
  const int64_t groupSize = attr ? attr.getInt() : 1;
  if (groupSize == 1)
    return;
  if (module->hasAttr(kExpertParamsAttrName)) {
    module.emitError("dsc-expert-parallel: the experts are sharded already (")
        << kExpertParamsAttrName << ")";
    return signalPassFailure();
  }
  forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal()) {
    module.emitError("dsc-expert-parallel: the module has no @forward");
    return signalPassFailure();
  }
  SmallVector<MoeRouteOp> routes;
  forward.walk([&](MoeRouteOp route) { routes.push_back(route); });
  if (routes.empty()) {
    forward.emitError("dsc-expert-parallel: ")
        << kMeshExpertAttrName << " = " << groupSize
        << " but the model has no mixture-of-experts layer";
    return signalPassFailure();
  }
  dropped.resize(forward.getNumArguments());
  // One experts-per-rank count names every rank's experts.
  const int64_t experts = int64_t(routes.front().getNumExperts());
  for (MoeRouteOp route : routes)
    if (int64_t(route.getNumExperts()) != experts) {
      route.emitOpError("dsc-expert-parallel: layers differ in experts");
      return signalPassFailure();
    }
  for (MoeRouteOp route : routes)
    if (failed(shardLayer(route, groupSize)))
      return signalPassFailure();
  const int64_t perRank = experts / groupSize;
  forward.eraseArguments(dropped);
  module->setAttr(kExpertParamsAttrName,
                  ArrayAttr::get(&getContext(), expertParams));
  module->setAttr(kExpertsPerRankAttrName,
                  IntegerAttr::get(IntegerType::get(&getContext(), 64),
                                   perRank));
}

} // namespace
