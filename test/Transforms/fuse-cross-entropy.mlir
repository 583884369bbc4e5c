// RUN: dsc-opt %s -split-input-file -dsc-fuse-cross-entropy | FileCheck %s
// RUN: dsc-opt %s -split-input-file -dsc-fuse-cross-entropy | dsc-opt -split-input-file | FileCheck %s

// The loss and its gradient of one step become one op where the loss was;
// the seed (1/A) is computed before it. The gradient's users read the
// fused op's second result.
// CHECK-LABEL: func.func @micro_step(
// CHECK: %[[SEED:.*]] = dsc.fill {dsc.grad, value = 2.500000e-01 : f64}
// CHECK: %[[L:.*]] = dsc.linear
// CHECK-NEXT: %[[LOSS:.*]], %[[DL:.*]] = dsc.cross_entropy_with_grad %[[SEED]], %[[L]], %{{.*}} {ignore_index = 0 : i64} : (tensor<f32>, tensor<2x4x8xf16>, tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf16>)
// CHECK-NOT: dsc.cross_entropy
// CHECK: dsc.linear_grad_input %[[DL]]
// CHECK: return %[[LOSS]],
func.func @micro_step(%w: tensor<8x8xf16>, %x: tensor<2x4x8xf16>,
                      %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf16>) {
  %seed = dsc.fill {dsc.grad, value = 2.5e-01 : f64} : () -> tensor<f32>
  %l = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf16>, tensor<8x8xf16>) -> tensor<2x4x8xf16>
  %loss = dsc.cross_entropy %l, %y {ignore_index = 0 : i64} : (tensor<2x4x8xf16>, tensor<2x4xi32>) -> tensor<f32>
  %dl = dsc.cross_entropy_grad %seed, %l, %y {dsc.grad, ignore_index = 0 : i64} : (tensor<f32>, tensor<2x4x8xf16>, tensor<2x4xi32>) -> tensor<2x4x8xf16>
  %dx = dsc.linear_grad_input %dl, %w {dsc.grad, transpose_w = true} : (tensor<2x4x8xf16>, tensor<8x8xf16>) -> tensor<2x4x8xf16>
  return %loss, %dx : tensor<f32>, tensor<2x4x8xf16>
}

// -----

// Left alone: a seed computed after the loss (it cannot move up), another
// ignore_index, a gradient of another type than the logits, and a loss
// without its gradient (@eval_step; a pipeline stage's forward).
// CHECK-LABEL: func.func @late_seed(
// CHECK: dsc.cross_entropy %
// CHECK: dsc.cross_entropy_grad
// CHECK-LABEL: func.func @other_ignore_index(
// CHECK: dsc.cross_entropy %
// CHECK: dsc.cross_entropy_grad
// CHECK-LABEL: func.func @other_type(
// CHECK: dsc.cross_entropy %
// CHECK: dsc.cross_entropy_grad
// CHECK-LABEL: func.func @loss_only(
// CHECK: dsc.cross_entropy %
// CHECK-NOT: cross_entropy_with_grad
func.func @late_seed(%l: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %seed = dsc.fill {dsc.grad, value = 1.0 : f64} : () -> tensor<f32>
  %dl = dsc.cross_entropy_grad %seed, %l, %y {dsc.grad} : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x8xf32>
}
func.func @other_ignore_index(%seed: tensor<f32>, %l: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %dl = dsc.cross_entropy_grad %seed, %l, %y {dsc.grad, ignore_index = 3 : i64} : (tensor<f32>, tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x8xf32>
}
func.func @other_type(%seed: tensor<f32>, %l: tensor<2x4x8xf16>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf16>, tensor<2x4xi32>) -> tensor<f32>
  %dl = dsc.cross_entropy_grad %seed, %l, %y {dsc.grad} : (tensor<f32>, tensor<2x4x8xf16>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  return %loss, %dl : tensor<f32>, tensor<2x4x8xf32>
}
func.func @loss_only(%l: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> tensor<f32> {
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
