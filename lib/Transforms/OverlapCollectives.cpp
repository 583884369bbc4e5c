//===- OverlapCollectives.cpp - ZeRO-3's gathers ahead of their use ---------===//
//
// -dsc-overlap-collectives (Passes.td): each all_gather of a block argument
// moves up to the first user of the earliest gather still within the
// prefetch window, counted in gathered elements over the gathers from that
// one to this one's predecessor. The gathers keep their order, so every
// rank still issues them alike.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <set>
#include <vector>

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCOVERLAPCOLLECTIVES
#include "dsc/Transforms/Passes.h.inc"
} // namespace mlir::dsc

using namespace mlir;
using namespace mlir::dsc;

namespace {

/// The first op of `block` that uses a result of `op` (null if none).
Operation *firstUser(Operation *op, Block &block) {
  Operation *first = nullptr;
  for (Operation *user : op->getUsers()) {
    Operation *inBlock = block.findAncestorOpInBlock(*user);
    if (inBlock && (!first || inBlock->isBeforeInBlock(first)))
      first = inBlock;
  }
  return first;
}

int64_t gatheredElements(AllGatherOp g) {
  return cast<ShapedType>(g.getResult().getType()).getNumElements();
}

struct OverlapCollectivesPass
    : public mlir::dsc::impl::DscOverlapCollectivesBase<OverlapCollectivesPass> {
  using DscOverlapCollectivesBase::DscOverlapCollectivesBase;

  void runOnOperation() override {
    if (prefetchElements < 0) {
      getOperation().emitError()
          << "-dsc-overlap-collectives: prefetch-elements must be >= 0, got "
          << int64_t(prefetchElements);
      return signalPassFailure();
    }
    getOperation().walk([&](func::FuncOp fn) {
      for (Block &block : fn.getBody()) {
        reduceEarly(block);
        if (prefetchElements > 0)
          prefetch(block);
      }
    });
  }

  /// An op that uses the communicator (Dsc_Collective's effect).
  static bool isCollective(Operation *op) {
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return false;
    SmallVector<MemoryEffects::EffectInstance> all;
    effects.getEffects(all);
    return llvm::any_of(all, [](const MemoryEffects::EffectInstance &e) {
      return e.getResource() == CommunicatorResource::get();
    });
  }

  /// A collective between pipeline stages, whose ranks run different
  /// programs: no collective moves past one (within a stage every rank runs
  /// this same program, so any order this pass makes is every rank's).
  static bool crossesStages(Operation *op) {
    if (!isCollective(op))
      return false;
    if (isa<SendOp, RecvOp>(op))
      return true;
    auto axis = op->getAttrOfType<MeshAxisAttr>("axis");
    return axis && axis.getValue() == MeshAxis::pipeline;
  }

  /// Each reduction (not between stages), with the single-use
  /// pack/flat_resize chain feeding it, just after the last definition it
  /// reads, so that reductions are issued in the order their gradients
  /// become final.
  void reduceEarly(Block &block) {
    std::vector<Operation *> reductions;
    for (Operation &op : block)
      if (isa<ReduceScatterOp, AllReduceOp>(op) && !crossesStages(&op))
        reductions.push_back(&op);
    for (Operation *reduction : reductions) {
      // The packaging chain, operands first.
      std::vector<Operation *> chain = {reduction};
      for (size_t k = 0; k < chain.size(); ++k)
        for (Value v : chain[k]->getOperands())
          if (Operation *def = v.getDefiningOp();
              def && def->getBlock() == &block &&
              isa<PackOp, FlatResizeOp>(def) && def->hasOneUse())
            chain.push_back(def);
      std::set<Operation *> inChain(chain.begin(), chain.end());
      // The latest op outside the chain it depends on, or a collective
      // between stages: the chain goes right after it.
      Operation *after = nullptr;
      auto later = [&](Operation *op) {
        if (op && op->getBlock() == &block && !inChain.count(op) &&
            (!after || after->isBeforeInBlock(op)))
          after = op;
      };
      for (Operation *op : chain)
        for (Value v : op->getOperands())
          later(v.getDefiningOp());
      for (Operation *op = reduction->getPrevNode(); op;
           op = op->getPrevNode())
        if (crossesStages(op)) {
          later(op);
          break;
        }
      Operation *first = chain.back();
      for (Operation *op : chain)
        if (op->isBeforeInBlock(first))
          first = op;
      if (!after || !after->isBeforeInBlock(first))
        continue;
      // Program order among the chain, then the reduction last.
      std::vector<Operation *> ordered(chain.begin(), chain.end());
      std::sort(ordered.begin(), ordered.end(),
                [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
      Operation *at = after;
      for (Operation *op : ordered) {
        op->moveAfter(at);
        at = op;
      }
    }
  }

  void prefetch(Block &block) {
    std::vector<AllGatherOp> gathers;
    for (Operation &op : block)
      if (auto g = dyn_cast<AllGatherOp>(op);
          g && isa<BlockArgument>(g.getInput()) &&
          g.getInput().getParentBlock() == &block)
        gathers.push_back(g);
    for (size_t j = 1; j < gathers.size(); ++j) {
      // The earliest gather i < j with gathers i..j-1 within the window.
      size_t i = j;
      int64_t window = 0;
      while (i > 0 && window + gatheredElements(gathers[i - 1]) <=
                          prefetchElements) {
        window += gatheredElements(gathers[i - 1]);
        --i;
      }
      if (i == j)
        continue;
      Operation *at = firstUser(gathers[i], block);
      // Never past the previous gather: the gathers keep their order.
      if (!at || at->isBeforeInBlock(gathers[j - 1]) ||
          gathers[j]->isBeforeInBlock(at))
        at = gathers[j - 1]->getNextNode();
      // Nor past a collective between stages.
      for (Operation *op = gathers[j]->getPrevNode(); op && op != at;
           op = op->getPrevNode())
        if (crossesStages(op)) {
          at = op->getNextNode();
          break;
        }
      if (at->isBeforeInBlock(gathers[j]))
        gathers[j]->moveBefore(at);
    }
  }
};

} // namespace
