// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// Megatron's region markers keep their operand's shape; the module's
// dsc.tensor_slices holds #dsc.tensor_slice entries only.

func.func @tp_copy_shape(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result has shape [2, 4], expected [2, 8]}}
  %y = dsc.tp_copy %x : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @tp_reduce_shape(%x: tensor<2x8xf32>) {
  // expected-error @+1 {{result has shape [8], expected [2, 8]}}
  %y = dsc.tp_reduce %x : (tensor<2x8xf32>) -> tensor<8xf32>
  return
}

// -----

// expected-error @+1 {{'dsc.tensor_slices' must be a dictionary on the module}}
module attributes {dsc.tensor_slices = 3 : i64} {
}

// -----

// expected-error @+1 {{'dsc.tensor_slices' entry 'w' must be a #dsc.tensor_slice<...>}}
module attributes {dsc.tensor_slices = {w = 1 : i64}} {
}

// -----

// expected-error @+1 {{tensor slice needs dim >= 0 and groups >= 1, got dim = -1, groups = 1}}
module attributes {dsc.tensor_slices = {w = #dsc.tensor_slice<dim = -1, groups = 1>}} {
}
