//===- LowerToProgram.h - dsc module -> runtime Program --------*- C++ -*-===//
//
// The boundary between compiler and runtime: turns the lowered module
// (@micro_step and @apply_step in dsc ops) into the plain rt::Program the
// runtime executes, assigning one buffer per value, persistent buffers for
// every #dsc.state, and writing results back in place where that is safe.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_CODEGEN_LOWERTOPROGRAM_H
#define DSC_CODEGEN_LOWERTOPROGRAM_H

#include "dsc/Program/Program.h"

#include "mlir/IR/BuiltinOps.h"

namespace dsc {

/// Fails with a diagnostic on the offending op when the module is not a
/// lowered training step or contains an op the runtime cannot execute.
mlir::FailureOr<rt::Program> lowerToProgram(mlir::ModuleOp module);

/// The same for exactly `functions` of any module whose arguments and
/// results carry #dsc.state (a test harness runs single functions).
mlir::FailureOr<rt::Program>
lowerFunctionsToProgram(mlir::ModuleOp module,
                        llvm::ArrayRef<llvm::StringRef> functions);

} // namespace dsc

#endif // DSC_CODEGEN_LOWERTOPROGRAM_H
