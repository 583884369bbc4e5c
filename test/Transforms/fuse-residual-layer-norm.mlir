// RUN: dsc-opt %s -dsc-fuse-bias-dropout-add -dsc-fuse-residual-layer-norm | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-bias-dropout-add -dsc-fuse-residual-layer-norm -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -dsc-fuse-bias-dropout-add -dsc-fuse-residual-layer-norm -dsc-autodiff -dsc-invertible | FileCheck %s --check-prefix=INV

// GPT-2 (pre-LN): the residual sum feeds the LayerNorm and the next residual
// add, so the fused op keeps it as its first result; it sits where the
// bias-add was.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[H:.*]] = dsc.linear %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[S:.*]], %[[N:.*]], %[[R:.*]] = dsc.bias_dropout_add_layer_norm %[[H]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dsc.layer = 0 : i64, epsilon = 1.000000e-05 : f64, rate = 1.000000e-01 : f64, stream = 5 : i64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4xf32>)
// CHECK-NEXT: %[[M:.*]] = dsc.linear %[[N]]
// CHECK-NEXT: dsc.add %[[S]], %[[M]]
// CHECK-NOT: dsc.layer_norm
// CHECK-NOT: dsc.bias_dropout_add {{.*}}
// The backward: one LayerNorm gradient that adds the sum's other gradient
// (from the last add) in its pass, then one dropout+bias gradient.
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[S:.*]], %[[N:.*]], %{{.*}} = dsc.bias_dropout_add_layer_norm
// GRAD: %[[DX:.*]], %[[DG:.*]], %[[DB:.*]] = dsc.layer_norm_grad %{{.*}}, %[[S]], %{{.*}}, %[[DS:[0-9a-z_]+]] {dsc.grad
// GRAD-NEXT: dsc.dropout_bias_grad %[[DX]] {dsc.grad, dsc.layer = 0 : i64, rate = 1.000000e-01 : f64, stream = 5 : i64}
// With normalize_invertible the backward reads the fused op's output and
// 1/std, not the sum.
// INV-LABEL: func.func @forward_grad(
// INV: %[[S:.*]], %[[N:.*]], %[[R:.*]] = dsc.bias_dropout_add_layer_norm
// INV: dsc.layer_norm_grad_from_output %{{.*}}, %[[N]], %{{.*}}, %{{.*}}, %[[R]], %{{.*}} {dsc.grad, dsc.layer = 0 : i64}
// INV-NOT: dsc.layer_norm_grad %
func.func @forward(%x: tensor<2x4x8xf32>,
                  %w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                  %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                  %g: tensor<8xf32> {dsc.param = #dsc.param<"g", ones, 0.0 : f64>},
                  %beta: tensor<8xf32> {dsc.param = #dsc.param<"beta", zeros, 0.0 : f64>},
                  %w2: tensor<8x8xf32> {dsc.param = #dsc.param<"w2", normal, 0.02 : f64>},
                  %y: tensor<2x4xi32>) -> tensor<f32> {
  %h = dsc.linear %x, %w, %b {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %h {rate = 0.1 : f64, stream = 5 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %s = dsc.add %x, %d : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %n = dsc.layer_norm %s, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %m = dsc.linear %n, %w2 : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %o = dsc.add %s, %m : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// BERT (post-LN) without dropout: only the LayerNorm reads the sum.
// CHECK-LABEL: func.func @post_ln(
// CHECK: %{{.*}}, %[[N:.*]], %{{.*}} = dsc.bias_dropout_add_layer_norm %{{.*}} {epsilon = 9.9999999999999998E-13 : f64, rate = 0.000000e+00 : f64, stream = 0 : i64}
// CHECK-NEXT: return %[[N]]
func.func @post_ln(%x: tensor<2x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %res: tensor<2x8xf32>, %g: tensor<8xf32>, %beta: tensor<8xf32>) -> tensor<2x8xf32> {
  %h = dsc.linear %x, %w, %b {transpose_w = true} : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = dsc.add %h, %res : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n = dsc.layer_norm %r, %g, %beta {epsilon = 1.0e-12 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n : tensor<2x8xf32>
}

// Not fused: a LayerNorm of a plain add (BERT's embeddings), and a second
// LayerNorm of a sum that is already fused keeps its own op.
// CHECK-LABEL: func.func @not_fused(
// CHECK: dsc.add
// CHECK-NEXT: dsc.layer_norm
// CHECK: dsc.bias_dropout_add_layer_norm
// CHECK-NEXT: dsc.layer_norm %sum,
func.func @not_fused(%a: tensor<2x8xf32>, %c: tensor<2x8xf32>, %x: tensor<2x8xf32>, %w: tensor<8x8xf32>, %b: tensor<8xf32>, %g: tensor<8xf32>, %beta: tensor<8xf32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %e = dsc.add %a, %c : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n0 = dsc.layer_norm %e, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %h = dsc.linear %x, %w, %b : (tensor<2x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %r = dsc.add %h, %n0 : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %n1 = dsc.layer_norm %r, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %n2 = dsc.layer_norm %r, %g, %beta {epsilon = 1.0e-5 : f64} : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %n0, %n1, %n2 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
