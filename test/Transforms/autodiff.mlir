// RUN: dsc-opt %s -dsc-autodiff -split-input-file -verify-diagnostics | FileCheck %s

// A one-layer classifier: each op's rule appears in reverse order, the
// gradient of %w (used twice) is summed, and token ids get no gradient.

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[W:.*]]: tensor<8x8xf32> {dsc.param = {{.*}}}, %[[B:.*]]: tensor<8xf32> {dsc.param = {{.*}}}, %[[X:.*]]: tensor<2x4x8xf32>, %[[Y:.*]]: tensor<2x4xi32>, %[[DLOSS:.*]]: tensor<f32>)
// CHECK-SAME: -> (tensor<f32>, tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>)
// CHECK: %[[H:.*]] = dsc.linear %[[X]], %[[W]], %[[B]]
// CHECK: %[[A:.*]] = dsc.gelu tanh %[[H]]
// CHECK: %[[L:.*]] = dsc.linear %[[A]], %[[W]] {transpose_w = true}
// CHECK: %[[LOSS:.*]] = dsc.cross_entropy %[[L]], %[[Y]]
// CHECK: %[[DL:.*]] = dsc.cross_entropy_grad %[[DLOSS]], %[[L]], %[[Y]] {dsc.grad}
// CHECK: %[[DA:.*]] = dsc.linear_grad_input %[[DL]], %[[W]] {dsc.grad, transpose_w = true}
// CHECK: %[[DW1:.*]] = dsc.linear_grad_weight %[[A]], %[[DL]] {dsc.grad, transpose_w = true}
// CHECK: %[[DH:.*]] = dsc.gelu_grad tanh %[[DA]], %[[H]] {dsc.grad}
// CHECK-NOT: dsc.linear_grad_input
// CHECK: %[[DW2:.*]] = dsc.linear_grad_weight %[[X]], %[[DH]]
// CHECK: %[[DB:.*]] = dsc.reduce_to %[[DH]] {dsc.grad} : (tensor<2x4x8xf32>) -> tensor<8xf32>
// CHECK: %[[DW:.*]] = dsc.add %[[DW1]], %[[DW2]]
// CHECK: return %[[LOSS]], %[[L]], %[[DW]], %[[DB]]
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %h = dsc.linear %x, %w, %b : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %a = dsc.gelu tanh %h : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %l = dsc.linear %a, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}

// -----

// Attention core: split/merge heads and batched matmuls transpose their
// gradients; the softmax gradient is computed from the softmax output.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[QKV:.*]]:3 = dsc.split_heads
// CHECK: %[[S:.*]] = dsc.batch_matmul %[[QKV]]#0, %[[QKV]]#1 {transpose_b = true}
// CHECK: %[[P:.*]] = dsc.softmax %[[S]] {causal = true, scale = 5.000000e-01 : f64}
// CHECK: %[[O:.*]] = dsc.batch_matmul %[[P]], %[[QKV]]#2
// CHECK: %[[DO:.*]] = dsc.split_heads %{{.*}} {dsc.grad, num_heads = 2 : i64} : (tensor<1x4x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[DP:.*]] = dsc.batch_matmul %[[DO]], %[[QKV]]#2 {dsc.grad, transpose_b = true}
// CHECK: %[[DV:.*]] = dsc.batch_matmul %[[P]], %[[DO]] {dsc.grad, transpose_a = true}
// CHECK: %[[DS:.*]] = dsc.softmax_grad %[[DP]], %[[P]] {dsc.grad, scale = 5.000000e-01 : f64}
// CHECK: %[[DQ:.*]] = dsc.batch_matmul %[[DS]], %[[QKV]]#1 {dsc.grad} :
// CHECK: %[[DK:.*]] = dsc.batch_matmul %[[DS]], %[[QKV]]#0 {dsc.grad, transpose_a = true}
// CHECK: dsc.merge_heads %[[DQ]], %[[DK]], %[[DV]] {dsc.grad} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x4x24xf32>
func.func @forward(%w: tensor<8x24xf32> {dsc.param = #dsc.param<"c_attn", normal, 0.02 : f64>},
                   %x: tensor<1x4x8xf32>, %y: tensor<1x4xi32>) -> (tensor<f32>, tensor<1x4x8xf32>) {
  %qkv = dsc.linear %x, %w : (tensor<1x4x8xf32>, tensor<8x24xf32>) -> tensor<1x4x24xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 2 : i64} : (tensor<1x4x24xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = dsc.softmax %s {causal = true, scale = 0.5 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = dsc.batch_matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %m = dsc.merge_heads %o : (tensor<1x2x4x4xf32>) -> tensor<1x4x8xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x4x8xf32>
}

// -----

// The keys' bias has no gradient: softmax ignores a shift shared by all keys
// of a query, so each row of dS sums to 0. Its slice of a fused QKV bias's
// gradient, and a key projection's whole bias gradient, are exactly zero
// instead of the rounding noise of a sum of dK rows.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[KB:.*]] = dsc.fill {dsc.grad, value = 0.000000e+00 : f64} : () -> tensor<8xf32>
// CHECK: %[[DB:.*]] = dsc.reduce_to %{{.*}} {dsc.grad} : (tensor<1x4x24xf32>) -> tensor<24xf32>
// CHECK: %[[P:.*]]:3 = dsc.split %[[DB]] {axis = 0 : i64, dsc.grad} : (tensor<24xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: %[[Z:.*]] = dsc.fill {dsc.grad, value = 0.000000e+00 : f64} : () -> tensor<8xf32>
// CHECK: %[[B:.*]] = dsc.concat %[[P]]#0, %[[Z]], %[[P]]#2 {axis = 0 : i64, dsc.grad}
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[B]], %{{.*}}, %[[KB]] :
func.func @forward(%w: tensor<8x24xf32> {dsc.param = #dsc.param<"c_attn", normal, 0.02 : f64>},
                   %b: tensor<24xf32> {dsc.param = #dsc.param<"c_attn.bias", zeros, 0.0 : f64>},
                   %wk: tensor<8x8xf32> {dsc.param = #dsc.param<"key", normal, 0.02 : f64>},
                   %bk: tensor<8xf32> {dsc.param = #dsc.param<"key.bias", zeros, 0.0 : f64>},
                   %x: tensor<1x4x8xf32>, %y: tensor<1x4xi32>) -> (tensor<f32>, tensor<1x4x8xf32>) {
  %qkv = dsc.linear %x, %w : (tensor<1x4x8xf32>, tensor<8x24xf32>) -> tensor<1x4x24xf32>
  %q, %k, %v = dsc.bias_split_heads %qkv, %b {num_heads = 2 : i64} : (tensor<1x4x24xf32>, tensor<24xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>)
  %key = dsc.linear %x, %wk, %bk : (tensor<1x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<1x4x8xf32>
  %k2 = dsc.split_heads %key {num_heads = 2 : i64} : (tensor<1x4x8xf32>) -> tensor<1x2x4x4xf32>
  %o, %l = dsc.attention %q, %k, %v {causal = true, rate = 0.0 : f64, scale = 0.5 : f64, stream = 0 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %o2, %l2 = dsc.attention %o, %k2, %v {causal = true, rate = 0.0 : f64, scale = 0.5 : f64, stream = 1 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> (tensor<1x2x4x4xf32>, tensor<1x2x4xf32>)
  %m = dsc.merge_heads %o2 : (tensor<1x2x4x4xf32>) -> tensor<1x4x8xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x4x8xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x4x8xf32>
}

// -----

// Dropout's gradient is the same dropout (same stream, same mask) of the
// incoming gradient; an unused parameter gets a zero gradient.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[D:.*]] = dsc.dropout %{{.*}} {rate = 2.500000e-01 : f64, stream = 9 : i64}
// CHECK: %[[DD:.*]] = dsc.cross_entropy_grad
// CHECK: %[[DX:.*]] = dsc.dropout %[[DD]] {dsc.grad, rate = 2.500000e-01 : f64, stream = 9 : i64}
// CHECK: %[[ZERO:.*]] = dsc.fill {dsc.grad, value = 0.000000e+00 : f64} : () -> tensor<3xf32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}}, %[[ZERO]]
func.func @forward(%e: tensor<5x4xf32> {dsc.param = #dsc.param<"e", normal, 0.02 : f64>},
                   %unused: tensor<3xf32> {dsc.param = #dsc.param<"u", zeros, 0.0 : f64>},
                   %ids: tensor<2xi32>, %y: tensor<2xi32>) -> (tensor<f32>, tensor<2x4xf32>) {
  %h = dsc.embedding %e, %ids : (tensor<5x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
  %d = dsc.dropout %h {rate = 0.25 : f64, stream = 9 : i64} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = dsc.cross_entropy %d, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss, %d : tensor<f32>, tensor<2x4xf32>
}

// -----

// Provenance for the memory report: every op autodiff builds carries
// dsc.grad and the dsc.layer of the forward op it differentiates (the sum of
// the two contributions to %w's gradient is built while differentiating the
// layer-0 op); forward ops keep their tags, untagged ops stay untagged.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[H:.*]] = dsc.linear %{{.*}}, %{{.*}} {dsc.layer = 0 : i64}
// CHECK: %[[L:.*]] = dsc.linear %[[H]], %{{.*}} {dsc.layer = 1 : i64}
// CHECK: dsc.cross_entropy %[[L]], %{{.*}} :
// CHECK: %[[DL:.*]] = dsc.cross_entropy_grad {{.*}} {dsc.grad} :
// CHECK: %[[DH:.*]] = dsc.linear_grad_input %[[DL]], %{{.*}} {dsc.grad, dsc.layer = 1 : i64}
// CHECK: %[[DW1:.*]] = dsc.linear_grad_weight %[[H]], %[[DL]] {dsc.grad, dsc.layer = 1 : i64}
// CHECK: %[[DW0:.*]] = dsc.linear_grad_weight %{{.*}}, %[[DH]] {dsc.grad, dsc.layer = 0 : i64}
// CHECK: dsc.add %[[DW1]], %[[DW0]] {dsc.grad, dsc.layer = 0 : i64}
func.func @forward(%w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x4xf32>, %y: tensor<2xi32>) -> (tensor<f32>, tensor<2x4xf32>) {
  %h = dsc.linear %x, %w {dsc.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %l = dsc.linear %h, %w {dsc.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4xf32>
}

// -----

// RMSNorm: one dsc.rms_norm_grad gives the input and weight gradients.

// CHECK-LABEL: func.func @forward_grad(
// CHECK: %[[N:.*]] = dsc.rms_norm %[[X:[^,]*]], %[[G:[^ ]*]] {epsilon = 1.000000e-05 : f64}
// CHECK: %[[DN:.*]] = dsc.linear_grad_input
// CHECK: %{{.*}}, %[[DG:.*]] = dsc.rms_norm_grad %[[DN]], %[[X]], %[[G]] {dsc.grad, epsilon = 1.000000e-05 : f64}
// CHECK: return %{{.*}}, %{{.*}}, %[[DG]], %{{.*}} :
func.func @forward(%g: tensor<4xf32> {dsc.param = #dsc.param<"g", ones, 0.0 : f64>},
                   %w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x4xf32>, %y: tensor<2xi32>) -> (tensor<f32>, tensor<2x4xf32>) {
  %n = dsc.rms_norm %x, %g {epsilon = 1.0e-5 : f64} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %l = dsc.linear %n, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4xf32>, tensor<2xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4xf32>
}

// -----

// expected-error @+1 {{dsc-autodiff: result #0 of @forward must be the scalar loss tensor<f32>}}
func.func @forward(%w: tensor<4xf32> {dsc.param = #dsc.param<"w", zeros, 0.0 : f64>}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

// -----

// A pipeline stage before the last sends one activation: that is its only
// result.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>, dsc.pipeline_stage = 0 : i64} {
  // expected-error @+1 {{dsc-autodiff: @forward returns 2 values; its pipeline stage returns 1 activation it sends}}
  func.func @forward(%w: tensor<4xf32> {dsc.param = #dsc.param<"w", zeros, 0.0 : f64>}) -> (tensor<4xf32>, tensor<4xf32>) {
    return %w, %w : tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{dsc-autodiff: no function @forward}}
module {
}
