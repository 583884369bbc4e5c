// RUN: dsc-opt %s -split-input-file -verify-diagnostics -dsc-autodiff -dsc-build-train-step | FileCheck %s

// A frozen parameter (dsc.frozen) is a constant to -dsc-autodiff: no
// gradient result, and no weight gradient computed for it; the input
// gradient still flows through it to the trainable parameter below.
// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME: tensor<4x8xf32> {dsc.param = #dsc.param<"w1"
// CHECK-SAME: tensor<6x4xf32> {dsc.frozen, dsc.param = #dsc.param<"w2"
// CHECK-SAME: tensor<4x8xf32> {dsc.state = #dsc.state<grad, "w1">}
// CHECK-SAME: tensor<2x3x8xf32> {dsc.state = #dsc.state<input_ids
// CHECK-SAME: -> (tensor<f32> {{.*}}, tensor<4x8xf32> {dsc.state = #dsc.state<grad, "w1">})
// CHECK: dsc.linear_grad_input
// CHECK-NOT: dsc.linear_grad_weight {{.*}} -> tensor<6x4xf32>
// CHECK: dsc.linear_grad_weight {{.*}} -> tensor<4x8xf32>
// CHECK-LABEL: func.func @apply_step(
// CHECK-NOT: "w2"
// CHECK: return
module {
func.func @forward(%w1: tensor<4x8xf32> {dsc.param = #dsc.param<"w1", normal, 0.02 : f64>},
                   %w2: tensor<6x4xf32> {dsc.param = #dsc.param<"w2", normal, 0.02 : f64>, dsc.frozen},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x6xf32>) {
  %h = dsc.linear %x, %w1 {transpose_w = true} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %o = dsc.linear %h, %w2 {transpose_w = true} : (tensor<2x3x4xf32>, tensor<6x4xf32>) -> tensor<2x3x6xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %o : tensor<f32>, tensor<2x3x6xf32>
}
}

// -----

// Nothing to train is an error, not an empty optimizer step.
module {
// expected-error @below {{dsc-build-train-step: every parameter is frozen; there is nothing to train}}
func.func @forward(%w: tensor<6x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>, dsc.frozen},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x6xf32>) {
  %o = dsc.linear %x, %w {transpose_w = true} : (tensor<2x3x8xf32>, tensor<6x8xf32>) -> tensor<2x3x6xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %o : tensor<f32>, tensor<2x3x6xf32>
}
}
