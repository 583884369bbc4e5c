// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw weight-decay=0.01 grad-clip=1.0" -dsc-zero=stage=1 -dsc-offload-optimizer | FileCheck %s --check-prefix=STAGE1
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=3 -dsc-offload-optimizer | FileCheck %s --check-prefix=STAGE3
// RUN: dsc-opt %s --dsc-train-pipeline="build-train-step={fp16=true} zero={stage=2} offload-optimizer={params=false}" | FileCheck %s --check-prefix=FP16
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw weight-decay=0.01 grad-clip=1.0" -dsc-zero=stage=1 -dsc-offload-optimizer -dsc-memory-report -o /dev/null | FileCheck %s --check-prefix=MEMORY
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=3 "-dsc-offload-optimizer=params=true" | FileCheck %s --check-prefix=PARAMS
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=2 "-dsc-offload-optimizer=params=true" 2>&1 | FileCheck %s --check-prefix=PARAMS2
// PARAMS2: error: dsc-offload-optimizer: params (parameter offload) needs ZeRO stage 3; the step is sharded at stage 2
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=NOZERO
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero -dsc-offload-optimizer -dsc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not dsc-opt %s -dsc-offload-optimizer 2>&1 | FileCheck %s --check-prefix=NOSTEP
// The lowering checks every op's memory: the update without dsc.host
// would read the host master weights on the device.
// RUN: dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=1 -dsc-offload-optimizer | sed '0,/bias_correction = true, dsc.host, /s//bias_correction = true, /' | not dsc-opt -dsc-memory-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLACEMENT
// PLACEMENT: error: 'dsc.adam' op input 'master/h.1.w' is in host memory, but the instruction runs on the device
// NOZERO: error: dsc-offload-optimizer: the step is not sharded; ZeRO-Offload needs -dsc-zero (stage 1, 2 or 3) first
// TWICE: error: dsc-offload-optimizer: the step is offloaded already; run -dsc-offload-optimizer once
// NOSTEP: error: dsc-offload-optimizer: no @apply_step; run -dsc-build-train-step and -dsc-zero first

// Over 3 data ranks "h.1.w" (64 elements, layer 1: transfer group 2) is
// padded to 66, 22 per rank; "lm.b" (8, outside layers: group 0) to 9, 3
// per rank.

// Stage 1: the update reads the master shard (a new host argument), the
// host copies of the reduced gradient shard and of the scalars, and the
// optimizer state in host memory; the new master shard streams back and
// is gathered into the whole parameter on the device.
// STAGE1-LABEL: func.func @apply_step(
// STAGE1-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "h.1.w">}
// STAGE1-SAME: %[[MW:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg, "h.1.w">}
// STAGE1-SAME: %[[VW:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg_sq, "h.1.w">}
// STAGE1-SAME: %[[STEP:[a-z0-9]+]]: tensor<i64> {dsc.state = #dsc.state<step, "step">}
// STAGE1-SAME: %[[MASTER:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<master, "h.1.w">}
// STAGE1-SAME: %[[MASTERB:[a-z0-9]+]]: tensor<3xf32> {dsc.host, dsc.shard_of = array<i64: 8>, dsc.state = #dsc.state<master, "lm.b">}
// STAGE1-SAME: -> (tensor<8x8xf32> {{{[^}]*}}}, tensor<8xf32> {{{[^}]*}}}, tensor<22xf32> {dsc.host, dsc.state = #dsc.state<exp_avg, "h.1.w">}
// STAGE1-SAME: tensor<22xf32> {dsc.host, dsc.state = #dsc.state<master, "h.1.w">}, tensor<3xf32> {dsc.host, dsc.state = #dsc.state<master, "lm.b">})
// STAGE1: %[[HSTEP:.*]] = dsc.to_host %[[STEP]] {group = 2 : i64} : (tensor<i64>) -> tensor<i64>
// STAGE1: %[[G:.*]] = dsc.reduce_scatter %{{.*}} : (tensor<66xf32>) -> tensor<22xf32>
// STAGE1-NEXT: %[[HG:.*]] = dsc.to_host %[[G]] {group = 2 : i64} : (tensor<22xf32>) -> tensor<22xf32>
// STAGE1: %[[GB:.*]] = dsc.reduce_scatter %{{.*}} : (tensor<9xf32>) -> tensor<3xf32>
// STAGE1-NEXT: dsc.to_host %[[GB]] : (tensor<3xf32>) -> tensor<3xf32>
// The norm and the clipping run on the device, over the device shards.
// STAGE1: dsc.global_norm %[[G]], %[[GB]]
// STAGE1: %[[CLIP:.*]] = dsc.clip_coefficient
// STAGE1-NEXT: %[[HCLIP:.*]] = dsc.to_host %[[CLIP]] {group = 2 : i64}
// STAGE1: %[[LR:.*]] = dsc.lr_schedule
// STAGE1-NEXT: %[[HLR:.*]] = dsc.to_host %[[LR]] {group = 2 : i64}
// STAGE1-NOT: dsc.shard
// STAGE1: %[[NEW:[a-z_0-9]+]], %{{.*}}, %{{.*}} = dsc.adam %[[MASTER]], %[[HG]], %[[MW]], %[[VW]], %[[HLR]], %[[HSTEP]], %[[HCLIP]] {{{.*}}dsc.host{{.*}}}
// STAGE1-NEXT: %[[BACK:.*]] = dsc.to_device %[[NEW]] {group = 2 : i64} : (tensor<22xf32>) -> tensor<22xf32>
// STAGE1-NEXT: %[[ALL:.*]] = dsc.all_gather %[[BACK]] : (tensor<22xf32>) -> tensor<66xf32>
// STAGE1-NEXT: %[[WHOLE:.*]] = dsc.flat_resize %[[ALL]] : (tensor<66xf32>) -> tensor<8x8xf32>
// Scalars are copied once for every update.
// STAGE1: %[[NEWB:[a-z_0-9]+]], %{{.*}}, %{{.*}} = dsc.adam %[[MASTERB]], %{{.*}}, %{{.*}}, %{{.*}}, %[[HLR]], %[[HSTEP]], %[[HCLIP]]
// STAGE1-NEXT: dsc.to_device %[[NEWB]] : (tensor<3xf32>) -> tensor<3xf32>
// STAGE1: return %[[WHOLE]], {{.*}}, %[[NEW]], %[[NEWB]] :
// The parameter's shard is no longer taken on the device.
// STAGE1-NOT: dsc.shard

// Stage 3: the parameter argument is the shard itself; the new master
// shard streams back as the new parameter shard, nothing is gathered.
// STAGE3-LABEL: func.func @apply_step(
// STAGE3-SAME: tensor<22xf32> {{{[^}]*}}dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<param, "h.1.w">}
// STAGE3-SAME: %[[MASTER:[a-z0-9]+]]: tensor<22xf32> {dsc.host, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<master, "h.1.w">}
// STAGE3: %[[NEW:[a-z_0-9]+]], %{{.*}}, %{{.*}} = dsc.adam %[[MASTER]], {{.*}}dsc.host
// STAGE3-NEXT: %[[BACK:.*]] = dsc.to_device %[[NEW]] {group = 2 : i64} : (tensor<22xf32>) -> tensor<22xf32>
// STAGE3-NOT: dsc.all_gather
// STAGE3: return %[[BACK]], {{.*}}, %[[NEW]], %{{.*}} :

// params (ZeRO-3's offload_param): the parameter shards are host
// arguments of every step function; each device use reads a copy made
// right before it (the forward's and the backward's gathers each read
// their own), and the update writes the host
// shard itself: no master weights, nothing streams back.
// PARAMS-LABEL: func.func @micro_step(
// PARAMS-SAME: %[[W:[a-z0-9]+]]: tensor<22xf32> {dsc.host, {{[^}]*}}dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<param, "h.1.w">}
// PARAMS: %[[FW:.*]] = dsc.to_device %[[W]] {group = 2 : i64} : (tensor<22xf32>) -> tensor<22xf32>
// PARAMS-NEXT: dsc.all_gather %[[FW]]
// PARAMS: %[[BW:.*]] = dsc.to_device %[[W]] {group = 2 : i64}
// PARAMS-NEXT: dsc.all_gather %[[BW]]
// PARAMS-LABEL: func.func @apply_step(
// PARAMS-SAME: %[[AW:[a-z0-9]+]]: tensor<22xf32> {dsc.host, {{[^}]*}}#dsc.state<param, "h.1.w">}
// PARAMS-NOT: #dsc.state<master
// PARAMS-SAME: -> (tensor<22xf32> {dsc.host, {{[^}]*}}#dsc.state<param, "h.1.w">}
// PARAMS: %[[NEW:[a-z_0-9]+]], %{{.*}}, %{{.*}} = dsc.adam %[[AW]], {{.*}}dsc.host
// PARAMS-NOT: dsc.to_device
// PARAMS: return %[[NEW]],
// PARAMS-LABEL: func.func @eval_step(
// PARAMS: dsc.to_device

// fp16 through the pipeline: the overflow flag (all-reduced max of the
// shards' flags) reaches the host update as its skip operand; the loss
// scaler's state stays on the device.
// FP16-LABEL: func.func @apply_step(
// FP16-SAME: #dsc.state<loss_scaler, "state">}
// FP16: %[[ANY:.*]] = dsc.all_reduce %{{.*}} {op = #dsc<reduce max>}
// FP16: %[[HANY:.*]] = dsc.to_host %[[ANY]]
// FP16: dsc.adam {{.*}}, %[[HANY]] {{{.*}}dsc.host{{.*}}}
// FP16: dsc.update_loss_scale

// The host buffers have their own arena, outside the device's peak: the
// master shards (22 + 3 floats), Adam's two moments (2 x 25 floats) and
// the copies (gradient shards, scalars), each at 64-byte alignment.
// MEMORY: optimizer state{{ +}}0{{ +}}0.00
// MEMORY: host arena (ZeRO-Offload, outside the peak above):
// MEMORY-NEXT: master weights (fp32){{ +}}100
// MEMORY-NEXT: optimizer state{{ +}}200
// MEMORY-NEXT: workspace
// MEMORY-NEXT: host peak

module attributes {dsc.mesh = #dsc.mesh<data = 3, tensor = 1, pipeline = 1>} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"h.1.w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"lm.b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
