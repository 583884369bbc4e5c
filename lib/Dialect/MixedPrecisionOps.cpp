//===- MixedPrecisionOps.cpp - Verifiers of the mixed-precision ops -------===//
//
// dsc.convert, dsc.check_finite, dsc.loss_scale, dsc.unscale_clip and
// dsc.update_loss_scale: the ops -dsc-mixed-precision and the fp16 loss
// scaler of -dsc-build-train-step insert. Their semantics are documented in
// DscOps.td; their kernels are in lib/Kernels (convert: Elementwise,
// the others: Optimizers).
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The scaler state is a tensor<3xf32>: [scale, hysteresis used, good steps].
LogicalResult verifyScalerState(Operation *op, Value state, StringRef what) {
  auto type = cast<RankedTensorType>(state.getType());
  if (type.getShape() != ArrayRef<int64_t>{3})
    return op->emitOpError("expects ")
           << what << " to be the loss scaler state tensor<3xf32>, got "
           << type;
  return success();
}

LogicalResult verifyPositive(Operation *op, StringRef name, double v) {
  if (!(v > 0))
    return op->emitOpError("expects ") << name << " > 0, got " << v;
  return success();
}

} // namespace

LogicalResult ConvertOp::verify() {
  RankedTensorType from = getInput().getType(), to = getResult().getType();
  if (from.getShape() != to.getShape())
    return emitOpError("changes the shape: ") << from << " -> " << to;
  if (from.getElementType() == to.getElementType())
    return emitOpError("converts ") << from.getElementType()
                                    << " to itself";
  return success();
}

LogicalResult CheckFiniteOp::verify() {
  if (getInputs().empty())
    return emitOpError("expects at least one input");
  return success();
}

LogicalResult LossScaleOp::verify() {
  if (failed(verifyScalerState(*this, getState(), "the state")) ||
      failed(verifyPositive(*this, "initial_scale",
                            getInitialScale().convertToDouble())) ||
      failed(verifyPositive(*this, "multiplier",
                            getMultiplier().convertToDouble())))
    return failure();
  return success();
}

LogicalResult UnscaleClipOp::verify() {
  if (getMaxNorm().convertToDouble() < 0)
    return emitOpError("expects max_norm >= 0 (0: no clipping)");
  return success();
}

LogicalResult UpdateLossScaleOp::verify() {
  if (failed(verifyScalerState(*this, getState(), "the state")) ||
      failed(verifyScalerState(*this, getNewState(), "the result")) ||
      failed(verifyPositive(*this, "initial_scale",
                            getInitialScale().convertToDouble())) ||
      failed(verifyPositive(*this, "min_scale",
                            getMinScale().convertToDouble())))
    return failure();
  if (getScaleWindow() < 1)
    return emitOpError("expects scale_window >= 1, got ") << getScaleWindow();
  if (getHysteresis() < 1)
    return emitOpError("expects hysteresis >= 1, got ") << getHysteresis();
  return success();
}
