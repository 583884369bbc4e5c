//===- Plan.h - dsc-run plan: a 3D-parallel job on paper --------*- C++ -*-===//
//
// Maps a job of data x pipeline x tensor ranks onto nodes (tensor slicing
// inside a node, then data parallelism, pipeline stages farthest apart:
// DeepSpeed's PipeModelDataParallelTopology order), partitions the model's
// layers into stages, and prints per stage the parameters and memory of one
// rank, per rank the bytes each kind of communication sends per step on
// each link class (inside a node, between nodes), and the pipeline bubble
// measured by simulating the schedule. Nothing is allocated: it works for
// models far larger than this machine (a trillion parameters on 4,096 GPUs).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_TOOLS_DSCRUN_PLAN_H
#define DSC_TOOLS_DSCRUN_PLAN_H

#include "dsc/Frontend/Config.h"

#include <ostream>

namespace dsc {

/// Prints the plan of `train` (world size, tensor_parallel, pipeline,
/// zero_optimization, ...) for `model` on nodes of `gpusPerNode` ranks.
/// Throws dsc::Error on a job that cannot be mapped.
void printParallelPlan(const ModelConfig &model, const TrainConfig &train,
                       int64_t gpusPerNode, std::ostream &os);

} // namespace dsc

#endif // DSC_TOOLS_DSCRUN_PLAN_H
