// RUN: dsc-opt %s -split-input-file -verify-diagnostics
// RUN: not dsc-opt %S/pad-vocabulary.mlir -split-input-file "-dsc-pad-vocabulary=multiple=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dsc-opt %S/pad-vocabulary.mlir -split-input-file -dsc-pad-vocabulary -dsc-pad-vocabulary 2>&1 | FileCheck %s --check-prefix=TWICE
// ZERO: dsc-pad-vocabulary: multiple must be >= 1, got 0
// TWICE: dsc-pad-vocabulary: the module is padded or sliced already (dsc.tensor_slices)

func.func @too_many_classes(%logits: tensor<2x4x128xf32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{classes = 129 must be 0 (every column) or at most the logits' 128 columns}}
  %loss = dsc.cross_entropy %logits, %labels {classes = 129 : i64} : (tensor<2x4x128xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

func.func @negative_classes(%dloss: tensor<f32>, %logits: tensor<2x4x128xf32>, %labels: tensor<2x4xi32>) -> tensor<2x4x128xf32> {
  // expected-error @+1 {{classes = -1 must be 0 (every column) or at most the logits' 128 columns}}
  %d = dsc.cross_entropy_grad %dloss, %logits, %labels {classes = -1 : i64} : (tensor<f32>, tensor<2x4x128xf32>, tensor<2x4xi32>) -> tensor<2x4x128xf32>
  return %d : tensor<2x4x128xf32>
}

// -----

func.func @fused_classes(%dloss: tensor<f32>, %logits: tensor<2x4x128xf32>, %labels: tensor<2x4xi32>) -> tensor<f32> {
  // expected-error @+1 {{classes = 200 must be 0 (every column) or at most the logits' 128 columns}}
  %loss, %d = dsc.cross_entropy_with_grad %dloss, %logits, %labels {classes = 200 : i64} : (tensor<f32>, tensor<2x4x128xf32>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x128xf32>)
  return %loss : tensor<f32>
}
