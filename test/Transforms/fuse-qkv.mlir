// RUN: dsc-opt %s -dsc-fuse-qkv -split-input-file | FileCheck %s

// GPT-2: the fused c_attn keeps its weight; its bias moves into the split.
// CHECK-LABEL: func.func @gpt2_c_attn(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x24xf32>, %[[W:[a-z0-9]+]]: tensor<24x72xf32>, %[[B:[a-z0-9]+]]: tensor<72xf32>)
// CHECK-NEXT: %[[QKV:.*]] = dsc.linear %[[X]], %[[W]] : (tensor<2x8x24xf32>, tensor<24x72xf32>) -> tensor<2x8x72xf32>
// CHECK-NEXT: %[[H:.*]]:3 = dsc.bias_split_heads %[[QKV]], %[[B]] {num_heads = 3 : i64} : (tensor<2x8x72xf32>, tensor<72xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
// CHECK-NEXT: dsc.batch_matmul %[[H]]#0, %[[H]]#1 {transpose_b = true}
// CHECK-NOT: dsc.split_heads
func.func @gpt2_c_attn(%x: tensor<2x8x24xf32>, %w: tensor<24x72xf32>, %b: tensor<72xf32>) -> tensor<2x3x8x8xf32> {
  %qkv = dsc.linear %x, %w, %b : (tensor<2x8x24xf32>, tensor<24x72xf32>, tensor<72xf32>) -> tensor<2x8x72xf32>
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 3 : i64} : (tensor<2x8x72xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return %s : tensor<2x3x8x8xf32>
}

// -----

// BERT: query/key/value of one input become one GEMM over concatenated
// [out, in] weights; the three parameters stay separate arguments.
// CHECK-LABEL: func.func @bert_qkv(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x8x24xf32>, %[[WQ:[a-z0-9]+]]: tensor<24x24xf32>, %[[BQ:[a-z0-9]+]]: tensor<24xf32>, %[[WK:[a-z0-9]+]]: tensor<24x24xf32>, %[[BK:[a-z0-9]+]]: tensor<24xf32>, %[[WV:[a-z0-9]+]]: tensor<24x24xf32>, %[[BV:[a-z0-9]+]]: tensor<24xf32>)
// CHECK-NEXT: %[[W:.*]] = dsc.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<24x24xf32>, tensor<24x24xf32>, tensor<24x24xf32>) -> tensor<72x24xf32>
// CHECK-NEXT: %[[B:.*]] = dsc.concat %[[BQ]], %[[BK]], %[[BV]] {axis = 0 : i64} : (tensor<24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<72xf32>
// CHECK-NEXT: %[[QKV:.*]] = dsc.linear %[[X]], %[[W]] {transpose_w = true} : (tensor<2x8x24xf32>, tensor<72x24xf32>) -> tensor<2x8x72xf32>
// CHECK-NEXT: %[[H:.*]]:3 = dsc.bias_split_heads %[[QKV]], %[[B]] {num_heads = 3 : i64}
// CHECK-NEXT: dsc.batch_matmul %[[H]]#0, %[[H]]#1 {transpose_b = true}
// CHECK-NEXT: dsc.add %{{.*}}, %[[H]]#2
func.func @bert_qkv(%x: tensor<2x8x24xf32>, %wq: tensor<24x24xf32>, %bq: tensor<24xf32>,
                    %wk: tensor<24x24xf32>, %bk: tensor<24xf32>,
                    %wv: tensor<24x24xf32>, %bv: tensor<24xf32>) -> tensor<2x3x8x8xf32> {
  %q = dsc.linear %x, %wq, %bq {transpose_w = true} : (tensor<2x8x24xf32>, tensor<24x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %qh = dsc.split_heads %q {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x3x8x8xf32>
  %k = dsc.linear %x, %wk, %bk {transpose_w = true} : (tensor<2x8x24xf32>, tensor<24x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %kh = dsc.split_heads %k {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x3x8x8xf32>
  %v = dsc.linear %x, %wv, %bv {transpose_w = true} : (tensor<2x8x24xf32>, tensor<24x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %vh = dsc.split_heads %v {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x3x8x8xf32>
  %s = dsc.batch_matmul %qh, %kh {transpose_b = true} : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = dsc.add %s, %vh : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return %o : tensor<2x3x8x8xf32>
}

// -----

// Two projections of one input are not concatenated; the one split into
// heads still hands its bias to the split, the one with another user keeps
// its bias in the GEMM.
// CHECK-LABEL: func.func @two_projections(
// CHECK-NOT: dsc.concat
// CHECK: %[[Q:.*]] = dsc.linear %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {transpose_w = true}
// CHECK-NEXT: dsc.bias_split_heads %[[Q]], %{{.*}} {num_heads = 3 : i64} : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x3x8x8xf32>
// CHECK-NEXT: %[[K:.*]] = dsc.linear %{{[a-z0-9]+}}, %{{[a-z0-9]+}}, %{{[a-z0-9]+}} {transpose_w = true}
// CHECK-NEXT: dsc.split_heads %[[K]]
func.func @two_projections(%x: tensor<2x8x24xf32>, %wq: tensor<24x24xf32>, %bq: tensor<24xf32>,
                           %wk: tensor<24x24xf32>, %bk: tensor<24xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x8x24xf32>) {
  %q = dsc.linear %x, %wq, %bq {transpose_w = true} : (tensor<2x8x24xf32>, tensor<24x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %qh = dsc.split_heads %q {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x3x8x8xf32>
  %k = dsc.linear %x, %wk, %bk {transpose_w = true} : (tensor<2x8x24xf32>, tensor<24x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %kh = dsc.split_heads %k {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x3x8x8xf32>
  %s = dsc.batch_matmul %qh, %kh {transpose_b = true} : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return %s, %k : tensor<2x3x8x8xf32>, tensor<2x8x24xf32>
}

// -----

// Grouped-query attention (LLaMA): bias-free q/k/v_proj with 4 query heads
// and 2 key/value heads become one GEMM over the concatenated [32+16+16, 16]
// weights, split into the three widths and then into heads.
// CHECK-LABEL: func.func @gqa(
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<1x6x16xf32>, %[[WQ:[a-z0-9]+]]: tensor<32x16xf32>, %[[WK:[a-z0-9]+]]: tensor<16x16xf32>, %[[WV:[a-z0-9]+]]: tensor<16x16xf32>
// CHECK: %[[W:.*]] = dsc.concat %[[WQ]], %[[WK]], %[[WV]] {axis = 0 : i64} : (tensor<32x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<64x16xf32>
// CHECK-NEXT: %[[P:.*]] = dsc.linear %[[X]], %[[W]] {transpose_w = true} : (tensor<1x6x16xf32>, tensor<64x16xf32>) -> tensor<1x6x64xf32>
// CHECK-NEXT: %[[S:.*]]:3 = dsc.split %[[P]] {axis = 2 : i64} : (tensor<1x6x64xf32>) -> (tensor<1x6x32xf32>, tensor<1x6x16xf32>, tensor<1x6x16xf32>)
// CHECK-DAG: dsc.split_heads %[[S]]#0 {num_heads = 4 : i64}
// CHECK-DAG: dsc.split_heads %[[S]]#1 {num_heads = 2 : i64}
// CHECK-DAG: dsc.split_heads %[[S]]#2 {num_heads = 2 : i64}
// CHECK-NOT: dsc.linear
func.func @gqa(%x: tensor<1x6x16xf32>, %wq: tensor<32x16xf32>, %wk: tensor<16x16xf32>, %wv: tensor<16x16xf32>)
    -> (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %q0 = dsc.linear %x, %wq {transpose_w = true} : (tensor<1x6x16xf32>, tensor<32x16xf32>) -> tensor<1x6x32xf32>
  %k0 = dsc.linear %x, %wk {transpose_w = true} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
  %v0 = dsc.linear %x, %wv {transpose_w = true} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
  %q = dsc.split_heads %q0 {num_heads = 4 : i64} : (tensor<1x6x32xf32>) -> tensor<1x4x6x8xf32>
  %k = dsc.split_heads %k0 {num_heads = 2 : i64} : (tensor<1x6x16xf32>) -> tensor<1x2x6x8xf32>
  %v = dsc.split_heads %v0 {num_heads = 2 : i64} : (tensor<1x6x16xf32>) -> tensor<1x2x6x8xf32>
  return %q, %k, %v : tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}
