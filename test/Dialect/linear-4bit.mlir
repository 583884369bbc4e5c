// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// dsc.linear_4bit and dsc.linear_4bit_grad_input: a 64 x 32 weight in 4
// bits is 1152 bytes (32 f32 absmaxes, 1024 bytes of codes) or, with double
// quantization, 1064 (offset, one nested scale, 32 u8 absmaxes, the codes).

// CHECK-LABEL: func.func @linear_4bit
// CHECK: dsc.linear_4bit %{{.*}}, %{{.*}} {block_size = 64 : i64, cols = 32 : i64, double_quant = false, format = "nf4", rows = 64 : i64, transpose_w = true} : (tensor<2x3x32xf32>, tensor<1152xui8>) -> tensor<2x3x64xf32>
// CHECK: dsc.linear_4bit_grad_input %{{.*}}, %{{.*}} {{.*}}double_quant = true, format = "fp4"{{.*}} : (tensor<5x32xbf16>, tensor<1064xui8>) -> tensor<5x64xbf16>
func.func @linear_4bit(%x: tensor<2x3x32xf32>, %w: tensor<1152xui8>, %dy: tensor<5x32xbf16>, %wd: tensor<1064xui8>) -> (tensor<2x3x64xf32>, tensor<5x64xbf16>) {
  %y = dsc.linear_4bit %x, %w {format = "nf4", rows = 64, cols = 32, block_size = 64, double_quant = false, transpose_w = true} : (tensor<2x3x32xf32>, tensor<1152xui8>) -> tensor<2x3x64xf32>
  %dx = dsc.linear_4bit_grad_input %dy, %wd {format = "fp4", rows = 64, cols = 32, block_size = 64, double_quant = true} : (tensor<5x32xbf16>, tensor<1064xui8>) -> tensor<5x64xbf16>
  return %y, %dx : tensor<2x3x64xf32>, tensor<5x64xbf16>
}

// -----

func.func @format(%x: tensor<3x32xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit' op expects format "nf4" or "fp4", got "int4"}}
  %y = dsc.linear_4bit %x, %w {format = "int4", rows = 64, cols = 32, block_size = 64, double_quant = false, transpose_w = true} : (tensor<3x32xf32>, tensor<1152xui8>) -> tensor<3x64xf32>
  return
}

// -----

func.func @odd_block(%x: tensor<3x32xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit' op expects positive rows and cols and an even positive block_size, got 64 x 32 in blocks of 63}}
  %y = dsc.linear_4bit %x, %w {format = "nf4", rows = 64, cols = 32, block_size = 63, double_quant = false, transpose_w = true} : (tensor<3x32xf32>, tensor<1152xui8>) -> tensor<3x64xf32>
  return
}

// -----

func.func @bytes(%x: tensor<3x32xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit' op weight of 1152 bytes does not hold a 64 x 32 nf4 weight in blocks of 64 with double quantization (1064 bytes)}}
  %y = dsc.linear_4bit %x, %w {format = "nf4", rows = 64, cols = 32, block_size = 64, double_quant = true, transpose_w = true} : (tensor<3x32xf32>, tensor<1152xui8>) -> tensor<3x64xf32>
  return
}

// -----

func.func @input(%x: tensor<3x64xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit' op input [3, 64] does not match the 64 x 32 weight (transposed)}}
  %y = dsc.linear_4bit %x, %w {format = "nf4", rows = 64, cols = 32, block_size = 64, double_quant = false, transpose_w = true} : (tensor<3x64xf32>, tensor<1152xui8>) -> tensor<3x64xf32>
  return
}

// -----

func.func @result(%x: tensor<3x64xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit' op result has shape [3, 64], expected [3, 32]}}
  %y = dsc.linear_4bit %x, %w {format = "nf4", rows = 64, cols = 32, block_size = 64, double_quant = false} : (tensor<3x64xf32>, tensor<1152xui8>) -> tensor<3x64xf32>
  return
}

// -----

func.func @grad(%dy: tensor<3x32xf32>, %w: tensor<1152xui8>) {
  // expected-error @+1 {{'dsc.linear_4bit_grad_input' op gradient [3, 32] does not match the 64 x 32 weight (transposed)}}
  %dx = dsc.linear_4bit_grad_input %dy, %w {format = "nf4", rows = 64, cols = 32, block_size = 64, double_quant = false, transpose_w = true} : (tensor<3x32xf32>, tensor<1152xui8>) -> tensor<3x32xf32>
  return
}
