// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw weight-decay=0.01 grad-clip=1.0" -dsc-zero=stage=1 | FileCheck %s --check-prefix=STAGE1
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=sgd grad-accum=2" -dsc-zero=stage=2 | FileCheck %s --check-prefix=STAGE2
// RUN: dsc-opt %s --dsc-train-pipeline="build-train-step={fp16=true} zero={stage=1}" | FileCheck %s --check-prefix=FP16
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=lamb" -dsc-zero 2>&1 | FileCheck %s --check-prefix=LAMB
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" -dsc-zero=stage=3 | FileCheck %s --check-prefix=STAGE3
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 persistence-threshold=10" | FileCheck %s --check-prefix=PERSIST
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=4 2>&1 | FileCheck %s --check-prefix=STAGE4
// RUN: not dsc-opt %s -dsc-zero 2>&1 | FileCheck %s --check-prefix=NOSTEP
// LAMB: error: 'dsc.lamb' op dsc-zero: LAMB's trust ratio needs whole parameters, which ZeRO shards
// STAGE4: error: dsc-zero: stage must be 1, 2 or 3, got 4
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=3 persistence-threshold=-1" 2>&1 | FileCheck %s --check-prefix=THRESHOLD
// THRESHOLD: error: dsc-zero: persistence-threshold must be >= 0, got -1
// Run twice it sharded the shards, and the step trained wrong numbers.
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step -dsc-zero=stage=2 -dsc-zero=stage=2 2>&1 | FileCheck %s --check-prefix=TWICE
// TWICE: error: dsc-zero: the step is sharded already (stage 2); run -dsc-zero once
// ZeRO++ qwZ: each shard is quantized (256-element blocks: shards are
// whole blocks), codes and scales gathered, the parameter dequantized.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 quantized-weights=true" | FileCheck %s --check-prefix=QWZ
// QWZ-LABEL: func.func @micro_step(%arg0: tensor<256xf32> {{{.*}}dsc.shard_of = array<i64: 8, 8>
// QWZ: %[[CODES:.*]], %[[SCALES:.*]] = dsc.quantize_int8 %arg0 {block_size = 256 : i64} : (tensor<256xf32>) -> (tensor<256xi8>, tensor<1xf32>)
// QWZ-NEXT: %[[C:.*]] = dsc.all_gather %[[CODES]] : (tensor<256xi8>) -> tensor<768xi8>
// QWZ-NEXT: %[[S:.*]] = dsc.all_gather %[[SCALES]] : (tensor<1xf32>) -> tensor<3xf32>
// QWZ-NEXT: %[[W:.*]] = dsc.dequantize_int8 %[[C]], %[[S]] {block_size = 256 : i64} : (tensor<768xi8>, tensor<3xf32>) -> tensor<768xf32>
// QWZ-NEXT: dsc.flat_resize %[[W]] : (tensor<768xf32>) -> tensor<8x8xf32>
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=2 quantized-weights=true" 2>&1 | FileCheck %s --check-prefix=QWZ2
// QWZ2: error: dsc-zero: quantized-weights (ZeRO++ qwZ) quantizes stage 3's parameter gathers; stage is 2
// NOSTEP: error: dsc-zero: no @micro_step and @apply_step; run -dsc-build-train-step first
// ZeRO++ qgZ: each micro-step's matrix gradient is quantized to int4
// (32-element blocks: shards are whole blocks), codes and scales are
// exchanged by all-to-all, and each rank dequantizes and averages the chunks
// it holds; vectors (the bias) keep their exact reduce-scatter.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 quantized-gradients=true" | FileCheck %s --check-prefix=QGZ
// QGZ-LABEL: func.func @micro_step(%arg0: tensor<32xf32>
// QGZ: %[[G:.*]] = dsc.flat_resize %{{.*}} : (tensor<8x8xf32>) -> tensor<96xf32>
// QGZ-NEXT: %[[CODES:.*]], %[[SCALES:.*]] = dsc.quantize_int4 %[[G]] {block_size = 32 : i64} : (tensor<96xf32>) -> (tensor<48xui8>, tensor<3xf32>)
// QGZ-NEXT: %[[C:.*]] = dsc.all_to_all %[[CODES]] : (tensor<48xui8>) -> tensor<48xui8>
// QGZ-NEXT: %[[S:.*]] = dsc.all_to_all %[[SCALES]] : (tensor<3xf32>) -> tensor<3xf32>
// QGZ-NEXT: %[[MINE:.*]] = dsc.dequantize_reduce_int4 %[[C]], %[[S]] {block_size = 32 : i64} : (tensor<48xui8>, tensor<3xf32>) -> tensor<32xf32>
// QGZ-NEXT: dsc.add %arg2, %[[MINE]] : (tensor<32xf32>, tensor<32xf32>) -> tensor<32xf32>
// QGZ: dsc.flat_resize %{{.*}} : (tensor<8xf32>) -> tensor<96xf32>
// QGZ-NEXT: dsc.reduce_scatter %{{.*}} : (tensor<96xf32>) -> tensor<32xf32>
// QGZ-LABEL: func.func @apply_step(
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=2 quantized-gradients=true" 2>&1 | FileCheck %s --check-prefix=QGZ2
// QGZ2: error: dsc-zero: quantized-gradients (ZeRO++ qgZ) quantizes stage 3's gradient reduce-scatters; stage is 2
// 8-bit Adam: every shard is a whole number of its 256-element blocks (w:
// 64 elements over 3 ranks, 256 each, the last two shards all padding),
// so each rank's one block scale per moment is the whole tensor's block.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw8bit min-8bit-size=64" -dsc-zero=stage=2 | FileCheck %s --check-prefix=ADAM8
// ADAM8-LABEL: func.func @micro_step(
// ADAM8: dsc.flat_resize %{{.*}} : (tensor<8x8xf32>) -> tensor<768xf32>
// ADAM8-NEXT: dsc.reduce_scatter %{{.*}} : (tensor<768xf32>) -> tensor<256xf32>
// ADAM8-LABEL: func.func @apply_step(
// ADAM8-SAME: %[[MW:[a-z0-9]+]]: tensor<256xui8> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg, "w">}
// ADAM8-SAME: %[[VW:[a-z0-9]+]]: tensor<256xui8> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg_sq, "w">}
// ADAM8-SAME: %[[AM:[a-z0-9]+]]: tensor<1xf32> {dsc.shard_of = array<i64: 1>, dsc.state = #dsc.state<exp_avg_absmax, "w">}
// ADAM8-SAME: %[[AV:[a-z0-9]+]]: tensor<1xf32> {dsc.shard_of = array<i64: 1>, dsc.state = #dsc.state<exp_avg_sq_absmax, "w">}
// ADAM8: %[[MINE:.*]] = dsc.shard %{{.*}} : (tensor<768xf32>) -> tensor<256xf32>
// ADAM8-NEXT: %[[P:[a-z_0-9]+]], %{{.*}} = dsc.adam_8bit %[[MINE]], %{{.*}}, %[[MW]], %[[VW]], %[[AM]], %[[AV]], {{.*}} -> (tensor<256xf32>, tensor<256xui8>, tensor<256xui8>, tensor<1xf32>, tensor<1xf32>)
// ADAM8-NEXT: dsc.all_gather %[[P]] : (tensor<256xf32>) -> tensor<768xf32>
// b (8 elements) keeps 32-bit state: dsc.adam on a shard of the same size.
// ADAM8: dsc.adam %{{.*}} : (tensor<256xf32>, tensor<256xf32>, tensor<256xf32>, tensor<256xf32>,
// RUN: not dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adafactor" -dsc-zero 2>&1 | FileCheck %s --check-prefix=ADAFACTOR
// ADAFACTOR: error: 'dsc.adafactor' op dsc-zero: Adafactor's factored second moment and update RMS need whole parameters, which ZeRO shards

// Over 3 data-parallel ranks, w (64 elements) is padded to 66 and each rank
// owns 22; b (8) is padded to 9, 3 per rank.

// Stage 1: the optimizer state is sharded; gradients are reduce-scattered
// instead of all-reduced, the global norm combines the shards' norms, and
// the updated shards are gathered back into whole parameters.
// STAGE1-LABEL: func.func @apply_step(
// STAGE1-SAME: %[[W:[a-z0-9]+]]: tensor<8x8xf32> {{{[^}]*}}#dsc.state<param, "w">}
// STAGE1-SAME: %[[GW:[a-z0-9]+]]: tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// STAGE1-SAME: %[[GB:[a-z0-9]+]]: tensor<8xf32> {dsc.state = #dsc.state<grad, "b">}
// STAGE1-SAME: %[[MW:[a-z0-9]+]]: tensor<22xf32> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg, "w">}
// STAGE1-SAME: tensor<3xf32> {dsc.shard_of = array<i64: 8>, dsc.state = #dsc.state<exp_avg, "b">}
// STAGE1-SAME: %[[VW:[a-z0-9]+]]: tensor<22xf32> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<exp_avg_sq, "w">}
// STAGE1-SAME: -> (tensor<8x8xf32> {{{[^}]*}}}, tensor<8xf32> {{{[^}]*}}}, tensor<22xf32> {dsc.state = #dsc.state<exp_avg, "w">}, tensor<3xf32> {{{[^}]*}}}, tensor<22xf32> {{{[^}]*}}}, tensor<3xf32> {{{[^}]*}}}, tensor<8x8xf32> {dsc.state = #dsc.state<grad, "w">}
// STAGE1: %[[PGW:.*]] = dsc.flat_resize %[[GW]] : (tensor<8x8xf32>) -> tensor<66xf32>
// STAGE1: %[[SGW:.*]] = dsc.reduce_scatter %[[PGW]] : (tensor<66xf32>) -> tensor<22xf32>
// STAGE1: %[[PGB:.*]] = dsc.flat_resize %[[GB]] : (tensor<8xf32>) -> tensor<9xf32>
// STAGE1: %[[SGB:.*]] = dsc.reduce_scatter %[[PGB]] : (tensor<9xf32>) -> tensor<3xf32>
// STAGE1-NOT: dsc.all_reduce
// STAGE1: %[[LOCAL:.*]] = dsc.global_norm %[[SGW]], %[[SGB]]
// STAGE1: %[[NORM:.*]] = dsc.norm_all_reduce %[[LOCAL]]
// STAGE1: dsc.clip_coefficient %[[NORM]]
// STAGE1: %[[PW:.*]] = dsc.flat_resize %[[W]] : (tensor<8x8xf32>) -> tensor<66xf32>
// STAGE1: %[[MINE:.*]] = dsc.shard %[[PW]] : (tensor<66xf32>) -> tensor<22xf32>
// STAGE1: %[[NEWW:.*]], %[[NEWM:.*]], %[[NEWV:.*]] = dsc.adam %[[MINE]], %[[SGW]], %[[MW]], %[[VW]], {{.*}}weight_decay = 1.000000e-02 : f64}{{.*}} -> (tensor<22xf32>, tensor<22xf32>, tensor<22xf32>)
// STAGE1: %[[ALL:.*]] = dsc.all_gather %[[NEWW]] : (tensor<22xf32>) -> tensor<66xf32>
// STAGE1: %[[WHOLE:.*]] = dsc.flat_resize %[[ALL]] : (tensor<66xf32>) -> tensor<8x8xf32>
// STAGE1: dsc.adam {{.*}} -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
// STAGE1: return %[[WHOLE]], %{{.*}}, %[[NEWM]]

// Stage 2: each micro-batch's gradient is reduce-scattered into the rank's
// shard of the accumulator; @apply_step takes the shards as they are.
// STAGE2-LABEL: func.func @micro_step(
// STAGE2-SAME: %[[ACC:[a-z0-9]+]]: tensor<22xf32> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<grad, "w">}
// STAGE2-SAME: -> (tensor<f32> {{{[^}]*}}}, tensor<22xf32> {dsc.state = #dsc.state<grad, "w">}, tensor<3xf32> {dsc.state = #dsc.state<grad, "b">})
// STAGE2: %[[PG:.*]] = dsc.flat_resize %{{.*}} : (tensor<8x8xf32>) -> tensor<66xf32>
// STAGE2: %[[PART:.*]] = dsc.reduce_scatter %[[PG]] : (tensor<66xf32>) -> tensor<22xf32>
// STAGE2: %[[SUM:.*]] = dsc.add %[[ACC]], %[[PART]] : (tensor<22xf32>, tensor<22xf32>) -> tensor<22xf32>
// STAGE2: return %{{.*}}, %[[SUM]],
// STAGE2-LABEL: func.func @apply_step(
// STAGE2-SAME: %[[G:[a-z0-9]+]]: tensor<22xf32> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<grad, "w">}
// STAGE2-NOT: dsc.reduce_scatter
// STAGE2-NOT: dsc.all_reduce
// STAGE2: dsc.global_norm %[[G]],
// STAGE2: dsc.sgd %{{.*}}, %[[G]],
// STAGE2: %[[ZERO:.*]] = dsc.fill {value = 0.000000e+00 : f64} : () -> tensor<22xf32>
// STAGE2: return {{.*}}, %[[ZERO]],

// Stage 3: parameters are shards too. @micro_step gathers w before its
// first forward use and again before the backward reads it; the optimizer
// updates the shards, and nothing is gathered after it.
// STAGE3-LABEL: func.func @micro_step(
// STAGE3-SAME: %[[W:[a-z0-9]+]]: tensor<22xf32> {dsc.param = {{[^}]*}}, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<param, "w">}
// STAGE3: %[[ALLF:.*]] = dsc.all_gather %[[W]] : (tensor<22xf32>) -> tensor<66xf32>
// STAGE3: %[[WF:.*]] = dsc.flat_resize %[[ALLF]] : (tensor<66xf32>) -> tensor<8x8xf32>
// STAGE3: dsc.embedding %[[WF]],
// STAGE3: dsc.linear %{{.*}}, %[[WF]],
// STAGE3: %[[ALLB:.*]] = dsc.all_gather %[[W]] : (tensor<22xf32>) -> tensor<66xf32>
// STAGE3: %[[WB:.*]] = dsc.flat_resize %[[ALLB]] : (tensor<66xf32>) -> tensor<8x8xf32>
// STAGE3: dsc.linear_grad_input %{{.*}}, %[[WB]] {dsc.grad
// STAGE3-LABEL: func.func @apply_step(
// STAGE3-SAME: %[[P:[a-z0-9]+]]: tensor<22xf32> {dsc.param = {{[^}]*}}, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<param, "w">}
// STAGE3-NOT: dsc.all_gather
// STAGE3: %[[NEW:[a-z_0-9]+]], {{.*}} = dsc.adam %[[P]],
// STAGE3-NOT: dsc.all_gather
// STAGE3: return %[[NEW]],
// STAGE3-LABEL: func.func @eval_step(
// STAGE3: dsc.all_gather
// STAGE3: dsc.all_gather
// STAGE3-NOT: dsc.all_gather

// Stage 3 with persistence-threshold 10: the bias (8 elements) stays whole,
// is never gathered for the forward or backward, and its updated shard is
// gathered after the update as in stage 2; w (64) is partitioned.
// PERSIST-LABEL: func.func @micro_step(
// PERSIST-SAME: tensor<22xf32> {dsc.param = {{[^}]*}}, dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<param, "w">}
// PERSIST-SAME: %[[B:[a-z0-9]+]]: tensor<8xf32> {dsc.param = {{[^}]*}}, dsc.state = #dsc.state<param, "b">}
// PERSIST-NOT: dsc.all_gather %[[B]]
// PERSIST-LABEL: func.func @apply_step(
// PERSIST: dsc.adam %{{.*}} : (tensor<22xf32>,
// PERSIST: %[[BNEW:[a-z_0-9]+]], {{.*}} = dsc.adam %{{.*}} : (tensor<3xf32>,
// PERSIST: %[[BALL:.*]] = dsc.all_gather %[[BNEW]] : (tensor<3xf32>) -> tensor<9xf32>
// PERSIST: dsc.flat_resize %[[BALL]] : (tensor<9xf32>) -> tensor<8xf32>
// PERSIST-LABEL: func.func @eval_step(
// PERSIST: dsc.all_gather
// PERSIST-NOT: dsc.all_gather

// fp16: a step is skipped on every rank when any rank's shard overflowed.
// FP16-LABEL: func.func @apply_step(
// FP16: %[[LOCAL:.*]] = dsc.check_finite %{{.*}}, %{{.*}} : (tensor<22xf32>, tensor<3xf32>) -> tensor<f32>
// FP16: %[[ANY:.*]] = dsc.all_reduce %[[LOCAL]] {op = #dsc<reduce max>}
// FP16: dsc.unscale_clip
// FP16: dsc.adam {{.*}}, %[[ANY]] {

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
