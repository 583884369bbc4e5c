// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=grad-accum=4 grad-clip=1.0 fp16=true hysteresis=3 loss-scale-window=50 min-loss-scale=2 initial-scale-power=12" -dsc-mixed-precision | FileCheck %s
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=fp16=true loss-scale=128" "-dsc-mixed-precision=dtype=bf16" | FileCheck %s --check-prefix=STATIC
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step | FileCheck %s --check-prefix=FP32
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-mixed-precision=dtype=f8" 2>&1 | FileCheck %s --check-prefix=BADTYPE
// RUN: not dsc-opt %s -dsc-mixed-precision 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=fp16=true hysteresis=0" 2>&1 | FileCheck %s --check-prefix=BADOPT
// NaN and infinite scales passed the range checks (every step skipped at
// an infinite scale, with exit 0); so did a NaN clipping norm.
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=fp16=true loss-scale=inf" 2>&1 | FileCheck %s --check-prefix=INFSCALE
// INFSCALE: error: dsc-build-train-step: loss-scale is inf; it must be finite, >= 0
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=grad-clip=nan" 2>&1 | FileCheck %s --check-prefix=NANCLIP
// NANCLIP: error: dsc-build-train-step: grad-clip is nan; it must be finite, >= 0
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=grad-accum=9223372036854775807" 2>&1 | FileCheck %s --check-prefix=ACCUM
// ACCUM: error: dsc-build-train-step: grad-accum must be in [1, 2^31-1]

// -dsc-build-train-step fp16=true: the loss scaler state is an argument of
// both steps; the loss gradient is seeded with scale / A. -dsc-mixed-precision
// stores every activation (and activation gradient) in f16 where it is made,
// gives the GEMM weight one f16 copy; the logits, which the micro-step does
// not return, stay f16 from the LM head to the loss and its gradient;
// parameter gradients and their accumulation stay f32.
// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {dsc.param
// CHECK-SAME: %[[ACCW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// CHECK-SAME: %[[ST:[a-z0-9]+]]: tensor<3xf32> {dsc.state = #dsc.state<loss_scaler, "state">}
// CHECK-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// CHECK-NEXT: %[[WH:.*]] = dsc.convert %[[W]] : (tensor<8x8xf32>) -> tensor<8x8xf16>
// CHECK-NEXT: %[[SEED:.*]] = dsc.loss_scale %[[ST]] {dsc.grad, initial_scale = 4.096000e+03 : f64, multiplier = 2.500000e-01 : f64}
// CHECK-NEXT: %[[E:.*]] = dsc.embedding %[[W]], %{{.*}} : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[D:.*]] = dsc.dropout %[[E]] {{.*}} : (tensor<2x4x8xf16>) -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[L:.*]] = dsc.linear %[[D]], %[[WH]], %{{.*}} : (tensor<2x4x8xf16>, tensor<8x8xf16>, tensor<8xf32>) -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[LOSS:.*]] = dsc.cross_entropy %[[L]], %{{.*}} -> tensor<f32>
// CHECK-NEXT: %[[DL:.*]] = dsc.cross_entropy_grad %[[SEED]], %[[L]], {{.*}} -> tensor<2x4x8xf16>
// CHECK-NEXT: dsc.linear_grad_input %[[DL]], %[[WH]] {{.*}} -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[GW:.*]] = dsc.linear_grad_weight %[[D]], %[[DL]] {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: %[[GB:.*]] = dsc.reduce_to %[[DL]] {{.*}} -> tensor<8xf32>
// CHECK-NEXT: dsc.dropout {{.*}} -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[GE:.*]] = dsc.embedding_grad {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: %[[G:.*]] = dsc.add %[[GW]], %[[GE]] {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: %[[NEWW:.*]] = dsc.add %[[ACCW]], %[[G]] {{.*}} -> tensor<8x8xf32>
// CHECK-NEXT: %[[NEWB:.*]] = dsc.add %{{.*}}, %[[GB]] {{.*}} -> tensor<8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[NEWW]], %[[NEWB]]

// @apply_step: overflow check on the averaged gradients, unscale + clip on
// the unscaled norm, the optimizer skipped on overflow, the scaler updated.
// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {dsc.state = #dsc.state<step, "step">}, %[[AST:[a-z0-9]+]]: tensor<3xf32> {dsc.state = #dsc.state<loss_scaler, "state">}
// CHECK-SAME: tensor<3xf32> {dsc.state = #dsc.state<loss_scaler, "state">}, tensor<f32> {dsc.state = #dsc.state<output, "loss_scale">}, tensor<f32> {dsc.state = #dsc.state<output, "skipped">})
// CHECK-NOT: f16
// CHECK: %[[GN:.*]] = dsc.global_norm %[[G0:.*]], %[[G1:.*]] :
// CHECK-NEXT: %[[OV:.*]] = dsc.check_finite %[[G0]], %[[G1]] :
// CHECK-NEXT: %[[SCALE:.*]] = dsc.loss_scale %[[AST]] {initial_scale = 4.096000e+03 : f64}
// CHECK-NEXT: %[[GS:.*]], %[[NORM:.*]] = dsc.unscale_clip %[[GN]], %[[SCALE]] {max_norm = 1.000000e+00 : f64}
// CHECK: dsc.adam {{.*}}, %[[STEP]], %[[GS]], %[[OV]] {
// CHECK: dsc.adam {{.*}}, %[[STEP]], %[[GS]], %[[OV]] {
// CHECK: %[[NEXT:.*]] = dsc.update_loss_scale %[[AST]], %[[OV]] {consecutive_hysteresis = false, dynamic = true, hysteresis = 3 : i64, initial_scale = 4.096000e+03 : f64, min_scale = 2.000000e+00 : f64, scale_window = 50 : i64}
// CHECK-NEXT: return {{.*}}, %[[NORM]], %{{.*}}, %[[NEXT]], %[[SCALE]], %[[OV]] :
// CHECK-LABEL: func.func @eval_step(
// CHECK-NOT: f16

// STATIC-LABEL: func.func @micro_step(
// STATIC: dsc.convert {{.*}} -> tensor<8x8xbf16>
// STATIC: dsc.loss_scale %{{.*}} {dsc.grad, initial_scale = 1.280000e+02 : f64}
// STATIC: dsc.update_loss_scale {{.*}}dynamic = false

// FP32-NOT: loss_scale
// FP32-NOT: f16
// FP32-NOT: convert
// FP32-NOT: check_finite

// BADTYPE: for the --dtype option: Cannot find option named 'f8'!
// NOSTEP: error: dsc-mixed-precision: no @micro_step with one block; run -dsc-build-train-step first
// BADOPT: error: dsc-build-train-step: fp16 needs 0 <= initial-scale-power <= 100

func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %e {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %d, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
