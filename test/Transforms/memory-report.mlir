// RUN: dsc-opt %s -split-input-file -dsc-memory-report -verify-diagnostics -o /dev/null | FileCheck %s
// RUN: dsc-opt %s -split-input-file -dsc-memory-report=format=json -verify-diagnostics -o /dev/null | FileCheck %s --check-prefix=JSON
// RUN: dsc-opt %s -split-input-file -dsc-memory-report -verify-diagnostics | FileCheck %s --check-prefix=IR
// RUN: not dsc-opt %s -split-input-file -dsc-memory-report=format=xml -o /dev/null 2>&1 | FileCheck %s --check-prefix=FORMAT

// A step small enough to plan by hand (B=2, T=4, C=V=4; 64-byte alignment).
//
// Persistent region, in the order the lowering meets the states:
//   w 64 @0, grad/w 64 @64, input_ids 32 @128, targets 32 @192,
//   momentum/w 64 @256 -> 320 bytes, 256 of them data (parameters 64,
//   gradients 64, optimizer state 64, inputs/outputs 64), 64 alignment
//   padding. The loss is an output only @micro_step names: the driver reads
//   it when the call returns, so it is packed with the temps, live from its
//   producer to the function's end.
//
// @micro_step temps, live range [first, last] instruction, aligned bytes
// (the logits l are a temp: the step does not return them):
//   0 seed [0,5] 64  1 h [1,8] 128   2 a [2,7] 128    3 l [3,5] 128
//   4 loss [4,11] 64  5 dl [5,7] 128  6 da [6,8] 128  7 dw1 [7,10] 64
//   8 dh [8,9] 128   9 dw2 [9,10] 64  10 dw [10,11] 64
// Greedy by size, best fit: h 0, a 128, l 256, dl 384, da 256 (l is dead),
// dh 128 (a is dead), seed 512, loss 576, dw1 512 (seed is dead), dw2 0,
// dw 64. Extent 576 + 4 (the loss's bytes) = 580 = the bytes live at
// instruction 7 (h, a, dl, da, dw1 and the loss), so the plan meets the
// lower bound. @apply_step's one temp (64 bytes) shares the same range.
// Peak = 320 + 580 = 900.
//
// Saved activations: h (layer 0, read by gelu_grad), a (untagged, read by
// linear_grad_weight) and l (untagged, read by cross_entropy_grad) = 384;
// workspace = 580 - 384 = 196.

// CHECK:      memory plan: one static arena, 64-byte aligned buffers
// CHECK-NEXT:   category                     bytes MiB
// CHECK-NEXT:   parameters                   64 0.00
// CHECK-NEXT:   gradients                    64 0.00
// CHECK-NEXT:   optimizer state              64 0.00
// CHECK-NEXT:   inputs/outputs               64 0.00
// CHECK-NEXT:   alignment padding            64 0.00
// CHECK-NEXT:   activations (saved)          384 0.00
// CHECK-NEXT:   workspace                    196 0.00
// CHECK-NEXT:   peak                         900 0.00
// CHECK-NEXT:   parameter count              16
// CHECK-NEXT: saved activations per layer:
// CHECK-NEXT:   layer 0                      128 0.00
// CHECK-NEXT:   outside layers               256 0.00
// CHECK-NEXT: temp arena per function (lower bound: most bytes live at once):
// CHECK-NEXT:   @apply_step                  64 0.00 lower bound 64 (1 temps)
// CHECK-NEXT:   @micro_step                  580 0.00 lower bound 580 (11 temps)

// JSON:      "peak_bytes": 900,
// JSON-NEXT: "parameters": 64,
// JSON-NEXT: "gradients": 64,
// JSON-NEXT: "optimizer_state": 64,
// JSON-NEXT: "activations": 384,
// JSON-NEXT: "workspace": 196,
// JSON-NEXT: "inputs_outputs": 64,
// JSON-NEXT: "alignment_padding": 64,
// JSON-NEXT: "parameter_count": 16,
// JSON-NEXT: "persistent_bytes": 320,
// JSON-NEXT: "temp_bytes": 580,
// JSON-NEXT: "layers": [128],
// JSON-NEXT: "activations_outside_layers": 256,
// JSON-NEXT: "functions": [{"name": "apply_step", "temp_bytes": 64, "live_lower_bound_bytes": 64, "temps": 1}, {"name": "micro_step", "temp_bytes": 580, "live_lower_bound_bytes": 580, "temps": 11}]

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
    return %loss, %acc : tensor<f32>, tensor<4x4xf32>
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

// -----

// expected-error @+1 {{not a lowered training step: no @micro_step (run --dsc-train-pipeline first)}}
module {
  func.func @forward(%x: tensor<2xf32>) -> tensor<2xf32> {
    return %x : tensor<2xf32>
  }
}

// -----

module {
  // expected-error @+1 {{argument #0 of @micro_step has no #dsc.state}}
  func.func @micro_step(%x: tensor<2xf32>) -> () {
    return
  }
  func.func @apply_step() -> () {
    return
  }
}

// -----

module {
  func.func @micro_step(%x: tensor<2xf32> {dsc.state = #dsc.state<param, "x">}) -> () {
    // expected-error @+1 {{the runtime has no buffers of element type 'f64'}}
    %y = dsc.fill {value = 0.0 : f64} : () -> tensor<2xf64>
    return
  }
  func.func @apply_step() -> () {
    return
  }
}
