// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-fuse-attention | FileCheck %s
// RUN: dsc-opt %s -dsc-fuse-softmax-dropout -dsc-fuse-attention -dsc-autodiff | FileCheck %s --check-prefix=GRAD

// A softmax with a block layout (the block-sparse attention the frontend
// builds from a sparse_attention config) fuses into a dsc.attention that
// carries the layout (through -dsc-fuse-softmax-dropout's op), and its
// gradient is a dsc.attention_grad with the same layout: both kernels visit
// only the layout's blocks.
#causal = #dsc.block_layout<block = 2, heads = 1, blocks = 3, rows = [0, 1, 3, 5], cols = [0, 0, 1, 1, 2]>
// CHECK-LABEL: func.func @forward(
// CHECK: dsc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, layout = #dsc.block_layout<block = 2, heads = 1, blocks = 3, rows = [0, 1, 3, 5], cols = [0, 0, 1, 1, 2]>, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64}
// CHECK-NOT: dsc.softmax
// GRAD-LABEL: func.func @forward_grad(
// GRAD: dsc.attention_grad {{.*}} {causal = true, dsc.grad, layout = #dsc.block_layout<block = 2, heads = 1, blocks = 3, rows = [0, 1, 3, 5], cols = [0, 0, 1, 1, 2]>, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 2 : i64}
func.func @forward(%w: tensor<4x12xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<1x6x4xf32>, %y: tensor<1x6xi32>) -> (tensor<f32>, tensor<1x6x4xf32>) {
  %qkv = dsc.linear %x, %w : (tensor<1x6x4xf32>, tensor<4x12xf32>) -> tensor<1x6x12xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 2 : i64} : (tensor<1x6x12xf32>) -> (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<1x2x6x2xf32>, tensor<1x2x6x2xf32>) -> tensor<1x2x6x6xf32>
  %p = dsc.softmax %s {causal = true, scale = 0.5 : f64, layout = #causal} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %d = dsc.dropout %p {rate = 0.1 : f64, stream = 2 : i64} : (tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %o = dsc.batch_matmul %d, %v : (tensor<1x2x6x6xf32>, tensor<1x2x6x2xf32>) -> tensor<1x2x6x2xf32>
  %m = dsc.merge_heads %o : (tensor<1x2x6x2xf32>) -> tensor<1x6x4xf32>
  %loss = dsc.cross_entropy %m, %y : (tensor<1x6x4xf32>, tensor<1x6xi32>) -> tensor<f32>
  return %loss, %m : tensor<f32>, tensor<1x6x4xf32>
}
