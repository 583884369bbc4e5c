// RUN: dsc-opt %s | FileCheck %s
// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// One sparse MoE layer on 2x3 tokens of width 8: 4 experts, 2 per token,
// expert MLP width 6.
// CHECK-LABEL: func @moe_forward
func.func @moe_forward(%x: tensor<2x3x8xf32>, %logits: tensor<2x3x4xf32>,
                       %w1: tensor<24x8xf32>, %w2: tensor<32x6xf32>)
    -> (tensor<2x3x8xf32>, tensor<2x4xf32>, tensor<f32>) {
  // CHECK: %[[W:.*]], %[[E:.*]] = dsc.moe_topk %{{.*}} {k = 2 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  %w, %e = dsc.moe_topk %logits {k = 2 : i64} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  // CHECK: %[[S:.*]], %[[C:.*]] = dsc.moe_route %[[E]] {num_experts = 4 : i64} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<4xi32>)
  %slots, %counts = dsc.moe_route %e {num_experts = 4 : i64} : (tensor<2x3x2xi32>) -> (tensor<2x3x2xi32>, tensor<4xi32>)
  // CHECK: %[[R:.*]] = dsc.moe_dispatch %{{.*}}, %[[S]] : (tensor<2x3x8xf32>, tensor<2x3x2xi32>) -> tensor<12x8xf32>
  %rows = dsc.moe_dispatch %x, %slots : (tensor<2x3x8xf32>, tensor<2x3x2xi32>) -> tensor<12x8xf32>
  // CHECK: dsc.moe_dispatch %{{.*}}, %[[S]], %[[W]] : (tensor<2x3x8xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<12x8xf32>
  %wrows = dsc.moe_dispatch %x, %slots, %w : (tensor<2x3x8xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<12x8xf32>
  // CHECK: %[[G:.*]] = dsc.grouped_linear %[[R]], %{{.*}}, %[[C]] {transpose_w = true} : (tensor<12x8xf32>, tensor<24x8xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  %g = dsc.grouped_linear %rows, %w1, %counts {transpose_w = true} : (tensor<12x8xf32>, tensor<24x8xf32>, tensor<4xi32>) -> tensor<12x6xf32>
  // CHECK: dsc.grouped_linear %[[G]], %{{.*}}, %[[C]] {transpose_w = true} : (tensor<12x6xf32>, tensor<32x6xf32>, tensor<4xi32>) -> tensor<12x8xf32>
  %o = dsc.grouped_linear %g, %w2, %counts {transpose_w = true} : (tensor<12x6xf32>, tensor<32x6xf32>, tensor<4xi32>) -> tensor<12x8xf32>
  // CHECK: dsc.moe_combine %{{.*}}, %[[S]], %[[W]] : (tensor<12x8xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<2x3x8xf32>
  %y = dsc.moe_combine %o, %slots, %w : (tensor<12x8xf32>, tensor<2x3x2xi32>, tensor<2x3x2xf32>) -> tensor<2x3x8xf32>
  // CHECK: %[[L:.*]] = dsc.moe_load %{{.*}}, %[[E]] : (tensor<2x3x4xf32>, tensor<2x3x2xi32>) -> tensor<2x4xf32>
  %load = dsc.moe_load %logits, %e : (tensor<2x3x4xf32>, tensor<2x3x2xi32>) -> tensor<2x4xf32>
  // CHECK: dsc.moe_balance_loss %[[L]], %[[L]] {scale = 5.000000e-01 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  %aux = dsc.moe_balance_loss %load, %load {scale = 0.5 : f64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<f32>
  return %y, %load, %aux : tensor<2x3x8xf32>, tensor<2x4xf32>, tensor<f32>
}

// CHECK-LABEL: func @moe_gradients
func.func @moe_gradients(%x: tensor<6x8xf32>, %logits: tensor<6x4xf32>,
                         %w: tensor<6x2xf32>, %e: tensor<6x2xi32>,
                         %slots: tensor<6x2xi32>, %counts: tensor<4xi32>,
                         %rows: tensor<12x8xf32>, %dy: tensor<12x6xf32>,
                         %dload: tensor<2x4xf32>, %load: tensor<2x4xf32>,
                         %dloss: tensor<f32>)
    -> (tensor<6x4xf32>, tensor<6x2xf32>, tensor<24x8xf32>, tensor<32x6xf32>,
        tensor<6x4xf32>, tensor<2x4xf32>) {
  // CHECK: dsc.moe_topk_grad %{{.*}} : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  %dl = dsc.moe_topk_grad %w, %w, %e : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xi32>) -> tensor<6x4xf32>
  // CHECK: dsc.moe_slot_dot %{{.*}} : (tensor<6x8xf32>, tensor<12x8xf32>, tensor<6x2xi32>) -> tensor<6x2xf32>
  %dw = dsc.moe_slot_dot %x, %rows, %slots : (tensor<6x8xf32>, tensor<12x8xf32>, tensor<6x2xi32>) -> tensor<6x2xf32>
  // CHECK: dsc.grouped_linear_grad_weight %{{.*}} {transpose_w = true} : (tensor<12x8xf32>, tensor<12x6xf32>, tensor<4xi32>) -> tensor<24x8xf32>
  %dw1 = dsc.grouped_linear_grad_weight %rows, %dy, %counts {transpose_w = true} : (tensor<12x8xf32>, tensor<12x6xf32>, tensor<4xi32>) -> tensor<24x8xf32>
  // CHECK: dsc.grouped_linear_grad_weight %{{.*}} : (tensor<12x8xf32>, tensor<12x6xf32>, tensor<4xi32>) -> tensor<32x6xf32>
  %dw2 = dsc.grouped_linear_grad_weight %rows, %dy, %counts : (tensor<12x8xf32>, tensor<12x6xf32>, tensor<4xi32>) -> tensor<32x6xf32>
  // CHECK: dsc.moe_load_grad %{{.*}} : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %dlg = dsc.moe_load_grad %dload, %logits : (tensor<2x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  // CHECK: dsc.moe_balance_loss_grad %{{.*}} {scale = 2.500000e-01 : f64} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %db = dsc.moe_balance_loss_grad %dloss, %load, %load {scale = 0.25 : f64} : (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %dl, %dw, %dw1, %dw2, %dlg, %db : tensor<6x4xf32>, tensor<6x2xf32>, tensor<24x8xf32>, tensor<32x6xf32>, tensor<6x4xf32>, tensor<2x4xf32>
}

// Token dropping: at most 3 assignments per expert.
// CHECK-LABEL: func @moe_route_capacity
func.func @moe_route_capacity(%e: tensor<6x2xi32>) -> tensor<4xi32> {
  // CHECK: dsc.moe_route %{{.*}} {capacity = 3 : i64, num_experts = 4 : i64}
  %s, %c = dsc.moe_route %e {num_experts = 4 : i64, capacity = 3 : i64} : (tensor<6x2xi32>) -> (tensor<6x2xi32>, tensor<4xi32>)
  return %c : tensor<4xi32>
}

// Expert parallelism over the 2 ranks of data_inner: 4 experts, 2 per rank.
// CHECK-LABEL: func @moe_exchange
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 2 : i64} {
func.func @moe_exchange(%rows: tensor<12x8xbf16>, %counts: tensor<4xi32>)
    -> tensor<12x8xbf16> {
  // CHECK: dsc.moe_exchange_counts %{{.*}} : (tensor<4xi32>) -> (tensor<2x2xi32>, tensor<2xi32>)
  %rc, %lc = dsc.moe_exchange_counts %counts : (tensor<4xi32>) -> (tensor<2x2xi32>, tensor<2xi32>)
  // CHECK: dsc.moe_exchange %{{.*}}, %{{.*}}, %{{.*}} : (tensor<12x8xbf16>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<24x8xbf16>
  %recv = dsc.moe_exchange %rows, %counts, %rc : (tensor<12x8xbf16>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<24x8xbf16>
  // CHECK: dsc.moe_exchange %{{.*}}, %{{.*}}, %{{.*}} {reverse = true} : (tensor<24x8xbf16>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<12x8xbf16>
  %back = dsc.moe_exchange %recv, %counts, %rc {reverse = true} : (tensor<24x8xbf16>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<12x8xbf16>
  return %back : tensor<12x8xbf16>
}
}
