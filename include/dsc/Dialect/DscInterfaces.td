//===- DscInterfaces.td - dsc op interfaces ----------------*- tablegen -*-===//
#ifndef DSC_INTERFACES
#define DSC_INTERFACES

include "mlir/IR/OpBase.td"

def Dsc_GradientOpInterface : OpInterface<"GradientOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    The reverse-mode gradient rule of an op. `-dsc-autodiff` walks the forward
    graph backwards and asks every op for the gradients of its operands given
    the gradients of its results. Rules live with their ops
    (lib/Dialect/GradientRules.cpp), so adding an op never touches the pass.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the gradient of each operand at the builder's insertion point.
        `resultGrads[i]` is the gradient flowing into result i, or null when
        that result does not reach the loss. Sets `operandGrads[j]` to the
        gradient of operand j, or leaves it null when operand j is not
        differentiable (token ids, labels).
      }],
      "void", "buildGradient",
      (ins "::mlir::OpBuilder &":$builder,
           "::llvm::ArrayRef<::mlir::Value>":$resultGrads,
           "::llvm::SmallVectorImpl<::mlir::Value> &":$operandGrads)>
  ];
}

def Dsc_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    What it costs to run an op once: arithmetic (FLOPs, a multiply-add
    counts 2) and bytes moved (every operand read once, every result written
    once, by default). `-dsc-remat` prices a recomputation with it. The
    models are external (lib/Dialect/CostModel.cpp, attached by
    `registerCostModel`), so ops need no change in DscOps.td; an op without
    a model is never recomputed.
  }];
  let methods = [
    InterfaceMethod<"Floating-point operations of one execution.",
      "int64_t", "getFlops", (ins)>,
    InterfaceMethod<"Bytes read from the operands.",
      "int64_t", "getBytesRead", (ins), [{}], [{
        int64_t n = 0;
        for (::mlir::Value v : $_op->getOperands())
          if (auto t = ::llvm::dyn_cast<::mlir::ShapedType>(v.getType()))
            n += t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
        return n;
      }]>,
    InterfaceMethod<"Bytes written to the results.",
      "int64_t", "getBytesWritten", (ins), [{}], [{
        int64_t n = 0;
        for (::mlir::Value v : $_op->getResults())
          if (auto t = ::llvm::dyn_cast<::mlir::ShapedType>(v.getType()))
            n += t.getNumElements() * ((t.getElementTypeBitWidth() + 7) / 8);
        return n;
      }]>,
    InterfaceMethod<[{
        True for ops remat recomputes by default (elementwise or pure data
        movement: add, bias add, GELU, dropout, head splits, fills).
      }],
      "bool", "isCheapToRecompute", (ins), [{}], [{ return false; }]>
  ];
}

#endif // DSC_INTERFACES
