//===- MoeOps.cpp - Verifiers of the mixture-of-experts ops ---------------===//
//
// dsc.moe_topk, dsc.moe_route, dsc.moe_dispatch, dsc.moe_combine,
// dsc.grouped_linear, dsc.moe_load, dsc.moe_balance_loss and their gradient
// ops: the shape rules of one MoE layer on N tokens of width C, E experts and
// K experts per token. Their semantics are documented in DscOps.td; the
// gradient rules are in GradientRules.cpp, the kernels in lib/Kernels/Moe.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"

#include <string>

using namespace mlir;
using namespace mlir::dsc;

namespace {

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

LogicalResult expectShape(Operation *op, StringRef what, Value v,
                          ArrayRef<int64_t> want) {
  if (shapeOf(v) == want)
    return success();
  return op->emitOpError() << what << " has shape " << shapeStr(shapeOf(v))
                           << ", expected " << shapeStr(want);
}

/// `v` is a matrix; its shape is returned in `shape`.
LogicalResult expectMatrix(Operation *op, StringRef what, Value v,
                           ArrayRef<int64_t> &shape) {
  shape = shapeOf(v);
  if (shape.size() == 2)
    return success();
  return op->emitOpError("expects ")
         << what << " of rank 2, got " << shapeStr(shape);
}

/// `v` is per token: [..., width], rank >= 2 (the tokens' dimensions, then
/// one of its own). Returns the token count in `tokens`.
LogicalResult expectPerToken(Operation *op, StringRef what, Value v,
                             int64_t &tokens) {
  ArrayRef<int64_t> shape = shapeOf(v);
  if (shape.size() < 2)
    return op->emitOpError("expects ")
           << what << " of rank >= 2 ([tokens..., width]), got "
           << shapeStr(shape);
  tokens = 1;
  for (int64_t d : shape.drop_back())
    tokens *= d;
  return success();
}

/// `v` is [tokens..., width] with the token dimensions of `like`.
LogicalResult expectTokensOf(Operation *op, StringRef what, Value v, Value like,
                             int64_t width) {
  SmallVector<int64_t> want(shapeOf(like).drop_back());
  want.push_back(width);
  return expectShape(op, what, v, want);
}

int64_t widthOf(Value v) { return shapeOf(v).back(); }

/// `slots` [tokens..., K] against the N*K expert rows `rows` [N*K, C].
LogicalResult verifySlots(Operation *op, Value slots, Value rows) {
  int64_t tokens;
  ArrayRef<int64_t> r;
  if (failed(expectPerToken(op, "slots", slots, tokens)) ||
      failed(expectMatrix(op, "expert rows [N*K, C]", rows, r)))
    return failure();
  if (tokens * widthOf(slots) != r[0])
    return op->emitOpError("expects one expert row per slot: ")
           << shapeStr(shapeOf(slots)) << " slots for " << r[0] << " rows";
  return success();
}

/// The optional per-assignment weights, shaped like the slots.
LogicalResult verifyWeights(Operation *op, Value weights, Value slots) {
  return weights ? expectShape(op, "weights", weights, shapeOf(slots))
                 : success();
}

/// Loads of dsc.moe_balance_loss(_grad): at least one, all [2, E].
LogicalResult verifyLoads(Operation *op, ValueRange loads) {
  if (loads.empty())
    return op->emitOpError("expects the load of at least one layer");
  ArrayRef<int64_t> first = shapeOf(loads.front());
  if (first.size() != 2 || first[0] != 2)
    return op->emitOpError("expects loads of shape [2, E], got ")
           << shapeStr(first);
  for (Value load : loads.drop_front())
    if (failed(expectShape(op, "every load", load, first)))
      return failure();
  return success();
}

/// The weight of dsc.grouped_linear(_grad_weight): E stacked matrices.
/// Sets `k` and `n` to one expert's input and output widths.
LogicalResult verifyGroupedWeight(Operation *op, ArrayRef<int64_t> w,
                                  int64_t experts, bool transposeW, int64_t &k,
                                  int64_t &n) {
  if (w.size() != 2)
    return op->emitOpError("expects a rank-2 weight, got ") << shapeStr(w);
  if (experts < 1 || w[0] % experts != 0)
    return op->emitOpError("weight ")
           << shapeStr(w) << " does not stack " << experts
           << " experts' matrices along dimension 0";
  k = transposeW ? w[1] : w[0] / experts;
  n = transposeW ? w[0] / experts : w[1];
  return success();
}

LogicalResult verifyCounts(Operation *op, Value counts, int64_t &experts) {
  ArrayRef<int64_t> c = shapeOf(counts);
  if (c.size() != 1)
    return op->emitOpError("expects counts [E], got ") << shapeStr(c);
  experts = c[0];
  return success();
}

} // namespace

LogicalResult MoeTopkOp::verify() {
  int64_t tokens;
  if (failed(
          expectPerToken(*this, "router logits [..., E]", getLogits(), tokens)))
    return failure();
  const int64_t k = getKAttr().getInt(), experts = widthOf(getLogits());
  if (k < 1 || k > experts)
    return emitOpError("expects 1 <= k <= ")
           << experts << " (the experts), got k = " << k;
  if (failed(expectTokensOf(*this, "weights", getWeights(), getLogits(), k)))
    return failure();
  return expectTokensOf(*this, "experts", getExperts(), getLogits(), k);
}

LogicalResult MoeTopkGradOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "weights [..., K]", getWeights(), tokens)) ||
      failed(expectShape(*this, "grad", getGrad(), shapeOf(getWeights()))) ||
      failed(
          expectShape(*this, "experts", getExperts(), shapeOf(getWeights()))))
    return failure();
  if (widthOf(getResult()) < widthOf(getWeights()))
    return emitOpError("result ")
           << shapeStr(shapeOf(getResult())) << " has fewer experts than the "
           << widthOf(getWeights()) << " chosen";
  if (getLogits() &&
      failed(expectShape(*this, "logits", getLogits(), shapeOf(getResult()))))
    return failure();
  return expectTokensOf(*this, "result", getResult(), getWeights(),
                        widthOf(getResult()));
}

LogicalResult MoeRouteOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "experts [..., K]", getExperts(), tokens)))
    return failure();
  const int64_t experts = getNumExpertsAttr().getInt();
  if (experts < 1)
    return emitOpError("expects num_experts >= 1, got ") << experts;
  // (ODS hands I64Attr out as uint64_t.)
  if (const int64_t capacity = int64_t(getCapacity()); capacity < 0)
    return emitOpError("expects capacity >= 0 (0: no token dropping), got ")
           << capacity;
  if (failed(expectShape(*this, "slots", getSlots(), shapeOf(getExperts()))))
    return failure();
  return expectShape(*this, "counts", getCounts(), {experts});
}

LogicalResult MoeDispatchOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "input [..., C]", getInput(), tokens)) ||
      failed(expectTokensOf(*this, "slots", getSlots(), getInput(),
                            widthOf(getSlots()))) ||
      failed(verifySlots(*this, getSlots(), getRows())) ||
      failed(verifyWeights(*this, getWeights(), getSlots())))
    return failure();
  if (widthOf(getRows()) != widthOf(getInput()))
    return emitOpError("rows ")
           << shapeStr(shapeOf(getRows())) << " and input "
           << shapeStr(shapeOf(getInput())) << " differ in width";
  return success();
}

LogicalResult MoeCombineOp::verify() {
  if (failed(verifySlots(*this, getSlots(), getRows())) ||
      failed(verifyWeights(*this, getWeights(), getSlots())))
    return failure();
  return expectTokensOf(*this, "result", getResult(), getSlots(),
                        widthOf(getRows()));
}

LogicalResult MoeSlotDotOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "input [..., C]", getInput(), tokens)) ||
      failed(expectTokensOf(*this, "slots", getSlots(), getInput(),
                            widthOf(getSlots()))) ||
      failed(verifySlots(*this, getSlots(), getRows())))
    return failure();
  if (widthOf(getRows()) != widthOf(getInput()))
    return emitOpError("rows ")
           << shapeStr(shapeOf(getRows())) << " and input "
           << shapeStr(shapeOf(getInput())) << " differ in width";
  return expectShape(*this, "result", getResult(), shapeOf(getSlots()));
}

LogicalResult GroupedLinearOp::verify() {
  ArrayRef<int64_t> x;
  int64_t experts, k, n;
  if (failed(expectMatrix(*this, "input [S, K]", getInput(), x)) ||
      failed(verifyCounts(*this, getCounts(), experts)) ||
      failed(verifyGroupedWeight(*this, shapeOf(getWeight()), experts,
                                 getTransposeW(), k, n)))
    return failure();
  if (x[1] != k)
    return emitOpError("input ")
           << shapeStr(x) << " does not match the experts' weight "
           << shapeStr(shapeOf(getWeight()))
           << (getTransposeW() ? " (transpose_w)" : "");
  return expectShape(*this, "result", getResult(), {x[0], n});
}

LogicalResult GroupedLinearGradWeightOp::verify() {
  ArrayRef<int64_t> x, dy;
  int64_t experts, k, n;
  if (failed(expectMatrix(*this, "input [S, K]", getInput(), x)) ||
      failed(expectMatrix(*this, "grad [S, N]", getGrad(), dy)) ||
      failed(verifyCounts(*this, getCounts(), experts)) ||
      failed(verifyGroupedWeight(*this, shapeOf(getResult()), experts,
                                 getTransposeW(), k, n)))
    return failure();
  if (x[0] != dy[0] || x[1] != k || dy[1] != n)
    return emitOpError("input ") << shapeStr(x) << " and grad " << shapeStr(dy)
                                 << " do not match the weight gradient "
                                 << shapeStr(shapeOf(getResult()))
                                 << (getTransposeW() ? " (transpose_w)" : "");
  return success();
}

LogicalResult MoeLoadOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "router logits [..., E]", getLogits(),
                            tokens)) ||
      failed(expectTokensOf(*this, "experts", getExperts(), getLogits(),
                            widthOf(getExperts()))))
    return failure();
  if (!getLoad().getType().getElementType().isF32())
    return emitOpError("expects an f32 load (token counts are exact in f32)");
  return expectShape(*this, "load", getLoad(), {2, widthOf(getLogits())});
}

LogicalResult MoeLoadGradOp::verify() {
  int64_t tokens;
  if (failed(expectPerToken(*this, "router logits [..., E]", getLogits(),
                            tokens)) ||
      failed(expectShape(*this, "grad", getGrad(), {2, widthOf(getLogits())})))
    return failure();
  return expectShape(*this, "result", getResult(), shapeOf(getLogits()));
}

LogicalResult MoeBalanceLossOp::verify() {
  return verifyLoads(*this, getLoads());
}

LogicalResult MoeBalanceLossGradOp::verify() {
  if (failed(verifyLoads(*this, getLoads())))
    return failure();
  return expectShape(*this, "result", getResult(), shapeOf(getLoads().front()));
}

namespace {

/// Expert parallelism's counts: `counts` [E] over the G ranks of `axis`
/// (E a multiple of G) and, when given, `recvCounts` [G, E / G]. Sets the
/// experts per rank.
LogicalResult verifyExpertShards(Operation *op, Value counts, Value recvCounts,
                                 MeshAxis axis, int64_t &perRank) {
  int64_t experts;
  if (failed(verifyCounts(op, counts, experts)))
    return failure();
  const int64_t g = meshGroupSize(op, axis);
  if (experts % g != 0)
    return op->emitOpError() << "the " << experts
                             << " experts do not divide over the " << g
                             << " ranks of axis " << stringifyMeshAxis(axis);
  perRank = experts / g;
  if (recvCounts)
    return expectShape(op, "recv_counts", recvCounts, {g, perRank});
  return success();
}

} // namespace

LogicalResult MoeExchangeCountsOp::verify() {
  int64_t perRank;
  if (failed(verifyExpertShards(*this, getCounts(), getRecvCounts(), getAxis(),
                                perRank)))
    return failure();
  return expectShape(*this, "local_counts", getLocalCounts(), {perRank});
}

LogicalResult MoeExchangeOp::verify() {
  int64_t perRank;
  ArrayRef<int64_t> in, out;
  if (failed(verifyExpertShards(*this, getCounts(), getRecvCounts(), getAxis(),
                                perRank)) ||
      failed(expectMatrix(*this, "rows", getInput(), in)) ||
      failed(expectMatrix(*this, "result", getResult(), out)))
    return failure();
  if (in[1] != out[1] || getInput().getType().getElementType() !=
                             getResult().getType().getElementType())
    return emitOpError("rows ")
           << getInput().getType() << " and result " << getResult().getType()
           << " differ in width or element type";
  return success();
}
