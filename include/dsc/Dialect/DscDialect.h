//===- DscDialect.h - The dsc dialect --------------------------*- C++ -*-===//
#ifndef DSC_DIALECT_DSCDIALECT_H
#define DSC_DIALECT_DSCDIALECT_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "dsc/Dialect/DscDialect.h.inc"
#include "dsc/Dialect/DscEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dsc/Dialect/DscAttrs.h.inc"

#endif // DSC_DIALECT_DSCDIALECT_H
