// RUN: dsc-opt %s -split-input-file -dsc-autodiff -dsc-build-train-step -dsc-bucket-all-reduce | FileCheck %s
// RUN: dsc-opt %s -split-input-file -dsc-autodiff -dsc-build-train-step -dsc-bucket-all-reduce=bucket-elements=80 | FileCheck %s --check-prefix=SMALL
// RUN: dsc-opt %s -split-input-file -dsc-autodiff -dsc-build-train-step -dsc-bucket-all-reduce=bucket-elements=0 | FileCheck %s --check-prefix=OFF
// RUN: dsc-opt %s -split-input-file -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-bucket-all-reduce | FileCheck %s --check-prefix=ZERO
// RUN: not dsc-opt %s -split-input-file -dsc-bucket-all-reduce=bucket-elements=-1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: dsc-bucket-all-reduce: bucket-elements must be >= 0, got -1

// Three gradients (w 8x8, b 8, v 4x4: 88 elements) over 2 data-parallel
// ranks. With DeepSpeed's default bucket (5e8 elements) they travel in one
// all-reduce: packed in the order of their all-reduces, unpacked into the
// gradients the optimizer reads.
// CHECK-LABEL: func.func @apply_step(
// CHECK-NOT: dsc.all_reduce
// CHECK: %[[P:.*]] = dsc.pack %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} : (tensor<8x8xf32>, tensor<8xf32>, tensor<4x4xf32>) -> tensor<88xf32>
// CHECK-NEXT: %[[R:.*]] = dsc.all_reduce %[[P]] : (tensor<88xf32>) -> tensor<88xf32>
// CHECK-NEXT: %[[GW:.*]]:3 = dsc.unpack %[[R]] : (tensor<88xf32>) -> (tensor<8x8xf32>, tensor<8xf32>, tensor<4x4xf32>)
// CHECK-NOT: dsc.all_reduce
// CHECK: dsc.global_norm %[[GW]]#0, %[[GW]]#1, %[[GW]]#2
// CHECK: return

// A bucket of 80 elements: w and b (72) share one; v would overflow it and
// starts the next, where it is alone and keeps its own all-reduce.
// SMALL-LABEL: func.func @apply_step(
// SMALL: dsc.pack %{{[a-z0-9]+}}, %{{[a-z0-9]+}} : (tensor<8x8xf32>, tensor<8xf32>) -> tensor<72xf32>
// SMALL-NEXT: dsc.all_reduce %{{.*}} : (tensor<72xf32>) -> tensor<72xf32>
// SMALL-NEXT: dsc.unpack
// SMALL: dsc.all_reduce %{{.*}} : (tensor<4x4xf32>) -> tensor<4x4xf32>
// SMALL-NOT: dsc.pack

// OFF-LABEL: func.func @apply_step(
// OFF-NOT: dsc.pack
// OFF-COUNT-3: dsc.all_reduce %{{.*}} : (tensor<
// OFF-NOT: dsc.pack

// ZeRO's reduce-scatters are left as they are.
// ZERO-LABEL: func.func @apply_step(
// ZERO-NOT: dsc.pack
// ZERO: dsc.reduce_scatter
// ZERO-NOT: dsc.pack
// ZERO: return

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %v: tensor<4x4xf32> {dsc.param = #dsc.param<"v", normal, 0.02 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %t = dsc.embedding %v, %x : (tensor<4x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
  %tl = dsc.cross_entropy %t, %y : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  %sum = dsc.add %loss, %tl : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %sum, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
