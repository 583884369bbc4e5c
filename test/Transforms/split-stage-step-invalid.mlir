// RUN: dsc-opt %s -split-input-file -dsc-split-stage-step -verify-diagnostics

// A pipeline stage's step must return what its forward makes (the loss
// and logits, or the activation it sends): there is nothing to cut here.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>, dsc.pipeline_stage = 1 : i64} {
  // expected-error @+1 {{dsc-split-stage-step: @micro_step returns no forward result (loss, logits or stage_output)}}
  func.func @micro_step(%w: tensor<4xf32> {dsc.state = #dsc.state<param, "w">},
                        %g: tensor<4xf32> {dsc.state = #dsc.state<grad, "w">})
      -> (tensor<4xf32> {dsc.state = #dsc.state<grad, "w">}) {
    return %g : tensor<4xf32>
  }
}

// -----

// expected-error @+1 {{dsc-split-stage-step: no @micro_step with one block; run -dsc-build-train-step first}}
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>, dsc.pipeline_stage = 0 : i64} {
}

// -----

// A module that is not a pipeline stage is left alone.
module {
  func.func @micro_step(%w: tensor<4xf32>) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// An interleaved stage's chunks are separate pieces of the model: an op
// that reads the activations two chunks receive cannot be cut.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>, dsc.pipeline_stage = 1 : i64, dsc.pipeline_chunks = 2 : i64} {
  func.func @micro_step(%a: tensor<4xf32> {dsc.state = #dsc.state<activation, "stage_input">},
                        %b: tensor<4xf32> {dsc.state = #dsc.state<activation, "stage_input.1">})
      -> (tensor<4xf32> {dsc.state = #dsc.state<output, "stage_output">}) {
    // expected-error @+1 {{'dsc.add' op dsc-split-stage-step: reads the values of two model chunks; a pipeline stage's chunks must not share work}}
    %0 = dsc.add %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
