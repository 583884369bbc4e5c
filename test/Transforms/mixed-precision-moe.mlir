// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-mixed-precision=dtype=bf16" | FileCheck %s

// -dsc-mixed-precision on a mixture-of-experts layer: the experts' stacked
// weights (a dsc.concat of parameters), their rows and outputs and the
// router weights are bf16; each layer's load and its gradient stay f32
// (token counts); the experts' weight gradient stays f32 through the
// dsc.split that cuts it into the parameters' gradients.

// CHECK-LABEL: func.func @micro_step(
// CHECK: dsc.moe_topk %{{.*}} : (tensor<2x4x2xbf16>) -> (tensor<2x4x1xbf16>, tensor<2x4x1xi32>)
// CHECK: dsc.moe_dispatch {{.*}} -> tensor<8x8xbf16>
// CHECK: dsc.concat {{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xbf16>
// CHECK: dsc.grouped_linear {{.*}} : (tensor<8x8xbf16>, tensor<16x8xbf16>, tensor<2xi32>) -> tensor<8x8xbf16>
// CHECK: dsc.moe_combine {{.*}} -> tensor<2x4x8xbf16>
// CHECK: dsc.moe_load {{.*}} : (tensor<2x4x2xbf16>, tensor<2x4x1xi32>) -> tensor<2x2xf32>
// CHECK: dsc.moe_balance_loss_grad {{.*}} : (tensor<f32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK: %[[DWS:.*]] = dsc.grouped_linear_grad_weight {{.*}} : (tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<2xi32>) -> tensor<16x8xf32>
// CHECK: %[[DEXP:.*]]:2 = dsc.split %[[DWS]] {{.*}} -> (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK: dsc.add %{{.*}}, %[[DEXP]]#0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK: dsc.add %{{.*}}, %[[DEXP]]#1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
func.func @forward(%router: tensor<2x8xf32> {dsc.param = #dsc.param<"gate.weight", normal, 0.02 : f64>},
                   %w0: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.0.w.weight", normal, 0.02 : f64>},
                   %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"experts.1.w.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>,
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
