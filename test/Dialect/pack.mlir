// RUN: dsc-opt %s -split-input-file | FileCheck %s
// RUN: dsc-opt %s -split-input-file --mlir-print-op-generic | dsc-opt -split-input-file | FileCheck %s

// dsc.pack / dsc.unpack: flattened pieces one after another (gradient
// buckets of -dsc-bucket-collectives); both are Pure.
// CHECK-LABEL: func @roundtrip
// CHECK: %[[P:.*]] = dsc.pack %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<10xf32>
// CHECK: dsc.unpack %[[P]] : (tensor<10xf32>) -> (tensor<2x3xf32>, tensor<4xf32>)
func.func @roundtrip(%a: tensor<2x3xf32>, %b: tensor<4xf32>) -> (tensor<2x3xf32>, tensor<4xf32>) {
  %p = dsc.pack %a, %b : (tensor<2x3xf32>, tensor<4xf32>) -> tensor<10xf32>
  %x, %y = dsc.unpack %p : (tensor<10xf32>) -> (tensor<2x3xf32>, tensor<4xf32>)
  return %x, %y : tensor<2x3xf32>, tensor<4xf32>
}

// With chunks = 2, a reduce-scatter's bucket: every piece's first half,
// then every piece's second half.
// CHECK-LABEL: func @chunked
// CHECK: dsc.pack %{{.*}}, %{{.*}} {chunks = 2 : i64} : (tensor<4xf32>, tensor<2x3xf32>) -> tensor<10xf32>
// CHECK: dsc.unpack %{{.*}} {chunks = 2 : i64} : (tensor<10xf32>) -> (tensor<4xf32>, tensor<2x3xf32>)
func.func @chunked(%a: tensor<4xf32>, %b: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>) {
  %p = dsc.pack %a, %b {chunks = 2 : i64} : (tensor<4xf32>, tensor<2x3xf32>) -> tensor<10xf32>
  %x, %y = dsc.unpack %p {chunks = 2 : i64} : (tensor<10xf32>) -> (tensor<4xf32>, tensor<2x3xf32>)
  return %x, %y : tensor<4xf32>, tensor<2x3xf32>
}
