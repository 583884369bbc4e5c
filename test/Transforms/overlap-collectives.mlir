// RUN: dsc-opt %s -dsc-overlap-collectives | FileCheck %s
// RUN: dsc-opt %s -dsc-overlap-collectives=prefetch-elements=8 | FileCheck %s --check-prefix=ONE
// RUN: dsc-opt %s -dsc-overlap-collectives=prefetch-elements=0 | FileCheck %s --check-prefix=OFF
// RUN: not dsc-opt %s -dsc-overlap-collectives=prefetch-elements=-1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: -dsc-overlap-collectives: prefetch-elements must be >= 0, got -1

// ZeRO-3's shape: each parameter shard is gathered right before its layer
// uses it. The gathers of arguments move up, in order, so that each is
// issued while earlier layers compute; the gather of a computed value (%q,
// as qwZ quantizes before gathering) stays where it is.
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
  func.func @layers(%x: tensor<8xf32>, %w0: tensor<4xf32>, %w1: tensor<4xf32>,
                    %w2: tensor<4xf32>, %w3: tensor<4xf32>) -> tensor<8xf32> {
    %g0 = dsc.all_gather %w0 : (tensor<4xf32>) -> tensor<8xf32>
    %a0 = dsc.mul %x, %g0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g1 = dsc.all_gather %w1 : (tensor<4xf32>) -> tensor<8xf32>
    %a1 = dsc.mul %a0, %g1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g2 = dsc.all_gather %w2 : (tensor<4xf32>) -> tensor<8xf32>
    %a2 = dsc.mul %a1, %g2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %q = dsc.mul %w3, %w3 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %g3 = dsc.all_gather %q : (tensor<4xf32>) -> tensor<8xf32>
    %a3 = dsc.mul %a2, %g3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    return %a3 : tensor<8xf32>
  }
}

// DeepSpeed's default window (5e7 elements): every argument gather ahead.
// CHECK-LABEL: func.func @layers(
// CHECK-NEXT: %[[G0:.*]] = dsc.all_gather %arg1
// CHECK-NEXT: %[[G1:.*]] = dsc.all_gather %arg2
// CHECK-NEXT: %[[G2:.*]] = dsc.all_gather %arg3
// CHECK-NEXT: dsc.mul %arg0, %[[G0]]
// CHECK-NEXT: dsc.mul %{{.*}}, %[[G1]]
// CHECK-NEXT: dsc.mul %{{.*}}, %[[G2]]
// CHECK-NEXT: dsc.mul %arg4, %arg4
// CHECK-NEXT: dsc.all_gather

// A window of one gather (8 elements): each is issued where the previous
// one's layer starts.
// ONE-LABEL: func.func @layers(
// ONE-NEXT: %[[G0:.*]] = dsc.all_gather %arg1
// ONE-NEXT: %[[G1:.*]] = dsc.all_gather %arg2
// ONE-NEXT: %[[A0:.*]] = dsc.mul %arg0, %[[G0]]
// ONE-NEXT: %[[G2:.*]] = dsc.all_gather %arg3
// ONE-NEXT: %[[A1:.*]] = dsc.mul %[[A0]], %[[G1]]
// ONE-NEXT: dsc.mul %[[A1]], %[[G2]]

// OFF-LABEL: func.func @layers(
// OFF-NEXT: dsc.all_gather %arg1
// OFF-NEXT: dsc.mul
// OFF-NEXT: dsc.all_gather %arg2

// Gradient reductions move, with the flat_resize that packages their
// operand, to just after their gradient is computed (so they are issued in
// the order the gradients become final); the accumulations that use them
// stay. None moves past a collective over the pipeline axis (@barrier).
// RUN: dsc-opt %s -dsc-overlap-collectives=prefetch-elements=0 -split-input-file | FileCheck %s --check-prefix=REDUCE
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 2>} {
  func.func @backward(%x: tensor<8xf32>, %acc0: tensor<4xf32>, %acc1: tensor<4xf32>,
                      %acc2: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %s = dsc.all_reduce %x {axis = #dsc<axis pipeline>, op = #dsc<reduce sum>} : (tensor<8xf32>) -> tensor<8xf32>
    %g1 = dsc.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g0 = dsc.mul %g1, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g2 = dsc.mul %s, %g0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %f0 = dsc.flat_resize %g0 : (tensor<8xf32>) -> tensor<8xf32>
    %r0 = dsc.reduce_scatter %f0 : (tensor<8xf32>) -> tensor<4xf32>
    %a0 = dsc.add %acc0, %r0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %f1 = dsc.flat_resize %g1 : (tensor<8xf32>) -> tensor<8xf32>
    %r1 = dsc.reduce_scatter %f1 : (tensor<8xf32>) -> tensor<4xf32>
    %a1 = dsc.add %acc1, %r1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %r2 = dsc.reduce_scatter %g2 : (tensor<8xf32>) -> tensor<4xf32>
    %a2 = dsc.add %acc2, %r2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %a0, %a1, %a2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
  func.func @barrier(%x: tensor<8xf32>, %acc0: tensor<4xf32>) -> tensor<4xf32> {
    %g0 = dsc.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %s = dsc.all_reduce %x {axis = #dsc<axis pipeline>, op = #dsc<reduce sum>} : (tensor<8xf32>) -> tensor<8xf32>
    %g1 = dsc.mul %s, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %r0 = dsc.reduce_scatter %g0 : (tensor<8xf32>) -> tensor<4xf32>
    %a0 = dsc.add %acc0, %r0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %a0 : tensor<4xf32>
  }
}
// REDUCE-LABEL: func.func @backward(
// REDUCE-NEXT: %[[S:.*]] = dsc.all_reduce %arg0 {axis = #dsc<axis pipeline>
// REDUCE-NEXT: %[[G1:.*]] = dsc.mul %arg0, %arg0
// REDUCE-NEXT: %[[F1:.*]] = dsc.flat_resize %[[G1]]
// REDUCE-NEXT: %[[R1:.*]] = dsc.reduce_scatter %[[F1]]
// REDUCE-NEXT: %[[G0:.*]] = dsc.mul %[[G1]], %arg0
// REDUCE-NEXT: %[[F0:.*]] = dsc.flat_resize %[[G0]]
// REDUCE-NEXT: %[[R0:.*]] = dsc.reduce_scatter %[[F0]]
// REDUCE-NEXT: %[[G2:.*]] = dsc.mul %[[S]], %[[G0]]
// REDUCE-NEXT: %[[R2:.*]] = dsc.reduce_scatter %[[G2]]
// REDUCE-NEXT: dsc.add %arg1, %[[R0]]
// REDUCE-NEXT: dsc.add %arg2, %[[R1]]
// REDUCE-NEXT: dsc.add %arg3, %[[R2]]
// REDUCE-LABEL: func.func @barrier(
// REDUCE-NEXT: dsc.mul %arg0, %arg0
// REDUCE-NEXT: dsc.all_reduce %arg0 {axis = #dsc<axis pipeline>
// REDUCE-NEXT: dsc.reduce_scatter
// REDUCE-NEXT: dsc.mul
