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

#endif // DSC_INTERFACES
