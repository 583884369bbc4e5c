//===- TensorParallel.cpp - Megatron-style tensor slicing -----------------===//
//
// Slices the forward graph over the T ranks of the mesh's tensor axis, as
// Megatron-LM does by hand (Shoeybi et al. 2019, section 3): each
// attention is split by heads and each MLP by its hidden columns, so a
// block's two GEMM pairs need one all-reduce each way.
//
// A sliced region runs from column-parallel GEMMs (their output features
// split, each rank computing its part from the whole input) to one
// row-parallel GEMM (its input features split, each rank's product a
// partial sum):
//
//   x -> tp_copy -> linear(W[:, part]) -> ...heads or activations... ->
//        linear(W[part, :], no bias) -> tp_reduce -> add bias
//
// tp_copy (Megatron's f) is the identity forward and all-reduces the
// gradient backward; tp_reduce (g) all-reduces forward and passes the
// gradient through: -dsc-autodiff derives the backward collectives from
// them. Regions are found from the graph, not from names:
//   attention: dsc.merge_heads feeding one dsc.linear (the row GEMM), back
//     through batch_matmul / softmax / dropout / rotary / repeat_kv /
//     rms_norm (Qwen3's per-head q_norm and k_norm) to the dsc.split_heads
//     of column GEMMs (GPT-2's fused c_attn: Q, K and V sections, each
//     sliced by heads);
//   MLP: a dsc.linear whose input comes through gelu / silu / mul / dropout
//     from column GEMMs only.
// The vocabulary is split too (Megatron's VocabParallelEmbedding and
// vocab_parallel_cross_entropy): the LM head's [V, C] weight, its bias and
// every embedding table of V rows are sliced by rows, padded to a multiple
// of T; the head computes this rank's logit columns (through tp_copy),
// dsc.vocab_cross_entropy reduces the loss over the group and
// dsc.vocab_embedding each lookup; @forward returns the sliced logits
// (recorded as `logits` in dsc.tensor_slices: the runtime gathers them).
// Everything else (position embeddings, norms) is replicated: every rank
// computes it whole, so its gradients agree without a collective. A
// per-head norm's weight is replicated too but sees only this rank's
// heads: it enters through a tp_copy, whose gradient sums the ranks'.
//
//===----------------------------------------------------------------------===//

#include "VocabularyHead.h"

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCTENSORPARALLEL
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// Column GEMMs, the ops between them and the row GEMM.
struct Region {
  /// Each column GEMM with the number of equal sections of its output
  /// features (3 for a fused QKV projection), sliced section by section.
  SmallVector<std::pair<LinearOp, int64_t>> columns;
  /// The ops between (their results are sliced too).
  SetVector<Operation *> inner;
  LinearOp row;
  bool attention = false;
};

RankedTensorType withDim(Type type, int64_t dim, int64_t divisor) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape[size_t(dim)] /= divisor;
  return RankedTensorType::get(shape, t.getElementType());
}

class TensorParallelPass
    : public mlir::dsc::impl::DscTensorParallelBase<TensorParallelPass> {
public:
  void runOnOperation() override;

private:
  LogicalResult findAttention(MergeHeadsOp merge, Region &region);
  bool findMlp(LinearOp row, Region &region);
  LogicalResult checkSliceable(const Region &region, int64_t parts);
  LogicalResult checkWeight(LinearOp linear, Value weight);
  void slice(Region &region, int64_t parts);
  void sliceArgument(Value arg, int64_t dim, int64_t groups, int64_t parts);
  void sliceVocabulary(int64_t parts);

  func::FuncOp forward;
  SmallVector<NamedAttribute> slices;
};

/// Every use of the region's values stays inside it.
bool closed(const Region &region) {
  DenseSet<Operation *> members(region.inner.begin(), region.inner.end());
  members.insert(region.row);
  auto usedInside = [&](Value v) {
    return llvm::all_of(v.getUsers(),
                        [&](Operation *user) { return members.count(user); });
  };
  for (auto [linear, groups] : region.columns)
    if (!usedInside(linear.getResult()))
      return false;
  for (Operation *op : region.inner)
    if (!llvm::all_of(op->getResults(), usedInside))
      return false;
  return true;
}

LogicalResult TensorParallelPass::findAttention(MergeHeadsOp merge,
                                                Region &region) {
  region.attention = true;
  Value merged = merge.getResult();
  auto row = merged.hasOneUse() ? dyn_cast<LinearOp>(*merged.user_begin())
                                : LinearOp();
  if (!row || row.getInput() != merged)
    return merge.emitOpError("dsc-tensor-parallel: the merged heads must "
                             "feed one dsc.linear (the output projection)");
  region.row = row;
  SmallVector<Value> work(merge.getParts());
  region.inner.insert(merge);
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op || region.inner.contains(op))
      continue;
    if (auto split = dyn_cast<SplitHeadsOp>(op)) {
      region.inner.insert(op);
      auto column = split.getInput().getDefiningOp<LinearOp>();
      if (!column)
        return split.emitOpError("dsc-tensor-parallel: the heads must be "
                                 "split from a dsc.linear's output");
      region.columns.push_back({column, int64_t(split.getNumResults())});
      continue;
    }
    if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      if (softmax.getLayout() && softmax.getLayout()->getHeads() != 1)
        return softmax.emitOpError(
            "dsc-tensor-parallel: a block-sparse layout with one pattern per "
            "head cannot be split by heads (every rank runs one program)");
      region.inner.insert(op);
      work.push_back(softmax.getInput());
      continue;
    }
    if (isa<BatchMatmulOp>(op)) {
      region.inner.insert(op);
      work.append(op->operand_begin(), op->operand_end());
      continue;
    }
    if (isa<DropoutOp, RotaryOp, RepeatKvOp, RmsNormOp>(op)) {
      region.inner.insert(op);
      work.push_back(op->getOperand(0));
      continue;
    }
    return op->emitOpError("dsc-tensor-parallel: cannot split this op of "
                           "an attention by heads");
  }
  if (!closed(region))
    return merge.emitOpError("dsc-tensor-parallel: a value inside the "
                             "attention is used outside it");
  return success();
}

bool TensorParallelPass::findMlp(LinearOp row, Region &region) {
  SmallVector<Value> work{row.getInput()};
  region.row = row;
  while (!work.empty()) {
    Operation *op = work.pop_back_val().getDefiningOp();
    if (!op)
      return false;
    if (auto column = dyn_cast<LinearOp>(op)) {
      if (llvm::none_of(region.columns,
                        [&](auto &c) { return c.first == column; }))
        region.columns.push_back({column, 1});
      continue;
    }
    if (!isa<GeluOp, SiluOp, MulOp, DropoutOp>(op))
      return false;
    if (region.inner.insert(op))
      work.append(op->operand_begin(), op->operand_end());
  }
  return !region.inner.empty() && closed(region);
}

LogicalResult TensorParallelPass::checkWeight(LinearOp linear, Value weight) {
  auto arg = dyn_cast<BlockArgument>(weight);
  if (!arg || arg.getOwner()->getParentOp() != forward ||
      !forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                           kParamAttrName))
    return linear.emitOpError("dsc-tensor-parallel: a sliced GEMM's weight "
                              "and bias must be parameters of @forward");
  if (!arg.hasOneUse())
    return linear.emitOpError("dsc-tensor-parallel: parameter '")
           << forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                  kParamAttrName)
                  .getName()
           << "' is used elsewhere too, so it cannot be sliced";
  return success();
}

LogicalResult TensorParallelPass::checkSliceable(const Region &region,
                                                 int64_t parts) {
  auto outFeatures = [](LinearOp l) {
    auto w = cast<RankedTensorType>(l.getWeight().getType()).getShape();
    return l.getTransposeW() ? w[0] : w[1];
  };
  for (auto [column, groups] : region.columns) {
    if (outFeatures(column) % (groups * parts) != 0)
      return column.emitOpError("dsc-tensor-parallel: ")
             << outFeatures(column) << " output features in " << groups
             << " section(s) cannot be split over " << parts << " ranks";
    if (failed(checkWeight(column, column.getWeight())) ||
        (column.getBias() && failed(checkWeight(column, column.getBias()))))
      return failure();
  }
  for (Operation *op : region.inner)
    if (auto split = dyn_cast<SplitHeadsOp>(op);
        split && split.getNumHeads() % parts != 0)
      return split.emitOpError("dsc-tensor-parallel: ")
             << split.getNumHeads() << " heads cannot be split over " << parts
             << " ranks";
  // The row GEMM's input features are the columns' output features (or
  // the merged heads): divisible once those are.
  LinearOp row = region.row;
  return checkWeight(row, row.getWeight());
}

void TensorParallelPass::sliceArgument(Value value, int64_t dim,
                                       int64_t groups, int64_t parts) {
  auto arg = cast<BlockArgument>(value);
  const int64_t size = cast<RankedTensorType>(arg.getType()).getDimSize(dim);
  arg.setType(withDim(arg.getType(), dim, parts));
  auto param =
      forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
  slices.push_back(NamedAttribute(
      StringAttr::get(&getContext(), param.getName()),
      TensorSliceAttr::get(&getContext(), dim, groups, size)));
}

void TensorParallelPass::slice(Region &region, int64_t parts) {
  MLIRContext *ctx = &getContext();
  OpBuilder b(ctx);
  // One tp_copy per distinct input (LLaMA's q, k and v projections share
  // theirs): its gradient all-reduce then runs once.
  DenseMap<Value, Value> entered;
  for (auto [column, groups] : region.columns) {
    Value x = column.getInput();
    Value &copy = entered[x];
    if (!copy) {
      b.setInsertionPointAfterValue(x); // before every column that reads x
      copy = b.create<TpCopyOp>(column.getLoc(), x.getType(), x,
                                MeshAxisAttr::get(ctx, MeshAxis::tensor));
      if (Attribute layer = column->getAttr(kLayerAttrName))
        copy.getDefiningOp()->setAttr(kLayerAttrName, layer);
    }
    column.getInputMutable().assign(copy);
    sliceArgument(column.getWeight(), column.getTransposeW() ? 0 : 1, groups,
                  parts);
    if (Value bias = column.getBias())
      sliceArgument(bias, 0, groups, parts);
    Value out = column.getResult();
    auto outType = cast<RankedTensorType>(out.getType());
    out.setType(withDim(outType, outType.getRank() - 1, parts));
  }
  for (Operation *op : region.inner) {
    if (auto split = dyn_cast<SplitHeadsOp>(op))
      split.setNumHeads(split.getNumHeads() / parts);
    if (auto norm = dyn_cast<RmsNormOp>(op)) {
      b.setInsertionPoint(norm);
      Value w = norm.getWeight();
      norm.getWeightMutable().assign(
          b.create<TpCopyOp>(norm.getLoc(), w.getType(), w,
                             MeshAxisAttr::get(ctx, MeshAxis::tensor)));
      if (Attribute layer = norm->getAttr(kLayerAttrName))
        norm.getWeight().getDefiningOp()->setAttr(kLayerAttrName, layer);
    }
    for (Value r : op->getResults()) {
      int64_t rank = cast<RankedTensorType>(r.getType()).getRank();
      // Attention heads are [B, H, T, D]; merged heads and MLP activations
      // have their features last.
      bool heads = region.attention && !isa<MergeHeadsOp>(op);
      r.setType(withDim(r.getType(), heads ? 1 : rank - 1, parts));
    }
  }
  LinearOp row = region.row;
  sliceArgument(row.getWeight(), row.getTransposeW() ? 1 : 0, 1, parts);
  // The partial products are summed first; the bias is added once, after.
  b.setInsertionPoint(row);
  Location loc = row.getLoc();
  Type type = row.getType();
  auto partial = b.create<LinearOp>(loc, type, row.getInput(),
                                    row.getWeight(), Value(),
                                    row.getTransposeWAttr());
  Value sum = b.create<TpReduceOp>(loc, type, partial,
                                   MeshAxisAttr::get(ctx, MeshAxis::tensor));
  SmallVector<Operation *> created{partial, sum.getDefiningOp()};
  if (Value bias = row.getBias()) {
    sum = b.create<AddOp>(loc, type, sum, bias);
    created.push_back(sum.getDefiningOp());
  }
  if (Attribute layer = row->getAttr(kLayerAttrName))
    for (Operation *op : created)
      op->setAttr(kLayerAttrName, layer);
  row.replaceAllUsesWith(sum);
  row.erase();
}

void TensorParallelPass::sliceVocabulary(int64_t parts) {
  MLIRContext *ctx = &getContext();
  // Without an LM head (VocabularyHead.h) the vocabulary stays whole.
  std::optional<VocabularyHead> found = findVocabularyHead(forward);
  if (!found)
    return;
  CrossEntropyOp loss = found->loss;
  LinearOp head = found->head;
  BlockArgument bias = found->bias;
  auto logitsType = cast<RankedTensorType>(head.getType());
  const int64_t vocab = found->vocab;
  const int64_t rows = (vocab + parts - 1) / parts;
  auto withRows = [&](RankedTensorType t, int64_t dim) {
    SmallVector<int64_t> shape(t.getShape());
    shape[size_t(dim)] = rows;
    return RankedTensorType::get(shape, t.getElementType());
  };
  auto sliceRows = [&](BlockArgument arg) {
    auto param =
        forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
    slices.push_back(NamedAttribute(StringAttr::get(ctx, param.getName()),
                                    TensorSliceAttr::get(ctx, 0, 1, vocab)));
    arg.setType(withRows(cast<RankedTensorType>(arg.getType()), 0));
  };
  OpBuilder b(ctx);
  auto axis = MeshAxisAttr::get(ctx, MeshAxis::tensor);
  auto vocabAttr = b.getI64IntegerAttr(vocab);
  for (BlockArgument table : found->tables) {
    SmallVector<EmbeddingOp> lookups;
    for (Operation *user : table.getUsers())
      if (auto lookup = dyn_cast<EmbeddingOp>(user))
        lookups.push_back(lookup);
    sliceRows(table);
    for (EmbeddingOp lookup : lookups) {
      b.setInsertionPoint(lookup);
      auto parallel = b.create<VocabEmbeddingOp>(
          lookup.getLoc(), lookup.getType(), table, lookup.getIds(),
          vocabAttr, axis);
      parallel->setDiscardableAttrs(lookup->getDiscardableAttrDictionary());
      lookup.replaceAllUsesWith(parallel.getResult());
      lookup.erase();
    }
  }
  if (bias)
    sliceRows(bias);
  // The head computes this rank's columns from the whole input.
  b.setInsertionPoint(head);
  Value x = head.getInput();
  head.getInputMutable().assign(
      b.create<TpCopyOp>(head.getLoc(), x.getType(), x, axis));
  head.getResult().setType(withRows(logitsType, logitsType.getRank() - 1));
  b.setInsertionPoint(loss);
  auto parallelLoss = b.create<VocabCrossEntropyOp>(
      loss.getLoc(), loss.getType(), head.getResult(), loss.getLabels(),
      vocabAttr, loss.getIgnoreIndexAttr(), axis);
  loss.replaceAllUsesWith(parallelLoss.getResult());
  loss.erase();
  // The step returns the logits as they are: this rank's columns.
  slices.push_back(NamedAttribute(
      StringAttr::get(ctx, "logits"),
      TensorSliceAttr::get(ctx, logitsType.getRank() - 1, 1, vocab)));
}

void TensorParallelPass::runOnOperation() {
  ModuleOp module = getOperation();
  const int64_t parts = meshGroupSize(module, MeshAxis::tensor);
  if (parts == 1)
    return;
  if (module->hasAttr(kTensorSlicesAttrName)) {
    module.emitError("dsc-tensor-parallel: the module is sliced already (")
        << kTensorSlicesAttrName << ")";
    return signalPassFailure();
  }
  forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!forward || forward.isExternal()) {
    module.emitError("dsc-tensor-parallel: the module has no @forward");
    return signalPassFailure();
  }
  // Find every region first: nothing changes unless all can be sliced.
  SmallVector<Region> regions;
  DenseSet<Operation *> claimed;
  WalkResult walk = forward.walk([&](MergeHeadsOp merge) {
    Region region;
    if (failed(findAttention(merge, region)) ||
        failed(checkSliceable(region, parts)))
      return WalkResult::interrupt();
    claimed.insert(region.row);
    for (auto [column, groups] : region.columns)
      claimed.insert(column);
    regions.push_back(std::move(region));
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return signalPassFailure();
  SmallVector<LinearOp> linears;
  forward.walk([&](LinearOp l) { linears.push_back(l); });
  for (LinearOp row : linears) {
    Region region;
    if (claimed.count(row) || !findMlp(row, region) ||
        llvm::any_of(region.columns,
                     [&](auto &c) { return claimed.count(c.first); }))
      continue;
    if (failed(checkSliceable(region, parts)))
      return signalPassFailure();
    claimed.insert(row);
    for (auto [column, groups] : region.columns)
      claimed.insert(column);
    regions.push_back(std::move(region));
  }
  if (regions.empty()) {
    forward.emitError("dsc-tensor-parallel: found no attention or MLP to "
                      "slice over the ")
        << parts << " ranks of the tensor axis";
    return signalPassFailure();
  }
  // Dropouts on this rank's heads or features draw per-rank masks.
  SmallVector<int64_t> streams;
  for (Region &region : regions)
    for (Operation *op : region.inner)
      if (auto dropout = dyn_cast<StochasticOpInterface>(op);
          dropout && dropout.getDropoutRate() > 0)
        streams.push_back(dropout.getDropoutStream());
  if (!streams.empty())
    module->setAttr(kTensorParallelStreamsAttrName,
                    DenseI64ArrayAttr::get(&getContext(), streams));
  for (Region &region : regions)
    slice(region, parts);
  sliceVocabulary(parts);
  forward.setType(FunctionType::get(
      &getContext(), forward.getBody().getArgumentTypes(),
      forward.getBody().front().getTerminator()->getOperandTypes()));
  module->setAttr(kTensorSlicesAttrName,
                  DictionaryAttr::get(&getContext(), slices));
}

} // namespace
