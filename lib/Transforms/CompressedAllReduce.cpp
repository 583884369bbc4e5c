//===- CompressedAllReduce.cpp - DeepSpeed's 1-bit all-reduce as IR -------===//

#include "CompressedAllReduce.h"

#include <numeric>

using namespace mlir;
using namespace mlir::dsc;

int64_t mlir::dsc::compressedSize(int64_t n, int64_t groupSize) {
  const int64_t divider = groupSize * 8 / std::gcd(groupSize, int64_t(8));
  const int64_t unit = groupSize * divider;
  return (n + unit - 1) / unit * unit;
}

CompressedAllReduce mlir::dsc::buildCompressedAllReduce(
    OpBuilder &b, Location loc, Value input, Value workerError,
    Value serverError, Value skip, int64_t groupSize) {
  MLIRContext *ctx = b.getContext();
  const int64_t p = cast<RankedTensorType>(workerError.getType())
                        .getNumElements(),
                g = groupSize, chunk = p / g;
  Type f32 = b.getF32Type();
  Type u8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
  auto vec = [](int64_t n, Type t) { return RankedTensorType::get({n}, t); };
  auto data = MeshAxisAttr::get(ctx, MeshAxis::data);

  auto worker = b.create<OnebitCompressOp>(
      loc, TypeRange{vec(p / 8, u8), vec(1, f32), workerError.getType()},
      input, workerError, skip);
  // Rank j receives chunk j of every worker's signs, and every scale.
  Value received = b.create<AllToAllOp>(loc, vec(p / 8, u8),
                                        worker.getSigns(), data);
  Value workerScales =
      b.create<AllGatherOp>(loc, vec(g, f32), worker.getScale(), data);
  Value mean = b.create<OnebitDecodeMeanOp>(loc, vec(chunk, f32), received,
                                            workerScales);
  auto server = b.create<OnebitCompressOp>(
      loc, TypeRange{vec(chunk / 8, u8), vec(1, f32), serverError.getType()},
      mean, serverError, skip);
  Value allSigns =
      b.create<AllGatherOp>(loc, vec(p / 8, u8), server.getSigns(), data);
  Value serverScales =
      b.create<AllGatherOp>(loc, vec(g, f32), server.getScale(), data);
  Value decoded =
      b.create<OnebitDecodeOp>(loc, vec(p, f32), allSigns, serverScales);
  Value result = b.create<FlatResizeOp>(loc, input.getType(), decoded);
  return {result, worker.getNewError(), server.getNewError()};
}

std::optional<StateKind> mlir::dsc::stateKindOf(func::FuncOp fn, unsigned i) {
  if (auto state = fn.getArgAttrOfType<StateAttr>(i, kStateAttrName))
    return state.getKind();
  return std::nullopt;
}

LogicalResult mlir::dsc::checkAdamWarmup(func::FuncOp apply, StringRef pass) {
  for (unsigned i = 0; i < apply.getNumArguments(); ++i)
    if (apply.getArgAttr(i, kShardOfAttrName))
      return apply.emitError(pass)
             << ": @apply_step is sharded (-dsc-zero); the compressed "
                "optimizers run on whole tensors, before ZeRO";
  WalkResult walk = apply.walk([&](OptimizerOpInterface op) {
    auto adam = dyn_cast<AdamOp>(op.getOperation());
    if (!adam) {
      op->emitOpError(pass)
          << ": the compressed optimizers compress Adam's momentum; this "
             "step updates with "
          << op->getName();
      return WalkResult::interrupt();
    }
    if (!adam.getAdamw() || adam.getBiasCorrection()) {
      adam.emitOpError(pass)
          << ": the warm-up must be Adam with decoupled weight decay and "
             "no bias correction (DeepSpeed's OnebitAdam and ZeroOneAdam; "
             "-dsc-build-train-step optimizer=adamw bias-correction=false)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

func::FuncOp mlir::dsc::findWarmupStep(ModuleOp module, StringRef pass,
                                       ArrayRef<StringRef> stages) {
  auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
  if (!apply || apply.isExternal()) {
    module.emitError(pass) << ": no @apply_step; run -dsc-build-train-step "
                              "first";
    return {};
  }
  for (StringRef name : stages)
    if (module.lookupSymbol(name)) {
      module.emitError(pass) << ": @" << name << " exists already";
      return {};
    }
  return apply;
}

void mlir::dsc::keepGradientsLocal(func::FuncOp fn) {
  MLIRContext *ctx = fn.getContext();
  Block &body = fn.getBody().front();
  OpBuilder b(ctx);
  auto data = MeshAxisAttr::get(ctx, MeshAxis::data);
  for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
    if (auto reduce = dyn_cast<AllReduceOp>(op)) {
      auto acc = dyn_cast<BlockArgument>(reduce.getInput());
      if (acc && stateKindOf(fn, acc.getArgNumber()) == StateKind::grad) {
        reduce.replaceAllUsesWith(reduce.getInput());
        reduce.erase();
      }
    } else if (isa<CheckFiniteOp>(op)) {
      b.setInsertionPointAfter(&op);
      auto any = b.create<AllReduceOp>(
          op.getLoc(), op.getResult(0).getType(), op.getResult(0),
          ReduceKindAttr::get(ctx, ReduceKind::max), data);
      op.getResult(0).replaceAllUsesExcept(any, any);
    }
}

BlockArgument mlir::dsc::addStateArgument(func::FuncOp fn, Type type,
                                          StateAttr state, bool perRank) {
  MLIRContext *ctx = fn.getContext();
  NamedAttrList attrs;
  attrs.set(kStateAttrName, state);
  if (perRank)
    attrs.set(kPerRankAttrName, UnitAttr::get(ctx));
  const unsigned index = fn.getNumArguments();
  fn.insertArgument(index, type, attrs.getDictionary(ctx), fn.getLoc());
  return fn.getArgument(index);
}

void mlir::dsc::addStateResult(func::FuncOp fn, Value value, StateAttr state) {
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  const unsigned r = ret.getNumOperands();
  ret->insertOperands(r, value);
  NamedAttrList attrs;
  attrs.set(kStateAttrName, state);
  fn.insertResult(r, value.getType(), attrs.getDictionary(fn.getContext()));
}

Value mlir::dsc::compressAcrossRanks(
    OpBuilder &b, Location loc, func::FuncOp fn, StringRef param,
    Value input, Value skip, int64_t groupSize,
    SmallVectorImpl<std::pair<Value, StateAttr>> &newErrors) {
  // One rank: DeepSpeed does not compress (nothing to send).
  if (groupSize == 1)
    return input;
  MLIRContext *ctx = fn.getContext();
  const int64_t p = compressedSize(
      cast<RankedTensorType>(input.getType()).getNumElements(), groupSize);
  auto f32 = Float32Type::get(ctx);
  auto workerState = StateAttr::get(ctx, StateKind::worker_error, param);
  auto serverState = StateAttr::get(ctx, StateKind::server_error, param);
  BlockArgument worker = addStateArgument(
      fn, RankedTensorType::get({p}, f32), workerState, /*perRank=*/true);
  BlockArgument server =
      addStateArgument(fn, RankedTensorType::get({p / groupSize}, f32),
                       serverState, /*perRank=*/true);
  CompressedAllReduce reduced = buildCompressedAllReduce(
      b, loc, input, worker, server, skip, groupSize);
  newErrors.push_back({reduced.newWorkerError, workerState});
  newErrors.push_back({reduced.newServerError, serverState});
  return reduced.result;
}
