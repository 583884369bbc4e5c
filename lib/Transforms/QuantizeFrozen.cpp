//===- QuantizeFrozen.cpp - Frozen linear weights in 4 bits (QLoRA) -------===//
//
// -dsc-quantize-frozen: each frozen weight that only linear layers read
// becomes a byte tensor of 4-bit codes and block scales, and its GEMMs
// dsc.linear_4bit, which dequantize as they load (see the pass description
// in Passes.td). The weight's storage shrinks from 4 bytes per element to
// about 0.5 (0.53 with f32 absmaxes per 64, 0.51 with double quantization).
//
//===----------------------------------------------------------------------===//

#include "dsc/Program/FourBitLayout.h"
#include "dsc/Transforms/Passes.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCQUANTIZEFROZEN
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

struct QuantizeFrozenPass
    : mlir::dsc::impl::DscQuantizeFrozenBase<QuantizeFrozenPass> {
  using DscQuantizeFrozenBase::DscQuantizeFrozenBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    ::dsc::quant::FourBitFormat parsed;
    if (!::dsc::quant::parseFourBitFormat(format, parsed)) {
      module.emitError("dsc-quantize-frozen: format must be nf4 or fp4, "
                       "got '")
          << format << "'";
      return signalPassFailure();
    }
    if (blockSize <= 0 || blockSize % 2 != 0) {
      module.emitError("dsc-quantize-frozen: block-size must be even and "
                       "positive, got ")
          << blockSize;
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal()) {
      module.emitError("dsc-quantize-frozen: no @forward");
      return signalPassFailure();
    }
    NamedAttrList recorded(
        module->getAttrOfType<DictionaryAttr>(kFourBitParamsAttrName));
    for (BlockArgument arg : forward.getArguments())
      if (FourBitAttr attr = quantize(forward, arg))
        recorded.set(paramOf(forward, arg).getName(), attr);
    if (recorded.empty()) {
      module.emitError("dsc-quantize-frozen: no frozen linear weight to "
                       "store in 4 bits (run -dsc-lora first; skip-modules "
                       "may cover them all)");
      return signalPassFailure();
    }
    module->setAttr(kFourBitParamsAttrName,
                    recorded.getDictionary(&getContext()));
    forward.setType(FunctionType::get(
        &getContext(), forward.getBody().getArgumentTypes(),
        forward.getResultTypes()));
  }

  static ParamAttr paramOf(func::FuncOp fn, BlockArgument arg) {
    return fn.getArgAttrOfType<ParamAttr>(arg.getArgNumber(), kParamAttrName);
  }

  bool skipped(StringRef module) const {
    auto matches = [&](StringRef entry) {
      return module == entry || module.ends_with(("." + entry).str());
    };
    if (skipModules.empty())
      return matches("lm_head");
    return llvm::any_of(skipModules,
                        [&](const std::string &e) { return matches(e); });
  }

  /// Stores `arg` in 4 bits when it is a frozen weight that only linear
  /// layers read; returns its #dsc.four_bit, or null when it stays.
  FourBitAttr quantize(func::FuncOp forward, BlockArgument arg) {
    ParamAttr param = paramOf(forward, arg);
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (!param || !forward.getArgAttr(arg.getArgNumber(), kFrozenAttrName) ||
        !type || type.getRank() != 2 || !type.getElementType().isF32() ||
        !param.getName().ends_with(".weight") ||
        skipped(param.getName().drop_back(strlen(".weight"))) ||
        arg.use_empty())
      return {};
    // One layout for all uses: nn.Linear's [out, in] (transpose_w) or
    // GPT-2 Conv1D's [in, out].
    bool conv1d = false;
    for (OpOperand &use : arg.getUses()) {
      auto linear = dyn_cast<LinearOp>(use.getOwner());
      if (!linear || use.getOperandNumber() != 1)
        return {};
      if (&use == &*arg.getUses().begin())
        conv1d = !linear.getTransposeW();
      else if (conv1d == linear.getTransposeW())
        return {};
    }
    // Stored [out, in] as bitsandbytes stores it, whatever the parameter's
    // layout: rows = out features, cols = in features.
    MLIRContext *ctx = &getContext();
    const int64_t rows = type.getDimSize(conv1d ? 1 : 0),
                  cols = type.getDimSize(conv1d ? 0 : 1);
    auto attr = FourBitAttr::get(ctx, format, rows, cols, blockSize,
                                 doubleQuant, conv1d);
    const int64_t bytes =
        ::dsc::quant::FourBitLayout::of(rows * cols, blockSize, doubleQuant)
            .bytes;
    arg.setType(RankedTensorType::get(
        {bytes}, IntegerType::get(ctx, 8, IntegerType::Unsigned)));
    for (Operation *user : llvm::to_vector(arg.getUsers())) {
      auto linear = cast<LinearOp>(user);
      OpBuilder b(linear);
      auto type = cast<RankedTensorType>(linear.getResult().getType());
      SmallVector<Operation *, 2> made = {b.create<Linear4bitOp>(
          linear.getLoc(), type, linear.getInput(), arg,
          b.getStringAttr(format), b.getI64IntegerAttr(rows),
          b.getI64IntegerAttr(cols), b.getI64IntegerAttr(blockSize),
          b.getBoolAttr(doubleQuant), b.getBoolAttr(true))};
      if (Value bias = linear.getBias())
        made.push_back(b.create<AddOp>(linear.getLoc(), type,
                                       made.back()->getResult(0), bias));
      // The layer provenance the memory report and the pipeline cut read.
      if (Attribute layer = linear->getAttr(kLayerAttrName))
        for (Operation *op : made)
          op->setAttr(kLayerAttrName, layer);
      Value y = made.back()->getResult(0);
      linear.replaceAllUsesWith(y);
      linear.erase();
    }
    return attr;
  }
};

} // namespace
