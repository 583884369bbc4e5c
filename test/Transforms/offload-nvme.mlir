// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=1 -dsc-offload-optimizer -dsc-offload-nvme | FileCheck %s
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=1 -dsc-offload-optimizer -dsc-offload-nvme -dsc-memory-report -o /dev/null | FileCheck %s --check-prefix=MEMORY
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=3 "-dsc-offload-optimizer=params=true" "-dsc-offload-nvme=params=true" | FileCheck %s --check-prefix=PARAMS
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=3 -dsc-offload-optimizer "-dsc-offload-nvme=params=true" 2>&1 | FileCheck %s --check-prefix=NOPARAMS
// NOPARAMS: error: dsc-offload-nvme: params, but the parameter shards are not offloaded; run -dsc-offload-optimizer params
// Every parameter under stage 3's persistence threshold stays whole on the
// device: no shard is in host memory, so params swaps none (the optimizer
// state still goes to the swap file).
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 persistence-threshold=1000" "-dsc-offload-optimizer=params=true" "-dsc-offload-nvme=params=true" | FileCheck %s --check-prefix=PERSIST
// PERSIST-LABEL: func.func @micro_step(
// PERSIST-NOT: dsc.swap_in
// PERSIST-LABEL: func.func @apply_step(
// PERSIST: dsc.swap_in
// PERSIST: dsc.adam
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-offload-nvme 2>&1 | FileCheck %s --check-prefix=NOTOFFLOADED
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-offload-optimizer -dsc-offload-nvme -dsc-offload-nvme 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: sed 's/, dsc.nvme_path = "swap"//' %s | not dsc-opt -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-offload-optimizer -dsc-offload-nvme 2>&1 | FileCheck %s --check-prefix=NOPATH
// NOTOFFLOADED: error: dsc-offload-nvme: the step's optimizer is not offloaded; run -dsc-offload-optimizer first
// TWICE: error: dsc-offload-nvme: the step is offloaded to NVMe already; run -dsc-offload-nvme once
// NOPATH: error: dsc-offload-nvme: the module has no dsc.nvme_path (the directory of the swap file)

// The host updates' state (exp_avg, exp_avg_sq, master weights) moves to
// the swap file (dsc.nvme on the arguments and results): each update reads
// it through dsc.swap_in, issued before the previous update (the first two
// updates' at the function's start, ahead of the gradients' reductions and
// copies, which their reads overlap), and returns it through dsc.swap_out,
// in the update's transfer group ("h.1.w": group 2; "lm.b", outside
// layers: group 0).
// CHECK-LABEL: func.func @apply_step(
// CHECK-SAME: %[[MW:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.nvme, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg, "h.1.w">}
// CHECK-SAME: %[[MASTER:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.nvme, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<master, "h.1.w">}
// CHECK-SAME: -> (
// CHECK-SAME: tensor<22xf32> {dsc.host, dsc.nvme, dsc.state = #dsc.state<exp_avg, "h.1.w">}
// CHECK: %[[IM:.*]] = dsc.swap_in %[[MASTER]] {dsc.host, group = 2 : i64}
// CHECK: %[[IMW:.*]] = dsc.swap_in %[[MW]] {dsc.host, group = 2 : i64}
// CHECK: dsc.swap_in {{.*}} {dsc.host, group = 2 : i64}
// CHECK: dsc.swap_in {{.*}} {dsc.host}
// CHECK: dsc.swap_in {{.*}} {dsc.host}
// CHECK: dsc.swap_in {{.*}} {dsc.host}
// CHECK: dsc.reduce_scatter
// CHECK: %[[NP:[a-z0-9_]+]], %[[NMW:[a-z0-9_]+]], %{{.*}} = dsc.adam %[[IM]], %{{.*}}, %[[IMW]],
// CHECK: %[[OUT:.*]] = dsc.swap_out %[[NP]] {dsc.host, group = 2 : i64}
// CHECK: dsc.swap_out
// CHECK: dsc.swap_out %[[NMW]] {dsc.host, group = 2 : i64}
// CHECK: dsc.to_device %[[NP]] {group = 2 : i64}
// CHECK: dsc.adam
// CHECK: return {{.*}}, %[[OUT]],

// With params (stage 3's offload_param device nvme) the parameter shards
// are in the swap file in every function: each dsc.to_device copy before a
// gather reads a dsc.swap_in, issued before the copy before it.
// PARAMS-LABEL: func.func @micro_step(
// PARAMS-SAME: %[[W:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.nvme, dsc.param
// PARAMS-SAME: %[[B:[a-z0-9]+]]: tensor<3xf32> {dsc.host, dsc.nvme, dsc.param
// PARAMS: %[[IW:.*]] = dsc.swap_in %[[W]] {dsc.host, group = 2 : i64}
// PARAMS-NEXT: %[[IB:.*]] = dsc.swap_in %[[B]] {dsc.host}
// PARAMS-NEXT: dsc.to_device %[[IW]] {group = 2 : i64}
// PARAMS: %[[IW2:.*]] = dsc.swap_in %[[W]] {dsc.host, group = 2 : i64}
// PARAMS-NEXT: dsc.to_device %[[IB]]
// PARAMS: dsc.to_device %[[IW2]] {group = 2 : i64}
// PARAMS-LABEL: func.func @apply_step(
// PARAMS: dsc.swap_in
// PARAMS: dsc.adam
// PARAMS: dsc.swap_out

// The memory plan: the state and master weights are in the swap file,
// each at a 4096-byte boundary; the host arena holds the read copies.
// MEMORY: host arena (ZeRO-Offload, outside the peak above):
// MEMORY-NEXT: master weights (fp32){{ +}}0
// MEMORY-NEXT: optimizer state{{ +}}0
// MEMORY: NVMe swap file (ZeRO-Infinity, outside both arenas):
// MEMORY-NEXT: master weights (fp32){{ +}}100
// MEMORY-NEXT: optimizer state{{ +}}200
// MEMORY-NEXT: swap file{{ +}}24576
module attributes {dsc.mesh = #dsc.mesh<data = 3, tensor = 1, pipeline = 1>, dsc.nvme_path = "swap"} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"h.1.w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"lm.b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
