// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// dsc.quantize_int8 / dsc.dequantize_int8 (ZeRO++ qwZ): n elements, one f32
// scale per block.

// CHECK-LABEL: func.func @round_trip
// CHECK: dsc.quantize_int8 %{{.*}} {block_size = 256 : i64} : (tensor<512xbf16>) -> (tensor<512xi8>, tensor<2xf32>)
// CHECK: dsc.dequantize_int8 %{{.*}}, %{{.*}} {block_size = 256 : i64} : (tensor<512xi8>, tensor<2xf32>) -> tensor<512xf32>
func.func @round_trip(%x: tensor<512xbf16>) -> tensor<512xf32> {
  %q, %s = dsc.quantize_int8 %x {block_size = 256 : i64} : (tensor<512xbf16>) -> (tensor<512xi8>, tensor<2xf32>)
  %y = dsc.dequantize_int8 %q, %s {block_size = 256 : i64} : (tensor<512xi8>, tensor<2xf32>) -> tensor<512xf32>
  return %y : tensor<512xf32>
}

// -----

func.func @block(%x: tensor<500xf32>) {
  // expected-error @+1 {{'dsc.quantize_int8' op expects a positive block_size dividing the 500 elements, got 256}}
  %q, %s = dsc.quantize_int8 %x {block_size = 256 : i64} : (tensor<500xf32>) -> (tensor<500xi8>, tensor<2xf32>)
  return
}

// -----

func.func @scales(%q: tensor<512xi8>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dequantize_int8' op expects 2 scales (one per block of 256), got 4}}
  %y = dsc.dequantize_int8 %q, %s {block_size = 256 : i64} : (tensor<512xi8>, tensor<4xf32>) -> tensor<512xf32>
  return
}

// -----

func.func @codes(%x: tensor<512xf32>) {
  // expected-error @+1 {{'dsc.quantize_int8' op expects a flat input and as many codes, got [512] and [256]}}
  %q, %s = dsc.quantize_int8 %x {block_size = 256 : i64} : (tensor<512xf32>) -> (tensor<256xi8>, tensor<2xf32>)
  return
}

// -----

func.func @result(%q: tensor<512xi8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'dsc.dequantize_int8' op expects a flat result of the 512 codes' elements, got [2, 256]}}
  %y = dsc.dequantize_int8 %q, %s {block_size = 256 : i64} : (tensor<512xi8>, tensor<2xf32>) -> tensor<2x256xf32>
  return
}
