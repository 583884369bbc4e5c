// RUN: dsc-opt %s | FileCheck %s
// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// RUN: dsc-opt %s --mlir-print-op-generic | dsc-opt | FileCheck %s

// CHECK-LABEL: func @forward_ops
func.func @forward_ops(%ids: tensor<2x8xi32>, %wte: tensor<50x24xf32>,
                       %w: tensor<24x72xf32>, %b: tensor<72xf32>,
                       %g: tensor<24xf32>, %labels: tensor<2x8xi32>) -> tensor<f32> {
  // CHECK: dsc.iota : () -> tensor<8xi32>
  %pos = dsc.iota {step = 1 : i64} : () -> tensor<8xi32>
  // CHECK: dsc.iota {step = 0 : i64} : () -> tensor<8xi32>
  %types = dsc.iota {step = 0 : i64} : () -> tensor<8xi32>
  // CHECK: %[[TOK:.*]] = dsc.embedding %{{.*}}, %{{.*}} : (tensor<50x24xf32>, tensor<2x8xi32>) -> tensor<2x8x24xf32>
  %tok = dsc.embedding %wte, %ids : (tensor<50x24xf32>, tensor<2x8xi32>) -> tensor<2x8x24xf32>
  %pe = dsc.embedding %wte, %pos : (tensor<50x24xf32>, tensor<8xi32>) -> tensor<8x24xf32>
  // CHECK: dsc.add %[[TOK]], %{{.*}} : (tensor<2x8x24xf32>, tensor<8x24xf32>) -> tensor<2x8x24xf32>
  %h = dsc.add %tok, %pe : (tensor<2x8x24xf32>, tensor<8x24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.layer_norm {{.*}} {epsilon = 1.000000e-05 : f64}
  %n = dsc.layer_norm %h, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.rms_norm {{.*}} : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %rn = dsc.rms_norm %h, %g : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.rms_norm_grad {{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  %rdx, %rdw = dsc.rms_norm_grad %rn, %h, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  // CHECK: dsc.add_rms_norm {{.*}} {epsilon = 1.000000e-05 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8xf32>)
  %as, %ay, %ar = dsc.add_rms_norm %h, %rn, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8xf32>)
  // CHECK: dsc.rms_norm_grad {{.*}} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  %adx, %adw = dsc.rms_norm_grad %ay, %as, %g, %rn : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  // CHECK: dsc.invertible_rms_norm {{.*}} : (tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8xf32>)
  %iy, %ir = dsc.invertible_rms_norm %h, %g : (tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8xf32>)
  // CHECK: dsc.rms_norm_grad_from_output {{.*}} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  %odx, %odw = dsc.rms_norm_grad_from_output %iy, %iy, %g, %ir, %rn : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  // CHECK: dsc.linear {{.*}} : (tensor<2x8x24xf32>, tensor<24x72xf32>, tensor<72xf32>) -> tensor<2x8x72xf32>
  %qkv = dsc.linear %n, %w, %b : (tensor<2x8x24xf32>, tensor<24x72xf32>, tensor<72xf32>) -> tensor<2x8x72xf32>
  // CHECK: %[[QKV:.*]]:3 = dsc.split_heads {{.*}} {num_heads = 3 : i64}
  %q, %k, %v = dsc.split_heads %qkv {num_heads = 3 : i64} : (tensor<2x8x72xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  // CHECK: dsc.batch_matmul %[[QKV]]#0, %[[QKV]]#1 {transpose_b = true}
  %s = dsc.batch_matmul %q, %k {transpose_b = true} : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: dsc.softmax {{.*}} {causal = true, scale = 0.35355339059327373 : f64}
  %p = dsc.softmax %s {causal = true, scale = 0.35355339059327373 : f64} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: dsc.dropout {{.*}} {rate = 1.000000e-01 : f64, stream = 7 : i64}
  %pd = dsc.dropout %p {rate = 0.1 : f64, stream = 7 : i64} : (tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  %o = dsc.batch_matmul %pd, %v : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  // CHECK: dsc.merge_heads {{.*}} : (tensor<2x3x8x8xf32>) -> tensor<2x8x24xf32>
  %m = dsc.merge_heads %o : (tensor<2x3x8x8xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.gelu tanh {{.*}} : tensor<2x8x24xf32> -> tensor<2x8x24xf32>
  %a = dsc.gelu tanh %m : tensor<2x8x24xf32> -> tensor<2x8x24xf32>
  // CHECK: dsc.gelu erf
  %a2 = dsc.gelu erf %a : tensor<2x8x24xf32> -> tensor<2x8x24xf32>
  // CHECK: dsc.linear {{.*}} {transpose_w = true} : (tensor<2x8x24xf32>, tensor<50x24xf32>) -> tensor<2x8x50xf32>
  %logits = dsc.linear %a2, %wte {transpose_w = true} : (tensor<2x8x24xf32>, tensor<50x24xf32>) -> tensor<2x8x50xf32>
  // CHECK: dsc.mlm_mask {{.*}} {mask_prob = 1.500000e-01 : f64, mask_token_id = 3 : i64, stream = 1 : i64, vocab_size = 50 : i64}
  %in, %lab = dsc.mlm_mask %ids {mask_prob = 0.15 : f64, mask_token_id = 3 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  // CHECK: dsc.mlm_mask {{.*}} {mask_prob = 1.500000e-01 : f64, mask_token_id = 3 : i64, pad_token_id = 0 : i64, stream = 1 : i64, vocab_size = 50 : i64}
  %in2, %lab2 = dsc.mlm_mask %ids {mask_prob = 0.15 : f64, mask_token_id = 3 : i64, pad_token_id = 0 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  // CHECK: dsc.padding_mask {{.*}} {pad_token_id = 0 : i64} : (tensor<2x8xi32>) -> tensor<2x8xi32>
  %keys = dsc.padding_mask %ids {pad_token_id = 0 : i64} : (tensor<2x8xi32>) -> tensor<2x8xi32>
  // CHECK: dsc.cross_entropy {{.*}} : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
  %loss = dsc.cross_entropy %logits, %labels : (tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func @fusion_ops
func.func @fusion_ops(%x: tensor<2x8x72xf32>, %w: tensor<24x24xf32>, %b: tensor<24xf32>) {
  // CHECK: %[[W:.*]] = dsc.concat %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<24x24xf32>, tensor<24x24xf32>, tensor<24x24xf32>) -> tensor<72x24xf32>
  %w3 = dsc.concat %w, %w, %w {axis = 0 : i64} : (tensor<24x24xf32>, tensor<24x24xf32>, tensor<24x24xf32>) -> tensor<72x24xf32>
  // CHECK: dsc.split %[[W]] {axis = 1 : i64} : (tensor<72x24xf32>) -> (tensor<72x8xf32>, tensor<72x16xf32>)
  %p0, %p1 = dsc.split %w3 {axis = 1 : i64} : (tensor<72x24xf32>) -> (tensor<72x8xf32>, tensor<72x16xf32>)
  %b3 = dsc.concat %b, %b, %b {axis = 0 : i64} : (tensor<24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<72xf32>
  // CHECK: dsc.bias_split_heads %{{.*}}, %{{.*}} {num_heads = 3 : i64} : (tensor<2x8x72xf32>, tensor<72xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  %q, %k, %v = dsc.bias_split_heads %x, %b3 {num_heads = 3 : i64} : (tensor<2x8x72xf32>, tensor<72xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  return
}

// CHECK-LABEL: func @fused_epilogues
func.func @fused_epilogues(%h: tensor<2x8x24xf32>, %b: tensor<24xf32>, %dy: tensor<2x8x24xf32>) {
  // CHECK: dsc.bias_gelu tanh %{{.*}}, %{{.*}} : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  %a = dsc.bias_gelu tanh %h, %b : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.bias_gelu_grad erf {{.*}} -> (tensor<2x8x24xf32>, tensor<24xf32>)
  %dh, %db = dsc.bias_gelu_grad erf %dy, %h, %b : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  // CHECK: dsc.bias_dropout_add {{.*}} {rate = 1.000000e-01 : f64, stream = 4 : i64}
  %r = dsc.bias_dropout_add %h, %b, %a {rate = 0.1 : f64, stream = 4 : i64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.dropout_bias_grad {{.*}} -> (tensor<2x8x24xf32>, tensor<24xf32>)
  %dx, %dbias = dsc.dropout_bias_grad %dy {rate = 0.1 : f64, stream = 4 : i64} : (tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>)
  return
}

// CHECK-LABEL: func @residual_layer_norm_ops
func.func @residual_layer_norm_ops(%h: tensor<2x8x24xf32>, %b: tensor<24xf32>, %res: tensor<2x8x24xf32>, %dy: tensor<2x8x24xf32>) {
  // CHECK: %[[S:[a-z0-9_]+]], %[[Y:[a-z0-9_]+]], %[[R:[a-z0-9_]+]] = dsc.bias_dropout_add_layer_norm {{.*}} {epsilon = 1.000000e-05 : f64, rate = 1.000000e-01 : f64, stream = 4 : i64} : {{.*}} -> (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8xf32>)
  %s, %y, %r = dsc.bias_dropout_add_layer_norm %h, %b, %res, %b, %b {epsilon = 1.0e-5 : f64, rate = 0.1 : f64, stream = 4 : i64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<2x8xf32>)
  // CHECK: dsc.layer_norm_grad %{{.*}}, %[[S]], %{{.*}}, %{{.*}} {epsilon
  %0:3 = dsc.layer_norm_grad %dy, %s, %b, %dy {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  // CHECK: dsc.layer_norm_grad_from_output %{{.*}}, %[[Y]], %{{.*}}, %{{.*}}, %[[R]], %{{.*}} :
  %1:3 = dsc.layer_norm_grad_from_output %dy, %y, %b, %b, %r, %dy : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<2x8xf32>, tensor<2x8x24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// CHECK-LABEL: func @softmax_dropout_ops
func.func @softmax_dropout_ops(%s: tensor<2x3x8x8xf32>) {
  // CHECK: %[[D:[a-z0-9_]+]], %[[P:[a-z0-9_]+]] = dsc.softmax_dropout {{.*}} {causal = true, rate = 1.000000e-01 : f64, scale = 2.500000e-01 : f64, stream = 3 : i64}
  %d, %p = dsc.softmax_dropout %s {causal = true, rate = 0.1 : f64, scale = 0.25 : f64, stream = 3 : i64} : (tensor<2x3x8x8xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  // CHECK: dsc.softmax_dropout_grad %[[D]], %[[P]], %[[D]] {rate = 1.000000e-01 : f64, scale = 2.500000e-01 : f64}
  %g = dsc.softmax_dropout_grad %d, %p, %d {rate = 0.1 : f64, scale = 0.25 : f64} : (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<2x3x8x8xf32>
  return
}

// CHECK-LABEL: func @attention_ops
func.func @attention_ops(%q: tensor<2x3x8x4xf32>) {
  // CHECK: %[[O:[a-z0-9_]+]], %[[L:[a-z0-9_]+]] = dsc.attention %{{.*}}, %{{.*}}, %{{.*}} {causal = true, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 3 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  %o, %l = dsc.attention %q, %q, %q {causal = true, rate = 0.1 : f64, scale = 0.5 : f64, stream = 3 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  // CHECK: dsc.attention_grad %[[O]], %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[L]] {causal = true, rate = 1.000000e-01 : f64, scale = 5.000000e-01 : f64, stream = 3 : i64}
  %g:3 = dsc.attention_grad %o, %q, %q, %q, %o, %l {causal = true, rate = 0.1 : f64, scale = 0.5 : f64, stream = 3 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// A pipeline stage's forward returns the log-sum-exp for its backward
// (-dsc-split-stage-step): a return may read it.
// CHECK-LABEL: func @attention_lse_saved
func.func @attention_lse_saved(%q: tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>) {
  // CHECK: %[[O:[a-z0-9_]+]], %[[L:[a-z0-9_]+]] = dsc.attention
  %o, %l = dsc.attention %q, %q, %q {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  // CHECK: return %[[O]], %[[L]]
  return %o, %l : tensor<2x3x8x4xf32>, tensor<2x3x8xf32>
}

// Key padding masks: [B, T] i32 operands after the tensors.
// CHECK-LABEL: func @padded_attention_ops
func.func @padded_attention_ops(%q: tensor<2x3x8x4xf32>, %s: tensor<2x3x8x8xf32>, %keys: tensor<2x8xi32>) {
  // CHECK: dsc.softmax %{{.*}}, %{{.*}} {causal = true} : (tensor<2x3x8x8xf32>, tensor<2x8xi32>) -> tensor<2x3x8x8xf32>
  %p = dsc.softmax %s, %keys {causal = true} : (tensor<2x3x8x8xf32>, tensor<2x8xi32>) -> tensor<2x3x8x8xf32>
  // CHECK: dsc.softmax_dropout %{{.*}}, %{{.*}} {rate = 1.000000e-01 : f64, stream = 2 : i64} : (tensor<2x3x8x8xf32>, tensor<2x8xi32>)
  %d, %pr = dsc.softmax_dropout %s, %keys {rate = 0.1 : f64, stream = 2 : i64} : (tensor<2x3x8x8xf32>, tensor<2x8xi32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  // CHECK: dsc.attention %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {rate = 0.000000e+00 : f64, stream = 0 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x8xi32>)
  %o, %l = dsc.attention %q, %q, %q, %keys {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x8xi32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  // CHECK: dsc.attention_grad {{.*}} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>, tensor<2x8xi32>)
  %g:3 = dsc.attention_grad %o, %q, %q, %q, %o, %l, %keys {rate = 0.0 : f64, stream = 0 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>, tensor<2x8xi32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// CHECK-LABEL: func @invertible_ops
func.func @invertible_ops(%x: tensor<2x8x24xf32>, %g: tensor<24xf32>, %dy: tensor<2x8x24xf32>) {
  // CHECK: %[[Y:.*]], %[[R:.*]] = dsc.invertible_layer_norm {{.*}} -> (tensor<2x8x24xf32>, tensor<2x8xf32>)
  %y, %r = dsc.invertible_layer_norm %x, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x8xf32>)
  // CHECK: dsc.layer_norm_grad_from_output %{{.*}}, %[[Y]], %{{.*}}, %{{.*}}, %[[R]]
  %dx, %dg, %db = dsc.layer_norm_grad_from_output %dy, %y, %g, %g, %r : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<2x8xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// CHECK-LABEL: func @gradient_ops
func.func @gradient_ops(%ids: tensor<2x8xi32>, %dy: tensor<2x8x24xf32>,
                        %x: tensor<2x8x24xf32>, %w: tensor<24x24xf32>,
                        %g: tensor<24xf32>, %dl: tensor<f32>,
                        %logits: tensor<2x8x50xf32>, %labels: tensor<2x8xi32>) {
  // CHECK: dsc.reduce_to {{.*}} : (tensor<2x8x24xf32>) -> tensor<24xf32>
  %0 = dsc.reduce_to %dy : (tensor<2x8x24xf32>) -> tensor<24xf32>
  // CHECK: dsc.embedding_grad {{.*}} -> tensor<50x24xf32>
  %1 = dsc.embedding_grad %ids, %dy : (tensor<2x8xi32>, tensor<2x8x24xf32>) -> tensor<50x24xf32>
  // CHECK: dsc.linear_grad_input
  %2 = dsc.linear_grad_input %dy, %w : (tensor<2x8x24xf32>, tensor<24x24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.linear_grad_weight {{.*}} {transpose_w = true}
  %3 = dsc.linear_grad_weight %x, %dy {transpose_w = true} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<24x24xf32>
  // CHECK: dsc.layer_norm_grad
  %4:3 = dsc.layer_norm_grad %dy, %x, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  // CHECK: dsc.gelu_grad erf
  %5 = dsc.gelu_grad erf %dy, %x : tensor<2x8x24xf32>, tensor<2x8x24xf32> -> tensor<2x8x24xf32>
  // CHECK: dsc.softmax_grad
  %6 = dsc.softmax_grad %dy, %x {scale = 0.5 : f64} : (tensor<2x8x24xf32>, tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  // CHECK: dsc.cross_entropy_grad
  %7 = dsc.cross_entropy_grad %dl, %logits, %labels : (tensor<f32>, tensor<2x8x50xf32>, tensor<2x8xi32>) -> tensor<2x8x50xf32>
  // CHECK: dsc.fill {value = 0.000000e+00 : f64} : () -> tensor<4xf32>
  %8 = dsc.fill {value = 0.0 : f64} : () -> tensor<4xf32>
  return
}

// CHECK-LABEL: func @optimizer_ops
func.func @optimizer_ops(%p: tensor<4x4xf32>, %g: tensor<4x4xf32>, %m: tensor<4x4xf32>,
                         %v: tensor<4x4xf32>, %step: tensor<i64>) {
  // CHECK: dsc.all_reduce {{.*}} {op = #dsc<reduce sum>}
  %g1 = dsc.all_reduce %g {op = #dsc<reduce sum>} : (tensor<4x4xf32>) -> tensor<4x4xf32>
  // CHECK: dsc.global_norm
  %n = dsc.global_norm %g1, %g : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  // CHECK: dsc.clip_coefficient
  %c = dsc.clip_coefficient %n {max_norm = 1.0 : f64} : (tensor<f32>) -> tensor<f32>
  // CHECK: dsc.lr_schedule {{.*}}kind = #dsc<lr_schedule WarmupLR>
  %lr = dsc.lr_schedule %step {kind = #dsc<lr_schedule WarmupLR>, lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = #dsc<warmup log>, warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  // CHECK: dsc.adam
  %a:3 = dsc.adam %p, %g1, %m, %v, %lr, %step, %c {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64, adamw = true, bias_correction = true} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  // CHECK: dsc.lamb
  %l:3 = dsc.lamb %p, %g1, %m, %v, %lr, %step, %c {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.01 : f64, bias_correction = true, max_coeff = 10.0 : f64, min_coeff = 0.01 : f64} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  // CHECK: dsc.sgd
  %s:2 = dsc.sgd %p, %g1, %m, %lr, %step, %c {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// CHECK-LABEL: func @adam_8bit
func.func @adam_8bit(%p: tensor<20x16xf32>, %g: tensor<20x16xf32>, %m: tensor<20x16xui8>,
                     %v: tensor<20x16xui8>, %ma: tensor<2xf32>, %va: tensor<2xf32>,
                     %lr: tensor<f32>, %step: tensor<i64>, %skip: tensor<f32>) {
  // CHECK: dsc.adam_8bit %{{.*}} {beta1 = 9.000000e-01 : f64, {{.*}}weight_decay = 0.000000e+00 : f64} : ({{.*}}tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>
  %a:5 = dsc.adam_8bit %p, %g, %m, %v, %ma, %va, %lr, %step, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>)
  // With the fp16 skip flag.
  // CHECK: dsc.adam_8bit {{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {
  %b:5 = dsc.adam_8bit %p, %g, %m, %v, %ma, %va, %lr, %step, %lr, %skip {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.01 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>)
  return
}

// CHECK-LABEL: func @adafactor
func.func @adafactor(%w: tensor<8x4xf32>, %row: tensor<8xf32>, %col: tensor<4xf32>,
                     %b: tensor<4xf32>, %lr: tensor<f32>, %step: tensor<i64>,
                     %skip: tensor<f32>) {
  // A matrix: row and column factors.
  // CHECK: dsc.adafactor %{{.*}}, %{{.*}}, [%{{.*}}, %{{.*}}], %{{.*}}, %{{.*}}, %{{.*}} {{{.*}}first_moment = false{{.*}}} : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>]
  %p1, %s1:2 = dsc.adafactor %w, %w, [%row, %col], %lr, %step, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>]
  // A vector with a first moment and the skip flag.
  // CHECK: dsc.adafactor %{{.*}}, %{{.*}}, [%{{.*}}, %{{.*}}], %{{.*}}, %{{.*}}, %{{.*}} skip %{{.*}} {{{.*}}first_moment = true{{.*}}} : tensor<4xf32>, tensor<4xf32>, [tensor<4xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32> -> tensor<4xf32>, [tensor<4xf32>, tensor<4xf32>]
  %p2, %s2:2 = dsc.adafactor %b, %b, [%b, %b], %lr, %step, %lr skip %skip {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = true, beta1 = 0.9 : f64, weight_decay = 0.01 : f64, scale_parameter = false, relative_step = false, warmup_init = false} : tensor<4xf32>, tensor<4xf32>, [tensor<4xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32>, tensor<f32> -> tensor<4xf32>, [tensor<4xf32>, tensor<4xf32>]
  return
}
