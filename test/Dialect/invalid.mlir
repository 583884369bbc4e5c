// RUN: dsc-opt %s -split-input-file -verify-diagnostics

func.func @embedding_table_rank(%t: tensor<50xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.embedding' op expects a rank-2 table, got [50]}}
  %0 = dsc.embedding %t, %ids : (tensor<50xf32>, tensor<2x8xi32>) -> tensor<2x8x24xf32>
  return
}

// -----

func.func @embedding_result(%t: tensor<50x24xf32>, %ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.embedding' op result has shape [2, 8, 16], expected [2, 8, 24]}}
  %0 = dsc.embedding %t, %ids : (tensor<50x24xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  return
}

// -----

func.func @add_broadcast(%a: tensor<2x8x24xf32>, %b: tensor<7x24xf32>) {
  // expected-error @+1 {{'dsc.add' op rhs [7, 24] does not broadcast to lhs [2, 8, 24]}}
  %0 = dsc.add %a, %b : (tensor<2x8x24xf32>, tensor<7x24xf32>) -> tensor<2x8x24xf32>
  return
}

// -----

func.func @add_mixed_types(%a: tensor<4xbf16>, %b: tensor<4xf16>) {
  // expected-error @+1 {{'dsc.add' op mixes element types 'bf16' and 'f16'}}
  %0 = dsc.add %a, %b : (tensor<4xbf16>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @linear_contraction(%x: tensor<2x8x24xf32>, %w: tensor<16x72xf32>) {
  // expected-error @+1 {{'dsc.linear' op input [2, 8, 24] does not match weight [16, 72]: contraction sizes 24 vs 16}}
  %0 = dsc.linear %x, %w : (tensor<2x8x24xf32>, tensor<16x72xf32>) -> tensor<2x8x72xf32>
  return
}

// -----

func.func @linear_bias(%x: tensor<2x8x24xf32>, %w: tensor<24x72xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.linear' op bias has shape [24], expected [72]}}
  %0 = dsc.linear %x, %w, %b : (tensor<2x8x24xf32>, tensor<24x72xf32>, tensor<24xf32>) -> tensor<2x8x72xf32>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<2x8x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.linear' op expects input of rank >= 1 and a rank-2 weight, got input [2, 8, 24] and weight [24]}}
  %0 = dsc.linear %x, %w : (tensor<2x8x24xf32>, tensor<24xf32>) -> tensor<2x8x24xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<2x24xf32>, %g: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm' op attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = dsc.layer_norm %x, %g, %g {epsilon = 0.0 : f64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @layer_norm_gamma(%x: tensor<2x24xf32>, %g: tensor<23xf32>) {
  // expected-error @+1 {{'dsc.layer_norm' op failed to verify that gamma has one element per feature: [C] for input [..., C]}}
  %0 = dsc.layer_norm %x, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x24xf32>, tensor<23xf32>, tensor<23xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @rms_norm_eps(%x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.rms_norm' op attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = dsc.rms_norm %x, %w {epsilon = -1.0e-6 : f64} : (tensor<2x24xf32>, tensor<24xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x24xf32>, %w: tensor<12xf32>) {
  // expected-error @+1 {{'dsc.rms_norm' op failed to verify that weight has one element per feature: [C] for input [..., C]}}
  %0 = dsc.rms_norm %x, %w : (tensor<2x24xf32>, tensor<12xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @rms_norm_grad_shapes(%dy: tensor<2x12xf32>, %x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.rms_norm_grad' op failed to verify that all of {grad, input, input_grad} have same shape}}
  %0:2 = dsc.rms_norm_grad %dy, %x, %w : (tensor<2x12xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @rms_norm_grad_residual(%dy: tensor<2x24xf32>, %x: tensor<2x24xf32>, %w: tensor<24xf32>, %dr: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.rms_norm_grad' op failed to verify that residual_grad, when present, has the shape of input}}
  %0:2 = dsc.rms_norm_grad %dy, %x, %w, %dr : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @add_rms_norm_residual(%x: tensor<2x24xf32>, %r: tensor<24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.add_rms_norm' op failed to verify that all of {input, residual, sum, result} have same shape}}
  %0:3 = dsc.add_rms_norm %x, %r, %w : (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<2xf32>)
  return
}

// -----

func.func @add_rms_norm_rstd(%x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.add_rms_norm' op failed to verify that rstd has one element per row: [...] for input [..., C]}}
  %0:3 = dsc.add_rms_norm %x, %x, %w : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<2x24xf32>)
  return
}

// -----

func.func @add_rms_norm_eps(%x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.add_rms_norm' op attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0:3 = dsc.add_rms_norm %x, %x, %w {epsilon = 0.0 : f64} : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<2xf32>)
  return
}

// -----

func.func @invertible_rms_norm_rstd(%x: tensor<2x24xf32>, %w: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.invertible_rms_norm' op failed to verify that rstd has one element per row: [...] for input [..., C]}}
  %0:2 = dsc.invertible_rms_norm %x, %w : (tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @rms_norm_grad_from_output_weight(%dy: tensor<2x24xf32>, %y: tensor<2x24xf32>, %w: tensor<12xf32>, %r: tensor<2xf32>) {
  // expected-error @+1 {{'dsc.rms_norm_grad_from_output' op failed to verify that weight has one element per feature: [C] for output [..., C]}}
  %0:2 = dsc.rms_norm_grad_from_output %dy, %y, %w, %r : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<12xf32>, tensor<2xf32>) -> (tensor<2x24xf32>, tensor<12xf32>)
  return
}

// -----

func.func @dropout_rate(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dropout' op expects rate in [0, 1), got 1.000000e+00}}
  %0 = dsc.dropout %x {rate = 1.0 : f64, stream = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// NaN passed the range check.
func.func @dropout_rate_nan(%x: tensor<4xf32>) {
  // expected-error @+1 {{'dsc.dropout' op expects rate in [0, 1), got nan}}
  %0 = dsc.dropout %x {rate = 0x7FF8000000000000 : f64, stream = 1 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// expected-error @+1 {{parameter 'w': std must be finite and >= 0, got nan}}
func.func @param_std_nan(%w: tensor<4xf32> {dsc.param = #dsc.param<"w", normal, 0x7FF8000000000000 : f64>}) {
  return
}

// -----

// expected-error @+1 {{parameter 'w': std must be finite and >= 0, got -1}}
func.func @param_std_negative(%w: tensor<4xf32> {dsc.param = #dsc.param<"w", normal, -1.0 : f64>}) {
  return
}

// -----

func.func @split_heads_width(%x: tensor<2x8x70xf32>) {
  // expected-error @+1 {{'dsc.split_heads' op width 70 is not divisible into 3 part(s) of 3 heads}}
  %q, %k, %v = dsc.split_heads %x {num_heads = 3 : i64} : (tensor<2x8x70xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  return
}

// -----

func.func @split_heads_part(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.split_heads' op part has shape [2, 8, 3, 8], expected [2, 3, 8, 8]}}
  %q = dsc.split_heads %x {num_heads = 3 : i64} : (tensor<2x8x24xf32>) -> tensor<2x8x3x8xf32>
  return
}

// -----

func.func @merge_heads_rank(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.merge_heads' op expects [B, H, T, D] parts, got [2, 8, 24]}}
  %0 = dsc.merge_heads %x : (tensor<2x8x24xf32>) -> tensor<2x8x24xf32>
  return
}

// -----

func.func @bmm_rank(%a: tensor<8x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op expects operands of equal rank >= 3, got [8, 8] and [8, 8]}}
  %0 = dsc.batch_matmul %a, %a : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return
}

// -----

func.func @bmm_batch(%a: tensor<2x8x4xf32>, %b: tensor<3x4x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op batch dimensions differ: [2, 8, 4] vs [3, 4, 8]}}
  %0 = dsc.batch_matmul %a, %b : (tensor<2x8x4xf32>, tensor<3x4x8xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

func.func @bmm_contraction(%a: tensor<2x8x4xf32>, %b: tensor<2x5x8xf32>) {
  // expected-error @+1 {{'dsc.batch_matmul' op contraction sizes differ: [2, 8, 4] @ [2, 5, 8]}}
  %0 = dsc.batch_matmul %a, %b : (tensor<2x8x4xf32>, tensor<2x5x8xf32>) -> tensor<2x8x8xf32>
  return
}

// -----

func.func @softmax_causal(%x: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'dsc.softmax' op causal mask needs Tq <= Tk, got [2, 8, 4]}}
  %0 = dsc.softmax %x {causal = true} : (tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<2x8x50xf32>, %y: tensor<2x7xi32>) {
  // expected-error @+1 {{'dsc.cross_entropy' op logits [2, 8, 50] do not match labels [2, 7] (expected logits [..., V] over labels [...])}}
  %0 = dsc.cross_entropy %l, %y : (tensor<2x8x50xf32>, tensor<2x7xi32>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_with_grad_labels(%g: tensor<f32>, %l: tensor<2x8x50xf32>, %y: tensor<2x7xi32>) {
  // expected-error @+1 {{'dsc.cross_entropy_with_grad' op logits [2, 8, 50] do not match labels [2, 7] (expected logits [..., V] over labels [...])}}
  %0, %1 = dsc.cross_entropy_with_grad %g, %l, %y : (tensor<f32>, tensor<2x8x50xf32>, tensor<2x7xi32>) -> (tensor<f32>, tensor<2x8x50xf32>)
  return
}

// -----

func.func @cross_entropy_with_grad_type(%g: tensor<f32>, %l: tensor<2x8x50xbf16>, %y: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.cross_entropy_with_grad' op logits_grad 'tensor<2x8x50xf32>' must have the logits' type 'tensor<2x8x50xbf16>'}}
  %0, %1 = dsc.cross_entropy_with_grad %g, %l, %y : (tensor<f32>, tensor<2x8x50xbf16>, tensor<2x8xi32>) -> (tensor<f32>, tensor<2x8x50xf32>)
  return
}

// -----

func.func @mlm_prob(%ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.mlm_mask' op expects mask_prob in (0, 1), got 0.000000e+00}}
  %a, %b = dsc.mlm_mask %ids {mask_prob = 0.0 : f64, mask_token_id = 3 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  return
}

// -----

func.func @mlm_token(%ids: tensor<2x8xi32>) {
  // expected-error @+1 {{'dsc.mlm_mask' op mask_token_id 50 is outside the vocabulary [0, 50)}}
  %a, %b = dsc.mlm_mask %ids {mask_prob = 0.15 : f64, mask_token_id = 50 : i64, stream = 1 : i64, vocab_size = 50 : i64} : (tensor<2x8xi32>) -> (tensor<2x8xi32>, tensor<2x8xi32>)
  return
}

// -----

func.func @reduce_to(%x: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.reduce_to' op result [7] does not broadcast to input [2, 8, 24]}}
  %0 = dsc.reduce_to %x : (tensor<2x8x24xf32>) -> tensor<7xf32>
  return
}

// -----

func.func @embedding_grad(%ids: tensor<2x8xi32>, %dy: tensor<2x8x24xf32>) {
  // expected-error @+1 {{'dsc.embedding_grad' op gradient [2, 8, 24] does not match ids [2, 8] and table [50, 16]}}
  %0 = dsc.embedding_grad %ids, %dy : (tensor<2x8xi32>, tensor<2x8x24xf32>) -> tensor<50x16xf32>
  return
}

// -----

func.func @linear_grad_input(%dy: tensor<2x8x24xf32>, %w: tensor<24x72xf32>) {
  // expected-error @+1 {{'dsc.linear_grad_input' op gradient [2, 8, 24] does not match weight [24, 72]}}
  %0 = dsc.linear_grad_input %dy, %w : (tensor<2x8x24xf32>, tensor<24x72xf32>) -> tensor<2x8x24xf32>
  return
}

// -----

func.func @linear_grad_weight(%x: tensor<2x8x24xf32>, %dy: tensor<2x7x72xf32>) {
  // expected-error @+1 {{'dsc.linear_grad_weight' op input [2, 8, 24] and gradient [2, 7, 72] differ in leading dimensions}}
  %0 = dsc.linear_grad_weight %x, %dy : (tensor<2x8x24xf32>, tensor<2x7x72xf32>) -> tensor<24x72xf32>
  return
}

// -----

func.func @gelu_grad(%dy: tensor<4xf32>, %x: tensor<5xf32>) {
  // expected-error @+1 {{'dsc.gelu_grad' op gradient has shape [4], expected [5]}}
  %0 = dsc.gelu_grad tanh %dy, %x : tensor<4xf32>, tensor<5xf32> -> tensor<5xf32>
  return
}

// -----

func.func @softmax_grad(%dy: tensor<4xf32>, %y: tensor<5xf32>) {
  // expected-error @+1 {{'dsc.softmax_grad' op gradient has shape [4], expected [5]}}
  %0 = dsc.softmax_grad %dy, %y : (tensor<4xf32>, tensor<5xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @all_reduce_op(%x: tensor<4xf32>) {
  // expected-error @+2 {{expected ::mlir::dsc::ReduceKind to be one of: sum, mean, max}}
  // expected-error @+1 {{failed to parse Dsc_ReduceKindAttr parameter 'value'}}
  %0 = dsc.all_reduce %x {op = #dsc<reduce min>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @global_norm_empty() {
  // expected-error @+1 {{'dsc.global_norm' op expects at least one input}}
  %0 = dsc.global_norm : () -> tensor<f32>
  return
}

// -----

func.func @clip(%n: tensor<f32>) {
  // expected-error @+1 {{'dsc.clip_coefficient' op expects max_norm > 0}}
  %0 = dsc.clip_coefficient %n {max_norm = 0.0 : f64} : (tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @lr_kind(%s: tensor<i64>) {
  // expected-error @+2 {{expected ::mlir::dsc::LrScheduleKind to be one of: constant, WarmupLR, WarmupDecayLR, WarmupCosineLR}}
  // expected-error @+1 {{failed to parse Dsc_LrScheduleKindAttr parameter 'value'}}
  %lr = dsc.lr_schedule %s {kind = #dsc<lr_schedule OneCycle>, lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = #dsc<warmup log>, warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lr_kind_string(%s: tensor<i64>) {
  // expected-error @+1 {{'dsc.lr_schedule' op attribute 'kind' failed to satisfy constraint: learning-rate scheduler, as DeepSpeed names them}}
  %lr = dsc.lr_schedule %s {kind = "WarmupLR", lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = "cubic", warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @lamb_gradient_shape(%p: tensor<4x4xf32>, %g: tensor<2x8xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.lamb' op gradient has shape [2, 8], expected [4, 4]}}
  %a:3 = dsc.lamb %p, %g, %p, %p, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-6 : f64, weight_decay = 0.0 : f64, bias_correction = true, max_coeff = 10.0 : f64, min_coeff = 0.01 : f64} : (tensor<4x4xf32>, tensor<2x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @adam_state_shape(%p: tensor<4x4xf32>, %m: tensor<4x3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam' op state #0 has shape [4, 3], expected [4, 4]}}
  %a:3 = dsc.adam %p, %p, %m, %p, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64, adamw = true, bias_correction = true} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x3xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>)
  return
}

// -----

func.func @sgd_result(%p: tensor<4x4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.sgd' op result #1 has shape [4], expected [4, 4]}}
  %a:2 = dsc.sgd %p, %p, %p, %lr, %s, %lr {momentum = 0.9 : f64, dampening = 0.0 : f64, weight_decay = 0.0 : f64, nesterov = false} : (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<4x4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @iota_rank() {
  // expected-error @+1 {{'dsc.iota' op expects a rank-1 result, got [2, 4]}}
  %0 = dsc.iota : () -> tensor<2x4xi32>
  return
}

// -----

func.func @concat_axis(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'dsc.concat' op axis 2 is out of range for [8, 3]}}
  %0 = dsc.concat %a, %a {axis = 2 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
  return
}

// -----

func.func @concat_sum(%a: tensor<4x3xf32>) {
  // expected-error @+1 {{'dsc.concat' op pieces sum to 8 along axis 0, expected 9}}
  %0 = dsc.concat %a, %a {axis = 0 : i64} : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<9x3xf32>
  return
}

// -----

func.func @split_piece(%a: tensor<8x3xf32>) {
  // expected-error @+1 {{'dsc.split' op piece has shape [4, 2], expected [4, 3]}}
  %0, %1 = dsc.split %a {axis = 0 : i64} : (tensor<8x3xf32>) -> (tensor<4x3xf32>, tensor<4x2xf32>)
  return
}

// -----

func.func @bias_split_heads_bias(%x: tensor<2x8x72xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_split_heads' op bias has shape [24], expected [72]}}
  %q, %k, %v = dsc.bias_split_heads %x, %b {num_heads = 3 : i64} : (tensor<2x8x72xf32>, tensor<24xf32>) -> (tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>, tensor<2x3x8x8xf32>)
  return
}

// -----

func.func @invertible_rstd(%x: tensor<2x8x24xf32>, %g: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.invertible_layer_norm' op failed to verify that rstd has one element per row: [...] for input [..., C]}}
  %y, %r = dsc.invertible_layer_norm %x, %g, %g {epsilon = 1.0e-5 : f64} : (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x8x24xf32>, tensor<2x24xf32>)
  return
}

// -----

func.func @grad_from_output_beta(%y: tensor<2x8x24xf32>, %g: tensor<24xf32>, %b: tensor<23xf32>, %r: tensor<2x8xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad_from_output' op failed to verify that beta has one element per feature: [C] for output [..., C]}}
  %dx, %dg, %db = dsc.layer_norm_grad_from_output %y, %y, %g, %b, %r : (tensor<2x8x24xf32>, tensor<2x8x24xf32>, tensor<24xf32>, tensor<23xf32>, tensor<2x8xf32>) -> (tensor<2x8x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @bias_gelu_bias(%h: tensor<2x24xf32>, %b: tensor<23xf32>) {
  // expected-error @+1 {{'dsc.bias_gelu' op bias has shape [23], expected [24]}}
  %a = dsc.bias_gelu tanh %h, %b : (tensor<2x24xf32>, tensor<23xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @bias_gelu_grad_dbias(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_gelu_grad' op bias gradient has shape [2], expected [24]}}
  %dh, %db = dsc.bias_gelu_grad tanh %h, %h, %b : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2xf32>)
  return
}

// -----

func.func @bias_dropout_add_residual(%h: tensor<2x24xf32>, %b: tensor<24xf32>, %r: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add' op residual has shape [3, 24], expected [2, 24]}}
  %y = dsc.bias_dropout_add %h, %b, %r {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<3x24xf32>) -> tensor<2x24xf32>
  return
}

// -----

func.func @residual_layer_norm_epsilon(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add_layer_norm' op attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %s, %y, %r = dsc.bias_dropout_add_layer_norm %h, %b, %h, %b, %b {epsilon = 0.0 : f64, rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<2xf32>)
  return
}

// -----

func.func @residual_layer_norm_rstd(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add_layer_norm' op failed to verify that rstd has one element per row: [...] for input [..., C]}}
  %s, %y, %r = dsc.bias_dropout_add_layer_norm %h, %b, %h, %b, %b {epsilon = 1.0e-5 : f64, rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @residual_layer_norm_sum(%h: tensor<2x24xf32>, %b: tensor<24xf32>) {
  // expected-error @+1 {{'dsc.bias_dropout_add_layer_norm' op failed to verify that all of {input, residual, sum, result} have same shape}}
  %s, %y, %r = dsc.bias_dropout_add_layer_norm %h, %b, %h, %b, %b {epsilon = 1.0e-5 : f64, rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x24xf32>, tensor<24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>) -> (tensor<24x2xf32>, tensor<2x24xf32>, tensor<2xf32>)
  return
}

// -----

func.func @layer_norm_grad_residual(%dy: tensor<2x24xf32>, %g: tensor<24xf32>, %d: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad' op failed to verify that residual_grad, when present, has the shape of input}}
  %0:3 = dsc.layer_norm_grad %dy, %dy, %g, %d {epsilon = 1.0e-5 : f64} : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<3x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @layer_norm_grad_from_output_residual(%dy: tensor<2x24xf32>, %g: tensor<24xf32>, %r: tensor<2xf32>, %d: tensor<3x24xf32>) {
  // expected-error @+1 {{'dsc.layer_norm_grad_from_output' op failed to verify that residual_grad, when present, has the shape of output}}
  %0:3 = dsc.layer_norm_grad_from_output %dy, %dy, %g, %g, %r, %d : (tensor<2x24xf32>, tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>, tensor<2xf32>, tensor<3x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @dropout_bias_grad_rate(%dy: tensor<2x24xf32>) {
  // expected-error @+1 {{'dsc.dropout_bias_grad' op expects rate in [0, 1), got 1.500000e+00}}
  %dx, %db = dsc.dropout_bias_grad %dy {rate = 1.5 : f64, stream = 1 : i64} : (tensor<2x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @dropout_bias_grad_rate_nan(%dy: tensor<2x24xf32>) {
  // expected-error @+1 {{'dsc.dropout_bias_grad' op expects rate in [0, 1), got nan}}
  %dx, %db = dsc.dropout_bias_grad %dy {rate = 0x7FF8000000000000 : f64, stream = 1 : i64} : (tensor<2x24xf32>) -> (tensor<2x24xf32>, tensor<24xf32>)
  return
}

// -----

func.func @softmax_dropout_probs(%s: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout' op probs has shape [2, 8, 4], expected [2, 8, 8]}}
  %d, %p = dsc.softmax_dropout %s {rate = 0.1 : f64, stream = 3 : i64} : (tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x4xf32>)
  return
}

// -----

func.func @softmax_dropout_grad_shape(%g: tensor<2x8x8xf32>, %p: tensor<2x8x4xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout_grad' op gradient has shape [2, 8, 8], expected [2, 8, 4]}}
  %d = dsc.softmax_dropout_grad %g, %p, %p {rate = 0.1 : f64} : (tensor<2x8x8xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @softmax_dropout_grad_dropped(%p: tensor<2x8x4xf32>, %d: tensor<2x8x8xf32>) {
  // expected-error @+1 {{'dsc.softmax_dropout_grad' op dropped has shape [2, 8, 8], expected [2, 8, 4]}}
  %g = dsc.softmax_dropout_grad %p, %p, %d {rate = 0.1 : f64} : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x8xf32>) -> tensor<2x8x4xf32>
  return
}

// -----

func.func @attention_rank(%q: tensor<3x8x4xf32>, %k: tensor<3x8x4xf32>, %v: tensor<3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op expects q of rank 4 [B, H, T, D], got [3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<3x8x4xf32>, tensor<3x8x4xf32>, tensor<3x8x4xf32>) -> (tensor<3x8x4xf32>, tensor<3x8xf32>)
  return
}

// -----

func.func @attention_k(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x6x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op k [2, 3, 6, 4] does not match q [2, 3, 8, 4] (expected [B, KV, T, D] with KV dividing the 3 query heads)}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x6x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_v(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x2xf32>) {
  // expected-error @+1 {{'dsc.attention' op v has shape [2, 3, 8, 2], expected [2, 3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x2xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_result(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op result has shape [2, 3, 4, 4], expected [2, 3, 8, 4]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x4x4xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_lse(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op lse has shape [2, 3, 8, 4], expected [2, 3, 8]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// -----

func.func @attention_rate(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op expects rate in [0, 1), got 1}}
  %o, %l = dsc.attention %q, %k, %v {rate = 1.0 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_types(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf16>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op mixes element types 'f16' and 'bf16'}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf16>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xbf16>, tensor<2x3x8xf32>)
  return
}

// -----

func.func @attention_lse_use(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %v: tensor<2x3x8x4xf32>) {
  // expected-error @+1 {{'dsc.attention' op lse may only be read by dsc.attention_grad, not by dsc.add}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8xf32>)
  %x = dsc.add %l, %l : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> tensor<2x3x8xf32>
  return
}

// -----

func.func @attention_grad_dout(%g: tensor<2x3x8x2xf32>, %q: tensor<2x3x8x4xf32>, %l: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op gradient has shape [2, 3, 8, 2], expected [2, 3, 8, 4]}}
  %dq, %dk, %dv = dsc.attention_grad %g, %q, %q, %q, %q, %l {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x2xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// -----

func.func @attention_grad_dq(%g: tensor<2x3x8x4xf32>, %q: tensor<2x3x8x4xf32>, %l: tensor<2x3x8xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op q_grad has shape [2, 3, 8, 2], expected [2, 3, 8, 4]}}
  %dq, %dk, %dv = dsc.attention_grad %g, %q, %q, %q, %q, %l {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8x2xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// -----

func.func @attention_grad_lse(%g: tensor<2x3x8x4xf32>, %q: tensor<2x3x8x4xf32>, %l: tensor<2x3xf32>) {
  // expected-error @+1 {{'dsc.attention_grad' op lse has shape [2, 3], expected [2, 3, 8]}}
  %dq, %dk, %dv = dsc.attention_grad %g, %q, %q, %q, %q, %l {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3xf32>) -> (tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>, tensor<2x3x8x4xf32>)
  return
}

// -----

func.func @lr_warmup_type(%s: tensor<i64>) {
  // expected-error @+2 {{expected ::mlir::dsc::WarmupType to be one of: log, linear}}
  // expected-error @+1 {{failed to parse Dsc_WarmupTypeAttr parameter 'value'}}
  %lr = dsc.lr_schedule %s {kind = #dsc<lr_schedule WarmupLR>, lr = 1.0e-3 : f64, warmup_min_lr = 0.0 : f64, warmup_max_lr = 1.0e-3 : f64, warmup_num_steps = 10 : i64, total_num_steps = 0 : i64, warmup_type = #dsc<warmup cubic>, warmup_min_ratio = 0.0 : f64, cos_min_ratio = 1.0e-4 : f64} : (tensor<i64>) -> tensor<f32>
  return
}
