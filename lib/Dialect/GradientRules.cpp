//===- GradientRules.cpp - Reverse-mode rules of dsc ops ------------------===//
//
// GradientOpInterface implementations. Each rule emits the ops that compute
// operand gradients from result gradients; `-dsc-autodiff` only orders the
// calls and sums gradients of values with several uses.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"

using namespace mlir;
using namespace mlir::dsc;

/// The gradient of `v` when nothing flows into it: zeros of its type.
static Value gradOrZeros(OpBuilder &b, Location loc, Value grad, Value v) {
  if (grad)
    return grad;
  return b.create<FillOp>(loc, v.getType(), b.getF64FloatAttr(0.0));
}

void EmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<EmbeddingGradOp>(getLoc(), getTable().getType(),
                                              getIds(), resultGrads[0]);
}

void AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                          SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads[0] = dy;
  operandGrads[1] = getRhs().getType() == dy.getType()
                        ? dy
                        : b.create<ReduceToOp>(getLoc(), getRhs().getType(), dy)
                              .getResult();
}

/// Whether `v` is used only as the keys of fused attentions (and their
/// gradients). Softmax ignores a shift shared by all keys of a query, so a
/// bias added to such keys has a gradient of exactly zero:
/// d/db = sum_i q_i sum_j dS_ij, and each softmax row's dS sums to 0 (also
/// causal, block-sparse, padded or with dropout on the probabilities).
/// Rotary embeddings between the projection and the attention rotate the
/// bias by position, and then it does matter: such keys are not direct
/// operands.
static bool onlyAttentionKeys(Value v) {
  return !v.use_empty() && llvm::all_of(v.getUses(), [](OpOperand &use) {
    Operation *user = use.getOwner();
    if (auto att = dyn_cast<AttentionOp>(user))
      return use.get() == att.getK() && att.getQ() != use.get() &&
             att.getV() != use.get();
    if (auto grad = dyn_cast<AttentionGradOp>(user))
      return use.get() == grad.getK() && grad.getQ() != use.get() &&
             grad.getV() != use.get();
    return false;
  });
}

/// `biasGrad`, the gradient of the bias of a projection whose output is
/// split into the head `parts` (P equal slices), with the slices of parts
/// that are only attention keys set to exactly zero. Their rows' sum is
/// rounding noise, which Adam-like optimizers (1-bit compression above
/// all) would turn into full-size steps of a parameter the loss does not
/// depend on.
static Value zeroKeyBiasSlices(OpBuilder &b, Location loc, Value biasGrad,
                               ValueRange parts) {
  auto type = cast<RankedTensorType>(biasGrad.getType());
  const int64_t n = int64_t(parts.size());
  if (type.getRank() != 1 || n == 0 || type.getDimSize(0) % n != 0 ||
      llvm::none_of(parts, onlyAttentionKeys))
    return biasGrad;
  if (n == 1)
    return b.create<FillOp>(loc, type, b.getF64FloatAttr(0.0));
  auto pieceType = RankedTensorType::get({type.getDimSize(0) / n},
                                         type.getElementType());
  auto split = b.create<SplitOp>(loc, SmallVector<Type>(size_t(n), pieceType),
                                 biasGrad, b.getI64IntegerAttr(0));
  SmallVector<Value> pieces(split.getResults());
  for (auto [k, part] : llvm::enumerate(parts))
    if (onlyAttentionKeys(part))
      pieces[k] = b.create<FillOp>(loc, pieceType, b.getF64FloatAttr(0.0));
  return b.create<ConcatOp>(loc, type, pieces, b.getI64IntegerAttr(0));
}

/// The weight is frozen (4-bit storage has no gradient): only the input's.
void Linear4bitOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<Linear4bitGradInputOp>(
      getLoc(), getInput().getType(), resultGrads[0], getWeight(),
      getFormatAttr(), getRowsAttr(), getColsAttr(), getBlockSizeAttr(),
      getDoubleQuantAttr(), getTransposeWAttr());
}

void LinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads[0] = b.create<LinearGradInputOp>(loc, getInput().getType(), dy,
                                                getWeight(), getTransposeW());
  operandGrads[1] = b.create<LinearGradWeightOp>(
      loc, getWeight().getType(), getInput(), dy, getTransposeW());
  if (!getBias())
    return;
  Value biasGrad = b.create<ReduceToOp>(loc, getBias().getType(), dy);
  // Split into heads (unfused QKV, BERT's separate projections): the keys'
  // bias has no gradient.
  if (getResult().hasOneUse())
    if (auto split = dyn_cast<SplitHeadsOp>(*getResult().getUsers().begin()))
      biasGrad = zeroKeyBiasSlices(b, loc, biasGrad, split.getParts());
  operandGrads[2] = biasGrad;
}

void LayerNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  auto grad = b.create<LayerNormGradOp>(
      getLoc(), getInput().getType(), getGamma().getType(),
      getBeta().getType(), resultGrads[0], getInput(), getGamma(),
      /*residual_grad=*/Value(), getEpsilonAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getGammaGrad();
  operandGrads[2] = grad.getBetaGrad();
}

void RmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  auto grad = b.create<RmsNormGradOp>(getLoc(), getInput().getType(),
                                      getWeight().getType(), resultGrads[0],
                                      getInput(), getWeight(),
                                      /*residual_grad=*/Value(),
                                      getEpsilonAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getWeightGrad();
}

void AddRmsNormOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value dsum = resultGrads[0], dy = resultGrads[1];
  if (dy) {
    // The sum's total gradient: the RMSNorm's plus its other uses' (the
    // next residual add), summed in the RMSNorm backward's pass.
    auto grad = b.create<RmsNormGradOp>(getLoc(), getSum().getType(),
                                        getWeight().getType(), dy, getSum(),
                                        getWeight(), dsum, getEpsilonAttr());
    dsum = grad.getInputGrad();
    operandGrads[2] = grad.getWeightGrad();
  }
  operandGrads[0] = dsum;
  operandGrads[1] = dsum;
}

void GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                           SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] =
      b.create<GeluGradOp>(getLoc(), getInput().getType(), resultGrads[0],
                           getInput(), getApproximationAttr());
}

void RotaryOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  // A rotation's gradient is its transpose: the rotation the other way.
  auto grad = cast<RotaryOp>(b.clone(*getOperation()));
  grad->setOperand(0, resultGrads[0]);
  grad.setInverse(!getInverse());
  operandGrads[0] = grad.getResult();
}

void RepeatKvOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<RepeatKvGradOp>(
      getLoc(), getInput().getType(), resultGrads[0], getGroupsAttr());
}

void SiluOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                           SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<SiluGradOp>(getLoc(), getInput().getType(),
                                         resultGrads[0], getInput());
}

void MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                          SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads[0] = b.create<MulOp>(getLoc(), getLhs().getType(), dy, getRhs());
  operandGrads[1] = b.create<MulOp>(getLoc(), getRhs().getType(), dy, getLhs());
}

void ScaleOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<ScaleOp>(getLoc(), getInput().getType(),
                                      resultGrads[0], getFactorAttr());
}

void SoftcapOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<SoftcapGradOp>(getLoc(), getInput().getType(),
                                            resultGrads[0], getResult(),
                                            getCapAttr());
}

void SwigluOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  auto grad = b.create<SwigluGradOp>(
      getLoc(), TypeRange{getGate().getType(), getUp().getType()},
      resultGrads[0], getGate(), getUp());
  operandGrads[0] = grad.getGateGrad();
  operandGrads[1] = grad.getUpGrad();
}

void DropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // Same stream, same mask: the gradient is the dropout of the gradient.
  operandGrads[0] = b.create<DropoutOp>(getLoc(), getInput().getType(),
                                        resultGrads[0], getRateAttr(),
                                        getStreamAttr());
}

void SplitHeadsOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> parts;
  for (auto [grad, part] : llvm::zip(resultGrads, getParts()))
    parts.push_back(gradOrZeros(b, getLoc(), grad, part));
  operandGrads[0] =
      b.create<MergeHeadsOp>(getLoc(), getInput().getType(), parts);
}

void MergeHeadsOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  auto partType = cast<RankedTensorType>(getParts().front().getType());
  SmallVector<Type> types(getParts().size(), partType);
  auto split = b.create<SplitHeadsOp>(getLoc(), types, resultGrads[0],
                                      partType.getShape()[1]);
  for (auto [i, part] : llvm::enumerate(split.getParts()))
    operandGrads[i] = part;
}

void BatchMatmulOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  // C = alpha * op(A) @ op(B). Each case writes dA and dB as one product
  // whose own transpose flags absorb the transposes of A, B and dC.
  Location loc = getLoc();
  Value dc = resultGrads[0], a = getLhs(), bm = getRhs();
  auto alpha = getAlphaAttr();
  auto product = [&](Type type, Value x, Value y, bool tx, bool ty) -> Value {
    return b.create<BatchMatmulOp>(loc, type, x, y, b.getBoolAttr(tx),
                                   b.getBoolAttr(ty), alpha);
  };
  Type ta = a.getType(), tb = bm.getType();
  switch ((getTransposeA() ? 2 : 0) | (getTransposeB() ? 1 : 0)) {
  case 0: // C = A B
    operandGrads[0] = product(ta, dc, bm, false, true);
    operandGrads[1] = product(tb, a, dc, true, false);
    break;
  case 1: // C = A B^T
    operandGrads[0] = product(ta, dc, bm, false, false);
    operandGrads[1] = product(tb, dc, a, true, false);
    break;
  case 2: // C = A^T B
    operandGrads[0] = product(ta, bm, dc, false, true);
    operandGrads[1] = product(tb, a, dc, false, false);
    break;
  default: // C = A^T B^T
    operandGrads[0] = product(ta, bm, dc, true, true);
    operandGrads[1] = product(tb, dc, a, true, true);
    break;
  }
}

void SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // Masked positions (causal, layout, key padding) have probability 0, so
  // their gradient is 0 as well: the backward needs no mask.
  operandGrads[0] =
      b.create<SoftmaxGradOp>(getLoc(), getInput().getType(), resultGrads[0],
                              getResult(), getScaleAttr());
}

void CrossEntropyOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<CrossEntropyGradOp>(
      getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
      getLabels(), getIgnoreIndexAttr(), getClassesAttr());
}

void SigmoidGateOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  auto grad = b.create<SigmoidGateGradOp>(
      getLoc(), TypeRange{getGate().getType(), getInput().getType()},
      resultGrads[0], getGate(), getInput());
  operandGrads[0] = grad.getGateGrad();
  operandGrads[1] = grad.getInputGrad();
}

void ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  auto split = b.create<SplitOp>(getLoc(), getInputs().getTypes(),
                                 resultGrads[0], getAxisAttr());
  for (auto [i, piece] : llvm::enumerate(split.getPieces()))
    operandGrads[i] = piece;
}

void SplitOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> pieces;
  for (auto [grad, piece] : llvm::zip(resultGrads, getPieces()))
    pieces.push_back(gradOrZeros(b, getLoc(), grad, piece));
  operandGrads[0] = b.create<ConcatOp>(getLoc(), getInput().getType(), pieces,
                                       getAxisAttr());
}

void PackOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                           SmallVectorImpl<Value> &operandGrads) {
  auto unpack = b.create<UnpackOp>(getLoc(), getInputs().getTypes(),
                                   resultGrads[0], getChunksAttr());
  for (auto [i, part] : llvm::enumerate(unpack.getResults()))
    operandGrads[i] = part;
}

void UnpackOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  SmallVector<Value> parts;
  for (auto [grad, part] : llvm::zip(resultGrads, getResults()))
    parts.push_back(gradOrZeros(b, getLoc(), grad, part));
  operandGrads[0] = b.create<PackOp>(getLoc(), getInput().getType(), parts,
                                     getChunksAttr());
}

void BiasSplitHeadsOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  SmallVector<Value> parts;
  for (auto [grad, part] : llvm::zip(resultGrads, getParts()))
    parts.push_back(gradOrZeros(b, loc, grad, part));
  Value merged = b.create<MergeHeadsOp>(loc, getInput().getType(), parts);
  operandGrads[0] = merged;
  operandGrads[1] = zeroKeyBiasSlices(
      b, loc, b.create<ReduceToOp>(loc, getBias().getType(), merged),
      getParts());
}

void BiasGeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  auto grad = b.create<BiasGeluGradOp>(
      getLoc(), getInput().getType(), getBias().getType(), resultGrads[0],
      getInput(), getBias(), getApproximationAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getBiasGrad();
}

void BiasDropoutAddOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // Same stream, same mask: the input gradient is the dropout of the
  // result gradient, the bias gradient its sum over rows.
  auto grad = b.create<DropoutBiasGradOp>(
      getLoc(), getInput().getType(), getBias().getType(), resultGrads[0],
      getRateAttr(), getStreamAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getBiasGrad();
  operandGrads[2] = resultGrads[0];
}

void BiasDropoutAddLayerNormOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> resultGrads,
    SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Value dsum = resultGrads[0], dy = resultGrads[1];
  if (dy) {
    // The sum's total gradient: the LayerNorm's plus its other uses' (the
    // next residual add), summed in the LayerNorm backward's pass.
    auto ln = b.create<LayerNormGradOp>(
        loc, getSum().getType(), getGamma().getType(), getBeta().getType(),
        dy, getSum(), getGamma(), dsum, getEpsilonAttr());
    dsum = ln.getInputGrad();
    operandGrads[3] = ln.getGammaGrad();
    operandGrads[4] = ln.getBetaGrad();
  }
  if (!dsum)
    return;
  auto grad = b.create<DropoutBiasGradOp>(loc, getInput().getType(),
                                          getBias().getType(), dsum,
                                          getRateAttr(), getStreamAttr());
  operandGrads[0] = grad.getInputGrad();
  operandGrads[1] = grad.getBiasGrad();
  operandGrads[2] = dsum;
}

void SoftmaxDropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Location loc = getLoc();
  Type type = getInput().getType();
  if (!resultGrads[1]) { // the usual case: only the dropped output is used
    operandGrads[0] = b.create<SoftmaxDropoutGradOp>(
        loc, type, resultGrads[0], getProbs(), getResult(), getScaleAttr(),
        getRateAttr());
    return;
  }
  // The probabilities are used directly as well: sum both gradients.
  Value g = resultGrads[1];
  if (resultGrads[0])
    g = b.create<AddOp>(loc, type, g,
                        b.create<DropoutOp>(loc, type, resultGrads[0],
                                            getRateAttr(), getStreamAttr()));
  operandGrads[0] =
      b.create<SoftmaxGradOp>(loc, type, g, getProbs(), getScaleAttr());
}

void AttentionOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  // The verifier allows only dsc.attention_grad to read the lse, so no
  // gradient reaches it; the backward recomputes the probabilities from
  // q, k and the lse instead of keeping them.
  auto grad = b.create<AttentionGradOp>(
      getLoc(), TypeRange{getQ().getType(), getK().getType(), getV().getType()},
      resultGrads[0], getQ(), getK(),
      getV(), getResult(), getLse(), getKeyMask(), getScaleAttr(),
      getCausalAttr(),
      getRateAttr(), getStreamAttr(), getLayoutAttr());
  operandGrads[0] = grad.getQGrad();
  operandGrads[1] = grad.getKGrad();
  operandGrads[2] = grad.getVGrad();
}

void TpCopyOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  MLIRContext *ctx = getContext();
  operandGrads[0] = b.create<AllReduceOp>(
      getLoc(), getType(), resultGrads[0],
      ReduceKindAttr::get(ctx, ReduceKind::sum), getAxisAttr());
}

void TpReduceOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = resultGrads[0];
}

// Expert rows move without change: the gradient moves back the other way.
void MoeExchangeOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<MoeExchangeOp>(
      getLoc(), getInput().getType(), resultGrads[0], getCounts(),
      getRecvCounts(), b.getBoolAttr(!getReverse()), getAxisAttr());
}

void VocabEmbeddingOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<VocabEmbeddingGradOp>(
      getLoc(), getTable().getType(), getIds(), resultGrads[0],
      getVocabAttr(), getAxisAttr());
}

void VocabCrossEntropyOp::buildGradient(OpBuilder &b,
                                        ArrayRef<Value> resultGrads,
                                        SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<VocabCrossEntropyGradOp>(
      getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
      getLabels(), getVocabAttr(), getIgnoreIndexAttr(), getAxisAttr());
}

//===----------------------------------------------------------------------===//
// Mixture of experts
//===----------------------------------------------------------------------===//

void MoeTopkOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  // The expert choices are integers: only the weights carry a gradient.
  if (!resultGrads[0])
    return;
  operandGrads[0] = b.create<MoeTopkGradOp>(
      getLoc(), getLogits().getType(), resultGrads[0], getWeights(),
      getExperts(), getNormalize() ? Value() : getLogits());
}

void MoeDispatchOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  Value dRows = resultGrads[0];
  operandGrads[0] = b.create<MoeCombineOp>(getLoc(), getInput().getType(),
                                           dRows, getSlots(), getWeights());
  if (getWeights())
    operandGrads[2] = b.create<MoeSlotDotOp>(getLoc(), getWeights().getType(),
                                             getInput(), dRows, getSlots());
}

void MoeCombineOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  operandGrads[0] = b.create<MoeDispatchOp>(getLoc(), getRows().getType(), dy,
                                            getSlots(), getWeights());
  if (getWeights())
    operandGrads[2] = b.create<MoeSlotDotOp>(getLoc(), getWeights().getType(),
                                             dy, getRows(), getSlots());
}

void GroupedLinearOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  Value dy = resultGrads[0];
  // dx_e = dy_e @ W_e^T: the same stacked weight read the other way round.
  operandGrads[0] =
      b.create<GroupedLinearOp>(getLoc(), getInput().getType(), dy, getWeight(),
                                getCounts(), b.getBoolAttr(!getTransposeW()));
  operandGrads[1] = b.create<GroupedLinearGradWeightOp>(
      getLoc(), getWeight().getType(), getInput(), dy, getCounts(),
      getTransposeWAttr());
}

void MoeLoadOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  operandGrads[0] = b.create<MoeLoadGradOp>(getLoc(), getLogits().getType(),
                                            resultGrads[0], getLogits());
}

void MoeBalanceLossOp::buildGradient(OpBuilder &b, ArrayRef<Value> resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  Value dLoad = b.create<MoeBalanceLossGradOp>(
      getLoc(), getLoads().front().getType(), resultGrads[0], getLoads(),
      getScaleAttr());
  for (Value &g : operandGrads)
    g = dLoad;
}
