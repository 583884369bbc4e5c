// RUN: dsc-opt %s -split-input-file -verify-diagnostics

// The 1-bit compression ops' verifiers.

func.func @compress_error_too_small(%x: tensor<4x5xf32>, %e: tensor<16xf32>) {
  // expected-error @+1 {{error has 16 elements; it must be a multiple of 8 and at least the input's 20}}
  %s, %k, %n = dsc.onebit_compress %x, %e : (tensor<4x5xf32>, tensor<16xf32>) -> (tensor<2xui8>, tensor<1xf32>, tensor<16xf32>)
  return
}

// -----

func.func @compress_error_not_bytes(%x: tensor<20xf32>, %e: tensor<20xf32>) {
  // expected-error @+1 {{error has 20 elements; it must be a multiple of 8}}
  %s, %k, %n = dsc.onebit_compress %x, %e : (tensor<20xf32>, tensor<20xf32>) -> (tensor<2xui8>, tensor<1xf32>, tensor<20xf32>)
  return
}

// -----

func.func @compress_signs(%x: tensor<20xf32>, %e: tensor<24xf32>) {
  // expected-error @+1 {{signs has shape [4], expected [3]}}
  %s, %k, %n = dsc.onebit_compress %x, %e : (tensor<20xf32>, tensor<24xf32>) -> (tensor<4xui8>, tensor<1xf32>, tensor<24xf32>)
  return
}

// -----

func.func @compress_scale(%x: tensor<20xf32>, %e: tensor<24xf32>) {
  // expected-error @+1 {{scale has shape [2], expected [1]}}
  %s, %k, %n = dsc.onebit_compress %x, %e : (tensor<20xf32>, tensor<24xf32>) -> (tensor<3xui8>, tensor<2xf32>, tensor<24xf32>)
  return
}

// -----

func.func @compress_signed_bytes(%x: tensor<20xf32>, %e: tensor<24xf32>) {
  // expected-error @+1 {{result #0 must be 1D tensor of 8-bit unsigned integer values}}
  %s, %k, %n = dsc.onebit_compress %x, %e : (tensor<20xf32>, tensor<24xf32>) -> (tensor<3xi8>, tensor<1xf32>, tensor<24xf32>)
  return
}

// -----

func.func @decode_chunks(%s: tensor<10xui8>, %k: tensor<4xf32>) {
  // expected-error @+1 {{signs of 10 bytes do not split into 4 chunks (one per scale)}}
  %r = dsc.onebit_decode %s, %k : (tensor<10xui8>, tensor<4xf32>) -> tensor<80xf32>
  return
}

// -----

func.func @decode_result(%s: tensor<12xui8>, %k: tensor<4xf32>) {
  // expected-error @+1 {{result has shape [24], expected [96]}}
  %r = dsc.onebit_decode %s, %k : (tensor<12xui8>, tensor<4xf32>) -> tensor<24xf32>
  return
}

// -----

func.func @decode_mean_result(%s: tensor<12xui8>, %k: tensor<4xf32>) {
  // expected-error @+1 {{result has shape [96], expected [24]}}
  %r = dsc.onebit_decode_mean %s, %k : (tensor<12xui8>, tensor<4xf32>) -> tensor<96xf32>
  return
}

// -----

func.func @ema_beta(%m: tensor<4xf32>, %g: tensor<4xf32>, %c: tensor<f32>) {
  // expected-error @+1 {{expects beta in [0, 1), got 1}}
  %r = dsc.ema_update %m, %g, %c {beta = 1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @ema_shape(%m: tensor<4xf32>, %g: tensor<5xf32>, %c: tensor<f32>) {
  // expected-error @+1 {{grad has shape [5], expected [4]}}
  %r = dsc.ema_update %m, %g, %c {beta = 0.9 : f64} : (tensor<4xf32>, tensor<5xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

func.func @frozen_shape(%p: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<3xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{exp_avg_sq has shape [3], expected [4]}}
  %np, %nm = dsc.frozen_adam %p, %m, %m, %v, %lr {eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @frozen_eps(%p: tensor<4xf32>, %m: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{expects eps > 0 and weight_decay >= 0}}
  %np, %nm = dsc.frozen_adam %p, %m, %m, %m, %lr {eps = 0.0 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// 0/1 Adam's ops: every tensor the parameter's shape, eps > 0,
// weight_decay >= 0.

func.func @local_adam_shape(%p: tensor<4xf32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %u: tensor<5xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{every tensor has shape [5], expected [4]}}
  %a, %b, %c = dsc.local_adam %p, %m, %m, %v, %u, %lr {eps = 1.0e-8 : f64, weight_decay = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<5xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @local_adam_decay(%p: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{expects weight_decay >= 0}}
  %a, %b, %c = dsc.local_adam %p, %p, %p, %p, %p, %lr {eps = 1.0e-8 : f64, weight_decay = -1.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @unwind_eps(%p: tensor<4xf32>) {
  // expected-error @+1 {{expects eps > 0, got 0}}
  %a, %b = dsc.zero_one_unwind %p, %p, %p {eps = 0.0 : f64} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @sync_shape(%p: tensor<4xf32>, %w: tensor<2x2xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{every tensor has shape [2, 2], expected [4]}}
  %a, %b = dsc.zero_one_sync %p, %w, %p, %s {eps = 1.0e-8 : f64} : (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// 1-bit LAMB's ops.
func.func @lamb_coeff_ema_beta(%p: tensor<4xf32>, %c: tensor<f32>) {
  // expected-error @+1 {{expects coeff_beta in [0, 1), got 1}}
  %r = dsc.lamb_coeff_ema %p, %p, %p, %c {eps = 1.0e-8, weight_decay = 0.0, max_coeff = 10.0, min_coeff = 0.01, coeff_beta = 1.0} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @lamb_coeff_ema_shape(%p: tensor<4xf32>, %m: tensor<5xf32>, %c: tensor<f32>) {
  // expected-error @+1 {{every tensor has shape [5], expected [4]}}
  %r = dsc.lamb_coeff_ema %p, %m, %p, %c {eps = 1.0e-8, weight_decay = 0.0, max_coeff = 10.0, min_coeff = 0.01, coeff_beta = 0.9} : (tensor<4xf32>, tensor<5xf32>, tensor<4xf32>, tensor<f32>) -> tensor<f32>
  return
}

// -----

func.func @momentum_scales_count(%m: tensor<4xf32>) {
  // expected-error @+1 {{expects one scale per momentum, at least one, got 1 momenta and 2 scales}}
  %s:2 = dsc.momentum_scales %m : (tensor<4xf32>) -> (tensor<f32>, tensor<f32>)
  return
}

// -----

func.func @onebit_lamb_update_factors(%p: tensor<4xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{expects factor_min <= factor_max}}
  %a:4 = dsc.onebit_lamb_update %p, %p, %p, %p, %p, %s, %s, %s, %s {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0, factor_max = 1.0, factor_min = 2.0, factor_threshold = 0.1} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>)
  return
}

// -----

func.func @onebit_lamb_update_shape(%p: tensor<4xf32>, %q: tensor<3xf32>, %s: tensor<f32>) {
  // expected-error @+1 {{every tensor has shape [3], expected [4]}}
  %a:4 = dsc.onebit_lamb_update %p, %p, %p, %p, %q, %s, %s, %s, %s {beta1 = 0.9, beta2 = 0.999, eps = 1.0e-8, weight_decay = 0.0, factor_max = 4.0, factor_min = 0.5, factor_threshold = 0.1} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<3xf32>, tensor<f32>)
  return
}
