//===- DeviceCollective.cpp - A collective instruction, as a device runs it ===//

#include "dsc/Program/DeviceCollective.h"

#include "dsc/Program/InstrCheck.h"

namespace dsc::rt {

DeviceCollective DeviceCollective::of(const Program &P, const Instr &I) {
  if (opInfo(I.op).kernels != KernelFamily::Collective)
    throw Error(std::string(opcodeName(I.op)) + ": not a collective");
  const InstrDims d = checkInstr(P, I);
  DeviceCollective c;
  c.op = I.op;
  c.axis = d.axis;
  c.group = d.group;
  c.count = d.n;
  const int typed = I.inputs.empty() ? I.outputs.at(0) : I.inputs.at(0);
  c.elementBytes = dtypeSize(P.buffers.at(size_t(typed)).dtype);
  c.reduce = d.reduce;
  c.peer = d.peer;
  c.experts = d.experts;
  if (I.op == Opcode::MoeExchange) {
    c.inputRows = d.rows;
    c.outputRows = d.M;
    c.rowBytes = d.cols * int64_t(c.elementBytes);
    c.reverse = I.getInt("reverse") != 0;
  }
  return c;
}

std::string DeviceCollective::describe() const {
  std::string s = std::string(opcodeName(op)) + " over " + meshAxisName(axis) +
                  " (" + std::to_string(group) + " rank" +
                  (group == 1 ? "" : "s") + ")";
  switch (op) {
  case Opcode::AllReduce:
  case Opcode::ReduceScatter:
    s += reduce == ReduceOp::Mean  ? ", mean"
         : reduce == ReduceOp::Max ? ", max"
                                   : ", sum";
    break;
  case Opcode::Broadcast:
    s += ", root " + std::to_string(peer);
    break;
  case Opcode::Send:
  case Opcode::Recv:
    s += ", peer " + std::string(peer > 0 ? "+" : "") + std::to_string(peer);
    break;
  case Opcode::MoeExchangeCounts:
    return s + ", " + std::to_string(experts) + " experts, " +
           std::to_string(count) + " counts per peer";
  case Opcode::MoeExchange:
    return s + (reverse ? ", back" : "") + ", " + std::to_string(experts) +
           " experts, " + std::to_string(inputRows) + " -> " +
           std::to_string(outputRows) + " rows of " +
           std::to_string(rowBytes) + " bytes";
  default:
    break;
  }
  const bool perRank = op == Opcode::ReduceScatter ||
                       op == Opcode::AllGather || op == Opcode::Shard;
  return s + ", " + std::to_string(count) + " x " +
         std::to_string(elementBytes) + " bytes" +
         (perRank ? " per rank" : op == Opcode::AllToAll ? " per peer" : "");
}

} // namespace dsc::rt
