//===- PrefetchGathers.cpp - ZeRO-3's gathers ahead of their use ---------===//
//
// -dsc-prefetch-gathers (Passes.td): each all_gather of a block argument
// moves up to the first user of the earliest gather still within the
// prefetch window, counted in gathered elements over the gathers from that
// one to this one's predecessor. The gathers keep their order, so every
// rank still issues them alike.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"
#include "dsc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace mlir::dsc {
#define GEN_PASS_DEF_DSCPREFETCHGATHERS
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

struct PrefetchGathersPass
    : public mlir::dsc::impl::DscPrefetchGathersBase<PrefetchGathersPass> {
  using DscPrefetchGathersBase::DscPrefetchGathersBase;

  void runOnOperation() override {
    if (prefetchElements < 0) {
      getOperation().emitError()
          << "-dsc-prefetch-gathers: prefetch-elements must be >= 0, got "
          << int64_t(prefetchElements);
      return signalPassFailure();
    }
    if (prefetchElements == 0)
      return;
    getOperation().walk([&](func::FuncOp fn) {
      for (Block &block : fn.getBody())
        prefetch(block);
    });
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
      // Never past the previous gather (the order is every rank's).
      if (!at || at->isBeforeInBlock(gathers[j - 1]) ||
          gathers[j]->isBeforeInBlock(at))
        at = gathers[j - 1]->getNextNode();
      if (at->isBeforeInBlock(gathers[j]))
        gathers[j]->moveBefore(at);
    }
  }
};

} // namespace
