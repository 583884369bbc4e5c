// RUN: dsc-opt %s -dsc-fuse-softmax-dropout | FileCheck %s --check-prefix=SD
// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-fuse-attention | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-fuse-attention -dsc-autodiff | FileCheck %s --check-prefix=GRAD

// A softmax with a key padding mask (the dsc.padding_mask of the inputs,
// which the frontend builds for dsc.pad_token_id) fuses into a
// dsc.softmax_dropout and then a dsc.attention that read the same mask,
// and the attention's gradient reads it too (the unfused softmax's needs
// none: masked probabilities are 0).
// SD: %[[MASK:.*]] = dsc.padding_mask %arg2 {pad_token_id = 0 : i64}
// SD: dsc.softmax_dropout %{{.*}}, %[[MASK]] {causal = true, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64}
// CHECK-LABEL: func.func @forward(
// CHECK: %[[MASK:.*]] = dsc.padding_mask %arg2 {pad_token_id = 0 : i64}
// CHECK: dsc.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {causal = true, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64}
// CHECK-NOT: dsc.softmax
// GRAD-LABEL: func.func @forward_grad(
// GRAD: %[[MASK:.*]] = dsc.padding_mask
// GRAD: dsc.attention_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]] {causal = true, dsc.grad,
func.func @forward(%w: tensor<4x12xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<1x6x4xf32>, %ids: tensor<1x6xi32>, %y: tensor<1x6xi32>) -> (tensor<f32>, tensor<1x6x4xf32>) {
  %mask = dsc.padding_mask %ids {pad_token_id = 0 : i64} : (tensor<1x6xi32>) -> tensor<1x6xi32>
  %qkv = dsc.linear %x, %w : (tensor<1x6x4xf32>, tensor<4x12xf32>) -> tensor<1x6x12xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 2 : i64} : (tensor<1x6x12xf32>) -> (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>) -> tensor<1x2x6x6xf32>
  %p = dsc.softmax %s, %mask {causal = true, scale = 0.5 : f64} : (tensor<1x2x6x6xf32>, tensor<1x6xi32>) -> tensor<1x2x6x6xf32>
  %d = dsc.dropout %p {rate = 0.1 : f64, stream = 2 : i64} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %o = dsc.batch_matmul %d, %v : (tensor<1x2x6x6xf32>, tensor<1x2x6x2xf32>) -> tensor<1x2x6x2xf32>
  %m = dsc.merge_heads %o : (tensor<1x2x6x2xf32>) -> tensor<1x6x4xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x6x4xf32>, tensor<1x6xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x6x4xf32>
}
