// RUN: dsc-opt %s -dsc-fuse-attention | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-fuse-attention | FileCheck %s --check-prefix=AFTER
// RUN: dsc-opt %s -dsc-fuse-attention -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -dsc-fuse-attention -dsc-autodiff -dsc-build-train-step "-dsc-mixed-precision=dtype=bf16" | FileCheck %s --check-prefix=HALF

// softmax + dropout, as imported: one dsc.attention; the score product's
// alpha (0.5) is folded into the scale (0.5 * 0.5).
// CHECK-LABEL: func.func @forward(
// CHECK: %[[QKV:.*]]:3 = dsc.split_heads
// CHECK-NEXT: %[[O:[a-z0-9_]+]], %[[L:[a-z0-9_]+]] = dsc.attention %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2 {causal = true, dsc.layer = 0 : i64, rate = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, stream = 2 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4xf32>)
// CHECK-NEXT: dsc.merge_heads %[[O]]
// CHECK-NOT: dsc.batch_matmul
// CHECK-NOT: dsc.softmax
// CHECK-NOT: dsc.dropout
// After -dsc-fuse-softmax-dropout the same op comes out.
// AFTER-LABEL: func.func @forward(
// AFTER: dsc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, dsc.layer = 0 : i64, rate = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, stream = 2 : i64}
// AFTER-NOT: dsc.softmax_dropout
// The backward reads q, k, v, the output and the lse: nothing [T, T].
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[QKV:.*]]:3 = dsc.split_heads
// GRAD-NEXT: %[[O:[a-z0-9_]+]], %[[L:[a-z0-9_]+]] = dsc.attention %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2 {
// GRAD: %[[DO:[0-9]+]] = dsc.split_heads
// GRAD-NEXT: %{{.*}}, %{{.*}}, %{{.*}} = dsc.attention_grad %[[DO]], %[[QKV]]#0, %[[QKV]]#1, %[[QKV]]#2, %[[O]], %[[L]] {causal = true, dsc.grad, dsc.layer = 0 : i64, rate = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, stream = 2 : i64}
// GRAD-NOT: tensor<1x2x4x4xf32>
// GRAD: return
// -dsc-mixed-precision stores the output in bf16, never the lse (the
// backward's exp(s - lse) would carry a bf16 error in the exponent).
// HALF-LABEL: func.func @micro_step(
// HALF: %[[O:[a-z0-9_]+]], %[[L:[a-z0-9_]+]] = dsc.attention {{.*}} -> (tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>)
// HALF: dsc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[L]] {{{.*}}} : ({{.*}}, tensor<1x2x4x2xbf16>, tensor<1x2x4xf32>) ->
func.func @forward(%w: tensor<4x12xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<1x4x4xf32>, %y: tensor<1x4xi32>) -> (tensor<f32>, tensor<1x4x4xf32>) {
  %qkv = dsc.linear %x, %w {dsc.layer = 0 : i64} : (tensor<1x4x4xf32>, tensor<4x12xf32>) -> tensor<1x4x12xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 2 : i64, dsc.layer = 0 : i64} : (tensor<1x4x12xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true, alpha = 0.5 : f64, dsc.layer = 0 : i64} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = dsc.softmax %s {causal = true, scale = 0.5 : f64, dsc.layer = 0 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %d = dsc.dropout %p {rate = 0.1 : f64, stream = 2 : i64, dsc.layer = 0 : i64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = dsc.batch_matmul %d, %v {dsc.layer = 0 : i64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %m = dsc.merge_heads %o {dsc.layer = 0 : i64} : (tensor<1x2x4x2xf32>) -> tensor<1x4x4xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x4x4xf32>, tensor<1x4xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x4x4xf32>
}

// Without dropout: rate 0, stream 0.
// CHECK-LABEL: func.func @no_dropout(
// CHECK-NEXT: %{{.*}}, %{{.*}} = dsc.attention %arg0, %arg1, %arg2 {rate = 0.000000e+00 : f64, scale = 1.250000e-01 : f64, stream = 0 : i64}
// CHECK-NEXT: return
func.func @no_dropout(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32> {
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = dsc.softmax %s {scale = 0.125 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = dsc.batch_matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  return %o : tensor<1x2x4x2xf32>
}

// Not fused: the probabilities have a second user, the context product
// has alpha != 1, the score product does not transpose k.
// CHECK-LABEL: func.func @not_fused(
// CHECK-NOT: dsc.attention
// CHECK: return
func.func @not_fused(%q: tensor<1x2x4x2xf32>, %k: tensor<1x2x4x2xf32>, %v: tensor<1x2x4x2xf32>) -> (tensor<1x2x4x2xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>, tensor<1x2x2x2xf32>) {
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p = dsc.softmax %s {scale = 0.125 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o = dsc.batch_matmul %p, %v : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %s2 = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x4xf32>
  %p2 = dsc.softmax %s2 {scale = 0.125 : f64} : (tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  %o2 = dsc.batch_matmul %p2, %v {alpha = 2.0 : f64} : (tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x4x2xf32>
  %s3 = dsc.batch_matmul %q, %k {transpose_a = true} : (tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x2x2xf32>
  %p3 = dsc.softmax %s3 {scale = 0.125 : f64} : (tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %o, %p, %o2, %p3 : tensor<1x2x4x2xf32>, tensor<1x2x4x4xf32>, tensor<1x2x4x2xf32>, tensor<1x2x2x2xf32>
}
