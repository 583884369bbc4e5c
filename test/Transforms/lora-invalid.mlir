// RUN: dsc-opt %s -split-input-file -verify-diagnostics -dsc-lora="rank=2 alpha=4 target-modules=q_proj"

// A target that names no linear layer (a typo) is an error, as in PEFT.
// expected-error @below {{dsc-lora: target module 'q_proj' matches no linear layer of the model}}
module {
func.func @forward(%w: tensor<6x8xf32> {dsc.param = #dsc.param<"layers.0.k_proj.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x6xf32>) {
  %h = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x6xf32>
}
}

// -----

// A weight that is also an embedding table (a tied head) cannot be adapted.
module {
func.func @forward(%w: tensor<6x8xf32> {dsc.param = #dsc.param<"q_proj.weight", normal, 0.02 : f64>},
                   %ids: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x6xf32>) {
  %e = dsc.embedding %w, %ids : (tensor<6x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  // expected-error @below {{dsc-lora: target module 'q_proj' also feeds dsc.embedding; only linear layers can be adapted}}
  %h = dsc.linear %e, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x6xf32>
}
}

// -----

// One adapter configuration has one layout (PEFT's fan_in_fan_out).
module {
func.func @forward(%a: tensor<8x8xf32> {dsc.param = #dsc.param<"l0.q_proj.weight", normal, 0.02 : f64>},
                   %b: tensor<8x8xf32> {dsc.param = #dsc.param<"l1.q_proj.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %h = dsc.linear %x, %a {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  // expected-error @below {{dsc-lora: module 'l1.q_proj' stores its weight as [out, in] and 'l0.q_proj' as [in, out]}}
  %g = dsc.linear %h, %b : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %g, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %g : tensor<f32>, tensor<2x4x8xf32>
}
}

// -----

// LoRA twice would give two adapters one name.
// expected-error @below {{dsc-lora: the model already has 'q_proj.lora_A.weight'}}
module {
func.func @forward(%w: tensor<6x8xf32> {dsc.param = #dsc.param<"q_proj.weight", normal, 0.02 : f64>},
                   %a: tensor<2x8xf32> {dsc.param = #dsc.param<"q_proj.lora_A.weight", uniform, 0.3 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x6xf32>) {
  %h = dsc.linear %x, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<6x8xf32>) -> tensor<2x4x6xf32>
  %d = dsc.linear %x, %a {transpose_w = true} : (tensor<2x4x8xf32>, tensor<2x8xf32>) -> tensor<2x4x2xf32>
  %loss = dsc.cross_entropy %h, %y : (tensor<2x4x6xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %h : tensor<f32>, tensor<2x4x6xf32>
}
}
