// RUN: dsc-opt %s -dsc-autodiff | FileCheck %s

// Gemma 2's final-logit soft-capping: the gradient of the capped logits
// is dsc.softcap_grad of the incoming gradient and the capped result.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[L:.*]] = dsc.linear
// CHECK: %[[Y:.*]] = dsc.softcap %[[L]] {cap = 2.000000e+00 : f64}
// CHECK: %[[DY:.*]] = dsc.cross_entropy_grad
// CHECK: dsc.softcap_grad %[[DY]], %[[Y]] {cap = 2.000000e+00 : f64, dsc.grad}
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %l = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %y = dsc.softcap %l {cap = 2.0 : f64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %y, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
