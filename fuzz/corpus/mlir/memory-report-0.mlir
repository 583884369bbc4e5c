// RUN: dsc-opt %s -split-input-file -dsc-memory-report -verify-diagnostics -o /dev/null | FileCheck %s
// RUN: dsc-opt %s -split-input-file -dsc-memory-report=format=json -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: dsc-opt %s -split-input-file -dsc-memory-report -verify-diagnostics | FileCheck %s --check-prefix=IR
// RUN: not dsc-opt %s -split-input-file -dsc-memory-report=format=xml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT

// A step small enough to plan by hand (B=2, T=4, C=V=4; 64-byte alignment).
//
// Persistent region, in the order the lowering meets the states:
//   w 64 @0, grad/w 64 @64, input_ids 32 @128, targets 32 @192, loss 4 @256,
//   logits 128 @320, momentum/w 64 @448  -> 512 bytes, 388 of them data
//   (parameters 64, gradients 64, optimizer state 64, inputs/outputs 196),
//   124 alignment padding.
//
// @micro_step temps, live range [first, last] instruction (logits and loss
// are written straight into their Output buffers, the last add into grad/w):
//   0 seed [0,5] 4    1 h  [1,8] 128   2 a  [2,7] 128   5 dl [5,7] 128
//   6 da  [6,8] 128   7 dw1 [7,10] 64  8 dh [8,9] 128   9 dw2 [9,10] 64
//   10 dw [10,11] 64
// Greedy by size, best fit: h 0, a 128, dl 256, da 384, dh 128 (the gap h/da
// leaves once a is dead), seed 384, dw1 512, dw2 0 (smallest gap that fits),
// dw 64. Extent 512 + 64 = 576 = the 576 bytes live at instruction 7, so
// the plan meets the lower bound. @apply_step's one temp (64 bytes) shares
// the same range. Peak = 512 + 576 = 1088.
//
// Saved activations: h (layer 0, read by gelu_grad) and a (untagged, read by
// linear_grad_weight) = 256; workspace = 576 - 256 = 320.


// JSON:      "peak_bytes": 1088,
// JSON-NEXT: "parameters": 64,
// JSON-NEXT: "gradients": 64,
// JSON-NEXT: "optimizer_state": 64,
// JSON-NEXT: "activations": 256,
// JSON-NEXT: "workspace": 320,
// JSON-NEXT: "inputs_outputs": 196,
// JSON-NEXT: "alignment_padding": 124,
// JSON-NEXT: "parameter_count": 16,
// JSON-NEXT: "persistent_bytes": 512,
// JSON-NEXT: "temp_bytes": 576,
// JSON-NEXT: "layers": [128],
// JSON-NEXT: "activations_outside_layers": 128,
// JSON-NEXT: "functions": [{"name": "apply_step", "temp_bytes": 64, "live_lower_bound_bytes": 64, "temps": 1}, {"name": "micro_step", "temp_bytes": 576, "live_lower_bound_bytes": 576, "temps": 9}]

// The report leaves the IR alone.
// IR-LABEL: func.func @micro_step(
// IR: dsc.gelu_grad tanh %{{.*}}, %{{.*}} {dsc.grad, dsc.layer = 0 : i64}
// IR-LABEL: func.func @apply_step(

// FORMAT: for the --format option: Cannot find option named 'xml'!

module {
  func.func @micro_step(
      %w: tensor<4x4xf32> {dsc.state = #dsc.state<param, "w">},
      %gw: tensor<4x4xf32> {dsc.state = #dsc.state<grad, "w">},
      %ids: tensor<2x4xi32> {dsc.state = #dsc.state<input_ids, "input_ids">},
      %tgt: tensor<2x4xi32> {dsc.state = #dsc.state<targets, "targets">})
      -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">},
          tensor<2x4x4xf32> {dsc.state = #dsc.state<output, "logits">},
          tensor<4x4xf32> {dsc.state = #dsc.state<grad, "w">}) {
    %seed = dsc.fill {dsc.grad, value = 1.0 : f64} : () -> tensor<f32>
    %h = dsc.embedding %w, %ids {dsc.layer = 0 : i64} : (tensor<4x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
    %a = dsc.gelu tanh %h : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
    %l = dsc.linear %a, %w {transpose_w = true} : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %loss = dsc.cross_entropy %l, %tgt : (tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<f32>
    %dl = dsc.cross_entropy_grad %seed, %l, %tgt {dsc.grad} : (tensor<f32>, tensor<2x4x4xf32>, tensor<2x4xi32>) -> tensor<2x4x4xf32>
    %da = dsc.linear_grad_input %dl, %w {dsc.grad, transpose_w = true} : (tensor<2x4x4xf32>, tensor<4x4xf32>) -> tensor<2x4x4xf32>
    %dw1 = dsc.linear_grad_weight %a, %dl {dsc.grad, transpose_w = true} : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<4x4xf32>
    %dh = dsc.gelu_grad tanh %da, %h {dsc.grad, dsc.layer = 0 : i64} : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
    %dw2 = dsc.embedding_grad %ids, %dh {dsc.grad, dsc.layer = 0 : i64} : (tensor<2x4xi32>, tensor<2x4x4xf32>) -> tensor<4x4xf32>
    %dw = dsc.add %dw1, %dw2 {dsc.grad} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %acc = dsc.add %gw, %dw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %loss, %l, %acc : tensor<f32>, tensor<2x4x4xf32>, tensor<4x4xf32>
  }
  func.func @apply_step(
      %w: tensor<4x4xf32> {dsc.state = #dsc.state<param, "w">},
      %gw: tensor<4x4xf32> {dsc.state = #dsc.state<grad, "w">},
      %m: tensor<4x4xf32> {dsc.state = #dsc.state<momentum, "w">})
      -> (tensor<4x4xf32> {dsc.state = #dsc.state<param, "w">},
          tensor<4x4xf32> {dsc.state = #dsc.state<momentum, "w">}) {
    %s = dsc.add %gw, %gw : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %m2 = dsc.add %m, %s : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %w2 = dsc.add %w, %m2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    return %w2, %m2 : tensor<4x4xf32>, tensor<4x4xf32>
  }
}

