//===- FuseQKV.cpp - Fuse Q/K/V projections -------------------------------===//
//
// Two rewrites on the forward graph:
//  1. three biased projections of one input, each split into heads, become
//     one projection over concatenated weights (BERT's query/key/value);
//  2. a biased projection split into heads hands its bias to a
//     dsc.bias_split_heads, which adds it while transposing into heads.
// After both, GPT-2's c_attn and BERT's query/key/value are the same IR: one
// unbiased GEMM followed by one fused bias + split-heads op.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/Passes.h"

#include "FusionUtils.h"

#include <map>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCFUSEQKV
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// A projection feeding exactly one single-part dsc.split_heads.
struct HeadProjection {
  LinearOp linear;
  SplitHeadsOp split;
};

std::optional<HeadProjection> matchHeadProjection(LinearOp linear) {
  if (!linear.getBias() || !linear.getResult().hasOneUse())
    return std::nullopt;
  auto split = dyn_cast<SplitHeadsOp>(*linear.getResult().getUsers().begin());
  if (!split || split.getParts().size() != 1)
    return std::nullopt;
  return HeadProjection{linear, split};
}

/// Rewrite 1: projections of one input with identical shapes and head counts
/// are fused in groups of three, in program order.
void fuseSeparateProjections(Block &block) {
  // Input, layout, weight and bias types, head count (by identity).
  using Key = std::tuple<const void *, bool, const void *, const void *,
                         int64_t>;
  std::map<Key, SmallVector<HeadProjection>> groups;
  SmallVector<Key> order;
  for (auto linear : block.getOps<LinearOp>()) {
    auto match = matchHeadProjection(linear);
    if (!match)
      continue;
    Key key{linear.getInput().getAsOpaquePointer(), linear.getTransposeW(),
            linear.getWeight().getType().getAsOpaquePointer(),
            linear.getBias().getType().getAsOpaquePointer(),
            match->split.getNumHeads()};
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted)
      order.push_back(key);
    it->second.push_back(*match);
  }
  for (const Key &key : order) {
    SmallVector<HeadProjection> &group = groups[key];
    for (size_t first = 0; first + 3 <= group.size(); first += 3) {
      MutableArrayRef<HeadProjection> qkv(group.data() + first, 3);
      LinearOp q = qkv[0].linear;
      OpBuilder b(q);
      Location loc = q.getLoc();
      bool transposeW = q.getTransposeW();
      auto wType = cast<RankedTensorType>(q.getWeight().getType());
      auto bType = cast<RankedTensorType>(q.getBias().getType());
      // nn.Linear weights are [out, in]: outputs stack along axis 0.
      int64_t wAxis = transposeW ? 0 : 1;
      SmallVector<int64_t> wShape(wType.getShape());
      wShape[wAxis] *= 3;
      SmallVector<Value> weights, biases;
      for (HeadProjection &p : qkv) {
        weights.push_back(p.linear.getWeight());
        biases.push_back(p.linear.getBias());
      }
      Value w = b.create<ConcatOp>(loc, wType.clone(wShape), weights,
                                   b.getI64IntegerAttr(wAxis));
      Value bias = b.create<ConcatOp>(
          loc, bType.clone({3 * bType.getShape()[0]}), biases,
          b.getI64IntegerAttr(0));
      auto outType = cast<RankedTensorType>(q.getResult().getType());
      SmallVector<int64_t> outShape(outType.getShape());
      outShape.back() *= 3;
      Value fused = b.create<LinearOp>(loc, outType.clone(outShape),
                                       q.getInput(), w, bias,
                                       b.getBoolAttr(transposeW));
      SmallVector<Type> partTypes;
      for (HeadProjection &p : qkv)
        partTypes.push_back(p.split.getParts()[0].getType());
      auto split = b.create<SplitHeadsOp>(loc, partTypes, fused,
                                          qkv[0].split.getNumHeadsAttr());
      copyLayer(q, {w.getDefiningOp(), bias.getDefiningOp(),
                    fused.getDefiningOp(), split.getOperation()});
      for (auto [i, p] : llvm::enumerate(qkv)) {
        p.split.getParts()[0].replaceAllUsesWith(split.getParts()[i]);
        p.split.erase();
        p.linear.erase();
      }
    }
  }
}

/// Rewrite 2: the bias of a projection split into heads moves into a
/// dsc.bias_split_heads.
void fuseBiasSplitHeads(Block &block) {
  SmallVector<LinearOp> candidates;
  for (auto linear : block.getOps<LinearOp>())
    if (linear.getBias() && linear.getResult().hasOneUse() &&
        isa<SplitHeadsOp>(*linear.getResult().getUsers().begin()))
      candidates.push_back(linear);
  for (LinearOp linear : candidates) {
    auto split = cast<SplitHeadsOp>(*linear.getResult().getUsers().begin());
    OpBuilder b(split);
    LinearOp unbiased = createUnbiased(b, linear);
    auto fused = b.create<BiasSplitHeadsOp>(
        split.getLoc(), split.getParts().getTypes(), unbiased,
        linear.getBias(), split.getNumHeadsAttr());
    copyLayer(linear, {unbiased, fused});
    split.replaceAllUsesWith(fused.getParts());
    split.erase();
    linear.erase();
  }
}

struct FuseQkvPass : mlir::dsc::impl::DscFuseQkvBase<FuseQkvPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      for (Block &block : fn.getBody()) {
        fuseSeparateProjections(block);
        fuseBiasSplitHeads(block);
      }
    });
  }
};

} // namespace
