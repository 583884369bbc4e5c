// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 partition=uniform" | FileCheck %s --check-prefix=S0
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" | FileCheck %s --check-prefix=S1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" | dsc-opt | FileCheck %s --check-prefix=S1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 partition=parameters" | FileCheck %s --check-prefix=PARAMS
// RUN: not dsc-opt %s -dsc-pipeline-stage -dsc-pipeline-stage 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: dsc-pipeline-stage: the module is already cut (dsc.pipeline_stage)
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" | FileCheck %s --check-prefix=STEP0
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" | FileCheck %s --check-prefix=STEP1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=0 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" -dsc-split-stage-step | FileCheck %s --check-prefix=SPLIT0
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" -dsc-split-stage-step | FileCheck %s --check-prefix=SPLIT1
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-clip=1.0" -dsc-split-stage-step | dsc-opt | FileCheck %s --check-prefix=SPLIT1
// RUN: not dsc-opt %s "-dsc-pipeline-stage=stage=1 partition=uniform" -dsc-autodiff -dsc-build-train-step -dsc-split-stage-step -dsc-split-stage-step 2>&1 | FileCheck %s --check-prefix=SPLITTWICE
// SPLITTWICE: error: dsc-split-stage-step: the module has a @stage_forward already

// Two stages of a two-layer model whose head is tied to the word
// embedding. Uniformly, the four units (embedding, layer 0, layer 1, head)
// split 2 + 2: stage 0 ends in the residual stream after layer 0, which
// stage 1 receives (dsc.pipeline_input). The positions (dsc.iota) depend
// on nothing but the shapes, so stage 1 recomputes them for its own
// position table; both stages hold wte.weight.

// S0: dsc.pipeline_stage = 0 : i64, dsc.pipeline_tied_params = ["wte.weight"]
// S0-LABEL: func.func @forward(
// S0-SAME: "wte.weight"
// S0-SAME: "wpe.weight"
// S0-SAME: "h.0.fc.weight"
// S0-NOT: h.1
// S0-SAME: %[[IDS:[a-z0-9]+]]: tensor<2x4xi32>, %{{.*}}: tensor<2x4xi32>) -> tensor<2x4x8xf32>
// S0: dsc.embedding %{{.*}}, %[[IDS]]
// S0: %[[X1:.*]] = dsc.add %{{.*}} {dsc.layer = 0 : i64}
// S0-NEXT: return %[[X1]] : tensor<2x4x8xf32>

// S1: dsc.pipeline_stage = 1 : i64, dsc.pipeline_tied_params = ["wte.weight"]
// S1-LABEL: func.func @forward(
// S1-SAME: %[[WTE:[a-z0-9]+]]: tensor<40x8xf32> {dsc.param = #dsc.param<"wte.weight"
// S1-NOT: wpe
// S1-SAME: %[[POS:[a-z0-9]+]]: tensor<4x8xf32> {dsc.param = #dsc.param<"h.1.pos.weight"
// S1-SAME: %[[IN:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.pipeline_input}
// S1-SAME: %{{.*}}: tensor<2x4xi32>, %[[LABELS:[a-z0-9]+]]: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x40xf32>)
// S1-NEXT: %[[IOTA:.*]] = dsc.iota
// S1-NEXT: %[[Q:.*]] = dsc.embedding %[[POS]], %[[IOTA]]
// S1-NEXT: dsc.add %[[IN]], %[[Q]]
// S1: %[[LOGITS:.*]] = dsc.linear %{{.*}}, %[[WTE]] {transpose_w = true}
// S1-NEXT: %[[LOSS:.*]] = dsc.cross_entropy %[[LOGITS]], %[[LABELS]]
// S1-NEXT: return %[[LOSS]], %[[LOGITS]]

// By parameter count the word embedding (40 x 8) outweighs a layer: stage 0
// is the embedding alone (then 3 units remain for stage 1).
// PARAMS-LABEL: func.func @forward(
// PARAMS-NOT: h.0
// PARAMS: %[[X0:.*]] = dsc.add
// PARAMS-NEXT: return %[[X0]] : tensor<2x4x8xf32>

// Stage 0's step: @micro_step is seeded by the gradient stage 1 sends back
// (stage_output_grad) and returns the activation it sends (stage_output)
// instead of a loss. The gradient norm sums squares over the pipeline
// ranks.
// STEP0-LABEL: func.func @micro_step(
// STEP0-SAME: #dsc.state<activation, "stage_output_grad">
// STEP0-SAME: -> (tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_output">}, tensor<40x8xf32> {dsc.state = #dsc.state<grad, "wte.weight">}
// STEP0-NOT: "loss"
// STEP0-LABEL: func.func @apply_step(
// STEP0: %[[N:.*]] = dsc.global_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<40x8xf32>
// STEP0-NEXT: dsc.norm_all_reduce %[[N]] {axis = #dsc<axis pipeline>}
// STEP0-NOT: func.func @eval_step
// STEP0-NOT: func.func @stage_forward

// -dsc-split-stage-step cuts it: @stage_forward reads the parameters and
// tokens it needs, returns the activation it sends and what the backward
// reads of the forward (the layer norm's input and output); @micro_step,
// now the backward, takes those.
// SPLIT0-LABEL: func.func @micro_step(
// SPLIT0-SAME: #dsc.state<activation, "stage_output_grad">
// SPLIT0-SAME: %[[SAVEDA:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/0">}, %[[SAVEDB:[a-z0-9]+]]: tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/1">})
// SPLIT0-SAME: -> (tensor<40x8xf32> {dsc.state = #dsc.state<grad, "wte.weight">}
// SPLIT0-NOT: dsc.layer_norm %
// SPLIT0: dsc.layer_norm_grad %{{.*}}, %[[SAVEDB]]
// SPLIT0-LABEL: func.func @stage_forward(
// SPLIT0-NOT: grad,
// SPLIT0-SAME: {dsc.state = #dsc.state<input_ids, "input_ids">}) -> (tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_output">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/0">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/1">})
// SPLIT0: %[[X0:.*]] = dsc.add %{{.*}}, %{{.*}} : (tensor<2x4x8xf32>, tensor<4x8xf32>)
// SPLIT0: %[[N0:.*]] = dsc.layer_norm %[[X0]]
// SPLIT0: %[[X1:.*]] = dsc.add
// SPLIT0-NEXT: return %[[X1]], %[[N0]], %[[X0]]

// The last stage's forward returns the loss and the values its backward
// reads, the logits (which the step does not return) the first of them.
// SPLIT1-LABEL: func.func @micro_step(
// SPLIT1-SAME: tensor<2x4x40xf32> {dsc.state = #dsc.state<activation, "saved/0">}, %{{.*}}: tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/1">}
// SPLIT1-NOT: "loss"
// SPLIT1-SAME: tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_input_grad">})
// SPLIT1: dsc.cross_entropy_grad
// SPLIT1-LABEL: func.func @stage_forward(
// SPLIT1-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<2x4x40xf32> {dsc.state = #dsc.state<activation, "saved/0">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<activation, "saved/1">}
// SPLIT1: dsc.cross_entropy
// SPLIT1-NOT: _grad

// Stage 1's step returns the gradient of the activation it received; its
// copy of the tied wte.weight is left out of its part of the norm (stage 0
// counts it).
// STEP1-LABEL: func.func @micro_step(
// STEP1-SAME: #dsc.state<activation, "stage_input">
// STEP1-SAME: {dsc.state = #dsc.state<output, "loss">}
// STEP1-SAME: tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "stage_input_grad">})
// STEP1-LABEL: func.func @apply_step(
// STEP1: %[[N:.*]] = dsc.global_norm %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>)
// STEP1-NEXT: dsc.norm_all_reduce %[[N]] {axis = #dsc<axis pipeline>}

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
