// RUN: dsc-opt %s -dsc-fuse-softmax-dropout | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-autodiff | FileCheck %s --check-prefix=GRAD

// CHECK-LABEL: func.func @forward(
// CHECK: %[[S:.*]] = dsc.batch_matmul
// CHECK-NEXT: %[[D:[a-z0-9_]+]], %[[P:[a-z0-9_]+]] = dsc.softmax_dropout %[[S]] {causal = true, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64} : (tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
// CHECK-NEXT: dsc.batch_matmul %[[D]], %{{.*}} :
// CHECK-NOT: dsc.softmax %
// CHECK-NOT: dsc.dropout
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[D:[a-z0-9_]+]], %[[P:[a-z0-9_]+]] = dsc.softmax_dropout
// GRAD: %[[DD:.*]] = dsc.batch_matmul %{{.*}}, %{{.*}} {dsc.grad, transpose_b = true}
// The mask comes from the saved dropped probabilities, not from Philox.
// GRAD: dsc.softmax_dropout_grad %[[DD]], %[[P]], %[[D]] {dsc.grad, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64}
// GRAD-NOT: dsc.softmax_grad
func.func @forward(%w: tensor<4x12xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<1x4x4xf32>, %y: tensor<1x4xi32>) -> (tensor<f32>, tensor<1x4x4xf32>) {
  %qkv = dsc.linear %x, %w : (tensor<1x4x4xf32>, tensor<4x12xf32>) -> tensor<1x4x12xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 2 : i64} : (tensor<1x4x12xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = dsc.softmax %s {causal = true, scale = 0.5 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = dsc.dropout %p {rate = 0.1 : f64, stream = 2 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = dsc.batch_matmul %d, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %m = dsc.merge_heads %o : (tensor<1x2x4x2xf32>) -> tensor<1x4x4xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x4x4xf32>
}
