//===- OpcodeProfile.h - Time per opcode, printed at the end ----*- C++ -*-===//
//
// DSC_PROFILE=1: a backend times every instruction (the CPU backend) or
// every launch (the CUDA backend, which then launches kernel by kernel) and
// prints to stderr, when it is destroyed, the time per opcode and the work
// items that took the most time: each distinct GEMM (M x N x K, batch,
// types) with its achieved FLOP rate, each distinct instruction shape with
// the bytes it moved per second (its operands read and results written
// once, the least any implementation moves).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_OPCODEPROFILE_H
#define DSC_RUNTIME_OPCODEPROFILE_H

#include "dsc/Program/Program.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dsc::rt {

/// Whether DSC_PROFILE asks for a profile (set, and not "0").
bool profileRequested();

class OpcodeProfile {
public:
  /// `backend` names the report ("dsc cpu profile: ...").
  explicit OpcodeProfile(std::string backend) : backend(std::move(backend)) {}
  OpcodeProfile(const OpcodeProfile &) = delete;
  OpcodeProfile &operator=(const OpcodeProfile &) = delete;
  ~OpcodeProfile();
  void add(Opcode op, double seconds);
  /// Adds `seconds` of running `instrs` (one call of the backend: one
  /// instruction, or a multi-tensor group) to the opcode of the first and
  /// to its work item.
  void addWork(const Program &program, const std::vector<const Instr *> &instrs,
               double seconds);

private:
  struct Work {
    double seconds = 0, flops = 0, bytes = 0;
    int64_t calls = 0;
  };
  std::string backend;
  std::map<Opcode, std::pair<double, int64_t>> entries; // seconds, calls
  std::map<std::string, Work> work;                     // by description
};


} // namespace dsc::rt

#endif // DSC_RUNTIME_OPCODEPROFILE_H
