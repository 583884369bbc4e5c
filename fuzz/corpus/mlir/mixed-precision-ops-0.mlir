// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// Round trip of the mixed-precision ops (verifier errors:
// mixed-precision-invalid.mlir).

func.func @ops(%x: tensor<4x8xf32>, %st: tensor<3xf32>, %g: tensor<8xf32>,
               %n: tensor<f32>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>) {
  %h = dsc.convert %x : (tensor<4x8xf32>) -> tensor<4x8xf16>
  %b16 = dsc.convert %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  // An op mixes f32 with one 16-bit format; it computes in f32.
  %s16 = dsc.add %b16, %g : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  %b = dsc.convert %s16 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %o = dsc.check_finite %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<f32>
  %s = dsc.loss_scale %st {initial_scale = 65536.0 : f64, multiplier = 0.5 : f64} : (tensor<3xf32>) -> tensor<f32>
  %gs, %norm = dsc.unscale_clip %n, %s {max_norm = 1.0 : f64} : (tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 2 : i64, initial_scale = 65536.0 : f64, min_scale = 1.0 : f64, scale_window = 1000 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %h, %b, %gs, %next : tensor<4x8xf16>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>
}

