// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 partition=uniform" | FileCheck %s --check-prefix=S0
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" | FileCheck %s --check-prefix=S1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=2 partition=uniform" | FileCheck %s --check-prefix=S2
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" | FileCheck %s --check-prefix=STEP1

// A boundary that carries several activations packs them into one f32
// vector. Layer 0's %s reaches the head over two boundaries (as a MoE
// layer's router loads reach the balance loss): over three stages
// (embedding + layer 0, layer 1, head) stage 1 receives it with the
// residual stream and sends it on unchanged.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 3>} {
  func.func @forward(
      %wte: tensor<10x4xf32> {dsc.param = #dsc.param<"wte.weight", normal, 2.000000e-02 : f64>},
      %w0: tensor<4x4xf32> {dsc.param = #dsc.param<"h.0.w", normal, 2.000000e-02 : f64>},
      %w1: tensor<4x4xf32> {dsc.param = #dsc.param<"h.1.w", normal, 2.000000e-02 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x10xf32>) {
    %h = dsc.embedding %wte, %ids : (tensor<10x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
    %0 = dsc.linear %h, %w0 {dsc.layer = 0 : i64} : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %s = dsc.gelu tanh %0 {dsc.layer = 0 : i64} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
    %1 = dsc.linear %0, %w1 {dsc.layer = 1 : i64} : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %2 = dsc.add %1, %s : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
    %logits = dsc.linear %2, %wte {transpose_w = true} : (tensor<2x4x4xf32>, tensor<10x4xf32>) -> tensor<2x4x10xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x10xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x10xf32>
  }
}

// S0-LABEL: func.func @forward(
// S0-SAME: -> tensor<64xf32>
// S0: %[[H:.*]] = dsc.linear %{{.*}} {dsc.layer = 0 : i64}
// S0-NEXT: %[[S:.*]] = dsc.gelu tanh %[[H]]
// S0-NEXT: %[[P:.*]] = dsc.pack %[[H]], %[[S]] : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<64xf32>
// S0-NEXT: return %[[P]] : tensor<64xf32>

// S1-LABEL: func.func @forward(
// S1-SAME: %[[IN:[a-z0-9]+]]: tensor<64xf32> {dsc.pipeline_input}
// S1-SAME: -> tensor<64xf32>
// S1-NEXT: %[[U:.*]]:2 = dsc.unpack %[[IN]] : (tensor<64xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>)
// S1-NEXT: %[[Y:.*]] = dsc.linear %[[U]]#0
// S1-NEXT: %[[P:.*]] = dsc.pack %[[Y]], %[[U]]#1 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<64xf32>
// S1-NEXT: return %[[P]]

// S2-LABEL: func.func @forward(
// S2-SAME: %[[IN:[a-z0-9]+]]: tensor<64xf32> {dsc.pipeline_input}
// S2-NEXT: %[[U:.*]]:2 = dsc.unpack %[[IN]]
// S2-NEXT: dsc.add %[[U]]#0, %[[U]]#1

// The middle stage's backward: the gradient it gets back unpacked, the
// pass-through part's gradient packed with the layer's input gradient.
// STEP1-LABEL: func.func @micro_step(
// STEP1-SAME: %[[GOUT:[a-z0-9]+]]: tensor<64xf32> {dsc.state = #dsc.state<activation, "stage_output_grad">}
// STEP1: %[[G:.*]]:2 = dsc.unpack %[[GOUT]] {dsc.grad} : (tensor<64xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>)
// STEP1: %[[GIN:.*]] = dsc.linear_grad_input %[[G]]#0
// STEP1: dsc.pack %[[GIN]], %[[G]]#1 {dsc.grad} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<64xf32>
