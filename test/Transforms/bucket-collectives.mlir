// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-bucket-collectives | FileCheck %s
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-bucket-collectives=reduce-bucket-elements=80 | FileCheck %s --check-prefix=SMALL
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-bucket-collectives=reduce-bucket-elements=0 allgather-bucket-elements=0" | FileCheck %s --check-prefix=OFF
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-bucket-collectives | FileCheck %s --check-prefix=ZERO1
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=grad-accum=2" -dsc-zero=stage=2 -dsc-bucket-collectives | FileCheck %s --check-prefix=ZERO2
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=3 -dsc-bucket-collectives | FileCheck %s --check-prefix=ZERO3
// RUN: not dsc-opt %s -dsc-bucket-collectives=reduce-bucket-elements=-1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: dsc-bucket-collectives: bucket sizes must be >= 0, got -1 and 500000000

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

// ZeRO-1: the accumulated gradients' reduce-scatters in one bucket whose
// packing puts every gradient's rank-j half together (chunks = 2); the
// updated shards' all-gathers in one, unpacked by rank halves. The shards
// feed the norm and the optimizer from the unpack.
// ZERO1-LABEL: func.func @apply_step(
// ZERO1: %[[S:.*]] = dsc.pack %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}} {chunks = 2 : i64} : (tensor<64xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<88xf32>
// ZERO1-NEXT: %[[RS:.*]] = dsc.reduce_scatter %[[S]] : (tensor<88xf32>) -> tensor<44xf32>
// ZERO1-NEXT: %[[G:.*]]:3 = dsc.unpack %[[RS]] : (tensor<44xf32>) -> (tensor<32xf32>, tensor<4xf32>, tensor<8xf32>)
// ZERO1-NEXT: dsc.global_norm %[[G]]#0, %[[G]]#1, %[[G]]#2
// ZERO1: %[[W:.*]], %{{.*}}, %{{.*}} = dsc.adam %{{[0-9]+}}, %[[G]]#0,
// ZERO1: %[[U:.*]] = dsc.pack %[[W]], %{{.*}}, %{{.*}} : (tensor<32xf32>, tensor<4xf32>, tensor<8xf32>) -> tensor<44xf32>
// ZERO1-NEXT: %[[AG:.*]] = dsc.all_gather %[[U]] : (tensor<44xf32>) -> tensor<88xf32>
// ZERO1-NEXT: %[[WHOLE:.*]]:3 = dsc.unpack %[[AG]] {chunks = 2 : i64} : (tensor<88xf32>) -> (tensor<64xf32>, tensor<8xf32>, tensor<16xf32>)
// ZERO1-NEXT: dsc.flat_resize %[[WHOLE]]#0 : (tensor<64xf32>) -> tensor<8x8xf32>
// ZERO1-NOT: dsc.all_gather
// ZERO1: return

// ZeRO-2 reduce-scatters each micro-batch's gradients in @micro_step as
// they are computed; in one bucket they go together after the last, and
// the additions into the sharded accumulators follow the unpack.
// ZERO2-LABEL: func.func @micro_step(
// ZERO2-NOT: dsc.reduce_scatter
// ZERO2: dsc.pack {{.*}} {chunks = 2 : i64} : (tensor<64xf32>, tensor<8xf32>, tensor<16xf32>) -> tensor<88xf32>
// ZERO2-NEXT: dsc.reduce_scatter {{.*}} : (tensor<88xf32>) -> tensor<44xf32>
// ZERO2-NEXT: %[[A:.*]]:3 = dsc.unpack
// ZERO2-NEXT: dsc.add %{{.*}}, %[[A]]#0
// ZERO2-NEXT: dsc.add %{{.*}}, %[[A]]#1
// ZERO2-NEXT: dsc.add %{{.*}}, %[[A]]#2
// ZERO2-NEXT: return

// ZeRO-3's gathers of parameters for the forward and backward stay one by
// one (a bucket would hold them whole at once); its reduce-scatters go in
// a bucket.
// ZERO3-LABEL: func.func @micro_step(
// ZERO3-COUNT-4: dsc.all_gather %{{.*}} : (tensor<
// ZERO3: dsc.pack {{.*}} {chunks = 2 : i64}
// ZERO3-NEXT: dsc.reduce_scatter
// ZERO3-LABEL: func.func @apply_step(

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
