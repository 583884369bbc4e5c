//===- PadVocabulary.cpp - The LM head's vocabulary to a multiple of N ----===//
//
// GPT-2's vocabulary of 50,257 gives the LM head's GEMMs rows of 50,257
// elements: no 16-byte-aligned leading dimension, so a GPU's fastest GEMM
// kernels do not apply, and the logits' rows are not aligned for vector
// loads either. This pass pads the vocabulary of @forward to a multiple of
// `multiple` rows, as Megatron-LM and llm.c do: the loss's LM head (a
// [V, C] parameter with transpose_w, and its bias) and every embedding
// table of V rows get padding rows; the head computes V' logits per token,
// the loss takes its softmax over the first V (classes = V: the padding
// columns get no probability and a zero gradient, so the padding rows'
// gradient is zero and AdamW leaves them at their initial zero); the step
// still returns the V real logits (a dsc.split). The module's
// dsc.tensor_slices records each padded parameter as
// #dsc.tensor_slice<dim = 0, groups = 1, size = V> over the one-rank tensor
// axis: the runtime initializes, loads and saves the V real rows only, so
// weights, checkpoints and their random initialization are those of the
// unpadded model.
//
// With a tensor axis of more than one rank, -dsc-tensor-parallel pads the
// vocabulary to a multiple of the ranks instead and this pass does nothing;
// a module with dsc.tensor_slices already is refused.
//
//===----------------------------------------------------------------------===//

#include "VocabularyHead.h"

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPADVOCABULARY
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// `t` with `rows` elements in dimension `dim`.
RankedTensorType withDim(Type t, int64_t dim, int64_t rows) {
  auto tensor = cast<RankedTensorType>(t);
  SmallVector<int64_t> shape(tensor.getShape());
  shape[size_t(dim)] = rows;
  return RankedTensorType::get(shape, tensor.getElementType());
}

struct PadVocabularyPass
    : mlir::dsc::impl::DscPadVocabularyBase<PadVocabularyPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (multiple < 1) {
      module.emitError("dsc-pad-vocabulary: multiple must be >= 1, got ")
          << static_cast<int64_t>(multiple);
      return signalPassFailure();
    }
    if (multiple == 1 || meshGroupSize(module, MeshAxis::tensor) > 1)
      return;
    if (module->hasAttr(kTensorSlicesAttrName)) {
      module.emitError("dsc-pad-vocabulary: the module is padded or sliced "
                       "already (")
          << kTensorSlicesAttrName << ")";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal()) {
      module.emitError("dsc-pad-vocabulary: the module has no @forward");
      return signalPassFailure();
    }
    pad(module, forward);
  }

  void pad(ModuleOp module, func::FuncOp forward) {
    MLIRContext *ctx = &getContext();
    // Without a head (VocabularyHead.h), or with a loss padded already,
    // nothing changes.
    std::optional<VocabularyHead> found = findVocabularyHead(forward);
    if (!found || found->loss.getClasses() != 0)
      return;
    CrossEntropyOp loss = found->loss;
    LinearOp head = found->head;
    auto logitsType = cast<RankedTensorType>(head.getType());
    const int64_t vocab = found->vocab;
    const int64_t padded = (vocab + multiple - 1) / multiple * multiple;
    if (padded == vocab)
      return;
    SmallVector<BlockArgument> padRows = found->tables;
    if (found->bias)
      padRows.push_back(found->bias);

    SmallVector<NamedAttribute> slices;
    for (BlockArgument arg : padRows) {
      auto param = forward.getArgAttrOfType<ParamAttr>(arg.getArgNumber(),
                                                       kParamAttrName);
      slices.push_back(NamedAttribute(StringAttr::get(ctx, param.getName()),
                                      TensorSliceAttr::get(ctx, 0, 1, vocab)));
      arg.setType(withDim(arg.getType(), 0, padded));
    }
    const int64_t last = logitsType.getRank() - 1;
    head.getResult().setType(withDim(logitsType, last, padded));
    loss.setClasses(vocab);
    // What the step returns of the logits: the V real columns.
    Operation *ret = forward.getBody().front().getTerminator();
    OpBuilder b(ret);
    Value real;
    for (OpOperand &use : ret->getOpOperands()) {
      if (use.get() != head.getResult())
        continue;
      if (!real)
        real = b.create<SplitOp>(
                    head.getLoc(),
                    TypeRange{logitsType,
                              withDim(logitsType, last, padded - vocab)},
                    head.getResult(), b.getI64IntegerAttr(last))
                   .getResult(0);
      use.set(real);
    }
    forward.setType(FunctionType::get(ctx, forward.getBody().getArgumentTypes(),
                                      ret->getOperandTypes()));
    module->setAttr(kTensorSlicesAttrName, DictionaryAttr::get(ctx, slices));
  }
};

} // namespace
