// RUN: dsc-opt %s -cse -canonicalize | FileCheck %s

// Collectives read and write the communicator: CSE keeps both identical
// all_reduces (every rank must issue each one) and an all_reduce whose
// result is unused stays. The pure ops around them are merged and dropped.

// CHECK-LABEL: func.func @collectives
// CHECK: %[[A:.*]] = dsc.all_reduce %arg0 {op = #dsc<reduce sum>}
// CHECK-NEXT: %[[B:.*]] = dsc.all_reduce %arg0 {op = #dsc<reduce sum>}
// CHECK-NEXT: dsc.all_reduce %arg0 : (tensor<4xf32>)
// CHECK-NEXT: %[[S:.*]] = dsc.add %[[A]], %[[B]]
// CHECK-NEXT: %[[T:.*]] = dsc.add %[[S]], %[[S]]
// CHECK-NEXT: return %[[T]]
func.func @collectives(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = dsc.all_reduce %x {op = #dsc<reduce sum>} : (tensor<4xf32>) -> tensor<4xf32>
  %b = dsc.all_reduce %x {op = #dsc<reduce sum>} : (tensor<4xf32>) -> tensor<4xf32>
  %unused = dsc.all_reduce %x : (tensor<4xf32>) -> tensor<4xf32>
  %s1 = dsc.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s2 = dsc.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %dead = dsc.add %s1, %s1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %t = dsc.add %s1, %s2 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %t : tensor<4xf32>
}
