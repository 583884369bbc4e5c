// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// Round trip of the mixed-precision ops (verifier errors:
// mixed-precision-invalid.mlir).

// CHECK-LABEL: func.func @ops(
func.func @ops(%x: tensor<4x8xf32>, %st: tensor<3xf32>, %g: tensor<8xf32>,
               %n: tensor<f32>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>) {
  // CHECK: dsc.convert %{{.*}} : (tensor<4x8xf32>) -> tensor<4x8xf16>
  %h = dsc.convert %x : (tensor<4x8xf32>) -> tensor<4x8xf16>
  // CHECK: dsc.convert %{{.*}} : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  %b16 = dsc.convert %x : (tensor<4x8xf32>) -> tensor<4x8xbf16>
  // An op mixes f32 with one 16-bit format; it computes in f32.
  // CHECK: dsc.add %{{.*}} : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  %s16 = dsc.add %b16, %g : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xbf16>
  // CHECK: dsc.convert %{{.*}} : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  %b = dsc.convert %s16 : (tensor<4x8xbf16>) -> tensor<4x8xf32>
  // CHECK: dsc.check_finite
  %o = dsc.check_finite %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<f32>
  // CHECK: dsc.loss_scale %{{.*}} {initial_scale = 6.553600e+04 : f64, multiplier = 5.000000e-01 : f64}
  %s = dsc.loss_scale %st {initial_scale = 65536.0 : f64, multiplier = 0.5 : f64} : (tensor<3xf32>) -> tensor<f32>
  // CHECK: dsc.unscale_clip
  %gs, %norm = dsc.unscale_clip %n, %s {max_norm = 1.0 : f64} : (tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  // CHECK: dsc.update_loss_scale
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 2 : i64, initial_scale = 65536.0 : f64, min_scale = 1.0 : f64, scale_window = 1000 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %h, %b, %gs, %next : tensor<4x8xf16>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>
}

