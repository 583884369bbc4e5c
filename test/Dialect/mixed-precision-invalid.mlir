// RUN: dsc-opt %s -split-input-file -verify-diagnostics
// Verifier messages of the mixed-precision ops.


func.func @convert_to_itself(%x: tensor<4xf16>) -> tensor<4xf16> {
  // expected-error @+1 {{converts 'f16' to itself}}
  %h = dsc.convert %x : (tensor<4xf16>) -> tensor<4xf16>
  return %h : tensor<4xf16>
}

// -----

func.func @convert_shape(%x: tensor<4xf32>) -> tensor<2x2xbf16> {
  // expected-error @+1 {{changes the shape: 'tensor<4xf32>' -> 'tensor<2x2xbf16>'}}
  %h = dsc.convert %x : (tensor<4xf32>) -> tensor<2x2xbf16>
  return %h : tensor<2x2xbf16>
}

// -----

func.func @convert_ints(%x: tensor<4xi32>) -> tensor<4xf16> {
  // expected-error @+1 {{operand #0 must be ranked tensor of 32-bit float or 16-bit float or bfloat16 type values}}
  %h = dsc.convert %x : (tensor<4xi32>) -> tensor<4xf16>
  return %h : tensor<4xf16>
}

// -----

func.func @check_finite_empty() -> tensor<f32> {
  // expected-error @+1 {{expects at least one input}}
  %o = dsc.check_finite : () -> tensor<f32>
  return %o : tensor<f32>
}

// -----

func.func @state_shape(%st: tensor<4xf32>) -> tensor<f32> {
  // expected-error @+1 {{expects the state to be the loss scaler state tensor<3xf32>, got 'tensor<4xf32>'}}
  %s = dsc.loss_scale %st {initial_scale = 1.0 : f64} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @initial_scale(%st: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{expects initial_scale > 0, got 0.000000e+00}}
  %s = dsc.loss_scale %st {initial_scale = 0.0 : f64} : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @multiplier(%st: tensor<3xf32>) -> tensor<f32> {
  // expected-error @+1 {{expects multiplier > 0, got -1.000000e+00}}
  %s = dsc.loss_scale %st {initial_scale = 1.0 : f64, multiplier = -1.0 : f64} : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @max_norm(%n: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{expects max_norm >= 0 (0: no clipping)}}
  %gs, %norm = dsc.unscale_clip %n, %n {max_norm = -1.0 : f64} : (tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  return %gs : tensor<f32>
}

// -----

func.func @window(%st: tensor<3xf32>, %o: tensor<f32>) -> tensor<3xf32> {
  // expected-error @+1 {{expects scale_window >= 1, got 0}}
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 2 : i64, initial_scale = 1.0 : f64, min_scale = 1.0 : f64, scale_window = 0 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %next : tensor<3xf32>
}

// -----

func.func @hysteresis(%st: tensor<3xf32>, %o: tensor<f32>) -> tensor<3xf32> {
  // expected-error @+1 {{expects hysteresis >= 1, got 0}}
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 0 : i64, initial_scale = 1.0 : f64, min_scale = 1.0 : f64, scale_window = 1 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %next : tensor<3xf32>
}

// -----

func.func @min_scale(%st: tensor<3xf32>, %o: tensor<f32>) -> tensor<3xf32> {
  // expected-error @+1 {{expects min_scale > 0, got 0.000000e+00}}
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 1 : i64, initial_scale = 1.0 : f64, min_scale = 0.0 : f64, scale_window = 1 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %next : tensor<3xf32>
}

// -----

func.func @result_shape(%st: tensor<3xf32>, %o: tensor<f32>) -> tensor<2xf32> {
  // expected-error @+1 {{expects the result to be the loss scaler state tensor<3xf32>, got 'tensor<2xf32>'}}
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 1 : i64, initial_scale = 1.0 : f64, min_scale = 1.0 : f64, scale_window = 1 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<2xf32>
  return %next : tensor<2xf32>
}
