//===- DscOps.h - dsc operations -------------------------------*- C++ -*-===//
#ifndef DSC_DIALECT_DSCOPS_H
#define DSC_DIALECT_DSCOPS_H

#include "dsc/Dialect/DscDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dsc/Dialect/DscInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dsc/Dialect/DscOps.h.inc"

namespace mlir::dsc {

/// Names of the argument/result attributes the frontend and passes use.
inline constexpr llvm::StringLiteral kParamAttrName = "dsc.param";
inline constexpr llvm::StringLiteral kStateAttrName = "dsc.state";

/// Shape of `lhs` @ W for a dsc.linear with the given weight shape, or
/// failure with a message. Shared by the verifier and the frontend.
FailureOr<SmallVector<int64_t>> inferLinearShape(ArrayRef<int64_t> input,
                                                 ArrayRef<int64_t> weight,
                                                 bool transposeW,
                                                 std::string &error);

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSCOPS_H
