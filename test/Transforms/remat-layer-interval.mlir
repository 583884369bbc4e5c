// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed per-layer=true recompute-cheap=false" | FileCheck %s --check-prefix=ONE
// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed per-layer=true recompute-cheap=false layer-interval=2" | FileCheck %s --check-prefix=TWO
// RUN: not dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed per-layer=true layer-interval=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed layer-interval=2" 2>&1 | FileCheck %s --check-prefix=NOLAYER
// ZERO: error: dsc-remat: layer-interval must be 1, or more with per-layer, got 0
// NOLAYER: error: dsc-remat: layer-interval must be 1, or more with per-layer, got 2

// Two layers of linear + GELU, then a head. Per layer (interval 1), layer
// 0's output %g0 crosses into layer 1 and is kept: the backward recomputes
// each layer's linear from the kept input of that layer.
// ONE-LABEL: func.func @forward_grad(
// ONE: %[[G0:.*]] = dsc.gelu tanh %{{.*}} {dsc.layer = 0 : i64}
// ONE: dsc.linear %[[G0]], %{{.*}} {dsc.grad, dsc.layer = 1 : i64, dsc.remat}
// ONE-NOT: dsc.gelu tanh {{.*}}dsc.remat
// ONE: dsc.linear %{{.*}}, %{{.*}} {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// ONE: return

// DeepSpeed's activation_checkpoint_interval 2: both layers are one group,
// only its input %x and output are kept; layer 1's backward recomputes
// the group from %x (layer 0's GELU included), and layer 0's backward
// reads those recomputed values.
// TWO-LABEL: func.func @forward_grad(
// TWO-SAME: %[[X:[a-z0-9]+]]: tensor<2x3x8xf32>, %{{.*}}: tensor<2x3xi32>
// TWO: dsc.cross_entropy_grad
// TWO: %[[H0:.*]] = dsc.linear %[[X]], %{{.*}} {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// TWO-NEXT: %[[G0:.*]] = dsc.gelu tanh %[[H0]] {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// TWO-NEXT: %[[H1:.*]] = dsc.linear %[[G0]], %{{.*}} {dsc.grad, dsc.layer = 1 : i64, dsc.remat}
// TWO-NEXT: dsc.gelu_grad tanh %{{.*}}, %[[H1]]
// TWO: dsc.linear_grad_weight %[[G0]]
// TWO: dsc.gelu_grad tanh %{{.*}}, %[[H0]]
// TWO: return

module {
func.func @forward(%w0: tensor<8x8xf32> {dsc.param = #dsc.param<"h.0.fc.weight", normal, 0.02 : f64>},
                   %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"h.1.fc.weight", normal, 0.02 : f64>},
                   %w2: tensor<8x8xf32> {dsc.param = #dsc.param<"head.weight", normal, 0.02 : f64>},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> tensor<f32> {
  %h0 = dsc.linear %x, %w0 {dsc.layer = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %g0 = dsc.gelu tanh %h0 {dsc.layer = 0 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %h1 = dsc.linear %g0, %w1 {dsc.layer = 1 : i64} : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %g1 = dsc.gelu tanh %h1 {dsc.layer = 1 : i64} : tensor<2x3x8xf32> -> tensor<2x3x8xf32>
  %o = dsc.linear %g1, %w2 : (tensor<2x3x8xf32>, tensor<8x8xf32>) -> tensor<2x3x8xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
