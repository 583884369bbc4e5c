// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-mixed-precision=dtype=bf16" | FileCheck %s

// Frozen matrices (LoRA's base) are stored in the half format in every step
// function: @micro_step's GEMM reads the bf16 argument without a copy, the
// f32 evaluation step reads it as it is; the trainable weight keeps its
// f32 master copy and gets a bf16 copy for its GEMM. The frozen norm
// vector stays f32.
// CHECK-LABEL: func.func @micro_step(
// CHECK-SAME: %[[W1:[^:]*]]: tensor<4x8xf32> {dsc.param = #dsc.param<"w1"
// CHECK-SAME: %[[W2:[^:]*]]: tensor<6x4xbf16> {dsc.frozen, dsc.param = #dsc.param<"w2"
// CHECK-SAME: tensor<4xf32> {dsc.frozen, dsc.param = #dsc.param<"g"
// CHECK: dsc.convert %[[W1]] : (tensor<4x8xf32>) -> tensor<4x8xbf16>
// CHECK-NOT: dsc.convert %[[W2]]
// CHECK: dsc.linear %{{.*}}, %[[W2]] {transpose_w = true} : (tensor<2x3x4xbf16>, tensor<6x4xbf16>) -> tensor<2x3x6xbf16>
// CHECK-LABEL: func.func @apply_step(
// CHECK-NOT: "w2"
// CHECK-LABEL: func.func @eval_step(
// CHECK-SAME: %[[E2:[^:]*]]: tensor<6x4xbf16> {dsc.frozen, dsc.param = #dsc.param<"w2"
// CHECK: dsc.linear %{{.*}}, %[[E2]] {transpose_w = true} : (tensor<2x3x4xf32>, tensor<6x4xbf16>) -> tensor<2x3x6xf32>
module {
func.func @forward(%w1: tensor<4x8xf32> {dsc.param = #dsc.param<"w1", normal, 0.02 : f64>},
                   %w2: tensor<6x4xf32> {dsc.param = #dsc.param<"w2", normal, 0.02 : f64>, dsc.frozen},
                   %g: tensor<4xf32> {dsc.param = #dsc.param<"g", ones, 0.0 : f64>, dsc.frozen},
                   %x: tensor<2x3x8xf32>, %y: tensor<2x3xi32>) -> (tensor<f32>, tensor<2x3x6xf32>) {
  %h = dsc.linear %x, %w1 {transpose_w = true} : (tensor<2x3x8xf32>, tensor<4x8xf32>) -> tensor<2x3x4xf32>
  %n = dsc.rms_norm %h, %g : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3x4xf32>
  %o = dsc.linear %n, %w2 {transpose_w = true} : (tensor<2x3x4xf32>, tensor<6x4xf32>) -> tensor<2x3x6xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x3x6xf32>, tensor<2x3xi32>) -> tensor<f32>
  return %loss, %o : tensor<f32>, tensor<2x3x6xf32>
}
}
