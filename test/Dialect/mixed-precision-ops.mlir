// RUN: dsc-opt %s | dsc-opt | FileCheck %s
// Round trip of the mixed-precision ops (verifier errors:
// mixed-precision-invalid.mlir).

// CHECK-LABEL: func.func @ops(
func.func @ops(%x: tensor<4x8xf32>, %st: tensor<3xf32>, %g: tensor<8xf32>,
               %n: tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>) {
  // CHECK: dsc.round_to_half f16 %{{.*}} : tensor<4x8xf32> -> tensor<4x8xf32>
  %h = dsc.round_to_half f16 %x : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: dsc.round_to_half bf16
  %b = dsc.round_to_half bf16 %x : tensor<4x8xf32> -> tensor<4x8xf32>
  // CHECK: dsc.check_finite
  %o = dsc.check_finite %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<f32>
  // CHECK: dsc.loss_scale %{{.*}} {initial_scale = 6.553600e+04 : f64, multiplier = 5.000000e-01 : f64}
  %s = dsc.loss_scale %st {initial_scale = 65536.0 : f64, multiplier = 0.5 : f64} : (tensor<3xf32>) -> tensor<f32>
  // CHECK: dsc.unscale_clip
  %gs, %norm = dsc.unscale_clip %n, %s {max_norm = 1.0 : f64} : (tensor<f32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
  // CHECK: dsc.update_loss_scale
  %next = dsc.update_loss_scale %st, %o {consecutive_hysteresis = false, dynamic = true, hysteresis = 2 : i64, initial_scale = 65536.0 : f64, min_scale = 1.0 : f64, scale_window = 1000 : i64} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
  return %h, %b, %gs, %next : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>, tensor<3xf32>
}

