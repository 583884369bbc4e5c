// RUN: dsc-opt %s -split-input-file -verify-diagnostics -dsc-quantize-frozen="format=nf4 double-quant=true" | FileCheck %s
// RUN: dsc-opt %s -split-input-file -verify-diagnostics -dsc-quantize-frozen="format=nf4 double-quant=true" -dsc-autodiff | FileCheck %s --check-prefix=GRAD
// RUN: dsc-opt %s -split-input-file -verify-diagnostics -dsc-quantize-frozen="format=fp4 skip-modules=up" | FileCheck %s --check-prefix=SKIP

// The frozen projections (64 x 32 with a bias kept in f32 and added after
// the 4-bit GEMM, and 32 x 64) are stored in 4 bits: 2048 weights with
// double quantization are 1064 bytes. The trainable adapter, the frozen
// embedding (also read by the tied head) and the frozen lm_head (skipped by
// default) stay f32.
// CHECK-LABEL: module attributes {dsc.four_bit_params = {layers.0.down.weight = #dsc.four_bit<"nf4", rows = 32, cols = 64, block = 64, double_quant = true, transposed = false>, layers.0.up.weight = #dsc.four_bit<"nf4", rows = 64, cols = 32, block = 64, double_quant = true, transposed = false>}}
// CHECK: func.func @forward(%{{.*}}: tensor<16x32xf32> {dsc.frozen, dsc.param = #dsc.param<"embed.weight"
// CHECK-SAME: tensor<32x32xf32> {dsc.param = #dsc.param<"layers.0.adapter.weight"
// CHECK-SAME: %[[UP:.*]]: tensor<1064xui8> {dsc.frozen, dsc.param = #dsc.param<"layers.0.up.weight"
// CHECK-SAME: tensor<64xf32> {dsc.frozen, dsc.param = #dsc.param<"layers.0.up.bias"
// CHECK-SAME: %[[DOWN:.*]]: tensor<1064xui8> {dsc.frozen, dsc.param = #dsc.param<"layers.0.down.weight"
// CHECK-SAME: tensor<16x32xf32> {dsc.frozen, dsc.param = #dsc.param<"lm_head.weight"
// CHECK: %[[Q:.*]] = dsc.linear_4bit %{{.*}}, %[[UP]] {block_size = 64 : i64, cols = 32 : i64, double_quant = true, dsc.layer = 0 : i64, format = "nf4", rows = 64 : i64, transpose_w = true}
// CHECK: dsc.add %[[Q]], %{{.*}} {dsc.layer = 0 : i64}
// CHECK: dsc.linear_4bit %{{.*}}, %[[DOWN]] {block_size = 64 : i64, cols = 64 : i64, double_quant = true, dsc.layer = 0 : i64, format = "nf4", rows = 32 : i64, transpose_w = true}
// CHECK-NOT: dsc.linear_4bit
// CHECK: return

// The gradient reaches the adapter through both 4-bit weights, which have
// none themselves.
// GRAD: dsc.linear_4bit_grad_input %{{.*}}, %{{.*}} {block_size = 64 : i64, cols = 64 : i64, double_quant = true, dsc.grad, dsc.layer = 0 : i64, format = "nf4", rows = 32 : i64, transpose_w = true}
// GRAD: dsc.linear_4bit_grad_input %{{.*}}, %{{.*}} {block_size = 64 : i64, cols = 32 : i64, double_quant = true, dsc.grad, dsc.layer = 0 : i64, format = "nf4", rows = 64 : i64, transpose_w = true}
// GRAD: return
// GRAD-SAME: tensor<32x32xf32>

// skip-modules replaces the default: up stays, lm_head goes to 4 bits.
// SKIP: dsc.four_bit_params = {layers.0.down.weight = #dsc.four_bit<"fp4", rows = 32, cols = 64, block = 64, double_quant = false, transposed = false>, lm_head.weight = #dsc.four_bit<"fp4", rows = 16, cols = 32, block = 64, double_quant = false, transposed = false>}
module {
func.func @forward(%emb: tensor<16x32xf32> {dsc.param = #dsc.param<"embed.weight", normal, 0.02 : f64>, dsc.frozen},
                   %a: tensor<32x32xf32> {dsc.param = #dsc.param<"layers.0.adapter.weight", normal, 0.02 : f64>},
                   %w: tensor<64x32xf32> {dsc.param = #dsc.param<"layers.0.up.weight", normal, 0.02 : f64>, dsc.frozen},
                   %b: tensor<64xf32> {dsc.param = #dsc.param<"layers.0.up.bias", zeros, 0.0 : f64>, dsc.frozen},
                   %w2: tensor<32x64xf32> {dsc.param = #dsc.param<"layers.0.down.weight", normal, 0.02 : f64>, dsc.frozen},
                   %head: tensor<16x32xf32> {dsc.param = #dsc.param<"lm_head.weight", normal, 0.02 : f64>, dsc.frozen},
                   %ids: tensor<2x3xi32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x16xf32>) {
  %x = dsc.embedding %emb, %ids : (tensor<16x32xf32>, tensor<2x3xi32>) -> tensor<2x3x32xf32>
  %g = dsc.linear %x, %a {transpose_w = true, dsc.layer = 0 : i64} : (tensor<2x3x32xf32>, tensor<32x32xf32>) -> tensor<2x3x32xf32>
  %h = dsc.linear %g, %w, %b {transpose_w = true, dsc.layer = 0 : i64} : (tensor<2x3x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<2x3x64xf32>
  %d = dsc.linear %h, %w2 {transpose_w = true, dsc.layer = 0 : i64} : (tensor<2x3x64xf32>, tensor<32x64xf32>) -> tensor<2x3x32xf32>
  %t = dsc.linear %d, %emb {transpose_w = true} : (tensor<2x3x32xf32>, tensor<16x32xf32>) -> tensor<2x3x16xf32>
  %o = dsc.linear %d, %head {transpose_w = true} : (tensor<2x3x32xf32>, tensor<16x32xf32>) -> tensor<2x3x16xf32>
  %s = dsc.add %t, %o : (tensor<2x3x16xf32>, tensor<2x3x16xf32>) -> tensor<2x3x16xf32>
  %loss = dsc.cross_entropy %s, %y : (tensor<2x3x16xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %s : tensor<f32>, tensor<2x3x16xf32>
}
}

// -----

// Nothing frozen: nothing to quantize is an error (QLoRA needs -dsc-lora).
// expected-error @+1 {{dsc-quantize-frozen: no frozen linear weight to store in 4 bits (run -dsc-lora first; skip-modules may cover them all)}}
module {
func.func @forward(%w: tensor<4x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %h = dsc.linear %x, %w {transpose_w = true} : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  return %h : tensor<2x4xf32>
}
}

// -----

// A GPT-2 Conv1D weight ([in, out], read without transpose_w) is stored as
// bitsandbytes stores it, [out, in]: rows = 64 out features, cols = 32 in,
// `transposed`; its GEMM reads it with transpose_w.
// CHECK-LABEL: module attributes {dsc.four_bit_params = {h.0.mlp.c_fc.weight = #dsc.four_bit<"nf4", rows = 64, cols = 32, block = 64, double_quant = true, transposed = true>}}
// CHECK: dsc.linear_4bit %{{.*}}, %{{.*}} {block_size = 64 : i64, cols = 32 : i64, double_quant = true, format = "nf4", rows = 64 : i64, transpose_w = true} : (tensor<2x3x32xf32>, tensor<1064xui8>) -> tensor<2x3x64xf32>
module {
func.func @forward(%a: tensor<32x32xf32> {dsc.param = #dsc.param<"h.0.adapter.weight", normal, 0.02 : f64>},
                   %w: tensor<32x64xf32> {dsc.param = #dsc.param<"h.0.mlp.c_fc.weight", normal, 0.02 : f64>, dsc.frozen},
                   %x: tensor<2x3x32xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x64xf32>) {
  %g = dsc.linear %x, %a : (tensor<2x3x32xf32>, tensor<32x32xf32>) -> tensor<2x3x32xf32>
  %h = dsc.linear %g, %w : (tensor<2x3x32xf32>, tensor<32x64xf32>) -> tensor<2x3x64xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x3x64xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x3x64xf32>
}
}
