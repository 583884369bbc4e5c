// RUN: dsc-opt %s -dsc-lora="rank=2 alpha=6 target-modules=q_proj" | FileCheck %s
// RUN: dsc-opt %s -dsc-lora="rank=2 alpha=6 dropout=0.25 bias=all rslora=1 target-regex=.*_proj" | FileCheck %s --check-prefix=ALL
// RUN: dsc-opt %s -dsc-lora="rank=2 alpha=6 target-modules=q_proj" -dsc-autodiff -dsc-build-train-step | FileCheck %s --check-prefix=STEP

// q_proj gets y + (alpha / r) * B(A(x)); every other parameter is frozen.
// CHECK: module attributes {dsc.lora_alpha = 6.000000e+00 : f64, dsc.lora_bias = "none", dsc.lora_dropout = 0.000000e+00 : f64, dsc.lora_fan_in_fan_out = 0 : i64, dsc.lora_file_prefix = "base_model.model.", dsc.lora_rank = 2 : i64, dsc.lora_rslora = 0 : i64, dsc.lora_target_modules = "q_proj"}
// CHECK-LABEL: func.func @forward(
// CHECK-SAME: %[[WQ:[a-z0-9]+]]: tensor<6x8xf32> {dsc.frozen, dsc.param = #dsc.param<"layers.0.q_proj.weight"
// CHECK-SAME: %[[BQ:[a-z0-9]+]]: tensor<6xf32> {dsc.frozen, dsc.param = #dsc.param<"layers.0.q_proj.bias"
// CHECK-SAME: %[[WO:[a-z0-9]+]]: tensor<8x6xf32> {dsc.frozen, dsc.param = #dsc.param<"layers.0.o_proj.weight"
// CHECK-SAME: %[[A:[a-z0-9]+]]: tensor<2x8xf32> {dsc.param = #dsc.param<"layers.0.q_proj.lora_A.weight", uniform, 0.35355339059327373 : f64>}
// CHECK-SAME: %[[B:[a-z0-9]+]]: tensor<6x2xf32> {dsc.param = #dsc.param<"layers.0.q_proj.lora_B.weight", zeros, 0.000000e+00 : f64>}
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<2x4x8xf32>, %{{[a-z0-9]+}}: tensor<2x4xi32>)
// CHECK: %[[Y:.*]] = dsc.linear %[[X]], %[[WQ]], %[[BQ]] {dsc.layer = 0 : i64, transpose_w = true}
// CHECK-NEXT: %[[H:.*]] = dsc.linear %[[X]], %[[A]] {dsc.layer = 0 : i64, transpose_w = true} : (tensor<2x4x8xf32>, tensor<2x8xf32>) -> tensor<2x4x2xf32>
// CHECK-NEXT: %[[D:.*]] = dsc.linear %[[H]], %[[B]] {dsc.layer = 0 : i64, transpose_w = true} : (tensor<2x4x2xf32>, tensor<6x2xf32>) -> tensor<2x4x6xf32>
// CHECK-NEXT: %[[S:.*]] = dsc.scale %[[D]] {dsc.layer = 0 : i64, factor = 3.000000e+00 : f64}
// CHECK-NEXT: %[[SUM:.*]] = dsc.add %[[Y]], %[[S]]
// CHECK-NEXT: dsc.gelu tanh %[[SUM]]
// CHECK: dsc.linear %{{.*}}, %[[WO]] {dsc.layer = 0 : i64, transpose_w = true}
// CHECK-NOT: lora

// A regex target, bias "all", dropout on the adapter's input (the next
// Philox stream after the model's own), rslora's alpha / sqrt(r).
// ALL: dsc.lora_bias = "all"
// ALL-SAME: dsc.lora_target_regex = ".*_proj"
// ALL-LABEL: func.func @forward(
// ALL-SAME: tensor<6xf32> {dsc.param = #dsc.param<"layers.0.q_proj.bias"
// ALL-SAME: "layers.0.q_proj.lora_A.weight"
// ALL-SAME: "layers.0.o_proj.lora_A.weight"
// ALL: %[[XD:.*]] = dsc.dropout %{{.*}} {dsc.layer = 0 : i64, rate = 2.500000e-01 : f64, stream = 4 : i64}
// ALL-NEXT: dsc.linear %[[XD]]
// ALL: dsc.scale %{{.*}} {dsc.layer = 0 : i64, factor = 4.2426406871192848 : f64}
// ALL: dsc.dropout %{{.*}} {dsc.layer = 0 : i64, rate = 2.500000e-01 : f64, stream = 5 : i64}

// Frozen parameters get no accumulator and no optimizer state: the step's
// gradients and Adam moments are the adapter's two matrices only.
// STEP-LABEL: func.func @micro_step(
// STEP-SAME: {dsc.frozen, dsc.param = #dsc.param<"layers.0.q_proj.weight"
// STEP-NOT: #dsc.state<grad, "layers.0.q_proj.weight">
// STEP-SAME: #dsc.state<grad, "layers.0.q_proj.lora_A.weight">
// STEP-SAME: #dsc.state<grad, "layers.0.q_proj.lora_B.weight">
// STEP-NOT: dsc.linear_grad_weight {{.*}}tensor<6x8xf32>
// STEP-LABEL: func.func @apply_step(
// STEP-NOT: "layers.0.q_proj.weight"
// STEP-NOT: "layers.0.o_proj.weight"
// STEP: dsc.adam
// STEP-SAME: tensor<2x8xf32>
// STEP: dsc.adam
// STEP-SAME: tensor<6x2xf32>
// STEP-NOT: dsc.adam
// STEP-LABEL: func.func @eval_step(
// STEP-SAME: {dsc.frozen, dsc.param = #dsc.param<"layers.0.q_proj.weight"
module {
func.func @forward(%wq: tensor<6x8xf32> {dsc.param = #dsc.param<"layers.0.q_proj.weight", normal, 0.02 : f64>},
                   %bq: tensor<6xf32> {dsc.param = #dsc.param<"layers.0.q_proj.bias", zeros, 0.0 : f64>},
                   %wo: tensor<8x6xf32> {dsc.param = #dsc.param<"layers.0.o_proj.weight", normal, 0.02 : f64>},
                   %x: tensor<2x4x8xf32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %q = dsc.linear %x, %wq, %bq {transpose_w = true, dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<2x4x6xf32>
  %g = dsc.gelu tanh %q {dsc.layer = 0 : i64} : tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %gd = dsc.dropout %g {rate = 0.1 : f64, stream = 3 : i64, dsc.layer = 0 : i64} : (tensor<2x4x6xf32>) -> tensor<2x4x6xf32>
  %o = dsc.linear %gd, %wo {transpose_w = true, dsc.layer = 0 : i64} : (tensor<2x4x6xf32>, tensor<8x6xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %o, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %o : tensor<f32>, tensor<2x4x8xf32>
}
}
