// RUN: dsc-opt %s -dsc-fuse-bias-gelu | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-bias-gelu -dsc-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x16xf32> {{{.*}}}, %[[B:[a-z0-9]+]]: tensor<16xf32>
// CHECK: %[[H:.*]] = dsc.linear %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT: %[[A:.*]] = dsc.bias_gelu tanh %[[H]], %[[B]] : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NOT: dsc.gelu
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[H:.*]] = dsc.linear
// GRAD: %[[DH:.*]], %[[DB:.*]] = dsc.bias_gelu_grad tanh %{{.*}}, %[[H]], %{{.*}} {dsc.grad} : (tensor<2x4x16xf32>, tensor<2x4x16xf32>, tensor<16xf32>) -> (tensor<2x4x16xf32>, tensor<16xf32>)
// GRAD-NOT: dsc.reduce_to
// GRAD: dsc.linear_grad_weight %{{.*}}, %[[DH]]
// GRAD: return {{.*}}, %[[DB]]
func.func @forward(%x: tensor<2x4x8xf32>,
                   %w: tensor<8x16xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<16xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x16xf32>) {
  %h = dsc.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %a = dsc.gelu tanh %h : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %loss = dsc.cross_entropy %a, %y : (tensor<2x4x16xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %a : tensor<f32>, tensor<2x4x16xf32>
}


// Not fused: the projection's output has another user.
// CHECK-LABEL: func.func @shared(
// CHECK: dsc.linear %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} :
// CHECK: dsc.gelu erf
// CHECK-NOT: dsc.bias_gelu
func.func @shared(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>) {
  %h = dsc.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %a = dsc.gelu erf %h : tensor<2x8xf32> -> tensor<2x8xf32>
  return %a, %h : tensor<2x8xf32>, tensor<2x8xf32>
}
