// RUN: dsc-opt %s | dsc-opt | FileCheck %s

// The copies round-trip; `group` defaults to 0.
// CHECK-LABEL: func.func @copies
// CHECK: %[[H:.*]] = dsc.to_host %{{.*}} {group = 3 : i64} : (tensor<8xf32>) -> tensor<8xf32>
// CHECK: dsc.to_device %[[H]] : (tensor<8xf32>) -> tensor<8xf32>
func.func @copies(%g: tensor<8xf32>) -> tensor<8xf32> {
  %h = dsc.to_host %g {group = 3} : (tensor<8xf32>) -> tensor<8xf32>
  %d = dsc.to_device %h : (tensor<8xf32>) -> tensor<8xf32>
  return %d : tensor<8xf32>
}
