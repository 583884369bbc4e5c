// RUN: dsc-opt %s | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// 0/1 Adam's ops round-trip.
// CHECK-LABEL: func @zero_one
// CHECK: %[[P:.*]], %{{.*}}, %[[U:.*]] = dsc.local_adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK: %[[S:.*]], %[[W:.*]] = dsc.zero_one_unwind %[[P]], %[[U]], %{{.*}} {eps = 1.000000e-08 : f64}
// CHECK: dsc.zero_one_sync %[[S]], %[[W]], %{{.*}}, %{{.*}} {eps = 1.000000e-08 : f64}
func.func @zero_one(%p: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %u: tensor<4xf32>, %lr: tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a:3 = dsc.local_adam %p, %m, %m, %v, %u, %lr {eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %b:2 = dsc.zero_one_unwind %a#0, %a#2, %v {eps = 1.0e-8 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %c:2 = dsc.zero_one_sync %b#0, %b#1, %v, %lr {eps = 1.0e-8 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return %c#0, %c#1 : tensor<4xf32>, tensor<4xf32>
}
