//===- RematSolver.h - The store-or-recompute decision of -dsc-remat -*- C++ -*-===//
//
// Plain C++ (no MLIR), so unittests/Transforms/RematTest.cpp can check it
// against brute force. -dsc-remat (lib/Transforms/Remat.cpp) builds one Item
// per forward op whose results the backward reads, solves, applies the
// choice and measures it with the real memory planner.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TRANSFORMS_REMATSOLVER_H
#define DSC_TRANSFORMS_REMATSOLVER_H

#include <cstdint>
#include <vector>

namespace dsc::remat {

/// One candidate: the saved bytes its recomputation frees, and what the
/// recomputation costs (FLOPs + bytes moved, see CostModel.h).
struct Item {
  int64_t bytes = 0;
  int64_t cost = 0;
};

struct Choice {
  std::vector<bool> recompute; ///< per item
  int64_t cost = 0;            ///< sum of the recomputed items' costs
  int64_t storedBytes = 0;     ///< sum of the stored items' bytes
  bool feasible = false;       ///< storedBytes <= capacity was reachable
};

/// Minimises the recompute cost subject to storedBytes <= capacity: a 0/1
/// knapsack (keep the items of largest total cost that fit in `capacity`),
/// solved exactly by dynamic programming over bytes in units of the gcd of
/// the item sizes. When that would need more than 2^20 units the sizes are
/// rounded up to a coarser unit: the choice is then still feasible but
/// optimal only for the rounded sizes. capacity < 0 is infeasible (every
/// item recomputed, feasible = false).
Choice chooseRecompute(const std::vector<Item> &items, int64_t capacity);

} // namespace dsc::remat

#endif // DSC_TRANSFORMS_REMATSOLVER_H
