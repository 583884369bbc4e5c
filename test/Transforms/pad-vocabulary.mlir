// RUN: dsc-opt %s -split-input-file -dsc-pad-vocabulary | FileCheck %s
// RUN: dsc-opt %s -split-input-file -dsc-pad-vocabulary | dsc-opt -split-input-file | FileCheck %s
// RUN: dsc-opt %s -split-input-file "-dsc-pad-vocabulary=multiple=1" | FileCheck %s --check-prefix=OFF
// RUN: dsc-opt %s -split-input-file -dsc-pad-vocabulary -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-fuse-cross-entropy | FileCheck %s --check-prefix=STEP

// A vocabulary of 100 padded to 128 rows: the tied table (lookup and head),
// LLaMA's untied embed_tokens and the head's bias; the loss takes its
// softmax over the first 100 columns; the step returns the 100 real
// logits; the module records the real sizes for the runtime.

// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.tensor_slices = {bias = #dsc.tensor_slice<dim = 0, groups = 1, size = 100>, embed = #dsc.tensor_slice<dim = 0, groups = 1, size = 100>, head = #dsc.tensor_slice<dim = 0, groups = 1, size = 100>}
// CHECK: func.func @forward(%[[HEAD:.*]]: tensor<128x8xf32> {{.*}}, %[[EMBED:.*]]: tensor<128x8xf32> {{.*}}, %[[BIAS:.*]]: tensor<128xf32> {{.*}}, %[[POS:.*]]: tensor<4x8xf32> {{.*}}, %[[IDS:.*]]: tensor<2x4xi32>, %[[LABELS:.*]]: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x100xf32>)
// CHECK: dsc.embedding %[[HEAD]], %[[IDS]] : (tensor<128x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK: dsc.embedding %[[EMBED]], %[[IDS]] : (tensor<128x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
// CHECK: %[[LOGITS:.*]] = dsc.linear %{{.*}}, %[[HEAD]], %[[BIAS]] {transpose_w = true} : (tensor<2x4x8xf32>, tensor<128x8xf32>, tensor<128xf32>) -> tensor<2x4x128xf32>
// CHECK: %[[LOSS:.*]] = dsc.cross_entropy %[[LOGITS]], %[[LABELS]] {classes = 100 : i64}
// CHECK: %[[REAL:.*]]:2 = dsc.split %[[LOGITS]] {axis = 2 : i64} : (tensor<2x4x128xf32>) -> (tensor<2x4x100xf32>, tensor<2x4x28xf32>)
// CHECK: return %[[LOSS]], %[[REAL]]#0 : tensor<f32>, tensor<2x4x100xf32>

// OFF-NOT: tensor_slices
// OFF-NOT: classes

// The training step: the gradient carries classes; the micro-step, which
// returns no logits, has no split.
// STEP-LABEL: func.func @micro_step(
// STEP-NOT: dsc.split
// STEP: dsc.cross_entropy_with_grad {{.*}}classes = 100 : i64
// STEP-NOT: dsc.split
// STEP-LABEL: func.func @eval_step(
// STEP: dsc.split

module {
  func.func @forward(
      %head: tensor<100x8xf32> {dsc.param = #dsc.param<"head", normal, 2.000000e-02 : f64>},
      %embed: tensor<100x8xf32> {dsc.param = #dsc.param<"embed", normal, 2.000000e-02 : f64>},
      %bias: tensor<100xf32> {dsc.param = #dsc.param<"bias", zeros, 0.000000e+00 : f64>},
      %pos: tensor<4x8xf32> {dsc.param = #dsc.param<"pos", normal, 2.000000e-02 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x100xf32>) {
    %x = dsc.embedding %head, %ids : (tensor<100x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %y = dsc.embedding %embed, %ids : (tensor<100x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %s = dsc.add %x, %y : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %h = dsc.add %s, %pos : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %logits = dsc.linear %h, %head, %bias {transpose_w = true} : (tensor<2x4x8xf32>, tensor<100x8xf32>, tensor<100xf32>) -> tensor<2x4x100xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x100xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x100xf32>
  }
}

// -----

// A vocabulary that is a multiple already (128), and a head that is not a
// parameter (LoRA's, 4-bit): nothing changes.
// CHECK-LABEL: module {
// CHECK-NOT: tensor_slices
// CHECK: tensor<128x8xf32>
// CHECK-NOT: classes
// CHECK-LABEL: module {
// CHECK-NOT: tensor_slices
// CHECK-NOT: classes
module {
  func.func @forward(
      %head: tensor<128x8xf32> {dsc.param = #dsc.param<"head", normal, 2.000000e-02 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x128xf32>) {
    %x = dsc.embedding %head, %ids : (tensor<128x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %logits = dsc.linear %x, %head {transpose_w = true} : (tensor<2x4x8xf32>, tensor<128x8xf32>) -> tensor<2x4x128xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x128xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x128xf32>
  }
}

// -----

module {
  func.func @forward(
      %head: tensor<100x8xf32> {dsc.param = #dsc.param<"head", normal, 2.000000e-02 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x100xf32>) {
    %x = dsc.embedding %head, %ids : (tensor<100x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %w = dsc.mul %head, %head : (tensor<100x8xf32>, tensor<100x8xf32>) -> tensor<100x8xf32>
    %logits = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<100x8xf32>) -> tensor<2x4x100xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x100xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x100xf32>
  }
}
