// RUN: dsc-opt %s -dsc-tensor-parallel | FileCheck %s
// RUN: dsc-opt %s -dsc-tensor-parallel | dsc-opt | FileCheck %s
// RUN: dsc-opt %s -dsc-tensor-parallel "-dsc-lora=rank=2 target-modules=attn.qkv,attn.o" | FileCheck %s --check-prefix=LORA
// RUN: not dsc-opt %s -dsc-tensor-parallel -dsc-tensor-parallel 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: dsc-tensor-parallel: the module is sliced already (dsc.tensor_slices)
// RUN: dsc-opt %s -dsc-tensor-parallel -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" | FileCheck %s --check-prefix=STEP

// Over 2 tensor ranks: the attention is split by heads (the fused QKV
// projection section by section: 3 groups), the MLP by its hidden
// features; each region is entered through dsc.tp_copy and left through
// dsc.tp_reduce, and a row-parallel GEMM's bias is added after the sum.
// The vocabulary (15 entries) is split by rows, padded to 2 x 8: the tied
// table feeds dsc.vocab_embedding and the head's 8 logit columns, and
// dsc.vocab_cross_entropy takes the loss over the group.

// The attention's dropout acts on this rank's heads: its stream is listed,
// so each rank draws its own masks there.
// CHECK: dsc.tensor_parallel_streams = array<i64: 7>
// CHECK-SAME: dsc.tensor_slices = {attn.o.weight = #dsc.tensor_slice<dim = 0, groups = 1, size = 8>, attn.qkv.bias = #dsc.tensor_slice<dim = 0, groups = 3, size = 24>, attn.qkv.weight = #dsc.tensor_slice<dim = 1, groups = 3, size = 24>, logits = #dsc.tensor_slice<dim = 2, groups = 1, size = 15>, mlp.fc.weight = #dsc.tensor_slice<dim = 0, groups = 1, size = 16>, mlp.proj.weight = #dsc.tensor_slice<dim = 1, groups = 1, size = 16>, wte.weight = #dsc.tensor_slice<dim = 0, groups = 1, size = 15>}
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[WTE:[a-z0-9]+]]: tensor<8x8xf32>
// CHECK-SAME: %[[QKVW:[a-z0-9]+]]: tensor<8x12xf32>
// CHECK-SAME: %[[QKVB:[a-z0-9]+]]: tensor<12xf32>
// CHECK-SAME: %[[OW:[a-z0-9]+]]: tensor<4x8xf32>
// CHECK-SAME: %[[OB:[a-z0-9]+]]: tensor<8xf32>
// CHECK-SAME: %[[FCW:[a-z0-9]+]]: tensor<8x8xf32>
// CHECK-SAME: %[[PW:[a-z0-9]+]]: tensor<8x8xf32>
// CHECK-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32>, %[[LABELS:[a-z0-9]+]]: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>)
// CHECK: %[[X:.*]] = dsc.vocab_embedding %[[WTE]], %[[IDS]] {vocab = 15 : i64} : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK: %[[IN:.*]] = dsc.tp_copy %[[X]] : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[QKV:.*]] = dsc.linear %[[IN]], %[[QKVW]], %[[QKVB]] : {{.*}} -> tensor<2x4x12xf32>
// CHECK: dsc.split_heads %[[QKV]] {num_heads = 1 : i64} : (tensor<2x4x12xf32>) -> (tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>, tensor<2x1x4x4xf32>)
// CHECK: dsc.softmax {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: dsc.dropout {{.*}} -> tensor<2x1x4x4xf32>
// CHECK: %[[MERGED:.*]] = dsc.merge_heads {{.*}} -> tensor<2x4x4xf32>
// CHECK: %[[PART:.*]] = dsc.linear %[[MERGED]], %[[OW]] : (tensor<2x4x4xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[SUM:.*]] = dsc.tp_reduce %[[PART]]
// CHECK: %[[ATTN:.*]] = dsc.add %[[SUM]], %[[OB]]
// CHECK: %[[RES:.*]] = dsc.add %[[X]], %[[ATTN]]
// CHECK: %[[IN2:.*]] = dsc.tp_copy %[[RES]]
// CHECK: %[[H:.*]] = dsc.linear %[[IN2]], %[[FCW]] {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[G:.*]] = dsc.gelu tanh %[[H]] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK: %[[P:.*]] = dsc.linear %[[G]], %[[PW]] {transpose_w = true}
// CHECK: %[[OUT:.*]] = dsc.tp_reduce %[[P]]
// CHECK: %[[IN3:.*]] = dsc.tp_copy %[[OUT]]
// CHECK: %[[LOGITS:.*]] = dsc.linear %[[IN3]], %[[WTE]] {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
// CHECK: %[[LOSS:.*]] = dsc.vocab_cross_entropy %[[LOGITS]], %[[LABELS]] {vocab = 15 : i64}
// CHECK: return %[[LOSS]], %[[LOGITS]]

// LoRA after slicing: a column-parallel layer's lora_B is sliced as its
// output features (3 sections for the fused QKV), and the adapter reads the
// input before the region's tp_copy and copies its [.., r] hidden value in
// (its gradient sums the sliced lora_B's parts); a row-parallel layer's
// lora_A is sliced as its input features, its partial hidden value summed
// by its own tp_reduce, and the adapter added to the summed output before
// the bias.
// LORA: dsc.tensor_slices = {attn.o.lora_A.weight = #dsc.tensor_slice<dim = 1, groups = 1, size = 8>,
// LORA-SAME: attn.qkv.lora_B.weight = #dsc.tensor_slice<dim = 0, groups = 3, size = 24>
// LORA-LABEL: func.func @forward(
// LORA: %[[X:.*]] = dsc.vocab_embedding
// LORA: dsc.tp_copy %[[X]]
// LORA: %[[HQ:.*]] = dsc.linear %[[X]], %{{.*}} {transpose_w = true} : (tensor<2x4x8xf32>, tensor<2x8xf32>) -> tensor<2x4x2xf32>
// LORA: %[[HQ2:.*]] = dsc.tp_copy %[[HQ]] : (tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
// LORA: dsc.linear %[[HQ2]], %{{.*}} {transpose_w = true} : (tensor<2x4x2xf32>, tensor<12x2xf32>) -> tensor<2x4x12xf32>
// LORA: %[[SUM:.*]] = dsc.tp_reduce
// LORA: %[[HO:.*]] = dsc.linear %{{.*}}, %{{.*}} {transpose_w = true} : (tensor<2x4x4xf32>, tensor<2x4xf32>) -> tensor<2x4x2xf32>
// LORA: %[[HO2:.*]] = dsc.tp_reduce %[[HO]] : (tensor<2x4x2xf32>) -> tensor<2x4x2xf32>
// LORA: %[[UP:.*]] = dsc.linear %[[HO2]], %{{.*}} {transpose_w = true} : (tensor<2x4x2xf32>, tensor<8x2xf32>) -> tensor<2x4x8xf32>
// LORA: %[[SCALED:.*]] = dsc.scale %[[UP]]
// LORA: %[[ADAPTED:.*]] = dsc.add %[[SUM]], %[[SCALED]]
// LORA: dsc.add %[[ADAPTED]], %{{.*}} : (tensor<2x4x8xf32>, tensor<8xf32>)

// The backward all-reduces over the tensor axis what enters each region
// (the gradient of tp_copy: attention, MLP, head); @apply_step sums the
// sliced gradients' squares over the tensor group and counts the
// replicated one (attn.o.bias) once.
// STEP-LABEL: func.func @micro_step(
// STEP: dsc.vocab_cross_entropy_grad
// STEP-COUNT-3: dsc.all_reduce {{.*}} {axis = #dsc<axis tensor>, dsc.grad, op = #dsc<reduce sum>}
// STEP: dsc.vocab_embedding_grad
// STEP-LABEL: func.func @apply_step(
// STEP: %[[WHOLE:.*]] = dsc.global_norm %{{[a-z0-9]+}} : (tensor<8xf32>) -> tensor<f32>
// STEP: %[[SLICED:.*]] = dsc.global_norm %{{.*}} : (tensor<8x8xf32>, tensor<8x12xf32>, tensor<12xf32>, tensor<4x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<f32>
// STEP: %[[PARTS:.*]] = dsc.norm_all_reduce %[[SLICED]] {axis = #dsc<axis tensor>}
// STEP: dsc.global_norm %[[WHOLE]], %[[PARTS]] : (tensor<f32>, tensor<f32>) -> tensor<f32>

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 2, pipeline = 1>} {
  func.func @forward(
      %wte: tensor<15x8xf32> {dsc.param = #dsc.param<"wte.weight", normal, 2.000000e-02 : f64>},
      %qkv_w: tensor<8x24xf32> {dsc.param = #dsc.param<"attn.qkv.weight", normal, 2.000000e-02 : f64>},
      %qkv_b: tensor<24xf32> {dsc.param = #dsc.param<"attn.qkv.bias", zeros, 0.000000e+00 : f64>},
      %o_w: tensor<8x8xf32> {dsc.param = #dsc.param<"attn.o.weight", normal, 2.000000e-02 : f64>},
      %o_b: tensor<8xf32> {dsc.param = #dsc.param<"attn.o.bias", zeros, 0.000000e+00 : f64>},
      %fc_w: tensor<16x8xf32> {dsc.param = #dsc.param<"mlp.fc.weight", normal, 2.000000e-02 : f64>},
      %proj_w: tensor<8x16xf32> {dsc.param = #dsc.param<"mlp.proj.weight", normal, 2.000000e-02 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x15xf32>) {
    %x = dsc.embedding %wte, %ids : (tensor<15x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %0 = dsc.linear %x, %qkv_w, %qkv_b : (tensor<2x4x8xf32>, tensor<8x24xf32>, tensor<24xf32>) -> tensor<2x4x24xf32>
    %1:3 = dsc.split_heads %0 {num_heads = 2 : i64} : (tensor<2x4x24xf32>) -> (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>)
    %2 = dsc.batch_matmul %1#0, %1#1 {transpose_b = true} : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %s = dsc.softmax %2 {causal = true, scale = 5.000000e-01 : f64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %3 = dsc.dropout %s {rate = 0.1 : f64, stream = 7 : i64} : (tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %4 = dsc.batch_matmul %3, %1#2 : (tensor<2x2x4x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x4x4xf32>
    %5 = dsc.merge_heads %4 : (tensor<2x2x4x4xf32>) -> tensor<2x4x8xf32>
    %6 = dsc.linear %5, %o_w, %o_b : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %7 = dsc.add %x, %6 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %8 = dsc.linear %7, %fc_w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<2x4x16xf32>
    %9 = dsc.gelu tanh %8 : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
    %10 = dsc.linear %9, %proj_w {transpose_w = true} : (tensor<2x4x16xf32>, tensor<8x16xf32>) -> tensor<2x4x8xf32>
    %logits = dsc.linear %10, %wte {transpose_w = true} : (tensor<2x4x8xf32>, tensor<15x8xf32>) -> tensor<2x4x15xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x15xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x15xf32>
  }
}
