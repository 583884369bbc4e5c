// RUN: dsc-opt %s -dsc-fuse-residual-rms-norm | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-residual-rms-norm -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -dsc-fuse-residual-rms-norm -dsc-autodiff -dsc-invertible | FileCheck %s --check-prefix=INV

// LLaMA (pre-RMSNorm): the residual sum feeds the RMSNorm and the next
// residual add, so the fused op keeps it as its first result; it sits where
// the add was and takes the add's layer.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[H:.*]] = dsc.linear %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[S:.*]], %[[N:.*]], %[[R:.*]] = dsc.add_rms_norm %{{.*}}, %[[H]], %{{.*}} {dsc.layer = 0 : i64, epsilon = 1.000000e-05 : f64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK-NEXT: %[[M:.*]] = dsc.linear %[[N]]
// CHECK-NEXT: dsc.add %[[S]], %[[M]]
// CHECK-NOT: dsc.rms_norm
// The backward: one RMSNorm gradient that adds the sum's other gradient
// (from the last add) in its pass; that total is both operands' gradient.
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[S:.*]], %[[N:.*]], %{{.*}} = dsc.add_rms_norm
// GRAD: %[[DX:.*]], %[[DW:.*]] = dsc.rms_norm_grad %{{.*}}, %[[S]], %{{.*}}, %[[DS:[0-9a-z_]+]] {dsc.grad
// GRAD-NOT: dsc.add %[[DX]]
// GRAD: dsc.linear_grad_weight %{{.*}}, %[[DX]]
// With normalize_invertible the backward reads the fused op's output and
// 1/rms, not the sum.
// INV-LABEL: func.func @forward_grad(
// INV: %[[S:.*]], %[[N:.*]], %[[R:.*]] = dsc.add_rms_norm
// INV: dsc.rms_norm_grad_from_output %{{.*}}, %[[N]], %{{.*}}, %[[R]], %{{.*}} {dsc.grad, dsc.layer = 0 : i64}
// INV-NOT: dsc.rms_norm_grad %
func.func @forward(%x: tensor<2x4x8xf32>,
                  %w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                  %g: tensor<8xf32> {dsc.param = #dsc.param<"g", ones, 0.0 : f64>},
                  %w2: tensor<8x8xf32> {dsc.param = #dsc.param<"w2", normal, 0.02 : f64>},
                  %y: tensor<2x4xi32>) -> tensor<f32> {
  %h = dsc.linear %x, %w : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %s = dsc.add %x, %h {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = dsc.rms_norm %s, %g {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %m = dsc.linear %n, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %o = dsc.add %s, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// Not fused: an RMSNorm of a broadcasting add (a bias, not a residual), of
// a block argument, and a second RMSNorm of a sum that is already fused
// keeps its own op.
// CHECK-LABEL: func.func @not_fused(
// CHECK: dsc.add
// CHECK-NEXT: dsc.rms_norm
// CHECK-NEXT: dsc.rms_norm %arg0
// CHECK-NEXT: dsc.add_rms_norm
// CHECK-NEXT: dsc.rms_norm
func.func @not_fused(%x: tensor<2x8xf32>, %b: tensor<8xf32>, %g: tensor<8xf32>, %g2: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %a = dsc.add %x, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n = dsc.rms_norm %a, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %p = dsc.rms_norm %x, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = dsc.add %x, %x : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n1 = dsc.rms_norm %s, %g : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n2 = dsc.rms_norm %s, %g2 : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n, %p, %n1, %n2 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
