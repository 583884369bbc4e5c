// RUN: dsc-opt %s -dsc-expert-parallel -dsc-autodiff "-dsc-build-train-step=optimizer=adam grad-clip=1.0" | FileCheck %s
// RUN: dsc-opt %s -dsc-expert-parallel -dsc-autodiff "-dsc-build-train-step=optimizer=adam grad-clip=1.0" "-dsc-zero=stage=2" | FileCheck %s --check-prefix=ZERO

// The step of an expert-parallel layer on 4 data ranks in groups of 2
// (2 experts, one per rank): the router's gradient is averaged over the
// data axis; an expert's over data_outer (the 2 ranks holding that expert)
// and halved, since its gradient already sums its group's tokens. The norm
// sums the experts' squares over data_inner and adds the replicated part.
// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: %[[R:[a-z0-9]+]]: tensor<2x8xf32> {{{[^}]*}}#dsc.state<param, "gate.weight">}
// CHECK-SAME: %[[E:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "experts.0.w.weight">}
// CHECK-SAME: %[[GR:[a-z0-9]+]]: tensor<2x8xf32> {dsc.state = #dsc.state<grad, "gate.weight">}
// CHECK-SAME: %[[GE:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "experts.0.w.weight">}
// CHECK: %[[AR:.*]] = dsc.all_reduce %[[GR]] :
// CHECK: %[[AE:.*]] = dsc.all_reduce %[[GE]] {axis = #dsc<axis data_outer>} :
// CHECK: %[[SE:.*]] = dsc.scale %[[AE]] {factor = 5.000000e-01 : f64}
// CHECK: %[[N1:.*]] = dsc.global_norm %[[AR]] :
// CHECK: %[[N2:.*]] = dsc.global_norm %[[SE]] :
// CHECK: %[[N3:.*]] = dsc.norm_all_reduce %[[N2]] {axis = #dsc<axis data_inner>}
// CHECK: dsc.global_norm %[[N1]], %[[N3]] :

// ZeRO-2 shards the router's gradient and state over the data axis and
// leaves the expert's whole: the experts are split over data_inner already.
// ZERO-LABEL: func.func @micro_step(
// ZERO: dsc.reduce_scatter
// ZERO-NOT: dsc.reduce_scatter
// ZERO-LABEL: func.func @apply_step(
// ZERO-SAME: tensor<4xf32> {dsc.shard_of = array<i64: 2, 8>, dsc.state = #dsc.state<grad, "gate.weight">}
// ZERO-SAME: %[[GE:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "experts.0.w.weight">}
// ZERO-SAME: tensor<4xf32> {dsc.shard_of = array<i64: 2, 8>, dsc.state = #dsc.state<exp_avg, "gate.weight">}
// ZERO-SAME: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg, "experts.0.w.weight">}
// ZERO: dsc.all_reduce %[[GE]] {axis = #dsc<axis data_outer>}
module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64, dsc.mesh_expert = 2 : i64} {
func.func @forward(%router: tensor<2x8xf32> {dsc.param = #dsc.param<"gate.weight", normal, 0.02 : f64>},
                   %w0: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.0.w.weight", normal, 0.02 : f64>},
                   %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.1.w.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %logits = dsc.linear %x, %router {transpose_w = true} : (tensor<2x4x8xf32>, tensor<2x8xf32>) -> tensor<2x4x2xf32>
  %w, %e = dsc.moe_topk %logits {k = 1 : i64} : (tensor<2x4x2xf32>) -> (tensor<2x4x1xf32>, tensor<2x4x1xi32>)
  %slots, %counts = dsc.moe_route %e {num_experts = 2 : i64} : (tensor<2x4x1xi32>) -> (tensor<2x4x1xi32>, tensor<2xi32>)
  %rows = dsc.moe_dispatch %x, %slots : (tensor<2x4x8xf32>, tensor<2x4x1xi32>) -> tensor<8x8xf32>
  %ws = dsc.concat %w0, %w1 {axis = 0 : i64} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %o = dsc.grouped_linear %rows, %ws, %counts {transpose_w = true} : (tensor<8x8xf32>, tensor<16x8xf32>, tensor<2xi32>) -> tensor<8x8xf32>
  %h = dsc.moe_combine %o, %slots, %w : (tensor<8x8xf32>, tensor<2x4x1xi32>, tensor<2x4x1xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x8xf32>
}
}
