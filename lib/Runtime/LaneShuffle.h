//===- LaneShuffle.h - Adversarial orders of the CUDA lanes -----*- C++ -*-===//
//
// DSC_CPU_LANE_SHUFFLE=SEED: the CPU backend runs each function that has
// steps off the device lane (ZeRO-Offload's host steps, overlap_comm's
// collectives) in a seeded random order that the CUDA backend's lanes
// allow (include/dsc/Codegen/StepLanes.h: each lane in
// program order, each step after the steps it waits for), instead of in
// program order. Training must stay bit-identical under every seed: a
// missing wait shows up as a different result on the CPU, where no GPU is
// needed to find it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_LIB_RUNTIME_LANESHUFFLE_H
#define DSC_LIB_RUNTIME_LANESHUFFLE_H

#include "dsc/Program/Program.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace dsc::rt {

/// DSC_CPU_LANE_SHUFFLE's seed, if set (a one-line Error if it is not a
/// number).
std::optional<uint64_t> laneShuffleSeed();

/// The instructions of `fn` (one step each) in a random order the lanes
/// allow; empty when every instruction is on the device lane.
std::vector<size_t> shuffledLaneOrder(const Program &program,
                                      const Function &fn, uint64_t seed);

} // namespace dsc::rt

#endif // DSC_LIB_RUNTIME_LANESHUFFLE_H
