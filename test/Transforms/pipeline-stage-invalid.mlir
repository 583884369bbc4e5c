// RUN: dsc-opt %s -split-input-file "-dsc-pipeline-stage=stage=1" -verify-diagnostics

// A stage the mesh does not have.
// expected-error @+1 {{dsc-pipeline-stage: stage 1 is not a stage of the mesh's 1 pipeline rank}}
module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
}

// -----

// Nothing marks the transformer layers: there is nothing to cut.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>} {
  // expected-error @+1 {{dsc-pipeline-stage: @forward has no transformer layers (ops with dsc.layer) to cut}}
  func.func @forward(%w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 2.000000e-02 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = dsc.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}

// -----

// Several activations cross the boundary, one of them bf16: they travel
// packed into one f32 vector, which cannot hold it.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>} {
  // expected-error @+1 {{dsc-pipeline-stage: the boundary before stage 1 carries 2 activations, one of them 'tensor<2x4xbf16>'; several activations cross a boundary packed into one f32 vector}}
  func.func @forward(%w0: tensor<4x4xf32> {dsc.param = #dsc.param<"h.0.w", normal, 2.000000e-02 : f64>},
                     %w1: tensor<4x4xf32> {dsc.param = #dsc.param<"h.1.w", normal, 2.000000e-02 : f64>},
                     %e: tensor<4xf32> {dsc.param = #dsc.param<"emb", zeros, 0.000000e+00 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %h = dsc.add %x, %e : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %0 = dsc.linear %h, %w0 {dsc.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-note @+1 {{this activation}}
    %c = dsc.convert %0 {dsc.layer = 0 : i64} : (tensor<2x4xf32>) -> tensor<2x4xbf16>
    %1 = dsc.linear %0, %w1 {dsc.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %d = dsc.convert %c : (tensor<2x4xbf16>) -> tensor<2x4xf32>
    %2 = dsc.add %1, %d : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// The second stage reads nothing the first makes: there is no pipeline.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>} {
  // expected-error @+1 {{dsc-pipeline-stage: the boundary before stage 1 carries no activation: the stages after it do not depend on the ones before}}
  func.func @forward(%w0: tensor<4x4xf32> {dsc.param = #dsc.param<"h.0.w", normal, 2.000000e-02 : f64>},
                     %w1: tensor<4x4xf32> {dsc.param = #dsc.param<"h.1.w", normal, 2.000000e-02 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = dsc.linear %x, %w0 {dsc.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = dsc.linear %x, %w1 {dsc.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %2 = dsc.gelu tanh %1 : tensor<2x4xf32> -> tensor<2x4xf32>
    return %2 : tensor<2x4xf32>
  }
}

// -----

// Over three stages (embedding + layer 0, layers 1-2, head) a parameter
// of the first and the middle stage: only the first and the last may share
// one.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 3>} {
  // expected-error @+1 {{dsc-pipeline-stage: parameter 'w' is used by stages 0 and 1; only the first and the last stage may share a parameter (tied embeddings)}}
  func.func @forward(%w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 2.000000e-02 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = dsc.linear %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = dsc.gelu tanh %0 {dsc.layer = 0 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %2 = dsc.gelu tanh %1 {dsc.layer = 1 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    %3 = dsc.linear %2, %w {dsc.layer = 2 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %4 = dsc.gelu tanh %3 : tensor<2x4xf32> -> tensor<2x4xf32>
    return %4 : tensor<2x4xf32>
  }
}

// -----

// Layers out of order cannot be cut into contiguous stages.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 2>} {
  func.func @forward(%w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 2.000000e-02 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = dsc.linear %x, %w {dsc.layer = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    // expected-error @+1 {{'dsc.gelu' op dsc-pipeline-stage: layer 0 follows an op of layer 1; a stage must be a contiguous run of layers}}
    %1 = dsc.gelu tanh %0 {dsc.layer = 0 : i64} : tensor<2x4xf32> -> tensor<2x4xf32>
    return %1 : tensor<2x4xf32>
  }
}

// -----

// A model of one layer has three units: four stages cannot be filled.
module attributes {dsc.mesh = #dsc.mesh<data = 1, tensor = 1, pipeline = 4>} {
  // expected-error @+1 {{dsc-pipeline-stage: 3 units (embedding, 1 layers, head) cannot fill 4 stages}}
  func.func @forward(%w: tensor<4x4xf32> {dsc.param = #dsc.param<"w", normal, 2.000000e-02 : f64>},
                     %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %0 = dsc.linear %x, %w {dsc.layer = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %0 : tensor<2x4xf32>
  }
}
