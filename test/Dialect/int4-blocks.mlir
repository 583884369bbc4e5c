// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// dsc.quantize_int4 / dsc.dequantize_reduce_int4 (ZeRO++ qgZ): n elements
// as n/2 bytes of codes, one f32 scale per block; the reduction's result is
// one chunk of the G chunks its codes hold.

// CHECK-LABEL: func.func @round_trip
// CHECK: dsc.quantize_int4 %{{.*}} {block_size = 128 : i64} : (tensor<512xbf16>) -> (tensor<256xui8>, tensor<4xf32>)
// CHECK: dsc.dequantize_reduce_int4 %{{.*}}, %{{.*}} {block_size = 128 : i64} : (tensor<256xui8>, tensor<4xf32>) -> tensor<256xf32>
// CHECK: dsc.dequantize_reduce_int4 %{{.*}}, %{{.*}} {block_size = 128 : i64, op = #dsc<reduce sum>} : (tensor<256xui8>, tensor<4xf32>) -> tensor<128xbf16>
func.func @round_trip(%x: tensor<512xbf16>) -> (tensor<256xf32>, tensor<128xbf16>) {
  %q, %s = dsc.quantize_int4 %x {block_size = 128 : i64} : (tensor<512xbf16>) -> (tensor<256xui8>, tensor<4xf32>)
  %mean = dsc.dequantize_reduce_int4 %q, %s {block_size = 128 : i64} : (tensor<256xui8>, tensor<4xf32>) -> tensor<256xf32>
  %sum = dsc.dequantize_reduce_int4 %q, %s {block_size = 128 : i64, op = #dsc<reduce sum>} : (tensor<256xui8>, tensor<4xf32>) -> tensor<128xbf16>
  return %mean, %sum : tensor<256xf32>, tensor<128xbf16>
}

// -----

func.func @odd_block(%x: tensor<510xf32>) {
  // expected-error @+1 {{'dsc.quantize_int4' op expects a positive even block_size dividing the 510 elements, got 255}}
  %q, %s = dsc.quantize_int4 %x {block_size = 255 : i64} : (tensor<510xf32>) -> (tensor<255xui8>, tensor<2xf32>)
  return
}

// -----

func.func @codes(%x: tensor<512xf32>) {
  // expected-error @+1 {{'dsc.quantize_int4' op expects 256 bytes of codes (two per byte) for 512 elements, got 512}}
  %q, %s = dsc.quantize_int4 %x {block_size = 128 : i64} : (tensor<512xf32>) -> (tensor<512xui8>, tensor<4xf32>)
  return
}

// -----

func.func @scales(%x: tensor<512xf32>) {
  // expected-error @+1 {{'dsc.quantize_int4' op expects 4 scales (one per block of 128), got 2}}
  %q, %s = dsc.quantize_int4 %x {block_size = 128 : i64} : (tensor<512xf32>) -> (tensor<256xui8>, tensor<2xf32>)
  return
}

// -----

func.func @flat(%x: tensor<4x128xf32>) {
  // expected-error @+1 {{'dsc.quantize_int4' op expects a flat input, got [4, 128]}}
  %q, %s = dsc.quantize_int4 %x {block_size = 128 : i64} : (tensor<4x128xf32>) -> (tensor<256xui8>, tensor<4xf32>)
  return
}

// -----

func.func @chunks(%q: tensor<256xui8>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dequantize_reduce_int4' op expects a flat result whose elements divide the 512 codes into chunks, got [192]}}
  %y = dsc.dequantize_reduce_int4 %q, %s {block_size = 128 : i64} : (tensor<256xui8>, tensor<4xf32>) -> tensor<192xf32>
  return
}

// -----

func.func @chunk_blocks(%q: tensor<256xui8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'dsc.dequantize_reduce_int4' op expects a positive even block_size dividing the 128 elements of a chunk, got 256}}
  %y = dsc.dequantize_reduce_int4 %q, %s {block_size = 256 : i64} : (tensor<256xui8>, tensor<2xf32>) -> tensor<128xf32>
  return
}

// -----

func.func @reduce_scales(%q: tensor<256xui8>, %s: tensor<2xf32>) {
  // expected-error @+1 {{'dsc.dequantize_reduce_int4' op expects 4 scales (one per block of 128), got 2}}
  %y = dsc.dequantize_reduce_int4 %q, %s {block_size = 128 : i64} : (tensor<256xui8>, tensor<2xf32>) -> tensor<256xf32>
  return
}

// -----

func.func @max(%q: tensor<256xui8>, %s: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dequantize_reduce_int4' op reduces by sum or mean, not max}}
  %y = dsc.dequantize_reduce_int4 %q, %s {block_size = 128 : i64, op = #dsc<reduce max>} : (tensor<256xui8>, tensor<4xf32>) -> tensor<256xf32>
  return
}
