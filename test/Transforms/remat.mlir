// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed" | FileCheck %s --check-prefix=CHEAP
// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed recompute-cheap=false gelu=true" | FileCheck %s --check-prefix=GELU
// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad policy=deepspeed per-layer=true" | FileCheck %s --check-prefix=LAYER
// RUN: dsc-opt %s -dsc-autodiff -dsc-remat="function=forward_grad" | FileCheck %s --check-prefix=NONE
// Bad options are one error each.
// RUN: not dsc-opt %s -dsc-remat="policy=all" 2>&1 | FileCheck %s --check-prefix=ERR1
// RUN: not dsc-opt %s -dsc-remat="policy=budget" 2>&1 | FileCheck %s --check-prefix=ERR2
// RUN: not dsc-opt %s -dsc-remat="policy=none gelu=true" 2>&1 | FileCheck %s --check-prefix=ERR3
// RUN: not dsc-opt %s -dsc-remat="policy=deepspeed" 2>&1 | FileCheck %s --check-prefix=ERR4
// ERR1: for the --policy option: Cannot find option named 'all'!
// ERR2: error: dsc-remat: policy=budget needs budget-bytes > 0, got 0
// ERR3: error: dsc-remat: gelu, attn-dropout and per-layer belong to policy=deepspeed, got policy=none
// ERR4: error: dsc-remat: no single-block function @micro_step to rematerialise


// Cheap ops: the GELU output is recomputed from its (saved) input right
// before the weight gradient that reads it; the forward %g is not read by
// the backward any more.
// CHEAP-LABEL: func.func @forward_grad(
// CHEAP: %[[H:.*]] = dsc.linear %{{.*}}, %{{.*}}, %{{.*}} {dsc.layer = 0 : i64}
// CHEAP: %[[G:.*]] = dsc.gelu tanh %[[H]] {dsc.layer = 0 : i64}
// CHEAP: dsc.linear_grad_input
// CHEAP-NEXT: %[[G2:.*]] = dsc.gelu tanh %[[H]] {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// CHEAP-NEXT: dsc.linear_grad_weight %[[G2]]
// CHEAP-NOT: %[[G]]{{[^0-9]}}
// CHEAP: return

// GELU-LABEL: func.func @forward_grad(
// GELU: dsc.gelu tanh {{.*}} {dsc.grad, dsc.layer = 0 : i64, dsc.remat}

// Per-layer: only the layer's input %x (an argument) and its output are
// kept; the first linear and the GELU are recomputed in the backward.
// LAYER-LABEL: func.func @forward_grad(
// LAYER: dsc.linear_grad_input
// LAYER-NEXT: %[[H2:.*]] = dsc.linear {{.*}} {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// LAYER-NEXT: %[[G3:.*]] = dsc.gelu tanh %[[H2]] {dsc.grad, dsc.layer = 0 : i64, dsc.remat}
// LAYER-NEXT: dsc.linear_grad_weight %[[G3]]
// LAYER: dsc.gelu_grad tanh %{{.*}}, %[[H2]]

// NONE-NOT: dsc.remat

module {
func.func @forward(%w1: tensor<8x16xf32> {dsc.param = #dsc.param<"fc.weight", normal, 0.02 : f64>},
                   %b1: tensor<16xf32> {dsc.param = #dsc.param<"fc.bias", zeros, 0.0 : f64>},
                   %w2: tensor<16x8xf32> {dsc.param = #dsc.param<"proj.weight", normal, 0.02 : f64>},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> tensor<f32> {
  %h = dsc.linear %x, %w1, %b1 {dsc.layer = 0 : i64} : (tensor<2x3x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<2x3x16xf32>
  %g = dsc.gelu tanh %h {dsc.layer = 0 : i64} : tensor<2x3x16xf32> -> tensor<2x3x16xf32>
  %o = dsc.linear %g, %w2 {dsc.layer = 0 : i64} : (tensor<2x3x16xf32>, tensor<16x8xf32>) -> tensor<2x3x8xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x3x8xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
}
