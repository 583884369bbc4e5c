// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=lamb bias-correction=false weight-decay=0.01" "-dsc-onebit-lamb=freeze-step=4 coeff-beta=0.5 factor-max=3.0" | FileCheck %s
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false" -dsc-onebit-lamb 2>&1 | FileCheck %s --check-prefix=ADAM
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=lamb" -dsc-onebit-lamb 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: not dsc-opt %s -dsc-onebit-lamb 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not dsc-opt %s "-dsc-onebit-lamb=factor-min=2.0 factor-max=1.0" 2>&1 | FileCheck %s --check-prefix=FACTORS
// RUN: not dsc-opt %s "-dsc-onebit-lamb=freeze-step=0" 2>&1 | FileCheck %s --check-prefix=FACTORS
// RUN: not dsc-opt %s "-dsc-onebit-lamb=factor-threshold=nan" 2>&1 | FileCheck %s --check-prefix=FACTORS
// ADAM: error: 'dsc.adam' op dsc-onebit-lamb: the warm-up must be LAMB without bias correction
// BIAS: error: 'dsc.lamb' op dsc-onebit-lamb: the warm-up must be LAMB without bias correction
// NOSTEP: error: dsc-onebit-lamb: no @apply_step; run -dsc-build-train-step first
// FACTORS: error: dsc-onebit-lamb: needs freeze-step >= 1, 0 < factor-min <= factor-max

// 1-bit LAMB over 2 data-parallel ranks (w: 64 elements, b: 8, padded to
// multiples of 2 * lcm(2, 8) = 16).

// The warm-up is LAMB on all-reduced gradients, and keeps the moving
// average of each parameter's trust ratio.
// CHECK-LABEL: module attributes {dsc.freeze_step = 4 : i64
// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "w">}
// CHECK-SAME: %[[CW:[a-z0-9]+]]: tensor<f32> {dsc.state = #dsc.state<lamb_coeff_freeze, "w">}
// CHECK-SAME: tensor<f32> {dsc.state = #dsc.state<lamb_coeff_freeze, "b">}
// CHECK-SAME: tensor<f32> {dsc.state = #dsc.state<lamb_coeff_freeze, "w">}, tensor<f32> {dsc.state = #dsc.state<lamb_coeff_freeze, "b">})
// CHECK: dsc.all_reduce
// CHECK: %[[P:[a-z0-9_]+]], %[[M:[a-z0-9_]+]], %[[V:[a-z0-9_]+]] = dsc.lamb %[[W]], {{.*}}bias_correction = false
// CHECK: dsc.lamb_coeff_ema %[[W]], %[[M]], %[[V]], %[[CW]] {coeff_beta = 5.000000e-01 : f64,

// The compression stage: the local momentum, scaled, compressed both ways
// (per-rank errors), then the frozen-variance update with the factor.
// CHECK-LABEL: func.func @apply_step_compressed(
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "w">}
// CHECK-SAME: %[[GW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// CHECK-SAME: %[[MW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg, "w">}
// CHECK-SAME: %[[VW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg_sq, "w">}
// CHECK-SAME: %[[SW:[a-z0-9]+]]: tensor<f32> {dsc.state = #dsc.state<scaling_coeff, "w">}
// CHECK-SAME: %[[KW:[a-z0-9]+]]: tensor<f32> {dsc.state = #dsc.state<lamb_coeff_freeze, "w">}
// CHECK-SAME: %[[LW:[a-z0-9]+]]: tensor<f32> {dsc.state = #dsc.state<last_factor, "w">}
// CHECK-SAME: %[[FW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg_sq_fresh, "w">}
// CHECK-SAME: %[[EW:[a-z0-9]+]]: tensor<64xf32> {dsc.per_rank, dsc.state = #dsc.state<worker_error, "w">}
// CHECK-SAME: tensor<32xf32> {dsc.per_rank, dsc.state = #dsc.state<server_error, "w">}
// CHECK-NOT: dsc.all_reduce %[[GW]]
// CHECK: %[[LOCAL:.*]] = dsc.ema_update %[[MW]], %[[GW]]
// CHECK: %[[SCALED:.*]] = dsc.scale_by %[[LOCAL]], %[[SW]]
// CHECK: dsc.onebit_compress %[[SCALED]], %[[EW]]
// CHECK: dsc.all_to_all
// CHECK: %[[MEAN:.*]] = dsc.flat_resize
// CHECK: dsc.onebit_lamb_update %[[W2]], %[[MEAN]], %[[MW]], %[[VW]], %[[FW]], %[[SW]], %[[KW]], %[[LW]], %{{.*}} {{{.*}}factor_max = 3.000000e+00 : f64, factor_min = 5.000000e-01 : f64, factor_threshold = 1.000000e-01 : f64

// Run once at the switch: the momentum scales, the fresh variance (the
// frozen one) and the factors' start.
// CHECK-LABEL: func.func @onebit_lamb_freeze(
// CHECK-SAME: %[[M1:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg, "w">}, %[[M2:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg, "b">}, %[[V1:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg_sq, "w">}, %[[V2:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq, "b">})
// CHECK-SAME: -> (tensor<f32> {dsc.state = #dsc.state<scaling_coeff, "w">}, tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg_sq_fresh, "w">}, tensor<f32> {dsc.state = #dsc.state<last_factor, "w">}
// CHECK: %[[S:.*]]:2 = dsc.momentum_scales %[[M1]], %[[M2]] : (tensor<8x8xf32>, tensor<8xf32>) -> (tensor<f32>, tensor<f32>)
// CHECK: %[[ONE:.*]] = dsc.fill {value = 1.000000e+00 : f64}
// CHECK: return %[[S]]#0, %[[V1]], %[[ONE]], %[[S]]#1, %[[V2]], %[[ONE]]

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
