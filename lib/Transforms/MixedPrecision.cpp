//===- MixedPrecision.cpp - Half-precision activations and GEMM inputs ----===//
//
// -dsc-mixed-precision: in @micro_step, every float activation (forward
// values and the backward's activation gradients) becomes an f16 or bf16
// tensor: the op that makes it stores its result in that type (ops compute
// in f32 and round as they store). Every parameter a GEMM reads gets one
// half copy (dsc.convert) at the top of the function. The parameter
// gradients that feed the accumulation (the batch reductions:
// dsc.linear_grad_weight, dsc.grouped_linear_grad_weight,
// dsc.embedding_grad, dsc.reduce_to, dgamma/dbeta, and the adds and splits
// that combine or cut them) and the accumulation itself stay f32, as do
// scalars (the loss and its seed), everything in @apply_step (master
// weights, optimizer state), dsc.attention's log-sum-exp and the
// mixture-of-experts loads. A half value
// the function returns (the logits) is converted back to its f32 result
// type. Both backends store the half tensors in 2 bytes per element.
//
// Frozen matrices (LoRA's base weights and embeddings) have no master copy
// to keep: they are stored in the half format themselves, in every step
// function that reads them, and the GEMMs read them without a copy.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCMIXEDPRECISION
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

bool isF32Tensor(Value v, bool allowScalar) {
  auto t = dyn_cast<RankedTensorType>(v.getType());
  return t && t.getElementType().isF32() && (allowScalar || t.getRank() > 0);
}

/// Values that only carry parameter gradients into the accumulation: the
/// operand of each accumulating dsc.add and, through dsc.add, what it sums;
/// through dsc.split, the gradient of the parameters' concatenation that it
/// cuts (fused QKV weights, Mixtral's stacked expert weights).
void collectParamGradients(Value g, DenseSet<Value> &out) {
  if (!out.insert(g).second)
    return;
  if (auto add = g.getDefiningOp<AddOp>())
    for (Value operand : add->getOperands())
      collectParamGradients(operand, out);
  if (auto split = g.getDefiningOp<SplitOp>())
    collectParamGradients(split.getInput(), out);
}

struct MixedPrecisionPass
    : mlir::dsc::impl::DscMixedPrecisionBase<MixedPrecisionPass> {
  using DscMixedPrecisionBase::DscMixedPrecisionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto micro = module.lookupSymbol<func::FuncOp>("micro_step");
    if (!micro || micro.isExternal() || !micro.getBody().hasOneBlock()) {
      module.emitError("dsc-mixed-precision: no @micro_step with one block; "
                       "run -dsc-build-train-step first");
      return signalPassFailure();
    }
    // The results that are grad_acc + grad.
    DenseSet<Value> keepF32;
    auto ret = cast<func::ReturnOp>(micro.getBody().front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      auto state = micro.getResultAttrOfType<StateAttr>(i, kStateAttrName);
      if (!state || state.getKind() != StateKind::grad)
        continue;
      keepF32.insert(v);
      if (auto add = v.getDefiningOp<AddOp>())
        for (Value operand : add->getOperands())
          if (!isa<BlockArgument>(operand))
            collectParamGradients(operand, keepF32);
    }
    storeInHalf(micro, keepF32);
    storeFrozenInHalf(module, micro);
  }

  /// Frozen parameters of rank >= 2 become half arguments of every
  /// function that takes them; @micro_step's copies of them go.
  void storeFrozenInHalf(ModuleOp module, func::FuncOp micro) {
    Type half = halfType();
    llvm::StringSet<> frozen;
    for (BlockArgument arg : micro.getArguments()) {
      auto type = dyn_cast<RankedTensorType>(arg.getType());
      auto state = micro.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                     kStateAttrName);
      if (state && state.getKind() == StateKind::param && type &&
          type.getRank() >= 2 && type.getElementType().isF32() &&
          micro.getArgAttr(arg.getArgNumber(), kFrozenAttrName))
        frozen.insert(state.getName());
    }
    if (frozen.empty())
      return;
    for (auto fn : module.getOps<func::FuncOp>()) {
      if (fn.isExternal())
        continue;
      bool changed = false;
      for (BlockArgument arg : fn.getArguments()) {
        auto state = fn.getArgAttrOfType<StateAttr>(arg.getArgNumber(),
                                                    kStateAttrName);
        if (!state || state.getKind() != StateKind::param ||
            !frozen.contains(state.getName()))
          continue;
        arg.setType(cast<RankedTensorType>(arg.getType()).clone(half));
        changed = true;
        // The GEMMs' half copy of it is now the argument itself.
        for (Operation *user : llvm::to_vector(arg.getUsers()))
          if (auto convert = dyn_cast<ConvertOp>(user);
              convert && convert->getResult(0).getType() == arg.getType()) {
            convert.replaceAllUsesWith(arg);
            convert.erase();
          }
      }
      if (changed)
        fn.setType(FunctionType::get(&getContext(),
                                     fn.getBody().getArgumentTypes(),
                                     fn.getResultTypes()));
    }
  }

  Type halfType() {
    HalfFormat format = dtype;
    return format == HalfFormat::bf16 ? Type(BFloat16Type::get(&getContext()))
                                      : Type(Float16Type::get(&getContext()));
  }

  /// Rounds every f32 activation of `fn` but `keepF32` to the half format
  /// and gives each GEMM a half copy of its weight.
  void storeInHalf(func::FuncOp fn, DenseSet<Value> keepF32) {
    Block &body = fn.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    MLIRContext *ctx = &getContext();
    HalfFormat format = dtype;
    Type half = format == HalfFormat::bf16 ? Type(BFloat16Type::get(ctx))
                                           : Type(Float16Type::get(ctx));
    auto halfOf = [&](Value v) {
      return cast<RankedTensorType>(v.getType()).clone(half);
    };

    // GEMM weights: one half copy of each parameter, at the top.
    DenseMap<Value, Value> halfParam;
    OpBuilder top = OpBuilder::atBlockBegin(&body);
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      ops.push_back(&op);
    for (Operation *op : ops) {
      if (!isa<LinearOp, LinearGradInputOp>(op))
        continue;
      Value w = op->getOperand(1);
      if (!isa<BlockArgument>(w) || !isF32Tensor(w, false))
        continue;
      Value &h = halfParam[w];
      if (!h)
        h = top.create<ConvertOp>(w.getLoc(), halfOf(w), w);
      op->setOperand(1, h);
    }

    // The attention's log-sum-exp stays f32, as FlashAttention keeps it: the
    // backward's exp(s - lse) would carry a half-precision error in the
    // exponent otherwise.
    // Likewise the norms' per-row 1/std (1/rms), which the invertible
    // backward multiplies every element by (one value per row, as Apex's
    // fused LayerNorm keeps its invvar in f32).
    for (Operation *op : ops) {
      if (auto attention = dyn_cast<AttentionOp>(op))
        keepF32.insert(attention.getLse());
      else if (isa<InvertibleLayerNormOp, BiasDropoutAddLayerNormOp,
                   InvertibleRmsNormOp, AddRmsNormOp>(op))
        keepF32.insert(op->getResults().back());
      // A mixture-of-experts layer's load (token counts, exact in f32) and
      // its gradient are [2, E] statistics of the load-balancing loss.
      else if (isa<MoeLoadOp, MoeBalanceLossGradOp>(op))
        keepF32.insert(op->getResult(0));
      // A pipeline boundary's packed activations travel as f32, as a single
      // one does (a stage's inputs and outputs keep the function's types).
      else if (isa<PackOp, UnpackOp>(op))
        keepF32.insert(op->getResults().begin(), op->getResults().end());
    }

    // Activations: every f32 tensor result is stored in half.
    for (Operation *op : ops)
      for (Value result : op->getResults())
        if (isF32Tensor(result, false) && !keepF32.contains(result))
          result.setType(halfOf(result));

    // What a pack packs is widened back to its f32.
    for (Operation *op : ops)
      if (auto pack = dyn_cast<PackOp>(op))
        for (OpOperand &operand : pack->getOpOperands())
          if (auto type = cast<RankedTensorType>(operand.get().getType());
              !type.getElementType().isF32()) {
            OpBuilder before(pack);
            operand.set(before.create<ConvertOp>(
                operand.get().getLoc(), type.clone(before.getF32Type()),
                operand.get()));
          }

    // Returned values keep the function's f32 result types.
    OpBuilder b(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      Type want = fn.getFunctionType().getResult(operand.getOperandNumber());
      if (operand.get().getType() != want)
        operand.set(b.create<ConvertOp>(operand.get().getLoc(), want,
                                        operand.get()));
    }
  }
};

} // namespace
