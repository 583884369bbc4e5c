// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw weight-decay=0.01 grad-accum=4 grad-clip=1.0 schedule=WarmupLR warmup-num-steps=10" | FileCheck %s
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=sgd momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=SGD
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=lamb weight-decay=0.01" | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %s --dsc-train-pipeline="build-train-step={optimizer=adam grad-accum=2}" | FileCheck %s --check-prefix=PIPE
// 8-bit Adam: w (64 elements, at least min-8bit-size) gets dsc.adam_8bit
// with u8 moments and one f32 scale per 256 elements; b (8) keeps f32
// state and dsc.adam. Adafactor: w's factored second moment, b's whole one.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw8bit min-8bit-size=64 weight-decay=0.01" | FileCheck %s --check-prefix=ADAM8
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adam8bit" | FileCheck %s --check-prefix=SMALL
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor" | FileCheck %s --check-prefix=ADAFACTOR
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor first-moment=true beta1=0.8 relative-step=false" | FileCheck %s --check-prefix=FIRST
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor relative-step=false warmup-init=true" 2>&1 | FileCheck %s --check-prefix=WARMUPINIT
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor decay-rate=0.5" 2>&1 | FileCheck %s --check-prefix=DECAY
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor clip-threshold=0" 2>&1 | FileCheck %s --check-prefix=CLIPT
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adam8bit min-8bit-size=-1" 2>&1 | FileCheck %s --check-prefix=MIN8
// WARMUPINIT: error: dsc-build-train-step: warmup-init requires relative-step (as transformers' Adafactor)
// DECAY: error: dsc-build-train-step: decay-rate is 0.5; it must be finite and <= 0
// CLIPT: error: dsc-build-train-step: clip-threshold is 0; it must be finite, > 0
// MIN8: error: dsc-build-train-step: min-8bit-size must be >= 0, got -1
// ADAM8-LABEL: func.func @apply_step(
// ADAM8-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "w">}
// ADAM8-SAME: %[[B:[a-z0-9]+]]: tensor<8xf32> {{{[^}]*}}#dsc.state<param, "b">}
// ADAM8-SAME: %[[MW:[a-z0-9]+]]: tensor<8x8xui8> {dsc.state = #dsc.state<exp_avg, "w">}
// ADAM8-SAME: %[[MB:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg, "b">}
// ADAM8-SAME: %[[VW:[a-z0-9]+]]: tensor<8x8xui8> {dsc.state = #dsc.state<exp_avg_sq, "w">}
// ADAM8-SAME: %[[VB:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq, "b">}
// ADAM8-SAME: %[[AM:[a-z0-9]+]]: tensor<1xf32> {dsc.state = #dsc.state<exp_avg_absmax, "w">}
// ADAM8-SAME: %[[AV:[a-z0-9]+]]: tensor<1xf32> {dsc.state = #dsc.state<exp_avg_sq_absmax, "w">}
// ADAM8-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {dsc.state = #dsc.state<step, "step">}
// ADAM8: %[[PW:[a-z_0-9]+]], %[[NMW:[a-z_0-9]+]], %[[NVW:[a-z_0-9]+]], %[[NAM:[a-z_0-9]+]], %[[NAV:[a-z_0-9]+]] = dsc.adam_8bit %[[W]], %{{.*}}, %[[MW]], %[[VW]], %[[AM]], %[[AV]], %{{.*}}, %[[STEP]], %{{.*}} {beta1 = 9.000000e-01 : f64, beta2 = {{.*}}, eps = 1.000000e-08 : f64, weight_decay = 1.000000e-02 : f64}
// Decoupled decay (bitsandbytes' AdamW8bit), none on the bias.
// ADAM8-NEXT: %[[PB:[a-z_0-9]+]], %[[NMB:[a-z_0-9]+]], %[[NVB:[a-z_0-9]+]] = dsc.adam %[[B]], %{{.*}}, %[[MB]], %[[VB]], {{.*}}adamw = true, {{.*}}bias_correction = true, {{.*}}weight_decay = 0.000000e+00
// ADAM8: return %[[PW]], %[[PB]], %[[NMW]], %[[NMB]], %[[NVW]], %[[NVB]], %[[NAM]], %[[NAV]],
// SMALL-NOT: dsc.adam_8bit
// SMALL-NOT: ui8
// ADAFACTOR-LABEL: func.func @apply_step(
// ADAFACTOR-SAME: %[[ROW:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq_row, "w">}
// ADAFACTOR-SAME: %[[COL:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq_col, "w">}
// ADAFACTOR-SAME: %[[VB:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<exp_avg_sq, "b">}
// ADAFACTOR-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {dsc.state = #dsc.state<step, "step">}
// ADAFACTOR: dsc.adafactor %{{.*}}, %{{.*}}, [%[[ROW]], %[[COL]]], %{{.*}}, %[[STEP]], %{{.*}} {{{.*}}first_moment = false, relative_step = true, scale_parameter = true, warmup_init = false{{.*}}} : tensor<8x8xf32>, tensor<8x8xf32>, [tensor<8xf32>, tensor<8xf32>]
// ADAFACTOR-NEXT: dsc.adafactor %{{.*}}, %{{.*}}, [%[[VB]]], {{.*}} : tensor<8xf32>, tensor<8xf32>, [tensor<8xf32>]
// ADAFACTOR-NOT: exp_avg"
// FIRST-LABEL: func.func @apply_step(
// FIRST-SAME: #dsc.state<exp_avg_sq_row, "w">
// FIRST-SAME: #dsc.state<exp_avg_sq_col, "w">
// FIRST-SAME: #dsc.state<exp_avg_sq, "b">
// FIRST-SAME: tensor<8x8xf32> {dsc.state = #dsc.state<exp_avg, "w">}
// FIRST-SAME: tensor<8xf32> {dsc.state = #dsc.state<exp_avg, "b">}
// FIRST: dsc.adafactor {{.*}}beta1 = 8.000000e-01 : f64{{.*}}first_moment = true, relative_step = false{{.*}}[tensor<8xf32>, tensor<8xf32>, tensor<8x8xf32>]
// With return-logits (dsc-run inspect) they are a result after the loss.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=return-logits=true" | FileCheck %s --check-prefix=LOGITS
// RUN: dsc-opt %s --dsc-train-pipeline="build-train-step={return-logits=true}" | FileCheck %s --check-prefix=LOGITS
// LOGITS-LABEL: func.func @micro_step(
// LOGITS-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<2x4x8xf32> {dsc.state = #dsc.state<output, "logits">}, tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// LOGITS: %[[LOGITS:.*]] = dsc.linear
// LOGITS: return %{{.*}}, %[[LOGITS]], %{{.*}}, %{{.*}} :
// Choices are enum options: the option parser rejects a bad one.
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adagrad" 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=schedule=OneCycle" 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=warmup-type=cosine" 2>&1 | FileCheck %s --check-prefix=BADWARMUP
// RUN: not dsc-opt %s --dsc-train-pipeline="build-train-step={optimizer=adagrad}" 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not dsc-opt %s -dsc-build-train-step 2>&1 | FileCheck %s --check-prefix=NOGRAD
// Values the training config refuses are refused here too.
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=lr=-0.1" 2>&1 | FileCheck %s --check-prefix=BADLR
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=beta2=1" 2>&1 | FileCheck %s --check-prefix=BADBETA
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=eps=0" 2>&1 | FileCheck %s --check-prefix=BADEPS
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=warmup-num-steps=-5" 2>&1 | FileCheck %s --check-prefix=BADWARMSTEPS
// BADLR: error: dsc-build-train-step: lr is -0.1; it must be finite, >= 0
// BADBETA: error: dsc-build-train-step: beta2 is 1; it must be finite, >= 0 and < 1
// BADEPS: error: dsc-build-train-step: eps is 0; it must be finite, > 0
// BADWARMSTEPS: error: dsc-build-train-step: warmup-num-steps and total-num-steps must be >= 0

// CHECK: module attributes {dsc.grad_accum = 4 : i64}
// CHECK-LABEL: func.func @forward(

// micro_step: the loss seed is 1/grad-accum and gradients are added to the
// accumulators, which are returned with the same #dsc.state (in place).
// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {dsc.param = {{.*}}, dsc.state = #dsc.state<param, "w">}
// CHECK-SAME: %[[ACCW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// CHECK-SAME: %[[ACCB:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<grad, "b">}
// CHECK-SAME: tensor<2x4xi32> {dsc.state = #dsc.state<input_ids, "input_ids">}
// CHECK-SAME: tensor<2x4xi32> {dsc.state = #dsc.state<targets, "targets">}
// The logits stay inside the step: only the loss and its gradient read
// them.
// CHECK-SAME: -> (tensor<f32> {dsc.state = #dsc.state<output, "loss">}, tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}, tensor<8xf32> {dsc.state = #dsc.state<grad, "b">})
// CHECK: %[[SEED:.*]] = dsc.fill {dsc.grad, value = 2.500000e-01 : f64} : () -> tensor<f32>
// CHECK: dsc.cross_entropy_grad %[[SEED]]
// CHECK: %[[NEWW:.*]] = dsc.add %[[ACCW]], %{{.*}} : (tensor<8x8xf32>, tensor<8x8xf32>)
// CHECK: %[[NEWB:.*]] = dsc.add %[[ACCB]], %{{.*}} : (tensor<8xf32>, tensor<8xf32>)
// CHECK: return %{{.*}}, %[[NEWW]], %[[NEWB]]

// apply_step: mean over ranks, global norm, clipping, schedule, AdamW with
// weight decay on the matrix only, accumulators reset.
// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: {dsc.state = #dsc.state<exp_avg, "w">}
// CHECK-SAME: {dsc.state = #dsc.state<exp_avg_sq, "b">}
// CHECK-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {dsc.state = #dsc.state<step, "step">}
// CHECK: %[[GW:.*]] = dsc.all_reduce %{{.*}} : (tensor<8x8xf32>)
// CHECK: %[[GB:.*]] = dsc.all_reduce %{{.*}} : (tensor<8xf32>)
// CHECK: %[[NORM:.*]] = dsc.global_norm %[[GW]], %[[GB]]
// CHECK: %[[CLIP:.*]] = dsc.clip_coefficient %[[NORM]] {max_norm = 1.000000e+00 : f64}
// CHECK: %[[LR:.*]] = dsc.lr_schedule %[[STEP]] {{{.*}}kind = #dsc<lr_schedule WarmupLR>{{.*}}warmup_num_steps = 10 : i64
// CHECK: dsc.adam %{{.*}}, %[[GW]], %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]], %[[CLIP]] {adamw = true, {{.*}}weight_decay = 1.000000e-02 : f64}
// CHECK: dsc.adam %{{.*}}, %[[GB]], %{{.*}}, %{{.*}}, %[[LR]], %[[STEP]], %[[CLIP]] {adamw = true, {{.*}}weight_decay = 0.000000e+00 : f64}
// CHECK: dsc.fill {value = 0.000000e+00 : f64} : () -> tensor<8x8xf32>
// CHECK-LABEL: func.func @eval_step(
// CHECK-NOT: dsc.dropout
// CHECK: return

// SGD-LABEL: func.func @apply_step(
// SGD-SAME: {dsc.state = #dsc.state<momentum, "w">}
// SGD: %[[ONE:.*]] = dsc.fill {value = 1.000000e+00 : f64} : () -> tensor<f32>
// SGD: kind = #dsc<lr_schedule constant>
// SGD: dsc.sgd {{.*}}, %[[ONE]] {dampening = 0.000000e+00 : f64, momentum = 9.000000e-01 : f64, nesterov = true, weight_decay = 0.000000e+00 : f64}

// LAMB-LABEL: func.func @apply_step(
// LAMB: dsc.lamb {{.*}} {beta1 = 9.000000e-01 : f64, {{.*}}max_coeff = 1.000000e+01 : f64, min_coeff = 1.000000e-02 : f64, weight_decay = 1.000000e-02 : f64}
// LAMB: dsc.lamb {{.*}}weight_decay = 0.000000e+00 : f64}

// PIPE: dsc.grad_accum = 2
// PIPE: dsc.fill {dsc.grad, value = 5.000000e-01 : f64} : () -> tensor<f32>
// PIPE: dsc.adam {{.*}}adamw = false

// BADOPT: for the --optimizer option: Cannot find option named 'adagrad'!
// BADSCHED: for the --schedule option: Cannot find option named 'OneCycle'!
// BADWARMUP: for the --warmup-type option: Cannot find option named 'cosine'!
// NOGRAD: error: dsc-build-train-step: no @forward_grad; run -dsc-autodiff first

func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %e {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %d, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
