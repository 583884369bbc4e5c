// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" -dsc-autodiff "-dsc-build-train-step=grad-accum=2" -dsc-zero=stage=2 -dsc-bucket-collectives | FileCheck %s
// RUN: dsc-opt %s "-dsc-pipeline-stage=stage=1 chunks=2" -dsc-autodiff "-dsc-build-train-step=grad-accum=2" -dsc-zero=stage=2 -dsc-bucket-collectives -dsc-split-stage-step | FileCheck %s --check-prefix=SPLIT

// An interleaved stage's gradient buckets hold one model chunk each: the
// schedule runs the two chunks' backwards at different times, so a bucket
// of both could not be cut apart. Rank 1 of data 2 x pipeline 2 holds
// layer 0 (chunk 0) and the head (chunk 1, with the tied wte.weight and
// ln_f); ZeRO-2 reduce-scatters each micro-batch's gradients in
// @micro_step, in program order: wte.weight (chunk 1), layer 0's three
// (chunk 0, one bucket), ln_f's two (chunk 1, one bucket).
// CHECK-LABEL: func.func @micro_step(
// CHECK: dsc.reduce_scatter %{{.*}} : (tensor<320xf32>) -> tensor<160xf32>
// CHECK: dsc.pack %{{.*}}, %{{.*}}, %{{.*}} {chunks = 2 : i64} : (tensor<8xf32>, tensor<8xf32>, tensor<64xf32>) -> tensor<80xf32>
// CHECK-NEXT: dsc.reduce_scatter
// CHECK-NEXT: dsc.unpack
// CHECK: dsc.pack %{{.*}}, %{{.*}} {chunks = 2 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>
// CHECK-LABEL: func.func @apply_step(

// Each chunk's backward then holds its own buckets.
// SPLIT-LABEL: func.func @micro_step(
// SPLIT: dsc.pack %{{.*}} : (tensor<8xf32>, tensor<8xf32>, tensor<64xf32>) -> tensor<80xf32>
// SPLIT-NOT: dsc.pack
// SPLIT-LABEL: func.func @micro_step.1(
// SPLIT: dsc.reduce_scatter %{{.*}} : (tensor<320xf32>) -> tensor<160xf32>
// SPLIT: dsc.pack %{{.*}} : (tensor<8xf32>, tensor<8xf32>) -> tensor<16xf32>

module attributes {dsc.mesh = #dsc.mesh<data = 2, tensor = 1, pipeline = 2>} {
  func.func @forward(
      %wte: tensor<40x8xf32> {dsc.param = #dsc.param<"wte.weight", normal, 2.000000e-02 : f64>},
      %wpe: tensor<4x8xf32> {dsc.param = #dsc.param<"wpe.weight", normal, 2.000000e-02 : f64>},
      %g0: tensor<8xf32> {dsc.param = #dsc.param<"h.0.ln.weight", ones, 0.000000e+00 : f64>},
      %b0: tensor<8xf32> {dsc.param = #dsc.param<"h.0.ln.bias", zeros, 0.000000e+00 : f64>},
      %w0: tensor<8x8xf32> {dsc.param = #dsc.param<"h.0.fc.weight", normal, 2.000000e-02 : f64>},
      %g1: tensor<8xf32> {dsc.param = #dsc.param<"h.1.ln.weight", ones, 0.000000e+00 : f64>},
      %b1: tensor<8xf32> {dsc.param = #dsc.param<"h.1.ln.bias", zeros, 0.000000e+00 : f64>},
      %w1: tensor<8x8xf32> {dsc.param = #dsc.param<"h.1.fc.weight", normal, 2.000000e-02 : f64>},
      %p1: tensor<4x8xf32> {dsc.param = #dsc.param<"h.1.pos.weight", normal, 2.000000e-02 : f64>},
      %gf: tensor<8xf32> {dsc.param = #dsc.param<"ln_f.weight", ones, 0.000000e+00 : f64>},
      %bf: tensor<8xf32> {dsc.param = #dsc.param<"ln_f.bias", zeros, 0.000000e+00 : f64>},
      %ids: tensor<2x4xi32>, %labels: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x40xf32>) {
    %tok = dsc.embedding %wte, %ids : (tensor<40x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
    %pos = dsc.iota : () -> tensor<4xi32>
    %pe = dsc.embedding %wpe, %pos : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
    %x0 = dsc.add %tok, %pe : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %n0 = dsc.layer_norm %x0, %g0, %b0 {dsc.layer = 0 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %f0 = dsc.linear %n0, %w0 {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %x1 = dsc.add %x0, %f0 {dsc.layer = 0 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %q1 = dsc.embedding %p1, %pos {dsc.layer = 1 : i64} : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
    %y1 = dsc.add %x1, %q1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
    %n1 = dsc.layer_norm %y1, %g1, %b1 {dsc.layer = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %f1 = dsc.linear %n1, %w1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<8x8xf32>) -> tensor<2x4x8xf32>
    %x2 = dsc.add %y1, %f1 {dsc.layer = 1 : i64} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
    %nf = dsc.layer_norm %x2, %gf, %bf {epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    %logits = dsc.linear %nf, %wte {transpose_w = true} : (tensor<2x4x8xf32>, tensor<40x8xf32>) -> tensor<2x4x40xf32>
    %loss = dsc.cross_entropy %logits, %labels : (tensor<2x4x40xf32>, tensor<2x4xi32>) -> tensor<f32>
    return %loss, %logits : tensor<f32>, tensor<2x4x40xf32>
  }
}
