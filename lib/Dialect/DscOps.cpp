//===- DscOps.cpp - dsc dialect, attributes and op verifiers -------------===//
//
// Registers the dialect and implements the op verifiers that ODS constraints
// cannot state (the norm family's rules are constraints in DscOps.td; the
// predicates they and the native traits call are defined here). Shape rules
// are small free functions so the frontend can reuse them; each diagnostic
// names the op (MLIR prefixes it) and prints the offending shapes.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"
#include "dsc/Program/FourBitLayout.h"

#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>

using namespace mlir;
using namespace mlir::dsc;

#include "dsc/Dialect/DscDialect.cpp.inc"
#include "dsc/Dialect/DscEnums.cpp.inc"
#include "dsc/Dialect/DscInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dsc/Dialect/DscAttrs.cpp.inc"

void DscDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dsc/Dialect/DscOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dsc/Dialect/DscAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Shape helpers
//===----------------------------------------------------------------------===//

namespace {

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += ", ";
    s += ShapedType::isDynamic(d) ? "?" : std::to_string(d);
  }
  return s + "]";
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

LogicalResult expectShape(Operation *op, StringRef what, ArrayRef<int64_t> got,
                          ArrayRef<int64_t> want) {
  if (got == want)
    return success();
  return op->emitOpError() << what << " has shape " << shapeStr(got)
                           << ", expected " << shapeStr(want);
}

/// True when `rhs` broadcasts to `lhs` numpy-style (right-aligned, 1 or equal).
bool broadcastsTo(ArrayRef<int64_t> rhs, ArrayRef<int64_t> lhs) {
  if (rhs.size() > lhs.size())
    return false;
  size_t offset = lhs.size() - rhs.size();
  for (auto [i, d] : llvm::enumerate(rhs))
    if (d != 1 && d != lhs[offset + i])
      return false;
  return true;
}

} // namespace

LogicalResult mlir::dsc::verifyOneHalfFormat(Operation *op) {
  Type half;
  SmallVector<Type> types(op->getOperandTypes());
  llvm::append_range(types, op->getResultTypes());
  for (Type t : types) {
    auto type = dyn_cast<RankedTensorType>(t);
    if (!type || !isa<FloatType>(type.getElementType()) ||
        type.getElementType().isF32())
      continue;
    if (!half)
      half = type.getElementType();
    else if (type.getElementType() != half)
      return op->emitOpError("mixes element types ")
             << half << " and " << type.getElementType();
  }
  return success();
}

int64_t mlir::dsc::staticElementCount(Value v) {
  auto t = dyn_cast<ShapedType>(v.getType());
  return t && t.hasStaticShape() ? t.getNumElements() : 0;
}

bool mlir::dsc::isPerFeature(Value v, Value rows) {
  ArrayRef<int64_t> x = shapeOf(rows);
  return !x.empty() && shapeOf(v) == x.take_back();
}

bool mlir::dsc::isPerRow(Value v, Value rows) {
  ArrayRef<int64_t> x = shapeOf(rows);
  return !x.empty() && shapeOf(v) == x.drop_back();
}

bool mlir::dsc::isAbsentOrShapedLike(Value v, Value rows) {
  return !v || shapeOf(v) == shapeOf(rows);
}

FailureOr<SmallVector<int64_t>>
mlir::dsc::inferLinearShape(ArrayRef<int64_t> input, ArrayRef<int64_t> weight,
                            bool transposeW, std::string &error) {
  if (input.empty() || weight.size() != 2) {
    error = "expects input of rank >= 1 and a rank-2 weight, got input " +
            shapeStr(input) + " and weight " + shapeStr(weight);
    return failure();
  }
  int64_t k = transposeW ? weight[1] : weight[0];
  int64_t n = transposeW ? weight[0] : weight[1];
  if (input.back() != k) {
    error = "input " + shapeStr(input) + " does not match weight " +
            shapeStr(weight) + (transposeW ? " (transpose_w)" : "") +
            ": contraction sizes " + std::to_string(input.back()) + " vs " +
            std::to_string(k);
    return failure();
  }
  SmallVector<int64_t> result(input.begin(), input.end());
  result.back() = n;
  return result;
}

//===----------------------------------------------------------------------===//
// Verifiers
//===----------------------------------------------------------------------===//

LogicalResult FillOp::verify() { return success(); }

LogicalResult IotaOp::verify() {
  if (getType().getRank() != 1)
    return emitOpError("expects a rank-1 result, got ")
           << shapeStr(getType().getShape());
  return success();
}

LogicalResult EmbeddingOp::verify() {
  ArrayRef<int64_t> table = shapeOf(getTable()), ids = shapeOf(getIds());
  if (table.size() != 2)
    return emitOpError("expects a rank-2 table, got ") << shapeStr(table);
  SmallVector<int64_t> want(ids.begin(), ids.end());
  want.push_back(table[1]);
  return expectShape(*this, "result", shapeOf(getResult()), want);
}

LogicalResult AddOp::verify() {
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  if (!broadcastsTo(rhs, lhs))
    return emitOpError("rhs ") << shapeStr(rhs) << " does not broadcast to lhs "
                               << shapeStr(lhs);
  return expectShape(*this, "result", shapeOf(getResult()), lhs);
}

LogicalResult LinearOp::verify() {
  std::string error;
  auto shape = inferLinearShape(shapeOf(getInput()), shapeOf(getWeight()),
                                getTransposeW(), error);
  if (failed(shape))
    return emitOpError() << error;
  if (getBias()) {
    SmallVector<int64_t> biasShape = {shape->back()};
    if (failed(expectShape(*this, "bias", shapeOf(getBias()), biasShape)))
      return failure();
  }
  return expectShape(*this, "result", shapeOf(getResult()), *shape);
}

/// The 4-bit weight of dsc.linear_4bit and its input gradient: a known
/// format, a rows x cols weight whose blob has the bytes FourBitLayout
/// gives, and `x` [..., K] -> [..., N] (`grad`: [..., N] -> [..., K]).
static LogicalResult verifyFourBitLinear(Operation *op, Value x,
                                         TypedValue<RankedTensorType> weight,
                                         StringRef format, int64_t rows,
                                         int64_t cols, int64_t blockSize,
                                         bool doubleQuant, bool transW,
                                         Value result, bool grad) {
  ::dsc::quant::FourBitFormat f;
  if (!::dsc::quant::parseFourBitFormat(format.str(), f))
    return op->emitOpError("expects format \"nf4\" or \"fp4\", got \"")
           << format << "\"";
  if (rows <= 0 || cols <= 0 || blockSize <= 0 || blockSize % 2 != 0)
    return op->emitOpError("expects positive rows and cols and an even "
                           "positive block_size, got ")
           << rows << " x " << cols << " in blocks of " << blockSize;
  const int64_t bytes =
      ::dsc::quant::FourBitLayout::of(rows * cols, blockSize, doubleQuant).bytes;
  if (weight.getType().getDimSize(0) != bytes)
    return op->emitOpError("weight of ")
           << weight.getType().getDimSize(0) << " bytes does not hold a "
           << rows << " x " << cols << " " << format << " weight in blocks of "
           << blockSize << (doubleQuant ? " with" : " without")
           << " double quantization (" << bytes << " bytes)";
  const int64_t k = transW ? cols : rows, n = transW ? rows : cols;
  const int64_t in = grad ? n : k, out = grad ? k : n;
  ArrayRef<int64_t> xs = shapeOf(x);
  if (xs.empty() || xs.back() != in)
    return op->emitOpError(grad ? "gradient " : "input ")
           << shapeStr(xs) << " does not match the " << rows << " x " << cols
           << " weight" << (transW ? " (transposed)" : "");
  SmallVector<int64_t> want(xs.begin(), xs.end());
  want.back() = out;
  return expectShape(op, "result", shapeOf(result), want);
}

LogicalResult Linear4bitOp::verify() {
  return verifyFourBitLinear(*this, getInput(), getWeight(), getFormat(),
                             getRows(), getCols(), getBlockSize(),
                             getDoubleQuant(), getTransposeW(), getResult(),
                             /*grad=*/false);
}

LogicalResult Linear4bitGradInputOp::verify() {
  return verifyFourBitLinear(*this, getGrad(), getWeight(), getFormat(),
                             getRows(), getCols(), getBlockSize(),
                             getDoubleQuant(), getTransposeW(), getResult(),
                             /*grad=*/true);
}

/// A bias [N] for an input [..., N].
static LogicalResult verifyBias(Operation *op, Value input, Value bias) {
  ArrayRef<int64_t> x = shapeOf(input);
  if (x.empty())
    return op->emitOpError("expects an input of rank >= 1");
  SmallVector<int64_t> want = {x.back()};
  return expectShape(op, "bias", shapeOf(bias), want);
}

/// The rate of an op that only scales by a mask it reads (the ops that draw
/// one verify theirs through StochasticOpInterface).
static LogicalResult verifyRate(Operation *op, APFloat rate) {
  double r = rate.convertToDouble();
  if (!(r >= 0 && r < 1)) // NaN too
    return op->emitOpError("expects rate in [0, 1), got ") << r;
  return success();
}

LogicalResult BiasGeluOp::verify() {
  if (failed(verifyBias(*this, getInput(), getBias())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult BiasGeluGradOp::verify() {
  if (failed(verifyBias(*this, getInput(), getBias())) ||
      failed(expectShape(*this, "gradient", shapeOf(getGrad()),
                         shapeOf(getInput()))) ||
      failed(expectShape(*this, "bias gradient", shapeOf(getBiasGrad()),
                         shapeOf(getBias()))))
    return failure();
  return expectShape(*this, "input gradient", shapeOf(getInputGrad()),
                     shapeOf(getInput()));
}

LogicalResult BiasDropoutAddOp::verify() {
  if (failed(verifyBias(*this, getInput(), getBias())) ||
      failed(expectShape(*this, "residual", shapeOf(getResidual()),
                         shapeOf(getInput()))))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult DropoutBiasGradOp::verify() {
  if (failed(verifyBias(*this, getGrad(), getBiasGrad())))
    return failure();
  return expectShape(*this, "input gradient", shapeOf(getInputGrad()),
                     shapeOf(getGrad()));
}

LogicalResult GeluOp::verify() {
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult DropoutOp::verify() {
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

void DropoutOp::disableDropout(RewriterBase &rewriter) {
  rewriter.replaceOp(*this, getInput());
}

/// [B, T, P*H*D] <-> P x [B, H, T, D].
static LogicalResult verifyHeads(Operation *op, Value merged,
                                 ValueRange parts, int64_t numHeads) {
  ArrayRef<int64_t> m = shapeOf(merged);
  if (parts.empty())
    return op->emitOpError("expects at least one part");
  if (m.size() != 3)
    return op->emitOpError("expects a [B, T, C] tensor, got ") << shapeStr(m);
  int64_t numParts = parts.size();
  if (numHeads <= 0 || m[2] % (numParts * numHeads) != 0)
    return op->emitOpError("width ")
           << m[2] << " is not divisible into " << numParts << " part(s) of "
           << numHeads << " heads";
  SmallVector<int64_t> want = {m[0], numHeads, m[1],
                               m[2] / (numParts * numHeads)};
  for (Value part : parts)
    if (failed(expectShape(op, "part", shapeOf(part), want)))
      return failure();
  return success();
}

LogicalResult SplitHeadsOp::verify() {
  return verifyHeads(*this, getInput(), getParts(), getNumHeads());
}

LogicalResult MergeHeadsOp::verify() {
  ArrayRef<int64_t> part0 = shapeOf(getParts().front());
  if (part0.size() != 4)
    return emitOpError("expects [B, H, T, D] parts, got ") << shapeStr(part0);
  return verifyHeads(*this, getResult(), getParts(), part0[1]);
}

/// `pieces` concatenated along `axis` give `whole`.
static LogicalResult verifyConcatShapes(Operation *op, ValueRange pieces,
                                        Value whole, int64_t axis) {
  ArrayRef<int64_t> w = shapeOf(whole);
  if (pieces.empty())
    return op->emitOpError("expects at least one piece");
  if (axis < 0 || axis >= int64_t(w.size()))
    return op->emitOpError("axis ") << axis << " is out of range for "
                                    << shapeStr(w);
  int64_t total = 0;
  for (Value piece : pieces) {
    ArrayRef<int64_t> p = shapeOf(piece);
    SmallVector<int64_t> want(w.begin(), w.end());
    if (p.size() == w.size())
      want[axis] = p[axis];
    if (failed(expectShape(op, "piece", p, want)))
      return failure();
    total += p[axis];
  }
  if (total != w[axis])
    return op->emitOpError("pieces sum to ")
           << total << " along axis " << axis << ", expected " << w[axis];
  return success();
}

LogicalResult ConcatOp::verify() {
  return verifyConcatShapes(*this, getInputs(), getResult(), getAxis());
}

LogicalResult SplitOp::verify() {
  return verifyConcatShapes(*this, getPieces(), getInput(), getAxis());
}

/// pack/unpack: one 1-D tensor holding every piece's elements, all of one
/// element type.
static LogicalResult verifyPacked(Operation *op, ValueRange pieces,
                                  Value flat, int64_t chunks) {
  auto flatType = cast<RankedTensorType>(flat.getType());
  if (flatType.getRank() != 1)
    return op->emitOpError("the packed tensor must be 1-D, got ")
           << flatType;
  if (chunks < 1)
    return op->emitOpError("chunks must be >= 1, got ") << chunks;
  int64_t total = 0;
  for (Value piece : pieces) {
    auto type = cast<RankedTensorType>(piece.getType());
    if (type.getElementType() != flatType.getElementType())
      return op->emitOpError("element types differ: ")
             << type << " and " << flatType;
    if (type.getNumElements() % chunks != 0)
      return op->emitOpError() << type << " does not split into " << chunks
                               << " equal chunks";
    total += type.getNumElements();
  }
  if (total != flatType.getNumElements())
    return op->emitOpError("the pieces hold ")
           << total << " elements but the packed tensor "
           << flatType.getNumElements();
  return success();
}

LogicalResult PackOp::verify() {
  if (getInputs().empty())
    return emitOpError("needs at least one input");
  return verifyPacked(*this, getInputs(), getResult(), getChunks());
}

LogicalResult UnpackOp::verify() {
  if (getResults().empty())
    return emitOpError("needs at least one result");
  return verifyPacked(*this, getResults(), getInput(), getChunks());
}

LogicalResult BiasSplitHeadsOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  SmallVector<int64_t> biasShape = {x.empty() ? 0 : x.back()};
  if (failed(expectShape(*this, "bias", shapeOf(getBias()), biasShape)))
    return failure();
  return verifyHeads(*this, getInput(), getParts(), getNumHeads());
}

LogicalResult BatchMatmulOp::verify() {
  ArrayRef<int64_t> a = shapeOf(getLhs()), b = shapeOf(getRhs());
  if (a.size() < 3 || a.size() != b.size())
    return emitOpError("expects operands of equal rank >= 3, got ")
           << shapeStr(a) << " and " << shapeStr(b);
  size_t batch = a.size() - 2;
  if (a.take_front(batch) != b.take_front(batch))
    return emitOpError("batch dimensions differ: ")
           << shapeStr(a) << " vs " << shapeStr(b);
  int64_t m = getTransposeA() ? a[batch + 1] : a[batch];
  int64_t ka = getTransposeA() ? a[batch] : a[batch + 1];
  int64_t kb = getTransposeB() ? b[batch + 1] : b[batch];
  int64_t n = getTransposeB() ? b[batch] : b[batch + 1];
  if (ka != kb)
    return emitOpError("contraction sizes differ: ")
           << shapeStr(a) << (getTransposeA() ? "^T" : "") << " @ "
           << shapeStr(b) << (getTransposeB() ? "^T" : "");
  SmallVector<int64_t> want(a.take_front(batch));
  want.append({m, n});
  return expectShape(*this, "result", shapeOf(getResult()), want);
}

/// A block-sparse `layout` on scores [..., H, T, T] (or attention of H
/// query heads over T tokens): T is the layout's tokens, its heads 1 or H,
/// and a causal op's layout has no block above the diagonal.
static LogicalResult verifyBlockLayout(Operation *op, BlockLayoutAttr layout,
                                       int64_t heads, int64_t tq, int64_t tk,
                                       bool causal) {
  if (!layout)
    return success();
  if (tq != layout.getTokens() || tk != layout.getTokens())
    return op->emitOpError("block layout covers ")
           << layout.getTokens() << " tokens (" << layout.getBlocks()
           << " blocks of " << layout.getBlock() << "), the scores are "
           << tq << " x " << tk;
  if (layout.getHeads() != 1 && layout.getHeads() != heads)
    return op->emitOpError("block layout has ")
           << layout.getHeads() << " heads, expected 1 or " << heads;
  if (causal && !layout.isBlockCausal())
    return op->emitOpError(
        "causal attention needs a block-causal layout (no block above the "
        "diagonal)");
  return success();
}

/// The block layout of a softmax over x: rank >= 3 ([..., H, T, T]).
static LogicalResult verifySoftmaxLayout(Operation *op, BlockLayoutAttr layout,
                                         ArrayRef<int64_t> x, bool causal) {
  if (!layout)
    return success();
  if (x.size() < 3)
    return op->emitOpError("a block layout needs scores [..., H, T, T], got ")
           << shapeStr(x);
  return verifyBlockLayout(op, layout, x[x.size() - 3], x[x.size() - 2],
                           x.back(), causal);
}

/// A key padding mask of scores [B, ..., Tq, Tk] (or of attention heads
/// [B, H, T, D], Tk = T): [B, Tk].
static LogicalResult verifyKeyMask(Operation *op, Value mask,
                                   ArrayRef<int64_t> x, int64_t tk) {
  if (!mask)
    return success();
  if (x.size() < 3)
    return op->emitOpError("a key_mask needs scores [B, ..., Tq, Tk], got ")
           << shapeStr(x);
  ArrayRef<int64_t> m = shapeOf(mask);
  if (m.size() != 2 || m[0] != x[0] || m[1] != tk)
    return op->emitOpError("key_mask ")
           << shapeStr(m) << " must be [B, Tk] = [" << x[0] << ", " << tk
           << "]";
  return success();
}

LogicalResult SoftmaxOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.empty() || (getCausal() && x.size() < 2))
    return emitOpError("expects rank >= 1 (>= 2 when causal), got ")
           << shapeStr(x);
  if (getCausal() && x[x.size() - 2] > x.back())
    return emitOpError("causal mask needs Tq <= Tk, got ") << shapeStr(x);
  if (failed(verifySoftmaxLayout(*this, getLayoutAttr(), x, getCausal())) ||
      failed(verifyKeyMask(*this, getKeyMask(), x, x.back())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), x);
}

LogicalResult SoftmaxDropoutOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.empty() || (getCausal() && x.size() < 2))
    return emitOpError("expects rank >= 1 (>= 2 when causal), got ")
           << shapeStr(x);
  if (getCausal() && x[x.size() - 2] > x.back())
    return emitOpError("causal mask needs Tq <= Tk, got ") << shapeStr(x);
  if (failed(verifySoftmaxLayout(*this, getLayoutAttr(), x, getCausal())) ||
      failed(verifyKeyMask(*this, getKeyMask(), x, x.back())) ||
      failed(expectShape(*this, "probs", shapeOf(getProbs()), x)))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), x);
}

LogicalResult SoftmaxDropoutGradOp::verify() {
  if (failed(verifyRate(*this, getRate())) ||
      failed(expectShape(*this, "gradient", shapeOf(getGrad()),
                         shapeOf(getProbs()))) ||
      failed(expectShape(*this, "dropped", shapeOf(getDropped()),
                         shapeOf(getProbs()))))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getProbs()));
}

/// q and the `sameAsQ` tensors [B, H, T, D]; the `keyValue` tensors
/// [B, KV, T, D] with H a multiple of KV (grouped-query attention); lse
/// [B, H, T].
static LogicalResult
verifyAttentionShapes(Operation *op, Value q,
                      ArrayRef<std::pair<StringRef, Value>> sameAsQ,
                      ArrayRef<std::pair<StringRef, Value>> keyValue,
                      Value lse) {
  ArrayRef<int64_t> x = shapeOf(q);
  if (x.size() != 4)
    return op->emitOpError("expects q of rank 4 [B, H, T, D], got ")
           << shapeStr(x);
  for (auto [name, v] : sameAsQ)
    if (failed(expectShape(op, name, shapeOf(v), x)))
      return failure();
  ArrayRef<int64_t> kv = shapeOf(keyValue.front().second);
  if (kv.size() != 4 || kv[0] != x[0] || kv[2] != x[2] || kv[3] != x[3] ||
      kv[1] <= 0 || x[1] % kv[1] != 0)
    return op->emitOpError("k ")
           << shapeStr(kv) << " does not match q " << shapeStr(x)
           << " (expected [B, KV, T, D] with KV dividing the " << x[1]
           << " query heads)";
  for (auto [name, v] : keyValue)
    if (failed(expectShape(op, name, shapeOf(v), kv)))
      return failure();
  return expectShape(op, "lse", shapeOf(lse), x.drop_back());
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttentionShapes(*this, getQ(), {{"result", getResult()}},
                                   {{"k", getK()}, {"v", getV()}},
                                   getLse())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(verifyBlockLayout(*this, getLayoutAttr(), q[1], q[2], q[2],
                               getCausal())) ||
      failed(verifyKeyMask(*this, getKeyMask(), q, q[2])))
    return failure();
  // The lse has no gradient rule: a forward use of it would be silently
  // non-differentiated. A pipeline stage's forward returns it for its
  // backward (-dsc-split-stage-step).
  for (Operation *user : getLse().getUsers())
    if (!isa<AttentionGradOp, func::ReturnOp>(user))
      return emitOpError("lse may only be read by dsc.attention_grad, not by ")
             << user->getName();
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttentionShapes(
          *this, getQ(),
          {{"gradient", getGrad()}, {"out", getOut()}, {"q_grad", getQGrad()}},
          {{"k", getK()},
           {"v", getV()},
           {"k_grad", getKGrad()},
           {"v_grad", getVGrad()}},
          getLse())))
    return failure();
  ArrayRef<int64_t> q = shapeOf(getQ());
  if (failed(verifyKeyMask(*this, getKeyMask(), q, q[2])))
    return failure();
  return verifyBlockLayout(*this, getLayoutAttr(), q[1], q[2], q[2],
                           getCausal());
}

//===----------------------------------------------------------------------===//
// LLaMA: rotary embeddings, grouped-query heads, SwiGLU
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput());
  if (x.size() != 4 || x[3] % 2 != 0)
    return emitOpError("expects [B, H, T, D] heads with an even D, got ")
           << shapeStr(x);
  if (getTheta().convertToDouble() <= 1.0)
    return emitOpError("theta must be > 1, got ")
           << getTheta().convertToDouble();
  if (getScaling() != RopeScaling::none && getFactor().convertToDouble() < 1.0)
    return emitOpError("factor must be >= 1, got ")
           << getFactor().convertToDouble();
  if (getScaling() == RopeScaling::llama3 &&
      (getLowFreqFactor().convertToDouble() <= 0.0 ||
       getHighFreqFactor().convertToDouble() <=
           getLowFreqFactor().convertToDouble() ||
       getOriginalMaxPositions() <= 0))
    return emitOpError("llama3 scaling needs 0 < low_freq_factor < "
                       "high_freq_factor and original_max_positions > 0");
  return expectShape(*this, "result", shapeOf(getResult()), x);
}

/// [B, KV, T, D] (`kv`) against [B, KV * groups, T, D] (`heads`).
static LogicalResult verifyRepeatKv(Operation *op, Value kv, Value heads,
                                    int64_t groups) {
  ArrayRef<int64_t> k = shapeOf(kv);
  if (groups <= 0)
    return op->emitOpError("groups must be positive, got ") << groups;
  if (k.size() != 4)
    return op->emitOpError("expects [B, KV, T, D] heads, got ")
           << shapeStr(k);
  return expectShape(op, "repeated heads", shapeOf(heads),
                     {k[0], k[1] * groups, k[2], k[3]});
}

LogicalResult RepeatKvOp::verify() {
  return verifyRepeatKv(*this, getInput(), getResult(), getGroups());
}

LogicalResult RepeatKvGradOp::verify() {
  return verifyRepeatKv(*this, getResult(), getGrad(), getGroups());
}

/// Every operand and result of `op` has the shape of its first operand.
static LogicalResult verifyAllSameShape(Operation *op) {
  ArrayRef<int64_t> x = shapeOf(op->getOperand(0));
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    if (failed(expectShape(op, "operand #" + std::to_string(i), shapeOf(v), x)))
      return failure();
  for (auto [i, v] : llvm::enumerate(op->getResults()))
    if (failed(expectShape(op, "result #" + std::to_string(i), shapeOf(v), x)))
      return failure();
  return success();
}

LogicalResult SiluOp::verify() { return verifyAllSameShape(*this); }
LogicalResult SiluGradOp::verify() { return verifyAllSameShape(*this); }
LogicalResult MulOp::verify() { return verifyAllSameShape(*this); }
LogicalResult ScaleOp::verify() {
  if (!std::isfinite(getFactor().convertToDouble()))
    return emitOpError("factor must be finite");
  return verifyAllSameShape(*this);
}
LogicalResult SwigluOp::verify() { return verifyAllSameShape(*this); }
/// A cap that bounds the values: positive and finite.
static LogicalResult verifyCap(Operation *op, double cap) {
  if (!(cap > 0) || !std::isfinite(cap))
    return op->emitOpError("cap must be positive and finite, got ") << cap;
  return verifyAllSameShape(op);
}
LogicalResult SoftcapOp::verify() {
  return verifyCap(*this, getCap().convertToDouble());
}
LogicalResult SoftcapGradOp::verify() {
  return verifyCap(*this, getCap().convertToDouble());
}
LogicalResult SwigluGradOp::verify() { return verifyAllSameShape(*this); }

/// A per-row gate [..., 1] of an input [..., C].
static LogicalResult verifyRowGate(Operation *op, Value gate, Value input) {
  ArrayRef<int64_t> x = shapeOf(input);
  if (x.empty())
    return op->emitOpError("expects an input [..., C], got a scalar");
  SmallVector<int64_t> perRow(x.drop_back());
  perRow.push_back(1);
  return expectShape(op, "gate", shapeOf(gate), perRow);
}
LogicalResult SigmoidGateOp::verify() {
  if (failed(verifyRowGate(*this, getGate(), getInput())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}
LogicalResult SigmoidGateGradOp::verify() {
  if (failed(verifyRowGate(*this, getGate(), getInput())) ||
      failed(expectShape(*this, "grad", shapeOf(getGrad()),
                         shapeOf(getInput()))) ||
      failed(expectShape(*this, "gate_grad", shapeOf(getGateGrad()),
                         shapeOf(getGate()))))
    return failure();
  return expectShape(*this, "input_grad", shapeOf(getInputGrad()),
                     shapeOf(getInput()));
}

/// logits [..., V] against labels [...].
static LogicalResult verifyLogitsLabels(Operation *op, Value logits,
                                        Value labels) {
  ArrayRef<int64_t> l = shapeOf(logits), y = shapeOf(labels);
  if (l.empty() || l.drop_back() != y)
    return op->emitOpError("logits ")
           << shapeStr(l) << " do not match labels " << shapeStr(y)
           << " (expected logits [..., V] over labels [...])";
  return success();
}

/// A cross entropy's `classes`: 0 (every column) or at most the logits'
/// last dimension.
static LogicalResult verifyClasses(Operation *op, Value logits,
                                   int64_t classes) {
  const int64_t columns = shapeOf(logits).back();
  if (classes < 0 || classes > columns)
    return op->emitOpError("classes = ")
           << classes << " must be 0 (every column) or at most the logits' "
           << columns << " columns";
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  return verifyClasses(*this, getLogits(), getClasses());
}

LogicalResult MlmMaskOp::verify() {
  double p = getMaskProb().convertToDouble();
  if (p <= 0 || p >= 1)
    return emitOpError("expects mask_prob in (0, 1), got ") << p;
  if (getMaskTokenId() < 0 || getMaskTokenId() >= getVocabSize())
    return emitOpError("mask_token_id ")
           << getMaskTokenId() << " is outside the vocabulary [0, "
           << getVocabSize() << ")";
  for (Value v : getResults())
    if (failed(expectShape(*this, "result", shapeOf(v), shapeOf(getIds()))))
      return failure();
  return success();
}

LogicalResult PaddingMaskOp::verify() {
  const int64_t pad = getPadTokenIdAttr().getInt();
  if (pad < 0)
    return emitOpError("expects pad_token_id >= 0, got ") << pad;
  return success();
}

LogicalResult ReduceToOp::verify() {
  if (!broadcastsTo(shapeOf(getResult()), shapeOf(getInput())))
    return emitOpError("result ")
           << shapeStr(shapeOf(getResult())) << " does not broadcast to input "
           << shapeStr(shapeOf(getInput()));
  return success();
}

/// An embedding table's gradient [V, C] from row gradients [..., C] of ids
/// [...] (embedding_grad, vocab_embedding_grad).
static LogicalResult verifyTableGradient(Operation *op, Value ids, Value grad,
                                         Value table) {
  ArrayRef<int64_t> i = shapeOf(ids), g = shapeOf(grad), t = shapeOf(table);
  if (t.size() != 2 || g.size() != i.size() + 1 || g.drop_back() != i ||
      g.back() != t[1])
    return op->emitOpError("gradient ")
           << shapeStr(g) << " does not match ids " << shapeStr(i)
           << " and table " << shapeStr(t);
  return success();
}

LogicalResult EmbeddingGradOp::verify() {
  return verifyTableGradient(*this, getIds(), getGrad(), getResult());
}

LogicalResult LinearGradInputOp::verify() {
  ArrayRef<int64_t> dy = shapeOf(getGrad()), w = shapeOf(getWeight());
  if (w.size() != 2 || dy.empty())
    return emitOpError("expects a rank-2 weight, got ") << shapeStr(w);
  int64_t k = getTransposeW() ? w[1] : w[0];
  int64_t n = getTransposeW() ? w[0] : w[1];
  if (dy.back() != n)
    return emitOpError("gradient ")
           << shapeStr(dy) << " does not match weight " << shapeStr(w);
  SmallVector<int64_t> want(dy.begin(), dy.end());
  want.back() = k;
  return expectShape(*this, "result", shapeOf(getResult()), want);
}

LogicalResult LinearGradWeightOp::verify() {
  ArrayRef<int64_t> x = shapeOf(getInput()), dy = shapeOf(getGrad());
  if (x.empty() || x.drop_back() != dy.drop_back())
    return emitOpError("input ")
           << shapeStr(x) << " and gradient " << shapeStr(dy)
           << " differ in leading dimensions";
  SmallVector<int64_t> want = {x.back(), dy.back()};
  if (getTransposeW())
    std::swap(want[0], want[1]);
  return expectShape(*this, "result", shapeOf(getResult()), want);
}

LogicalResult GeluGradOp::verify() {
  if (failed(expectShape(*this, "gradient", shapeOf(getGrad()),
                         shapeOf(getInput()))))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult SoftmaxGradOp::verify() {
  if (failed(expectShape(*this, "gradient", shapeOf(getGrad()),
                         shapeOf(getOutput()))))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getOutput()));
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())) ||
      failed(verifyClasses(*this, getLogits(), getClasses())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getLogits()));
}

LogicalResult CrossEntropyWithGradOp::verify() {
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())) ||
      failed(verifyClasses(*this, getLogits(), getClasses())))
    return failure();
  if (getLogitsGrad().getType() != getLogits().getType())
    return emitOpError("logits_grad ")
           << getLogitsGrad().getType() << " must have the logits' type "
           << getLogits().getType();
  return success();
}

std::optional<unsigned>
CrossEntropyWithGradOp::getInPlaceOperand(unsigned result) {
  if (result == 1) // dlogits over the logits
    return 1;
  return std::nullopt;
}

std::optional<unsigned> AllReduceOp::getInPlaceOperand(unsigned result) {
  return result == 0 ? std::optional<unsigned>(0) : std::nullopt;
}

// The elementwise updates: new_param over param (operand 0), each new state
// over its state (Adam: exp_avg and exp_avg_sq, operands 2 and 3; SGD: the
// momentum buffer, operand 2). Their kernels read an element before writing
// it, on the CPU and CUDA backends alike.
std::optional<unsigned> AdamOp::getInPlaceOperand(unsigned result) {
  static constexpr unsigned kOperand[] = {0, 2, 3};
  return result < 3 ? std::optional<unsigned>(kOperand[result]) : std::nullopt;
}

std::optional<unsigned> SgdOp::getInPlaceOperand(unsigned result) {
  static constexpr unsigned kOperand[] = {0, 2};
  return result < 2 ? std::optional<unsigned>(kOperand[result]) : std::nullopt;
}

//===----------------------------------------------------------------------===//
// The device mesh and the collectives
//===----------------------------------------------------------------------===//

LogicalResult ParamAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                StringRef name, InitKind init, FloatAttr std) {
  // A NaN std trained to a NaN loss blamed on the learning rate.
  const double s = std.getValueAsDouble();
  if (!std::isfinite(s) || s < 0)
    return emitError() << "parameter '" << name
                       << "': std must be finite and >= 0, got " << s;
  return success();
}

LogicalResult MeshAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                               int64_t data, int64_t tensor,
                               int64_t pipeline) {
  if (data < 1 || tensor < 1 || pipeline < 1)
    return emitError() << "mesh axes must have at least one rank, got data = "
                       << data << ", tensor = " << tensor
                       << ", pipeline = " << pipeline;
  return success();
}

LogicalResult
BlockLayoutAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t block, int64_t heads, int64_t blocks,
                        DenseI32ArrayAttr rows, DenseI32ArrayAttr cols) {
  if (block < 1 || heads < 1 || blocks < 1)
    return emitError() << "block layout needs block, heads and blocks >= 1, "
                          "got block = "
                       << block << ", heads = " << heads
                       << ", blocks = " << blocks;
  ArrayRef<int32_t> r = rows.asArrayRef(), c = cols.asArrayRef();
  const int64_t numRows = heads * blocks;
  if (int64_t(r.size()) != numRows + 1)
    return emitError() << "block layout rows must hold heads * blocks + 1 = "
                       << numRows + 1 << " offsets, got " << r.size();
  if (r.front() != 0 || r.back() != int64_t(c.size()))
    return emitError() << "block layout rows must start at 0 and end at the "
                          "number of cols ("
                       << c.size() << "), got " << r.front() << " .. "
                       << r.back();
  for (int64_t row = 0; row < numRows; ++row) {
    if (r[row + 1] <= r[row])
      return emitError() << "query block " << row % blocks << " of layout head "
                         << row / blocks << " attends to no key block";
    for (int32_t k = r[row]; k < r[row + 1]; ++k)
      if (c[k] < 0 || c[k] >= blocks || (k > r[row] && c[k] <= c[k - 1]))
        return emitError() << "the key blocks of query block " << row % blocks
                           << " of layout head " << row / blocks
                           << " must ascend within [0, " << blocks << ")";
  }
  return success();
}

BlockLayoutAttr BlockLayoutAttr::fromMask(MLIRContext *ctx, int64_t block,
                                          int64_t heads, int64_t blocks,
                                          ArrayRef<uint8_t> mask) {
  assert(int64_t(mask.size()) == heads * blocks * blocks && "mask shape");
  SmallVector<int32_t> rows{0}, cols;
  for (int64_t row = 0; row < heads * blocks; ++row) {
    for (int64_t col = 0; col < blocks; ++col)
      if (mask[size_t(row * blocks + col)])
        cols.push_back(int32_t(col));
    rows.push_back(int32_t(cols.size()));
  }
  return get(ctx, block, heads, blocks, DenseI32ArrayAttr::get(ctx, rows),
             DenseI32ArrayAttr::get(ctx, cols));
}

bool BlockLayoutAttr::isBlockCausal() const {
  ArrayRef<int32_t> r = getRows().asArrayRef(), c = getCols().asArrayRef();
  // Columns ascend, so a row's last block is its rightmost.
  for (int64_t row = 0; row + 1 < int64_t(r.size()); ++row)
    if (c[r[row + 1] - 1] > row % getBlocks())
      return false;
  return true;
}

LogicalResult
TensorSliceAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                        int64_t dim, int64_t groups, int64_t size) {
  if (dim < 0 || groups < 1 || size < 1 || size % groups != 0)
    return emitError() << "tensor slice needs dim >= 0, groups >= 1 and a "
                          "size of whole groups, got dim = "
                       << dim << ", groups = " << groups << ", size = "
                       << size;
  return success();
}

/// dsc.mesh_data_inner: an integer on a module with a mesh, dividing its
/// data axis.
static LogicalResult verifyMeshDataInner(Operation *op, NamedAttribute attr) {
  auto inner = dyn_cast<IntegerAttr>(attr.getValue());
  auto mesh = op->getAttrOfType<MeshAttr>(kMeshAttrName);
  if (!isa<ModuleOp>(op) || !inner || !mesh)
    return op->emitError() << "'" << kMeshDataInnerAttrName
                           << "' must be an integer on a module with a '"
                           << kMeshAttrName << "'";
  if (inner.getInt() < 1 || mesh.getData() % inner.getInt() != 0)
    return op->emitError() << "'" << kMeshDataInnerAttrName << "' ("
                           << inner.getInt()
                           << ") must divide the mesh's data axis ("
                           << mesh.getData() << " ranks)";
  return success();
}

LogicalResult DscDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  if (attr.getName() == kTensorParallelStreamsAttrName) {
    if (!isa<ModuleOp>(op) || !isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitError() << "'" << kTensorParallelStreamsAttrName
                             << "' must be an array<i64> on the module";
    return success();
  }
  if (attr.getName() == kTensorSlicesAttrName) {
    auto slices = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!isa<ModuleOp>(op) || !slices)
      return op->emitError() << "'" << kTensorSlicesAttrName
                             << "' must be a dictionary on the module";
    for (NamedAttribute slice : slices)
      if (!isa<TensorSliceAttr>(slice.getValue()))
        return op->emitError()
               << "'" << kTensorSlicesAttrName << "' entry '"
               << slice.getName().strref()
               << "' must be a #dsc.tensor_slice<...>";
    return success();
  }
  if (attr.getName() == kMeshDataInnerAttrName)
    return verifyMeshDataInner(op, attr);
  if (attr.getName() == kMeshExpertAttrName) {
    auto ep = dyn_cast<IntegerAttr>(attr.getValue());
    auto inner = op->getAttrOfType<IntegerAttr>(kMeshDataInnerAttrName);
    if (!isa<ModuleOp>(op) || !ep ||
        ep.getInt() != (inner ? inner.getInt() : 1))
      return op->emitError()
             << "'" << kMeshExpertAttrName
             << "' must be an integer on the module equal to its '"
             << kMeshDataInnerAttrName
             << "' (expert-parallel groups are the data_inner groups)";
    return success();
  }
  if (attr.getName() != kMeshAttrName)
    return success();
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << kMeshAttrName
                           << "' belongs on the module";
  if (!isa<MeshAttr>(attr.getValue()))
    return op->emitError() << "'" << kMeshAttrName
                           << "' must be a #dsc.mesh<...>";
  return success();
}

/// The module attribute `name` of `op`'s module (or of `op`, a module)
/// when it is an `AttrT`; null otherwise or outside a module.
template <typename AttrT>
static AttrT moduleAttr(Operation *op, StringRef name) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  return module ? module->getAttrOfType<AttrT>(name) : AttrT();
}

int64_t mlir::dsc::meshGroupSize(Operation *op, MeshAxis axis) {
  auto mesh = moduleAttr<MeshAttr>(op, kMeshAttrName);
  if (!mesh)
    return 1;
  auto split = moduleAttr<IntegerAttr>(op, kMeshDataInnerAttrName);
  const int64_t inner = split ? split.getInt() : 1;
  switch (axis) {
  case MeshAxis::data:
    return mesh.getData();
  case MeshAxis::tensor:
    return mesh.getTensor();
  case MeshAxis::pipeline:
    return mesh.getPipeline();
  case MeshAxis::data_inner:
    return inner;
  case MeshAxis::data_outer:
    return mesh.getData() / inner;
  }
  llvm_unreachable("unknown mesh axis");
}

/// The integer module attribute `name` of `op`'s module (or `op`, a
/// module), else `otherwise`.
static int64_t moduleInt(Operation *op, StringRef name, int64_t otherwise) {
  auto value = moduleAttr<IntegerAttr>(op, name);
  return value ? value.getInt() : otherwise;
}

int64_t mlir::dsc::pipelineStageOf(Operation *op) {
  return moduleInt(op, kPipelineStageAttrName, -1);
}

int64_t mlir::dsc::pipelineChunksOf(Operation *op) {
  return moduleInt(op, kPipelineChunksAttrName, 1);
}

SmallVector<int64_t> mlir::dsc::pipelineReceivingChunks(Operation *op) {
  SmallVector<int64_t> chunks;
  const int64_t stage = pipelineStageOf(op);
  if (stage < 0)
    return chunks;
  for (int64_t k = stage == 0 ? 1 : 0, v = pipelineChunksOf(op); k < v; ++k)
    chunks.push_back(k);
  return chunks;
}

SmallVector<int64_t> mlir::dsc::pipelineSendingChunks(Operation *op) {
  SmallVector<int64_t> chunks;
  const int64_t stage = pipelineStageOf(op);
  if (stage < 0)
    return chunks;
  const int64_t v = pipelineChunksOf(op);
  for (int64_t k = 0; k < v - (holdsPipelineLoss(op) ? 1 : 0); ++k)
    chunks.push_back(k);
  return chunks;
}

bool mlir::dsc::holdsPipelineLoss(Operation *op) {
  const int64_t stage = pipelineStageOf(op);
  return stage < 0 || stage + 1 == meshGroupSize(op, MeshAxis::pipeline);
}

std::string mlir::dsc::pipelineChunkName(StringRef name, int64_t chunk) {
  return chunk == 0 ? name.str() : (name + "." + Twine(chunk)).str();
}

bool mlir::dsc::isExpertParam(Operation *op, StringRef param) {
  auto names = moduleAttr<ArrayAttr>(op, kExpertParamsAttrName);
  return names && llvm::any_of(names.getAsRange<StringAttr>(),
                               [&](StringAttr n) { return n == param; });
}

TensorSliceAttr mlir::dsc::tensorSliceOf(Operation *op, StringRef param) {
  auto slices = moduleAttr<DictionaryAttr>(op, kTensorSlicesAttrName);
  return slices ? slices.getAs<TensorSliceAttr>(param) : TensorSliceAttr();
}

FourBitAttr mlir::dsc::fourBitOf(Operation *op, StringRef param) {
  auto params = moduleAttr<DictionaryAttr>(op, kFourBitParamsAttrName);
  return params ? params.getAs<FourBitAttr>(param) : FourBitAttr();
}

namespace {

/// `op`'s group size along `axis`, for messages: "the data axis (4 ranks)".
std::string groupName(MeshAxis axis, int64_t size) {
  return "the " + stringifyMeshAxis(axis).str() + " axis (" +
         std::to_string(size) + (size == 1 ? " rank)" : " ranks)");
}

/// `result` is `input` with dimension 0 multiplied by `factor` (all_gather)
/// or divided by it (reduce_scatter, `divide`).
LogicalResult verifyDim0Scaled(Operation *op, Value input, Value result,
                               MeshAxis axis, bool divide) {
  ArrayRef<int64_t> in = shapeOf(input);
  if (in.empty())
    return op->emitOpError("expects a tensor of rank >= 1 (it splits or "
                           "concatenates dimension 0)");
  const int64_t g = meshGroupSize(op, axis);
  SmallVector<int64_t> want(in);
  if (divide) {
    if (in[0] % g != 0)
      return op->emitOpError() << "dimension 0 of the input (" << in[0]
                               << ") is not divisible by "
                               << groupName(axis, g);
    want[0] = in[0] / g;
  } else {
    want[0] = in[0] * g;
  }
  return expectShape(op, "result", shapeOf(result), want);
}

} // namespace

LogicalResult AllReduceOp::verify() {
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult TpCopyOp::verify() {
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

LogicalResult TpReduceOp::verify() {
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getInput()));
}

/// A vocabulary of `vocab` entries over the group of `axis`: each rank holds
/// ceil(vocab / G) of them (`local`).
static LogicalResult verifyVocabSlice(Operation *op, int64_t local,
                                      int64_t vocab, MeshAxis axis) {
  const int64_t g = meshGroupSize(op, axis);
  if (vocab < 1)
    return op->emitOpError("expects vocab >= 1, got ") << vocab;
  const int64_t want = (vocab + g - 1) / g;
  if (local != want)
    return op->emitOpError("holds ")
           << local << " entries of a vocabulary of " << vocab << " over "
           << groupName(axis, g) << ", expected " << want;
  return success();
}

LogicalResult VocabEmbeddingOp::verify() {
  ArrayRef<int64_t> table = shapeOf(getTable()), ids = shapeOf(getIds());
  if (table.size() != 2)
    return emitOpError("expects a rank-2 table, got ") << shapeStr(table);
  if (failed(verifyVocabSlice(*this, table[0], getVocab(), getAxis())))
    return failure();
  SmallVector<int64_t> want(ids.begin(), ids.end());
  want.push_back(table[1]);
  return expectShape(*this, "result", shapeOf(getResult()), want);
}

LogicalResult VocabEmbeddingGradOp::verify() {
  if (failed(verifyTableGradient(*this, getIds(), getGrad(), getResult())))
    return failure();
  return verifyVocabSlice(*this, shapeOf(getResult())[0], getVocab(),
                          getAxis());
}

LogicalResult VocabCrossEntropyOp::verify() {
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())))
    return failure();
  return verifyVocabSlice(*this, shapeOf(getLogits()).back(), getVocab(),
                          getAxis());
}

LogicalResult VocabCrossEntropyGradOp::verify() {
  if (failed(verifyLogitsLabels(*this, getLogits(), getLabels())) ||
      failed(verifyVocabSlice(*this, shapeOf(getLogits()).back(), getVocab(),
                              getAxis())))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     shapeOf(getLogits()));
}

LogicalResult ReduceScatterOp::verify() {
  return verifyDim0Scaled(*this, getInput(), getResult(), getAxis(),
                          /*divide=*/true);
}

LogicalResult AllGatherOp::verify() {
  if (getInput().getType().getElementType() !=
      getResult().getType().getElementType())
    return emitOpError("changes the element type");
  return verifyDim0Scaled(*this, getInput(), getResult(), getAxis(),
                          /*divide=*/false);
}

LogicalResult BroadcastOp::verify() {
  const int64_t g = meshGroupSize(*this, getAxis());
  const int64_t root = getRootAttr().getInt();
  if (root < 0 || root >= g)
    return emitOpError() << "root " << root << " is not a rank of "
                         << groupName(getAxis(), g);
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  return success();
}

LogicalResult AllToAllOp::verify() {
  const int64_t g = meshGroupSize(*this, getAxis());
  ArrayRef<int64_t> in = shapeOf(getInput());
  if (getInput().getType() != getResult().getType())
    return emitOpError("result type must equal the input type");
  if (in.empty() || in[0] % g != 0)
    return emitOpError() << "dimension 0 of the input must be divisible by "
                         << groupName(getAxis(), g);
  return success();
}

/// send/recv: a peer offset that names another rank of the group.
static LogicalResult verifyPeer(Operation *op, int64_t peer, MeshAxis axis) {
  const int64_t g = meshGroupSize(op, axis);
  if (peer == 0 || peer <= -g || peer >= g)
    return op->emitOpError() << "peer offset " << peer
                             << " does not name another rank of "
                             << groupName(axis, g);
  return success();
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getPeer(), getAxis());
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getPeer(), getAxis());
}

LogicalResult ShardOp::verify() {
  if (getInput().getType().getElementType() !=
      getResult().getType().getElementType())
    return emitOpError("changes the element type");
  return verifyDim0Scaled(*this, getInput(), getResult(), getAxis(),
                          /*divide=*/true);
}

LogicalResult NormAllReduceOp::verify() { return success(); }

LogicalResult FlatResizeOp::verify() {
  if (getInput().getType().getElementType() !=
      getResult().getType().getElementType())
    return emitOpError("changes the element type");
  return success();
}

//===----------------------------------------------------------------------===//
// ZeRO-Offload copies
//===----------------------------------------------------------------------===//

/// dsc.to_host, dsc.to_device, dsc.swap_in and dsc.swap_out: the same
/// tensor in the other memory.
template <typename CopyOp> LogicalResult verifyMemoryCopy(CopyOp op) {
  if (op.getInput().getType() != op.getResult().getType())
    return op.emitOpError("copies between memories keep the type, got ")
           << op.getInput().getType() << " -> " << op.getResult().getType();
  // (ODS hands I64Attr out as uint64_t.)
  if (const int64_t group = int64_t(op.getGroup()); group < 0)
    return op.emitOpError("transfer group must be >= 0, got ") << group;
  return success();
}

LogicalResult ToHostOp::verify() { return verifyMemoryCopy(*this); }
LogicalResult ToDeviceOp::verify() { return verifyMemoryCopy(*this); }
LogicalResult SwapInOp::verify() { return verifyMemoryCopy(*this); }
LogicalResult SwapOutOp::verify() { return verifyMemoryCopy(*this); }

//===----------------------------------------------------------------------===//
// 1-bit compression
//===----------------------------------------------------------------------===//

/// `codes` and `scales` of n elements in blocks of `block`.
static LogicalResult verifyInt8Blocks(Operation *op, int64_t n,
                                      int64_t scales, int64_t block) {
  if (block <= 0 || n % block != 0)
    return op->emitOpError("expects a positive block_size dividing the ")
           << n << " elements, got " << block;
  if (scales != n / block)
    return op->emitOpError("expects ")
           << n / block << " scales (one per block of " << block << "), got "
           << scales;
  return success();
}

LogicalResult QuantizeInt8Op::verify() {
  const int64_t n = getInput().getType().getNumElements();
  if (getInput().getType().getRank() != 1 ||
      getCodes().getType().getNumElements() != n)
    return emitOpError("expects a flat input and as many codes, got ")
           << shapeStr(shapeOf(getInput())) << " and "
           << shapeStr(shapeOf(getCodes()));
  return verifyInt8Blocks(*this, n, getScales().getType().getNumElements(),
                          getBlockSize());
}

LogicalResult DequantizeInt8Op::verify() {
  const int64_t n = getCodes().getType().getNumElements();
  if (getResult().getType().getRank() != 1 ||
      getResult().getType().getNumElements() != n)
    return emitOpError("expects a flat result of the ")
           << n << " codes' elements, got " << shapeStr(shapeOf(getResult()));
  return verifyInt8Blocks(*this, n, getScales().getType().getNumElements(),
                          getBlockSize());
}

/// int4 codes of n elements in blocks of `block`: n/2 bytes, n/block
/// scales, an even block dividing n.
static LogicalResult verifyInt4Blocks(Operation *op, int64_t n, int64_t bytes,
                                      int64_t scales, int64_t block) {
  if (block <= 0 || block % 2 != 0 || n % block != 0)
    return op->emitOpError("expects a positive even block_size dividing the ")
           << n << " elements, got " << block;
  if (bytes * 2 != n)
    return op->emitOpError("expects ")
           << n / 2 << " bytes of codes (two per byte) for " << n
           << " elements, got " << bytes;
  if (scales != n / block)
    return op->emitOpError("expects ")
           << n / block << " scales (one per block of " << block << "), got "
           << scales;
  return success();
}

LogicalResult QuantizeInt4Op::verify() {
  if (getInput().getType().getRank() != 1)
    return emitOpError("expects a flat input, got ")
           << shapeStr(shapeOf(getInput()));
  return verifyInt4Blocks(*this, getInput().getType().getNumElements(),
                          getCodes().getType().getNumElements(),
                          getScales().getType().getNumElements(),
                          getBlockSize());
}

LogicalResult DequantizeReduceInt4Op::verify() {
  if (getOp() == ReduceKind::max)
    return emitOpError("reduces by sum or mean, not max");
  const int64_t c = getResult().getType().getNumElements();
  const int64_t bytes = getCodes().getType().getNumElements();
  const int64_t block = getBlockSize();
  if (getResult().getType().getRank() != 1 || c == 0 || (2 * bytes) % c != 0)
    return emitOpError("expects a flat result whose elements divide the ")
           << 2 * bytes << " codes into chunks, got "
           << shapeStr(shapeOf(getResult()));
  if (block <= 0 || block % 2 != 0 || c % block != 0)
    return emitOpError("expects a positive even block_size dividing the ")
           << c << " elements of a chunk, got " << block;
  return verifyInt4Blocks(*this, 2 * bytes, bytes,
                          getScales().getType().getNumElements(), block);
}

LogicalResult OnebitCompressOp::verify() {
  const int64_t n = getInput().getType().getNumElements();
  const int64_t p = getError().getType().getNumElements();
  if (p % 8 != 0 || p < n)
    return emitOpError() << "error has " << p << " elements; it must be a "
                         << "multiple of 8 and at least the input's " << n;
  if (failed(expectShape(*this, "signs", shapeOf(getSigns()), {p / 8})) ||
      failed(expectShape(*this, "scale", shapeOf(getScale()), {1})))
    return failure();
  return expectShape(*this, "new_error", shapeOf(getNewError()), {p});
}

namespace {
/// onebit_decode(_mean): `signs` [G*c/8] and `scales` [G]; returns c.
FailureOr<int64_t> decodedChunk(Operation *op, Value signs, Value scales) {
  const int64_t bytes = shapeOf(signs)[0], g = shapeOf(scales)[0];
  if (g < 1 || bytes % g != 0)
    return op->emitOpError() << "signs of " << bytes << " bytes do not split "
                             << "into " << g << " chunks (one per scale)";
  return bytes / g * 8;
}
} // namespace

LogicalResult OnebitDecodeOp::verify() {
  FailureOr<int64_t> c = decodedChunk(*this, getSigns(), getScales());
  if (failed(c))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()),
                     {*c * shapeOf(getScales())[0]});
}

LogicalResult OnebitDecodeMeanOp::verify() {
  FailureOr<int64_t> c = decodedChunk(*this, getSigns(), getScales());
  if (failed(c))
    return failure();
  return expectShape(*this, "result", shapeOf(getResult()), {*c});
}

LogicalResult EmaUpdateOp::verify() {
  const double beta = getBeta().convertToDouble();
  if (!(beta >= 0 && beta < 1))
    return emitOpError() << "expects beta in [0, 1), got " << beta;
  if (failed(expectShape(*this, "grad", shapeOf(getGrad()),
                         shapeOf(getAvg()))) ||
      failed(expectShape(*this, "result", shapeOf(getResult()),
                         shapeOf(getAvg()))))
    return failure();
  return success();
}

/// 0/1 Adam's ops: every tensor the parameter's shape, eps > 0.
static LogicalResult verifyZeroOne(Operation *op, Value param, double eps) {
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value v : values) {
    auto type = cast<ShapedType>(v.getType());
    if (type.getRank() == 0) // lr, lr_sum
      continue;
    if (failed(expectShape(op, "every tensor", type.getShape(),
                           shapeOf(param))))
      return failure();
  }
  if (!(eps > 0))
    return op->emitOpError("expects eps > 0, got ") << eps;
  return success();
}

/// 1-bit LAMB's ops: every tensor operand and result the shape of `param`
/// (scalars aside), the attributes named in `positive` > 0.
static LogicalResult
verifyOnebitLamb(Operation *op, Value param,
                 ArrayRef<std::pair<StringRef, double>> positive) {
  SmallVector<Value> values(op->getOperands());
  llvm::append_range(values, op->getResults());
  for (Value v : values) {
    auto type = cast<ShapedType>(v.getType());
    if (type.getRank() != 0 &&
        failed(expectShape(op, "every tensor", type.getShape(),
                           shapeOf(param))))
      return failure();
  }
  for (auto [name, value] : positive)
    if (!(value > 0))
      return op->emitOpError("expects ") << name << " > 0, got " << value;
  return success();
}

LogicalResult LambCoeffEmaOp::verify() {
  const double beta = getCoeffBeta().convertToDouble();
  if (!(beta >= 0 && beta < 1))
    return emitOpError("expects coeff_beta in [0, 1), got ") << beta;
  if (getMinCoeff().convertToDouble() > getMaxCoeff().convertToDouble())
    return emitOpError("expects min_coeff <= max_coeff");
  return verifyOnebitLamb(*this, getParam(),
                          {{"eps", getEps().convertToDouble()},
                           {"max_coeff", getMaxCoeff().convertToDouble()}});
}

LogicalResult MomentumScalesOp::verify() {
  if (getMomenta().size() != getScales().size() || getMomenta().empty())
    return emitOpError("expects one scale per momentum, at least one, got ")
           << getMomenta().size() << " momenta and " << getScales().size()
           << " scales";
  return success();
}

LogicalResult ScaleByOp::verify() {
  if (failed(expectShape(*this, "result", shapeOf(getResult()),
                         shapeOf(getInput()))))
    return failure();
  return success();
}

LogicalResult OnebitLambUpdateOp::verify() {
  const double b1 = getBeta1().convertToDouble(),
               b2 = getBeta2().convertToDouble();
  if (!(b1 >= 0 && b1 < 1 && b2 >= 0 && b2 < 1))
    return emitOpError("expects beta1 and beta2 in [0, 1), got ")
           << b1 << " and " << b2;
  if (getFactorMin().convertToDouble() > getFactorMax().convertToDouble())
    return emitOpError("expects factor_min <= factor_max");
  return verifyOnebitLamb(
      *this, getParam(),
      {{"eps", getEps().convertToDouble()},
       {"factor_min", getFactorMin().convertToDouble()}});
}

LogicalResult LocalAdamOp::verify() {
  if (!(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("expects weight_decay >= 0");
  return verifyZeroOne(*this, getParam(), getEps().convertToDouble());
}

LogicalResult ZeroOneUnwindOp::verify() {
  return verifyZeroOne(*this, getParam(), getEps().convertToDouble());
}

LogicalResult ZeroOneSyncOp::verify() {
  return verifyZeroOne(*this, getParam(), getEps().convertToDouble());
}

LogicalResult FrozenAdamOp::verify() {
  ArrayRef<int64_t> param = shapeOf(getParam());
  for (auto [what, v] : {std::pair<const char *, Value>{"old_exp_avg",
                                                        getOldExpAvg()},
                         {"exp_avg", getExpAvg()},
                         {"exp_avg_sq", getExpAvgSq()},
                         {"new_param", getNewParam()},
                         {"new_exp_avg", getNewExpAvg()}})
    if (failed(expectShape(*this, what, shapeOf(v), param)))
      return failure();
  if (!(getEps().convertToDouble() > 0) ||
      !(getWeightDecay().convertToDouble() >= 0))
    return emitOpError("expects eps > 0 and weight_decay >= 0");
  return success();
}

LogicalResult GlobalNormOp::verify() {
  if (getInputs().empty())
    return emitOpError("expects at least one input");
  return success();
}

LogicalResult ClipCoefficientOp::verify() {
  if (getMaxNorm().convertToDouble() <= 0)
    return emitOpError("expects max_norm > 0");
  return success();
}


LogicalResult mlir::dsc::verifyOptimizerOp(Operation *op) {
  auto optimizer = cast<OptimizerOpInterface>(op);
  ArrayRef<int64_t> param = shapeOf(optimizer.getParamOperand());
  if (failed(expectShape(op, "gradient", shapeOf(optimizer.getGradOperand()),
                         param)))
    return failure();
  if (!optimizer.statesHaveParamShape()) {
    // The op's own verifier checks the states (and ODS that new_param has
    // the param's type); each state comes back in its type.
    for (auto [i, state] : llvm::enumerate(optimizer.getStateOperands()))
      if (state.getType() != op->getResult(i + 1).getType())
        return op->emitOpError("result #")
               << i + 1 << " is " << op->getResult(i + 1).getType()
               << ", expected the type of state #" << i << ", "
               << state.getType();
    return success();
  }
  for (auto [i, state] : llvm::enumerate(optimizer.getStateOperands()))
    if (failed(expectShape(op, "state #" + std::to_string(i), shapeOf(state),
                           param)))
      return failure();
  for (auto [i, result] : llvm::enumerate(op->getResults()))
    if (failed(expectShape(op, "result #" + std::to_string(i),
                           shapeOf(result), param)))
      return failure();
  return success();
}

LogicalResult mlir::dsc::verifyAdam8bitOp(Adam8bitOp op) {
  ArrayRef<int64_t> param = shapeOf(op.getParam());
  for (auto [what, value] :
       {std::pair<StringRef, Value>{"exp_avg", op.getExpAvg()},
        {"exp_avg_sq", op.getExpAvgSq()}})
    if (failed(expectShape(op, what, shapeOf(value), param)))
      return failure();
  const int64_t n = cast<RankedTensorType>(op.getParam().getType())
                        .getNumElements(),
                blocks = (n + Adam8bitOp::kBlockSize - 1) /
                         Adam8bitOp::kBlockSize;
  for (auto [what, value] :
       {std::pair<StringRef, Value>{"exp_avg_absmax", op.getExpAvgAbsmax()},
        {"exp_avg_sq_absmax", op.getExpAvgSqAbsmax()}})
    if (shapeOf(value)[0] != blocks)
      return op.emitOpError()
             << what << " has " << shapeOf(value)[0]
             << " scales, expected one per block of "
             << Adam8bitOp::kBlockSize << " elements: " << blocks;
  if (!(op.getBeta1().convertToDouble() >= 0 &&
        op.getBeta1().convertToDouble() < 1 &&
        op.getBeta2().convertToDouble() >= 0 &&
        op.getBeta2().convertToDouble() < 1))
    return op.emitOpError("expects beta1 and beta2 in [0, 1)");
  return success();
}

SmallVector<StateKind> Adam8bitOp::getStateKinds() {
  return {StateKind::exp_avg, StateKind::exp_avg_sq, StateKind::exp_avg_absmax,
          StateKind::exp_avg_sq_absmax};
}
bool Adam8bitOp::statesHaveParamShape() { return false; }

SmallVector<int64_t> mlir::dsc::adafactorRowShape(ArrayRef<int64_t> param) {
  return SmallVector<int64_t>(param.drop_back());
}

SmallVector<int64_t> mlir::dsc::adafactorColShape(ArrayRef<int64_t> param) {
  SmallVector<int64_t> col(param.drop_back(2));
  col.push_back(param.back());
  return col;
}

SmallVector<StateKind> mlir::dsc::adafactorStateKinds(int64_t rank,
                                                      bool firstMoment) {
  SmallVector<StateKind> kinds;
  if (rank >= 2)
    kinds = {StateKind::exp_avg_sq_row, StateKind::exp_avg_sq_col};
  else
    kinds = {StateKind::exp_avg_sq};
  if (firstMoment)
    kinds.push_back(StateKind::exp_avg);
  return kinds;
}

LogicalResult mlir::dsc::verifyAdafactorOp(AdafactorOp op) {
  ArrayRef<int64_t> param = shapeOf(op.getParam());
  const bool factored = param.size() >= 2, first = op.getFirstMoment();
  const size_t want = (factored ? 2 : 1) + (first ? 1 : 0);
  if (op.getStates().size() != want)
    return op.emitOpError("expects ")
           << want << " state tensors for a rank-" << param.size()
           << " parameter" << (first ? " with" : " without")
           << " first_moment, got " << op.getStates().size();
  if (factored) {
    if (failed(expectShape(op, "exp_avg_sq_row", shapeOf(op.getStates()[0]),
                           adafactorRowShape(param))) ||
        failed(expectShape(op, "exp_avg_sq_col", shapeOf(op.getStates()[1]),
                           adafactorColShape(param))))
      return failure();
  } else if (failed(expectShape(op, "exp_avg_sq", shapeOf(op.getStates()[0]),
                                param))) {
    return failure();
  }
  if (first &&
      failed(expectShape(op, "exp_avg", shapeOf(op.getStates().back()), param)))
    return failure();
  if (op.getRelativeStep() == false && op.getWarmupInit())
    return op.emitOpError("warmup_init requires relative_step");
  if (!(op.getEps1().convertToDouble() >= 0 &&
        op.getEps2().convertToDouble() >= 0 &&
        op.getClipThreshold().convertToDouble() > 0 &&
        op.getDecayRate().convertToDouble() <= 0))
    return op.emitOpError(
        "expects eps1, eps2 >= 0, clip_threshold > 0 and decay_rate <= 0");
  return success();
}

SmallVector<StateKind> AdafactorOp::getStateKinds() {
  // The factored case without a first moment (HF's defaults for a
  // matrix); adafactorStateKinds gives every case.
  return adafactorStateKinds(2, false);
}
bool AdafactorOp::statesHaveParamShape() { return false; }

LogicalResult Adam8bitOp::verify() { return verifyAdam8bitOp(*this); }
LogicalResult AdafactorOp::verify() { return verifyAdafactorOp(*this); }

SmallVector<StateKind> AdamOp::getStateKinds() {
  return {StateKind::exp_avg, StateKind::exp_avg_sq};
}
SmallVector<StateKind> LambOp::getStateKinds() {
  return {StateKind::exp_avg, StateKind::exp_avg_sq};
}
SmallVector<StateKind> SgdOp::getStateKinds() { return {StateKind::momentum}; }

#define GET_OP_CLASSES
#include "dsc/Dialect/DscOps.cpp.inc"
