// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw weight-decay=0.01 grad-accum=4 grad-clip=1.0 schedule=WarmupLR warmup-num-steps=10" | FileCheck %s
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=sgd momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=SGD
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=lamb weight-decay=0.01" | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %s --dsc-train-pipeline="optimizer=adam grad-accum=2" | FileCheck %s --check-prefix=PIPE
// Choices are enum options: the option parser rejects a bad one.
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adagrad" 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=schedule=OneCycle" 2>&1 | FileCheck %s --check-prefix=BADSCHED
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=warmup-type=cosine" 2>&1 | FileCheck %s --check-prefix=BADWARMUP
// RUN: not dsc-opt %s --dsc-train-pipeline="optimizer=adagrad" 2>&1 | FileCheck %s --check-prefix=BADOPT
// RUN: not dsc-opt %s -dsc-build-train-step 2>&1 | FileCheck %s --check-prefix=NOGRAD


// micro_step: the loss seed is 1/grad-accum and gradients are added to the
// accumulators, which are returned with the same #dsc.state (in place).

// apply_step: mean over ranks, global norm, clipping, schedule, AdamW with
// weight decay on the matrix only, accumulators reset.

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
