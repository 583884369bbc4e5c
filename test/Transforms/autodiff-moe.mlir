// RUN: dsc-opt %s -dsc-autodiff | FileCheck %s

// A mixture-of-experts layer (2 experts, top-1) with the load-balancing
// loss: dsc.moe_combine's gradient is a weighted dsc.moe_dispatch of the
// output gradient and a dsc.moe_slot_dot for the router weights;
// dsc.grouped_linear's is the same stacked weight read the other way round
// and dsc.grouped_linear_grad_weight, cut back into the experts' weights by
// dsc.split; the dispatch's is an unweighted dsc.moe_combine; the router
// logits get the top-k gradient plus the load's; the integer layout
// (dsc.moe_route) has none.

// CHECK-LABEL: func.func @forward_grad(
// CHECK-SAME: %[[R:[a-z0-9]+]]: tensor<2x8xf32> {dsc.param
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.param
// CHECK-SAME: %[[DLOSS:[a-z0-9]+]]: tensor<f32>)
// CHECK: %[[LOGITS:.*]] = dsc.linear %[[X]], %[[R]] {transpose_w = true}
// CHECK: %[[W:.*]], %[[E:.*]] = dsc.moe_topk %[[LOGITS]] {k = 1 : i64}
// CHECK: %[[S:.*]], %[[C:.*]] = dsc.moe_route %[[E]] {num_experts = 2 : i64}
// CHECK: %[[ROWS:.*]] = dsc.moe_dispatch %[[X]], %[[S]] :
// CHECK: %[[WS:.*]] = dsc.concat %{{.*}}, %{{.*}} {axis = 0 : i64}
// CHECK: %[[O:.*]] = dsc.grouped_linear %[[ROWS]], %[[WS]], %[[C]] {transpose_w = true}
// CHECK: %[[H:.*]] = dsc.moe_combine %[[O]], %[[S]], %[[W]]
// CHECK: %[[LOAD:.*]] = dsc.moe_load %[[LOGITS]], %[[E]]
// CHECK: %[[AUX:.*]] = dsc.moe_balance_loss %[[LOAD]] {scale = 1.250000e-01 : f64}
// CHECK: %[[DH:.*]] = dsc.cross_entropy_grad %[[DLOSS]], %[[H]]
// CHECK: %[[DLOADS:.*]] = dsc.moe_balance_loss_grad %[[DLOSS]], %[[LOAD]] {dsc.grad, scale = 1.250000e-01 : f64}
// CHECK: %[[DLL:.*]] = dsc.moe_load_grad %[[DLOADS]], %[[LOGITS]] {dsc.grad}
// CHECK: %[[DO:.*]] = dsc.moe_dispatch %[[DH]], %[[S]], %[[W]] {dsc.grad}
// CHECK: %[[DW:.*]] = dsc.moe_slot_dot %[[DH]], %[[O]], %[[S]] {dsc.grad}
// CHECK: %[[DROWS:.*]] = dsc.grouped_linear %[[DO]], %[[WS]], %[[C]] {dsc.grad} :
// CHECK: %[[DWS:.*]] = dsc.grouped_linear_grad_weight %[[ROWS]], %[[DO]], %[[C]] {dsc.grad, transpose_w = true}
// CHECK: %[[DEXP:.*]]:2 = dsc.split %[[DWS]] {axis = 0 : i64, dsc.grad}
// CHECK: %[[DX1:.*]] = dsc.moe_combine %[[DROWS]], %[[S]] {dsc.grad} :
// CHECK: %[[DLT:.*]] = dsc.moe_topk_grad %[[DW]], %[[W]], %[[E]] {dsc.grad}
// CHECK: %[[DL:.*]] = dsc.add %[[DLL]], %[[DLT]]
// CHECK: %[[DX2:.*]] = dsc.linear_grad_input %[[DL]], %[[R]] {dsc.grad, transpose_w = true}
// CHECK: %[[DR:.*]] = dsc.linear_grad_weight %[[X]], %[[DL]] {dsc.grad, transpose_w = true}
// CHECK: %[[DX:.*]] = dsc.add %[[DX1]], %[[DX2]]
// CHECK: return %{{.*}}, %[[H]], %[[DR]], %[[DEXP]]#0, %[[DEXP]]#1, %[[DX]] :
func.func @forward(%router: tensor<2x8xf32> {dsc.param = #dsc.param<"gate.weight", normal, 0.02 : f64>},
                   %w0: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.0.w.weight", normal, 0.02 : f64>},
                   %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.1.w.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32> {dsc.param = #dsc.param<"x", normal, 1.0 : f64>},
                   %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %logits = dsc.linear %x, %router {transpose_w = true} : (tensor<2x4x8xf32>, tensor<2x8xf32>) -> tensor<2x4x2xf32>
  %w, %e = dsc.moe_topk %logits {k = 1 : i64} : (tensor<2x4x2xf32>) -> (tensor<2x4x1xf32>, tensor<2x4x1xi32>)
  %slots, %counts = dsc.moe_route %e {num_experts = 2 : i64} : (tensor<2x4x1xi32>) -> (tensor<2x4x1xi32>, tensor<2xi32>)
  %rows = dsc.moe_dispatch %x, %slots : (tensor<2x4x8xf32>, tensor<2x4x1xi32>) -> tensor<8x8xf32>
  %ws = dsc.concat %w0, %w1 {axis = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %o = dsc.grouped_linear %rows, %ws, %counts {transpose_w = true} : (tensor<8x8xf32>, tensor<16x8xf32>, tensor<2xi32>) -> tensor<8x8xf32>
  %h = dsc.moe_combine %o, %slots, %w : (tensor<8x8xf32>, tensor<2x4x1xi32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %load = dsc.moe_load %logits, %e : (tensor<2x4x2xf32>, tensor<2x4x1xi32>) -> tensor<2x2xf32>
  %aux = dsc.moe_balance_loss %load {scale = 0.125 : f64} : (tensor<2x2xf32>) -> tensor<f32>
  %ce = dsc.cross_entropy %h, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss = dsc.add %ce, %aux : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x8xf32>
}
