// -dsc-zero's splits of the data axis (dsc.mesh_data_inner = 2 of 4 data
// ranks): hybrid sharding and ZeRO++'s hpZ.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw grad-accum=2" "-dsc-zero=stage=3 hybrid=true" | FileCheck %s --check-prefix=HYBRID
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 hpz=true" | FileCheck %s --check-prefix=HPZ
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=2 hpz=true" 2>&1 | FileCheck %s --check-prefix=HPZ2
// HPZ2: error: dsc-zero: hpz (ZeRO++ hpZ) partitions stage 3's parameters a second time; stage is 2
// RUN: not dsc-opt %s -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=3 hybrid=true hpz=true" 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: error: dsc-zero: hybrid and hpz both use the data_inner groups (as shard groups, as hpZ's secondary partitions); choose one
// RUN: %python -c "import sys; sys.stdout.write(open(sys.argv[1]).read().replace(', dsc.mesh_data_inner = 2 : i64', ''))" %s > %t.nosplit.mlir
// RUN: not dsc-opt %t.nosplit.mlir -dsc-autodiff -dsc-build-train-step "-dsc-zero=stage=3 hybrid=true" 2>&1 | FileCheck %s --check-prefix=NOSPLIT
// NOSPLIT: error: dsc-zero: hybrid needs the module's dsc.mesh_data_inner (the ranks of a data_inner group)

// qgZ over 2 nodes of 2 (the data_inner groups): w's gradient (64
// elements, shards of 32) is regrouped by the rank within the node that
// reduces it ([l][n] from [n][l]: split into the nodes' halves, packed in
// chunks of 2), exchanged in int4 within the node and reduced there, then
// requantized, exchanged across the nodes and reduced into the shard.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 quantized-gradients=true" | FileCheck %s --check-prefix=QGZ
// QGZ-LABEL: func.func @micro_step(
// QGZ: %[[G:.*]] = dsc.flat_resize %{{.*}} : (tensor<8x8xf32>) -> tensor<128xf32>
// QGZ-NEXT: %[[N:.*]]:2 = dsc.split %[[G]] {axis = 0 : i64} : (tensor<128xf32>) -> (tensor<64xf32>, tensor<64xf32>)
// QGZ-NEXT: %[[L:.*]] = dsc.pack %[[N]]#0, %[[N]]#1 {chunks = 2 : i64} : (tensor<64xf32>, tensor<64xf32>) -> tensor<128xf32>
// QGZ-NEXT: %[[C1:.*]], %[[S1:.*]] = dsc.quantize_int4 %[[L]] {block_size = 32 : i64} : (tensor<128xf32>) -> (tensor<64xui8>, tensor<4xf32>)
// QGZ-NEXT: %[[X1:.*]] = dsc.all_to_all %[[C1]] {axis = #dsc<axis data_inner>} : (tensor<64xui8>) -> tensor<64xui8>
// QGZ-NEXT: %[[Y1:.*]] = dsc.all_to_all %[[S1]] {axis = #dsc<axis data_inner>} : (tensor<4xf32>) -> tensor<4xf32>
// QGZ-NEXT: %[[P:.*]] = dsc.dequantize_reduce_int4 %[[X1]], %[[Y1]] {block_size = 32 : i64} : (tensor<64xui8>, tensor<4xf32>) -> tensor<64xf32>
// QGZ-NEXT: %[[C2:.*]], %[[S2:.*]] = dsc.quantize_int4 %[[P]] {block_size = 32 : i64} : (tensor<64xf32>) -> (tensor<32xui8>, tensor<2xf32>)
// QGZ-NEXT: %[[X2:.*]] = dsc.all_to_all %[[C2]] {axis = #dsc<axis data_outer>} : (tensor<32xui8>) -> tensor<32xui8>
// QGZ-NEXT: %[[Y2:.*]] = dsc.all_to_all %[[S2]] {axis = #dsc<axis data_outer>} : (tensor<2xf32>) -> tensor<2xf32>
// QGZ-NEXT: dsc.dequantize_reduce_int4 %[[X2]], %[[Y2]] {block_size = 32 : i64} : (tensor<32xui8>, tensor<2xf32>) -> tensor<32xf32>
// With hybrid sharding the shard group is one node: one hop within it.
// RUN: dsc-opt %s -dsc-autodiff "-dsc-build-train-step=optimizer=adamw" "-dsc-zero=stage=3 hybrid=true quantized-gradients=true" | FileCheck %s --check-prefix=QGZHYBRID
// QGZHYBRID-LABEL: func.func @micro_step(
// QGZHYBRID-NOT: data_outer
// QGZHYBRID: dsc.all_to_all %{{.*}} {axis = #dsc<axis data_inner>} : (tensor<32xui8>) -> tensor<32xui8>
// QGZHYBRID-LABEL: func.func @apply_step(

// Hybrid: ZeRO-3 within groups of 2 (w: 64 elements, 32 per rank; b: 8,
// 4 per rank), the accumulated shards all-reduced across the 2 groups once
// per step, ahead of the norm (over one group's shards).
// HYBRID: module attributes {{{.*}}dsc.zero_axis = "data_inner"
// HYBRID-LABEL: func.func @micro_step(%arg0: tensor<32xf32> {{{.*}}dsc.shard_of = array<i64: 8, 8>
// HYBRID: %[[W:.*]] = dsc.all_gather %arg0 {axis = #dsc<axis data_inner>} : (tensor<32xf32>) -> tensor<64xf32>
// HYBRID: dsc.reduce_scatter %{{.*}} {axis = #dsc<axis data_inner>} : (tensor<64xf32>) -> tensor<32xf32>
// HYBRID-NOT: dsc.all_reduce
// HYBRID-LABEL: func.func @apply_step(
// HYBRID-SAME: %[[GW:[a-z0-9]+]]: tensor<32xf32> {dsc.shard_of = array<i64: 8, 8>, dsc.state = #dsc.state<grad, "w">}
// HYBRID-SAME: %[[GB:[a-z0-9]+]]: tensor<4xf32> {dsc.shard_of = array<i64: 8>, dsc.state = #dsc.state<grad, "b">}
// HYBRID: %[[RW:.*]] = dsc.all_reduce %[[GW]] {axis = #dsc<axis data_outer>} : (tensor<32xf32>) -> tensor<32xf32>
// HYBRID-NEXT: %[[RB:.*]] = dsc.all_reduce %[[GB]] {axis = #dsc<axis data_outer>} : (tensor<4xf32>) -> tensor<4xf32>
// HYBRID-NEXT: %[[N:.*]] = dsc.global_norm %[[RW]], %[[RB]]
// HYBRID-NEXT: dsc.norm_all_reduce %[[N]] {axis = #dsc<axis data_inner>}
// HYBRID: dsc.adam %{{.*}}, %[[RW]], {{.*}} : (tensor<32xf32>,
// HYBRID-LABEL: func.func @eval_step(
// HYBRID: dsc.all_gather %{{.*}} {axis = #dsc<axis data_inner>} : (tensor<32xf32>) -> tensor<64xf32>

// hpZ: the shards stay over the 4 data ranks (w: 16 per rank); the
// forward's gather keeps this rank's half of w (the data_inner shard), and
// the backward gathers w from those halves within the group. b is not read
// by the backward: no secondary shard.
// HPZ-NOT: dsc.zero_axis
// HPZ-LABEL: func.func @micro_step(%arg0: tensor<16xf32> {{{.*}}dsc.shard_of = array<i64: 8, 8>
// HPZ: %[[ALL:.*]] = dsc.all_gather %arg0 : (tensor<16xf32>) -> tensor<64xf32>
// HPZ-NEXT: %[[W:.*]] = dsc.flat_resize %[[ALL]] : (tensor<64xf32>) -> tensor<8x8xf32>
// HPZ-NEXT: %[[FLAT:.*]] = dsc.flat_resize %[[W]] : (tensor<8x8xf32>) -> tensor<64xf32>
// HPZ-NEXT: %[[MINE:.*]] = dsc.shard %[[FLAT]] {axis = #dsc<axis data_inner>} : (tensor<64xf32>) -> tensor<32xf32>
// HPZ: dsc.embedding %[[W]]
// HPZ: dsc.all_gather %arg1 : (tensor<2xf32>) -> tensor<8xf32>
// HPZ-NOT: dsc.shard
// HPZ: dsc.cross_entropy_grad
// HPZ-NEXT: %[[BACK:.*]] = dsc.all_gather %[[MINE]] {axis = #dsc<axis data_inner>} : (tensor<32xf32>) -> tensor<64xf32>
// HPZ-NEXT: %[[W2:.*]] = dsc.flat_resize %[[BACK]] : (tensor<64xf32>) -> tensor<8x8xf32>
// HPZ-NEXT: dsc.linear_grad_input %{{.*}}, %[[W2]]
// HPZ: dsc.reduce_scatter %{{.*}} : (tensor<64xf32>) -> tensor<16xf32>
// HPZ-LABEL: func.func @apply_step(
// HPZ-NOT: dsc.all_reduce
// HPZ: dsc.norm_all_reduce
// HPZ-LABEL: func.func @eval_step(
// HPZ: dsc.all_gather %arg0 : (tensor<16xf32>) -> tensor<64xf32>
// HPZ-NOT: dsc.shard

module attributes {dsc.mesh = #dsc.mesh<data = 4, tensor = 1, pipeline = 1>, dsc.mesh_data_inner = 2 : i64} {
func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %e, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
}
