// RUN: dsc-opt %s -dsc-prefetch-gathers | FileCheck %s
// RUN: dsc-opt %s -dsc-prefetch-gathers=prefetch-elements=8 | FileCheck %s --check-prefix=ONE
// RUN: dsc-opt %s -dsc-prefetch-gathers=prefetch-elements=0 | FileCheck %s --check-prefix=OFF
// RUN: not dsc-opt %s -dsc-prefetch-gathers=prefetch-elements=-1 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: error: -dsc-prefetch-gathers: prefetch-elements must be >= 0, got -1

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
