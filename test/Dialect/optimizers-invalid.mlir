// RUN: dsc-opt %s -split-input-file -verify-diagnostics
// The verifiers of dsc.adam_8bit and dsc.adafactor, whose states are not
// all shaped like the parameter, and the interface's rule for their results.

func.func @adam_8bit_state_shape(%p: tensor<20x16xf32>, %m: tensor<16x20xui8>, %v: tensor<20x16xui8>, %a: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam_8bit' op exp_avg has shape [16, 20], expected [20, 16]}}
  %r:5 = dsc.adam_8bit %p, %p, %m, %v, %a, %a, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<16x20xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<16x20xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @adam_8bit_sq_shape(%p: tensor<20x16xf32>, %m: tensor<20x16xui8>, %v: tensor<320xui8>, %a: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam_8bit' op exp_avg_sq has shape [320], expected [20, 16]}}
  %r:5 = dsc.adam_8bit %p, %p, %m, %v, %a, %a, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<320xui8>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<320xui8>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

// 320 elements are 2 blocks of 256.
func.func @adam_8bit_scales(%p: tensor<20x16xf32>, %m: tensor<20x16xui8>, %a: tensor<1xf32>, %b: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam_8bit' op exp_avg_absmax has 1 scales, expected one per block of 256 elements: 2}}
  %r:5 = dsc.adam_8bit %p, %p, %m, %m, %a, %b, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<1xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<1xf32>, tensor<2xf32>)
  return
}

// -----

func.func @adam_8bit_sq_scales(%p: tensor<20x16xf32>, %m: tensor<20x16xui8>, %a: tensor<2xf32>, %b: tensor<3xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam_8bit' op exp_avg_sq_absmax has 3 scales, expected one per block of 256 elements: 2}}
  %r:5 = dsc.adam_8bit %p, %p, %m, %m, %a, %b, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 0.999 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<3xf32>)
  return
}

// -----

func.func @adam_8bit_betas(%p: tensor<20x16xf32>, %m: tensor<20x16xui8>, %a: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adam_8bit' op expects beta1 and beta2 in [0, 1)}}
  %r:5 = dsc.adam_8bit %p, %p, %m, %m, %a, %a, %lr, %s, %lr {beta1 = 0.9 : f64, beta2 = 1.0 : f64, eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<20x16xf32>, tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>, tensor<f32>) -> (tensor<20x16xf32>, tensor<20x16xui8>, tensor<20x16xui8>, tensor<2xf32>, tensor<2xf32>)
  return
}

// -----

func.func @adafactor_grad(%w: tensor<8x4xf32>, %g: tensor<4x8xf32>, %row: tensor<8xf32>, %col: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op gradient has shape [4, 8], expected [8, 4]}}
  %p, %st:2 = dsc.adafactor %w, %g, [%row, %col], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<8x4xf32>, tensor<4x8xf32>, [tensor<8xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>]
  return
}

// -----

func.func @adafactor_state_count(%w: tensor<8x4xf32>, %row: tensor<8xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op expects 2 state tensors for a rank-2 parameter without first_moment, got 1}}
  %p, %st = dsc.adafactor %w, %w, [%row], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<8xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<8xf32>]
  return
}

// -----

func.func @adafactor_row(%w: tensor<8x4xf32>, %row: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op exp_avg_sq_row has shape [4], expected [8]}}
  %p, %st:2 = dsc.adafactor %w, %w, [%row, %row], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<4xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<4xf32>, tensor<4xf32>]
  return
}

// -----

func.func @adafactor_col(%w: tensor<2x8x4xf32>, %row: tensor<2x8xf32>, %col: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op exp_avg_sq_col has shape [4], expected [2, 4]}}
  %p, %st:2 = dsc.adafactor %w, %w, [%row, %col], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<2x8x4xf32>, tensor<2x8x4xf32>, [tensor<2x8xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<2x8x4xf32>, [tensor<2x8xf32>, tensor<4xf32>]
  return
}

// -----

func.func @adafactor_vector(%b: tensor<4xf32>, %v: tensor<1xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op exp_avg_sq has shape [1], expected [4]}}
  %p, %st = dsc.adafactor %b, %b, [%v], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<4xf32>, tensor<4xf32>, [tensor<1xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<4xf32>, [tensor<1xf32>]
  return
}

// -----

func.func @adafactor_first_moment(%b: tensor<4xf32>, %m: tensor<2xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op exp_avg has shape [2], expected [4]}}
  %p, %st:2 = dsc.adafactor %b, %b, [%b, %m], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = true, beta1 = 0.9 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<4xf32>, tensor<4xf32>, [tensor<4xf32>, tensor<2xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<4xf32>, [tensor<4xf32>, tensor<2xf32>]
  return
}

// -----

func.func @adafactor_warmup_init(%b: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op warmup_init requires relative_step}}
  %p, %st = dsc.adafactor %b, %b, [%b], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = false, warmup_init = true} : tensor<4xf32>, tensor<4xf32>, [tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<4xf32>, [tensor<4xf32>]
  return
}

// -----

func.func @adafactor_decay_rate(%b: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op expects eps1, eps2 >= 0, clip_threshold > 0 and decay_rate <= 0}}
  %p, %st = dsc.adafactor %b, %b, [%b], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = 0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<4xf32>, tensor<4xf32>, [tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<4xf32>, [tensor<4xf32>]
  return
}

// -----

func.func @adafactor_state_result(%w: tensor<8x4xf32>, %row: tensor<8xf32>, %col: tensor<4xf32>, %lr: tensor<f32>, %s: tensor<i64>) {
  // expected-error @+1 {{'dsc.adafactor' op result #2 is 'tensor<8xf32>', expected the type of state #1, 'tensor<4xf32>'}}
  %p, %st:2 = dsc.adafactor %w, %w, [%row, %col], %lr, %s, %lr {eps1 = 1.0e-30 : f64, eps2 = 1.0e-3 : f64, clip_threshold = 1.0 : f64, decay_rate = -0.8 : f64, first_moment = false, beta1 = 0.0 : f64, weight_decay = 0.0 : f64, scale_parameter = true, relative_step = true, warmup_init = false} : tensor<8x4xf32>, tensor<8x4xf32>, [tensor<8xf32>, tensor<4xf32>], tensor<f32>, tensor<i64>, tensor<f32> -> tensor<8x4xf32>, [tensor<8xf32>, tensor<8xf32>]
  return
}
