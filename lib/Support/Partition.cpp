//===- Partition.cpp - Contiguous balanced partitions --------------------===//

#include "dsc/Support/Partition.h"

#include <algorithm>

std::vector<size_t> dsc::partitionBalanced(const std::vector<double> &weights,
                                           size_t parts) {
  const size_t n = weights.size();
  if (parts == 0 || n < parts)
    return {};
  // Feasible with at most `parts` runs of sum <= cap, each non-empty.
  auto cuts = [&](double cap) {
    std::vector<size_t> bounds{0};
    double sum = 0;
    for (size_t i = 0; i < n; ++i) {
      // Leave at least one unit for each run still to come.
      const size_t left = parts - bounds.size();
      if ((sum + weights[i] > cap && sum > 0) || n - i == left) {
        if (bounds.size() == parts)
          return std::vector<size_t>{};
        bounds.push_back(i);
        sum = 0;
      }
      sum += weights[i];
    }
    if (bounds.size() != parts)
      return std::vector<size_t>{};
    bounds.push_back(n);
    return bounds;
  };
  double lo = *std::max_element(weights.begin(), weights.end()), hi = 0;
  for (double w : weights)
    hi += w;
  std::vector<size_t> best = cuts(hi);
  for (int it = 0; it < 100 && best.empty(); ++it)
    best = cuts(hi *= 2);
  for (int it = 0; it < 100; ++it) {
    const double mid = (lo + hi) / 2;
    std::vector<size_t> c = cuts(mid);
    if (c.empty())
      lo = mid;
    else {
      hi = mid;
      best = std::move(c);
    }
  }
  return best;
}
