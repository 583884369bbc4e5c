// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// dsc.softcap (Gemma 2's cap * tanh(x / cap)) and its gradient, which reads
// the result.

// CHECK-LABEL: func.func @softcap
// CHECK: dsc.softcap %{{.*}} {cap = 5.000000e+01 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: dsc.softcap_grad %{{.*}}, %{{.*}} {cap = 5.000000e+01 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @softcap(%x: tensor<2x3xf32>, %dy: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %y = dsc.softcap %x {cap = 50.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %dx = dsc.softcap_grad %dy, %y {cap = 50.0 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y, %dx : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

func.func @cap_zero(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.softcap' op cap must be positive and finite, got 0}}
  %0 = dsc.softcap %x {cap = 0.0 : f64} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @cap_inf(%dy: tensor<2x3xf32>, %y: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.softcap_grad' op cap must be positive and finite, got INF}}
  %0 = dsc.softcap_grad %dy, %y {cap = 0x7FF0000000000000 : f64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.softcap' op result #0 has shape [3, 2], expected [2, 3]}}
  %0 = dsc.softcap %x {cap = 1.0 : f64} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return
}
