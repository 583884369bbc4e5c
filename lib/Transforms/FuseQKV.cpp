//===- FuseQKV.cpp - Fuse Q/K/V projections -------------------------------===//
//
// Two rewrites on the forward graph:
//  1. three projections of one input (all biased or none), each split into
//     heads, become one projection over concatenated weights (BERT's
//     query/key/value; LLaMA's bias-free q/k/v_proj, whose key and value
//     may have fewer heads than the query);
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
  if (!linear.getResult().hasOneUse())
    return std::nullopt;
  auto split = dyn_cast<SplitHeadsOp>(*linear.getResult().getUsers().begin());
  if (!split || split.getParts().size() != 1)
    return std::nullopt;
  return HeadProjection{linear, split};
}

Type typeOf(Value v) { return v ? v.getType() : Type(); }

/// One projection over the weights (and biases, if any) of `qkv`
/// concatenated along their output axis.
LinearOp createFusedProjection(OpBuilder &b, ArrayRef<HeadProjection> qkv) {
  LinearOp q = qkv[0].linear;
  Location loc = q.getLoc();
  bool transposeW = q.getTransposeW();
  // nn.Linear weights are [out, in]: outputs stack along axis 0.
  int64_t wAxis = transposeW ? 0 : 1;
  SmallVector<Value> weights, biases;
  int64_t out = 0;
  for (HeadProjection p : qkv) {
    weights.push_back(p.linear.getWeight());
    if (p.linear.getBias())
      biases.push_back(p.linear.getBias());
    out += cast<RankedTensorType>(p.linear.getWeight().getType())
               .getShape()[wAxis];
  }
  auto wType = cast<RankedTensorType>(q.getWeight().getType());
  SmallVector<int64_t> wShape(wType.getShape());
  wShape[wAxis] = out;
  Value w = b.create<ConcatOp>(loc, wType.clone(wShape), weights,
                               b.getI64IntegerAttr(wAxis));
  Value bias;
  if (!biases.empty())
    bias = b.create<ConcatOp>(
        loc, cast<RankedTensorType>(biases[0].getType()).clone({out}), biases,
        b.getI64IntegerAttr(0));
  auto outType = cast<RankedTensorType>(q.getResult().getType());
  SmallVector<int64_t> outShape(outType.getShape());
  outShape.back() = out;
  return b.create<LinearOp>(loc, outType.clone(outShape), q.getInput(), w,
                            bias, b.getBoolAttr(transposeW));
}

/// Rewrite 1: projections of one input (all biased or none) are fused in
/// groups of three, in program order. Equal shapes and head counts (BERT's
/// query/key/value) split the fused output into heads in one op; grouped-
/// query attention's narrower key/value projections (LLaMA) split it into
/// the three widths first, each then split into its own heads.
void fuseSeparateProjections(Block &block) {
  // Input, layout and whether biased (by identity).
  using Key = std::tuple<const void *, bool, bool>;
  std::map<Key, SmallVector<HeadProjection>> groups;
  SmallVector<Key> order;
  for (auto linear : block.getOps<LinearOp>()) {
    auto match = matchHeadProjection(linear);
    if (!match)
      continue;
    Key key{linear.getInput().getAsOpaquePointer(), linear.getTransposeW(),
            bool(linear.getBias())};
    auto [it, inserted] = groups.try_emplace(key);
    if (inserted)
      order.push_back(key);
    it->second.push_back(*match);
  }
  for (const Key &key : order) {
    SmallVector<HeadProjection> &group = groups[key];
    for (size_t first = 0; first + 3 <= group.size(); first += 3) {
      MutableArrayRef<HeadProjection> qkv(group.data() + first, 3);
      auto same = [&](size_t i, size_t j) {
        return typeOf(qkv[i].linear.getWeight()) ==
                   typeOf(qkv[j].linear.getWeight()) &&
               typeOf(qkv[i].linear.getBias()) ==
                   typeOf(qkv[j].linear.getBias()) &&
               qkv[i].split.getNumHeads() == qkv[j].split.getNumHeads();
      };
      // Key and value always match; the query may be wider (more heads).
      if (!same(1, 2))
        continue;
      bool uniform = same(0, 1);
      LinearOp q = qkv[0].linear;
      OpBuilder b(q);
      Location loc = q.getLoc();
      LinearOp fused = createFusedProjection(b, qkv);
      SmallVector<Operation *> created = {fused};
      for (Value operand : fused->getOperands().drop_front())
        created.push_back(operand.getDefiningOp());
      if (uniform) {
        SmallVector<Type> partTypes;
        for (HeadProjection &p : qkv)
          partTypes.push_back(p.split.getParts()[0].getType());
        auto split = b.create<SplitHeadsOp>(loc, partTypes, fused,
                                            qkv[0].split.getNumHeadsAttr());
        created.push_back(split);
        for (auto [i, p] : llvm::enumerate(qkv)) {
          p.split.getParts()[0].replaceAllUsesWith(split.getParts()[i]);
          p.split.erase();
        }
      } else {
        SmallVector<Type> pieceTypes;
        for (HeadProjection &p : qkv)
          pieceTypes.push_back(p.linear.getType());
        int64_t axis = cast<RankedTensorType>(fused.getType()).getRank() - 1;
        auto pieces = b.create<SplitOp>(loc, pieceTypes, fused,
                                        b.getI64IntegerAttr(axis));
        created.push_back(pieces);
        for (auto [i, p] : llvm::enumerate(qkv))
          p.split->setOperand(0, pieces.getPieces()[i]);
      }
      copyLayer(q, created);
      for (HeadProjection &p : qkv)
        p.linear.erase();
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
