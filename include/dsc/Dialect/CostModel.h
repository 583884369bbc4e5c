//===- CostModel.h - FLOP and byte costs of dsc ops -------------*- C++ -*-===//
//
// External models of CostOpInterface (DscInterfaces.td) for the contractions
// (elementwise ops declare theirs in DscOps.td), the registry hook that
// attaches them, and the number -dsc-remat minimises. -dsc-remat registers
// the models itself (as a dependent-dialect extension), so tools need not
// call this.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECT_COSTMODEL_H
#define DSC_DIALECT_COSTMODEL_H

#include "dsc/Dialect/DscOps.h"

#include "mlir/IR/DialectRegistry.h"

namespace mlir::dsc {

/// Attaches CostOpInterface to linear, batch_matmul and attention (once per
/// context, however often it is called).
void registerCostModel(DialectRegistry &registry);

/// The single number -dsc-remat minimises for one execution of `op`:
/// FLOPs + kCostPerByte * (bytes read + bytes written), so memory-bound
/// recomputations are not free. -1 when `op` has no cost model.
inline constexpr int64_t kCostPerByte = 1;
int64_t recomputeCost(Operation *op);

} // namespace mlir::dsc

#endif // DSC_DIALECT_COSTMODEL_H
