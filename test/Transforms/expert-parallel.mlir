// RUN: dsc-opt %s -split-input-file -dsc-expert-parallel -verify-diagnostics | FileCheck %s

// Expert parallelism over 2 ranks: a layer of 4 experts (top-2, SwiGLU) on
// N = 8 tokens. The dispatched rows go to their experts' ranks
// (dsc.moe_exchange_counts, dsc.moe_exchange) into 2 * 8 * min(2, 2) = 32
// rows, this rank's 2 experts (slots 0 and 1, named as rank 0's) run on
// them with the received counts, silu and mul follow the rows, and the
// output goes back (reverse) before dsc.moe_combine. Experts 2 and 3 leave
// @forward; the module lists the expert parameters.

// CHECK: module attributes {{{.*}}dsc.expert_params = ["experts.0.w1.weight", "experts.1.w1.weight", "experts.0.w3.weight", "experts.1.w3.weight", "experts.0.w2.weight", "experts.1.w2.weight"], dsc.experts_per_rank = 2 : i64
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[A0:[a-z0-9]+]]: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.0.w1.weight"
// CHECK-SAME: %[[A1:[a-z0-9]+]]: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.1.w1.weight"
// CHECK-NOT: experts.2
// CHECK-NOT: experts.3
// CHECK: %[[S:.*]], %[[C:.*]] = dsc.moe_route
// CHECK: %[[ROWS:.*]] = dsc.moe_dispatch
// CHECK: %[[RC:.*]], %[[LC:.*]] = dsc.moe_exchange_counts %[[C]] : (tensor<4xi32>) -> (tensor<2x2xi32>, tensor<2xi32>)
// CHECK: %[[RECV:.*]] = dsc.moe_exchange %[[ROWS]], %[[C]], %[[RC]] : (tensor<16x4xf32>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<32x4xf32>
// CHECK: %[[W1:.*]] = dsc.concat %[[A0]], %[[A1]] {axis = 0 : i64} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<12x4xf32>
// CHECK: %[[G:.*]] = dsc.grouped_linear %[[RECV]], %[[W1]], %[[LC]] {transpose_w = true} : {{.*}} -> tensor<32x6xf32>
// CHECK: %[[U:.*]] = dsc.grouped_linear %[[RECV]], %{{.*}}, %[[LC]] {transpose_w = true} : {{.*}} -> tensor<32x6xf32>
// CHECK: dsc.silu %[[G]] : (tensor<32x6xf32>) -> tensor<32x6xf32>
// CHECK: %[[ACT:.*]] = dsc.mul {{.*}} -> tensor<32x6xf32>
// CHECK: %[[O:.*]] = dsc.grouped_linear %[[ACT]], %{{.*}}, %[[LC]] {transpose_w = true} : (tensor<32x6xf32>, tensor<8x6xf32>, tensor<2xi32>) -> tensor<32x4xf32>
// CHECK: %[[BACK:.*]] = dsc.moe_exchange %[[O]], %[[C]], %[[RC]] {reverse = true} : (tensor<32x4xf32>, tensor<4xi32>, tensor<2x2xi32>) -> tensor<16x4xf32>
// CHECK: dsc.moe_combine %[[BACK]], %[[S]]
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 2 : i64} {
func.func @forward(%w1_0: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.0.w1.weight", normal, 0.02 : f64>},
                   %w1_1: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.1.w1.weight", normal, 0.02 : f64>},
                   %w1_2: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.2.w1.weight", normal, 0.02 : f64>},
                   %w1_3: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.3.w1.weight", normal, 0.02 : f64>},
                   %w3_0: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.0.w3.weight", normal, 0.02 : f64>},
                   %w3_1: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.1.w3.weight", normal, 0.02 : f64>},
                   %w3_2: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.2.w3.weight", normal, 0.02 : f64>},
                   %w3_3: tensor<6x4xf32> {dsc.param = #dsc.param<"experts.3.w3.weight", normal, 0.02 : f64>},
                   %w2_0: tensor<4x6xf32> {dsc.param = #dsc.param<"experts.0.w2.weight", normal, 0.02 : f64>},
                   %w2_1: tensor<4x6xf32> {dsc.param = #dsc.param<"experts.1.w2.weight", normal, 0.02 : f64>},
                   %w2_2: tensor<4x6xf32> {dsc.param = #dsc.param<"experts.2.w2.weight", normal, 0.02 : f64>},
                   %w2_3: tensor<4x6xf32> {dsc.param = #dsc.param<"experts.3.w2.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x4xf32>, %logits: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %w, %e = dsc.moe_topk %logits {k = 2 : i64} : (tensor<2x4x4xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x2xi32>)
  %slots, %counts = dsc.moe_route %e {num_experts = 4 : i64} : (tensor<2x4x2xi32>) -> (tensor<2x4x2xi32>, tensor<4xi32>)
  %rows = dsc.moe_dispatch %x, %slots : (tensor<2x4x4xf32>, tensor<2x4x2xi32>) -> tensor<16x4xf32>
  %c1 = dsc.concat %w1_0, %w1_1, %w1_2, %w1_3 {axis = 0 : i64} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<24x4xf32>
  %g = dsc.grouped_linear %rows, %c1, %counts {transpose_w = true} : (tensor<16x4xf32>, tensor<24x4xf32>, tensor<4xi32>) -> tensor<16x6xf32>
  %c3 = dsc.concat %w3_0, %w3_1, %w3_2, %w3_3 {axis = 0 : i64} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<24x4xf32>
  %u = dsc.grouped_linear %rows, %c3, %counts {transpose_w = true} : (tensor<16x4xf32>, tensor<24x4xf32>, tensor<4xi32>) -> tensor<16x6xf32>
  %s = dsc.silu %g : (tensor<16x6xf32>) -> tensor<16x6xf32>
  %a = dsc.mul %s, %u : (tensor<16x6xf32>, tensor<16x6xf32>) -> tensor<16x6xf32>
  %c2 = dsc.concat %w2_0, %w2_1, %w2_2, %w2_3 {axis = 0 : i64} : (tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<16x6xf32>
  %o = dsc.grouped_linear %a, %c2, %counts {transpose_w = true} : (tensor<16x6xf32>, tensor<16x6xf32>, tensor<4xi32>) -> tensor<16x4xf32>
  %y = dsc.moe_combine %o, %slots, %w : (tensor<16x4xf32>, tensor<2x4x2xi32>, tensor<2x4x2xf32>) -> tensor<2x4x4xf32>
  return %y : tensor<2x4x4xf32>
}
}

// -----

// 3 experts do not divide over 2 ranks.
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 2 : i64} {
func.func @forward(%e: tensor<8x2xi32>) -> tensor<3xi32> {
  // expected-error @below {{dsc-expert-parallel: the 3 experts do not divide over the 2 ranks of an expert-parallel group}}
  %slots, %counts = dsc.moe_route %e {num_experts = 3 : i64} : (tensor<8x2xi32>) -> (tensor<8x2xi32>, tensor<3xi32>)
  return %counts : tensor<3xi32>
}
}

// -----

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 2 : i64} {
// expected-error @below {{dsc-expert-parallel: dsc.mesh_expert = 2 but the model has no mixture-of-experts layer}}
func.func @forward(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  return %x : tensor<2x4xf32>
}
}
