// RUN: dsc-opt %s -dsc-autodiff -dsc-invertible | FileCheck %s

// The LayerNorm input %[[X]] is read by the forward LayerNorm only: its
// gradient now comes from the output and the saved 1/std.
// CHECK-LABEL: func.func @forward(
// CHECK: dsc.layer_norm
// CHECK-NOT: dsc.invertible_layer_norm
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<8xf32> {dsc.param = {{.*}}}, %[[B:[a-z0-9]+]]: tensor<8xf32> {dsc.param = {{.*}}}, %[[X:[a-z0-9]+]]: tensor<2x3x8xf32>
// CHECK: %[[Y:.*]], %[[RSTD:.*]] = dsc.invertible_layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 1.000000e-05 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3xf32>)
// CHECK-NOT: dsc.layer_norm
// CHECK: dsc.layer_norm_grad_from_output %{{.*}}, %[[Y]], %[[G]], %[[B]], %[[RSTD]] {dsc.grad} : (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<2x3xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK-NOT: dsc.layer_norm_grad
// CHECK-NOT: %[[X]]
// CHECK: return
func.func @forward(%g: tensor<8xf32> {dsc.param = #dsc.param<"ln.weight", ones, 0.0 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"ln.bias", zeros, 0.0 : f64>},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x8xf32>) {
  %n = dsc.layer_norm %x, %g, %b {epsilon = 1.0e-5 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %loss = dsc.cross_entropy %n, %y : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %n : tensor<f32>, tensor<2x3x8xf32>
}
