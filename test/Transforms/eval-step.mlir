// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step | FileCheck %s

// @eval_step is @forward without dropout: every op of StochasticOpInterface
// disables it; dsc.dropout goes, the fused ops keep their other work at
// rate 0. The training functions keep their rates.

// CHECK-LABEL: func.func @micro_step(
// CHECK: dsc.dropout %{{.*}} {rate = 1.000000e-01 : f64, stream = 1 : i64}
// CHECK: dsc.softmax_dropout %{{.*}} {rate = 2.000000e-01 : f64, stream = 2 : i64}
// CHECK: dsc.bias_dropout_add %{{.*}} {rate = 3.000000e-01 : f64, stream = 3 : i64}

// CHECK-LABEL: func.func @eval_step(
// CHECK-NOT: dsc.dropout
// CHECK: %[[E:.*]] = dsc.embedding
// CHECK-NEXT: %[[S:.*]], %{{.*}} = dsc.softmax_dropout %[[E]] {rate = 0.000000e+00 : f64, stream = 2 : i64}
// CHECK-NEXT: dsc.bias_dropout_add %[[S]], %{{.*}}, %[[E]] {rate = 0.000000e+00 : f64, stream = 3 : i64}
// CHECK-NOT: dsc.dropout
// CHECK: return

func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %e {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s:2 = dsc.softmax_dropout %d {rate = 0.2 : f64, stream = 2 : i64} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
  %r = dsc.bias_dropout_add %s#0, %b, %e {rate = 0.3 : f64, stream = 3 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %r, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
