//===- DeviceCollective.h - A collective instruction, as a device runs it -*- C++ -*-===//
//
// The part of the compiler/runtime contract a device backend's emitter
// and runtime share for a collective instruction: which mesh axis's group
// it spans and what it moves, read once from the checked instruction.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_PROGRAM_DEVICECOLLECTIVE_H
#define DSC_PROGRAM_DEVICECOLLECTIVE_H

#include "dsc/Program/Program.h"

#include <string>

namespace dsc::rt {

/// One collective instruction (KernelFamily::Collective) as a device
/// backend runs it.
struct DeviceCollective {
  Opcode op = Opcode::AllReduce;
  MeshAxis axis = MeshAxis::Data;
  int64_t group = 1;          ///< ranks in the axis's group
  /// Elements (InstrCheck's `n`): all-reduce the tensor's; reduce-scatter,
  /// all-gather and shard one rank's part; all-to-all one peer's block;
  /// broadcast, send, recv the whole tensor; norm all-reduce 1; the expert
  /// counts' exchange one peer's El counts; the expert exchange the
  /// input's.
  int64_t count = 0;
  size_t elementBytes = 4;
  ReduceOp reduce = ReduceOp::Sum;
  int64_t peer = 0; ///< send/recv: steps along the axis; broadcast: root
  /// dsc.moe_exchange_counts and dsc.moe_exchange: the experts over the
  /// group; the exchange's input and output rows and the bytes of a row.
  int64_t experts = 0, inputRows = 0, outputRows = 0, rowBytes = 0;
  bool reverse = false; ///< dsc.moe_exchange: rows back to their senders

  /// Of instruction `I` of `P` (checked: throws its checkInstr error, and
  /// refuses the data_inner and data_outer axes).
  static DeviceCollective of(const Program &P, const Instr &I);
  /// "reduce_scatter over data (4 ranks), sum, 1024 x 4 bytes per rank".
  std::string describe() const;
};

} // namespace dsc::rt

#endif // DSC_PROGRAM_DEVICECOLLECTIVE_H
