// RUN: dsc-opt %s -dsc-fuse-swiglu | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-swiglu -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -dsc-autodiff | FileCheck %s --check-prefix=UNFUSED

// LLaMA's MLP gate: silu(gate) * up becomes one dsc.swiglu, whose gradient
// is one dsc.swiglu_grad.
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = dsc.linear %[[X]], %{{.*}} {transpose_w = true}
// CHECK: %[[U:.*]] = dsc.linear %[[X]], %{{.*}} {transpose_w = true}
// CHECK-NEXT: %[[S:.*]] = dsc.swiglu %[[G]], %[[U]] : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
// CHECK-NOT: dsc.silu
// CHECK-NOT: dsc.mul
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %{{.*}}, %{{.*}} = dsc.swiglu_grad %{{.*}}, %{{.*}}, %{{.*}} {dsc.grad} : (tensor<2x4x12xf32>, tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> (tensor<2x4x12xf32>, tensor<2x4x12xf32>)
// GRAD-NOT: dsc.silu_grad
// Without the fusion: silu_grad and a product per operand.
// UNFUSED-LABEL: func.func @forward_grad(
// UNFUSED-DAG: dsc.silu_grad
// UNFUSED-DAG: dsc.mul
func.func @forward(%x: tensor<2x4x8xf32>,
                   %wg: tensor<12x8xf32> {dsc.param = #dsc.param<"gate_proj.weight", normal, 0.02 : f64>},
                   %wu: tensor<12x8xf32> {dsc.param = #dsc.param<"up_proj.weight", normal, 0.02 : f64>},
                   %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x12xf32>) {
  %g = dsc.linear %x, %wg {transpose_w = true} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %u = dsc.linear %x, %wu {transpose_w = true} : (tensor<2x4x8xf32>, tensor<12x8xf32>) -> tensor<2x4x12xf32>
  %s = dsc.silu %g : (tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %h = dsc.mul %s, %u : (tensor<2x4x12xf32>, tensor<2x4x12xf32>) -> tensor<2x4x12xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x12xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x12xf32>
}

// The other operand order fuses too.
// CHECK-LABEL: func.func @commuted(
// CHECK: dsc.swiglu %arg0, %arg1
func.func @commuted(%g: tensor<8xf32>, %u: tensor<8xf32>) -> tensor<8xf32> {
  %s = dsc.silu %g : (tensor<8xf32>) -> tensor<8xf32>
  %h = dsc.mul %u, %s : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %h : tensor<8xf32>
}

// Not fused: the SiLU output has another user.
// CHECK-LABEL: func.func @shared(
// CHECK: dsc.silu
// CHECK: dsc.mul
// CHECK-NOT: dsc.swiglu
func.func @shared(%g: tensor<8xf32>, %u: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %s = dsc.silu %g : (tensor<8xf32>) -> tensor<8xf32>
  %h = dsc.mul %s, %u : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %h, %s : tensor<8xf32>, tensor<8xf32>
}
