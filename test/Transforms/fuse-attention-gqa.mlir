// RUN: dsc-opt %s -dsc-fuse-attention | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-attention -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -dsc-autodiff | FileCheck %s --check-prefix=UNFUSED

// Grouped-query attention (LLaMA): q has 4 heads, k and v 2, each repeated
// for 2 query heads by dsc.repeat_kv and rotated by dsc.rotary. The fused
// dsc.attention reads the 2 shared heads: the repeats disappear, and the
// gradients of k and v come back with 2 heads.
// CHECK-LABEL: func.func @forward(
// CHECK: %[[Q:.*]] = dsc.rotary %{{.*}} : (tensor<1x4x6x8xf32>)
// CHECK: %[[K:.*]] = dsc.rotary %{{.*}} : (tensor<1x2x6x8xf32>)
// CHECK: %[[O:.*]], %{{.*}} = dsc.attention %[[Q]], %[[K]], %[[V:[^ ]*]] {causal = true, rate = 0.000000e+00 : f64, scale = 0.35355339059327373 : f64, stream = 0 : i64} : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> (tensor<1x4x6x8xf32>, tensor<1x4x6xf32>)
// CHECK-NOT: dsc.repeat_kv
// CHECK-NOT: dsc.batch_matmul
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %{{.*}}, %[[DK:.*]], %{{.*}} = dsc.attention_grad {{.*}} -> (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
// GRAD: dsc.rotary %[[DK]] {dsc.grad, inverse = true} : (tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
// GRAD-NOT: dsc.repeat_kv_grad
// Unfused, the repeats' gradients sum each group back into its shared head.
// UNFUSED-LABEL: func.func @forward_grad(
// UNFUSED: dsc.repeat_kv_grad %{{.*}} {dsc.grad, groups = 2 : i64} : (tensor<1x4x6x8xf32>) -> tensor<1x2x6x8xf32>
// UNFUSED: dsc.rotary %{{.*}} {dsc.grad, inverse = true}
func.func @forward(%wq: tensor<32x16xf32> {dsc.param = #dsc.param<"q_proj.weight", normal, 0.02 : f64>},
                   %wk: tensor<16x16xf32> {dsc.param = #dsc.param<"k_proj.weight", normal, 0.02 : f64>},
                   %wv: tensor<16x16xf32> {dsc.param = #dsc.param<"v_proj.weight", normal, 0.02 : f64>},
                   %x: tensor<1x6x16xf32>, %y: tensor<1x6xi32>) -> (tensor<f32>, tensor<1x6x32xf32>) {
  %q0 = dsc.linear %x, %wq {transpose_w = true} : (tensor<1x6x16xf32>, tensor<32x16xf32>) -> tensor<1x6x32xf32>
  %k0 = dsc.linear %x, %wk {transpose_w = true} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
  %v0 = dsc.linear %x, %wv {transpose_w = true} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
  %qh = dsc.split_heads %q0 {num_heads = 4 : i64} : (tensor<1x6x32xf32>) -> tensor<1x4x6x8xf32>
  %kh = dsc.split_heads %k0 {num_heads = 2 : i64} : (tensor<1x6x16xf32>) -> tensor<1x2x6x8xf32>
  %vh = dsc.split_heads %v0 {num_heads = 2 : i64} : (tensor<1x6x16xf32>) -> tensor<1x2x6x8xf32>
  %q = dsc.rotary %qh : (tensor<1x4x6x8xf32>) -> tensor<1x4x6x8xf32>
  %k = dsc.rotary %kh : (tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
  %kr = dsc.repeat_kv %k {groups = 2 : i64} : (tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  %vr = dsc.repeat_kv %vh {groups = 2 : i64} : (tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
  %s = dsc.batch_matmul %q, %kr {transpose_b = true} : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>) -> tensor<1x4x6x6xf32>
  %p = dsc.softmax %s {scale = 0.35355339059327373 : f64, causal = true} : (tensor<1x4x6x6xf32>) -> tensor<1x4x6x6xf32>
  %c = dsc.batch_matmul %p, %vr : (tensor<1x4x6x6xf32>, tensor<1x4x6x8xf32>) -> tensor<1x4x6x8xf32>
  %m = dsc.merge_heads %c : (tensor<1x4x6x8xf32>) -> tensor<1x6x32xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x6x32xf32>, tensor<1x6xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x6x32xf32>
}
