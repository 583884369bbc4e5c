// RUN: dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false weight-decay=0.01" "-dsc-zero-one-adam=var-freeze-step=5 var-update-scaler=4 local-step-scaler=8 local-step-clipper=2" | FileCheck %s
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero-one-adam 2>&1 | FileCheck %s --check-prefix=BIAS
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false" -dsc-zero-one-adam=local-step-clipper=0 2>&1 | FileCheck %s --check-prefix=OPTS
// RUN: not dsc-opt %s -split-input-file -dsc-autodiff "-dsc-build-train-step=optimizer=adamw bias-correction=false" -dsc-zero-one-adam=var-freeze-step=0 2>&1 | FileCheck %s --check-prefix=OPTS
// BIAS: error: 'dsc.adam' op dsc-zero-one-adam: the warm-up must be Adam with decoupled weight decay and no bias correction
// OPTS: error: dsc-zero-one-adam: var-freeze-step, the scalers and the clipper must be >= 1

// Over 2 data-parallel ranks. @apply_step stays the full step; the policy
// is recorded for the runtime.
// CHECK-LABEL: module attributes
// CHECK-SAME: dsc.local_step_clipper = 2 : i64, dsc.local_step_scaler = 8 : i64
// CHECK-SAME: dsc.var_freeze_step = 5 : i64, dsc.var_update_scaler = 4 : i64
// CHECK-LABEL: func.func @apply_step(
// CHECK: dsc.all_reduce
// CHECK: dsc.adam {{.*}}bias_correction = false

// 1-bit gradients: the local gradient (times the clip coefficient, by an
// ema_update with beta 0) is compressed with per-rank errors, the
// momentum takes it, the variance is frozen.
// CHECK-LABEL: func.func @apply_step_onebit(
// CHECK-SAME: %[[WE:[a-z0-9]+]]: tensor<64xf32> {dsc.per_rank, dsc.state = #dsc.state<worker_error, "w">}
// CHECK-NOT: dsc.all_reduce %arg
// CHECK: %[[G:.*]] = dsc.ema_update %[[GW:[a-z0-9]+]], %[[GW]], %{{.*}} {beta = 0.000000e+00 : f64}
// CHECK: dsc.onebit_compress %[[G]], %[[WE]]
// CHECK: %[[M:.*]] = dsc.ema_update %{{.*}}, %{{.*}}, %{{.*}} {beta = 9.000000e-01 : f64}
// CHECK: dsc.frozen_adam %{{.*}}, %{{.*}}, %[[M]], %{{.*}}, %{{.*}} {eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}

// Local steps: nothing is sent; the update also goes into the per-rank
// accumulator, and the learning rates add up.
// CHECK-LABEL: func.func @apply_step_local(
// CHECK-SAME: %[[LRS:[a-z0-9]+]]: tensor<f32> {dsc.state = #dsc.state<lr_sum, "lr_sum">}
// CHECK-SAME: %[[U:[a-z0-9]+]]: tensor<8x8xf32> {dsc.per_rank, dsc.state = #dsc.state<momentum_accumulator, "w">}
// CHECK-NOT: dsc.all_to_all
// CHECK-NOT: dsc.all_reduce %arg
// CHECK: %[[SUM:.*]] = dsc.add %[[LRS]], %[[LR:[0-9]+]]
// CHECK: dsc.local_adam %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[U]], %[[LR]]
// CHECK-NOT: dsc.all_to_all
// CHECK: return

// Synchronisation: a local step, then the accumulated update, in momentum
// units, all-reduced compressed and applied; accumulator and lr_sum start
// again from zero.
// CHECK-LABEL: func.func @apply_step_sync(
// CHECK: %[[SUM2:.*]] = dsc.add
// CHECK: %[[P:.*]], %{{.*}}, %[[ACC:.*]] = dsc.local_adam
// CHECK: %[[START:.*]], %[[SCALED:.*]] = dsc.zero_one_unwind %[[P]], %[[ACC]], %{{.*}} {eps
// CHECK: dsc.onebit_compress %[[SCALED]]
// CHECK: dsc.all_to_all
// CHECK: %[[MEAN:.*]] = dsc.flat_resize
// CHECK: dsc.zero_one_sync %[[START]], %[[MEAN]], %{{.*}}, %[[SUM2]] {eps
// CHECK: dsc.fill {value = 0.000000e+00 : f64} : () -> tensor<8x8xf32>

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 1>} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
