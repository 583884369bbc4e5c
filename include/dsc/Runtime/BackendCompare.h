//===- BackendCompare.h - One backend against another -------*- C++ -*-===//
//
// How `dsc-run check-cuda` holds the CUDA backend to the CPU backend, kept
// apart from both so that it is tested here with two CPU backends: every
// instruction runs alone, on both, from the reference's values of its
// operands, so a kernel is judged by its own rounding and not by what the
// kernels before it left (a whole 12-layer bf16 backward pass on each side
// drifts by a few percent; one kernel's rounding is well under one).
//
//===----------------------------------------------------------------------===//
#ifndef DSC_RUNTIME_BACKENDCOMPARE_H
#define DSC_RUNTIME_BACKENDCOMPARE_H

#include "dsc/Runtime/IO.h"
#include "dsc/Runtime/Runtime.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace dsc::rt {

/// `program` plus, for each function in `names`, one function per
/// instruction, named instructionFunctionName(name, i), holding that
/// instruction alone. Create the backends over this program (a compiled
/// backend then has each instruction as an entry point of its own).
Program withInstructionFunctions(const Program &program,
                                 const std::vector<std::string> &names);
/// "<function>#<index>".
std::string instructionFunctionName(const std::string &function, size_t index);

/// max|got - ref| / max|ref| over a float buffer (0 when both are all
/// zero; infinity when NaNs differ); integer buffers: 0 when equal,
/// infinity otherwise.
double relativeBufferError(const Buffer &buffer, const void *ref,
                           const void *got);

/// Runs function `fnName` of `program` (made by withInstructionFunctions)
/// instruction by instruction on both backends: before each instruction
/// the candidate's copies of its operands (inputs and outputs: updates in
/// place read their outputs) are set to the reference's, then both run it
/// and every buffer it writes is compared. `refMem` ends as a whole run of
/// the function leaves it. Prints the first instruction over `tolerance`
/// and the worst error per opcode; returns whether all were within it.
bool compareInstructionByInstruction(const Program &program,
                                     const std::string &fnName,
                                     Backend &reference, Storage &refMem,
                                     Backend &candidate, Storage &candMem,
                                     const RngContext &rng, double tolerance,
                                     std::ostream &os);

/// One whole @micro_step of the candidate against the reference's
/// (Trainer::inspectMicroStep of each, from the same weights and batch):
/// the loss and every "grad.*" tensor, max|got - ref| / max|ref| each. The
/// instruction-by-instruction check runs no fusion across instructions
/// (GEMM epilogues, beta = 1 accumulation), and a warm-up schedule's first
/// learning rates can leave the weights, so the losses, unchanged: this is
/// what holds the step's gradients, as the backend really runs it, to the
/// reference. Prints the worst few and every tensor over `tolerance` (or
/// missing); returns whether all were within it.
bool compareGradients(const Safetensors &reference,
                      const Safetensors &candidate, double tolerance,
                      std::ostream &os);

} // namespace dsc::rt

#endif // DSC_RUNTIME_BACKENDCOMPARE_H
