// RUN: dsc-opt %s -split-input-file | FileCheck %s
// RUN: dsc-opt %s -split-input-file --mlir-print-op-generic | dsc-opt -split-input-file | FileCheck %s

// dsc.pack / dsc.unpack: flattened pieces one after another (gradient
// buckets of -dsc-bucket-all-reduce); both are Pure, so an unused pack goes.
// CHECK-LABEL: func @roundtrip
// CHECK: %[[P:.*]] = dsc.pack %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<10xf32>
// CHECK: dsc.unpack %[[P]] : (tensor<10xf32>) -> (tensor<2x3xf32>, tensor<4xf32>)
func.func @roundtrip(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<4xf32>) {
  %p = dsc.pack %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<10xf32>
  %x, %y = dsc.unpack %p : (tensor<10xf32>) -> (tensor<2x3xf32>, tensor<4xf32>)
  return %x, %y : tensor<2x3xf32>, tensor<4xf32>
}
