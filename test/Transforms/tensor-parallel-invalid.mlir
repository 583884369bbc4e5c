// RUN: dsc-opt %s -split-input-file -dsc-tensor-parallel -verify-diagnostics

// Nothing is sliced unless every attention and MLP can be: heads and
// features must divide by the tensor axis, a sliced weight must be a
// parameter used once, an attention's merged heads must feed its output
// projection.

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @forward(%x: tensor<2x4x12xf32>,
      %w: tensor<12x36xf32> {dsc.param = #dsc.param<"qkv", normal, 2.000000e-02 : f64>},
      %o: tensor<12x12xf32> {dsc.param = #dsc.param<"o", normal, 2.000000e-02 : f64>}) -> tensor<2x4x12xf32> {
    %0 = dsc.linear %x, %w : (tensor<2x4x12xf32>, tensor<12x36xf32>) -> tensor<2x4x36xf32>
    // expected-error @+1 {{dsc-tensor-parallel: 3 heads cannot be split over 2 ranks}}
    %1:3 = dsc.split_heads %0 {num_heads = 3 : i64} : (tensor<2x4x36xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>)
    %2 = dsc.batch_matmul %1#0, %1#1 {transpose_b = true} : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
    %3 = dsc.softmax %2 : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
    %4 = dsc.batch_matmul %3, %1#2 : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
    %5 = dsc.merge_heads %4 : (tensor<2x3x4x4xf32>) -> tensor<2x4x12xf32>
    %6 = dsc.linear %5, %o : (tensor<2x4x12xf32>, tensor<12x12xf32>) -> tensor<2x4x12xf32>
    return %6 : tensor<2x4x12xf32>
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @forward(%x: tensor<2x4x8xf32>,
      %fc: tensor<8x16xf32> {dsc.param = #dsc.param<"fc", normal, 2.000000e-02 : f64>},
      %proj: tensor<16x8xf32> {dsc.param = #dsc.param<"proj", normal, 2.000000e-02 : f64>}) -> (tensor<2x4x8xf32>, tensor<2x4x16xf32>) {
    // expected-error @+1 {{dsc-tensor-parallel: parameter 'fc' is used elsewhere too, so it cannot be sliced}}
    %0 = dsc.linear %x, %fc : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    %1 = dsc.gelu tanh %0 : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
    %2 = dsc.linear %1, %proj : (tensor<2x4x16xf32>, tensor<16x8xf32>) -> tensor<2x4x8xf32>
    %3 = dsc.linear %x, %fc : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
    return %2, %3 : tensor<2x4x8xf32>, tensor<2x4x16xf32>
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 4, pipeline = 1>} {
  func.func @forward(%x: tensor<2x4x8xf32>,
      %fc: tensor<8x10xf32> {dsc.param = #dsc.param<"fc", normal, 2.000000e-02 : f64>},
      %proj: tensor<10x8xf32> {dsc.param = #dsc.param<"proj", normal, 2.000000e-02 : f64>}) -> tensor<2x4x8xf32> {
    // expected-error @+1 {{dsc-tensor-parallel: 10 output features in 1 section(s) cannot be split over 4 ranks}}
    %0 = dsc.linear %x, %fc : (tensor<2x4x8xf32>, tensor<8x10xf32>) -> tensor<2x4x10xf32>
    %1 = dsc.gelu tanh %0 : tensor<2x4x10xf32> -> tensor<2x4x10xf32>
    %2 = dsc.linear %1, %proj : (tensor<2x4x10xf32>, tensor<10x8xf32>) -> tensor<2x4x8xf32>
    return %2 : tensor<2x4x8xf32>
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @forward(%x: tensor<2x4x8xf32>,
      %w: tensor<8x8xf32> {dsc.param = #dsc.param<"v", normal, 2.000000e-02 : f64>}) -> tensor<2x4x8xf32> {
    %0 = dsc.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %1 = dsc.split_heads %0 {num_heads = 2 : i64} : (tensor<2x4x8xf32>) -> tensor<2x2x4x4xf32>
    // expected-error @+1 {{dsc-tensor-parallel: the merged heads must feed one dsc.linear (the output projection)}}
    %2 = dsc.merge_heads %1 : (tensor<2x2x4x4xf32>) -> tensor<2x4x8xf32>
    %3 = dsc.gelu tanh %2 : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
    return %3 : tensor<2x4x8xf32>
  }
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  // expected-error @+1 {{dsc-tensor-parallel: found no attention or MLP to slice over the 2 ranks of the tensor axis}}
  func.func @forward(%x: tensor<2x4x8xf32>,
      %w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 2.000000e-02 : f64>}) -> tensor<2x4x8xf32> {
    %0 = dsc.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    return %0 : tensor<2x4x8xf32>
  }
}

// -----

// expected-error @+1 {{dsc-tensor-parallel: the module has no @forward}}
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
}
