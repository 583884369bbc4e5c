// --dsc-train-pipeline expands to the pass list dsc-run compiles with
// (lib/Transforms/TrainPipeline.cpp); --dump-pass-pipeline shows it. A
// pass with options runs when its option is given, with that text as the
// pass's own options.
// RUN: dsc-opt %s --dsc-train-pipeline --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAIN
// RUN: dsc-opt %s "--dsc-train-pipeline=fuse-qkv=true fuse-bias-gelu=true fuse-bias-dropout-add=true fuse-residual-layer-norm=true fuse-attention=true fuse-softmax-dropout=true build-train-step={optimizer=lamb return-logits=false schedule=WarmupCosineLR warmup-type=linear total-num-steps=50 fp16=true} invertible=true remat={policy=deepspeed gelu=true per-layer=true} mixed-precision={dtype=f16}" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALL
// RUN: dsc-opt %s "--dsc-train-pipeline=remat={policy=budget budget-bytes=4096 recompute-cheap=false} mixed-precision={dtype=bf16}" --dump-pass-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=BUDGET
// Choices are enum options: the pass's option parser rejects a bad one, and
// the pipeline names the option it came in.
// RUN: not dsc-opt %s --dsc-train-pipeline=remat={policy=all} 2>&1 | FileCheck %s --check-prefix=BADREMAT
// RUN: not dsc-opt %s --dsc-train-pipeline=mixed-precision={dtype=fp8} 2>&1 | FileCheck %s --check-prefix=BADDTYPE
// RUN: not dsc-opt %s --dsc-train-pipeline=zero={stages=2} 2>&1 | FileCheck %s --check-prefix=BADKEY
// A given pass runs with what it was given and checks it.
// RUN: not dsc-opt %s --dsc-train-pipeline=zero={stage=-1} 2>&1 | FileCheck %s --check-prefix=NEGZERO
// NEGZERO: error: dsc-zero: stage must be 1, 2 or 3, got -1
// RUN: not dsc-opt %s "--dsc-train-pipeline=lora={rank=-1 target-modules=c_attn}" 2>&1 | FileCheck %s --check-prefix=NEGLORA
// NEGLORA: error: dsc-lora: rank (r) must be >= 1, got -1
// RUN: not dsc-opt %s "--dsc-train-pipeline=bucket-collectives={reduce-bucket-elements=-5 allgather-bucket-elements=0}" 2>&1 | FileCheck %s --check-prefix=NEGBUCKET
// NEGBUCKET: error: dsc-bucket-collectives: bucket sizes must be >= 0, got -5 and 0

// PLAIN: Pass Manager with 6 passes:
// PLAIN-NEXT: builtin.module(dsc-tensor-parallel,dsc-expert-parallel,dsc-pipeline-stage{{{.*}}},dsc-autodiff{function=forward},dsc-build-train-step{{{.*}} optimizer=adamw relative-step=true return-logits=false scale-parameter=true schedule=constant {{.*}}},dsc-split-stage-step)

// ALL: builtin.module(dsc-tensor-parallel,dsc-expert-parallel,dsc-pipeline-stage{{{.*}}},dsc-fuse-qkv,dsc-fuse-bias-gelu,dsc-fuse-bias-dropout-add,dsc-fuse-residual-layer-norm,dsc-fuse-attention,dsc-fuse-softmax-dropout,dsc-autodiff{function=forward},dsc-build-train-step{{{.*}} fp16=true {{.*}} optimizer=lamb relative-step=true return-logits=false scale-parameter=true schedule=WarmupCosineLR total-num-steps=50 {{.*}} warmup-type=linear {{.*}}},dsc-invertible,dsc-remat{attn-dropout=false budget-bytes=0 function=micro_step gelu=true layer-interval=1 per-layer=true policy=deepspeed recompute-cheap=true},dsc-mixed-precision{dtype=f16},dsc-split-stage-step)

// BUDGET: builtin.module(dsc-tensor-parallel,dsc-expert-parallel,dsc-pipeline-stage{{{.*}}},dsc-autodiff{function=forward},dsc-build-train-step{{{.*}}},dsc-remat{attn-dropout=false budget-bytes=4096 function=micro_step gelu=false layer-interval=1 per-layer=false policy=budget recompute-cheap=false},dsc-mixed-precision{dtype=bf16},dsc-split-stage-step)

// BADREMAT: for the --policy option: Cannot find option named 'all'!
// BADREMAT: error: --dsc-train-pipeline remat={policy=all}: not accepted by the pass
// BADDTYPE: for the --dtype option: Cannot find option named 'fp8'!
// BADKEY: error: --dsc-train-pipeline zero={stages=2}: <Pass-Options-Parser>: no such option stages

func.func @forward(%w: tensor<8x8xf32> {dsc.param = #dsc.param<"w", normal, 0.02 : f64>},
                   %b: tensor<8xf32> {dsc.param = #dsc.param<"b", zeros, 0.0 : f64>},
                   %x: tensor<2x4xi32>, %y: tensor<2x4xi32>) -> (tensor<f32>, tensor<2x4x8xf32>) {
  %e = dsc.embedding %w, %x : (tensor<8x8xf32>, tensor<2x4xi32>) -> tensor<2x4x8xf32>
  %d = dsc.dropout %e {rate = 0.1 : f64, stream = 1 : i64} : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %l = dsc.linear %d, %w, %b {transpose_w = true} : (tensor<2x4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %loss = dsc.cross_entropy %l, %y : (tensor<2x4x8xf32>, tensor<2x4xi32>) -> tensor<f32>
  return %loss, %l : tensor<f32>, tensor<2x4x8xf32>
}
