//===- OpcodeProfile.h - Time per opcode, printed at the end ----*- C++ -*-===//
//
// DSC_PROFILE=1: a backend times every instruction (the CPU backend) or
// every launch (the CUDA backend, which then launches kernel by kernel) and
// prints the time per opcode to stderr when it is destroyed.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_OPCODEPROFILE_H
#define DSC_RUNTIME_OPCODEPROFILE_H

#include "dsc/Runtime/Program.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>

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

private:
  std::string backend;
  std::map<Opcode, std::pair<double, int64_t>> entries; // seconds, calls
};

} // namespace dsc::rt

#endif // DSC_RUNTIME_OPCODEPROFILE_H
