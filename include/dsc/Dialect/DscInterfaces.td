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

def Dsc_InPlaceOpInterface : OpInterface<"InPlaceOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    An op whose kernels may write a result over one of its operands: the
    lowering (lib/Codegen/LowerToProgram.cpp) then gives the result that
    operand's buffer when the operand has no other use, so the memory plan
    holds one buffer instead of two.
  }];
  let methods = [
    InterfaceMethod<[{
        The operand result `result` may overwrite, if any (same type).
      }],
      "std::optional<unsigned>", "getInPlaceOperand",
      (ins "unsigned":$result)>
  ];
}

def Dsc_CostOpInterface : OpInterface<"CostOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    What it costs to run an op once: arithmetic (FLOPs, a multiply-add
    counts 2) and bytes moved (every operand read once, every result written
    once, by default). `-dsc-remat` prices a recomputation with it.
    Elementwise ops implement it through Dsc_ElementwiseCost in DscOps.td,
    the contractions through external models (lib/Dialect/CostModel.cpp,
    attached by `registerCostModel`); an op without it is never recomputed.
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
      "bool", "isCheapToRecompute", (ins)>
  ];
}

def Dsc_StochasticOpInterface : OpInterface<"StochasticOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    An op that applies dropout: element e of its dropped value is kept when
    Philox(seed, step, `stream`, e) >= `rate` and then scaled by
    1 / (1 - `rate`). The mask is a function of those attributes, so running
    the op again (a -dsc-remat clone, the gradient op that replays the mask)
    draws the same mask. The ops declare `F64Attr:$rate` and
    `I64Attr:$stream`; the rate is verified here, once for all of them.
  }];
  let methods = [
    InterfaceMethod<"The probability of dropping an element, in [0, 1).",
      "double", "getDropoutRate", (ins), [{}], [{
        return $_op.getRate().convertToDouble();
      }]>,
    InterfaceMethod<"The Philox stream the mask is drawn from.",
      "int64_t", "getDropoutStream", (ins), [{}], [{
        return $_op.getStream();
      }]>,
    InterfaceMethod<[{
        Removes the dropout and keeps the op's other work (evaluation runs
        without dropout): by default the rate becomes 0; dsc.dropout, which
        does nothing else, replaces itself with its input.
      }],
      "void", "disableDropout", (ins "::mlir::RewriterBase &":$rewriter),
      [{}], [{
        rewriter.modifyOpInPlace($_op, [&] {
          $_op.setRate(::llvm::APFloat(0.0));
        });
      }]>
  ];
  let verify = [{
    double rate = ::llvm::cast<StochasticOpInterface>($_op).getDropoutRate();
    if (!(rate >= 0 && rate < 1)) // NaN too
      return $_op->emitOpError("expects rate in [0, 1), got ") << rate;
    return ::mlir::success();
  }];
}

def Dsc_OptimizerOpInterface : OpInterface<"OptimizerOpInterface"> {
  let cppNamespace = "::mlir::dsc";
  let description = [{
    One optimizer update of one parameter. Operands: param, grad, the state
    tensors (one per result after new_param, in the same order), then lr,
    step, grad_scale and the optional skip flag; results: new_param, then
    each state updated. The gradient and new_param have the param's shape
    and each updated state its state's type (verified here); the states
    have the param's shape too unless the op says otherwise
    (`statesHaveParamShape`: 8-bit Adam's per-block scales, Adafactor's
    factors), and then its own verifier checks them.
    The runtime's op table (Ops.def, family Optimizer) states the same
    layout. -dsc-build-train-step asks the op class for the kinds of its
    state; passes that move optimizer work (sharding) use the accessors.
  }];
  let methods = [
    StaticInterfaceMethod<"The kind of each state tensor, in operand order.",
      "::llvm::SmallVector<::mlir::dsc::StateKind>", "getStateKinds", (ins)>,
    StaticInterfaceMethod<[{
        Whether every state tensor has the param's shape (checked by the
        interface); false: the op's verifier checks its states.
      }],
      "bool", "statesHaveParamShape", (ins), [{}], [{ return true; }]>,
    InterfaceMethod<"The parameter before the update.",
      "::mlir::Value", "getParamOperand", (ins), [{
        return $_op->getOperand(0);
      }]>,
    InterfaceMethod<"Its gradient.",
      "::mlir::Value", "getGradOperand", (ins), [{
        return $_op->getOperand(1);
      }]>,
    InterfaceMethod<"The state tensors before the update.",
      "::mlir::OperandRange", "getStateOperands", (ins), [{
        return $_op->getOperands().slice(2, $_op->getNumResults() - 1);
      }]>,
    InterfaceMethod<"The parameter after the update.",
      "::mlir::Value", "getNewParamResult", (ins), [{
        return $_op->getResult(0);
      }]>,
    InterfaceMethod<"The state tensors after the update.",
      "::mlir::ResultRange", "getNewStateResults", (ins), [{
        return $_op->getResults().drop_front();
      }]>
  ];
  let verify = [{ return ::mlir::dsc::verifyOptimizerOp($_op); }];
}

#endif // DSC_INTERFACES
