// RUN: dsc-opt %s -split-input-file -verify-diagnostics | FileCheck %s
// RUN: dsc-opt %s -split-input-file -verify-diagnostics --mlir-print-op-generic | dsc-opt -split-input-file | FileCheck %s
// Qwen2-MoE's ops: the router's unnormalised top-k (normalize = false)
// and its gradient, which reads the logits; the shared expert's sigmoid
// gate per row and its gradient.

// CHECK-LABEL: func.func @qwen2_moe_ops
// CHECK: dsc.moe_topk %{{.*}} {k = 2 : i64, normalize = false} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
// CHECK: dsc.moe_topk_grad %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK: dsc.sigmoid_gate %{{.*}}, %{{.*}} : (tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
// CHECK: dsc.sigmoid_gate_grad %{{.*}}, %{{.*}}, %{{.*}} : (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x8xf32>)
func.func @qwen2_moe_ops(%logits: tensor<2x3x4xf32>, %g: tensor<2x3x1xf32>,
                         %x: tensor<2x3x8xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x8xf32>) {
  %w, %e = dsc.moe_topk %logits {k = 2 : i64, normalize = false} : (tensor<2x3x4xf32>) -> (tensor<2x3x2xf32>, tensor<2x3x2xi32>)
  %dl = dsc.moe_topk_grad %w, %w, %e, %logits : (tensor<2x3x2xf32>, tensor<2x3x2xf32>, tensor<2x3x2xi32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %y = dsc.sigmoid_gate %g, %x : (tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  %dg, %dx = dsc.sigmoid_gate_grad %y, %g, %x : (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x1xf32>, tensor<2x3x8xf32>)
  return %dl, %dg, %dx : tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x8xf32>
}

// -----

func.func @gate_not_per_row(%g: tensor<2x3x2xf32>, %x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'dsc.sigmoid_gate' op gate has shape [2, 3, 2], expected [2, 3, 1]}}
  %y = dsc.sigmoid_gate %g, %x : (tensor<2x3x2xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @gate_grad_shape(%dy: tensor<2x3x8xf32>, %g: tensor<2x3x1xf32>, %x: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'dsc.sigmoid_gate_grad' op gate_grad has shape [2, 3, 8], expected [2, 3, 1]}}
  %dg, %dx = dsc.sigmoid_gate_grad %dy, %g, %x : (tensor<2x3x8xf32>, tensor<2x3x1xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @topk_grad_logits(%w: tensor<6x2xf32>, %e: tensor<6x2xi32>, %l: tensor<6x5xf32>) {
  // expected-error @+1 {{'dsc.moe_topk_grad' op logits has shape [6, 5], expected [6, 4]}}
  %d = dsc.moe_topk_grad %w, %w, %e, %l : (tensor<6x2xf32>, tensor<6x2xf32>, tensor<6x2xi32>, tensor<6x5xf32>) -> tensor<6x4xf32>
  return
}
