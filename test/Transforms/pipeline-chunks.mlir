// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 chunks=2" | FileCheck %s --check-prefix=C0
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" | FileCheck %s --check-prefix=C1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" | FileCheck %s --check-prefix=STEP1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" -dsc-split-stage-step | FileCheck %s --check-prefix=SPLIT1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" -dsc-split-stage-step | dsc-opt | FileCheck %s --check-prefix=SPLIT1
// RUN: not dsc-opt %s "-dsc-pipeline-stage=stage=0 chunks=3" 2>&1 | FileCheck %s --check-prefix=TOOMANY
// RUN: not dsc-opt %s "-dsc-pipeline-stage=stage=0 chunks=0" 2>&1 | FileCheck %s --check-prefix=ZERO

// Interleaving (Megatron-LM's virtual stages): the four units (embedding,
// layer 0, layer 1, head) are four virtual stages over two ranks. Rank 0
// holds chunks 0 (the embedding) and 1 (layer 1), rank 1 chunks 0
// (layer 0) and 1 (the head). Each rank's @forward holds both chunks: one
// dsc.pipeline_input per receiving chunk, the loss and logits first if it
// holds the last virtual stage, then one sent activation per sending
// chunk. Each chunk recomputes its own token-only values (the positions).

// C0: dsc.pipeline_chunks = 2 : i64, dsc.pipeline_stage = 0 : i64, dsc.pipeline_tied_params = ["wte.weight"]
// C0-LABEL: func.func @forward(
// C0-SAME: "wte.weight"
// C0-SAME: "wpe.weight"
// C0-NOT: h.0
// C0-SAME: "h.1.ln.weight"
// C0-SAME: %[[IN1:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.pipeline_input}
// C0-SAME: -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>)
// C0: dsc.iota
// C0: %[[X0:.*]] = dsc.add
// C0-NEXT: dsc.iota
// C0-NEXT: %[[Q:.*]] = dsc.embedding
// C0-NEXT: %[[Y:.*]] = dsc.add %[[IN1]], %[[Q]]
// C0: %[[X2:.*]] = dsc.add %[[Y]], %{{.*}} {dsc.layer = 1 : i64}
// C0-NEXT: return %[[X0]], %[[X2]]

// C1: dsc.pipeline_chunks = 2 : i64, dsc.pipeline_stage = 1 : i64, dsc.pipeline_tied_params = ["wte.weight"]
// C1-LABEL: func.func @forward(
// C1-SAME: "wte.weight"
// C1-SAME: "h.0.fc.weight"
// C1-NOT: h.1
// C1-SAME: "ln_f.weight"
// C1-SAME: %[[IN0:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.pipeline_input}, %[[IN1:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.pipeline_input}
// C1-SAME: -> (tensor<f32>, tensor<2x4x40xf32>, tensor<2x4x8xf32>)
// C1-NEXT: dsc.layer_norm %[[IN0]]
// C1: %[[X1:.*]] = dsc.add %[[IN0]]
// C1-NEXT: dsc.layer_norm %[[IN1]]
// C1: %[[LOSS:.*]] = dsc.cross_entropy
// C1-NEXT: return %[[LOSS]], %{{.*}}, %[[X1]]

// The step of rank 1: each chunk's boundary values are named for it
// (chunk k > 0 appends ".k"); the head's loss seeds one backward, the
// gradient of chunk 0's sent activation the other.
// STEP1-LABEL: func.func @micro_step(
// STEP1-SAME: #dsc.state<activation, "stage_input">
// STEP1-SAME: #dsc.state<activation, "stage_input.1">
// STEP1-SAME: #dsc.state<activation, "stage_output_grad">
// STEP1-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_output">}
// STEP1-SAME: {dsc.state = #dsc.state<output, "stage_input_grad">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_input_grad.1">})

// -dsc-split-stage-step cuts each chunk's forward and backward: chunk 0
// (layer 0) takes the gradient of what it sent and returns its
// parameters' gradients and its input's; chunk 1 (the head) seeds its
// backward with the loss and returns the tied embedding's gradient.
// SPLIT1-LABEL: func.func @micro_step(
// SPLIT1-SAME: #dsc.state<activation, "stage_input">
// SPLIT1-NOT: stage_input.1
// SPLIT1-SAME: #dsc.state<activation, "stage_output_grad">
// SPLIT1-SAME: -> (tensor<8xf32> {dsc.state = #dsc.state<grad, "h.0.ln.weight">}, tensor<8xf32> {dsc.state = #dsc.state<grad, "h.0.ln.bias">}, tensor<8x8xf32> {dsc.state = #dsc.state<grad, "h.0.fc.weight">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_input_grad">})
// SPLIT1-NOT: dsc.cross_entropy
// SPLIT1-LABEL: func.func @micro_step.1(
// SPLIT1-NOT: "stage_input"
// SPLIT1-SAME: #dsc.state<activation, "stage_input.1">
// SPLIT1-SAME: tensor<2x4x40xf32> {dsc.state = #dsc.state<activation, "saved/0.1">}
// SPLIT1-SAME: -> (tensor<40x8xf32> {dsc.state = #dsc.state<grad, "wte.weight">}, tensor<8xf32> {dsc.state = #dsc.state<grad, "ln_f.weight">}, tensor<8xf32> {dsc.state = #dsc.state<grad, "ln_f.bias">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_input_grad.1">})
// SPLIT1: dsc.cross_entropy_grad
// SPLIT1-LABEL: func.func @apply_step(
// SPLIT1-LABEL: func.func @stage_forward(
// SPLIT1-SAME: #dsc.state<activation, "stage_input">
// SPLIT1-SAME: -> (tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_output">})
// SPLIT1-LABEL: func.func @stage_forward.1(
// SPLIT1-SAME: #dsc.state<activation, "stage_input.1">
// SPLIT1-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<2x4x40xf32> {dsc.state = #dsc.state<activation, "saved/0.1">})

// TOOMANY: error: dsc-pipeline-stage: 4 units (embedding, 2 layers, head) cannot fill 6 virtual stages
// ZERO: error: dsc-pipeline-stage: chunks must be 1, or more with more than one stage, not 0

module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>} {
  func.func @forward(
      %wte: tensor<40x8xf32> {dsc.param = #dsc.param<"wte.weight", normal, 2.000000e-02 : f64>},
      %wpe: tensor<4x8xf32> {dsc.param = #dsc.param<"wpe.weight", normal, 2.000000e-02 : f64>},
      %g0: tensor<8xf32> {dsc.param = #dsc.param<"h.0.ln.weight", ones, 0.000000e+00 : f64>},
      %b0: tensor<8xf32> {dsc.param = #dsc.param<"h.0.ln.bias", zeros, 0.000000e+00 : f64>},
      %w0: tensor<8x8xf32> {dsc.param = #dsc.param<"h.0.fc.weight", normal, 2.000000e-02 : f64>},
      %g1: tensor<8xf32> {dsc.param = #dsc.param<"h.1.ln.weight", ones, 0.000000e+00 : f64>},
      %b1: tensor<8xf32> {dsc.param = #dsc.param<"h.1.ln.bias", zeros, 0.000000e+00 : f64>},
      %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"h.1.fc.weight", normal, 2.000000e-02 : f64>},
      %p1: tensor<4x8xf32> {dsc.param = #dsc.param<"h.1.pos.weight", normal, 2.000000e-02 : f64>},
      %gf: tensor<8xf32> {dsc.param = #dsc.param<"ln_f.weight", ones, 0.000000e+00 : f64>},
      %bf: tensor<8xf32> {dsc.param = #dsc.param<"ln_f.bias", zeros, 0.000000e+00 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x40xf32>) {
    %tok = dsc.embedding %wte, %ids : (tensor<40x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %pos = dsc.iota : () -> tensor<4xi32>
    %pe = dsc.embedding %wpe, %pos : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
    %x0 = dsc.add %tok, %pe : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %n0 = dsc.layer_norm %x0, %g0, %b0 {dsc.layer = 0 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %f0 = dsc.linear %n0, %w0 {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %x1 = dsc.add %x0, %f0 {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %q1 = dsc.embedding %p1, %pos {dsc.layer = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
    %y1 = dsc.add %x1, %q1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %n1 = dsc.layer_norm %y1, %g1, %b1 {dsc.layer = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %f1 = dsc.linear %n1, %w1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %x2 = dsc.add %y1, %f1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %nf = dsc.layer_norm %x2, %gf, %bf {epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %logits = dsc.linear %nf, %wte {transpose_w = true} : (tensor<2x4x8xf32>, tensor<40x8xf32>) -> tensor<2x4x40xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x40xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x40xf32>
  }
}
