//===- BucketCollectives.cpp - Gradients and shards moved in buckets ------===//
//
// -dsc-bucket-collectives (see Passes.td): DeepSpeed's reduce_bucket_size
// and allgather_bucket_size. One collective per parameter pays the
// transport's latency per parameter (a GPT-2 has about 150); a few buckets
// pay it a few times.
//
// A bucket is a run of collectives of one kind (same reduction, axis and
// element type) in program order, none of whose inputs depends on an
// earlier member's result. It is rewritten where its last member was:
// pack -> one collective -> unpack; the ops between its members that use
// an earlier member's result move, in order, behind the unpack.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"
#include "dsc/Transforms/PipelineChunks.h"

#include "llvm/ADT/SetVector.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCBUCKETCOLLECTIVES
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

int64_t elementsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

/// What a bucket must agree on: the collective, its reduction (if any),
/// axis and element type.
struct BucketKey {
  StringRef name;
  std::optional<ReduceKind> reduce;
  MeshAxis axis;
  Type element;
  bool operator==(const BucketKey &o) const {
    return name == o.name && reduce == o.reduce && axis == o.axis &&
           element == o.element;
  }
};

struct Bucket {
  BucketKey key;
  int64_t chunk; ///< of an interleaved pipeline stage (kNoChunk elsewhere)
  SmallVector<Operation *> members;
  /// Ops between the members that use an earlier member's result.
  SmallVector<Operation *> dependents;
  int64_t elements = 0;
};

struct BucketCollectivesPass
    : mlir::dsc::impl::DscBucketCollectivesBase<BucketCollectivesPass> {
  using DscBucketCollectivesBase::DscBucketCollectivesBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (reduceBucketElements < 0 || allgatherBucketElements < 0) {
      module.emitError("dsc-bucket-collectives: bucket sizes must be >= 0, "
                       "got ")
          << int64_t(reduceBucketElements) << " and "
          << int64_t(allgatherBucketElements);
      return signalPassFailure();
    }
    // @micro_step reduce-scatters each micro-batch's gradients (ZeRO-2);
    // @apply_step all-reduces (no ZeRO) or reduce-scatters (ZeRO-1) the
    // accumulated ones and gathers the updated shards. ZeRO-3's gathers of
    // parameters for the forward and backward stay one by one: bucketing
    // them would hold every parameter whole at once.
    for (StringRef name : {"micro_step", "apply_step"})
      if (auto fn = module.lookupSymbol<func::FuncOp>(name))
        if (!fn.isExternal())
          bucketFunction(fn, name == "apply_step");
  }

  /// The bucket key of a collective this pass moves in buckets, or none.
  std::optional<BucketKey> keyOf(func::FuncOp fn, Operation *op,
                                 bool apply) const {
    if (!isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op))
      return std::nullopt;
    Type element = getElementTypeOrSelf(op->getOperand(0));
    if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      auto arg = dyn_cast<BlockArgument>(reduce.getInput());
      auto state = arg && arg.getOwner()->getParentOp() == fn
                       ? fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                        kStateAttrName)
                       : StateAttr();
      if (!apply || !state || state.getKind() != StateKind::grad)
        return std::nullopt;
      return BucketKey{op->getName().getStringRef(), reduce.getOp(),
                       reduce.getAxis(), element};
    }
    if (auto scatter = dyn_cast<ReduceScatterOp>(op))
      return BucketKey{op->getName().getStringRef(), scatter.getOp(),
                       scatter.getAxis(), element};
    if (auto gather = dyn_cast<AllGatherOp>(op)) {
      Operation *def = gather.getInput().getDefiningOp();
      // ZeRO-Offload: the update ran on the host and its result came back.
      if (auto back = dyn_cast_or_null<ToDeviceOp>(def))
        def = back.getInput().getDefiningOp();
      if (!apply || !def || !isa<OptimizerOpInterface>(def))
        return std::nullopt;
      return BucketKey{op->getName().getStringRef(), std::nullopt,
                       gather.getAxis(), element};
    }
    return std::nullopt;
  }

  int64_t capacity(const BucketKey &key) const {
    return key.name == AllGatherOp::getOperationName()
               ? int64_t(allgatherBucketElements)
               : int64_t(reduceBucketElements);
  }

  void bucketFunction(func::FuncOp fn, bool apply) {
    // An interleaved stage's chunks run their backwards at different
    // times: a bucket holds one chunk's gradients.
    DenseMap<Operation *, int64_t> chunkOf;
    if (!apply && pipelineChunksOf(fn) > 1)
      chunkOf = labelPipelineChunks(fn);
    SmallVector<Bucket> buckets;
    std::optional<Bucket> open;
    DenseSet<Value> tainted; // values depending on the open bucket
    auto close = [&] {
      if (open && open->members.size() > 1)
        buckets.push_back(std::move(*open));
      open.reset();
      tainted.clear();
    };
    for (Operation &op : fn.getBody().front().without_terminator()) {
      std::optional<BucketKey> key = keyOf(fn, &op, apply);
      const bool dependsOnOpen = llvm::any_of(
          op.getOperands(), [&](Value v) { return tainted.contains(v); });
      if (key && capacity(*key) > 0) {
        const int64_t n = elementsOf(op.getOperand(0)) >
                                  elementsOf(op.getResult(0))
                              ? elementsOf(op.getOperand(0))
                              : elementsOf(op.getResult(0));
        auto labelled = chunkOf.find(&op);
        const int64_t chunk =
            labelled == chunkOf.end() ? kNoChunk : labelled->second;
        if (!open || !(open->key == *key) || open->chunk != chunk ||
            dependsOnOpen || open->elements + n > capacity(*key)) {
          close();
          open = Bucket{*key, chunk, {}, {}, 0};
        }
        open->members.push_back(&op);
        open->elements += n;
        tainted.insert(op.getResult(0));
        continue;
      }
      if (open && dependsOnOpen) {
        open->dependents.push_back(&op);
        for (Value r : op.getResults())
          tainted.insert(r);
      }
    }
    close();
    for (Bucket &bucket : buckets)
      rewrite(bucket);
  }

  void rewrite(Bucket &bucket) {
    Operation *last = bucket.members.back();
    // Only the dependents before the last member need to move.
    SmallVector<Operation *> sink;
    for (Operation *op : bucket.dependents)
      if (op->isBeforeInBlock(last))
        sink.push_back(op);
    OpBuilder b(last);
    Location loc = last->getLoc();
    const BucketKey &key = bucket.key;
    const bool scatter = key.name == ReduceScatterOp::getOperationName();
    const bool gather = key.name == AllGatherOp::getOperationName();
    const int64_t group = meshGroupSize(last, key.axis);
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    int64_t in = 0, out = 0;
    for (Operation *op : bucket.members) {
      inputs.push_back(op->getOperand(0));
      types.push_back(op->getResult(0).getType());
      in += elementsOf(op->getOperand(0));
      out += elementsOf(op->getResult(0));
    }
    auto packedType = RankedTensorType::get({in}, key.element);
    auto resultType = RankedTensorType::get({out}, key.element);
    // A reduce-scatter gives rank j chunk j: pack every input's chunk j
    // together. An all-gather's result holds rank j's shards at chunk j.
    Value packed = b.create<PackOp>(loc, packedType, inputs,
                                    scatter ? group : 1);
    Operation *moved;
    auto axis = MeshAxisAttr::get(&getContext(), key.axis);
    if (scatter)
      moved = b.create<ReduceScatterOp>(
          loc, resultType, packed,
          ReduceKindAttr::get(&getContext(), *key.reduce), axis);
    else if (gather)
      moved = b.create<AllGatherOp>(loc, resultType, packed, axis);
    else
      moved = b.create<AllReduceOp>(
          loc, resultType, packed,
          ReduceKindAttr::get(&getContext(), *key.reduce), axis);
    auto unpacked = b.create<UnpackOp>(loc, types, moved->getResult(0),
                                       gather ? group : 1);
    for (auto [i, op] : llvm::enumerate(bucket.members))
      op->getResult(0).replaceAllUsesWith(unpacked.getResult(i));
    Operation *after = unpacked;
    for (Operation *op : sink) {
      op->moveAfter(after);
      after = op;
    }
    for (Operation *op : bucket.members)
      op->erase();
  }
};

} // namespace
