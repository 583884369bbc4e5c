//===- Zero.cpp - ZeRO stages 1 to 3 as a rewrite of the training step ----===//
//
// -dsc-zero (see Passes.td): optimizer state (stage 1) and gradient
// accumulators (stage 2) become each rank's 1/G shard of the flattened,
// zero-padded parameter; the gradient reduction becomes a reduce-scatter and
// the updated shards are all-gathered into whole parameters; stage 3 shards
// the parameters too, except those under the persistence threshold. Hybrid
// sharding shards within data_inner groups and all-reduces the shards'
// gradients across them; hpZ gathers the backward's parameters within the
// data_inner group from a secondary shard kept after the forward. ZeRO++'s
// qwZ and qgZ move the parameter gathers as int8 and the gradient
// reduce-scatters as all-to-alls of int4 codes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCZERO
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The module attribute naming the axis the shards divide tensors over
/// when it is not the data axis (rt::Program::zeroAxis).
constexpr llvm::StringLiteral kZeroAxisAttr = "dsc.zero_axis";

/// A parameter of type `t` over the G ranks of `axis`: flattened and padded
/// to G*s elements (`padded`), of which each rank owns s (`shard`). With 8-bit
/// Adam s is a multiple of its quantization block (`align`), so every
/// rank's blocks are blocks of the whole tensor and its per-block scales
/// (sharded unaligned: ceil(ceil(n/256)/G) = s/256) are the whole tensor's.
struct Sharding {
  MeshAxis axis;
  int64_t groupSize;
  int64_t align = 1;
  Sharding(Operation *module, MeshAxis axis)
      : axis(axis), groupSize(meshGroupSize(module, axis)) {}
  RankedTensorType shard(Type t, bool aligned = true) const {
    auto tensor = cast<RankedTensorType>(t);
    const int64_t n = tensor.getNumElements();
    const int64_t a = aligned ? align : 1;
    const int64_t s = (n + groupSize * a - 1) / (groupSize * a) * a;
    return RankedTensorType::get({s}, tensor.getElementType());
  }
  RankedTensorType padded(Type t) const {
    RankedTensorType s = shard(t);
    return RankedTensorType::get({s.getDimSize(0) * groupSize},
                                 s.getElementType());
  }
};

std::optional<StateKind> argKind(func::FuncOp fn, unsigned i) {
  if (auto state = fn.getArgAttrOfType<StateAttr>(i, kStateAttrName))
    return state.getKind();
  return std::nullopt;
}

std::optional<StateKind> resultKind(func::FuncOp fn, unsigned i) {
  if (auto state = fn.getResultAttrOfType<StateAttr>(i, kStateAttrName))
    return state.getKind();
  return std::nullopt;
}

/// Whether argument `i` of `fn` is state of an expert-parallel parameter
/// (-dsc-expert-parallel): the experts are split over the expert axis
/// already, so ZeRO leaves their parameters, gradients and optimizer state
/// whole on each of their holders.
bool isExpertArg(func::FuncOp fn, unsigned i) {
  auto state = fn.getArgAttrOfType<StateAttr>(i, kStateAttrName);
  return state && isExpertParam(fn, state.getName());
}
bool isExpertResult(func::FuncOp fn, unsigned i) {
  auto state = fn.getResultAttrOfType<StateAttr>(i, kStateAttrName);
  return state && isExpertParam(fn, state.getName());
}
bool isExpertValue(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  return arg && isExpertArg(fn, arg.getArgNumber());
}

bool isOptimizerState(StateKind kind) {
  return kind == StateKind::exp_avg || kind == StateKind::exp_avg_sq ||
         kind == StateKind::momentum || kind == StateKind::exp_avg_absmax ||
         kind == StateKind::exp_avg_sq_absmax;
}

/// Per-block scales: one element per block of the parameter's elements.
bool isBlockScale(std::optional<StateKind> kind) {
  return kind == StateKind::exp_avg_absmax ||
         kind == StateKind::exp_avg_sq_absmax;
}

/// Marks argument `arg` of `fn` as the rank's shard of a tensor of type
/// `whole` (the runtime gathers and scatters it in checkpoints) and retypes
/// it to the shard.
void shardArgument(func::FuncOp fn, BlockArgument arg, const Sharding &sh) {
  auto whole = cast<RankedTensorType>(arg.getType());
  fn.setArgAttr(arg.getArgNumber(), kShardOfAttrName,
                DenseI64ArrayAttr::get(fn.getContext(), whole.getShape()));
  arg.setType(sh.shard(whole, !isBlockScale(argKind(fn, arg.getArgNumber()))));
}

/// Elements per scale of qwZ's int8 codes.
constexpr int64_t kQuantizedWeightBlock = 256;

/// The whole tensor of type `whole` from every rank's shard; with
/// `quantized` (qwZ) the shards travel as int8 codes and block scales.
Value gatherWhole(OpBuilder &b, Location loc, Value shard, Type whole,
                  const Sharding &sh, bool quantized = false) {
  auto data = MeshAxisAttr::get(b.getContext(), sh.axis);
  if (!quantized) {
    Value all = b.create<AllGatherOp>(loc, sh.padded(whole), shard, data);
    return b.create<FlatResizeOp>(loc, whole, all);
  }
  MLIRContext *ctx = b.getContext();
  auto shardType = cast<RankedTensorType>(shard.getType());
  const int64_t n = shardType.getNumElements(), g = sh.groupSize;
  const int64_t blocks = n / kQuantizedWeightBlock;
  auto i8 = IntegerType::get(ctx, 8);
  auto f32 = Float32Type::get(ctx);
  auto block = b.getI64IntegerAttr(kQuantizedWeightBlock);
  auto q = b.create<QuantizeInt8Op>(
      loc, RankedTensorType::get({n}, i8), RankedTensorType::get({blocks}, f32),
      shard, block);
  Value codes = b.create<AllGatherOp>(loc, RankedTensorType::get({g * n}, i8),
                                      q.getCodes(), data);
  Value scales = b.create<AllGatherOp>(
      loc, RankedTensorType::get({g * blocks}, f32), q.getScales(), data);
  Value all = b.create<DequantizeInt8Op>(loc, sh.padded(whole), codes, scales,
                                         block);
  return b.create<FlatResizeOp>(loc, whole, all);
}

/// Elements per scale of qgZ's int4 codes.
constexpr int64_t kQuantizedGradientBlock = 32;

/// One hop of qgZ: `value` [G*c] quantized to int4 blocks, all-to-all over
/// the G ranks of `axis`, and each rank's G received chunks dequantized and
/// reduced by `op` into [c] of `resultType`.
Value quantizedExchange(OpBuilder &b, Location loc, Value value,
                        RankedTensorType resultType, ReduceKindAttr op,
                        MeshAxis axis) {
  MLIRContext *ctx = b.getContext();
  const int64_t n = cast<RankedTensorType>(value.getType()).getNumElements();
  auto u8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
  auto codesType = RankedTensorType::get({n / 2}, u8);
  auto scalesType = RankedTensorType::get({n / kQuantizedGradientBlock},
                                          Float32Type::get(ctx));
  auto block = b.getI64IntegerAttr(kQuantizedGradientBlock);
  auto group = MeshAxisAttr::get(ctx, axis);
  auto q = b.create<QuantizeInt4Op>(loc, codesType, scalesType, value, block);
  Value codes = b.create<AllToAllOp>(loc, codesType, q.getCodes(), group);
  Value scales = b.create<AllToAllOp>(loc, scalesType, q.getScales(), group);
  return b.create<DequantizeReduceInt4Op>(loc, resultType, codes, scales,
                                          block, op);
}

/// How a gradient's reduce-scatter travels: exact, or qgZ's int4 in one
/// hop over the shard group, or (qgZ with nodes of `nodeRanks` ranks) in
/// two: within the node, then across nodes.
struct ScatterMode {
  bool quantized = false;
  int64_t nodeRanks = 0; ///< > 1: hierarchical over data_inner/data_outer
};

/// The rank's shard of the group's mean (or `op`) of `value`, a tensor of
/// type `whole`: flattened, padded and reduce-scattered. qgZ replaces the
/// reduce-scatter by all-to-alls of int4 codes and their scales, each rank
/// dequantizing and reducing the chunks it receives; hierarchically (the
/// ZeRO++ paper's form), the G = N nodes x L shards are first regrouped by
/// the rank within the node that reduces them ([l][n] from [n][l]), reduced
/// over the node's L ranks, requantized and reduced over the N nodes, so
/// only 1/L of the bytes leave the node.
Value reduceScatterShard(OpBuilder &b, Location loc, Value value, Type whole,
                         ReduceKindAttr op, const Sharding &sh,
                         ScatterMode mode = {}) {
  MLIRContext *ctx = b.getContext();
  auto axis = MeshAxisAttr::get(ctx, sh.axis);
  Value padded = b.create<FlatResizeOp>(loc, sh.padded(whole), value);
  if (!mode.quantized)
    return b.create<ReduceScatterOp>(loc, sh.shard(whole), padded, op, axis);
  if (mode.nodeRanks <= 1)
    return quantizedExchange(b, loc, padded, sh.shard(whole), op, sh.axis);
  const int64_t L = mode.nodeRanks, N = sh.groupSize / L;
  const int64_t s = sh.shard(whole).getNumElements();
  auto elem = sh.shard(whole).getElementType();
  SmallVector<Type> nodeTypes(N, RankedTensorType::get({L * s}, elem));
  auto nodes = b.create<SplitOp>(loc, nodeTypes, padded, b.getI64IntegerAttr(0));
  Value byLocal = b.create<PackOp>(loc, padded.getType(), nodes.getPieces(),
                                   b.getI64IntegerAttr(L));
  Value inNode =
      quantizedExchange(b, loc, byLocal, RankedTensorType::get({N * s}, elem),
                        op, MeshAxis::data_inner);
  return quantizedExchange(b, loc, inNode, sh.shard(whole), op,
                           MeshAxis::data_outer);
}

/// The function type from the entry block's arguments and the return.
void updateFunctionType(func::FuncOp fn) {
  Block &body = fn.getBody().front();
  fn.setFunctionType(FunctionType::get(
      fn.getContext(), body.getArgumentTypes(),
      body.getTerminator()->getOperandTypes()));
}

struct ZeroPass : mlir::dsc::impl::DscZeroBase<ZeroPass> {
  using DscZeroBase::DscZeroBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (stage < 1 || stage > 3) {
      module.emitError("dsc-zero: stage must be 1, 2 or 3, got ")
          << int64_t(stage);
      return signalPassFailure();
    }
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    auto apply = module.lookupSymbol<func::FuncOp>("apply_step");
    if (!micro || !apply || micro.isExternal() || apply.isExternal()) {
      module.emitError("dsc-zero: no @micro_step and @apply_step; run "
                       "-dsc-build-train-step first");
      return signalPassFailure();
    }
    if (persistenceThreshold < 0) {
      module.emitError("dsc-zero: persistence-threshold must be >= 0, got ")
          << int64_t(persistenceThreshold);
      return signalPassFailure();
    }
    // A second run would shard the shards (the step trained wrong numbers
    // with exit 0).
    if (auto done = module->getAttrOfType<IntegerAttr>(kZeroStageAttrName)) {
      module.emitError("dsc-zero: the step is sharded already (stage ")
          << done.getInt() << "); run -dsc-zero once";
      return signalPassFailure();
    }
    module->setAttr(
        kZeroStageAttrName,
        IntegerAttr::get(IntegerType::get(&getContext(), 64), int64_t(stage)));
    if (quantizedWeights && stage != 3) {
      module.emitError("dsc-zero: quantized-weights (ZeRO++ qwZ) quantizes "
                       "stage 3's parameter gathers; stage is ")
          << int64_t(stage);
      return signalPassFailure();
    }
    if (quantizedGradients && stage != 3) {
      module.emitError("dsc-zero: quantized-gradients (ZeRO++ qgZ) "
                       "quantizes stage 3's gradient reduce-scatters; stage "
                       "is ")
          << int64_t(stage);
      return signalPassFailure();
    }
    if (hpz && stage != 3) {
      module.emitError("dsc-zero: hpz (ZeRO++ hpZ) partitions stage 3's "
                       "parameters a second time; stage is ")
          << int64_t(stage);
      return signalPassFailure();
    }
    if (hybrid && hpz) {
      module.emitError("dsc-zero: hybrid and hpz both use the data_inner "
                       "groups (as shard groups, as hpZ's secondary "
                       "partitions); choose one");
      return signalPassFailure();
    }
    if ((hybrid || hpz) && !module->hasAttr(kMeshDataInnerAttrName)) {
      module.emitError("dsc-zero: ")
          << (hybrid ? "hybrid" : "hpz") << " needs the module's "
          << kMeshDataInnerAttrName << " (the ranks of a data_inner group)";
      return signalPassFailure();
    }
    if (hybrid)
      module->setAttr(kZeroAxisAttr,
                      StringAttr::get(&getContext(),
                                      stringifyMeshAxis(MeshAxis::data_inner)));
    Sharding sharding(module, hybrid ? MeshAxis::data_inner : MeshAxis::data);
    apply.walk([&](Adam8bitOp) { sharding.align = Adam8bitOp::kBlockSize; });
    // qwZ: every shard is whole blocks of the int8 codes' scales (8-bit
    // Adam's block is the same 256).
    if (quantizedWeights)
      sharding.align = kQuantizedWeightBlock;
    // qgZ: every rank's chunk is whole blocks of the int4 codes' scales
    // (the other alignments are multiples of its 32).
    if (quantizedGradients)
      sharding.align = std::max(sharding.align, kQuantizedGradientBlock);
    // qgZ over nodes: the data_inner groups (hpZ's, or the launcher's
    // nodes) are the nodes, unless they are hybrid sharding's shard groups
    // (then the shard group is one node already).
    if (quantizedGradients && !hybrid &&
        module->hasAttr(kMeshDataInnerAttrName)) {
      const int64_t inner = meshGroupSize(module, MeshAxis::data_inner);
      if (inner > 1 && inner < sharding.groupSize)
        qgzNodeRanks = inner;
    }
    if (stage == 3) {
      gatherParameters(micro, sharding);
      if (auto eval = module.lookupSymbol<func::FuncOp>("eval_step"))
        gatherParameters(eval, sharding);
    }
    if ((stage >= 2 && failed(shardAccumulation(micro, sharding))) ||
        failed(shardUpdate(apply, sharding)))
      return signalPassFailure();
  }

  /// The experts' part of the gradient norm (-dsc-build-train-step sums
  /// its squares over data_inner): whole tensors, left as they are.
  static bool isExpertNorm(Operation *norm) {
    return norm->hasOneUse() &&
           llvm::any_of(norm->getUsers(), [](Operation *user) {
             auto reduce = dyn_cast<NormAllReduceOp>(user);
             return reduce && reduce.getAxis() == MeshAxis::data_inner;
           });
  }

  /// qgZ's ranks per node when its reduce-scatters go in two hops, else 0.
  int64_t qgzNodeRanks = 0;

  /// Stage 3: whether a parameter of type `t` is partitioned (else it
  /// persists whole: fewer elements than the threshold).
  bool partitioned(Type t) const {
    return stage == 3 && cast<RankedTensorType>(t).getNumElements() >=
                             persistenceThreshold;
  }

  /// Stage 3: the parameters of `fn` are shards; each is all-gathered
  /// right before its first use in the forward and again before its first
  /// use in the backward (ops marked dsc.grad), so the memory plan frees the
  /// whole parameter between the two and after the backward. With hpz the
  /// forward's gather also keeps this rank's data_inner shard of the whole
  /// (`dsc.shard`), and the backward gathers that over data_inner.
  void gatherParameters(func::FuncOp fn, const Sharding &sh) {
    Block &body = fn.getBody().front();
    DenseMap<Operation *, unsigned> position;
    unsigned next = 0;
    for (Operation &op : body)
      position[&op] = next++;
    OpBuilder b(&getContext());
    // hpZ's secondary partitions: unquantized, unaligned.
    const Sharding inner(fn, MeshAxis::data_inner);
    for (BlockArgument arg : body.getArguments()) {
      if (argKind(fn, arg.getArgNumber()) != StateKind::param ||
          !partitioned(arg.getType()) || isExpertArg(fn, arg.getArgNumber()))
        continue;
      Type whole = arg.getType();
      // The users of each phase, and the first of them in program order.
      SmallVector<OpOperand *> uses[2];
      Operation *first[2] = {nullptr, nullptr};
      for (OpOperand &use : arg.getUses()) {
        Operation *user = use.getOwner();
        const int phase = user->hasAttr(kGradAttrName) ? 1 : 0;
        uses[phase].push_back(&use);
        if (!first[phase] || position[user] < position[first[phase]])
          first[phase] = user;
      }
      shardArgument(fn, arg, sh);
      Value secondary;
      for (int phase = 0; phase < 2; ++phase) {
        if (!first[phase])
          continue;
        b.setInsertionPoint(first[phase]);
        Value gathered =
            secondary ? gatherWhole(b, arg.getLoc(), secondary, whole, inner)
                      : gatherWhole(b, arg.getLoc(), arg, whole, sh,
                                    quantizedWeights);
        if (hpz && phase == 0 && first[1]) {
          Value padded = b.create<FlatResizeOp>(arg.getLoc(),
                                                inner.padded(whole), gathered);
          secondary = b.create<ShardOp>(
              arg.getLoc(), inner.shard(whole), padded,
              MeshAxisAttr::get(&getContext(), MeshAxis::data_inner));
        }
        for (OpOperand *use : uses[phase])
          use->set(gathered);
      }
    }
    updateFunctionType(fn);
  }

  /// Stage 2: @micro_step reduce-scatters each gradient into the rank's
  /// shard of its accumulator.
  LogicalResult shardAccumulation(func::FuncOp micro, const Sharding &sh) {
    Block &body = micro.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    OpBuilder b(&getContext());
    for (unsigned r = 0; r < ret.getNumOperands(); ++r) {
      if (resultKind(micro, r) != StateKind::grad || isExpertResult(micro, r))
        continue;
      auto add = ret.getOperand(r).getDefiningOp<AddOp>();
      auto acc = add ? dyn_cast<BlockArgument>(add.getLhs()) : nullptr;
      if (!acc || argKind(micro, acc.getArgNumber()) != StateKind::grad)
        return micro.emitError("dsc-zero: @micro_step result ")
               << r << " is not an accumulation dsc.add(accumulator, grad)";
      Type full = acc.getType();
      shardArgument(micro, acc, sh);
      b.setInsertionPoint(add);
      Location loc = add.getLoc();
      // qgZ quantizes matrices; vectors (biases, norms' scales) stay
      // exact, as DeepSpeed's all_to_all_quant_reduce leaves them.
      ScatterMode mode;
      mode.quantized =
          quantizedGradients && cast<RankedTensorType>(full).getRank() > 1;
      mode.nodeRanks = qgzNodeRanks;
      Value part = reduceScatterShard(
          b, loc, add.getRhs(), full,
          ReduceKindAttr::get(&getContext(), ReduceKind::mean), sh, mode);
      ret.setOperand(r, b.create<AddOp>(loc, sh.shard(full), acc, part));
      if (add->use_empty())
        add.erase();
    }
    updateFunctionType(micro);
    return success();
  }

  /// @apply_step: shard the optimizer state (and, stage 2, take the
  /// accumulators as shards); see Passes.td.
  LogicalResult shardUpdate(func::FuncOp apply, const Sharding &sh) {
    MLIRContext *ctx = &getContext();
    Block &body = apply.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    auto data = MeshAxisAttr::get(ctx, sh.axis);
    for (BlockArgument arg : body.getArguments()) {
      std::optional<StateKind> kind = argKind(apply, arg.getArgNumber());
      if (isExpertArg(apply, arg.getArgNumber()))
        continue;
      if (kind && (isOptimizerState(*kind) ||
                   (stage >= 2 && *kind == StateKind::grad) ||
                   (*kind == StateKind::param && partitioned(arg.getType()))))
        shardArgument(apply, arg, sh);
    }

    OpBuilder b(ctx);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      Location loc = op->getLoc();
      if (auto reduce = dyn_cast<AllReduceOp>(op)) {
        auto acc = dyn_cast<BlockArgument>(reduce.getInput());
        if (!acc || argKind(apply, acc.getArgNumber()) != StateKind::grad ||
            isExpertArg(apply, acc.getArgNumber()))
          continue;
        Value part = acc; // stages 2-3: reduced in @micro_step already
        b.setInsertionPoint(reduce);
        if (stage == 1) // the accumulator is still whole
          part = reduceScatterShard(b, loc, acc, acc.getType(),
                                    reduce.getOpAttr(), sh);
        // Hybrid: each group reduced its own ranks' gradients; the groups'
        // shards at one position combine across them.
        if (hybrid)
          part = b.create<AllReduceOp>(
              loc, part.getType(), part, reduce.getOpAttr(),
              MeshAxisAttr::get(ctx, MeshAxis::data_outer));
        reduce.replaceAllUsesWith(part);
        reduce.erase();
      } else if (isa<GlobalNormOp>(op) &&
                 !llvm::all_of(op->getOperandTypes(),
                               [](Type t) {
                                 return cast<RankedTensorType>(t).getRank() ==
                                        0;
                               }) &&
                 !isExpertNorm(op)) {
        // The norms of the shards combine into the norm of the whole (a
        // norm of norms, as tensor slicing builds, combines whole ones).
        b.setInsertionPointAfter(op);
        auto norm = b.create<NormAllReduceOp>(loc, op->getResult(0).getType(),
                                              op->getResult(0), data);
        op->getResult(0).replaceAllUsesExcept(norm, norm);
      } else if (isa<CheckFiniteOp>(op)) {
        // fp16: every rank skips the step if any shard overflowed.
        b.setInsertionPointAfter(op);
        auto any = b.create<AllReduceOp>(
            loc, op->getResult(0).getType(), op->getResult(0),
            ReduceKindAttr::get(ctx, ReduceKind::max), data);
        op->getResult(0).replaceAllUsesExcept(any, any);
      } else if (auto update = dyn_cast<OptimizerOpInterface>(op)) {
        if (isa<LambOp>(op))
          return op->emitOpError("dsc-zero: LAMB's trust ratio needs whole "
                                 "parameters, which ZeRO shards");
        if (isa<AdafactorOp>(op))
          return op->emitOpError(
              "dsc-zero: Adafactor's factored second moment and update RMS "
              "need whole parameters, which ZeRO shards");
        // The updated states have their (sharded) states' types.
        auto retypeStates = [&] {
          for (auto [state, result] :
               llvm::zip(update.getStateOperands(), update.getNewStateResults()))
            result.setType(state.getType());
        };
        Value param = update.getParamOperand();
        if (isExpertValue(apply, param))
          continue;
        // Stage 3: the parameter argument is the shard already, and the
        // updated shard is the result (persistent parameters are whole and
        // updated as in stage 2).
        auto paramArg = dyn_cast<BlockArgument>(param);
        if (stage == 3 &&
            (!paramArg ||
             apply.getArgAttr(paramArg.getArgNumber(), kShardOfAttrName))) {
          update.getNewParamResult().setType(param.getType());
          retypeStates();
          continue;
        }
        Type full = param.getType();
        b.setInsertionPoint(op);
        Value padded = b.create<FlatResizeOp>(loc, sh.padded(full), param);
        Value mine = b.create<ShardOp>(loc, sh.shard(full), padded, data);
        op->setOperand(0, mine);
        update.getNewParamResult().setType(sh.shard(full));
        retypeStates();
        b.setInsertionPointAfter(op);
        Value newParam = update.getNewParamResult();
        SmallVector<OpOperand *> uses;
        for (OpOperand &use : newParam.getUses())
          uses.push_back(&use);
        Value whole = gatherWhole(b, loc, newParam, full, sh);
        for (OpOperand *use : uses)
          use->set(whole);
      }
    }
    // Stages 2-3: the accumulators restart at zero as shards.
    if (stage >= 2)
      for (unsigned r = 0; r < ret.getNumOperands(); ++r)
        if (resultKind(apply, r) == StateKind::grad &&
            !isExpertResult(apply, r)) {
          b.setInsertionPoint(ret);
          ret.setOperand(r, b.create<FillOp>(
                                ret.getLoc(), sh.shard(ret.getOperand(r).getType()),
                                b.getF64FloatAttr(0.0)));
        }
    // Fills left without a use (the old accumulator resets) go away.
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
      if (isa<FillOp>(op) && op.use_empty())
        op.erase();
    updateFunctionType(apply);
    return success();
  }
};

} // namespace
