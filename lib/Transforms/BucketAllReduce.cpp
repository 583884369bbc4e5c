//===- BucketAllReduce.cpp - Gradients all-reduced in buckets -------------===//
//
// -dsc-bucket-all-reduce (see Passes.td): DeepSpeed's reduce_bucket_size.
// One collective per parameter pays the transport's latency per parameter
// (a GPT-2 has about 150); a few buckets pay it a few times.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCBUCKETALLREDUCE
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// An all-reduce of a gradient accumulator argument of `fn`.
bool reducesGradient(func::FuncOp fn, AllReduceOp op) {
  auto arg = dyn_cast<BlockArgument>(op.getInput());
  if (!arg || arg.getOwner()->getParentOp() != fn)
    return false;
  auto state = fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                              kStateAttrName);
  return state && state.getKind() == StateKind::grad;
}

int64_t elementsOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

struct BucketAllReducePass
    : mlir::dsc::impl::DscBucketAllReduceBase<BucketAllReducePass> {
  using DscBucketAllReduceBase::DscBucketAllReduceBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (bucketElements < 0) {
      module.emitError("dsc-bucket-all-reduce: bucket-elements must be >= "
                       "0, got ")
          << int64_t(bucketElements);
      return signalPassFailure();
    }
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!apply || apply.isExternal() || bucketElements == 0)
      return;
    // Buckets in program order; a bucket only takes all-reduces of one
    // reduction, axis and element type.
    SmallVector<SmallVector<AllReduceOp>> buckets;
    int64_t filled = 0;
    apply.walk([&](AllReduceOp op) {
      if (!reducesGradient(apply, op))
        return;
      const int64_t n = elementsOf(op.getInput());
      bool fits = !buckets.empty() && filled + n <= bucketElements;
      if (fits) {
        AllReduceOp first = buckets.back().front();
        fits = first.getOp() == op.getOp() &&
               first.getAxis() == op.getAxis() &&
               getElementTypeOrSelf(first.getInput()) ==
                   getElementTypeOrSelf(op.getInput());
      }
      if (!fits) {
        buckets.emplace_back();
        filled = 0;
      }
      buckets.back().push_back(op);
      filled += n;
    });
    for (ArrayRef<AllReduceOp> bucket : buckets)
      if (bucket.size() > 1)
        rewrite(bucket);
  }

  /// pack -> one all_reduce -> unpack, where the bucket's first all-reduce
  /// was: the inputs are arguments, so they are available there, and the
  /// results are then defined before any original result's use.
  void rewrite(ArrayRef<AllReduceOp> bucket) {
    AllReduceOp first = bucket.front();
    OpBuilder b(first);
    SmallVector<Value> inputs;
    SmallVector<Type> types;
    int64_t total = 0;
    for (AllReduceOp op : bucket) {
      inputs.push_back(op.getInput());
      types.push_back(op.getType());
      total += elementsOf(op.getInput());
    }
    auto flat = RankedTensorType::get(
        {total}, getElementTypeOrSelf(first.getInput()));
    Location loc = first.getLoc();
    Value packed = b.create<PackOp>(loc, flat, inputs);
    Value reduced = b.create<AllReduceOp>(loc, flat, packed, first.getOpAttr(),
                                          first.getAxisAttr());
    auto unpacked = b.create<UnpackOp>(loc, types, reduced);
    for (auto [i, result] : llvm::enumerate(unpacked.getResults())) {
      AllReduceOp op = bucket[i];
      op.getResult().replaceAllUsesWith(result);
      op.erase();
    }
  }
};

} // namespace
