//===- StepLanes.h - The queues a function's steps run on -------*- C++ -*-===//
//
// The CUDA backend runs a function's steps on lanes, each in program
// order: the device (kernels, GEMMs, attention, the other collectives),
// with ZeRO-Offload the copies to the host, the host updates,
// ZeRO-Infinity's swaps and the copies to the device, and with
// `overlap_comm` the bulk collectives (all-reduce, reduce-scatter,
// all-gather, all-to-all, broadcast: those the CPU backend's communication
// thread runs beside the compute). A step waits for the step before it
// in its lane and, in every other lane, for the last earlier step it
// conflicts with (one writes bytes the other reads or writes: of the device
// arena, the host arena or the swap file). Every pair of conflicting steps
// then runs in program order, as the memory plan assumes, while a host
// update overlaps the device's later work and the other tensors' copies,
// and a gradient's reduction or the next layer's gather the compute.
//
// The CUDA backend turns this into its graph's edges; dsc-translate
// --list-lanes prints it.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_STEPLANES_H
#define DSC_CODEGEN_STEPLANES_H

#include "dsc/Codegen/CudaEmitter.h"

#include <cstddef>
#include <vector>

namespace dsc::cuda {

enum class Lane { Device, ToHost, Host, Swap, ToDevice, Comm };
constexpr int kLaneCount = 6;

/// "device", "to-host", "host", "swap", "to-device", "comm".
const char *laneName(Lane lane);

/// The lane of one step: HostCopy by direction, Host by opcode (swap_in
/// and swap_out on the swap lane), with `overlapComm` a bulk collective on
/// its buffers the comm lane, every other step the device.
Lane laneOf(const rt::Function &fn, const Step &step, bool overlapComm);

struct StepLanes {
  std::vector<Lane> lane; ///< per step
  /// Per step: the earlier steps of other lanes it waits for, at most one
  /// per lane, in increasing order.
  std::vector<std::vector<size_t>> waits;
  /// Whether any step runs off the device lane.
  bool offDevice() const;
};

/// The lanes of `steps` (emitCuda's steps of `fn`) and their waits; the
/// comm lane with the program's `overlap_comm`.
StepLanes scheduleLanes(const rt::Program &program, const rt::Function &fn,
                        const std::vector<Step> &steps);

} // namespace dsc::cuda

#endif // DSC_CODEGEN_STEPLANES_H
