// RUN: dsc-opt %s -dsc-autodiff -dsc-invertible | FileCheck %s

// RMSNorm: the input %[[X]] is read by the forward RMSNorm only; its
// gradient now comes from the output and the saved 1/rms. The rotary
// embedding between needs nothing: its gradient is the inverse rotation of
// the incoming gradient and reads no activation.
// CHECK-LABEL: func.func @forward(
// CHECK: dsc.rms_norm
// CHECK-NOT: dsc.invertible_rms_norm
// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8xf32> {dsc.param = {{.*}}}, %[[X:[a-z0-9]+]]: tensor<2x3x4x8xf32>
// CHECK: %[[Y:.*]], %[[RSTD:.*]] = dsc.invertible_rms_norm %[[X]], %[[W]] {epsilon = 1.000000e-05 : f64} : (tensor<2x3x4x8xf32>, tensor<8xf32>) -> (tensor<2x3x4x8xf32>, tensor<2x3x4xf32>)
// CHECK-NEXT: %[[ROT:.*]] = dsc.rotary %[[Y]]
// CHECK-NOT: dsc.rms_norm
// CHECK: %[[DROT:.*]] = dsc.rotary %{{.*}} {dsc.grad, inverse = true}
// CHECK-NEXT: dsc.rms_norm_grad_from_output %[[DROT]], %[[Y]], %[[W]], %[[RSTD]] {dsc.grad} : (tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32>, tensor<8xf32>, tensor<2x3x4xf32>) -> (tensor<2x3x4x8xf32>, tensor<8xf32>)
// CHECK-NOT: dsc.rms_norm_grad
// CHECK-NOT: %[[X]]
// CHECK: return
func.func @forward(%w: tensor<8xf32> {dsc.param = #dsc.param<"norm.weight", ones, 0.0 : f64>},
                   %x: tensor<2x3x4x8xf32>, %y: tensor<2x3x4xi32>) -> tensor<f32> {
  %n = dsc.rms_norm %x, %w {epsilon = 1.0e-5 : f64} : (tensor<2x3x4x8xf32>, tensor<8xf32>) -> tensor<2x3x4x8xf32>
  %r = dsc.rotary %n : (tensor<2x3x4x8xf32>) -> tensor<2x3x4x8xf32>
  %loss = dsc.cross_entropy %r, %y : (tensor<2x3x4x8xf32>, tensor<2x3x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
