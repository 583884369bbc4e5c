//===- MlirPch.h - Precompiled header of the MLIR libraries ----*- C++ -*-===//
//
// The headers every translation unit of DscDialect, DscTransforms and
// DscCodegen parses, compiled once (dsc_use_mlir_pch in the top-level
// CMakeLists.txt). Only headers whose content does not depend on macros a
// file defines first: Passes.h.inc (GEN_PASS_DEF_*) stays out.
//
//===----------------------------------------------------------------------===//

#include "dsc/Dialect/DscOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/TypeSwitch.h"
