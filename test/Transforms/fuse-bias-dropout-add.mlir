// RUN: dsc-opt %s -dsc-fuse-bias-dropout-add | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-bias-dropout-add -dsc-autodiff | FileCheck %s --check-prefix=GRAD

// GPT-2 order (residual on the left, dropout present).
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32>, %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{.*}}}, %[[B:[a-z0-9]+]]: tensor<8xf32>
// CHECK: %[[H:.*]] = dsc.linear %[[X]], %[[W]] : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[Y:.*]] = dsc.bias_dropout_add %[[H]], %[[B]], %[[X]] {rate = 1.000000e-01 : f64, stream = 5 : i64}
// CHECK-NOT: dsc.dropout
// CHECK-NOT: dsc.add
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[Y:.*]] = dsc.bias_dropout_add
// GRAD: %[[DY:.*]] = dsc.cross_entropy_grad
// GRAD: %[[DH:.*]], %[[DB:.*]] = dsc.dropout_bias_grad %[[DY]] {dsc.grad, rate = 1.000000e-01 : f64, stream = 5 : i64} : (tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>)
// GRAD: return {{.*}}, %{{.*}}, %[[DB]]
func.func @forward(%x: tensor<2x4x8xf32>,
                   %w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %h = dsc.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %h {rate = 0.1 : f64, stream = 5 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %r = dsc.add %x, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %r, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %r : tensor<f32>, tensor<2x4x8xf32>
}


// BERT order (branch on the left) without dropout: rate 0.
// CHECK-LABEL: func.func @bert_order(
// CHECK: %[[H:.*]] = dsc.linear %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {transpose_w = true}
// CHECK-NEXT: dsc.bias_dropout_add %[[H]], %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {rate = 0.000000e+00 : f64, stream = 0 : i64}
func.func @bert_order(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %res: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %h = dsc.linear %x, %w, %b {transpose_w = true} : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = dsc.add %h, %res : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  return %r : tensor<2x8xf32>
}


// Not fused: a broadcast add (position embeddings) is no residual connection.
// CHECK-LABEL: func.func @broadcast(
// CHECK: dsc.add
// CHECK-NOT: dsc.bias_dropout_add
func.func @broadcast(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %t: tensor<2x4x8xf32>) -> tensor<2x4x8xf32> {
  %h = dsc.linear %x, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r = dsc.add %t, %h : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  return %r : tensor<2x4x8xf32>
}
