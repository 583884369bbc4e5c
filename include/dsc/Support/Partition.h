//===- Partition.h - Contiguous balanced partitions -------------*- C++ -*-===//
//
// Pipeline stages are contiguous runs of model units (the embedding, each
// transformer layer, the head). The compiler's -dsc-pipeline-stage cuts a
// step with it and `dsc-run plan` prints the same cut.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_SUPPORT_PARTITION_H
#define DSC_SUPPORT_PARTITION_H

#include <cstddef>
#include <vector>

namespace dsc {

/// Splits `weights` into `parts` contiguous non-empty runs whose largest
/// sum is as small as possible; returns each run's first index followed by
/// weights.size(), or nothing when there are fewer weights than parts.
std::vector<size_t> partitionBalanced(const std::vector<double> &weights,
                                      size_t parts);

} // namespace dsc

#endif // DSC_SUPPORT_PARTITION_H
