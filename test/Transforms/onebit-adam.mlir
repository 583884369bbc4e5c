// RUN: dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false weight-decay=0.01" -dsc-onebit-adam=freeze-step=5 | FileCheck %s
// RUN: dsc-opt %s -split-input-file --dsc-train-pipeline="build-train-step={fp16=true bias-correction=false} onebit-adam={freeze-step=2}" | FileCheck %s --check-prefix=FP16
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=lamb" -dsc-onebit-adam 2>&1 | FileCheck %s --check-prefix=LAMB
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-onebit-adam 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false" -dsc-zero -dsc-onebit-adam 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not dsc-opt %s -split-input-file -dsc-onebit-adam=freeze-step=0 2>&1 | FileCheck %s --check-prefix=FREEZE
// LAMB: error: 'dsc.lamb' op dsc-onebit-adam: the compressed optimizers compress Adam's momentum; this step updates with dsc.lamb
// BIAS: error: 'dsc.adam' op dsc-onebit-adam: the warm-up must be Adam with decoupled weight decay and no bias correction
// ZERO: error: dsc-onebit-adam: @apply_step is sharded (-dsc-zero); the compressed optimizers run on whole tensors, before ZeRO
// FREEZE: error: dsc-onebit-adam: freeze-step must be >= 1 (the variance freezes after that many full steps), got 0

// Over 3 data-parallel ranks a tensor is padded to a multiple of
// 3 * lcm(3, 8) = 72 elements (DeepSpeed's rule): w (64) and b (8) both to
// 72, so each rank serves a chunk of 24 elements (3 sign bytes).

// @apply_step is the warm-up, unchanged: all-reduced gradients, Adam.
// CHECK-LABEL: module attributes {dsc.freeze_step = 5 : i64
// CHECK-LABEL: func.func @apply_step(
// CHECK: dsc.all_reduce
// CHECK: dsc.adam {{.*}}bias_correction = false

// The compression stage: local gradients, the momentum compressed both ways
// with per-rank error buffers as new state.
// CHECK-LABEL: func.func @apply_step_compressed(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "w">}
// CHECK-SAME: %[[GW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// CHECK-SAME: %[[MW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg, "w">}
// CHECK-SAME: %[[VW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg_sq, "w">}
// CHECK-SAME: %[[WE:[a-z0-9]+]]: tensor<72xf32> {dsc.per_rank, dsc.state = #dsc.state<worker_error, "w">}
// CHECK-SAME: %[[SE:[a-z0-9]+]]: tensor<24xf32> {dsc.per_rank, dsc.state = #dsc.state<server_error, "w">}
// CHECK-SAME: tensor<72xf32> {dsc.per_rank, dsc.state = #dsc.state<worker_error, "b">}
// CHECK-SAME: tensor<24xf32> {dsc.per_rank, dsc.state = #dsc.state<server_error, "b">}
// CHECK-SAME: -> ({{.*}}tensor<72xf32> {dsc.state = #dsc.state<worker_error, "w">}, tensor<24xf32> {dsc.state = #dsc.state<server_error, "w">}, tensor<72xf32> {{{[^}]*}}}, tensor<24xf32> {{{[^}]*}}})
// CHECK-NOT: dsc.all_reduce
// CHECK: dsc.global_norm %[[GW]],
// CHECK: %[[M:.*]] = dsc.ema_update %[[MW]], %[[GW]], %{{.*}} {beta = 9.000000e-01 : f64}
// CHECK: %[[S:[a-z0-9_]+]], %[[K:[a-z0-9_]+]], %[[NWE:[a-z0-9_]+]] = dsc.onebit_compress %[[M]], %[[WE]] : (tensor<8x8xf32>, tensor<72xf32>) -> (tensor<9xui8>, tensor<1xf32>, tensor<72xf32>)
// CHECK: %[[X:.*]] = dsc.all_to_all %[[S]] : (tensor<9xui8>) -> tensor<9xui8>
// CHECK: %[[KS:.*]] = dsc.all_gather %[[K]] : (tensor<1xf32>) -> tensor<3xf32>
// CHECK: %[[MEAN:.*]] = dsc.onebit_decode_mean %[[X]], %[[KS]] : (tensor<9xui8>, tensor<3xf32>) -> tensor<24xf32>
// CHECK: %[[SS:[a-z0-9_]+]], %[[SK:[a-z0-9_]+]], %[[NSE:[a-z0-9_]+]] = dsc.onebit_compress %[[MEAN]], %[[SE]] : (tensor<24xf32>, tensor<24xf32>) -> (tensor<3xui8>, tensor<1xf32>, tensor<24xf32>)
// CHECK: %[[ALLS:.*]] = dsc.all_gather %[[SS]] : (tensor<3xui8>) -> tensor<9xui8>
// CHECK: %[[ALLK:.*]] = dsc.all_gather %[[SK]] : (tensor<1xf32>) -> tensor<3xf32>
// CHECK: %[[DEC:.*]] = dsc.onebit_decode %[[ALLS]], %[[ALLK]] : (tensor<9xui8>, tensor<3xf32>) -> tensor<72xf32>
// CHECK: %[[AVG:.*]] = dsc.flat_resize %[[DEC]] : (tensor<72xf32>) -> tensor<8x8xf32>
// CHECK: %[[NW:[a-z0-9_]+]], %[[NM:[a-z0-9_]+]] = dsc.frozen_adam %[[W]], %[[MW]], %[[AVG]], %[[VW]], %{{.*}} {eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
// CHECK: dsc.frozen_adam {{.*}}weight_decay = 0.000000e+00
// The variance is returned unchanged (frozen).
// CHECK: return %[[NW]], %{{.*}}, %[[NM]], %{{.*}}, %[[VW]], {{.*}}, %[[NWE]], %[[NSE]], %{{.*}}, %{{.*}} :

// fp16: the overflow verdict of the local gradients is all-reduced (max),
// and skips the errors' update along with the step.
// FP16-LABEL: func.func @apply_step_compressed(
// FP16: %[[LOCAL:.*]] = dsc.check_finite
// FP16: %[[ANY:.*]] = dsc.all_reduce %[[LOCAL]] {op = #dsc<reduce max>}
// FP16: dsc.ema_update {{.*}}, %[[ANY]] {beta
// FP16: dsc.onebit_compress {{.*}}, %[[ANY]] :
// FP16: dsc.onebit_compress {{.*}}, %[[ANY]] :
// FP16: dsc.frozen_adam {{.*}}, %[[ANY]] {eps

module attributes {dsc.mesh = #dsc.mesh<data = 3, tensor = 1, pipeline = 1>} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}

// -----

// One rank: nothing to send, so no compression (as DeepSpeed); the
// compression stage is Adam with a frozen variance on the local momentum.
// CHECK-LABEL: func.func @apply_step_compressed(
// CHECK-NOT: dsc.onebit_compress
// CHECK-NOT: dsc.per_rank
// CHECK: %[[M1:.*]] = dsc.ema_update
// CHECK-NEXT: dsc.frozen_adam %{{.*}}, %{{.*}}, %[[M1]],

module {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %e, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %e : tensor<f32>, tensor<2x4x8xf32>
}
}
