//===- DscTraits.h - Native traits and shape predicates of dsc ops -*- C++ -*-===//
//
// What DscOps.td states declaratively about an op and C++ must evaluate: the
// one-16-bit-format rule every op obeys, the per-element cost an elementwise
// op declares for -dsc-remat, and the shape predicates of the norm family's
// ODS constraints.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECT_DSCTRAITS_H
#define DSC_DIALECT_DSCTRAITS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"

namespace mlir::dsc {

/// Fails when the float operands and results of `op` mix f16 with bf16 (an
/// op computes in f32 and stores each result in its own type; f32 mixes with
/// either 16-bit format).
LogicalResult verifyOneHalfFormat(Operation *op);

/// Every dsc op (Dsc_EffectfulOp): the rule of verifyOneHalfFormat.
template <typename ConcreteOp>
class OneHalfFormat : public OpTrait::TraitBase<ConcreteOp, OneHalfFormat> {
public:
  static LogicalResult verifyTrait(Operation *op) {
    return verifyOneHalfFormat(op);
  }
};

/// The elements an elementwise op's cost is counted over.
enum class CostBasis { FirstOperand, Results };

/// The element count of `v` (0 for a dynamic or non-shaped value).
int64_t staticElementCount(Value v);

/// CostOpInterface's getFlops and isCheapToRecompute for an op that spends
/// `Flops` operations per element of its first operand or of its results
/// (Dsc_ElementwiseCost in DscOps.td).
template <int64_t Flops, CostBasis Basis, bool Cheap> struct ElementwiseCost {
  template <typename ConcreteOp>
  class Impl : public OpTrait::TraitBase<ConcreteOp, Impl> {
  public:
    static constexpr int64_t kFlopsPerElement = Flops;

    int64_t getFlops() {
      Operation *op = this->getOperation();
      int64_t n = 0;
      if (Basis == CostBasis::FirstOperand)
        n = staticElementCount(op->getOperand(0));
      else
        for (Value r : op->getResults())
          n += staticElementCount(r);
      return Flops * n;
    }
    bool isCheapToRecompute() { return Cheap; }
  };
};

/// Predicates of the norm family's constraints (an op normalising the last
/// dimension of a [..., C] tensor `rows`): `v` is [C], or [...] (one value
/// per row), or, when present, shaped like `rows`.
bool isPerFeature(Value v, Value rows);
bool isPerRow(Value v, Value rows);
bool isAbsentOrShapedLike(Value v, Value rows);

} // namespace mlir::dsc

#endif // DSC_DIALECT_DSCTRAITS_H
