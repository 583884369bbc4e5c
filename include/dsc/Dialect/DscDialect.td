//===- DscDialect.td - The dsc dialect ---------------------*- tablegen -*-===//
//
// The dialect in which a transformer training step is built and optimised.
//
//===----------------------------------------------------------------------===//
#ifndef DSC_DIALECT
#define DSC_DIALECT

include "mlir/IR/OpBase.td"

def Dsc_Dialect : Dialect {
  let name = "dsc";
  let cppNamespace = "::mlir::dsc";
  let summary = "Transformer training graphs: forward, backward and optimizer";
  let description = [{
    Ops with value semantics on builtin ranked tensors (f32 today; f16 and
    bf16 are admitted by the type constraints for mixed precision). A model is
    imported as `@forward(params..., input_ids, targets) -> (loss, logits)`;
    `-dsc-autodiff` adds the backward graph from per-op gradient rules and
    `-dsc-build-train-step` turns it into `@micro_step` and `@apply_step`.
  }];
  let useDefaultAttributePrinterParser = 1;
  // Checks the module attributes dsc.mesh and dsc.mesh_data_inner.
  let hasOperationAttrVerify = 1;
}

#endif // DSC_DIALECT
