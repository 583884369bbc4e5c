//===- RematSolver.cpp - Knapsack behind -dsc-remat's budget policy -------===//
//
// Storing item i costs bytes_i of the budget; recomputing it costs cost_i.
// Minimising the recompute cost is maximising the cost of what is stored,
// so the decision is the 0/1 knapsack
//
//   max sum_{i stored} cost_i   s.t.   sum_{i stored} bytes_i <= capacity
//
// solved by the textbook dynamic program over capacity units, O(n * units)
// time and n * units bits to recover the choice.
//
//===----------------------------------------------------------------------===//

#include "dsc/Transforms/RematSolver.h"

#include <algorithm>
#include <numeric>

using namespace dsc::remat;

namespace {
constexpr int64_t kMaxUnits = int64_t(1) << 20;
}

Choice dsc::remat::chooseRecompute(const std::vector<Item> &items,
                                   int64_t capacity) {
  const size_t n = items.size();
  Choice choice;
  choice.recompute.assign(n, true);
  for (const Item &it : items)
    choice.cost += it.cost;
  if (capacity < 0)
    return choice;
  choice.feasible = true;

  int64_t unit = 0;
  for (const Item &it : items)
    if (it.bytes > 0)
      unit = std::gcd(unit, it.bytes);
  if (unit == 0)
    unit = 1;
  if (capacity / unit > kMaxUnits)
    unit = std::max(unit, (capacity + kMaxUnits - 1) / kMaxUnits);
  const int64_t cap = capacity / unit;

  std::vector<int64_t> weight(n);
  for (size_t i = 0; i < n; ++i)
    weight[i] = (items[i].bytes + unit - 1) / unit;

  // best[w]: the largest stored cost with stored weight <= w.
  std::vector<int64_t> best(cap + 1, 0);
  std::vector<std::vector<bool>> take(n);
  for (size_t i = 0; i < n; ++i) {
    take[i].assign(cap + 1, false);
    const int64_t wi = weight[i];
    for (int64_t w = cap; w >= wi; --w)
      if (best[w - wi] + items[i].cost > best[w]) {
        best[w] = best[w - wi] + items[i].cost;
        take[i][w] = true;
      }
  }
  int64_t w = cap;
  for (size_t i = n; i-- > 0;)
    if (take[i][w]) {
      choice.recompute[i] = false;
      choice.cost -= items[i].cost;
      choice.storedBytes += items[i].bytes;
      w -= weight[i];
    }
  return choice;
}
