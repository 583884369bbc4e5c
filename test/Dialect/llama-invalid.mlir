// RUN: dsc-opt %s -split-input-file -verify-diagnostics

func.func @rotary_odd_head_dim(%x: tensor<2x4x8x15xf32>) {
  // expected-error @+1 {{'dsc.rotary' op expects [B, H, T, D] heads with an even D, got [2, 4, 8, 15]}}
  %0 = dsc.rotary %x : (tensor<2x4x8x15xf32>) -> tensor<2x4x8x15xf32>
  return
}

// -----

func.func @rotary_rank(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'dsc.rotary' op expects [B, H, T, D] heads with an even D, got [8, 16]}}
  %0 = dsc.rotary %x : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

func.func @rotary_theta(%x: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'dsc.rotary' op theta must be > 1, got 1.000000e+00}}
  %0 = dsc.rotary %x {theta = 1.0 : f64} : (tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

func.func @rotary_factor(%x: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'dsc.rotary' op factor must be >= 1, got 5.000000e-01}}
  %0 = dsc.rotary %x {scaling = #dsc<rope_scaling linear>, factor = 0.5 : f64} : (tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

func.func @rotary_llama3_bands(%x: tensor<1x1x4x8xf32>) {
  // expected-error @+1 {{'dsc.rotary' op llama3 scaling needs 0 < low_freq_factor < high_freq_factor and original_max_positions > 0}}
  %0 = dsc.rotary %x {scaling = #dsc<rope_scaling llama3>, factor = 8.0 : f64, low_freq_factor = 4.0 : f64, high_freq_factor = 1.0 : f64} : (tensor<1x1x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

func.func @rotary_result(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'dsc.rotary' op result has shape [1, 4, 4, 8], expected [1, 2, 4, 8]}}
  %0 = dsc.rotary %x : (tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @repeat_kv_groups(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'dsc.repeat_kv' op groups must be positive, got 0}}
  %0 = dsc.repeat_kv %x {groups = 0 : i64} : (tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  return
}

// -----

func.func @repeat_kv_shape(%x: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{'dsc.repeat_kv' op repeated heads has shape [1, 4, 4, 8], expected [1, 6, 4, 8]}}
  %0 = dsc.repeat_kv %x {groups = 3 : i64} : (tensor<1x2x4x8xf32>) -> tensor<1x4x4x8xf32>
  return
}

// -----

func.func @repeat_kv_grad_shape(%dy: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{'dsc.repeat_kv_grad' op repeated heads has shape [1, 4, 4, 8], expected [1, 2, 4, 8]}}
  %0 = dsc.repeat_kv_grad %dy {groups = 2 : i64} : (tensor<1x4x4x8xf32>) -> tensor<1x1x4x8xf32>
  return
}

// -----

func.func @mul_shapes(%a: tensor<2x8xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{'dsc.mul' op operand #1 has shape [2, 4], expected [2, 8]}}
  %0 = dsc.mul %a, %b : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @swiglu_result(%g: tensor<2x8xf32>, %u: tensor<2x8xf32>) {
  // expected-error @+1 {{'dsc.swiglu' op result #0 has shape [8, 2], expected [2, 8]}}
  %0 = dsc.swiglu %g, %u : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<8x2xf32>
  return
}

// -----

func.func @silu_mixed_halves(%x: tensor<4xf16>) {
  // expected-error @+1 {{'dsc.silu' op mixes element types 'f16' and 'bf16'}}
  %0 = dsc.silu %x : (tensor<4xf16>) -> tensor<4xbf16>
  return
}

// -----

func.func @attention_kv_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x3x8x16xf32>) {
  // expected-error @+1 {{'dsc.attention' op k [1, 3, 8, 16] does not match q [1, 4, 8, 16] (expected [B, KV, T, D] with KV dividing the 4 query heads)}}
  %o, %l = dsc.attention %q, %k, %k {rate = 0.0 : f64, stream = 0 : i64} : (tensor<1x4x8x16xf32>, tensor<1x3x8x16xf32>, tensor<1x3x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  return
}

// -----

func.func @attention_v_heads(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x4x8x16xf32>) {
  // expected-error @+1 {{'dsc.attention' op v has shape [1, 4, 8, 16], expected [1, 2, 8, 16]}}
  %o, %l = dsc.attention %q, %k, %v {rate = 0.0 : f64, stream = 0 : i64} : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x4x8x16xf32>) -> (tensor<1x4x8x16xf32>, tensor<1x4x8xf32>)
  return
}
