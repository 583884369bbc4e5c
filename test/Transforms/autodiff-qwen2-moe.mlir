// RUN: dsc-opt %s -dsc-autodiff | FileCheck %s

// Qwen2-MoE's pieces under -dsc-autodiff: an unnormalised top-k
// (normalize = false) gives its weights' gradient to the router logits
// through dsc.moe_topk_grad reading the logits (every expert's logit moves);
// a sigmoid gate per row gives its gradient to the gate and the gated rows
// in one dsc.sigmoid_gate_grad.

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[R:[a-z0-9]+]]: tensor<3x8xf32> {dsc.param
// CHECK-SAME: %[[G:[a-z0-9]+]]: tensor<1x8xf32> {dsc.param
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32>, %{{.*}}: tensor<2x4xi32>
// CHECK: %[[L:.*]] = dsc.linear %[[X]], %[[R]] {transpose_w = true}
// CHECK: %[[W:.*]], %[[E:.*]] = dsc.moe_topk %[[L]] {k = 2 : i64, normalize = false}
// CHECK: %[[Z:.*]] = dsc.linear %[[X]], %[[G]] {transpose_w = true}
// CHECK: %[[Y:.*]] = dsc.sigmoid_gate %[[Z]], %[[X]]
// CHECK: %[[DZ:.*]], %[[DX:.*]] = dsc.sigmoid_gate_grad %{{.*}}, %[[Z]], %[[X]] {dsc.grad}
// CHECK: dsc.moe_topk_grad %{{.*}}, %[[W]], %[[E]], %[[L]] {dsc.grad} : (tensor<2x4x2xf32>, tensor<2x4x2xf32>, tensor<2x4x2xi32>, tensor<2x4x3xf32>) -> tensor<2x4x3xf32>
func.func @forward(%r: tensor<3x8xf32> {dsc.param = #dsc.param<"router", normal, 2.000000e-02 : f64>},
                   %g: tensor<1x8xf32> {dsc.param = #dsc.param<"gate", normal, 2.000000e-02 : f64>},
                   %x: tensor<2x4x8xf32>, %t: tensor<2x4xi32>) -> tensor<f32> {
  %l = dsc.linear %x, %r {transpose_w = true} : (tensor<2x4x8xf32>, tensor<3x8xf32>) -> tensor<2x4x3xf32>
  %w, %e = dsc.moe_topk %l {k = 2 : i64, normalize = false} : (tensor<2x4x3xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %z = dsc.linear %x, %g {transpose_w = true} : (tensor<2x4x8xf32>, tensor<1x8xf32>) -> tensor<2x4x1xf32>
  %y = dsc.sigmoid_gate %z, %x : (tensor<2x4x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %slots, %counts = dsc.moe_route %e {num_experts = 3 : i64} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<3xi32>)
  %rows = dsc.moe_dispatch %x, %slots : (tensor<2x4x8xf32>, tensor<2x4x2xi32>) -> tensor<16x8xf32>
  %h = dsc.moe_combine %rows, %slots, %w : (tensor<16x8xf32>, tensor<2x4x2xi32>, tensor<2x4x2xf32>) -> tensor<2x4x8xf32>
  %sum = dsc.add %y, %h : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %sum, %t : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
