// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// CHECK-LABEL: func.func @scale
// CHECK: dsc.scale %{{.*}} {factor = 2.500000e+00 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @scale(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = dsc.scale %x {factor = 2.5 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

func.func @scale_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.scale' op result #0 has shape [3, 2], expected [2, 3]}}
  %0 = dsc.scale %x {factor = 2.0 : f64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}

// -----

func.func @scale_nan(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.scale' op factor must be finite}}
  %0 = dsc.scale %x {factor = 0x7FF8000000000000 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}
