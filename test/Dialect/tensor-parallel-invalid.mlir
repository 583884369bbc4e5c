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

// expected-error @+1 {{tensor slice needs dim >= 0, groups >= 1 and a size of whole groups, got dim = -1, groups = 1, size = 8}}
module attributes {dsc.tensor_slices = {w = #dsc.tensor_slice<dim = -1, groups = 1, size = 8>}} {
}

// -----

// expected-error @+1 {{tensor slice needs dim >= 0, groups >= 1 and a size of whole groups, got dim = 1, groups = 3, size = 8}}
module attributes {dsc.tensor_slices = {w = #dsc.tensor_slice<dim = 1, groups = 3, size = 8>}} {
}

// -----

// The vocabulary-parallel ops hold ceil(vocab / T) rows or logit columns.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @vocab_embedding_rows(%t: tensor<7x4xf32>, %ids: tensor<2x3xi32>) {
    // expected-error @+1 {{holds 7 entries of a vocabulary of 15 over the tensor axis (2 ranks), expected 8}}
    %e = dsc.vocab_embedding %t, %ids {vocab = 15} : (tensor<7x4xf32>, tensor<2x3xi32>) -> tensor<2x3x4xf32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @vocab_embedding_grad_shape(%ids: tensor<2x3xi32>, %dy: tensor<2x3x5xf32>) {
    // expected-error @+1 {{gradient [2, 3, 5] does not match ids [2, 3] and table [8, 4]}}
    %g = dsc.vocab_embedding_grad %ids, %dy {vocab = 15} : (tensor<2x3xi32>, tensor<2x3x5xf32>) -> tensor<8x4xf32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 4, pipeline = 1>} {
  func.func @vocab_cross_entropy_columns(%z: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) {
    // expected-error @+1 {{holds 8 entries of a vocabulary of 15 over the tensor axis (4 ranks), expected 4}}
    %l = dsc.vocab_cross_entropy %z, %y {vocab = 15} : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
    return
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @vocab_cross_entropy_grad_shape(%d: tensor<f32>, %z: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) {
    // expected-error @+1 {{result has shape [2, 3, 7], expected [2, 3, 8]}}
    %g = dsc.vocab_cross_entropy_grad %d, %z, %y {vocab = 15} : (tensor<f32>, tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<2x3x7xf32>
    return
  }
}

// -----

func.func @vocab_empty(%t: tensor<1x4xf32>, %ids: tensor<2xi32>) {
  // expected-error @+1 {{expects vocab >= 1, got 0}}
  %e = dsc.vocab_embedding %t, %ids {vocab = 0} : (tensor<1x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
  return
}
